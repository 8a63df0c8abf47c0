//! The bench's results: each variant's verified time, each kernel's, the report and its
//! table.

use super::*;

/// One variant of one kernel.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct VariantResult {
    /// `untransformed`, `pluto`, `paper` or `best`.
    pub variant: String,
    /// The file.
    pub file: String,
    /// Threads it ran on.
    pub threads: usize,
    /// Every kernel of the file verified, and its outputs agree with the baseline's.
    pub verified: bool,
    /// How (full size, or reduced size and spot check), per kernel of the file.
    pub verification: Vec<String>,
    /// Median time of one run of the variant (the sum over the file's kernels), seconds.
    pub median_s: Option<f64>,
    /// Largest relative spread of the timed runs among the file's kernels.
    pub spread: Option<f64>,
    /// Floating-point operations of one run (from the trees).
    pub flops: u64,
    /// GFLOP/s at the median.
    pub gflops: Option<f64>,
    /// Baseline median over this median.
    pub speedup: Option<f64>,
    /// The variant's roofline bound, seconds: its own operation count (at most the
    /// expression's) with the kernel's compulsory traffic, at the probed peak and bandwidth.
    pub bound_s: Option<f64>,
    /// The roofline bound over this median: the fraction of the machine's limit reached.
    pub roofline: Option<f64>,
    /// Why the variant has no time.
    pub error: Option<String>,
}

impl VariantResult {
    /// A variant not run yet: not verified, no time.
    pub fn new(variant: &str, file: &str, threads: usize) -> VariantResult {
        VariantResult {
            variant: variant.to_string(),
            file: file.to_string(),
            threads,
            verified: false,
            verification: Vec::new(),
            median_s: None,
            spread: None,
            flops: 0,
            gflops: None,
            speedup: None,
            bound_s: None,
            roofline: None,
            error: None,
        }
    }
}

/// One kernel.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct KernelResult {
    /// Its name in Table 1.
    pub kernel: String,
    /// The named constants it ran with.
    pub sizes: BTreeMap<String, i64>,
    /// Its variants, baseline first.
    pub variants: Vec<VariantResult>,
    /// Anchors that could not run, and why.
    pub notes: Vec<String>,
    /// Floating-point operations of one run (teml's count, from the trees).
    pub flops: u64,
    /// Compulsory traffic: every tensor the untransformed program touches, moved once.
    pub bytes: u64,
    /// The roofline bound at the probed peak and bandwidth, seconds.
    pub bound_s: Option<f64>,
}

/// A whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The machine: `uname`-style host, the compiler, the flags.
    pub host: String,
    /// The probes, at the start and at the end of the run (the machine is shared: compare).
    pub machine: Vec<roofline::Machine>,
    /// The instruction probes (the precision suite's; empty otherwise): the better of the
    /// start's and the end's.
    pub instructions: Vec<instructions::Measured>,
    /// The kernels.
    pub kernels: Vec<KernelResult>,
}

/// The results as a Markdown table.
pub fn table(report: &Report) -> String {
    let mut s = format!("Machine: {}.\n", report.host);
    for (k, m) in report.machine.iter().enumerate() {
        s.push_str(&format!(
            "Probe {} ({} threads): peak {:.1} GFLOP/s (FMA), STREAM triad {:.1} GB/s.\n",
            if k == 0 { "at the start" } else { "at the end" },
            m.threads,
            m.peak_gflops,
            m.bandwidth_gbs
        ));
    }
    if let Some(m) = report.instructions.first() {
        s.push_str(&format!("Instruction probes ({} threads, the better of two runs):\n", m.threads));
        for m in &report.instructions {
            s.push_str(&format!("- {}\n", instructions::line(m)));
        }
    }
    s.push_str(
        "\n| kernel | sizes | variant | threads | median | spread | GFLOP/s | % roofline | speedup over sequential C | vs Polly | verified |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let results = &report.kernels;
    for k in results {
        let polly = k.variants.iter().find(|v| v.variant == "polly").and_then(|v| v.median_s);
        let sizes: Vec<String> = k.sizes.iter().map(|(n, v)| format!("{n}={v}")).collect();
        for (i, v) in k.variants.iter().enumerate() {
            let (kernel, sz) =
                if i == 0 { (k.kernel.as_str(), sizes.join(" ")) } else { ("", String::new()) };
            let ms = v.median_s.map_or("—".into(), |m| {
                if m < 1e-3 { format!("{:.1} µs", m * 1e6) } else { format!("{:.2} ms", m * 1e3) }
            });
            let spread = v.spread.map_or("—".into(), |x| format!("{:.0}%", x * 100.0));
            let gf = v.gflops.map_or("—".into(), |g| format!("{g:.2}"));
            let sp = v.speedup.map_or("—".into(), |x| format!("{x:.2}x"));
            let roof = v.roofline.map_or("—".into(), |x| {
                if x > 1.0 {
                    format!("{:.0}% (above the bound: see the note)", x * 100.0)
                } else {
                    format!("{:.0}%", x * 100.0)
                }
            });
            let vs = match (polly, v.median_s) {
                (Some(p), Some(m)) => format!("{:.2}x", p / m),
                _ => "—".into(),
            };
            let ver = match (&v.error, v.verified) {
                (Some(e), _) => format!("no: {e}"),
                (None, true) => v.verification.join("; "),
                (None, false) => "MISMATCH".into(),
            };
            s.push_str(&format!(
                "| {kernel} | {sz} | {} | {} | {ms} | {spread} | {gf} | {roof} | {sp} | {vs} | {ver} |\n",
                v.variant, v.threads
            ));
        }
    }
    if results.iter().any(|k| k.variants.iter().any(|v| v.flops > 0 && v.flops != k.flops)) {
        s.push_str(
            "\nGFLOP/s counts each row's own operations (from its trees; numpy's as the expression is written, \
             whatever it runs), and % roofline is against the bound of those operations, at most the \
             expression's (a lifted row runs fewer).\n",
        );
    }
    for variant in ["auto", "pluto", "tuned"] {
        if let Some((g, n)) = geomean_vs_polly(report, variant) {
            s.push_str(&format!(
                "\n{variant} against Polly on the same C: geometric mean {g:.2}x over the {n} kernels where both verified and ran.\n"
            ));
        }
    }
    s
}

/// The geometric mean over the kernels of Polly's median over `variant`'s (both verified and
/// timed), with how many kernels it covers.
pub fn geomean_vs_polly(report: &Report, variant: &str) -> Option<(f64, usize)> {
    let ratios: Vec<f64> = report
        .kernels
        .iter()
        .filter_map(|k| {
            let time = |name: &str| {
                k.variants
                    .iter()
                    .find(|v| v.variant == name && v.verified && v.error.is_none())
                    .and_then(|v| v.median_s)
            };
            Some(time("polly")? / time(variant)?)
        })
        .filter(|r| r.is_finite() && *r > 0.0)
        .collect();
    if ratios.is_empty() {
        return None;
    }
    let n = ratios.len();
    Some(((ratios.iter().map(|r| r.ln()).sum::<f64>()) / n as f64).exp()).map(|g| (g, n))
}
