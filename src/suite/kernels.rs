//! The kernels `teml bench` runs: the paper's ten and PolyBench's thirty, their variants'
//! files and the sizes they run at.

use super::*;

/// The ten kernels of the paper's Table 1.
pub const KERNELS: &[&str] =
    &["mm", "tmm", "bmm", "gconv", "mttkrp", "sddmm", "interp", "helm", "blur", "coars"];

/// The 30 kernels of PolyBench/C 4.2.1 (`examples/polybench/`).
pub const POLYBENCH: &[&str] = &[
    "2mm",
    "3mm",
    "adi",
    "atax",
    "bicg",
    "cholesky",
    "correlation",
    "covariance",
    "deriche",
    "doitgen",
    "durbin",
    "fdtd-2d",
    "floyd-warshall",
    "gemm",
    "gemver",
    "gesummv",
    "gramschmidt",
    "heat-3d",
    "jacobi-1d",
    "jacobi-2d",
    "lu",
    "ludcmp",
    "mvt",
    "nussinov",
    "seidel-2d",
    "symm",
    "syr2k",
    "syrk",
    "trisolv",
    "trmm",
];

/// The kernels of `teml bench --suite precision` (`examples/precision/`): mm and a 2-D
/// convolution in float, in bf16 summed in float and in u8 x i8 summed in i32 (the name's
/// suffix: [`precision_of`]), each bounded by the probe of the fastest instruction the host has
/// for its types ([`super::instructions::peak_for`]).
pub const PRECISION: &[&str] = &["mm_float", "mm_bf16", "mm_int8", "conv_float", "conv_bf16", "conv_int8"];

/// The sizes of the precision suite: mm at 2048^3 (the float, bf16 and int8 targets' size), the
/// convolution at its files' default (a ResNet-like 3x3 layer of 128 channels, batch 4).
pub const PRECISION_SIZES: &[(&str, &[(&str, i64)])] = &[
    ("mm_float", &[("N", 2048)]),
    ("mm_bf16", &[("N", 2048)]),
    ("mm_int8", &[("N", 2048)]),
    ("conv_float", &[("NB", 4), ("CO", 128), ("CI", 128), ("H", 28), ("KH", 3)]),
    ("conv_bf16", &[("NB", 4), ("CO", 128), ("CI", 128), ("H", 28), ("KH", 3)]),
    ("conv_int8", &[("NB", 4), ("CO", 128), ("CI", 128), ("H", 28), ("KH", 3)]),
];

/// The precision of a kernel of the precision suite, from its name's suffix (`None` for any
/// other kernel).
pub fn precision_of(k: &str) -> Option<Precision> {
    if !PRECISION.contains(&k) {
        return None;
    }
    match k.rsplit('_').next()? {
        "float" => Some(Precision::Float),
        "bf16" => Some(Precision::Bf16),
        "int8" => Some(Precision::Int8),
        _ => None,
    }
}

/// Which kernels `teml bench` runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Suite {
    /// The paper's Table 1 kernels ([`KERNELS`]).
    #[default]
    Paper,
    /// PolyBench/C 4.2.1 ([`POLYBENCH`]): the untransformed kernel, Polly on the same C, the
    /// Pluto-like path (`scripts/polybench/pluto/<k>.rhai`) and the tuned path
    /// (`scripts/polybench/tuned/<k>.teml`), at [`POLYBENCH_SIZES`].
    PolyBench,
    /// The precisions ([`PRECISION`]): the untransformed kernel and `teml auto`'s path of each,
    /// beside numpy (float), PyTorch (bf16, where installed) and the instruction probes.
    Precision,
}

impl Suite {
    /// Every suite, in the order `--suite` lists them.
    pub const ALL: [Suite; 3] = [Suite::Paper, Suite::PolyBench, Suite::Precision];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Suite::Paper => "paper",
            Suite::PolyBench => "polybench",
            Suite::Precision => "precision",
        }
    }

    /// The suite `--suite name` names.
    pub fn named(name: &str) -> Option<Suite> {
        Suite::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Its kernels, in the order they run.
    pub fn kernels(self) -> &'static [&'static str] {
        match self {
            Suite::Paper => KERNELS,
            Suite::PolyBench => POLYBENCH,
            Suite::Precision => PRECISION,
        }
    }

    /// Where a kernel's untransformed program is.
    pub(super) fn base(self, root: &Path, k: &str) -> PathBuf {
        match self {
            Suite::Paper => root.join("examples").join(format!("{k}.teml")),
            Suite::PolyBench => root.join("examples/polybench").join(format!("{k}.teml")),
            Suite::Precision => root.join("examples/precision").join(format!("{k}.teml")),
        }
    }

    /// The variant files of a kernel, in the order they are reported (see [`VARIANTS`]).
    pub(super) fn variants(self, root: &Path, k: &str) -> Vec<(&'static str, PathBuf)> {
        match self {
            Suite::Paper => VARIANTS
                .iter()
                .map(|(name, dir, suffix)| {
                    let f = if *dir == "examples" {
                        self.base(root, k)
                    } else {
                        root.join(dir).join(format!("{k}{suffix}.teml"))
                    };
                    (*name, f)
                })
                .collect(),
            Suite::PolyBench => vec![
                ("untransformed", self.base(root, k)),
                ("polly", self.base(root, k)),
                ("pluto", root.join("scripts/polybench/pluto").join(format!("{k}.rhai"))),
                ("tuned", root.join("scripts/polybench/tuned").join(format!("{k}.teml"))),
            ],
            Suite::Precision => vec![("untransformed", self.base(root, k))],
        }
    }

    /// The sizes of a kernel at the bench.
    pub(super) fn sizes(self, k: &str) -> BTreeMap<Name, i64> {
        let table = match self {
            Suite::Paper => SIZES,
            Suite::PolyBench => POLYBENCH_SIZES,
            Suite::Precision => PRECISION_SIZES,
        };
        table
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, d)| d.iter().map(|(n, v)| (Name::from(*n), *v)).collect())
            .unwrap_or_default()
    }
}

/// PolyBench's LARGE dataset, scaled where its sequential run would take more than a few
/// seconds on 2 cores (time steps cut first, then extents; the ratio against Polly and the
/// untransformed kernel is what the bench reports). gramschmidt runs with M >= N, where every
/// column it normalizes is defined (with M < N the last columns are rounding noise). lu and
/// ludcmp run at N=200: their LU factorization without pivoting, on the seeded random fill (not
/// PolyBench's well-conditioned matrix), loses accuracy with N, and from N=300 on the compiled
/// kernel (its multiply-adds fused) and the reference differ beyond the tolerance; durbin's
/// recursion likewise runs at N=120 (beyond, the seeded fill makes it diverge).
pub const POLYBENCH_SIZES: &[(&str, &[(&str, i64)])] = &[
    ("2mm", &[("NI", 800), ("NJ", 900), ("NK", 1100), ("NL", 1200)]),
    ("3mm", &[("NI", 800), ("NJ", 900), ("NK", 1000), ("NL", 1100), ("NM", 1200)]),
    ("adi", &[("TSTEPS", 100), ("N", 1000)]),
    ("atax", &[("M", 1900), ("N", 2100)]),
    ("bicg", &[("M", 1900), ("N", 2100)]),
    ("cholesky", &[("N", 1200)]),
    ("correlation", &[("M", 1200), ("N", 1400)]),
    ("covariance", &[("M", 1200), ("N", 1400)]),
    ("deriche", &[("W", 4096), ("H", 2160)]),
    ("doitgen", &[("NQ", 140), ("NR", 150), ("NP", 160)]),
    ("durbin", &[("N", 120)]),
    ("fdtd-2d", &[("TMAX", 100), ("NX", 1000), ("NY", 1200)]),
    ("floyd-warshall", &[("N", 1000)]),
    ("gemm", &[("NI", 1000), ("NJ", 1100), ("NK", 1200)]),
    ("gemver", &[("N", 2000)]),
    ("gesummv", &[("N", 1300)]),
    ("gramschmidt", &[("M", 1200), ("N", 1000)]),
    ("heat-3d", &[("TSTEPS", 50), ("N", 120)]),
    ("jacobi-1d", &[("TSTEPS", 500), ("N", 2000)]),
    ("jacobi-2d", &[("TSTEPS", 100), ("N", 1300)]),
    ("lu", &[("N", 200)]),
    ("ludcmp", &[("N", 200)]),
    ("mvt", &[("N", 2000)]),
    ("nussinov", &[("N", 1000)]),
    ("seidel-2d", &[("TSTEPS", 20), ("N", 2000)]),
    ("symm", &[("M", 1000), ("N", 1200)]),
    ("syr2k", &[("M", 1000), ("N", 1200)]),
    ("syrk", &[("M", 1000), ("N", 1200)]),
    ("trisolv", &[("N", 2000)]),
    ("trmm", &[("M", 1000), ("N", 1200)]),
];

/// Where the variants of a kernel come from (folder, and what follows the kernel's name in the
/// file's name), in the order they are reported: the untransformed program first (the
/// baseline), then the same untransformed C through LLVM Polly, then the paths; "lifted" is the
/// tuned path of the kernel's algebraic rewrite (`lift`, docs/algebra.md), where it has one
/// (`scripts/tuned/mttkrp_lifted.teml`): fewer operations than the expression as written.
pub const VARIANTS: &[(&str, &str, &str)] = &[
    ("untransformed", "examples", ""),
    ("polly", "examples", ""),
    ("pluto", "scripts/pluto", ""),
    ("paper", "scripts/paper", ""),
    ("best", "scripts/best", ""),
    ("tuned", "scripts/tuned", ""),
    ("lifted", "scripts/tuned", "_lifted"),
];

/// The sizes `teml bench` runs at: the paper's where two cores run them in seconds (mm and
/// mttkrp as in the anchors, interp and helm as in the bench issue), otherwise scaled so that
/// the sequential baseline takes some 0.1-1 s on a 2-core machine. blur and coars are single
/// streaming passes (at the memory bandwidth a pass over 2 GB takes some 50 ms; 0.2 s would need
/// 8 GB of data, which verification cannot hold beside it on a 23 GB machine): they are held to
/// about 1-2 GB and timed over many repetitions; bmm to about 2.3 GB.
pub const SIZES: &[(&str, &[(&str, i64)])] = &[
    ("mm", &[("N", 1200)]),
    ("tmm", &[("N", 1200)]),
    ("bmm", &[("BATCH", 32768)]),
    ("gconv", &[("NB", 32)]),
    ("mttkrp", &[("N", 200)]),
    ("sddmm", &[("N", 4096)]),
    ("interp", &[("E", 200_000)]),
    ("helm", &[("E", 15_000)]),
    ("blur", &[("N", 8192)]),
    ("coars", &[("N", 8192)]),
];
