//! The run itself: a [`Pipeline`] generates a kernel's C, compiles it (cached), runs it in a
//! worker process on fresh initial data, checks it against the reference (at a reduced size
//! when the full one is too big, then the full-size binary at sampled elements), and times it
//! and its untransformed build; [`Verified`] is the evidence timing asks for.

use super::compare::{
    Comparison, compare, compare_bounded, compare_within, magnitude, spot_check, tolerance, tolerance_note,
};
use super::data::{element_bytes, from_bytes, initial_store, initial_store_cropped, write_bytes};
use super::evidence::{
    Artifact, CompilerDefect, Evidence, FullSizeCheck, ReferenceCheck, inputs_hash, source_hash,
};
use super::memory::check_memory;
use super::options::{RunError, RunOptions};
use super::program::Program;
use super::report::KernelReport;
use crate::codegen::{self, CKernel, ENTRY};
use crate::error::ProgramError;
use crate::interp::{self, Buffers, Tensor};
use crate::ir::{DType, KernelRequest, LNode, Name, Nest, State, lower};
use crate::runtime::{self, BufferSpec, Compiler, RunSpec, TimeStats, Timing};
use std::collections::BTreeMap;

/// Past this many floating-point operations, the untransformed build of a kernel with a
/// rewrite is not timed (it would run for minutes).
pub const UNTIMED_FLOPS: u64 = 200_000_000_000;

/// Up to this many interpreted statement instances, each compared element gets its own rounding
/// bound (two more interpreter runs: docs/verification.md); past it, the relative tolerance.
pub const ROUNDING_BOUND_INSTANCES: u64 = 100_000_000;

/// The untransformed program behind a request: each origin assignment built anew, in order;
/// where `lift` rewrote an assignment ([`Nest::rewrites`]), the assignment as the program
/// wrote it instead of the sequence (the sequence's temporaries are not part of it). This is
/// what verification runs and what the speedup is measured against.
pub fn untransformed(state: &State, req: &KernelRequest) -> Result<Vec<Nest>, RunError> {
    let mut out = Vec::new();
    for n in &req.nests {
        if n.rewrites.is_empty() {
            out.push(crate::ir::Nest::new(crate::ops::program(state, n)?, n.origin.clone()));
            continue;
        }
        let mut origin = Vec::new();
        for o in &n.origin {
            let target = o.target().and_then(|x| x.id());
            if n.rewrites.iter().any(|r| target.is_some_and(|t| r.temps.contains(t))) {
                continue;
            }
            match n.rewrites.iter().find(|r| target == Some(&r.result)) {
                Some(r) => origin.push(r.original.clone()),
                None => origin.push(o.clone()),
            }
        }
        out.push(crate::ops::sequence(state, &origin)?);
    }
    Ok(out)
}

/// The programs of a request's nests as they compute (a lifted assignment as its sequence):
/// the operations a kernel performs, for its GFLOP/s.
fn performed(state: &State, req: &KernelRequest) -> Result<Vec<Nest>, RunError> {
    let mut out = Vec::new();
    for n in &req.nests {
        out.push(crate::ir::Nest::new(crate::ops::program(state, n)?, n.origin.clone()));
    }
    Ok(out)
}

/// The temporaries of the rewrites in a request, and the buffers of copies per iteration
/// (`privatize`): written by the kernel, computed by no statement of the program as written,
/// never compared.
fn temporaries(req: &KernelRequest) -> Vec<Name> {
    req.nests
        .iter()
        .flat_map(|n| n.temps().cloned().chain(n.expanded.values().map(|x| x.buffer.clone())))
        .collect()
}

/// Sum over every statement instance of `weight(statement)`, trip counts evaluated with the
/// named constants; saturating (a count too large to represent is too large to interpret). A
/// loop whose iterator bounds a loop inside it (a triangle, `k in [0, i-1]`) is counted value
/// by value, up to [`ENUMERATED`] values in all; past that, its body is counted at its middle
/// iteration, which is exact where the inner trip counts are affine in it.
fn weigh(state: &State, nests: &[Nest], weight: &dyn Fn(&crate::ir::TExpr) -> u64) -> u64 {
    struct Weigh<'a> {
        state: &'a State,
        weight: &'a dyn Fn(&crate::ir::TExpr) -> u64,
        /// Loop values still to enumerate.
        budget: u64,
        /// The values of the loops around, innermost last.
        env: Vec<(Name, i64)>,
        /// Each statement's weight, by its node.
        seen: std::collections::HashMap<*const crate::ir::TNode, u64>,
        /// Whether a loop's iterator bounds a loop inside it, by the loop.
        bounds: std::collections::HashMap<*const crate::ir::Loop, bool>,
    }
    fn bounds_use(x: &LNode, it: &str) -> bool {
        match x {
            LNode::Stmt(_) => false,
            LNode::Loop(l) => l.bounds_mention(it) || l.body.iter().any(|c| bounds_use(c, it)),
        }
    }
    fn body(w: &mut Weigh<'_>, l: &crate::ir::Loop) -> u64 {
        l.body.iter().fold(0u64, |acc, c| acc.saturating_add(go(w, c)))
    }
    fn go(w: &mut Weigh<'_>, x: &LNode) -> u64 {
        let l = match x {
            LNode::Stmt(s) => {
                let weight = w.weight;
                return *w.seen.entry(std::sync::Arc::as_ptr(s)).or_insert_with(|| weight(s));
            }
            LNode::Loop(l) => l,
        };
        let val = |e: &crate::ir::Expr, w: &Weigh<'_>| {
            e.eval(&|v| {
                w.env.iter().rev().find(|(n, _)| &**n == v).map(|(_, x)| *x).or_else(|| w.state.constant(v))
            })
        };
        let (Ok(lb), Ok(ub)) = (val(&l.lb, w), val(&l.ub, w)) else { return 0 };
        if ub < lb {
            return 0;
        }
        let n = (ub - lb).saturating_add(1) as u64;
        let bounds_inner = *w
            .bounds
            .entry(std::sync::Arc::as_ptr(l))
            .or_insert_with(|| l.body.iter().any(|c| bounds_use(c, &l.iter)));
        if bounds_inner && w.budget >= n {
            w.budget -= n;
            let mut sum = 0u64;
            let mut v = lb;
            while v <= ub {
                w.env.push((l.iter.clone(), v));
                sum = sum.saturating_add(body(w, l));
                w.env.pop();
                v = v.saturating_add(1);
            }
            return sum;
        }
        w.env.push((l.iter.clone(), lb + (ub - lb) / 2));
        let one = body(w, l);
        w.env.pop();
        n.saturating_mul(one)
    }
    let mut w = Weigh {
        state,
        weight,
        budget: ENUMERATED,
        env: Vec::new(),
        seen: Default::default(),
        bounds: Default::default(),
    };
    nests.iter().flat_map(|n| n.items()).fold(0u64, |acc, x| acc.saturating_add(go(&mut w, x)))
}

/// How many loop values [`weigh`] enumerates at most (microseconds of work each).
const ENUMERATED: u64 = 1 << 21;

/// Floating-point operations of one run of the untransformed program.
pub fn flop_count(state: &State, nests: &[Nest]) -> u64 {
    weigh(state, nests, &|s| lower(s).map_or(0, |l| crate::ir::lower::flops(&l)))
}

/// Statement instances of the untransformed program (the reference interpreter's work).
pub fn reference_cost(state: &State, req: &KernelRequest) -> Result<u64, RunError> {
    Ok(weigh(state, &untransformed(state, req)?, &|_| 1))
}

fn compiler(opts: &RunOptions) -> Result<Compiler, RunError> {
    let c = match &opts.compiler {
        Some(path) => {
            let detected = Compiler::detect()?;
            Compiler::new(path.clone(), Vec::new(), Vec::new(), detected.cache_dir().to_path_buf())?
        }
        None => Compiler::detect()?,
    };
    let c = c.with_timeout(opts.compile_timeout);
    Ok(match &opts.cache_dir {
        Some(d) => c.with_cache_dir(d),
        None => c,
    })
}

/// Outputs of a kernel run: per parameter, its data after the run when it was asked for.
type Outputs = Vec<Option<Vec<f64>>>;

/// From this many bytes of buffers on, a timed kernel's timed runs and its checked run are
/// separate worker jobs (see [`run_at`]), so that outputs are never held while the timing
/// snapshots are: the peak stays near 3x the data.
const SPLIT_TIMING_BYTES: usize = 256 << 20;

/// Runs the compiled kernel `k` in a worker, its buffers filled from `store` straight into
/// the shared mapping (no copies): with `timing`,
/// its timed runs (the returned statistics); `read(i, bytes)` sees buffer `i` after the
/// checked run.
///
/// Before the worker starts, every buffer's size is checked against the parameter's extents in
/// `state`, and the flags may not redefine the kernel's extents (`-DN=...`).
fn run_compiled(
    state: &State,
    k: &CKernel,
    compiled: &runtime::Compiled,
    store: &Buffers,
    opts: &RunOptions,
    timing: Option<Timing>,
    read: &mut dyn FnMut(usize, &[u8]),
) -> Result<Option<TimeStats>, RunError> {
    check_extent_flags(k, opts)?;
    let mut tensors = Vec::new();
    let mut buffers = Vec::new();
    for p in &k.params {
        // A result stored over its operand starts from the operand's data.
        let from = p.accessed();
        let t = store.get(from).ok_or_else(|| RunError::Data(format!("no data for tensor `{from}`")))?;
        let want = p.len(state).map_err(|c| {
            RunError::Data(format!("the extents of `{}` use `{c}`, which has no value", p.name))
        })?;
        if t.data.len() != want || t.dtype != p.dtype {
            return Err(RunError::Data(format!(
                "internal error: the buffer of `{}` holds {} {} elements, and the kernel's C reads {want} {} \
                 elements: not run",
                p.name,
                t.data.len(),
                t.dtype,
                p.dtype
            )));
        }
        buffers.push(BufferSpec {
            read_only: !p.written,
            fresh: p.fresh,
            ..BufferSpec::new(p.name.to_string(), t.data.len() * element_bytes(t.dtype))
        });
        tensors.push(t);
    }
    let spec = RunSpec {
        so_path: compiled.so_path.clone(),
        symbol: ENTRY.to_string(),
        buffers,
        threads: opts.threads,
        timeout: opts.timeout,
        timing,
        worker: opts.worker.clone(),
    };
    let times = runtime::run_kernel_with(&spec, &mut |i, dst| write_bytes(tensors[i], dst), read)?;
    Ok((!times.is_empty()).then(|| TimeStats::from(times.as_slice())))
}

/// Refuses flags (`--cflags`, or `CFLAGS` in the environment) that define or undefine one of
/// the kernel's extents: the buffers are sized for the program's constants, and the C's
/// `#ifndef N` guards are there for exported kernels, not for moving the sizes under them.
fn check_extent_flags(k: &CKernel, opts: &RunOptions) -> Result<(), RunError> {
    let env: Vec<String> =
        std::env::var("CFLAGS").map(|v| v.split_whitespace().map(String::from).collect()).unwrap_or_default();
    let words: Vec<(&str, &String)> =
        opts.flags.opt.iter().map(|w| ("--cflags", w)).chain(env.iter().map(|w| ("CFLAGS", w))).collect();
    for (k2, (origin, w)) in words.iter().enumerate() {
        // `-DN=4`, `-UN`, or `-D N=4` (the name in the next word).
        let rest = match (w.strip_prefix("-D"), w.strip_prefix("-U")) {
            (Some(r), _) | (_, Some(r)) => r,
            _ => continue,
        };
        let rest = if rest.is_empty() { words.get(k2 + 1).map_or("", |(_, w)| w.as_str()) } else { rest };
        let name = rest.split('=').next().unwrap_or("");
        if k.const_c_names.iter().any(|c| c == name) {
            return Err(RunError::Data(format!(
                "{origin}: `{w}` would redefine the kernel's extent `{name}` under buffers sized for the \
                 program's value: give the size to teml instead (-D {name}=...)"
            )));
        }
    }
    Ok(())
}

/// The compiler that runs kernels with `opts`, and its exact arguments: how a timing was
/// taken, for reports.
pub fn toolchain(opts: &RunOptions) -> Option<(String, String)> {
    let c = compiler(opts).ok()?;
    Some((c.identity().to_string(), c.arguments(&opts.flags).join(" ")))
}

/// Compiles `kernel` into the cache without running it (the compiles of many candidates run
/// in parallel this way before they run one at a time): whether it was cached, and the seconds
/// the compile took.
pub fn compile_kernel(kernel: &CKernel, opts: &RunOptions) -> Result<(bool, f64), RunError> {
    let start = std::time::Instant::now();
    let c = compiler(opts)?.compile(&kernel.source, &opts.flags)?;
    Ok((c.cached, start.elapsed().as_secs_f64()))
}

/// Compiles a hand-written C translation unit exporting `teml_entry(void **args)` (the
/// machine probes of `teml bench`) and runs it on `buffers` with `opts` (timing included);
/// returns the buffers after the checked run and the timing. The source must compute the same
/// whatever its written buffers hold when it starts (as the probes do): nothing is restored
/// between timed runs, so no copy of the initial data passes through the caches just before
/// each one (a 64 MiB restore leaves half of a triad's output in a 32 MiB L3).
pub fn run_source(
    source: &str,
    buffers: &[Vec<u8>],
    opts: &RunOptions,
) -> Result<(Vec<Vec<u8>>, Option<TimeStats>), RunError> {
    let compiled = compiler(opts)?.compile(source, &opts.flags)?;
    let spec = RunSpec {
        so_path: compiled.so_path.clone(),
        symbol: ENTRY.to_string(),
        buffers: buffers
            .iter()
            .enumerate()
            .map(|(k, b)| BufferSpec { read_only: true, ..BufferSpec::new(format!("b{k}"), b.len()) })
            .collect(),
        threads: opts.threads,
        timeout: opts.timeout,
        timing: opts.timing,
        worker: opts.worker.clone(),
    };
    let refs: Vec<&[u8]> = buffers.iter().map(|b| b.as_slice()).collect();
    let out = runtime::run_kernel(&spec, &refs)?;
    let stats = out.stats();
    Ok((out.outputs, stats))
}

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

fn unchecked_message(ks: &[usize]) -> String {
    let list = ks.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", ");
    let (s, was) = if ks.len() == 1 { ("", "was") } else { ("s", "were") };
    format!(
        "kernel{s} {list}: the full-size binary {was} not checked (see the report): not verified, not reported as a \
         speedup"
    )
}

fn mismatch_message(ks: &[usize]) -> String {
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
        let named: Vec<(Name, Nest)> = req.names.iter().cloned().zip(req.nests.iter().cloned()).collect();
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
        let mut run = self.execute(which, &self.opts)?;
        if !run.report.verified
            && run.report.worst.is_some()
            && let Some(fixed) = self.recheck(which, &run)?
        {
            run = fixed;
        }
        run.verified = match (&run.report.verified, &run.report.evidence.artifact) {
            (true, Some(artifact)) => {
                Some(Verified { which: which.clone(), pipeline: self.id, artifact: artifact.clone() })
            }
            _ => None,
        };
        Ok(run)
    }

    /// A kernel that did not match, built again from the same C with the flags of
    /// [`fallback_flags`]: the first build that verifies, with the compiler defect recorded.
    fn recheck(&self, which: &KernelRef, failed: &KernelRun) -> Result<Option<KernelRun>, RunError> {
        let Some(artifact) = &failed.report.evidence.artifact else { return Ok(None) };
        for (cc, flags) in fallback_flags(&self.opts) {
            let opts = RunOptions { flags: flags.clone(), compiler: cc.clone(), ..self.opts.clone() };
            let Ok(mut run) = self.execute(which, &opts) else { continue };
            if !run.report.verified {
                continue;
            }
            run.report.evidence.compiler_defect = Some(CompilerDefect {
                compiler: artifact.compiler.clone(),
                failing_flags: artifact.flags.clone(),
                mismatch: failed.report.worst.clone().unwrap_or_default(),
                working_flags: flags.opt.clone(),
                working_compiler: cc.clone(),
                reproducer: artifact.c_path.clone(),
            });
            let d = run.report.evidence.compiler_defect.as_ref().map(|d| format!("; {}", d.describe()));
            run.report.verification.push_str(&d.unwrap_or_default());
            return Ok(Some(run));
        }
        Ok(None)
    }

    fn execute(&self, which: &KernelRef, opts: &RunOptions) -> Result<KernelRun, RunError> {
        let req = which.request(&self.state)?;
        // Refused before anything runs, a reduced-size verification included.
        let all: Vec<Nest> = req.nests.iter().cloned().chain(untransformed(&self.state, &req)?).collect();
        check_memory(&self.state, &all, opts)?;
        let cost = reference_cost(&self.state, &req)?;
        let label = which.label(&self.state);
        if cost <= opts.max_reference_instances {
            return run_at(&self.state, &req, &label, opts, Check::Full { instances: cost });
        }
        let (small, size, small_cost) = self.reduced(which)?;
        let small_req = which.request(&small)?;
        let reference = match same_path(&req, &small_req) {
            Err(why) => ReferenceCheck::Refused { size, why },
            Ok(()) => {
                let small_opts = RunOptions { timing: None, ..opts.clone() };
                let s = run_at(
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
        run_at(&self.state, &req, &label, opts, Check::Sampled { reference, instances: cost })
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

/// The C function of the kernel named `label`.
pub fn symbol(label: &str) -> String {
    format!("teml_{label}")
}

fn index_label(which: &KernelRef) -> String {
    match which {
        KernelRef::Codegen(k) => (k + 1).to_string(),
        KernelRef::Nest(n) => format!("`{n}`"),
    }
}

/// How a kernel is checked; `instances`: the statement instances the reference interpreter
/// runs (or would run, at full size) for it.
enum Check {
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
fn same_path(full: &KernelRequest, small: &KernelRequest) -> Result<(), String> {
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
fn fallback_flags(opts: &RunOptions) -> Vec<(Option<std::path::PathBuf>, runtime::Flags)> {
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

/// The flags of the untransformed program's own build, the full-size check of a kernel the
/// oracle cannot evaluate: another optimization level than the kernel's and no `-march`, so
/// that one defect of the compiler's optimizers cannot pass both.
fn independent_flags(opts: &RunOptions) -> runtime::Flags {
    let o1 = opts.flags.opt.iter().any(|w| w == "-O1");
    runtime::Flags { opt: vec![if o1 { "-O0" } else { "-O1" }.to_string()] }
}

/// Generates, compiles, runs and checks the kernel of `req` in `state`, from fresh initial
/// data; times it and its untransformed build with `opts.timing`.
///
/// Memory: the initial data is held once (it becomes the reference in place once the kernel
/// and its baseline have run from it), the kernel's buffers once in the shared mapping (the
/// written ones twice while timing), and the outputs of the tensors the kernel writes once
/// more. The caller checks that this fits ([`check_memory`]).
fn run_at(
    state: &State,
    req: &KernelRequest,
    label: &str,
    opts: &RunOptions,
    check: Check,
) -> Result<KernelRun, RunError> {
    let name = symbol(label);
    let named: Vec<(Name, Nest)> = req.names.iter().cloned().zip(req.nests.iter().cloned()).collect();
    let kernel = codegen::generate_keeping(state, &name, &named, &opts.keep)?;
    let reference_nests = untransformed(state, req)?;
    let all: Vec<Nest> = req.nests.iter().chain(&reference_nests).cloned().collect();
    let mut store = initial_store_cropped(state, &all, opts, matches!(check, Check::Reduced { .. }))?;
    // The temporaries the kernel holds itself (`lift`, `privatize`) need no data here.
    let temps = temporaries(req);
    store.retain(|t, _| !temps.contains(t) || kernel.params.iter().any(|p| &p.name == t));
    let mag = magnitude(&store);

    // The untransformed build, same flags, same run, same initial data: the speedup's
    // denominator (run before the reference turns the initial data into its outputs). It must
    // agree with the kernel; its outputs are compared as they come back, never held.
    // A lifted expression as written can cost orders of magnitude more than its sequence
    // (helm as one product: 4e13 flops): past UNTIMED_FLOPS it is verified, never timed.
    let written_flops = flop_count(state, &reference_nests);
    let untimed = written_flops > UNTIMED_FLOPS && req.nests.iter().any(|n| !n.rewrites.is_empty());
    let base = if opts.timing.is_some() && opts.time_untransformed && !untimed {
        let base_named: Vec<(Name, Nest)> = reference_nests
            .iter()
            .enumerate()
            .map(|(k, n)| (Name::from(format!("untransformed{}", k + 1).as_str()), n.clone()))
            .collect();
        let base = codegen::generate(state, &format!("{name}_untransformed"), &base_named)?;
        let compiled = compiler(opts)?.compile(&base.source, &opts.flags)?;
        Some((base, compiled))
    } else {
        None
    };
    let compiled = compiler(opts)?.compile(&kernel.source, &opts.flags)?;
    // The data the kernel starts from, for the record: timing must start from the same.
    let inputs = inputs_hash(&kernel, &store);
    // With large data the timed runs of both builds come first, each in its own job, and the
    // checked runs after: the kernel's outputs are never held beside timing snapshots.
    let bytes: usize = kernel
        .params
        .iter()
        .filter_map(|p| store.get(&p.name))
        .map(|t| t.data.len() * element_bytes(t.dtype))
        .sum();
    let split = opts.timing.is_some() && bytes >= SPLIT_TIMING_BYTES;
    let (mut time, mut base_time) = (None, None);
    if split {
        time = run_compiled(state, &kernel, &compiled, &store, opts, opts.timing, &mut |_, _| {})?;
        if let Some((b, bc)) = &base {
            base_time = run_compiled(state, b, bc, &store, opts, opts.timing, &mut |_, _| {})?;
        }
    }
    let checked_timing = if split { None } else { opts.timing };
    let mut outs: Outputs = vec![None; kernel.params.len()];
    let t = run_compiled(state, &kernel, &compiled, &store, opts, checked_timing, &mut |i, src| {
        if kernel.params[i].written {
            outs[i] = Some(from_bytes(src, kernel.params[i].dtype));
        }
    })?;
    time = time.or(t);
    let baseline = match &base {
        Some((b, bc)) => {
            let mut bcmp = Comparison::default();
            let t = run_compiled(state, b, bc, &store, opts, checked_timing, &mut |i, src| {
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
    // The reference: the untransformed statements, in place on the initial data.
    let (checked_in_full, instances) = match &check {
        Check::Full { instances } | Check::Reduced { instances } => (true, *instances),
        Check::Sampled { instances, .. } => (false, *instances),
    };
    // A kernel with any float tensor computes some values in float: every output is compared
    // at float tolerance.
    let least =
        if kernel.params.iter().any(|p| p.dtype == DType::Float) { DType::Float } else { DType::Double };
    // Each written element's rounding bound, from the initial data (before the reference turns
    // it into its outputs).
    // Past ROUNDING_BOUND_INSTANCES the two extra interpreter runs would cost more than they
    // are worth: the relative tolerance applies, and the report says so.
    let bounded = checked_in_full && instances <= ROUNDING_BOUND_INSTANCES;
    let element_bounds = if bounded {
        let names: Vec<Name> = kernel
            .params
            .iter()
            .filter(|p| p.written && !temps.contains(&p.name))
            .map(|p| p.name.clone())
            .collect();
        super::compare::rounding_bounds(state, &reference_nests, &store, &names, least)?
    } else {
        BTreeMap::new()
    };
    if checked_in_full {
        interp::run(state, &reference_nests, &mut store).map_err(RunError::Data)?;
    }
    let mut cmp = Comparison::default();
    let mut written = Buffers::new();
    // A lifted result may differ from the original by what rounding allows a reassociated sum
    // (docs/algebra.md): its comparison's floor is that bound over the tolerance.
    let unit = super::compare::unit_roundoff(least);
    // Each rewrite's bound at the sizes compared (a reduced size sums fewer terms): (rewrite,
    // bound, terms).
    let bounds: Vec<(&crate::ir::Rewrite, f64, f64)> = req
        .nests
        .iter()
        .flat_map(|n| &n.rewrites)
        .map(|r| {
            let terms = if r.by == "lift" {
                crate::ops::lift::terms(state, &r.original).unwrap_or(r.terms)
            } else {
                crate::ops::algebra::terms(state, &r.original)
            };
            (r, r.rounding_bound(unit, mag, terms), terms)
        })
        .collect();
    let widened = |name: &Name| {
        bounds
            .iter()
            .filter(|(r, _, _)| &r.result == name)
            .map(|(_, b, _)| b / tolerance(least))
            .fold(mag, f64::max)
    };
    // Per compared tensor: how many elements had a rounding bound, and how many the relative
    // tolerance (docs/verification.md), for the report.
    let mut tolerances: Vec<(Name, (usize, usize))> = Vec::new();
    for (p, got) in kernel.params.iter().zip(outs) {
        let (Some(got), Some(t)) = (got, store.get(&p.name)) else { continue };
        if temps.contains(&p.name) {
            continue;
        }
        if checked_in_full {
            let rewritten = bounds.iter().any(|(r, _, _)| r.result == p.name);
            match element_bounds.get(&p.name) {
                Some(b) => {
                    let rule = (tolerance(least), widened(&p.name), rewritten);
                    let used = compare_bounded(&p.name, &t.dims, &got, &t.data, b, rule, &mut cmp);
                    tolerances.push((p.name.clone(), used));
                }
                None => compare_within(
                    &p.name,
                    &t.dims,
                    &got,
                    &t.data,
                    tolerance(least),
                    widened(&p.name),
                    &mut cmp,
                ),
            }
        }
        written.insert(p.name.clone(), Tensor { dtype: t.dtype, dims: t.dims.clone(), data: got });
    }
    let (reference, full_size) = match check {
        Check::Full { .. } => (ReferenceCheck::FullSize, FullSizeCheck::Interpreter),
        Check::Reduced { .. } => {
            (ReferenceCheck::Reduced { size: String::new() }, FullSizeCheck::Interpreter)
        }
        Check::Sampled { reference, .. } => {
            // `store` still holds the initial data here.
            let stmts: Vec<crate::ir::TExpr> =
                reference_nests.iter().flat_map(|n| n.origin.clone()).collect();
            let spot = spot_check(
                state,
                &stmts,
                &kernel,
                &store,
                &written,
                (tolerance(least), &widened),
                &temps,
                &mut cmp,
            )?;
            let full = match spot.short {
                None => FullSizeCheck::Oracle { samples: spot.checked },
                // The oracle could not sample every written tensor: every element against the
                // untransformed program, compiled on its own.
                Some(short) => against_untransformed(
                    state,
                    &reference_nests,
                    &name,
                    &store,
                    &written,
                    (tolerance(least), &widened),
                    &temps,
                    opts,
                    written_flops,
                    &mut cmp,
                )?
                .unwrap_or_else(|why| FullSizeCheck::Nothing { why: format!("{short}, and {why}") }),
            };
            (reference, full)
        }
    };
    let mut note = reference.describe();
    if !checked_in_full {
        let sep = if matches!(reference, ReferenceCheck::Refused { .. }) { ";" } else { ":" };
        note.push_str(&format!("{sep} the full size needs {instances} interpreted statement instances"));
    }
    if let Some(f) = full_size.describe() {
        note.push_str(&format!("; {f}"));
    }
    if untimed && opts.timing.is_some() && opts.time_untransformed {
        note.push_str(&format!(
            "; the program as written ({written_flops:.2e} flops) is not timed: no speedup over it"
        ));
    }
    for (r, bound, terms) in &bounds {
        note.push_str(&format!(
            "; `{}` {}: compared with the expression as written, within {bound:.1e} absolute or {:.0e} relative \
             (rounding of {} sums of {} factors on data up to {mag:.3})",
            r.result,
            r.done(),
            tolerance(least),
            terms,
            r.factors
        ));
    }
    if let Some(t) = tolerance_note(&tolerances, least) {
        note.push_str(&t);
    }
    if checked_in_full && !bounded {
        note.push_str(&format!(
            "; compared within {:.0e} relative (no rounding bounds past {ROUNDING_BOUND_INSTANCES:.0e} interpreted \
             instances)",
            tolerance(least)
        ));
    }
    // Verified: every comparison made agreed, and something independent of the kernel's own
    // transformation checked the full-size binary.
    let verified = cmp.worst.is_none() && full_size.checked();
    // A kernel that failed verification has no time anywhere: a fast wrong variant must never
    // win a comparison.
    let time = time.filter(|_| verified);
    let flops = flop_count(state, &performed(state, req)?);
    let c = compiler(opts)?;
    let evidence = Evidence {
        reference,
        full_size,
        artifact: Some(Artifact {
            so_path: compiled.so_path.clone(),
            c_path: compiled.c_path.clone(),
            source_hash: source_hash(&kernel.source),
            inputs_hash: inputs,
            compiler: c.identity().to_string(),
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
        max_abs_error: cmp.max_abs,
        max_rel_error: cmp.max_rel,
        worst: cmp.worst,
        time,
        median_s: time.map(|t| t.median_s),
        flops,
        gflops: time.map(|t| flops as f64 / t.median_s / 1e9),
        baseline: None,
        speedup: None,
        c_path: compiled.c_path.clone(),
        cached: compiled.cached,
    };
    if let (true, Some((bcmp, bstats))) = (verified, baseline) {
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
    let mut outputs = Buffers::new();
    for p in &kernel.params {
        if let Some(t) = written.remove(&p.name).or_else(|| store.remove(&p.name)) {
            outputs.insert(p.name.clone(), t);
        }
        // The operand a result was stored over keeps its meaning: its data as it started.
        if let Some(x) = &p.holds
            && let Some(t) = store.remove(x)
        {
            outputs.insert(x.clone(), t);
        }
    }
    Ok(KernelRun { report, outputs, verified: None })
}

/// Checks the full-size kernel's outputs `written` in full against the untransformed program
/// (`reference_nests`) compiled on its own ([`independent_flags`]) and run on the same initial
/// data `initial`: what checked it, or why it could not be checked.
#[allow(clippy::too_many_arguments)]
fn against_untransformed(
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
    Ok(run_at(state, req, &label, opts, Check::Full { instances: cost })?.report)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let named: Vec<(Name, Nest)> = req.names.iter().cloned().zip(req.nests.iter().cloned()).collect();
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
