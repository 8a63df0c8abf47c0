//! `teml bench`: the paper's Table 1 kernels, each through its optimization paths, measured in
//! one run on one machine (Figure 11's question: how much faster than sequential C).
//!
//! For each kernel, the variants are files: the untransformed program (`examples/<k>.teml`, run
//! single-threaded: the baseline, sequential C as in Figure 11), Pluto's path of Table 2
//! (`scripts/pluto/<k>.teml`), the paper's path of Sec. 5.3 (`scripts/paper/<k>.teml`) and the
//! best path we have (`scripts/best/<k>.teml`), where each exists. Every variant goes through the
//! one pipeline: verified against its own untransformed statements, then timed; and its
//! outputs are compared with the baseline's on the same initial data before its time counts.
//! Sizes are the files' own defaults; `--quick` uses the small sizes of their `# test:` lines
//! (a smoke run: it checks that everything runs and verifies, never a timing).

use crate::interp::Buffers;
use crate::ir::{DType, Name, State};
use crate::pipeline::{self, KernelRef, Pipeline, Program, RunOptions, Timing};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The ten kernels of the paper's Table 1.
pub const KERNELS: &[&str] =
    &["mm", "tmm", "bmm", "gconv", "mttkrp", "sddmm", "interp", "helm", "blur", "coars"];

/// Where the variants of a kernel come from, in the order they are reported.
pub const VARIANTS: &[(&str, &str)] = &[
    ("untransformed", "examples"),
    ("pluto", "scripts/pluto"),
    ("paper", "scripts/paper"),
    ("best", "scripts/best"),
];

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// The repository root (where `examples/` and `scripts/` are).
    pub root: PathBuf,
    /// The small sizes of the files' `# test:` lines, short timings.
    pub quick: bool,
    /// Threads of the transformed variants (the baseline runs on one).
    pub threads: usize,
    /// Only these kernels (all of [`KERNELS`] when empty).
    pub kernels: Vec<String>,
    /// The rest: flags, timeouts, cache, worker.
    pub run: RunOptions,
}

/// One variant of one kernel.
#[derive(Clone, Debug, Serialize)]
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
    /// Why the variant has no time.
    pub error: Option<String>,
}

/// One kernel.
#[derive(Clone, Debug, Serialize)]
pub struct KernelResult {
    /// Its name in Table 1.
    pub kernel: String,
    /// The named constants it ran with.
    pub sizes: BTreeMap<String, i64>,
    /// Its variants, baseline first.
    pub variants: Vec<VariantResult>,
}

/// The `-D` arguments of a file's `# test:` line.
fn test_sizes(path: &Path) -> BTreeMap<Name, i64> {
    let src = std::fs::read_to_string(path).unwrap_or_default();
    let Some(line) =
        src.lines().find_map(|l| l.strip_prefix("# test:").or_else(|| l.strip_prefix("// test:")))
    else {
        return BTreeMap::new();
    };
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut out = BTreeMap::new();
    for w in words.windows(2) {
        if w[0] == "-D"
            && let Some((n, v)) = w[1].split_once('=')
            && let Ok(v) = v.parse()
        {
            out.insert(Name::from(n), v);
        }
    }
    out
}

/// The tensors the program's kernels write.
fn written(state: &State) -> Vec<Name> {
    let mut out: Vec<Name> = state
        .kernels
        .iter()
        .flat_map(|k| k.nests.iter().flat_map(|n| n.origin.iter()))
        .filter_map(|s| s.target()?.id().cloned())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Runs one variant file: every kernel verified and timed; the outputs it leaves.
fn variant(
    variant: &str,
    file: &Path,
    defines: &BTreeMap<Name, i64>,
    threads: usize,
    opts: &RunOptions,
) -> (VariantResult, Buffers, Vec<Name>) {
    let mut r = VariantResult {
        variant: variant.to_string(),
        file: file.display().to_string(),
        threads,
        verified: false,
        verification: Vec::new(),
        median_s: None,
        spread: None,
        flops: 0,
        gflops: None,
        speedup: None,
        error: None,
    };
    let opts = RunOptions { threads: Some(threads), ..opts.clone() };
    let pipe = match Pipeline::new(Program::file(file, defines.clone(), false), opts) {
        Ok(p) => p,
        Err(e) => {
            r.error = Some(e);
            return (r, Buffers::new(), Vec::new());
        }
    };
    let writes = written(pipe.state());
    let mut outputs = Buffers::new();
    let (mut total, mut spread, mut ok) = (0.0, 0.0f64, true);
    for k in 0..pipe.state().kernels.len() {
        match pipe.run(&KernelRef::Codegen(k), k) {
            Ok(run) => {
                ok &= run.report.verified;
                r.verification.push(run.report.verification.clone());
                r.flops += run.report.flops;
                match run.report.time {
                    Some(t) => {
                        total += t.median_s;
                        spread = spread.max(t.spread());
                    }
                    None => ok = false,
                }
                outputs.extend(run.outputs);
            }
            Err(e) => {
                r.error = Some(e.to_string());
                return (r, outputs, writes);
            }
        }
    }
    r.verified = ok;
    if ok {
        r.median_s = Some(total);
        r.spread = Some(spread);
        r.gflops = Some(r.flops as f64 / total / 1e9);
    }
    (r, outputs, writes)
}

/// Runs the bench; `progress` hears the variant about to run.
pub fn run(o: &BenchOptions, progress: &mut dyn FnMut(&str)) -> Vec<KernelResult> {
    let mut out = Vec::new();
    let kernels: Vec<&str> = if o.kernels.is_empty() {
        KERNELS.to_vec()
    } else {
        KERNELS.iter().copied().filter(|k| o.kernels.iter().any(|x| x == k)).collect()
    };
    let timing = if o.quick {
        Timing { warmup: 0, min_time_s: 0.0, min_reps: 1, max_reps: 1 }
    } else {
        Timing { warmup: 1, min_time_s: 0.5, min_reps: 5, max_reps: 200 }
    };
    let opts = RunOptions { timing: Some(timing), time_untransformed: false, ..o.run.clone() };
    for k in kernels {
        let base_file = o.root.join("examples").join(format!("{k}.teml"));
        let defines = if o.quick { test_sizes(&base_file) } else { BTreeMap::new() };
        let mut kr = KernelResult { kernel: k.to_string(), sizes: BTreeMap::new(), variants: Vec::new() };
        let mut base: Option<(f64, Buffers, Vec<Name>)> = None;
        for (name, dir) in VARIANTS {
            let file = o.root.join(dir).join(format!("{k}.teml"));
            if !file.exists() {
                continue;
            }
            progress(&format!("{k}: {name}"));
            let threads = if *name == "untransformed" { 1 } else { o.threads };
            let (mut r, outputs, writes) = variant(name, &file, &defines, threads, &opts);
            if kr.sizes.is_empty()
                && let Ok(s) = Program::file(&file, defines.clone(), false).eval()
            {
                kr.sizes = s.consts.iter().map(|(n, v)| (n.to_string(), *v)).collect();
            }
            match &base {
                None => {
                    if let Some(t) = r.median_s {
                        base = Some((t, outputs, writes));
                    }
                }
                Some((t, b, bw)) => {
                    // The same initial data: the tensors both compute must agree.
                    for n in bw.iter().filter(|n| writes.contains(n)) {
                        if let (Some(x), Some(y)) = (outputs.get(n), b.get(n))
                            && x.dims == y.dims
                        {
                            let mut cmp = pipeline::Comparison::default();
                            let tol =
                                pipeline::tolerance(if x.dtype == DType::Float || y.dtype == DType::Float {
                                    DType::Float
                                } else {
                                    DType::Double
                                });
                            pipeline::compare_within(n, &y.dims, &x.data, &y.data, tol, 1.5, &mut cmp);
                            if let Some(w) = cmp.worst {
                                r.verified = false;
                                r.error = Some(format!("differs from the untransformed program: {w}"));
                                r.median_s = None;
                            }
                        }
                    }
                    if let Some(m) = r.median_s {
                        r.speedup = Some(t / m);
                    }
                }
            }
            if r.variant == "untransformed" && r.median_s.is_some() {
                r.speedup = Some(1.0);
            }
            kr.variants.push(r);
        }
        out.push(kr);
    }
    out
}

/// The results as a Markdown table.
pub fn table(results: &[KernelResult]) -> String {
    let mut s = String::from(
        "| kernel | sizes | variant | threads | median | spread | GFLOP/s | speedup over sequential C | verified |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for k in results {
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
            let ver = match (&v.error, v.verified) {
                (Some(e), _) => format!("no: {e}"),
                (None, true) => v.verification.join("; "),
                (None, false) => "MISMATCH".into(),
            };
            s.push_str(&format!(
                "| {kernel} | {sz} | {} | {} | {ms} | {spread} | {gf} | {sp} | {ver} |\n",
                v.variant, v.threads
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_sizes_are_read_from_the_test_line() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let s = test_sizes(&root.join("examples/gconv.teml"));
        assert_eq!(s.get("H"), Some(&5));
        assert_eq!(s.len(), 6);
    }
}
