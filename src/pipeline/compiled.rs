//! Compiling a kernel and running its binary in a worker process: the buffers checked against
//! the C's extents first, the outputs handed back as they come.
use super::data::write_bytes;
use super::options::{RunError, RunOptions};
use crate::codegen::{CKernel, ENTRY};
use crate::interp::Buffers;
use crate::ir::State;
use crate::runtime::{self, BufferSpec, Compiler, RunSpec, TimeStats, Timing};

pub(super) fn compiler(opts: &RunOptions) -> Result<Compiler, RunError> {
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
pub(super) type Outputs = Vec<Option<Vec<f64>>>;

/// From this many bytes of buffers on, a timed kernel's timed runs and its checked run are
/// separate worker jobs (see `check::check_at_size`), so that outputs are never held while the timing
/// snapshots are: the peak stays near 3x the data.
pub(super) const SPLIT_TIMING_BYTES: usize = 256 << 20;

/// Runs the compiled kernel `k` in a worker, its buffers filled from `store` straight into
/// the shared mapping (no copies): with `timing`,
/// its timed runs (the returned statistics); `read(i, bytes)` sees buffer `i` after the
/// checked run.
///
/// Before the worker starts, every buffer's size is checked against the parameter's extents in
/// `state`, and the flags may not redefine the kernel's extents (`-DN=...`).
pub(super) fn run_compiled(
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
            ..BufferSpec::new(p.name.to_string(), t.data.len() * t.dtype.size())
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
pub(super) fn check_extent_flags(k: &CKernel, opts: &RunOptions) -> Result<(), RunError> {
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
