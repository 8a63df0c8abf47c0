//! The pipeline behind `teml run`, the REPL's `:run`/`:time` and the tuner: generate C for a
//! `codegen` request, compile it (cached), run it in a worker process on real data, check every
//! written tensor against the reference interpreter running the untransformed program on the
//! same inputs, time it, and time the untransformed build compiled with the same flags in the
//! same run for the speedup. Nothing is reported as a speedup unless it was verified.

use crate::codegen::{self, CKernel, ENTRY};
use crate::interp::{self, Buffers, Tensor};
use crate::ir::{DType, Init, KernelRequest, LNode, Name, Nest, State, lower};
use crate::runtime::{self, BufferSpec, Compiler, Flags, RunSpec, RuntimeError, TimeStats, Timing};
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
        }
    }
}

/// What one kernel did.
#[derive(Clone, Debug, Serialize)]
pub struct KernelReport {
    /// Kernel name (the C function).
    pub name: String,
    /// The nests it runs, in order.
    pub nests: Vec<String>,
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
/// named constants.
fn weigh(state: &State, nests: &[Nest], weight: &dyn Fn(&crate::ir::TExpr) -> u64) -> u64 {
    fn go(x: &LNode, trips: u64, state: &State, weight: &dyn Fn(&crate::ir::TExpr) -> u64) -> u64 {
        match x {
            LNode::Stmt(s) => trips * weight(s),
            LNode::Loop(l) => {
                let span = l.ub.sub(&l.lb).eval(&|v| state.constant(v));
                let n = span.map_or(0, |d| (d / l.step + 1).max(0) as u64);
                l.body.iter().map(|c| go(c, trips * n, state, weight)).sum()
            }
        }
    }
    nests.iter().flat_map(|n| n.items()).map(|x| go(x, 1, state, weight)).sum()
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
    let n: usize = dims.iter().product();
    let from_file = |path: &std::path::Path| -> Result<Vec<f64>, RunError> {
        let a = runtime::npy::read_npy(path)?;
        let shape: Vec<usize> = a.shape.iter().map(|&d| d as usize).collect();
        if shape != dims {
            return Err(RunError::Data(format!(
                "{}: expected shape {dims:?} for tensor `{name}`, found {shape:?}",
                path.display()
            )));
        }
        let v = a.data.to_f64();
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

fn to_bytes(t: &Tensor) -> Vec<u8> {
    match t.dtype {
        DType::Double => t.data.iter().flat_map(|x| x.to_ne_bytes()).collect(),
        DType::Float => t.data.iter().flat_map(|x| (*x as f32).to_ne_bytes()).collect(),
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
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(f64::MIN_POSITIVE);
    let floor = 1e-3 * scale;
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

fn compiler(opts: &RunOptions) -> Result<Compiler, RunError> {
    let c = Compiler::detect()?;
    Ok(match &opts.cache_dir {
        Some(d) => c.with_cache_dir(d),
        None => c,
    })
}

/// Compiles `k` and runs it on `store`'s data; returns the outcome and whether it was cached.
fn compile_and_run(
    k: &CKernel,
    store: &Buffers,
    opts: &RunOptions,
) -> Result<(runtime::RunOutcome, runtime::Compiled), RunError> {
    let compiled = compiler(opts)?.compile(&k.source, &opts.flags)?;
    let mut buffers = Vec::new();
    let mut initial: Vec<Vec<u8>> = Vec::new();
    for p in &k.params {
        let t =
            store.get(&p.name).ok_or_else(|| RunError::Data(format!("no data for tensor `{}`", p.name)))?;
        let bytes = to_bytes(t);
        buffers.push(BufferSpec { name: p.name.to_string(), bytes: bytes.len() });
        initial.push(bytes);
    }
    let spec = RunSpec {
        so_path: compiled.so_path.clone(),
        symbol: ENTRY.to_string(),
        buffers,
        threads: opts.threads,
        timeout: opts.timeout,
        timing: opts.timing,
        worker: opts.worker.clone(),
    };
    let refs: Vec<&[u8]> = initial.iter().map(|b| b.as_slice()).collect();
    Ok((runtime::run_kernel(&spec, &refs)?, compiled))
}

/// Makes sure `store` has data for every tensor the nests use.
pub fn ensure_data(
    state: &State,
    nests: &[Nest],
    opts: &RunOptions,
    store: &mut Buffers,
) -> Result<(), RunError> {
    let mut err = None;
    let fresh = interp::buffers_for(state, nests, &mut |name, dtype, dims| {
        if store.contains_key(name) {
            return Vec::new();
        }
        initial_data(state, opts, name, dtype, dims).unwrap_or_else(|e| {
            err.get_or_insert(e);
            Vec::new()
        })
    })
    .map_err(RunError::Data)?;
    if let Some(e) = err {
        return Err(e);
    }
    for (name, t) in fresh {
        if let Some(old) = store.get(&name) {
            if old.dims != t.dims {
                return Err(RunError::Data(format!(
                    "tensor `{name}` has shape {:?} here but {:?} earlier",
                    t.dims, old.dims
                )));
            }
            continue;
        }
        store.insert(name, t);
    }
    Ok(())
}

/// The same program evaluated with smaller named constants, for verification when the full
/// size is too large to interpret.
pub struct Reduced<'a> {
    /// The state of the program evaluated at the reduced size.
    pub state: &'a State,
    /// The same `codegen` request at the reduced size.
    pub req: &'a KernelRequest,
    /// What was reduced, e.g. `N=16`.
    pub what: String,
}

/// Generates, compiles, runs, verifies and (with `opts.timing`) times the kernel of `req`,
/// numbered `index`, starting from the data in `store`; on success `store` holds the kernel's
/// outputs. A verification failure is a report with `verified: false`, not an error.
pub fn run_request(
    state: &State,
    req: &KernelRequest,
    index: usize,
    opts: &RunOptions,
    store: &mut Buffers,
) -> Result<KernelReport, RunError> {
    run_request_with(state, req, index, opts, store, None)
}

/// [`run_request`], verifying at a reduced size when the reference interpreter would run more
/// than `opts.max_reference_instances` statement instances at full size (and `reduced` is
/// given; without it that is an error).
pub fn run_request_with(
    state: &State,
    req: &KernelRequest,
    index: usize,
    opts: &RunOptions,
    store: &mut Buffers,
    reduced: Option<Reduced<'_>>,
) -> Result<KernelReport, RunError> {
    let name = if index == 0 { "teml_kernel".to_string() } else { format!("teml_kernel{index}") };
    let cost = reference_cost(state, req)?;
    let full_size = cost <= opts.max_reference_instances;
    let mut note = "full size".to_string();
    if !full_size {
        let Some(r) = reduced else {
            return Err(RunError::Data(format!(
                "kernel {name}: the reference interpreter would run {cost} statement instances (limit {}); \
                 verify at a reduced size (smaller -D constants)",
                opts.max_reference_instances
            )));
        };
        let small_opts = RunOptions { timing: None, ..opts.clone() };
        let small = run_request_with(r.state, r.req, index, &small_opts, &mut Buffers::new(), None)?;
        if !small.verified {
            return Ok(KernelReport { verification: format!("reduced size ({})", r.what), ..small });
        }
        note =
            format!("reduced size ({}): the full size needs {cost} interpreted statement instances", r.what);
    }
    let named: Vec<(Name, Nest)> = req.names.iter().cloned().zip(req.nests.iter().cloned()).collect();
    let kernel = codegen::generate(state, &name, &named)?;
    let reference_nests = untransformed(state, req)?;
    ensure_data(state, &req.nests, opts, store)?;
    ensure_data(state, &reference_nests, opts, store)?;

    // The reference: the untransformed program on a copy of the same data.
    let reference = if full_size {
        let mut r = store.clone();
        interp::run(state, &reference_nests, &mut r).map_err(RunError::Data)?;
        Some(r)
    } else {
        None
    };

    let (outcome, compiled) = compile_and_run(&kernel, store, opts)?;
    let mut cmp = Comparison::default();
    let mut outputs = Vec::new();
    for (p, bytes) in kernel.params.iter().zip(&outcome.outputs) {
        let got = from_bytes(bytes, p.dtype);
        if let (true, Some(reference)) = (p.written, &reference) {
            let want = &reference[&p.name];
            compare(&p.name, &want.dims, &got, &want.data, tolerance(p.dtype), &mut cmp);
        }
        outputs.push((p.name.clone(), got));
    }
    let verified = cmp.worst.is_none();
    let time = outcome.stats();
    let flops = flop_count(state, &reference_nests);
    let mut report = KernelReport {
        name: name.clone(),
        nests: req.names.iter().map(|n| n.to_string()).collect(),
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
    if !verified {
        report.gflops = None;
        return Ok(report);
    }
    // The untransformed build, same flags, same run: the speedup's denominator.
    if opts.timing.is_some() {
        let base_named: Vec<(Name, Nest)> = reference_nests
            .iter()
            .enumerate()
            .map(|(k, n)| (Name::from(format!("untransformed{}", k + 1).as_str()), n.clone()))
            .collect();
        let base = codegen::generate(state, &format!("{name}_untransformed"), &base_named)?;
        let (bout, _) = compile_and_run(&base, store, opts)?;
        // The baseline must agree with the kernel (and with the reference where there is one).
        let mut bcmp = Comparison::default();
        for (p, bytes) in base.params.iter().zip(&bout.outputs) {
            if p.written
                && let Some((_, got)) = outputs.iter().find(|(n, _)| n == &p.name)
            {
                let dims = &store[&p.name].dims;
                compare(&p.name, dims, &from_bytes(bytes, p.dtype), got, tolerance(p.dtype), &mut bcmp);
            }
        }
        if bcmp.worst.is_none()
            && let (Some(b), Some(t)) = (bout.stats(), time)
        {
            report.baseline = Some(b);
            report.speedup = Some(b.median_s / t.median_s);
        }
    }
    for (n, got) in outputs {
        if let Some(t) = store.get_mut(&n) {
            t.data = got;
        }
    }
    Ok(report)
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
        let mut s = format!(
            "{} ({}): {} (max rel error {:.2e}, {})",
            self.name,
            self.nests.join(", "),
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
