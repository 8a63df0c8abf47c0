//! The run itself: a [`Pipeline`] generates a kernel's C, compiles it (cached), runs it in a
//! worker process on fresh initial data, checks it against the reference (at a reduced size
//! when the full one is too big, then the full-size binary at sampled elements), and times it
//! and its untransformed build; [`Verified`] is the evidence timing asks for.

use super::data::initial_store;
use super::evidence::{
    Artifact, CompilerDefect, Evidence, FullSizeCheck, ReferenceCheck, inputs_hash, source_hash,
};
use super::memory::check_memory;
use super::options::{RunError, RunOptions};
use super::program::Program;
use super::report::KernelReport;
use crate::codegen::{self, CKernel};
use crate::error::ProgramError;
use crate::interp::Buffers;
use crate::ir::{KernelRequest, Name, Nest, State};
use crate::runtime::{self, TimeStats, Timing};
use std::collections::BTreeMap;

use super::check::*;
use super::compiled::*;
use super::cost::*;

/// Which kernel to run: the `k`-th `codegen` statement, or one loop nest by name (the REPL's
/// `:run l`).
#[derive(Clone, Debug, PartialEq)]
pub enum KernelRef {
    /// `state.kernels[k]`.
    Codegen(usize),
    /// The nest bound to this identifier, alone.
    Nest(Name),
}

impl KernelRef {
    /// The request in `state`.
    pub fn request(&self, state: &State) -> Result<KernelRequest, RunError> {
        match self {
            KernelRef::Codegen(k) => state
                .kernels
                .get(*k)
                .cloned()
                .ok_or_else(|| RunError::Data(format!("the program has no kernel {}", k + 1))),
            KernelRef::Nest(id) => match state.get(id) {
                Some(crate::ir::Value::Nest(n)) => Ok(KernelRequest {
                    names: vec![id.clone()],
                    nests: vec![n.clone()],
                    ..Default::default()
                }),
                Some(v) => Err(RunError::Data(format!(
                    "`{id}` is {}: expected a loop nest (build it first)",
                    v.kind()
                ))),
                None => Err(RunError::Data(format!("unknown identifier `{id}`"))),
            },
        }
    }

    /// The kernel's stable name: [`State::kernel_label`], or the nest's identifier.
    pub fn label(&self, state: &State) -> String {
        match self {
            KernelRef::Codegen(k) => state.kernel_label(*k),
            KernelRef::Nest(n) => n.to_string(),
        }
    }
}

/// One kernel's run: its report and the tensors it used, as it left them.
#[derive(Clone, Debug)]
pub struct KernelRun {
    /// What happened.
    pub report: KernelReport,
    /// Every tensor the kernel uses, after the (verified or not) full-size run.
    pub outputs: Buffers,
    /// The evidence [`Pipeline::time`] asks for, when the kernel verified.
    pub verified: Option<Verified>,
}

/// A build that did not verify: its compiler and flags, what went wrong (the first mismatch,
/// or the crash), and its C where it was recorded.
struct Failure {
    compiler: String,
    flags: String,
    what: String,
    crashed: bool,
    source: Option<std::path::PathBuf>,
}

/// What building a failed kernel's C again found ([`Pipeline::recheck`]).
enum Recheck {
    /// A build with other flags (or clang) verified: the kernel runs with it.
    Fixed(Box<KernelRun>),
    /// The same C built without optimization failed too (what it did): the C is at fault.
    Unoptimized(String),
    /// No other build verified.
    Unfixed,
}

impl From<Checked> for KernelRun {
    fn from(c: Checked) -> KernelRun {
        KernelRun { report: c.report, outputs: c.outputs, verified: None }
    }
}

/// Why [`Pipeline::run_all`] failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RunAllError {
    /// A kernel could not run (or an input is unused): the located message.
    #[error("{0}")]
    Failed(String),
    /// These kernels (1-based) did not match the reference; every kernel ran.
    #[error("{}", mismatch_message(.0))]
    Mismatched(Vec<usize>),
    /// These kernels (1-based) matched, but nothing independent checked their full-size
    /// binaries (the reports say why); every kernel ran, and none mismatched.
    #[error("{}", unchecked_message(.0))]
    Unchecked(Vec<usize>),
}

pub(super) fn unchecked_message(ks: &[usize]) -> String {
    let list = ks.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", ");
    let (s, was) = if ks.len() == 1 { ("", "was") } else { ("s", "were") };
    format!(
        "kernel{s} {list}: the full-size binary {was} not checked (see the report): not verified, not reported as a \
         speedup"
    )
}

pub(super) fn mismatch_message(ks: &[usize]) -> String {
    match ks {
        [k] => format!("kernel {k} does not match the reference: not reported as a speedup"),
        ks => format!(
            "kernels {} do not match the reference: not reported as speedups",
            ks.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Evidence that one kernel of a program verified: only [`Pipeline::run`] gives one, from a
/// verified run, and [`Pipeline::time`] and [`super::time_interleaved`] take one, so that nothing is
/// timed that was not verified first.
#[derive(Clone, Debug, PartialEq)]
pub struct Verified {
    which: KernelRef,
    /// The pipeline that verified it (evidence is not transferable).
    pipeline: u64,
    /// The binary that was checked: the one that is timed.
    artifact: Artifact,
}

impl Verified {
    /// The kernel that verified.
    pub fn kernel(&self) -> &KernelRef {
        &self.which
    }

    /// The binary that was checked, which timing runs.
    pub fn artifact(&self) -> &Artifact {
        &self.artifact
    }
}

/// The pipeline: a program evaluated once at full size, and the options to run its kernels.
/// Every kernel is an independent variant: it starts from the same initial data (the `-i`
/// files, `init` statements, else the seeded fill) and is verified against the reference
/// running its own untransformed statements from that data.
pub struct Pipeline {
    /// Which pipeline this is, for its [`Verified`] evidence.
    id: u64,
    program: Program,
    state: State,
    opts: RunOptions,
    /// The input hashes [`Pipeline::time`] has confirmed: the data is made the same way every
    /// round, so each is hashed once, not once per timed round.
    inputs_confirmed: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

impl Pipeline {
    /// Evaluates `program`; fails with the program's located error.
    pub fn new(program: Program, opts: RunOptions) -> Result<Pipeline, ProgramError> {
        let state = program.eval()?;
        Ok(Pipeline::with_state(program, state, opts))
    }

    /// A pipeline over `program` already evaluated to `state` (the REPL's current state).
    pub fn with_state(program: Program, state: State, opts: RunOptions) -> Pipeline {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Pipeline { id, program, state, opts, inputs_confirmed: Default::default() }
    }

    /// The program (re-evaluable at other sizes).
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The state at full size.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// The C source of one kernel, without compiling it.
    pub fn generate(&self, which: &KernelRef) -> Result<CKernel, RunError> {
        let req = which.request(&self.state)?;
        let named = req.named();
        Ok(codegen::generate_keeping(
            &self.state,
            &symbol(&which.label(&self.state)),
            &named,
            &self.opts.keep,
        )?)
    }

    /// Times one kernel that [`Pipeline::run`] verified, without checking it again
    /// ([`super::time_interleaved`] calls this once per round and variant): the very binary that
    /// was checked (the evidence's artifact, with the flags it was built with), on the same
    /// initial data.
    pub fn time(&self, verified: &Verified, timing: Timing) -> Result<TimeStats, RunError> {
        if verified.pipeline != self.id {
            return Err(RunError::Data(
                "internal error: evidence of verification from another pipeline: run this kernel through this \
                 pipeline first"
                    .into(),
            ));
        }
        let which = verified.kernel();
        let req = which.request(&self.state)?;
        let kernel = self.generate(which)?;
        let a = &verified.artifact;
        if source_hash(&kernel.source) != a.source_hash {
            return Err(RunError::Data(format!(
                "internal error: kernel {} generates other C than the binary that was verified ({}): not timed",
                index_label(which),
                a.c_path.display()
            )));
        }
        if !a.so_path.is_file() {
            return Err(RunError::Data(format!(
                "the verified binary {} is gone (the kernel cache was cleared): run the kernel again",
                a.so_path.display()
            )));
        }
        let opts = RunOptions { timing: Some(timing), ..self.opts.clone() };
        check_memory(&self.state, &req.nests, &opts)?;
        let store = initial_store(&self.state, &req.nests, &self.opts)?;
        let mut confirmed = self.inputs_confirmed.lock().unwrap_or_else(|p| p.into_inner());
        if !confirmed.contains(&a.inputs_hash) {
            if inputs_hash(&kernel, &store) != a.inputs_hash {
                return Err(RunError::Data(format!(
                    "internal error: kernel {} would be timed on other data than it was verified on: not timed",
                    index_label(which)
                )));
            }
            confirmed.insert(a.inputs_hash.clone());
        }
        drop(confirmed);
        let compiled =
            runtime::Compiled { so_path: a.so_path.clone(), c_path: a.c_path.clone(), cached: true };
        let stats =
            run_compiled(&self.state, &kernel, &compiled, &store, &opts, opts.timing, &mut |_, _| {})?;
        stats.ok_or_else(|| RunError::Data("the timed run reported no repetitions".into()))
    }

    /// The options kernels run with.
    pub fn options(&self) -> &RunOptions {
        &self.opts
    }

    /// Changes how long one worker job may run (a tuner gives a candidate's timed job more than
    /// its screening run); returns the pipeline.
    pub fn set_timeout(&mut self, timeout: std::time::Duration) -> &mut Pipeline {
        self.opts.timeout = timeout;
        self
    }

    /// Runs every kernel of the program in order, each an independent variant, under the one
    /// failure policy of `teml run` and `teml bench`: the `-i` inputs are checked first; a
    /// kernel that cannot run (a compile error, a crash, a refusal) stops the whole with its
    /// error, located at its `codegen`; a kernel that does not verify is reported and the
    /// others still run, and the whole then fails with the list of those that did not.
    /// `before` hears of each kernel before it runs, `each` is handed its run (nothing is
    /// held here). Returns the evidence of every kernel, all verified.
    pub fn run_all(
        &self,
        before: &mut dyn FnMut(usize, &KernelRequest),
        each: &mut dyn FnMut(usize, KernelRun),
    ) -> Result<Vec<Verified>, RunAllError> {
        self.check_inputs().map_err(|e| RunAllError::Failed(e.to_string()))?;
        let mut evidence = Vec::new();
        let (mut mismatched, mut unchecked) = (Vec::new(), Vec::new());
        for (k, req) in self.state.kernels.iter().enumerate() {
            before(k, req);
            match self.run(&KernelRef::Codegen(k)) {
                Ok(run) => {
                    match &run.verified {
                        Some(v) => evidence.push(v.clone()),
                        None if run.report.worst.is_none() => unchecked.push(k + 1),
                        None => mismatched.push(k + 1),
                    }
                    each(k, run);
                }
                Err(e) => {
                    return Err(RunAllError::Failed(match &req.at {
                        Some(at) => format!("{at}: kernel {}: {e}", k + 1),
                        None => format!("kernel {}: {e}", k + 1),
                    }));
                }
            }
        }
        if !mismatched.is_empty() {
            Err(RunAllError::Mismatched(mismatched))
        } else if !unchecked.is_empty() {
            Err(RunAllError::Unchecked(unchecked))
        } else {
            Ok(evidence)
        }
    }

    /// Every `-i` input must be used by some kernel of the program.
    pub fn check_inputs(&self) -> Result<(), RunError> {
        let mut used: Vec<Name> = Vec::new();
        for req in &self.state.kernels {
            for n in untransformed(&self.state, req)?.iter().chain(&req.nests) {
                for s in n.stmts() {
                    s.visit(&mut |t| {
                        if let Some(id) = t.id()
                            && !used.contains(id)
                        {
                            used.push(id.clone());
                        }
                    });
                }
            }
        }
        for name in self.opts.inputs.keys() {
            if !used.contains(name) {
                let list: Vec<String> = used.iter().map(|n| n.to_string()).collect();
                return Err(RunError::Data(format!(
                    "-i {name}: expected a tensor some kernel uses ({}), found `{name}`, which no kernel uses",
                    list.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// Generates, compiles, runs, verifies and (with `opts.timing`) times one kernel. When the
    /// reference interpreter would run more than `opts.max_reference_instances` statement
    /// instances, the same program is evaluated with smaller named constants and, where it builds
    /// the same path there, that kernel is verified there; the full-size kernel, the binary that
    /// is timed, is then checked at sampled elements by the expression oracle, or in full
    /// against the untransformed program compiled on its own. A kernel that does not match is
    /// built again with flags that avoid known compiler defects; if one of those builds
    /// verifies, the kernel runs with it and the report names the defect. A verification
    /// failure is a report with `verified: false`, not an error.
    pub fn run(&self, which: &KernelRef) -> Result<KernelRun, RunError> {
        let mut run = match self.execute(which, &self.opts) {
            // A binary that crashes on valid C is a compiler defect as much as one that
            // computes wrong values: the same rebuilds, the same record.
            Err(RunError::Runtime(e @ runtime::RuntimeError::Crashed { signal, .. })) => {
                let failure = Failure {
                    compiler: compiler(&self.opts)?.identity().to_string(),
                    flags: self.opts.flags.opt.join(" "),
                    what: e.to_string(),
                    crashed: true,
                    source: None,
                };
                match self.recheck(which, failure)? {
                    Recheck::Fixed(fixed) => *fixed,
                    Recheck::Unoptimized(_) => {
                        return Err(RunError::Runtime(runtime::RuntimeError::Crashed {
                            signal,
                            unoptimized: true,
                        }));
                    }
                    Recheck::Unfixed => return Err(RunError::Runtime(e)),
                }
            }
            other => other?,
        };
        if !run.report.verified
            && let (Some(worst), Some(artifact)) = (&run.report.worst, &run.report.evidence.artifact)
        {
            let failure = Failure {
                compiler: artifact.compiler.clone(),
                flags: artifact.flags.clone(),
                what: worst.clone(),
                crashed: false,
                source: Some(artifact.c_path.clone()),
            };
            match self.recheck(which, failure)? {
                Recheck::Fixed(fixed) => run = *fixed,
                Recheck::Unoptimized(what) => {
                    run.report.verification.push_str(&format!(
                        "; the same C built at -O0 {what}: not a defect of the compiler's optimizer"
                    ));
                }
                Recheck::Unfixed => {}
            }
        }
        run.verified = match (&run.report.verified, &run.report.evidence.artifact) {
            (true, Some(artifact)) => {
                Some(Verified { which: which.clone(), pipeline: self.id, artifact: artifact.clone() })
            }
            _ => None,
        };
        Ok(run)
    }

    /// A kernel that did not match or crashed, built again from the same C. First without
    /// optimization (`-O0`): a build that fails there too (a crash, or values that do not
    /// match) is the C's own fault, never put on the compiler. Then with the flags of
    /// [`fallback_flags`]: the first build that verifies, with the compiler defect recorded.
    /// An unoptimized build that cannot tell (it ran past the time limit) leaves the question
    /// to the rebuilds.
    fn recheck(&self, which: &KernelRef, failure: Failure) -> Result<Recheck, RunError> {
        let plain = RunOptions { flags: unoptimized(&self.opts.flags), timing: None, ..self.opts.clone() };
        let unoptimized_verifies = match self.execute(which, &plain) {
            Ok(run) if run.report.verified => true,
            Ok(run) if run.report.worst.is_some() => {
                return Ok(Recheck::Unoptimized("does not match either".into()));
            }
            Err(RunError::Runtime(e @ runtime::RuntimeError::Crashed { .. })) => {
                return Ok(Recheck::Unoptimized(format!("crashed too ({e})")));
            }
            _ => false,
        };
        for (cc, flags) in fallback_flags(&self.opts) {
            let opts = RunOptions { flags: flags.clone(), compiler: cc.clone(), ..self.opts.clone() };
            let Ok(mut run) = self.execute(which, &opts) else { continue };
            if !run.report.verified {
                continue;
            }
            // The same C: the failing build's, or (a crash left no record) the working one's.
            let reproducer = failure
                .source
                .clone()
                .or_else(|| run.report.evidence.artifact.as_ref().map(|a| a.c_path.clone()))
                .unwrap_or_default();
            run.report.evidence.compiler_defect = Some(CompilerDefect {
                compiler: failure.compiler.clone(),
                failing_flags: failure.flags.clone(),
                mismatch: failure.what.clone(),
                crashed: failure.crashed,
                working_flags: flags.opt.clone(),
                working_compiler: cc.clone(),
                reproducer,
                unoptimized_verifies,
            });
            let d = run.report.evidence.compiler_defect.as_ref().map(|d| format!("; {}", d.describe()));
            run.report.verification.push_str(&d.unwrap_or_default());
            return Ok(Recheck::Fixed(Box::new(run)));
        }
        Ok(Recheck::Unfixed)
    }

    fn execute(&self, which: &KernelRef, opts: &RunOptions) -> Result<KernelRun, RunError> {
        let req = which.request(&self.state)?;
        // Refused before anything runs, a reduced-size verification included.
        let all: Vec<Nest> = req.nests.iter().cloned().chain(untransformed(&self.state, &req)?).collect();
        check_memory(&self.state, &all, opts)?;
        let cost = reference_cost(&self.state, &req)?;
        let label = which.label(&self.state);
        if cost <= opts.max_reference_instances {
            return check_at_size(&self.state, &req, &label, opts, Check::Full { instances: cost })
                .map(KernelRun::from);
        }
        let (small, size, small_cost) = self.reduced(which)?;
        let small_req = which.request(&small)?;
        let reference = match same_path(&req, &small_req) {
            Err(why) => ReferenceCheck::Refused { size, why },
            Ok(()) => {
                let small_opts = RunOptions { timing: None, ..opts.clone() };
                let s = check_at_size(
                    &small,
                    &small_req,
                    &label,
                    &small_opts,
                    Check::Reduced { instances: small_cost },
                )?;
                if !s.report.verified {
                    let reference = ReferenceCheck::Reduced { size };
                    let verification = reference.describe();
                    let evidence = Evidence {
                        reference,
                        full_size: FullSizeCheck::Nothing {
                            why: "the reduced-size kernel did not match".into(),
                        },
                        ..s.report.evidence.clone()
                    };
                    return Ok(KernelRun {
                        report: KernelReport { verification, evidence, ..s.report },
                        outputs: s.outputs,
                        verified: None,
                    });
                }
                ReferenceCheck::Reduced { size }
            }
        };
        check_at_size(&self.state, &req, &label, opts, Check::Sampled { reference, instances: cost })
            .map(KernelRun::from)
    }

    /// The program at the largest size whose kernel `which` the reference can run, what was
    /// reduced (e.g. `N=16`) and the statement instances the reference runs there. The sizes tried, in order: every named constant at its t-th
    /// largest divisor up to 64 (a path whose tiles, unrolls or register blocks divide the
    /// full size, as `1200` by 8 and 16, keeps dividing at 48), then capped at 64, 32, ..., 2
    /// (below 16, first with the constants up to 16 kept whole).
    fn reduced(&self, which: &KernelRef) -> Result<(State, String, u64), RunError> {
        let mut last: Option<ProgramError> = None;
        let divisors = |v: i64| -> Vec<i64> { (2..=v.min(64)).rev().filter(|d| v % d == 0).collect() };
        let per_const: Vec<(Name, i64, Vec<i64>)> =
            self.state.consts.iter().map(|(n, v)| (n.clone(), *v, divisors(*v))).collect();
        let most = per_const.iter().map(|(_, _, ds)| ds.len()).max().unwrap_or(0).min(24);
        let mut sizes: Vec<BTreeMap<Name, i64>> = (0..most)
            .map(|t| {
                per_const
                    .iter()
                    .map(|(n, v, ds)| (n.clone(), ds.get(t).or(ds.last()).copied().unwrap_or(*v)))
                    .collect()
            })
            .collect();
        let mut cap = 64;
        while cap >= 2 {
            // Small constants (a block's rows, a filter's width) first keep their value: a
            // register block of 8 output channels needs all 8 when the large sizes shrink.
            if cap < 16 {
                sizes.push(
                    self.state
                        .consts
                        .iter()
                        .map(|(n, v)| (n.clone(), if *v <= 16 { *v } else { (*v).min(cap) }))
                        .collect(),
                );
            }
            sizes.push(self.state.consts.iter().map(|(n, v)| (n.clone(), (*v).min(cap))).collect());
            cap /= 2;
        }
        for consts in sizes {
            match self.program.eval_with(&consts) {
                Ok(s) => {
                    if let Ok(r) = which.request(&s)
                        && let Ok(cost) = reference_cost(&s, &r)
                        && cost <= self.opts.max_reference_instances
                    {
                        let what = consts
                            .iter()
                            .filter(|(n, v)| self.state.constant(n) != Some(**v))
                            .map(|(n, v)| format!("{n}={v}"))
                            .collect::<Vec<_>>()
                            .join(", ");
                        return Ok((s, what, cost));
                    }
                }
                Err(e) => last = Some(e),
            }
        }
        let req = which.request(&self.state)?;
        Err(RunError::Data(format!(
            "kernel {} ({}): the reference interpreter would run {} statement instances (limit {}), and \
             no smaller size of {} fits{}; give smaller -D constants or a larger --max-reference",
            index_label(which),
            req.names.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", "),
            reference_cost(&self.state, &req)?,
            self.opts.max_reference_instances,
            self.program.label,
            last.map_or(String::new(), |e| format!(" (at a smaller size: {e})"))
        )))
    }
}

pub(super) fn index_label(which: &KernelRef) -> String {
    match which {
        KernelRef::Codegen(k) => (k + 1).to_string(),
        KernelRef::Nest(n) => format!("`{n}`"),
    }
}

/// Runs the kernel of `req` in `state` at full size (an error if the reference would run more
/// than `opts.max_reference_instances` statement instances; use [`Pipeline`] to verify at a
/// reduced size).
pub fn run_request(
    state: &State,
    req: &KernelRequest,
    index: usize,
    opts: &RunOptions,
) -> Result<KernelReport, RunError> {
    let cost = reference_cost(state, req)?;
    if cost > opts.max_reference_instances {
        return Err(RunError::Data(format!(
            "kernel {}: the reference interpreter would run {cost} statement instances (limit {}); \
             verify at a reduced size (smaller -D constants)",
            index + 1,
            opts.max_reference_instances
        )));
    }
    let all: Vec<Nest> = req.nests.iter().cloned().chain(untransformed(state, req)?).collect();
    check_memory(state, &all, opts)?;
    let label =
        if state.kernels.get(index) == Some(req) { state.kernel_label(index) } else { req.base_label() };
    Ok(check_at_size(state, req, &label, opts, Check::Full { instances: cost })?.report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp;
    use crate::ir::DType;
    use crate::pipeline::compare::{Comparison, compare_bounded, spot_check};

    fn mm(n: i64) -> State {
        let src =
            "A = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\ncodegen(l)\n";
        crate::lang::eval_with(
            src,
            "mm.teml",
            &State::new().with_const("N", n),
            &crate::script::Stdlib::get(),
        )
        .unwrap()
    }

    /// Evidence of verification is bound to the pipeline that gave it: another pipeline (even
    /// over the same program) will not time its kernel on that evidence.
    #[test]
    fn evidence_is_not_transferable() {
        let d = tempfile::tempdir().unwrap();
        let opts = RunOptions { cache_dir: Some(d.path().to_path_buf()), ..RunOptions::default() };
        let program = || Program::new("mm", BTreeMap::new(), |_| Ok(mm(8)));
        let a = Pipeline::with_state(program(), mm(8), opts.clone());
        let b = Pipeline::with_state(program(), mm(8), opts);
        let v = a.run(&KernelRef::Codegen(0)).unwrap().verified.expect("mm verifies");
        let once = Timing { warmup: 0, min_time_s: 0.0, min_reps: 1, max_reps: 1 };
        assert!(a.time(&v, once).is_ok());
        let e = b.time(&v, once).unwrap_err().to_string();
        assert!(e.contains("evidence of verification from another pipeline"), "{e}");
    }

    /// The rounding bound catches a float kernel that drops one term of a 1000-term sum (the
    /// smallest, in every row), and passes the kernel that sums all terms in float in another
    /// order: tolerances come from each element's own arithmetic, not from a global 1e-3.
    #[test]
    fn a_float_kernel_that_drops_one_term_of_a_thousand_is_caught() {
        let src = "N = 1000\nA = tensor(float, [4, N])\nv = tensor(float, [N])\ny = contract(A, v, [2, 1])\n\
                   l = build(y)\ncodegen(l)\n";
        let s =
            crate::lang::eval_with(src, "dot.teml", &State::new(), &crate::script::Stdlib::get()).unwrap();
        let req = &s.kernels[0];
        let nests = untransformed(&s, req).unwrap();
        let initial = initial_store(&s, &nests, &RunOptions::default()).unwrap();
        let (a, v) = (&initial[&Name::from("A")].data, &initial[&Name::from("v")].data);
        assert!(v.iter().any(|x| *x < 0.0) && v.iter().any(|x| *x > 0.0), "seeded data of both signs");
        let y = Name::from("y");
        let bounds = super::super::compare::rounding_bounds(
            &s,
            &nests,
            &initial,
            std::slice::from_ref(&y),
            DType::Float,
        )
        .unwrap()
        .remove(&y)
        .unwrap();
        let mut reference = initial.clone();
        interp::run(&s, &nests, &mut reference).unwrap();
        let want = &reference[&y].data;
        // A float kernel: each row summed in f32, last term first.
        let row = |i: usize, skip: Option<usize>| -> f64 {
            let mut acc = 0f32;
            for k in (0..1000).rev().filter(|k| Some(*k) != skip) {
                acc += a[i * 1000 + k] as f32 * v[k] as f32;
            }
            acc as f64
        };
        let right: Vec<f64> = (0..4).map(|i| row(i, None)).collect();
        let mut cmp = Comparison::default();
        let used = compare_bounded("y", &[4], &right, want, &bounds, (1e-3, 1.5, false), &mut cmp);
        assert!(cmp.worst.is_none(), "{cmp:?}");
        assert_eq!(used, (4, 0));
        let smallest = |i: usize| {
            (0..1000)
                .min_by(|&p, &q| (a[i * 1000 + p] * v[p]).abs().total_cmp(&(a[i * 1000 + q] * v[q]).abs()))
                .unwrap()
        };
        let wrong: Vec<f64> = (0..4).map(|i| row(i, Some(smallest(i)))).collect();
        let mut cmp = Comparison::default();
        compare_bounded("y", &[4], &wrong, want, &bounds, (1e-3, 1.5, false), &mut cmp);
        assert!(cmp.worst.as_deref().is_some_and(|w| w.contains("its rounding bound")), "{cmp:?}");
    }

    /// The spot check catches a full-size output that differs from the meaning, and passes the
    /// right one (computed here by the interpreter, standing in for a kernel).
    #[test]
    fn spot_check_compares_sampled_elements_with_the_oracle() {
        let s = mm(40);
        let req = &s.kernels[0];
        let named = req.named();
        let kernel = codegen::generate(&s, "k", &named).unwrap();
        let opts = RunOptions::default();
        let initial = initial_store(&s, &req.nests, &opts).unwrap();
        let mut right = initial.clone();
        interp::run(&s, &untransformed(&s, req).unwrap(), &mut right).unwrap();
        let mut cmp = Comparison::default();
        let stmts: Vec<crate::ir::TExpr> = req.nests.iter().flat_map(|n| n.origin.clone()).collect();
        let what =
            spot_check(&s, &stmts, &kernel, &initial, &right, (1e-9, &|_| 1.5), &[], &mut cmp).unwrap();
        assert_eq!(what, super::super::compare::Spot { checked: 24, short: None });
        assert!(cmp.worst.is_none() && cmp.max_rel < 1e-12, "{cmp:?}");
        // A kernel that forgot to zero its accumulator: every element is off by the initial C.
        let mut wrong = right.clone();
        let c0 = &initial[&Name::from("C")];
        let c = wrong.get_mut(&Name::from("C")).unwrap();
        c.data.iter_mut().zip(&c0.data).for_each(|(x, y)| *x += y);
        let mut cmp = Comparison::default();
        spot_check(&s, &stmts, &kernel, &initial, &wrong, (1e-9, &|_| 1.5), &[], &mut cmp).unwrap();
        assert!(cmp.worst.as_deref().is_some_and(|w| w.starts_with("C[0][0]: kernel")), "{cmp:?}");
    }
}
