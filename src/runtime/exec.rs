//! Running a compiled kernel in a child worker process, and timing it.
//!
//! The parent lays the kernel's buffers out in a shared-memory file, writes a small JSON job
//! file and starts `<worker> __worker <job.json>` (see [`super::worker_main`]). The worker maps
//! the same file; with timing, it runs the warm-up and timed repetitions first, each from the
//! initial data (restored from a snapshot region kept for every buffer the kernel writes); then
//! it runs the kernel once more from the initial data, leaving the outputs in the live buffers,
//! where the parent reads them, and reports the times on its standard output. A kernel that
//! crashes or never returns takes only the worker down; the parent reports it as an error.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use memmap2::MmapMut;
use serde::{Deserialize, Serialize};

use super::RuntimeError;

/// Every buffer starts at a multiple of this many bytes of the shared mapping (which is
/// page-aligned), so kernel arrays are this aligned.
pub const BUFFER_ALIGN: usize = 64;

/// Buffers of at least this many bytes are staggered: each starts at another offset within a
/// page ([`STAGGER`] bytes after the one before, modulo 4 KiB). Streams that start at the same
/// page offset (buffers of power-of-two sizes back to back, as the bandwidth probe's) fall
/// into the same cache sets and memory banks: on the development machine a triad over three
/// 256 MiB arrays back to back in one `/dev/shm` mapping ran at 27.6-29.4 GB/s, and at
/// 33.0-33.2 GB/s staggered by 576 bytes, as fast as three separate `malloc`s (bench/RESULTS.md).
pub const STAGGER_FROM: usize = 1 << 16;

/// The step between the page offsets of consecutive large buffers: 9 cache lines, so that 64
/// buffers in a row start at 64 different offsets.
pub const STAGGER: usize = 576;

/// The line prefix of the worker's report on its standard output.
pub(crate) const REPORT_PREFIX: &str = "TEML-WORKER-REPORT ";

/// The first argument that makes the `teml` executable act as a worker.
pub const WORKER_ARG: &str = "__worker";

/// One argument buffer of a kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferSpec {
    /// The tensor's name (for messages).
    pub name: String,
    /// Its size in bytes.
    pub bytes: usize,
    /// The kernel only reads it: timed runs need no copy of its initial data to start from.
    /// (Should the kernel write it all the same, the checked run starts from what the timed
    /// runs left, and verification reports the difference.)
    #[serde(default)]
    pub read_only: bool,
    /// The kernel writes every element before it reads any (a result computed afresh): timed
    /// runs need no copy of its initial data either, since what it held does not matter.
    #[serde(default)]
    pub fresh: bool,
}

impl BufferSpec {
    /// A buffer of `bytes` bytes the kernel may write.
    pub fn new(name: impl Into<String>, bytes: usize) -> BufferSpec {
        BufferSpec { name: name.into(), bytes, read_only: false, fresh: false }
    }
}

/// How to time a kernel: `warmup` untimed runs, then timed runs until at least `min_reps` runs
/// and `min_time_s` seconds of kernel time are reached, or `max_reps` runs. Every run, timed or
/// not, starts from the initial data.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Untimed runs before the timed ones.
    pub warmup: u32,
    /// The timed runs go on until their total reaches this many seconds...
    pub min_time_s: f64,
    /// ... and their number reaches this ...
    pub min_reps: u32,
    /// ... unless their number reaches this first (at least 1).
    pub max_reps: u32,
}

impl Default for Timing {
    fn default() -> Self {
        Timing { warmup: 1, min_time_s: 0.2, min_reps: 3, max_reps: 1000 }
    }
}

/// A kernel to run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSpec {
    /// The compiled shared library.
    pub so_path: PathBuf,
    /// The entry symbol, `void SYMBOL(void **args)` (the code generator's `teml_entry`), which
    /// is given the buffers' addresses in the order of `buffers`.
    pub symbol: String,
    /// The kernel's buffers, in argument order.
    pub buffers: Vec<BufferSpec>,
    /// Sets `OMP_NUM_THREADS` for the kernel when given.
    pub threads: Option<usize>,
    /// How long the whole worker run (the checked run, warm-up and timed runs) may take.
    pub timeout: Duration,
    /// Time the kernel when given.
    pub timing: Option<Timing>,
    /// The worker executable; [`worker_exe`] when `None`.
    pub worker: Option<PathBuf>,
}

impl RunSpec {
    /// A run of `symbol` in `so_path` over `buffers`: no thread setting, a 60 s timeout, no
    /// timing, the default worker.
    pub fn new(so_path: impl Into<PathBuf>, symbol: impl Into<String>, buffers: Vec<BufferSpec>) -> RunSpec {
        RunSpec {
            so_path: so_path.into(),
            symbol: symbol.into(),
            buffers,
            threads: None,
            timeout: Duration::from_secs(60),
            timing: None,
            worker: None,
        }
    }
}

/// What a run produced.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutcome {
    /// Every buffer's bytes after one run from the initial data, in the order of the buffers.
    pub outputs: Vec<Vec<u8>>,
    /// The time of each timed repetition, in seconds (empty without timing).
    pub times_s: Vec<f64>,
}

impl RunOutcome {
    /// Statistics of the timed repetitions, if there were any.
    pub fn stats(&self) -> Option<TimeStats> {
        (!self.times_s.is_empty()).then(|| TimeStats::from(self.times_s.as_slice()))
    }
}

/// Summary of repeated timings.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimeStats {
    /// The fastest repetition, in seconds.
    pub min_s: f64,
    /// The median (the mean of the two middle ones for an even count), in seconds.
    pub median_s: f64,
    /// The slowest repetition, in seconds.
    pub max_s: f64,
    /// The number of repetitions.
    pub reps: usize,
}

impl From<&[f64]> for TimeStats {
    /// Statistics of `times`; with no times, `reps` is 0 and the times are NaN.
    fn from(times: &[f64]) -> Self {
        let mut sorted = times.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        if n == 0 {
            return TimeStats { min_s: f64::NAN, median_s: f64::NAN, max_s: f64::NAN, reps: 0 };
        }
        let median_s = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
        TimeStats { min_s: sorted[0], median_s, max_s: sorted[n - 1], reps: n }
    }
}

impl TimeStats {
    /// The relative spread `(max - min) / median`: how noisy the measurement is.
    pub fn spread(&self) -> f64 {
        (self.max_s - self.min_s) / self.median_s
    }
}

/// The job the parent hands to the worker, as JSON in a file.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Job {
    /// The shared-memory file.
    pub shm_path: PathBuf,
    /// Its length in bytes.
    pub shm_len: usize,
    /// The shared library.
    pub so_path: PathBuf,
    /// The entry symbol.
    pub symbol: String,
    /// Where each buffer lives.
    pub buffers: Vec<JobBuffer>,
    /// How to time the kernel, if at all.
    pub timing: Option<Timing>,
}

/// One buffer's place in the shared-memory file.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct JobBuffer {
    /// Offset of the live buffer the kernel works on: the initial data, and the outputs of the
    /// checked run at the end.
    pub offset: usize,
    /// With timing: offset of the copy of the initial data every timed run starts from.
    pub snapshot_offset: Option<usize>,
    /// Size in bytes.
    pub bytes: usize,
}

/// What the worker reports on its standard output.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Report {
    /// The timed repetitions.
    pub times_s: Vec<f64>,
}

/// Layout of the shared-memory file: the live buffers, then (with `snapshot`, for timing)
/// the copies of their initial data, every one at a multiple of [`BUFFER_ALIGN`], the large
/// ones staggered within a page ([`STAGGER_FROM`]).
fn layout(buffers: &[BufferSpec], snapshot: bool) -> Result<(Vec<JobBuffer>, usize), RuntimeError> {
    let too_big = || RuntimeError::InvalidRun("the buffers' total size overflows".into());
    let mut end = 0usize;
    let mut large = 0usize;
    let mut place = |bytes: usize| -> Result<usize, RuntimeError> {
        let at = if bytes >= STAGGER_FROM {
            let page = end.checked_next_multiple_of(4096).ok_or_else(too_big)?;
            large += 1;
            page.checked_add(((large - 1) * STAGGER) % 4096).ok_or_else(too_big)?
        } else {
            end.checked_next_multiple_of(BUFFER_ALIGN).ok_or_else(too_big)?
        };
        end = at.checked_add(bytes).ok_or_else(too_big)?;
        Ok(at)
    };
    let live = buffers.iter().map(|b| place(b.bytes)).collect::<Result<Vec<_>, _>>()?;
    let snap = if snapshot {
        buffers
            .iter()
            .map(|b| if b.read_only || b.fresh { Ok(None) } else { place(b.bytes).map(Some) })
            .collect::<Result<Vec<_>, _>>()?
    } else {
        vec![None; buffers.len()]
    };
    let placed = buffers
        .iter()
        .zip(live.into_iter().zip(snap))
        .map(|(b, (offset, snapshot_offset))| JobBuffer { offset, snapshot_offset, bytes: b.bytes })
        .collect();
    // A mapping cannot be empty.
    Ok((placed, end.max(BUFFER_ALIGN)))
}

/// Checks the initial data of [`run_kernel`].
fn validate_initial(spec: &RunSpec, initial: &[&[u8]]) -> Result<(), RuntimeError> {
    if initial.len() != spec.buffers.len() {
        return Err(RuntimeError::InvalidRun(format!(
            "expected initial data for {} buffers, found {}",
            spec.buffers.len(),
            initial.len()
        )));
    }
    for (b, data) in spec.buffers.iter().zip(initial) {
        if !data.is_empty() && data.len() != b.bytes {
            return Err(RuntimeError::InvalidRun(format!(
                "buffer `{}`: expected {} bytes of initial data (or none, for zeros), found {}",
                b.name,
                b.bytes,
                data.len()
            )));
        }
    }
    Ok(())
}

/// Checks a run's arguments before anything is started.
fn validate(spec: &RunSpec) -> Result<(), RuntimeError> {
    if let Some(t) = &spec.timing {
        if t.max_reps == 0 || t.min_reps > t.max_reps {
            return Err(RuntimeError::InvalidRun(format!(
                "timing: expected 1 <= max_reps and min_reps <= max_reps, found min_reps {} and \
                 max_reps {}",
                t.min_reps, t.max_reps
            )));
        }
        if !(t.min_time_s.is_finite() && t.min_time_s >= 0.0) {
            return Err(RuntimeError::InvalidRun(format!(
                "timing: expected a finite min_time_s >= 0, found {}",
                t.min_time_s
            )));
        }
    }
    if spec.threads == Some(0) {
        return Err(RuntimeError::InvalidRun("expected at least 1 thread, found 0".into()));
    }
    if !spec.so_path.is_file() {
        return Err(RuntimeError::io(
            "cannot find the kernel library",
            &spec.so_path,
            std::io::Error::from(std::io::ErrorKind::NotFound),
        ));
    }
    Ok(())
}

/// Runs the kernel of `spec` in a worker process, starting from `initial` (one slice per
/// buffer, of exactly its size, or empty for zeros): with timing, the warm-up and timed
/// repetitions, each from the initial data; then once more from the initial data to produce the
/// outputs.
///
/// A kernel killed by a signal gives [`RuntimeError::Crashed`], one still running after
/// `spec.timeout` is killed and gives [`RuntimeError::TimedOut`]; the caller is unaffected.
pub fn run_kernel(spec: &RunSpec, initial: &[&[u8]]) -> Result<RunOutcome, RuntimeError> {
    validate_initial(spec, initial)?;
    let mut outputs = vec![Vec::new(); spec.buffers.len()];
    let times_s = run_kernel_with(
        spec,
        &mut |i, dst| {
            if !initial[i].is_empty() {
                dst.copy_from_slice(initial[i]);
            }
        },
        &mut |i, src| outputs[i] = src.to_vec(),
    )?;
    Ok(RunOutcome { outputs, times_s })
}

/// [`run_kernel`] without copies of the data: `fill(i, buffer)` writes buffer `i`'s initial
/// data straight into the shared mapping (it starts as zeros), and `read(i, buffer)` sees its
/// outputs there after the run. Returns the times of the timed repetitions. The mapping holds
/// the buffers once, and with timing the buffers the kernel writes once more (the initial data
/// every timed run starts from; read-only buffers need no copy).
pub fn run_kernel_with(
    spec: &RunSpec,
    fill: &mut dyn FnMut(usize, &mut [u8]),
    read: &mut dyn FnMut(usize, &[u8]),
) -> Result<Vec<f64>, RuntimeError> {
    validate(spec)?;
    let worker = match &spec.worker {
        Some(path) => path.clone(),
        None => worker_exe()?,
    };
    let (placed, shm_len) = layout(&spec.buffers, spec.timing.is_some())?;
    let shm = SharedFile::create(shm_len)?;
    // SAFETY: the file is private to this run (a fresh temporary file); only the worker maps it
    // too, and the parent reads it only after the worker has exited.
    let mut map = unsafe { MmapMut::map_mut(&shm.file) }
        .map_err(|e| RuntimeError::io("cannot map the shared buffers", &shm.path, e))?;
    for (i, b) in placed.iter().enumerate() {
        fill(i, &mut map[b.offset..b.offset + b.bytes]);
    }

    let job = Job {
        shm_path: shm.path.clone(),
        shm_len,
        so_path: std::path::absolute(&spec.so_path).unwrap_or_else(|_| spec.so_path.clone()),
        symbol: spec.symbol.clone(),
        buffers: placed,
        timing: spec.timing,
    };
    let job_file = write_job(&job, shm.path.parent().unwrap_or(Path::new(".")))?;

    let mut cmd = Command::new(&worker);
    cmd.arg(WORKER_ARG)
        .arg(job_file.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(n) = spec.threads {
        cmd.env("OMP_NUM_THREADS", n.to_string());
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| RuntimeError::NoWorker(format!("cannot start `{}`: {e}", worker.display())))?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = wait_for(&mut child, spec.timeout);
    let (stdout, stderr) = (stdout.join().unwrap_or_default(), stderr.join().unwrap_or_default());
    let status = match status {
        Ok(Some(_)) | Ok(None) if super::interrupt::requested() => {
            return Err(RuntimeError::Interrupted("the kernel".into()));
        }
        Ok(Some(status)) => status,
        Ok(None) => return Err(RuntimeError::TimedOut { secs: spec.timeout.as_secs_f64() }),
        Err(e) => return Err(RuntimeError::Worker(format!("cannot wait for the worker: {e}"))),
    };
    check_status(status, &stderr)?;
    let report = parse_report(&stdout).ok_or_else(|| {
        RuntimeError::Worker(format!("the worker exited without a report{}", stderr_note(&stderr)))
    })?;
    for (i, b) in job.buffers.iter().enumerate() {
        read(i, &map[b.offset..b.offset + b.bytes]);
    }
    Ok(report.times_s)
}

/// The shared-memory file of one run, removed when dropped.
struct SharedFile {
    file: File,
    path: PathBuf,
    /// Keeps the file alive; deletes it on drop.
    _temp: tempfile::TempPath,
}

impl SharedFile {
    /// A file of `len` bytes (zeros) in `/dev/shm` if there is room there, else in the
    /// temporary directory.
    fn create(len: usize) -> Result<SharedFile, RuntimeError> {
        let shm = Path::new("/dev/shm");
        if shm.is_dir()
            && let Ok(file) = SharedFile::create_in(shm, len, true)
        {
            return Ok(file);
        }
        SharedFile::create_in(&std::env::temp_dir(), len, false)
    }

    /// A file of `len` bytes in `dir`; with `reserve`, fails unless the space can be reserved
    /// (a full tmpfs would otherwise kill whoever touches the mapping with SIGBUS).
    fn create_in(dir: &Path, len: usize, reserve: bool) -> Result<SharedFile, RuntimeError> {
        let temp = tempfile::Builder::new()
            .prefix("teml-run-")
            .tempfile_in(dir)
            .map_err(|e| RuntimeError::io("cannot create the shared buffer file in", dir, e))?;
        let (file, temp) = temp.into_parts();
        let path = temp.to_path_buf();
        file.set_len(len as u64)
            .map_err(|e| RuntimeError::io("cannot size the shared buffer file", &path, e))?;
        if reserve {
            reserve_space(&file, len).map_err(|e| RuntimeError::io("cannot reserve space in", &path, e))?;
        }
        Ok(SharedFile { file, path, _temp: temp })
    }
}

/// Allocates the blocks of `file` up to `len`, so that writing through a mapping cannot fail.
#[cfg(target_os = "linux")]
fn reserve_space(file: &File, len: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let len =
        libc::off_t::try_from(len).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: a plain system call on an open file descriptor.
    match unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) } {
        0 => Ok(()),
        err => Err(std::io::Error::from_raw_os_error(err)),
    }
}

/// Elsewhere there is no portable way to reserve space; the file is used as it is.
#[cfg(not(target_os = "linux"))]
fn reserve_space(_file: &File, _len: usize) -> std::io::Result<()> {
    Ok(())
}

/// Writes the job as JSON to a temporary file in `dir`, removed when dropped.
fn write_job(job: &Job, dir: &Path) -> Result<tempfile::NamedTempFile, RuntimeError> {
    let mut file = tempfile::Builder::new()
        .prefix("teml-job-")
        .suffix(".json")
        .tempfile_in(dir)
        .map_err(|e| RuntimeError::io("cannot create the worker job file in", dir, e))?;
    serde_json::to_writer(&mut file, job).map_err(|e| {
        RuntimeError::io("cannot write the worker job file", file.path().to_path_buf(), e.into())
    })?;
    Ok(file)
}

/// Reads a pipe to its end on a thread of its own (so that a chatty worker never blocks).
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}

/// Waits for `child` at most `timeout`; kills it and returns `None` when it runs longer or
/// Ctrl-C is pressed ([`super::interrupt`]).
fn wait_for(child: &mut Child, timeout: Duration) -> std::io::Result<Option<ExitStatus>> {
    let start = Instant::now();
    let mut pause = Duration::from_micros(200);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        let elapsed = start.elapsed();
        if elapsed >= timeout || super::interrupt::requested() {
            child.kill()?;
            child.wait()?;
            return Ok(None);
        }
        std::thread::sleep(pause.min(timeout - elapsed));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// The error an unsuccessful worker exit stands for.
fn check_status(status: ExitStatus, stderr: &[u8]) -> Result<(), RuntimeError> {
    use std::os::unix::process::ExitStatusExt;
    if status.success() {
        return Ok(());
    }
    if let Some(signal) = status.signal() {
        return Err(RuntimeError::Crashed { signal, unoptimized: false });
    }
    Err(RuntimeError::Worker(format!("the worker {status}{}", stderr_note(stderr))))
}

/// `: <stderr>` when the worker wrote something on its standard error.
fn stderr_note(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let text = text.trim();
    if text.is_empty() { String::new() } else { format!(": {text}") }
}

/// The last report line of the worker's standard output (the kernel may print too).
fn parse_report(stdout: &[u8]) -> Option<Report> {
    let text = String::from_utf8_lossy(stdout);
    text.lines().rev().find_map(|l| l.strip_prefix(REPORT_PREFIX)).and_then(|j| serde_json::from_str(j).ok())
}

/// The executable that runs kernels: `$TEML_WORKER` if set; else this executable if it is
/// `teml`; else a `teml` next to this executable or in its parent directory (where it is for
/// the test, example and bench executables of a cargo build).
pub fn worker_exe() -> Result<PathBuf, RuntimeError> {
    if let Some(path) = std::env::var_os("TEML_WORKER")
        && !path.is_empty()
    {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(RuntimeError::NoWorker(format!("TEML_WORKER is `{}`, which is not a file", path.display())))
        };
    }
    let exe = std::env::current_exe()
        .map_err(|e| RuntimeError::NoWorker(format!("cannot find the current executable: {e}")))?;
    if exe.file_stem().is_some_and(|s| s == "teml") {
        return Ok(exe);
    }
    let name = format!("teml{}", std::env::consts::EXE_SUFFIX);
    let dir = exe.parent();
    for candidate in [dir, dir.and_then(Path::parent)].into_iter().flatten().map(|d| d.join(&name)) {
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    Err(RuntimeError::NoWorker(format!(
        "`{}` is not teml and there is no `{name}` next to it or in its parent directory; set \
         TEML_WORKER to the teml executable",
        exe.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_aligns_every_buffer() {
        let bufs: Vec<BufferSpec> =
            [8, 0, 100, 64].iter().map(|&bytes| BufferSpec::new("x", bytes)).collect();
        let (placed, len) = layout(&bufs, true).unwrap();
        let offsets: Vec<(usize, Option<usize>)> =
            placed.iter().map(|b| (b.offset, b.snapshot_offset)).collect();
        assert_eq!(offsets, [(0, Some(256)), (64, Some(320)), (64, Some(320)), (192, Some(448))]);
        assert_eq!(len, 512);
        let (placed, len) = layout(&bufs, false).unwrap();
        assert!(placed.iter().all(|b| b.snapshot_offset.is_none()));
        assert_eq!(len, 256, "without timing the buffers are in the mapping once");
        assert_eq!(layout(&[], false).unwrap().1, BUFFER_ALIGN);
        assert!(layout(&[BufferSpec::new("x", usize::MAX)], true).is_err());
    }

    #[test]
    fn large_buffers_start_at_different_page_offsets() {
        let mib = 1 << 20;
        let bufs: Vec<BufferSpec> =
            [64 * mib, 64 * mib, 100, 64 * mib].iter().map(|&bytes| BufferSpec::new("x", bytes)).collect();
        let (placed, len) = layout(&bufs, true).unwrap();
        let mut spans: Vec<(usize, usize)> = Vec::new();
        for b in &placed {
            spans.push((b.offset, b.bytes));
            spans.extend(b.snapshot_offset.map(|s| (s, b.bytes)));
        }
        assert!(spans.iter().all(|(at, _)| at % BUFFER_ALIGN == 0));
        let mut large: Vec<usize> =
            spans.iter().filter(|(_, n)| *n >= STAGGER_FROM).map(|(at, _)| at % 4096).collect();
        large.sort_unstable();
        assert_eq!(large, [0, 576, 1152, 1728, 2304, 2880], "every large buffer at its own page offset");
        spans.sort();
        assert!(spans.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0), "no overlap: {spans:?}");
        assert!(spans.last().is_some_and(|(at, n)| at + n <= len));
    }

    #[test]
    fn fresh_buffers_have_no_snapshot() {
        let bufs = [BufferSpec { fresh: true, ..BufferSpec::new("a", 100) }, BufferSpec::new("c", 8)];
        let (placed, _) = layout(&bufs, true).unwrap();
        assert_eq!(placed[0].snapshot_offset, None);
        assert!(placed[1].snapshot_offset.is_some());
    }

    #[test]
    fn read_only_buffers_have_no_snapshot() {
        let bufs = [BufferSpec { read_only: true, ..BufferSpec::new("a", 100) }, BufferSpec::new("c", 8)];
        let (placed, len) = layout(&bufs, true).unwrap();
        assert_eq!(placed[0].snapshot_offset, None);
        assert_eq!(placed[1].snapshot_offset, Some(192));
        assert_eq!(len, 200, "the input once, the output twice");
    }

    #[test]
    fn time_stats() {
        let s = TimeStats::from([3.0, 1.0, 2.0, 10.0].as_slice());
        assert_eq!((s.min_s, s.median_s, s.max_s, s.reps), (1.0, 2.5, 10.0, 4));
        assert_eq!(s.spread(), 9.0 / 2.5);
        let s = TimeStats::from([2.0, 1.0, 4.0].as_slice());
        assert_eq!(s.median_s, 2.0);
        assert_eq!(TimeStats::from([].as_slice()).reps, 0);
    }

    #[test]
    fn report_is_the_last_marked_line() {
        let out = b"hello\nTEML-WORKER-REPORT {\"times_s\":[1.0]}\nkernel chatter\n";
        assert_eq!(parse_report(out).unwrap().times_s, [1.0]);
        assert!(parse_report(b"nothing").is_none());
    }
}
