//! The one pipeline behind `teml run`, the REPL's `:c`/`:run`/`:time` and the tuner: a
//! [`Program`] (re-evaluable at other sizes) is evaluated once; then for each kernel
//! ([`KernelRef`]) [`Pipeline::run`] generates C, compiles it (cached), runs it in a worker
//! process on fresh initial data, checks every written tensor against the reference
//! interpreter running that kernel's own untransformed statements on the same data (at a
//! reduced size when the full one is too big, then spot-checks the full-size kernel against
//! the expression oracle), times it, and times the untransformed build compiled with the same
//! flags in the same run for the speedup, returning a typed [`KernelRun`]. Nothing is reported
//! as a speedup unless it was verified. The shells only parse arguments and print reports.

pub use crate::interp::Buffers;
pub use crate::runtime::{Flags, Timing};

use crate::codegen::{self, CKernel, ENTRY};
use crate::error::ProgramError;
use crate::interp::{self, Tensor};
use crate::ir::{DType, Init, KernelRequest, LNode, Name, Nest, State, lower};
use crate::runtime::{self, BufferSpec, Compiler, RunSpec, RuntimeError, TimeStats};
use crate::script::Env;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Everything that can stop a kernel from being reported.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The meta-program cannot be turned into a kernel (an illegal mark, a missing constant).
    #[error("{0}")]
    Meta(#[from] crate::Error),
    /// Compiling, loading or running failed (compile error, crash, time-out).
    #[error("{0}")]
    Runtime(#[from] RuntimeError),
    /// Input data that does not fit, or the reference could not run.
    #[error("{0}")]
    Data(String),
    /// The program did not evaluate again (at a reduced size, for verification).
    #[error("{0}")]
    Program(#[from] ProgramError),
}

impl RunError {
    /// An illegal transformation or a mark code generation cannot realise: the path, not the
    /// program or the machine, is at fault.
    pub fn is_refusal(&self) -> bool {
        match self {
            RunError::Meta(e) => e.is_refusal(),
            RunError::Program(e) => e.is_refusal(),
            _ => false,
        }
    }
}

/// How to run kernels.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Optimization flags (the `CFLAGS` environment variable is added by the compiler).
    pub flags: Flags,
    /// `OMP_NUM_THREADS` for the kernels.
    pub threads: Option<usize>,
    /// Timing of the kernel and of the untransformed baseline; `None` runs and verifies only.
    pub timing: Option<Timing>,
    /// Limit for one worker run (verification run, warm-up and timed runs).
    pub timeout: Duration,
    /// Input tensors from `.npy` files (`-i NAME=PATH`); they override `init` statements.
    pub inputs: BTreeMap<Name, PathBuf>,
    /// Seed of the generator that fills tensors without other data.
    pub seed: u64,
    /// The most statement instances the reference interpreter runs for one kernel.
    pub max_reference_instances: u64,
    /// The worker executable (default: found next to the current executable).
    pub worker: Option<PathBuf>,
    /// Where the C sources and shared objects are cached (default: the user's cache).
    pub cache_dir: Option<PathBuf>,
    /// A C compiler to use instead of the system's (e.g. `clang-16` for the Polly anchor of
    /// `teml bench`); `flags` go with it.
    pub compiler: Option<PathBuf>,
    /// With `timing`, also time the untransformed build of the same statements (the speedup's
    /// denominator); `teml bench` times its baseline once, on its own.
    pub time_untransformed: bool,
    /// How long one compile may take (`teml tune` gives candidates less).
    pub compile_timeout: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            flags: Flags::default(),
            threads: None,
            timing: None,
            timeout: Duration::from_secs(120),
            inputs: BTreeMap::new(),
            seed: 42,
            max_reference_instances: 400_000_000,
            worker: None,
            cache_dir: None,
            compiler: None,
            time_untransformed: true,
            compile_timeout: runtime::compiler::COMPILE_TIMEOUT,
        }
    }
}

/// What one kernel did.
#[derive(Clone, Debug, Serialize)]
pub struct KernelReport {
    /// The kernel's stable name: the one its `codegen` gives, else its nests' joined by `_`
    /// (the C function is `teml_<name>`).
    pub name: String,
    /// The nests it runs, in order.
    pub nests: Vec<String>,
    /// Where its `codegen` statement is (`file:line:col`), when it has one.
    pub at: Option<String>,
    /// Every written tensor matched the reference within tolerance.
    pub verified: bool,
    /// How verification was done ("full size", or a reduced size).
    pub verification: String,
    /// Largest absolute difference from the reference.
    pub max_abs_error: f64,
    /// Largest relative difference from the reference.
    pub max_rel_error: f64,
    /// The element that differs most, when verification failed.
    pub worst: Option<String>,
    /// Kernel timing.
    pub time: Option<TimeStats>,
    /// Median time in seconds (from `time`).
    pub median_s: Option<f64>,
    /// Floating-point operations of one run (from the trees).
    pub flops: u64,
    /// GFLOP/s at the median time.
    pub gflops: Option<f64>,
    /// Timing of the untransformed build of the same statements, same flags, same run.
    pub baseline: Option<TimeStats>,
    /// Baseline median over kernel median.
    pub speedup: Option<f64>,
    /// The generated C source (in the cache).
    pub c_path: PathBuf,
    /// The shared object was already in the cache.
    pub cached: bool,
}

/// The untransformed program behind a request: each origin assignment built anew, in order.
pub fn untransformed(state: &State, req: &KernelRequest) -> Result<Vec<Nest>, RunError> {
    let mut out = Vec::new();
    for n in &req.nests {
        for o in &n.origin {
            out.push(crate::ops::build(state, o)?);
        }
    }
    Ok(out)
}

/// Sum over every statement instance of `weight(statement)`, trip counts evaluated with the
/// named constants; saturating (a count too large to represent is too large to interpret).
fn weigh(state: &State, nests: &[Nest], weight: &dyn Fn(&crate::ir::TExpr) -> u64) -> u64 {
    fn go(x: &LNode, trips: u64, state: &State, weight: &dyn Fn(&crate::ir::TExpr) -> u64) -> u64 {
        match x {
            LNode::Stmt(s) => trips.saturating_mul(weight(s)),
            LNode::Loop(l) => {
                let span = l.ub.sub(&l.lb).eval(&|v| state.constant(v));
                let n = span.map_or(0, |d| (d / l.step.max(1)).saturating_add(1).max(0) as u64);
                l.body
                    .iter()
                    .fold(0u64, |acc, c| acc.saturating_add(go(c, trips.saturating_mul(n), state, weight)))
            }
        }
    }
    nests.iter().flat_map(|n| n.items()).fold(0u64, |acc, x| acc.saturating_add(go(x, 1, state, weight)))
}

/// Floating-point operations of one run of the untransformed program.
pub fn flop_count(state: &State, nests: &[Nest]) -> u64 {
    weigh(state, nests, &|s| lower(s).map_or(0, |l| crate::ir::lower::flops(&l)))
}

/// Statement instances of the untransformed program (the reference interpreter's work).
pub fn reference_cost(state: &State, req: &KernelRequest) -> Result<u64, RunError> {
    Ok(weigh(state, &untransformed(state, req)?, &|_| 1))
}

/// splitmix64: a tiny, stable generator, so that a seed means the same data in every version.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform values in [0.5, 1.5): well away from zero (divisors) and of one sign (sums do not
/// cancel), so that reassociated sums compare tightly. Seeded per tensor name.
pub fn random_data(seed: u64, name: &str, n: usize, dtype: DType) -> Vec<f64> {
    let mut s = seed
        ^ name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    (0..n)
        .map(|_| {
            let x = 0.5 + (splitmix(&mut s) >> 11) as f64 / (1u64 << 53) as f64;
            if dtype == DType::Float { x as f32 as f64 } else { x }
        })
        .collect()
}

/// Initial data of a tensor: `-i` file, else its `init` statement, else seeded random values.
pub fn initial_data(
    state: &State,
    opts: &RunOptions,
    name: &Name,
    dtype: DType,
    dims: &[usize],
) -> Result<Vec<f64>, RunError> {
    initial_data_cropped(state, opts, name, dtype, dims, false)
}

/// [`initial_data`]; with `crop`, data from a file larger than `dims` gives its leading block
/// (element `[i][j]` of the smaller tensor is `[i][j]` of the file's), which is how a program
/// verified at a reduced size reads the inputs given for the full size.
fn initial_data_cropped(
    state: &State,
    opts: &RunOptions,
    name: &Name,
    dtype: DType,
    dims: &[usize],
    crop: bool,
) -> Result<Vec<f64>, RunError> {
    let n: usize = dims.iter().product();
    let from_file = |path: &std::path::Path| -> Result<Vec<f64>, RunError> {
        let a = runtime::npy::read_npy(path)?;
        let shape: Vec<usize> = a.shape.iter().map(|&d| d as usize).collect();
        let fits = crop && shape.len() == dims.len() && shape.iter().zip(dims).all(|(f, d)| f >= d);
        if shape != dims && !fits {
            return Err(RunError::Data(format!(
                "{}: expected shape {dims:?} for tensor `{name}`, found {shape:?}",
                path.display()
            )));
        }
        let mut v = a.data.to_f64();
        if shape != dims {
            v = leading_block(&v, &shape, dims);
        }
        Ok(if dtype == DType::Float { v.into_iter().map(|x| x as f32 as f64).collect() } else { v })
    };
    if let Some(p) = opts.inputs.get(name) {
        return from_file(p);
    }
    match state.inits.get(name) {
        Some(Init::Value(x)) => Ok(vec![if dtype == DType::Float { *x as f32 as f64 } else { *x }; n]),
        Some(Init::Npy(p)) => from_file(std::path::Path::new(p)),
        Some(Init::Random) | None => Ok(random_data(opts.seed, name, n, dtype)),
    }
}

/// The leading `dims` block of a row-major array of shape `shape` (every `dims[d] <= shape[d]`).
fn leading_block(data: &[f64], shape: &[usize], dims: &[usize]) -> Vec<f64> {
    let n: usize = dims.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; dims.len()];
    for _ in 0..n {
        let off = idx.iter().zip(shape).fold(0usize, |acc, (i, s)| acc * s + i);
        out.push(data[off]);
        for d in (0..dims.len()).rev() {
            idx[d] += 1;
            if idx[d] < dims[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

fn element_bytes(dtype: DType) -> usize {
    match dtype {
        DType::Double => 8,
        DType::Float => 4,
    }
}

/// Writes `t`'s elements into `dst` in the kernel's layout (its element type, native order).
fn write_bytes(t: &Tensor, dst: &mut [u8]) {
    match t.dtype {
        DType::Double => {
            for (c, x) in dst.chunks_exact_mut(8).zip(&t.data) {
                c.copy_from_slice(&x.to_ne_bytes());
            }
        }
        DType::Float => {
            for (c, x) in dst.chunks_exact_mut(4).zip(&t.data) {
                c.copy_from_slice(&(*x as f32).to_ne_bytes());
            }
        }
    }
}

fn from_bytes(b: &[u8], dtype: DType) -> Vec<f64> {
    match dtype {
        DType::Double => {
            b.chunks_exact(8).map(|c| f64::from_ne_bytes(c.try_into().unwrap_or([0; 8]))).collect()
        }
        DType::Float => {
            b.chunks_exact(4).map(|c| f32::from_ne_bytes(c.try_into().unwrap_or([0; 4])) as f64).collect()
        }
    }
}

/// Differences between a kernel's output and the reference.
#[derive(Clone, Debug, Default)]
pub struct Comparison {
    /// Largest absolute difference.
    pub max_abs: f64,
    /// Largest relative difference.
    pub max_rel: f64,
    /// The worst element, when outside tolerance.
    pub worst: Option<String>,
}

/// Relative tolerance of a comparison: reassociated sums (vectorized, unrolled, tiled, fused
/// multiply-add) differ from the reference in the last bits.
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::Double => 1e-9,
        DType::Float => 1e-3,
    }
}

/// Compares `got` with `want` element-wise: |got - want| <= tol * max(|want|, 1e-3 * max|want|).
pub fn compare(name: &str, dims: &[usize], got: &[f64], want: &[f64], tol: f64, acc: &mut Comparison) {
    compare_within(name, dims, got, want, tol, 0.0, acc)
}

/// [`compare`] where values computed from data of magnitude `magnitude` (the largest initial
/// value of the kernel's tensors) may also differ by `tol * magnitude`: with fused
/// multiply-add, `a/b*b - a` leaves rounding residue (1e-33) where the reference has an exact
/// 0, and no relative measure can tell that from an error.
pub fn compare_within(
    name: &str,
    dims: &[usize],
    got: &[f64],
    want: &[f64],
    tol: f64,
    magnitude: f64,
    acc: &mut Comparison,
) {
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(f64::MIN_POSITIVE);
    let floor = (1e-3 * scale).max(magnitude);
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        let same_nan = g.is_nan() && w.is_nan();
        let abs = if same_nan { 0.0 } else { (g - w).abs() };
        let rel = abs / w.abs().max(floor);
        let bad = !same_nan && (rel > tol || abs.is_nan());
        acc.max_abs = acc.max_abs.max(if abs.is_nan() { f64::INFINITY } else { abs });
        acc.max_rel = acc.max_rel.max(if rel.is_nan() { f64::INFINITY } else { rel });
        if bad && acc.worst.is_none() {
            let mut idx = Vec::with_capacity(dims.len());
            let mut r = k;
            for d in dims.iter().rev() {
                idx.push(r % d.max(&1));
                r /= d.max(&1);
            }
            idx.reverse();
            let at: String = idx.iter().map(|i| format!("[{i}]")).collect();
            acc.worst = Some(format!("{name}{at}: kernel {g}, reference {w}"));
        }
    }
}

/// The largest absolute initial value of the tensors in `store` (finite ones).
pub fn magnitude(store: &Buffers) -> f64 {
    store.values().flat_map(|t| t.data.iter()).filter(|x| x.is_finite()).fold(0.0f64, |m, x| m.max(x.abs()))
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
fn run_compiled(
    k: &CKernel,
    compiled: &runtime::Compiled,
    store: &Buffers,
    opts: &RunOptions,
    timing: Option<Timing>,
    read: &mut dyn FnMut(usize, &[u8]),
) -> Result<Option<TimeStats>, RunError> {
    let mut tensors = Vec::new();
    let mut buffers = Vec::new();
    for p in &k.params {
        let t =
            store.get(&p.name).ok_or_else(|| RunError::Data(format!("no data for tensor `{}`", p.name)))?;
        buffers.push(BufferSpec {
            read_only: !p.written,
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

/// `time(l)` in scripts: the nests compiled, verified and timed as one kernel, as a JSON
/// object. A kernel inside a running script cannot be evaluated again at a reduced size, so its
/// reference must fit `opts.max_reference_instances` (else the object carries the error).
pub fn measure(state: &State, nests: &[(Name, Nest)], opts: &RunOptions) -> serde_json::Value {
    let req = KernelRequest {
        names: nests.iter().map(|(n, _)| n.clone()).collect(),
        nests: nests.iter().map(|(_, x)| x.clone()).collect(),
        at: None,
        label: None,
    };
    let st = State { kernels: vec![req], ..state.clone() };
    let program = Program::new("<time(l)>", BTreeMap::new(), |_| {
        Err("time(l): a kernel measured inside a script is verified at full size only; give smaller -D constants or a larger --max-reference".into())
    });
    let opts = RunOptions { timing: Some(opts.timing.unwrap_or_default()), ..opts.clone() };
    // How it was measured, whatever the outcome.
    let (threads, cflags) = (opts.threads, opts.flags.opt.join(" "));
    let pipe = Pipeline::with_state(program, st, opts);
    // A kernel that failed verification has no time (`run_at` drops it): `()` in the script.
    match pipe.run(&KernelRef::Codegen(0)) {
        Ok(run) => {
            let r = &run.report;
            serde_json::json!({
                "verified": r.verified,
                "verification": r.verification,
                "median_s": r.time.map(|t| t.median_s),
                "min_s": r.time.map(|t| t.min_s),
                "spread": r.time.map(|t| t.spread()),
                "reps": r.time.map_or(0, |t| t.reps),
                "gflops": r.gflops,
                "error": if r.verified { None } else { r.worst.clone() },
                "threads": threads,
                "cflags": cflags,
            })
        }
        Err(e) => serde_json::json!({
            "verified": false, "median_s": null, "min_s": null, "spread": null, "reps": 0,
            "gflops": null, "verification": null, "error": e.to_string(),
            "threads": threads, "cflags": cflags,
        }),
    }
}

/// The environment scripts run in: `time(l)` measures with the options `opts` holds when it
/// is called (so the REPL's `:threads` and `:cflags` apply to it), timing with their timing or
/// the default one; `print` goes to standard error with `print_to_stderr`.
pub fn script_env(opts: std::sync::Arc<std::sync::RwLock<RunOptions>>, print_to_stderr: bool) -> Env {
    let measure = move |s: &State, n: &[(Name, Nest)]| {
        let o = opts.read().map(|o| o.clone()).unwrap_or_else(|p| p.into_inner().clone());
        measure(s, n, &o)
    };
    Env { measure: Some(std::sync::Arc::new(measure)), print_to_stderr }
}

/// [`script_env`] with fixed options (`teml run`, `teml tune`).
pub fn script_env_with(opts: RunOptions, print_to_stderr: bool) -> Env {
    script_env(std::sync::Arc::new(std::sync::RwLock::new(opts)), print_to_stderr)
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
/// returns the buffers after the checked run and the timing.
pub fn run_source(
    source: &str,
    buffers: &[Vec<u8>],
    opts: &RunOptions,
) -> Result<(Vec<Vec<u8>>, Option<TimeStats>), RunError> {
    let compiled = compiler(opts)?.compile(source, &opts.flags)?;
    let spec = RunSpec {
        so_path: compiled.so_path.clone(),
        symbol: ENTRY.to_string(),
        buffers: buffers.iter().enumerate().map(|(k, b)| BufferSpec::new(format!("b{k}"), b.len())).collect(),
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

/// A meta-program the pipeline can evaluate again at other sizes (reduced-size verification,
/// the REPL's `:def`): a file, the REPL's log of inputs, or any function of the named
/// constants.
pub struct Program {
    /// What the user calls it, e.g. the file's path or `<repl>`.
    pub label: String,
    /// Named constants fixed from outside (`-D`, `:def`); they override the program's own
    /// `N = ...` defaults.
    pub defines: BTreeMap<Name, i64>,
    eval: Box<EvalFn>,
}

/// Evaluates a program from the named constants it is given.
pub type EvalFn = dyn Fn(&BTreeMap<Name, i64>) -> Result<State, ProgramError>;

impl Program {
    /// A program evaluated by `eval` from the named constants it is given.
    pub fn new(
        label: &str,
        defines: BTreeMap<Name, i64>,
        eval: impl Fn(&BTreeMap<Name, i64>) -> Result<State, ProgramError> + 'static,
    ) -> Program {
        Program { label: label.to_string(), defines, eval: Box::new(eval) }
    }

    /// A `.teml` or `.rhai` file; `unchecked` skips the legality check of transformations.
    pub fn file(path: &std::path::Path, defines: BTreeMap<Name, i64>, unchecked: bool) -> Program {
        Program::with_params(path, defines, unchecked, crate::ir::Params::default(), Env::default())
    }

    /// A file whose tuning parameters (`param(name, choices)`) take the choices `params` fixes
    /// (a candidate of `teml tune`), its scripts run in `env`.
    pub fn with_params(
        path: &std::path::Path,
        defines: BTreeMap<Name, i64>,
        unchecked: bool,
        params: crate::ir::Params,
        env: Env,
    ) -> Program {
        let p = path.to_path_buf();
        Program::new(&path.display().to_string(), defines, move |consts| {
            let base = State { unchecked, params: params.clone(), ..State::new() };
            let state = consts.iter().fold(base, |s, (n, v)| s.with_const(n, *v));
            eval_file_in(&p, &state, &env)
        })
    }

    /// Evaluates with the user's constants.
    pub fn eval(&self) -> Result<State, ProgramError> {
        (self.eval)(&self.defines)
    }

    /// Evaluates with other constants.
    pub fn eval_with(&self, consts: &BTreeMap<Name, i64>) -> Result<State, ProgramError> {
        (self.eval)(consts)
    }
}

/// Evaluates a program file from `state`: `.rhai` as a Rhai script, anything else in the
/// paper's syntax. Scripts run with no measurer ([`eval_file_in`] gives one).
pub fn eval_file(path: &std::path::Path, state: &State) -> Result<State, ProgramError> {
    eval_file_in(path, state, &Env::default())
}

/// [`eval_file`] with scripts run in `env`.
pub fn eval_file_in(path: &std::path::Path, state: &State, env: &Env) -> Result<State, ProgramError> {
    eval_chain(path, state, env, &mut Vec::new())
}

/// [`eval_file_in`] of a file reached through the `// program:` lines of the files in `chain`:
/// a file met twice is a cycle, refused (only `.teml` files can be named, and they name none,
/// so this is a second line of defence against unbounded recursion).
fn eval_chain(
    path: &std::path::Path,
    state: &State,
    env: &Env,
    chain: &mut Vec<PathBuf>,
) -> Result<State, ProgramError> {
    let key = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    if chain.contains(&key) {
        let names: Vec<String> = chain.iter().chain([&key]).map(|p| p.display().to_string()).collect();
        return Err(ProgramError::plain(format!(
            "error: {}: expected `{PROGRAM_DIRECTIVE}` lines that end in a .teml program, found a cycle: {}",
            path.display(),
            names.join(" -> ")
        )));
    }
    chain.push(key);
    let src =
        std::fs::read_to_string(path).map_err(|e| format!("error: cannot read {}: {e}", path.display()))?;
    let file = path.display().to_string();
    match path.extension().and_then(|e| e.to_str()) {
        Some("rhai") => {
            let start = match program_of(path, &src)? {
                Some(teml) => {
                    let s = eval_chain(&teml, state, env, chain)?;
                    State { kernels: Vec::new(), ..s }
                }
                None => state.clone(),
            };
            Ok(crate::script::eval_in(&src, &file, &start, &crate::script::Limits::default(), env)?)
        }
        _ => Ok(crate::lang::eval_with(&src, &file, state, &crate::script::Stdlib::get())?),
    }
}

/// The directive of a `.rhai` script that runs on top of a `.teml` program: a line
/// `// program: PATH` among its leading comments (PATH relative to the script's folder). The
/// program is evaluated first, its `codegen` requests dropped, and the script starts from its σ
/// (a search space over the kernel of `examples/mm.teml`, say). Only a `.teml` file can be
/// named, so a chain of programs always ends: a script cannot lead back to itself.
pub const PROGRAM_DIRECTIVE: &str = "// program:";

/// The `.teml` program a script names with [`PROGRAM_DIRECTIVE`], if any; an error, located
/// at the directive (`file:line:col`), when it names something else or no file.
pub fn program_of(script: &std::path::Path, src: &str) -> Result<Option<PathBuf>, String> {
    let leading =
        src.lines().enumerate().take_while(|(_, l)| l.trim().is_empty() || l.trim_start().starts_with("//"));
    for (k, line) in leading {
        let Some(p) = line.trim().strip_prefix(PROGRAM_DIRECTIVE) else { continue };
        let col = line.len() - line.trim_start().len() + 1;
        let at = format!("{}:{}:{col}", script.display(), k + 1);
        let dir = script.parent().unwrap_or(std::path::Path::new("."));
        let path = dir.join(p.trim());
        if path.extension().and_then(|e| e.to_str()) != Some("teml") {
            return Err(format!(
                "error: {at}: `{PROGRAM_DIRECTIVE} {}`: expected a .teml file (the tensors a script works on), found `{}`",
                p.trim(),
                p.trim()
            ));
        }
        if !path.is_file() {
            return Err(format!(
                "error: {at}: `{PROGRAM_DIRECTIVE} {}`: expected a .teml file, found no file {}",
                p.trim(),
                path.display()
            ));
        }
        return Ok(Some(path));
    }
    Ok(None)
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

/// Evidence that one kernel of a program verified: only [`Pipeline::run`] gives one, from a
/// verified run, and [`Pipeline::time`] and [`time_interleaved`] take one, so that nothing is
/// timed that was not verified first.
#[derive(Clone, Debug, PartialEq)]
pub struct Verified(KernelRef);

impl Verified {
    /// The kernel that verified.
    pub fn kernel(&self) -> &KernelRef {
        &self.0
    }
}

/// A variant timed in interleaved rounds: each round's time (the sum of its kernels' medians
/// in that round) and their statistics (median and spread over the rounds).
#[derive(Clone, Debug, PartialEq)]
pub struct Rounds {
    /// Each round's time, seconds, in order.
    pub rounds_s: Vec<f64>,
    /// Their statistics.
    pub stats: TimeStats,
}

/// Times verified variants in `rounds` interleaved rounds (the one way `teml bench` and `teml
/// tune` compare variants on a shared, noisy machine): each round times every variant once, all
/// its kernels in order, each with `per_round`. A variant is its pipeline and the evidence that
/// each of its kernels verified. A variant whose timing fails is dropped at its first failure,
/// with the error; the others go on.
pub fn time_interleaved(
    variants: &[(&Pipeline, &[Verified])],
    per_round: Timing,
    rounds: usize,
) -> Vec<Result<Rounds, RunError>> {
    let mut times: Vec<Result<Vec<f64>, RunError>> = variants.iter().map(|_| Ok(Vec::new())).collect();
    for _ in 0..rounds.max(1) {
        for ((pipe, kernels), slot) in variants.iter().zip(times.iter_mut()) {
            if slot.is_err() {
                continue;
            }
            let sum = kernels.iter().try_fold(0.0, |acc, v| Ok(acc + pipe.time(v, per_round)?.median_s));
            match (sum, slot.as_mut()) {
                (Ok(x), Ok(ts)) => ts.push(x),
                (Err(e), _) => *slot = Err(e),
                _ => {}
            }
        }
    }
    times
        .into_iter()
        .map(|t| t.map(|rounds_s| Rounds { stats: TimeStats::from(rounds_s.as_slice()), rounds_s }))
        .collect()
}

/// The pipeline: a program evaluated once at full size, and the options to run its kernels.
/// Every kernel is an independent variant: it starts from the same initial data (the `-i`
/// files, `init` statements, else the seeded fill) and is verified against the reference
/// running its own untransformed statements from that data.
pub struct Pipeline {
    program: Program,
    state: State,
    opts: RunOptions,
}

impl Pipeline {
    /// Evaluates `program`; fails with the program's located error.
    pub fn new(program: Program, opts: RunOptions) -> Result<Pipeline, ProgramError> {
        let state = program.eval()?;
        Ok(Pipeline { program, state, opts })
    }

    /// A pipeline over `program` already evaluated to `state` (the REPL's current state).
    pub fn with_state(program: Program, state: State, opts: RunOptions) -> Pipeline {
        Pipeline { program, state, opts }
    }

    /// The state at full size.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// The C source of one kernel, without compiling it.
    pub fn generate(&self, which: &KernelRef) -> Result<CKernel, RunError> {
        let req = which.request(&self.state)?;
        let named: Vec<(Name, Nest)> = req.names.iter().cloned().zip(req.nests.iter().cloned()).collect();
        Ok(codegen::generate(&self.state, &symbol(&which.label(&self.state)), &named)?)
    }

    /// Times one kernel that [`Pipeline::run`] verified, without checking it again
    /// ([`time_interleaved`] calls this once per round and variant).
    pub fn time(&self, verified: &Verified, timing: Timing) -> Result<TimeStats, RunError> {
        let which = verified.kernel();
        let req = which.request(&self.state)?;
        let kernel = self.generate(which)?;
        let opts = RunOptions { timing: Some(timing), ..self.opts.clone() };
        check_memory(&self.state, &req.nests, &opts)?;
        let store = initial_store(&self.state, &req.nests, &self.opts)?;
        let compiled = compiler(&opts)?.compile(&kernel.source, &opts.flags)?;
        let stats = run_compiled(&kernel, &compiled, &store, &opts, opts.timing, &mut |_, _| {})?;
        stats.ok_or_else(|| RunError::Data("the timed run reported no repetitions".into()))
    }

    /// The options kernels run with.
    pub fn options(&self) -> &RunOptions {
        &self.opts
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
    /// instances, the same program is evaluated with
    /// smaller named constants and that kernel is verified there; the full-size kernel is then
    /// checked at sampled elements by the expression oracle. A verification failure is a
    /// report with `verified: false`, not an error.
    pub fn run(&self, which: &KernelRef) -> Result<KernelRun, RunError> {
        let mut run = self.execute(which)?;
        run.verified = run.report.verified.then(|| Verified(which.clone()));
        Ok(run)
    }

    fn execute(&self, which: &KernelRef) -> Result<KernelRun, RunError> {
        let req = which.request(&self.state)?;
        // Refused before anything runs, a reduced-size verification included.
        let all: Vec<Nest> = req.nests.iter().cloned().chain(untransformed(&self.state, &req)?).collect();
        check_memory(&self.state, &all, &self.opts)?;
        let cost = reference_cost(&self.state, &req)?;
        if cost <= self.opts.max_reference_instances {
            return run_at(&self.state, &req, &which.label(&self.state), &self.opts, Check::Full);
        }
        let (small, what) = self.reduced(which)?;
        let small_req = which.request(&small)?;
        let small_opts = RunOptions { timing: None, ..self.opts.clone() };
        let verification = format!("reduced size ({what})");
        let s = run_at(&small, &small_req, &which.label(&self.state), &small_opts, Check::Reduced)?;
        if !s.report.verified {
            return Ok(KernelRun {
                report: KernelReport { verification, ..s.report },
                outputs: s.outputs,
                verified: None,
            });
        }
        let note = format!("{verification}: the full size needs {cost} interpreted statement instances");
        run_at(&self.state, &req, &which.label(&self.state), &self.opts, Check::Sampled(note))
    }

    /// The program at the largest size (every named constant capped at 64, 32, ..., 2) whose
    /// kernel `which` the reference can run, and what was reduced (e.g. `N=16`).
    fn reduced(&self, which: &KernelRef) -> Result<(State, String), RunError> {
        let mut cap = 64;
        let mut last: Option<ProgramError> = None;
        while cap >= 2 {
            let consts: BTreeMap<Name, i64> =
                self.state.consts.iter().map(|(n, v)| (n.clone(), (*v).min(cap))).collect();
            match self.program.eval_with(&consts) {
                Ok(s) => {
                    if let Ok(r) = which.request(&s)
                        && reference_cost(&s, &r).is_ok_and(|c| c <= self.opts.max_reference_instances)
                    {
                        let what = consts
                            .iter()
                            .filter(|(n, v)| self.state.constant(n) != Some(**v))
                            .map(|(n, v)| format!("{n}={v}"))
                            .collect::<Vec<_>>()
                            .join(", ");
                        return Ok((s, what));
                    }
                }
                Err(e) => last = Some(e),
            }
            cap /= 2;
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

/// How a kernel is checked.
enum Check {
    /// Against the reference interpreter on the whole output.
    Full,
    /// At a reduced size: against the reference interpreter; `-i` data cropped to its leading
    /// block.
    Reduced,
    /// At full size after a reduced-size verification: sampled elements against the
    /// expression oracle. The note says what was reduced.
    Sampled(String),
}

/// The initial data of every tensor the nests use: the `-i` files, `init` statements, else the
/// seeded fill (each kernel starts from its own copy).
pub fn initial_store(state: &State, nests: &[Nest], opts: &RunOptions) -> Result<Buffers, RunError> {
    initial_store_cropped(state, nests, opts, false)
}

fn initial_store_cropped(
    state: &State,
    nests: &[Nest],
    opts: &RunOptions,
    crop: bool,
) -> Result<Buffers, RunError> {
    let mut err = None;
    let store = interp::buffers_for(state, nests, &mut |name, dtype, dims| {
        initial_data_cropped(state, opts, name, dtype, dims, crop).unwrap_or_else(|e| {
            err.get_or_insert(e);
            Vec::new()
        })
    })
    .map_err(RunError::Data)?;
    match err {
        Some(e) => Err(e),
        None => Ok(store),
    }
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
    let kernel = codegen::generate(state, &name, &named)?;
    let reference_nests = untransformed(state, req)?;
    let all: Vec<Nest> = req.nests.iter().chain(&reference_nests).cloned().collect();
    let mut store = initial_store_cropped(state, &all, opts, matches!(check, Check::Reduced))?;
    let mag = magnitude(&store);

    // The untransformed build, same flags, same run, same initial data: the speedup's
    // denominator (run before the reference turns the initial data into its outputs). It must
    // agree with the kernel; its outputs are compared as they come back, never held.
    let base = if opts.timing.is_some() && opts.time_untransformed {
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
        time = run_compiled(&kernel, &compiled, &store, opts, opts.timing, &mut |_, _| {})?;
        if let Some((b, bc)) = &base {
            base_time = run_compiled(b, bc, &store, opts, opts.timing, &mut |_, _| {})?;
        }
    }
    let checked_timing = if split { None } else { opts.timing };
    let mut outs: Outputs = vec![None; kernel.params.len()];
    let t = run_compiled(&kernel, &compiled, &store, opts, checked_timing, &mut |i, src| {
        if kernel.params[i].written {
            outs[i] = Some(from_bytes(src, kernel.params[i].dtype));
        }
    })?;
    time = time.or(t);
    let baseline = match &base {
        Some((b, bc)) => {
            let mut bcmp = Comparison::default();
            let t = run_compiled(b, bc, &store, opts, checked_timing, &mut |i, src| {
                let p = &b.params[i];
                let got = kernel.params.iter().position(|q| q.name == p.name).and_then(|k| outs[k].as_ref());
                if let (true, Some(got), Some(t)) = (p.written, got, store.get(&p.name)) {
                    compare(&p.name, &t.dims, &from_bytes(src, p.dtype), got, tolerance(p.dtype), &mut bcmp);
                }
            })?;
            Some((bcmp, base_time.or(t)))
        }
        None => None,
    };
    // The reference: the untransformed statements, in place on the initial data.
    let checked_in_full = matches!(check, Check::Full | Check::Reduced);
    if checked_in_full {
        interp::run(state, &reference_nests, &mut store).map_err(RunError::Data)?;
    }
    // A kernel with any float tensor computes some values in float: every output is compared
    // at float tolerance.
    let least =
        if kernel.params.iter().any(|p| p.dtype == DType::Float) { DType::Float } else { DType::Double };
    let mut cmp = Comparison::default();
    let mut written = Buffers::new();
    for (p, got) in kernel.params.iter().zip(outs) {
        let (Some(got), Some(t)) = (got, store.get(&p.name)) else { continue };
        if checked_in_full {
            compare_within(&p.name, &t.dims, &got, &t.data, tolerance(least), mag, &mut cmp);
        }
        written.insert(p.name.clone(), Tensor { dtype: t.dtype, dims: t.dims.clone(), data: got });
    }
    let note = match &check {
        Check::Full => "full size".to_string(),
        Check::Reduced => "reduced size".to_string(),
        Check::Sampled(note) => {
            // `store` still holds the initial data here.
            let what = spot_check(state, req, &kernel, &store, &written, (tolerance(least), mag), &mut cmp)?;
            format!("{note}; {what}")
        }
    };
    let verified = cmp.worst.is_none();
    // A kernel that failed verification has no time anywhere: a fast wrong variant must never
    // win a comparison.
    let time = time.filter(|_| verified);
    let flops = flop_count(state, &reference_nests);
    let mut report = KernelReport {
        name: label.to_string(),
        nests: req.names.iter().map(|n| n.to_string()).collect(),
        at: req.at.clone(),
        verified,
        verification: note,
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
        // The baseline must agree with the kernel.
        if bcmp.worst.is_none()
            && let (Some(b), Some(t)) = (bstats, time)
        {
            report.baseline = Some(b);
            report.speedup = Some(b.median_s / t.median_s);
        }
    }
    // Every tensor the kernel uses, as the kernel left it: the written ones from the run, the
    // others (never written by kernel or reference) as they started.
    let mut outputs = Buffers::new();
    for p in &kernel.params {
        if let Some(t) = written.remove(&p.name).or_else(|| store.remove(&p.name)) {
            outputs.insert(p.name.clone(), t);
        }
    }
    Ok(KernelRun { report, outputs, verified: None })
}

/// Memory a run takes per byte of its tensors (held as 8-byte elements): the initial data
/// (which becomes the reference), the shared mapping (twice while timing) and the outputs.
fn memory_factor(opts: &RunOptions) -> f64 {
    if opts.timing.is_some() { 4.0 } else { 3.0 }
}

/// The memory the system can still give, in bytes (Linux: `MemAvailable`).
fn available_memory() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024.0)
}

/// Refuses, before anything is allocated, a kernel whose run would not fit in the memory
/// available: a clear message instead of the out-of-memory killer.
fn check_memory(state: &State, nests: &[Nest], opts: &RunOptions) -> Result<(), RunError> {
    // Shapes only: no data is allocated here.
    let shapes = interp::buffers_for(state, nests, &mut |_, _, _| Vec::new()).map_err(RunError::Data)?;
    let data: f64 = shapes.values().map(|t| t.dims.iter().map(|&d| d as f64).product::<f64>() * 8.0).sum();
    let need = data * memory_factor(opts);
    match available_memory() {
        Some(avail) if need > avail => Err(RunError::Data(format!(
            "expected a run that fits in memory, found one that needs about {:.1} GB (its tensors hold {:.1} GB; \
             verifying{} takes about {:.0}x that) where {:.1} GB are available: give smaller -D constants",
            need / 1e9,
            data / 1e9,
            if opts.timing.is_some() { " and timing" } else { "" },
            memory_factor(opts),
            avail / 1e9
        ))),
        _ => Ok(()),
    }
}

/// Elements of each written tensor the full-size spot check samples.
pub const SPOT_SAMPLES: usize = 24;

/// Leaf reads the expression oracle may spend on one kernel's spot check.
pub const SPOT_BUDGET: u64 = 50_000_000;

/// Checks the full-size kernel's outputs at sampled elements (the first, the last, and seeded
/// random ones) against the expression oracle computing those elements from the same initial
/// data, so that the binary that is timed is a binary that was checked. Says what was checked.
fn spot_check(
    state: &State,
    req: &KernelRequest,
    kernel: &CKernel,
    initial: &Buffers,
    outputs: &Buffers,
    (tol, magnitude): (f64, f64),
    cmp: &mut Comparison,
) -> Result<String, RunError> {
    let stmts: Vec<crate::ir::TExpr> = req.nests.iter().flat_map(|n| n.origin.clone()).collect();
    let mut spot = crate::oracle::Spot::new(state, &stmts, initial, SPOT_BUDGET);
    let mut checked = 0usize;
    let mut seed = 0x5EED_u64;
    let mut stop: Option<String> = None;
    'tensors: for p in kernel.params.iter().filter(|p| p.written) {
        let Some(got) = outputs.get(&p.name) else { continue };
        let n = got.data.len();
        if n == 0 {
            continue;
        }
        let mut picks: Vec<usize> = vec![0, n - 1];
        picks.extend((0..SPOT_SAMPLES.saturating_sub(2)).map(|_| (splitmix(&mut seed) % n as u64) as usize));
        picks.sort_unstable();
        picks.dedup();
        let mut pairs = Vec::new();
        for &k in &picks {
            let idx = unravel(k, &got.dims);
            match spot.element(&p.name, &idx) {
                Ok(w) => pairs.push((k, got.data[k], w)),
                Err(crate::oracle::OracleError::Budget(b)) => {
                    stop = Some(format!("the oracle's budget of {b} reads was spent"));
                    compare_sampled(&p.name, &got.dims, &pairs, tol, magnitude, cmp);
                    checked += pairs.len();
                    break 'tensors;
                }
                Err(crate::oracle::OracleError::Unsupported(why)) => {
                    return Ok(format!("full-size kernel not checked (the expression oracle {why})"));
                }
                Err(e) => return Err(RunError::Data(format!("spot check of {}: {e}", p.name))),
            }
        }
        compare_sampled(&p.name, &got.dims, &pairs, tol, magnitude, cmp);
        checked += pairs.len();
    }
    Ok(match stop {
        None => {
            format!("full-size kernel checked at {checked} sampled elements against the expression oracle")
        }
        Some(why) => format!(
            "full-size kernel checked at {checked} sampled elements against the expression oracle ({why})"
        ),
    })
}

fn unravel(mut k: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for (d, n) in dims.iter().enumerate().rev() {
        idx[d] = k % n.max(&1);
        k /= n.max(&1);
    }
    idx
}

/// [`compare`] on sampled elements `(linear index, kernel, reference)`, scaled by the largest
/// sampled reference value.
fn compare_sampled(
    name: &str,
    dims: &[usize],
    pairs: &[(usize, f64, f64)],
    tol: f64,
    magnitude: f64,
    acc: &mut Comparison,
) {
    let scale = pairs.iter().fold(0.0f64, |m, (_, _, w)| m.max(w.abs())).max(f64::MIN_POSITIVE);
    let floor = (1e-3 * scale).max(magnitude);
    for &(k, g, w) in pairs {
        let same_nan = g.is_nan() && w.is_nan();
        let abs = if same_nan { 0.0 } else { (g - w).abs() };
        let rel = abs / w.abs().max(floor);
        acc.max_abs = acc.max_abs.max(if abs.is_nan() { f64::INFINITY } else { abs });
        acc.max_rel = acc.max_rel.max(if rel.is_nan() { f64::INFINITY } else { rel });
        if !same_nan && (rel > tol || abs.is_nan()) && acc.worst.is_none() {
            let at: String = unravel(k, dims).iter().map(|i| format!("[{i}]")).collect();
            acc.worst = Some(format!("{name}{at}: kernel {g}, expression oracle {w}"));
        }
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
    Ok(run_at(state, req, &label, opts, Check::Full)?.report)
}

/// Writes tensor `name` of `store` as `.npy` (in its element type).
pub fn save_npy(store: &Buffers, name: &str, path: &std::path::Path) -> Result<(), RunError> {
    let t = store
        .get(name)
        .ok_or_else(|| RunError::Data(format!("-o {name}: no tensor `{name}` was computed or used")))?;
    let shape: Vec<u64> = t.dims.iter().map(|&d| d as u64).collect();
    match t.dtype {
        DType::Double => runtime::npy::write_npy_f64(path, &shape, &t.data)?,
        DType::Float => {
            let v: Vec<f32> = t.data.iter().map(|&x| x as f32).collect();
            runtime::npy::write_npy_f32(path, &shape, &v)?
        }
    }
    Ok(())
}

impl KernelReport {
    /// A short human-readable summary.
    pub fn summary(&self) -> String {
        let nests = if self.name == self.nests.join("_") {
            String::new()
        } else {
            format!(" ({})", self.nests.join(", "))
        };
        let mut s = format!(
            "kernel {}{nests}{}: {} (max rel error {:.2e}, {})",
            self.name,
            self.at.as_ref().map_or(String::new(), |a| format!(" at {a}")),
            if self.verified { "verified" } else { "MISMATCH" },
            self.max_rel_error,
            self.verification
        );
        if let Some(w) = &self.worst {
            s.push_str(&format!("\n  first mismatch: {w}"));
        }
        if let Some(t) = &self.time {
            s.push_str(&format!(
                "\n  time: median {:.3} ms, min {:.3} ms, spread {:.1}% over {} runs",
                t.median_s * 1e3,
                t.min_s * 1e3,
                t.spread() * 100.0,
                t.reps
            ));
            if let Some(g) = self.gflops {
                s.push_str(&format!(", {g:.2} GFLOP/s"));
            }
        }
        if let (Some(b), Some(x)) = (&self.baseline, self.speedup) {
            s.push_str(&format!("\n  untransformed: median {:.3} ms; speedup {x:.2}x", b.median_s * 1e3));
        }
        s
    }
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

    /// A file met again along `// program:` lines is a cycle, refused with the chain (only
    /// `.teml` files can be named, so no file can make one: the chain is given here).
    #[test]
    fn a_program_chain_that_cycles_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("a.teml");
        std::fs::write(&f, "A = tensor([4])\n").unwrap();
        let mut chain = vec![f.canonicalize().unwrap()];
        let e = eval_chain(&f, &State::new(), &Env::default(), &mut chain).unwrap_err();
        assert!(e.message.contains("found a cycle") && e.message.contains("a.teml -> "), "{e}");
        assert!(eval_chain(&f, &State::new(), &Env::default(), &mut Vec::new()).is_ok());
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
        let what = spot_check(&s, req, &kernel, &initial, &right, (1e-9, 1.5), &mut cmp).unwrap();
        assert_eq!(what, "full-size kernel checked at 24 sampled elements against the expression oracle");
        assert!(cmp.worst.is_none() && cmp.max_rel < 1e-12, "{cmp:?}");
        // A kernel that forgot to zero its accumulator: every element is off by the initial C.
        let mut wrong = right.clone();
        let c0 = &initial[&Name::from("C")];
        let c = wrong.get_mut(&Name::from("C")).unwrap();
        c.data.iter_mut().zip(&c0.data).for_each(|(x, y)| *x += y);
        let mut cmp = Comparison::default();
        spot_check(&s, req, &kernel, &initial, &wrong, (1e-9, 1.5), &mut cmp).unwrap();
        assert!(cmp.worst.as_deref().is_some_and(|w| w.starts_with("C[0][0]: kernel")), "{cmp:?}");
    }

    #[test]
    fn leading_blocks_crop_row_major_arrays() {
        let data: Vec<f64> = (0..12).map(f64::from).collect();
        assert_eq!(leading_block(&data, &[3, 4], &[2, 3]), vec![0.0, 1.0, 2.0, 4.0, 5.0, 6.0]);
        assert_eq!(unravel(7, &[3, 4]), vec![1, 3]);
    }
}
