//! One kernel run and checked at one size: generated, compiled and run with its untransformed
//! build, compared with the reference (rounding bounds, rewrites' bounds), the full-size binary
//! checked when the reference ran at a reduced size, and the report with its evidence.
use super::compare::{
    Comparison, compare, compare_bounded, compare_within, magnitude, spot_check, tolerance, tolerance_note,
};
use super::data::{from_bytes, initial_store_cropped};
use super::evidence::{Artifact, Evidence, FullSizeCheck, ReferenceCheck, inputs_hash, source_hash};
use super::options::{RunError, RunOptions};
use super::report::KernelReport;
use crate::codegen::{self, CKernel};
use crate::interp::{self, Buffers, Tensor};
use crate::ir::{DType, KernelRequest, Name, Nest, State};
use crate::runtime::{self, TimeStats};
use std::collections::BTreeMap;

use super::compiled::*;
use super::cost::*;

/// How a kernel is checked; `instances`: the statement instances the reference interpreter
/// runs (or would run, at full size) for it.
pub(super) enum Check {
    /// Against the reference interpreter on the whole output.
    Full { instances: u64 },
    /// At a reduced size: against the reference interpreter; `-i` data cropped to its leading
    /// block.
    Reduced { instances: u64 },
    /// At full size, the reference having run at a reduced size (or been refused there): the
    /// expression oracle at sampled elements, else the untransformed program compiled on its
    /// own.
    Sampled { reference: ReferenceCheck, instances: u64 },
}

/// Whether the kernel of `small` (the program at a reduced size) is the same path as the
/// kernel of `full`: the same nests made by the same chain of builtin calls with the same
/// arguments. The reason they differ, else.
pub(super) fn same_path(full: &KernelRequest, small: &KernelRequest) -> Result<(), String> {
    if full.names != small.names {
        return Err(format!(
            "the kernel runs {} at full size and {} at the reduced size",
            full.names.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", "),
            small.names.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
        ));
    }
    for ((name, a), b) in full.names.iter().zip(&full.nests).zip(&small.nests) {
        if !a.history.is_complete() || !b.history.is_complete() {
            return Err(format!("how `{name}` was made is not known, so the two sizes cannot be compared"));
        }
        let (ha, hb) = (a.history.lines(), b.history.lines());
        if ha != hb {
            let at = ha.iter().zip(&hb).position(|(x, y)| x != y).unwrap_or(ha.len().min(hb.len()));
            let line = |h: &[String]| h.get(at).cloned().unwrap_or_else(|| "nothing".into());
            return Err(format!(
                "`{name}` is made by another path: `{}` at full size, `{}` at the reduced size",
                line(&ha),
                line(&hb)
            ));
        }
    }
    Ok(())
}

/// Builds of the same C that avoid known compiler defects, in order of preference: the
/// vectorizers off, `-O2` for `-O3`, and clang where one is installed (with the same flags).
pub(super) fn fallback_flags(opts: &RunOptions) -> Vec<(Option<std::path::PathBuf>, runtime::Flags)> {
    let words = &opts.flags.opt;
    let mut out = Vec::new();
    let is_clang = opts.compiler.as_ref().is_some_and(|c| c.to_string_lossy().contains("clang"))
        || compiler(opts).is_ok_and(|c| c.identity().contains("clang"));
    if !is_clang {
        let mut w = words.clone();
        w.extend(["-fno-tree-loop-vectorize".to_string(), "-fno-tree-slp-vectorize".to_string()]);
        out.push((opts.compiler.clone(), runtime::Flags { opt: w }));
    }
    if words.iter().any(|w| w == "-O3" || w == "-Ofast") {
        let w = words.iter().map(|w| if w == "-O3" || w == "-Ofast" { "-O2".to_string() } else { w.clone() });
        out.push((opts.compiler.clone(), runtime::Flags { opt: w.collect() }));
    }
    if !is_clang
        && opts.compiler.is_none()
        && let Some(c) = runtime::compiler::installed_clang()
    {
        out.push((Some(c), opts.flags.clone()));
    }
    out
}

/// The same flags without optimization: every `-O<level>` (`-Ofast` too) becomes `-O0`; the
/// rest (`-march`, which explicit vector code needs) stays.
pub(super) fn unoptimized(flags: &runtime::Flags) -> runtime::Flags {
    let mut opt: Vec<String> =
        flags.opt.iter().map(|w| if w.starts_with("-O") { "-O0".to_string() } else { w.clone() }).collect();
    if !opt.iter().any(|w| w == "-O0") {
        opt.push("-O0".into());
    }
    runtime::Flags { opt }
}

/// The flags of the untransformed program's own build, the full-size check of a kernel the
/// oracle cannot evaluate: another optimization level than the kernel's and no `-march`, so
/// that one defect of the compiler's optimizers cannot pass both.
pub(super) fn independent_flags(opts: &RunOptions) -> runtime::Flags {
    let o1 = opts.flags.opt.iter().any(|w| w == "-O1");
    runtime::Flags { opt: vec![if o1 { "-O0" } else { "-O1" }.to_string()] }
}

/// Generates, compiles, runs and checks the kernel of `req` in `state`, from fresh initial
/// data; times it and its untransformed build with `opts.timing`. The steps: [`prepare`] (the
/// C and the data), [`run_builds`] (the kernel and its untransformed build), [`compare_outputs`]
/// (against the reference), [`check_full_size`] (where the reference ran at a reduced size),
/// [`describe`] and [`report`].
///
/// Memory: the initial data is held once (it becomes the reference in place once the kernel
/// and its baseline have run from it), the kernel's buffers once in the shared mapping (the
/// written ones twice while timing), and the outputs of the tensors the kernel writes once
/// more. The caller checks that this fits ([`super::memory::check_memory`]).
pub(super) fn check_at_size(
    state: &State,
    req: &KernelRequest,
    label: &str,
    opts: &RunOptions,
    check: Check,
) -> Result<Checked, RunError> {
    let mut prepared = prepare(state, req, label, opts, &check)?;
    let mut ran = run_builds(state, &prepared, opts)?;
    // The outputs move into the comparison (never held twice).
    let outs = std::mem::take(&mut ran.outs);
    let mut compared = compare_outputs(state, req, &mut prepared, outs, &check)?;
    let (reference, full_size) = check_full_size(state, req, &prepared, &mut compared, opts, check)?;
    let note = describe(&prepared, &compared, &reference, &full_size, opts);
    report(state, req, label, opts, prepared, ran, compared, (reference, full_size), note)
}

/// One kernel run and checked: its report, and every tensor it used as it left them.
pub(super) struct Checked {
    pub(super) report: KernelReport,
    pub(super) outputs: Buffers,
}

/// The C function of the kernel named `label`.
pub fn symbol(label: &str) -> String {
    format!("teml_{label}")
}

/// A kernel ready to run: its C, its untransformed nests, the initial data.
pub(super) struct Prepared {
    /// The kernel's C symbol.
    name: String,
    kernel: CKernel,
    /// The untransformed program: the reference, and the speedup's denominator.
    reference_nests: Vec<Nest>,
    /// The initial data (the reference's outputs, once it has run in place).
    store: Buffers,
    /// The temporaries the kernel holds itself (`lift`, `privatize`): never compared.
    temps: Vec<Name>,
    /// The largest magnitude of the initial data.
    mag: f64,
    /// The untransformed program's floating-point operations.
    written_flops: u64,
    /// Too costly to time as written (a lifted product past [`UNTIMED_FLOPS`]).
    untimed: bool,
}

/// The kernel's C, its untransformed nests and the initial data (cropped to the leading block
/// at a reduced size).
fn prepare(
    state: &State,
    req: &KernelRequest,
    label: &str,
    opts: &RunOptions,
    check: &Check,
) -> Result<Prepared, RunError> {
    let name = symbol(label);
    let named = req.named();
    let kernel = codegen::generate_keeping(state, &name, &named, &opts.keep)?;
    let reference_nests = untransformed(state, req)?;
    let all: Vec<Nest> = req.nests.iter().chain(&reference_nests).cloned().collect();
    let mut store = initial_store_cropped(state, &all, opts, matches!(check, Check::Reduced { .. }))?;
    // The temporaries the kernel holds itself (`lift`, `privatize`) need no data here.
    let mut temps = temporaries(req);
    store.retain(|t, _| !temps.contains(t) || kernel.params.iter().any(|p| &p.name == t));
    // A tensor stored per iteration of a loop and accessed outside it too stays a parameter,
    // but what it holds after the kernel is not its value: not compared either.
    for n in &req.nests {
        for (_, l) in crate::analysis::storage::marked(n.items()) {
            temps.extend(l.annot.store_at.iter().filter(|t| !temps.contains(t)).cloned().collect::<Vec<_>>());
        }
    }
    let mag = magnitude(&store);
    // A lifted expression as written can cost orders of magnitude more than its sequence
    // (helm as one product: 4e13 flops): past UNTIMED_FLOPS it is verified, never timed.
    let written_flops = flop_count(state, &reference_nests);
    let untimed = written_flops > UNTIMED_FLOPS && req.nests.iter().any(|n| !n.rewrites.is_empty());
    Ok(Prepared { name, kernel, reference_nests, store, temps, mag, written_flops, untimed })
}

/// What the kernel's binary and its untransformed build gave.
pub(super) struct Ran {
    compiled: runtime::Compiled,
    /// The hash of the data the kernel started from (timing must start from the same).
    inputs: String,
    time: Option<TimeStats>,
    /// The kernel's written tensors, per parameter.
    outs: Outputs,
    /// The untransformed build's agreement with the kernel, and its time.
    baseline: Option<(Comparison, Option<TimeStats>)>,
}

/// Runs the kernel's binary and its untransformed build (same flags, same run, same initial
/// data: the speedup's denominator, run before the reference turns the initial data into its
/// outputs). The build must agree with the kernel; its outputs are compared as they come back,
/// never held.
fn run_builds(state: &State, p: &Prepared, opts: &RunOptions) -> Result<Ran, RunError> {
    let (kernel, store) = (&p.kernel, &p.store);
    let base = if opts.timing.is_some() && opts.time_untransformed && !p.untimed {
        let base_named: Vec<(Name, Nest)> = p
            .reference_nests
            .iter()
            .enumerate()
            .map(|(k, n)| (Name::from(format!("untransformed{}", k + 1).as_str()), n.clone()))
            .collect();
        let base = codegen::generate(state, &format!("{}_untransformed", p.name), &base_named)?;
        let compiled = compiler(opts)?.compile(&base.source, &opts.flags)?;
        Some((base, compiled))
    } else {
        None
    };
    let compiled = compiler(opts)?.compile(&kernel.source, &opts.flags)?;
    let inputs = inputs_hash(kernel, store);
    // With large data the timed runs of both builds come first, each in its own job, and the
    // checked runs after: the kernel's outputs are never held beside timing snapshots.
    let bytes: usize =
        kernel.params.iter().filter_map(|p| store.get(&p.name)).map(|t| t.data.len() * t.dtype.size()).sum();
    let split = opts.timing.is_some() && bytes >= SPLIT_TIMING_BYTES;
    let (mut time, mut base_time) = (None, None);
    if split {
        time = run_compiled(state, kernel, &compiled, store, opts, opts.timing, &mut |_, _| {})?;
        if let Some((b, bc)) = &base {
            base_time = run_compiled(state, b, bc, store, opts, opts.timing, &mut |_, _| {})?;
        }
    }
    let checked_timing = if split { None } else { opts.timing };
    let mut outs: Outputs = vec![None; kernel.params.len()];
    let t = run_compiled(state, kernel, &compiled, store, opts, checked_timing, &mut |i, src| {
        if kernel.params[i].written {
            outs[i] = Some(from_bytes(src, kernel.params[i].dtype));
        }
    })?;
    time = time.or(t);
    let baseline = match &base {
        Some((b, bc)) => {
            let mut bcmp = Comparison::default();
            let t = run_compiled(state, b, bc, store, opts, checked_timing, &mut |i, src| {
                let p = &b.params[i];
                let got = kernel.params.iter().position(|q| q.name == p.name).and_then(|k| outs[k].as_ref());
                if let (true, Some(got), Some(t)) = (p.written, got, store.get(&p.name)) {
                    compare(
                        &p.name,
                        &t.dims,
                        super::data::values(src, p.dtype),
                        got,
                        tolerance(p.dtype),
                        &mut bcmp,
                    );
                }
            })?;
            Some((bcmp, base_time.or(t)))
        }
        None => None,
    };
    Ok(Ran { compiled, inputs, time, outs, baseline })
}

/// The kernel's outputs against the reference.
pub(super) struct Compared {
    cmp: Comparison,
    /// The kernel's written tensors.
    written: Buffers,
    /// The narrowest element type of the kernel: every output is compared at its tolerance.
    least: DType,
    /// The reference ran at this size (full or reduced), not only the full-size checks.
    checked_in_full: bool,
    /// The statement instances the reference runs (or would run, at full size).
    instances: u64,
    /// Each element had a rounding bound (up to [`ROUNDING_BOUND_INSTANCES`]).
    bounded: bool,
    /// Each rewrite's bound at the sizes compared.
    bounds: RewriteBounds,
    /// Per compared tensor: how many elements had a rounding bound, and how many the relative
    /// tolerance (docs/verification.md), for the report.
    tolerances: Vec<(Name, (usize, usize))>,
}

/// Each rewrite's bound at the sizes compared: (result, what was done, bound, terms, factors).
type RewriteBounds = Vec<(Name, String, f64, f64, usize)>;

/// The absolute floor of the comparison of `name`: the data's magnitude `mag`, or a rewrite's
/// rounding bound over the tolerance of `least` where one wrote it (docs/algebra.md).
fn widened(bounds: &RewriteBounds, least: DType, name: &Name, mag: f64) -> f64 {
    if tolerance(least) == 0.0 {
        return mag;
    }
    bounds.iter().filter(|(r, ..)| r == name).map(|(_, _, b, _, _)| b / tolerance(least)).fold(mag, f64::max)
}

/// The least precise arithmetic of a kernel (docs/types.md): the type of its written tensors
/// as stored, and the type its operands are computed in (a bf16 operand is exact in float, a
/// bf16 result is rounded to bf16), the one of the largest unit roundoff. Every output is
/// compared at it: a kernel with any float tensor at float's, an integer kernel exactly.
pub(crate) fn least_precise(params: &[crate::codegen::Param]) -> DType {
    params
        .iter()
        .map(|p| if p.written { p.dtype } else { p.dtype.compute() })
        .max_by(|a, b| a.unit_roundoff().total_cmp(&b.unit_roundoff()))
        .unwrap_or(DType::Double)
}

/// Runs the reference (the untransformed statements, in place on the initial data) and
/// compares every written tensor with it: within each element's rounding bound where the
/// interpreter can give one, else within the relative tolerance.
fn compare_outputs(
    state: &State,
    req: &KernelRequest,
    p: &mut Prepared,
    outs: Outputs,
    check: &Check,
) -> Result<Compared, RunError> {
    let (checked_in_full, instances) = match check {
        Check::Full { instances } | Check::Reduced { instances } => (true, *instances),
        Check::Sampled { instances, .. } => (false, *instances),
    };
    let least = least_precise(&p.kernel.params);
    // Each written element's rounding bound, from the initial data (before the reference turns
    // it into its outputs). Past ROUNDING_BOUND_INSTANCES the two extra interpreter runs would
    // cost more than they are worth: the relative tolerance applies, and the report says so.
    let bounded = checked_in_full && instances <= ROUNDING_BOUND_INSTANCES;
    let element_bounds = if bounded {
        let names: Vec<Name> = p
            .kernel
            .params
            .iter()
            .filter(|q| q.written && !p.temps.contains(&q.name))
            .map(|q| q.name.clone())
            .collect();
        super::compare::rounding_bounds(state, &p.reference_nests, &p.store, &names, least)?
    } else {
        BTreeMap::new()
    };
    if checked_in_full {
        interp::run(state, &p.reference_nests, &mut p.store).map_err(RunError::Data)?;
    }
    // A lifted result may differ from the original by what rounding allows a reassociated sum
    // (docs/algebra.md): its comparison's floor is that bound over the tolerance. Each
    // rewrite's bound at the sizes compared (a reduced size sums fewer terms).
    let unit = super::compare::unit_roundoff(least);
    let bounds = req
        .nests
        .iter()
        .flat_map(|n| &n.rewrites)
        .map(|r| {
            let terms = if r.by == "lift" {
                crate::ops::lift::terms(state, &r.original).unwrap_or(r.terms)
            } else {
                crate::ops::algebra::terms(state, &r.original)
            };
            (r.result.clone(), r.done().to_string(), r.rounding_bound(unit, p.mag, terms), terms, r.factors)
        })
        .collect();
    let mut c = Compared {
        cmp: Comparison::default(),
        written: Buffers::new(),
        least,
        checked_in_full,
        instances,
        bounded,
        bounds,
        tolerances: Vec::new(),
    };
    for (q, got) in p.kernel.params.iter().zip(outs) {
        let (Some(got), Some(t)) = (got, p.store.get(&q.name)) else { continue };
        if p.temps.contains(&q.name) {
            continue;
        }
        if checked_in_full {
            let rewritten = c.bounds.iter().any(|(r, ..)| r == &q.name);
            let floor = widened(&c.bounds, least, &q.name, p.mag);
            match element_bounds.get(&q.name) {
                Some(b) => {
                    let rule = (tolerance(least), floor, rewritten);
                    let used = compare_bounded(&q.name, &t.dims, &got, &t.data, b, rule, &mut c.cmp);
                    c.tolerances.push((q.name.clone(), used));
                }
                None => compare_within(&q.name, &t.dims, &got, &t.data, tolerance(least), floor, &mut c.cmp),
            }
        }
        c.written.insert(q.name.clone(), Tensor { dtype: t.dtype, dims: t.dims.clone(), data: got });
    }
    Ok(c)
}

/// What checked the reference and the full-size binary: the reference itself where it ran at
/// this size; else the expression oracle at sampled elements, or, where it could not sample
/// every written tensor, every element against the untransformed program compiled on its own.
fn check_full_size(
    state: &State,
    req: &KernelRequest,
    p: &Prepared,
    c: &mut Compared,
    opts: &RunOptions,
    check: Check,
) -> Result<(ReferenceCheck, FullSizeCheck), RunError> {
    Ok(match check {
        Check::Full { .. } => (ReferenceCheck::FullSize, FullSizeCheck::Interpreter),
        Check::Reduced { .. } => {
            (ReferenceCheck::Reduced { size: String::new() }, FullSizeCheck::Interpreter)
        }
        Check::Sampled { reference, .. } => {
            // `store` still holds the initial data here.
            let stmts: Vec<crate::ir::TExpr> =
                p.reference_nests.iter().flat_map(|n| n.origin.clone()).collect();
            let (bounds, least, mag) = (&c.bounds, c.least, p.mag);
            let widened = |n: &Name| widened(bounds, least, n, mag);
            let tol = tolerance(c.least);
            let spot = spot_check(
                state,
                &stmts,
                &p.kernel,
                &p.store,
                &c.written,
                (tol, &widened),
                &p.temps,
                &mut c.cmp,
            )?;
            let full = match spot.short {
                None => FullSizeCheck::Oracle { samples: spot.checked },
                Some(short) => {
                    let mut against = |nests: &[Nest], flops: u64| {
                        let check = (tol, &widened as &dyn Fn(&Name) -> f64);
                        against_untransformed(
                            state, nests, &p.name, &p.store, &c.written, check, &p.temps, opts, flops,
                            &mut c.cmp,
                        )
                    };
                    match against(&p.reference_nests, p.written_flops)? {
                        Ok(full) => full,
                        Err(why) if req.nests.iter().any(|n| !n.rewrites.is_empty()) => {
                            // Too costly as written: verified as a chain. The rewrite was checked
                            // against the expression as written at the reduced size; the
                            // full-size binary is checked against the rewritten program (its
                            // sequence of single contractions, untransformed) built on its own.
                            let lifted = performed(state, req)?;
                            match against(&lifted, flop_count(state, &lifted))? {
                                Ok(FullSizeCheck::Untransformed { flags }) => {
                                    FullSizeCheck::Rewritten { flags, why: format!("{short}, and {why}") }
                                }
                                Ok(full) => full,
                                Err(also) => {
                                    FullSizeCheck::Nothing { why: format!("{short}, {why}, and {also}") }
                                }
                            }
                        }
                        Err(why) => FullSizeCheck::Nothing { why: format!("{short}, and {why}") },
                    }
                }
            };
            (reference, full)
        }
    })
}

/// The report's verification note: where the reference ran, what checked the full size, what
/// was not timed, each rewrite's bound, the tolerances used.
fn describe(
    p: &Prepared,
    c: &Compared,
    reference: &ReferenceCheck,
    full_size: &FullSizeCheck,
    opts: &RunOptions,
) -> String {
    let mut note = reference.describe();
    if !c.checked_in_full {
        let sep = if matches!(reference, ReferenceCheck::Refused { .. }) { ";" } else { ":" };
        note.push_str(&format!("{sep} the full size needs {} interpreted statement instances", c.instances));
    }
    if let Some(f) = full_size.describe() {
        note.push_str(&format!("; {f}"));
    }
    if p.untimed && opts.timing.is_some() && opts.time_untransformed {
        note.push_str(&format!(
            "; the program as written ({:.2e} flops) is not timed: no speedup over it",
            p.written_flops
        ));
    }
    for (result, done, bound, terms, factors) in &c.bounds {
        note.push_str(&format!(
            "; `{result}` {done}: compared with the expression as written, within {bound:.1e} absolute or {:.0e} relative \
             (rounding of {terms} sums of {factors} factors on data up to {:.3})",
            tolerance(c.least),
            p.mag
        ));
    }
    if let Some(t) = tolerance_note(&c.tolerances, c.least) {
        note.push_str(&t);
    }
    if c.checked_in_full && !c.bounded && c.least.is_integer() {
        note.push_str("; compared exactly (integers)");
    } else if c.checked_in_full && !c.bounded {
        note.push_str(&format!(
            "; compared within {:.0e} relative (no rounding bounds past {ROUNDING_BOUND_INSTANCES:.0e} interpreted \
             instances)",
            tolerance(c.least)
        ));
    }
    note
}

/// The kernel's report with its evidence, the speedup where the untransformed build agreed, and
/// every tensor the kernel uses as it left it.
#[allow(clippy::too_many_arguments)]
fn report(
    state: &State,
    req: &KernelRequest,
    label: &str,
    opts: &RunOptions,
    mut p: Prepared,
    ran: Ran,
    c: Compared,
    (reference, full_size): (ReferenceCheck, FullSizeCheck),
    note: String,
) -> Result<Checked, RunError> {
    // Verified: every comparison made agreed, and something independent of the kernel's own
    // transformation checked the full-size binary.
    let verified = c.cmp.worst.is_none() && full_size.checked();
    // A kernel that failed verification has no time anywhere: a fast wrong variant must never
    // win a comparison.
    let time = ran.time.filter(|_| verified);
    let flops = flop_count(state, &performed(state, req)?);
    let compiler = compiler(opts)?;
    let evidence = Evidence {
        reference,
        full_size,
        artifact: Some(Artifact {
            so_path: ran.compiled.so_path.clone(),
            c_path: ran.compiled.c_path.clone(),
            source_hash: source_hash(&p.kernel.source),
            inputs_hash: ran.inputs,
            compiler: compiler.identity().to_string(),
            flags: opts.flags.opt.join(" "),
        }),
        compiler_defect: None,
    };
    let mut report = KernelReport {
        name: label.to_string(),
        nests: req.names.iter().map(|n| n.to_string()).collect(),
        at: req.at.clone(),
        verified,
        verification: note,
        evidence,
        max_abs_error: c.cmp.max_abs,
        max_rel_error: c.cmp.max_rel,
        worst: c.cmp.worst,
        time,
        median_s: time.map(|t| t.median_s),
        flops,
        gflops: time.map(|t| flops as f64 / t.median_s / 1e9),
        baseline: None,
        speedup: None,
        c_path: ran.compiled.c_path.clone(),
        cached: ran.compiled.cached,
    };
    if let (true, Some((bcmp, bstats))) = (verified, ran.baseline) {
        // The baseline must agree with the kernel: a disagreement removes the speedup, and says so.
        match (&bcmp.worst, bstats, time) {
            (None, Some(b), Some(t)) => {
                report.baseline = Some(b);
                report.speedup = Some(b.median_s / t.median_s);
            }
            (Some(w), _, _) => report.verification.push_str(&format!(
                "; the untransformed build with the same flags disagrees with the kernel ({w}): no speedup"
            )),
            _ => {}
        }
    }
    // Every tensor the kernel uses, as the kernel left it: the written ones from the run, the
    // others (never written by kernel or reference) as they started.
    let mut written = c.written;
    let mut outputs = Buffers::new();
    for q in &p.kernel.params {
        if let Some(t) = written.remove(&q.name).or_else(|| p.store.remove(&q.name)) {
            outputs.insert(q.name.clone(), t);
        }
        // The operand a result was stored over keeps its meaning: its data as it started.
        if let Some(x) = &q.holds
            && let Some(t) = p.store.remove(x)
        {
            outputs.insert(x.clone(), t);
        }
    }
    Ok(Checked { report, outputs })
}

/// Checks the full-size kernel's outputs `written` in full against the untransformed program
/// (`reference_nests`) compiled on its own ([`independent_flags`]) and run on the same initial
/// data `initial`: what checked it, or why it could not be checked.
#[allow(clippy::too_many_arguments)]
pub(super) fn against_untransformed(
    state: &State,
    reference_nests: &[Nest],
    name: &str,
    initial: &Buffers,
    written: &Buffers,
    (tol, widened): (f64, &dyn Fn(&Name) -> f64),
    temps: &[Name],
    opts: &RunOptions,
    written_flops: u64,
    cmp: &mut Comparison,
) -> Result<Result<FullSizeCheck, String>, RunError> {
    if written_flops > UNTIMED_FLOPS {
        return Ok(Err(format!(
            "the untransformed program ({written_flops:.2e} flops) is too costly to run as a check"
        )));
    }
    let named: Vec<(Name, Nest)> = reference_nests
        .iter()
        .enumerate()
        .map(|(k, n)| (Name::from(format!("untransformed{}", k + 1).as_str()), n.clone()))
        .collect();
    let base = codegen::generate(state, &format!("{name}_check"), &named)?;
    let flags = independent_flags(opts);
    let check_opts = RunOptions { flags: flags.clone(), timing: None, ..opts.clone() };
    let compiled = compiler(&check_opts)?.compile(&base.source, &flags)?;
    // A rewritten program's temporaries are the kernel's own (no data of the run): they start
    // at zero, as the kernel's do.
    let extended;
    let initial = if base.params.iter().all(|p| initial.contains_key(p.accessed())) {
        initial
    } else {
        let mut fresh = interp::buffers_for(state, reference_nests, &mut |name, _, dims| {
            if initial.contains_key(name) { Vec::new() } else { vec![0.0; dims.iter().product()] }
        })
        .map_err(RunError::Data)?;
        fresh.retain(|n, _| !initial.contains_key(n));
        fresh.extend(initial.iter().map(|(n, t)| (n.clone(), t.clone())));
        extended = fresh;
        &extended
    };
    let mut compared = 0usize;
    run_compiled(state, &base, &compiled, initial, &check_opts, None, &mut |i, src| {
        let p = &base.params[i];
        if !p.written || temps.contains(&p.name) {
            return;
        }
        if let Some(got) = written.get(&p.name) {
            let want = from_bytes(src, p.dtype);
            compare_within(&p.name, &got.dims, &got.data, &want, tol, widened(&p.name), cmp);
            compared += 1;
        }
    })?;
    if compared == 0 {
        return Ok(Err("the untransformed program writes none of the kernel's outputs".into()));
    }
    Ok(Ok(FullSizeCheck::Untransformed { flags: flags.opt.join(" ") }))
}
