//! The kernel suite of `teml bench`: the paper's Table 1 kernels, each through its optimization
//! paths, measured in one run on one machine (Figure 11's question: how much faster than
//! sequential C). The top-level `bench/` is another thing: criterion benchmarks of teml itself
//! (`cargo bench`) and measurement scripts.
//!
//! For each kernel, the variants are files: the untransformed program (`examples/<k>.teml`, run
//! single-threaded: the baseline, sequential C as in Figure 11), Pluto's path of Table 2
//! (`scripts/pluto/<k>.teml`), the paper's path of Sec. 5.3 (`scripts/paper/<k>.teml`) and the
//! best path we have (`scripts/best/<k>.teml`), where each exists. Every variant goes through the
//! one pipeline: verified against its own untransformed statements, then timed; and its
//! outputs are compared with the baseline's on the same initial data before its time counts.
//! Sizes are [`SIZES`] (the paper's where they run in seconds, else scaled; `--file-sizes` runs
//! the files' own defaults); `--quick` uses the small sizes of their `# test:` lines (a smoke
//! run: it checks that everything runs and verifies, never a timing).

use crate::interp::Buffers;
pub mod chart;
pub mod instructions;
pub mod numpy;
pub mod roofline;

use crate::ir::{Name, State};
use crate::pipeline::{self, Pipeline, Program, RunOptions, Timing};
use crate::runtime::compiler;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
mod kernels;
mod report;
mod tuned;
pub use instructions::Precision;
pub use kernels::*;
pub use report::*;
pub use tuned::*;

/// Interleaved rounds of timing: every round times every verified variant of a kernel once,
/// so that a slow phase of a shared machine slows all of them alike.
pub const ROUNDS: usize = 5;

/// Why an anchor is missing, with the line that installs it.
fn missing(what: &str, why: &str, install: &str) -> String {
    format!("{what} not available ({why}); install it with `{install}`")
}

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Skip the anchors (Polly, numpy) even where they are installed.
    pub no_anchors: bool,
    /// The repository root (where `examples/` and `scripts/` are).
    pub root: PathBuf,
    /// The small sizes of the files' `# test:` lines, short timings.
    pub quick: bool,
    /// The files' own default sizes instead of [`SIZES`].
    pub file_sizes: bool,
    /// Threads of the transformed variants (the baseline runs on one).
    pub threads: usize,
    /// Only these kernels (all of the suite's when empty).
    pub kernels: Vec<String>,
    /// Which kernels: the paper's Table 1, or PolyBench.
    pub suite: Suite,
    /// The rest: flags, timeouts, cache, worker.
    pub run: RunOptions,
    /// Re-tune the tuned row on this machine first, for at most this many seconds a kernel
    /// (`teml bench --tune`): the kernel's space in `scripts/tune/` where it has one, else the
    /// space the rules generate; the winner replaces the shipped path in the row.
    pub tune: Option<f64>,
    /// The tuning database the re-tune reads and records into (`None`: neither).
    pub db: Option<PathBuf>,
    /// The tuned row from a re-tune on Slurm (`--tuned-from DIR`, the merge job's): each
    /// kernel's `DIR/kernels/K/best.teml`, its database records merged into `db`.
    pub tuned_from: Option<PathBuf>,
    /// Each finished kernel's rows, one JSON line each, appended as it finishes: what an
    /// interrupted run leaves behind, and what `resume` reads back (`None`: not written).
    pub rows: Option<PathBuf>,
    /// Rerun only the kernels whose rows `rows` does not hold already (same suite, sizes and
    /// threads).
    pub resume: bool,
}

/// One line of the rows file: a finished kernel, with what it ran under and how long it took.
#[derive(Serialize, serde::Deserialize)]
struct Row {
    suite: String,
    quick: bool,
    threads: usize,
    wall_s: f64,
    result: KernelResult,
}

/// The rows of earlier runs in `path` that `o` would run again (same suite, quick or not,
/// threads), by kernel: the last of each.
fn earlier_rows(o: &BenchOptions, path: &std::path::Path) -> BTreeMap<String, Row> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let suite = format!("{:?}", o.suite);
    text.lines()
        .filter_map(|l| serde_json::from_str::<Row>(l).ok())
        .filter(|r| r.suite == suite && r.quick == o.quick && r.threads == o.threads)
        .map(|r| (r.result.kernel.clone(), r))
        .collect()
}

/// Seconds a kernel takes when no earlier row says: a rough default (on 2 cores, a few
/// seconds at the `--quick` sizes, minutes at the bench's, plus a re-tune's budget).
fn default_seconds(o: &BenchOptions) -> f64 {
    let base = if o.quick { 5.0 } else { 150.0 };
    base + o.tune.unwrap_or(0.0)
}

/// What the run will do and about how long it will take, said before it starts: the kernels
/// to run, those `--resume` keeps, and the estimate (the rows file's times of the same
/// kernels where it has them).
pub fn plan(o: &BenchOptions) -> String {
    let kernels = selected(o);
    let earlier = o.rows.as_deref().map(|p| earlier_rows(o, p)).unwrap_or_default();
    let kept: Vec<&str> = if o.resume {
        kernels.iter().copied().filter(|k| earlier.contains_key(*k)).collect()
    } else {
        Vec::new()
    };
    let todo: Vec<&str> = kernels.iter().copied().filter(|k| !kept.contains(k)).collect();
    let (mut secs, mut known) = (0.0, 0);
    for k in &todo {
        match earlier.get(*k) {
            Some(r) => {
                secs += r.wall_s;
                known += 1;
            }
            None => secs += default_seconds(o),
        }
    }
    let how = match known {
        0 => format!("about {:.0} s a kernel", default_seconds(o)),
        n if n == todo.len() => "from the last run's times".to_string(),
        n => format!("{n} from the last run's times, the rest about {:.0} s each", default_seconds(o)),
    };
    let mut line = format!(
        "{} kernel{} to run, expected about {} ({how})",
        todo.len(),
        if todo.len() == 1 { "" } else { "s" },
        duration(secs)
    );
    if !kept.is_empty() {
        line.push_str(&format!(
            "; {} kept from {} (--resume): {}",
            kept.len(),
            o.rows.as_deref().map(|p| p.display().to_string()).unwrap_or_default(),
            kept.join(", ")
        ));
    }
    if let Some(p) = &o.rows {
        line.push_str(&format!("; each kernel's rows go to {} as it finishes", p.display()));
    }
    line
}

/// `95 s`, `12 min`, `1.5 h`.
fn duration(secs: f64) -> String {
    if secs < 120.0 {
        format!("{secs:.0} s")
    } else if secs < 5400.0 {
        format!("{:.0} min", secs / 60.0)
    } else {
        format!("{:.1} h", secs / 3600.0)
    }
}

/// One line of a finished kernel: each variant's verified time and speedup, or why it has none.
pub fn finished_line(k: &KernelResult, wall_s: f64) -> String {
    let rows: Vec<String> = k
        .variants
        .iter()
        .map(|v| match (&v.error, v.median_s) {
            (Some(e), _) => format!("{} failed ({})", v.variant, e.lines().next().unwrap_or("")),
            (None, Some(t)) if v.verified => match v.speedup {
                Some(s) if v.variant != "untransformed" => {
                    format!("{} {:.3} ms ({s:.2}x)", v.variant, t * 1e3)
                }
                _ => format!("{} {:.3} ms", v.variant, t * 1e3),
            },
            (None, _) if !v.verified => format!("{} NOT VERIFIED", v.variant),
            _ => format!("{} (not timed)", v.variant),
        })
        .collect();
    format!("{}: {} [{:.0} s]", k.kernel, rows.join(", "), wall_s)
}

/// The kernels `o` runs.
fn selected(o: &BenchOptions) -> Vec<&'static str> {
    let all = o.suite.kernels();
    if o.kernels.is_empty() {
        all.to_vec()
    } else {
        all.iter().copied().filter(|k| o.kernels.iter().any(|x| x == k)).collect()
    }
}

/// Kernel `k`'s program and the sizes `o` runs it at.
fn setup(o: &BenchOptions, k: &str) -> (PathBuf, BTreeMap<Name, i64>) {
    let base_file = o.suite.base(&o.root, k);
    let defines = if o.quick {
        test_sizes(&base_file)
    } else if o.file_sizes {
        BTreeMap::new()
    } else {
        o.suite.sizes(k)
    };
    (base_file, defines)
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

/// A variant whose every kernel verified: its pipeline (with the variant's threads and
/// compiler) and the evidence, for [`pipeline::time_interleaved`].
type Timer = (Pipeline, Vec<pipeline::Verified>);

/// Runs one variant file: every kernel verified (not timed); the outputs it leaves, and the
/// pipeline that times it when every kernel verified.
fn variant(
    variant: &str,
    file: &Path,
    defines: &BTreeMap<Name, i64>,
    threads: usize,
    opts: &RunOptions,
) -> (VariantResult, Buffers, Vec<Name>, Option<State>, Option<Timer>) {
    let mut r = VariantResult::new(variant, &file.display().to_string(), threads);
    let verify = RunOptions { threads: Some(threads), timing: None, ..opts.clone() };
    let pipe = match Pipeline::new(Program::file(file, defines.clone(), false), verify) {
        Ok(p) => p,
        Err(e) => {
            r.error = Some(e.to_string());
            return (r, Buffers::new(), Vec::new(), None, None);
        }
    };
    let writes = written(pipe.state());
    let mut outputs = Buffers::new();
    let outcome = pipe.run_all(&mut |_, _| {}, &mut |_, run| {
        r.verification.push(run.report.verification.clone());
        r.flops += run.report.flops;
        outputs.extend(run.outputs);
    });
    let state = pipe.state().clone();
    match outcome {
        Ok(evidence) => {
            r.verified = true;
            (r, outputs, writes, Some(state), Some((pipe, evidence)))
        }
        Err(pipeline::RunAllError::Mismatched(_) | pipeline::RunAllError::Unchecked(_)) => {
            (r, outputs, writes, Some(state), None)
        }
        Err(e) => {
            r.error = Some(e.to_string());
            (r, outputs, writes, Some(state), None)
        }
    }
}

/// Times the verified variants in interleaved rounds ([`pipeline::time_interleaved`]): each
/// round runs every variant's kernels once (a warm-up and `timing.min_time_s / rounds` of
/// timed runs each); a variant's time is the median over the rounds of its kernels' summed
/// medians, its spread the rounds' range over that median.
fn time_interleaved(timers: &[(usize, Timer)], results: &mut [VariantResult], timing: Timing, rounds: usize) {
    let per_round = Timing { min_time_s: timing.min_time_s / rounds as f64, min_reps: 1, ..timing };
    let variants: Vec<(&Pipeline, &[pipeline::Verified])> =
        timers.iter().map(|(_, (p, v))| (p, v.as_slice())).collect();
    for ((i, _), timed) in timers.iter().zip(pipeline::time_interleaved(&variants, per_round, rounds)) {
        let r = &mut results[*i];
        match timed {
            Ok(t) => {
                r.median_s = Some(t.stats.median_s);
                r.spread = Some(t.stats.spread());
                r.gflops = Some(r.flops as f64 / t.stats.median_s / 1e9);
            }
            Err(e) => r.error = Some(format!("timing failed: {e}")),
        }
    }
}

/// Runs the bench: probes, every kernel, probes again; `progress` hears what is about to run.
pub fn run(
    o: &BenchOptions,
    progress: &mut dyn FnMut(&str),
    finished: &mut dyn FnMut(&KernelResult, f64),
) -> Report {
    progress("probing the machine");
    let precision = o.suite == Suite::Precision;
    let mut machine: Vec<roofline::Machine> =
        roofline::probe(&o.run, o.threads, o.quick).into_iter().collect();
    let mut probes = if precision { instructions::probe(&o.run, o.threads, o.quick) } else { Vec::new() };
    let mut kernels = run_kernels(o, progress, finished);
    progress("probing the machine again");
    machine.extend(roofline::probe(&o.run, o.threads, o.quick));
    if precision {
        probes = instructions::better(probes, instructions::probe(&o.run, o.threads, o.quick));
    }
    // The bound at the better of the two probes (the machine is shared).
    if let Some(m) = machine.iter().copied().reduce(|a, b| roofline::Machine {
        threads: a.threads,
        peak_gflops: a.peak_gflops.max(b.peak_gflops),
        bandwidth_gbs: a.bandwidth_gbs.max(b.bandwidth_gbs),
    }) {
        for k in kernels.iter_mut() {
            match precision_of(&k.kernel) {
                None => apply_roofline(&m, k),
                Some(p) => apply_precision_roofline(&m, p, &probes, k),
            }
        }
    }
    if precision {
        compare_precisions(&mut kernels);
    }
    let cc = crate::runtime::Compiler::detect().map(|c| c.identity().to_string()).unwrap_or_default();
    let host = format!(
        "{}; {cc}; {}",
        crate::runtime::machine::Machine::host().host_line(),
        o.run.flags.opt.join(" ")
    );
    Report { host, machine, instructions: probes, kernels }
}

/// The roofline of a kernel of the precision suite: its compute bound at the probe of the
/// fastest instruction the host has for its types (the dot products, AMX), not double FMA's;
/// none where the host ran no probe of its types (int8 without VNNI or AMX), with a note.
fn apply_precision_roofline(
    m: &roofline::Machine,
    p: Precision,
    probes: &[instructions::Measured],
    k: &mut KernelResult,
) {
    match instructions::peak_for(p, probes) {
        Some(probe) => {
            let at = roofline::Machine { peak_gflops: probe.gops.unwrap_or(m.peak_gflops), ..*m };
            apply_roofline(&at, k);
            k.notes.push(format!(
                "% roofline against the {} probe ({}: {:.1} G/s), the fastest instruction of its types on this host",
                probe.name,
                probe.instruction,
                probe.gops.unwrap_or_default()
            ));
        }
        None => {
            for v in &mut k.variants {
                v.bound_s = None;
                v.roofline = None;
            }
            k.bound_s = None;
            k.notes.push(
                "no roofline bound: this host ran no probe of these types (no vpdpbusd, no AMX int8), and \
                 plain C's i32 multiply-adds have none"
                    .into(),
            );
        }
    }
}

/// Each kernel of the precision suite against the float kernel of its family (`mm_bf16`
/// against `mm_float`): `teml auto`'s time, as a note (the targets' ratios).
fn compare_precisions(kernels: &mut [KernelResult]) {
    let auto = |k: &KernelResult| k.variants.iter().find(|v| v.variant == "auto" && v.verified)?.median_s;
    let floats: Vec<(String, f64)> = kernels
        .iter()
        .filter(|k| precision_of(&k.kernel) == Some(Precision::Float))
        .filter_map(|k| Some((k.kernel.clone(), auto(k)?)))
        .collect();
    for k in kernels.iter_mut() {
        let family = k.kernel.split('_').next().unwrap_or_default().to_string();
        let Some((name, float)) = floats.iter().find(|(n, _)| *n == format!("{family}_float")) else {
            continue;
        };
        if k.kernel == *name {
            continue;
        }
        if let Some(t) = auto(k) {
            k.notes.push(format!(
                "auto: {:.2}x the speed of {name}'s auto path ({:.2} ms against {:.2} ms)",
                float / t,
                t * 1e3,
                float * 1e3
            ));
        }
    }
}

/// Each variant's fraction of its roofline bound on machine `m`: the bound of the operations
/// the variant runs (its own trees' count, never more than the expression as written: a lifted
/// path runs fewer), with the kernel's compulsory traffic. A figure above 100 % cannot be a
/// result (the bound is what the machine can do): it means the probes under-measured the
/// machine in this run, or (numpy, where the kernel has a lifted row) that the variant ran
/// fewer operations than teml counted, and the kernel's notes say which. Without the
/// untransformed variant's operation count (it did not run) there is no bound; without a count
/// of the traffic the bound is the compute bound alone; a note says either.
fn apply_roofline(m: &roofline::Machine, k: &mut KernelResult) {
    if k.flops == 0 {
        k.bound_s = None;
        for v in &mut k.variants {
            v.bound_s = None;
            v.roofline = None;
        }
        k.notes.push(
            "no roofline bound: the untransformed variant did not run, and the bound is computed from its \
             operation count"
                .into(),
        );
        return;
    }
    if k.bytes == 0 {
        k.notes.push(
            "the compulsory traffic could not be counted (the tensors' sizes): the roofline bound is the \
             compute bound alone"
                .into(),
        );
    }
    k.bound_s = Some(roofline::bound_s(m, k.flops, k.bytes));
    // The operations a variant is bounded by: its own, at most the expression's.
    let counted = |v: &VariantResult| if v.flops > 0 { v.flops.min(k.flops) } else { k.flops };
    for v in &mut k.variants {
        let own = roofline::bound_s(m, counted(v), k.bytes);
        v.bound_s = Some(own);
        v.roofline = v.median_s.map(|t| own / t);
    }
    // Memory bound (on the variant's own count): the bound counts bytes as STREAM does, without
    // the write-allocate reads (a triad moves four arrays and counts three), so a kernel whose
    // writes need none (stored over lines it has just read: `in_place`; streaming stores:
    // `stream`) can pass it by up to a third.
    let memory_bound = |v: &VariantResult| {
        k.bytes as f64 / (m.bandwidth_gbs * 1e9) >= counted(v) as f64 / (m.peak_gflops * 1e9)
    };
    // numpy's einsum(optimize=True) contracts in steps where the expression has several
    // operands: teml sees that only where the kernel has a lifted row (its own count).
    let lifted = k.variants.iter().any(|v| v.variant == "lifted" && v.flops > 0 && v.flops < k.flops);
    for v in k.variants.iter().filter(|v| v.roofline.is_some_and(|x| x > 1.0)) {
        let why = if v.variant == "numpy" && lifted {
            "its rate is effective, on teml's count of the expression as written, and einsum(optimize=True) \
             contracts in steps that run fewer operations (compare the lifted row, bounded by its own count)"
        } else if memory_bound(v) {
            "STREAM's triad, the bandwidth probe, moves its output's lines twice (read for ownership, \
             then written) and counts them once; a kernel that writes over lines it has read (in place) \
             or stores without reading (stream) moves only what it counts, so it can pass the probe by up to a third; above that, the probe \
             under-measured this machine in this run"
        } else {
            "the probes under-measured this machine in this run"
        };
        k.notes.push(format!(
            "{}: {:.0}% of the roofline, above the bound: {why} (peak {:.1} GFLOP/s, triad {:.1} GB/s); the \
             figure is marked, not a result",
            v.variant,
            v.roofline.unwrap_or_default() * 100.0,
            m.peak_gflops,
            m.bandwidth_gbs
        ));
    }
}

fn run_kernels(
    o: &BenchOptions,
    progress: &mut dyn FnMut(&str),
    finished: &mut dyn FnMut(&KernelResult, f64),
) -> Vec<KernelResult> {
    let mut out = Vec::new();
    let kernels = selected(o);
    let mut earlier = match (&o.rows, o.resume) {
        (Some(p), true) => earlier_rows(o, p),
        _ => BTreeMap::new(),
    };
    if let Some(dir) = o.rows.as_deref().and_then(|p| p.parent()).filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(dir);
    }
    let (timing, rounds) = if o.quick {
        (Timing { warmup: 0, min_time_s: 0.0, min_reps: 1, max_reps: 1 }, 1)
    } else {
        (Timing { warmup: 1, min_time_s: 0.5, min_reps: 5, max_reps: 200 }, ROUNDS)
    };
    let opts = RunOptions { timing: Some(timing), time_untransformed: false, ..o.run.clone() };
    let polly = if o.no_anchors { Err("--no-anchors".to_string()) } else { compiler::polly() };
    let numpy =
        if o.no_anchors { Err("--no-anchors".to_string()) } else { numpy::available(numpy::Library::Numpy) };
    let torch = if o.no_anchors || o.suite != Suite::Precision {
        Err("--no-anchors".to_string())
    } else {
        numpy::available(numpy::Library::Torch)
    };
    for (done, k) in kernels.iter().copied().enumerate() {
        if let Some(r) = earlier.remove(k) {
            out.push(r.result);
            continue;
        }
        progress(&format!("[{}/{}] {k}", done + 1, kernels.len()));
        let started = std::time::Instant::now();
        let (base_file, defines) = setup(o, k);
        let mut kr = KernelResult {
            kernel: k.to_string(),
            sizes: BTreeMap::new(),
            variants: Vec::new(),
            notes: Vec::new(),
            flops: 0,
            bytes: 0,
            bound_s: None,
        };
        let mut base: Option<(Buffers, Vec<Name>)> = None;
        let mut baseline_state: Option<State> = None;
        let mut timers: Vec<(usize, Timer)> = Vec::new();
        // The auto row: `teml auto`'s path at these sizes, on this machine (no measurement, no
        // tuning database: the rules and the model alone).
        let auto_dir = tempfile::tempdir().ok();
        let mut files = o.suite.variants(&o.root, k);
        if let Some(dir) = &auto_dir {
            let a = crate::tuner::auto::AutoOptions {
                program: base_file.clone(),
                defines: defines.clone(),
                unchecked: false,
                roles: Default::default(),
                out: dir.path().to_path_buf(),
                db: None,
                threads: o.threads,
            };
            match crate::tuner::auto::auto(&a) {
                Ok(r) => {
                    let at = files.iter().position(|(n, _)| *n == "polly").map_or(1, |i| i + 1);
                    files.insert(at.min(files.len()), ("auto", r.path));
                }
                Err(e) => kr.notes.push(format!("auto: {e}")),
            }
        }
        // The tuned row re-tuned here (--tune) or by a Slurm array (--tuned-from).
        let tune_dir = o.tune.and_then(|_| tempfile::tempdir().ok());
        let retuned = if let (Some(secs), Some(dir)) = (o.tune, &tune_dir) {
            progress(&format!("{k}: re-tuning ({secs:.0} s)"));
            Some(
                retune(&retune_options(o, k, &base_file, &defines, secs, dir.path()))
                    .map_err(|e| format!("--tune: {e}")),
            )
        } else if let Some(dir) = &o.tuned_from {
            let from = tuned_dir(dir, k);
            let best = from.join("best.teml");
            Some(if best.exists() {
                Ok(best)
            } else {
                Err(format!(
                    "--tuned-from: {} has no best.teml (its array task never ran, failed, or found no verified winner; see {})",
                    from.display(),
                    dir.join("slurm").display()
                ))
            })
        } else {
            None
        };
        match retuned {
            Some(Ok(best)) => match files.iter_mut().find(|(n, _)| *n == "tuned") {
                Some(slot) => slot.1 = best,
                None => files.push(("tuned", best)),
            },
            Some(Err(e)) => kr.notes.push(format!("{e}; the shipped tuned path is kept")),
            None => {}
        }
        if let Some(dir) = &o.tuned_from {
            let from = tuned_dir(dir, k);
            if let Some(db) = &o.db {
                kr.notes.extend(crate::tuner::db::merge(db, &[from.join("tuning.jsonl")]));
            }
        }
        for (name, file) in files {
            if !file.exists() {
                continue;
            }
            progress(&format!("{k}: {name}"));
            let threads = if name == "untransformed" { 1 } else { o.threads };
            let mut vopts = opts.clone();
            if name == "polly" {
                match &polly {
                    Ok(cc) => {
                        vopts.compiler = Some(cc.clone());
                        vopts.flags = compiler::polly_flags();
                    }
                    Err(why) => {
                        kr.notes.push(missing("LLVM Polly", why, compiler::POLLY_INSTALL));
                        continue;
                    }
                }
            }
            let (mut r, outputs, writes, vstate, timer) = variant(name, &file, &defines, threads, &vopts);
            if let Some(t) = timer {
                timers.push((kr.variants.len(), t));
            }
            if name == "untransformed"
                && let Some(st) = &vstate
            {
                baseline_state = Some(st.clone());
                kr.flops = r.flops;
                kr.bytes = compulsory_bytes(st);
            }
            // The sizes the variant was evaluated at (its state, already evaluated).
            if kr.sizes.is_empty()
                && let Some(s) = &vstate
            {
                kr.sizes = s.consts.iter().map(|(n, v)| (n.to_string(), *v)).collect();
            }
            match &base {
                None => {
                    if r.verified {
                        // Only what the variants are compared on: the tensors it writes.
                        let outputs = outputs.into_iter().filter(|(n, _)| writes.contains(n)).collect();
                        base = Some((outputs, writes));
                    }
                }
                Some((b, bw)) => {
                    // The same initial data: the tensors both compute must agree.
                    for n in bw.iter().filter(|n| writes.contains(n)) {
                        if let (Some(x), Some(y)) = (outputs.get(n), b.get(n))
                            && x.dims == y.dims
                        {
                            let mut cmp = pipeline::Comparison::default();
                            let tol = pipeline::tolerance(x.dtype).max(pipeline::tolerance(y.dtype));
                            // Each variant was verified element by element against the program
                            // (docs/verification.md); here the floor is the tensor's own scale,
                            // not a magnitude assumed of the data.
                            pipeline::compare_within(n, &y.dims, &x.data, &y.data, tol, 0.0, &mut cmp);
                            if let Some(w) = cmp.worst {
                                r.verified = false;
                                r.error = Some(format!("differs from the untransformed program: {w}"));
                                timers.retain(|(i, _)| *i != kr.variants.len());
                            }
                        }
                    }
                }
            }
            kr.variants.push(r);
        }
        progress(&format!("{k}: timing {} variants in {} interleaved rounds", timers.len(), rounds));
        time_interleaved(&timers, &mut kr.variants, timing, rounds);
        drop(timers);
        let base_time = kr.variants.first().filter(|v| v.variant == "untransformed").and_then(|v| v.median_s);
        for v in &mut kr.variants {
            v.speedup = match (base_time, v.median_s) {
                (Some(b), Some(m)) => Some(b / m),
                _ => None,
            };
        }
        // numpy (BLAS, einsum) and PyTorch (bf16) on the baseline's inputs, checked against
        // its outputs.
        let base_time = kr.variants.first().and_then(|v| v.median_s);
        for (lib, found) in [(numpy::Library::Numpy, &numpy), (numpy::Library::Torch, &torch)] {
            if o.suite == Suite::PolyBench || !lib.has(k) {
                continue;
            }
            match (found, &baseline_state, &base, base_time) {
                (Ok(py), Some(st), Some((b, _)), Some(t)) => {
                    progress(&format!("{k}: {}", lib.name()));
                    let nopts = RunOptions { threads: Some(o.threads), ..opts.clone() };
                    match numpy::run(py, lib, k, st, &nopts, b, o.quick) {
                        Ok(Some(mut r)) => {
                            r.speedup = r.median_s.map(|m| t / m);
                            kr.variants.push(r);
                        }
                        Ok(None) => {}
                        Err(e) => kr.notes.push(format!("{}: {e}", lib.name())),
                    }
                }
                (Err(why), _, _, _) => kr.notes.push(missing(lib.name(), why, lib.install())),
                _ => {}
            }
        }
        if precision_of(k) == Some(Precision::Int8) && !o.no_anchors {
            kr.notes.push(
                "no library anchor for u8 x i8: numpy's integer matmul has no BLAS, and the bench reaches no \
                 u8 x i8 library"
                    .into(),
            );
        }
        let wall_s = started.elapsed().as_secs_f64();
        if let Some(p) = &o.rows {
            let row = Row {
                suite: format!("{:?}", o.suite),
                quick: o.quick,
                threads: o.threads,
                wall_s,
                result: kr.clone(),
            };
            let line = serde_json::to_string(&row).unwrap_or_default();
            use std::io::Write;
            if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(p) {
                let _ = writeln!(f, "{line}");
            }
        }
        finished(&kr, wall_s);
        out.push(kr);
    }
    out
}

/// Every tensor the program's kernels touch, moved once: its size in bytes.
fn compulsory_bytes(state: &State) -> u64 {
    let mut nests = Vec::new();
    for req in &state.kernels {
        if let Ok(n) = pipeline::untransformed(state, req) {
            nests.extend(n);
        }
    }
    let Ok(store) = crate::interp::buffers_for(state, &nests, &mut |_, _, _| Vec::new()) else { return 0 };
    store.values().map(|t| t.dims.iter().product::<usize>() as u64 * t.dtype.size() as u64).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probed machine: 100 GFLOP/s, 10 GB/s.
    fn machine() -> roofline::Machine {
        roofline::Machine { threads: 2, peak_gflops: 100.0, bandwidth_gbs: 10.0 }
    }

    /// A kernel of `flops` operations moving 1 MB, with its variants.
    fn kernel(name: &str, variants: Vec<VariantResult>, flops: u64) -> KernelResult {
        KernelResult {
            kernel: name.into(),
            sizes: BTreeMap::new(),
            variants,
            notes: Vec::new(),
            flops,
            bytes: 1_000_000,
            bound_s: None,
        }
    }

    /// A verified variant with its median time and operation count.
    fn variant(name: &str, median: f64, flops: u64) -> VariantResult {
        VariantResult { verified: true, median_s: Some(median), flops, ..VariantResult::new(name, "", 2) }
    }

    /// A variant faster than the probes' bound is marked with a note, never reported silently.
    #[test]
    fn a_figure_above_the_roofline_is_explained() {
        let m = machine();
        // 1e9 flops at 100 GFLOP/s: the bound is 10 ms (the 1 MB move takes 0.1 ms).
        let mut k =
            kernel("mm", vec![variant("untransformed", 0.1, 0), variant("best", 0.008, 0)], 1_000_000_000);
        apply_roofline(&m, &mut k);
        assert!(k.variants[0].roofline.is_some_and(|x| (x - 0.1).abs() < 1e-12));
        assert!(k.variants[1].roofline.is_some_and(|x| (x - 1.25).abs() < 1e-12));
        assert_eq!(k.notes.len(), 1);
        assert!(
            k.notes[0].starts_with("best: 125% of the roofline, above the bound: the probes under-measured"),
            "{:?}",
            k.notes
        );
        let table = table(&Report {
            host: String::new(),
            machine: vec![m],
            instructions: Vec::new(),
            kernels: vec![k],
        });
        assert!(table.contains("125% (above the bound: see the note)"), "{table}");
    }

    /// A lifted variant is held to the bound of the operations it runs; numpy, whose count is
    /// the expression as written, is explained as an effective rate.
    #[test]
    fn a_variant_is_bounded_by_its_own_operations() {
        let m = machine();
        // As written: 1.5e9 flops, a 15 ms bound; lifted: 1e9 flops, a 10 ms bound.
        let mut k = kernel(
            "mttkrp",
            vec![
                variant("untransformed", 0.1, 1_500_000_000),
                variant("lifted", 0.0125, 1_000_000_000),
                variant("numpy", 0.0125, 1_500_000_000),
            ],
            1_500_000_000,
        );
        apply_roofline(&m, &mut k);
        assert!(k.variants[0].roofline.is_some_and(|x| (x - 0.15).abs() < 1e-12));
        assert!(k.variants[1].roofline.is_some_and(|x| (x - 0.8).abs() < 1e-12));
        assert!(k.variants[2].roofline.is_some_and(|x| (x - 1.2).abs() < 1e-12));
        assert_eq!(k.notes.len(), 1, "{:?}", k.notes);
        assert!(
            k.notes[0].starts_with("numpy: 120% of the roofline, above the bound: its rate is effective"),
            "{:?}",
            k.notes
        );
    }

    /// numpy above the bound on a kernel without a lifted row is not excused as an effective
    /// rate; a variant that runs more operations than the expression is bounded by the
    /// expression's; and without the untransformed variant's counts there is no bound at all.
    #[test]
    fn the_bound_needs_the_untransformed_counts_and_numpy_is_excused_only_beside_a_lifted_row() {
        let m = machine();
        let mut k = kernel(
            "mm",
            vec![
                variant("untransformed", 0.1, 1_000_000_000),
                variant("padded", 0.02, 2_000_000_000),
                variant("numpy", 0.008, 1_000_000_000),
            ],
            1_000_000_000,
        );
        apply_roofline(&m, &mut k);
        // The padded variant's 2e9 operations are bounded as the expression's 1e9: 10 ms.
        assert!(k.variants[1].bound_s.is_some_and(|b| (b - 0.01).abs() < 1e-12), "{:?}", k.variants[1]);
        assert!(k.variants[1].roofline.is_some_and(|x| (x - 0.5).abs() < 1e-12));
        assert_eq!(k.notes.len(), 1, "{:?}", k.notes);
        assert!(
            k.notes[0].starts_with("numpy: 125% of the roofline, above the bound: the probes"),
            "{:?}",
            k.notes
        );

        let mut failed = kernel("mm", vec![variant("untransformed", 0.1, 0), variant("best", 0.01, 0)], 0);
        apply_roofline(&m, &mut failed);
        assert_eq!(failed.bound_s, None);
        assert!(failed.variants.iter().all(|v| v.roofline.is_none() && v.bound_s.is_none()));
        assert_eq!(failed.notes.len(), 1);
        assert!(failed.notes[0].starts_with("no roofline bound: the untransformed variant did not run"));
        // Without a traffic count the bound is the compute bound: 1e9 flops at 100 GFLOP/s.
        let mut untraced = kernel("mm", vec![variant("untransformed", 0.1, 1_000_000_000)], 1_000_000_000);
        untraced.bytes = 0;
        apply_roofline(&m, &mut untraced);
        assert!(untraced.bound_s.is_some_and(|b| (b - 0.01).abs() < 1e-12));
        assert!(
            untraced.notes[0].starts_with("the compulsory traffic could not be counted"),
            "{:?}",
            untraced.notes
        );
        let table = table(&Report {
            host: String::new(),
            machine: vec![m],
            instructions: Vec::new(),
            kernels: vec![failed],
        });
        assert!(table.contains("| best | 2 |"), "{table}");
    }

    #[test]
    fn test_sizes_are_read_from_the_test_line() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let s = test_sizes(&root.join("examples/gconv.teml"));
        assert_eq!(s.get("H"), Some(&5));
        assert_eq!(s.len(), 6);
    }
}
