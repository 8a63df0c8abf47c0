//! The worker process: the child side of [`super::run_kernel`].

use std::ffi::c_void;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use memmap2::MmapMut;

use super::exec::{Job, JobBuffer, REPORT_PREFIX, Report};

/// The entry point every generated translation unit exports: `void teml_entry(void **args)`.
type Entry = unsafe extern "C" fn(*mut *mut c_void);

/// Runs the job described by the JSON file `args[0]` (written by [`super::run_kernel`]) and
/// returns the process exit status: 0 after printing the report on standard output, 2 after
/// printing why the job could not be run on standard error. A crashing kernel kills the
/// process with its signal.
///
/// `teml __worker <job.json>` calls this; nothing else should.
pub fn worker_main(args: &[String]) -> i32 {
    disable_core_dumps();
    let report = match run_job(args) {
        Ok(report) => report,
        Err(message) => {
            eprintln!("teml worker: {message}");
            return 2;
        }
    };
    let json = match serde_json::to_string(&report) {
        Ok(json) => json,
        Err(e) => {
            eprintln!("teml worker: cannot encode the report: {e}");
            return 2;
        }
    };
    // The leading newline ends any partial line the kernel may have printed.
    let mut out = std::io::stdout().lock();
    match writeln!(out, "\n{REPORT_PREFIX}{json}").and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("teml worker: cannot write the report: {e}");
            2
        }
    }
}

/// A crashing kernel should not leave a core file behind (nor spend time writing one).
fn disable_core_dumps() {
    let none = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a plain system call with a valid argument. Failure only means core files stay on.
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &none);
    }
}

/// Loads and runs the job, returning the report or what went wrong.
fn run_job(args: &[String]) -> Result<Report, String> {
    let [job_path] = args else {
        return Err(format!("usage: teml __worker <job.json>, found {} arguments", args.len()));
    };
    let text = std::fs::read_to_string(job_path)
        .map_err(|e| format!("cannot read the job file `{job_path}`: {e}"))?;
    let job: Job = serde_json::from_str(&text).map_err(|e| format!("bad job file `{job_path}`: {e}"))?;

    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&job.shm_path)
        .map_err(|e| format!("cannot open the shared buffers `{}`: {e}", job.shm_path.display()))?;
    // SAFETY: the parent created the file for this job and does not touch it until we exit.
    let mut map = unsafe { MmapMut::map_mut(&file) }
        .map_err(|e| format!("cannot map the shared buffers `{}`: {e}", job.shm_path.display()))?;
    if map.len() < job.shm_len {
        return Err(format!("the shared buffers hold {} bytes, expected {}", map.len(), job.shm_len));
    }
    for (i, b) in job.buffers.iter().enumerate() {
        let fits = |at: usize| at.checked_add(b.bytes).is_some_and(|end| end <= map.len());
        if !fits(b.offset) || b.snapshot_offset.is_some_and(|o| !fits(o)) {
            return Err(format!("buffer {i} lies outside the shared buffers"));
        }
    }

    let entry = load(&job.so_path, &job.symbol)?;
    // The kernel runs on a private copy of the live buffers in transparent huge pages where the
    // system gives them: the shared mapping lives in `/dev/shm`, whose pages stay 4 KiB
    // (bench/RESULTS.md: a triad over 3 x 256 MiB streams about 25 % faster in huge pages).
    let live_len = job.buffers.iter().map(|b| b.offset + b.bytes).max().unwrap_or(0);
    let shared = map.as_mut_ptr();
    // (Only for timing: a run that is only checked gains nothing from it.)
    let private = job.timing.and_then(|_| HugeCopy::new(shared, live_len, &job.buffers));
    let live = private.as_ref().map_or(shared, |p| p.ptr);
    let mut kernel = Kernel::new(entry, live, shared, &job.buffers);

    // The timed runs first, each from the initial data (kept in the snapshot regions of the
    // buffers the kernel writes); then the checked run, whose outputs stay in the live buffers
    // for the parent.
    let mut times_s = Vec::new();
    if let Some(t) = job.timing {
        // (Buffers without a snapshot region are read-only: nothing to restore.)
        kernel.save_snapshot();
        for _ in 0..t.warmup {
            kernel.run();
            kernel.restore();
        }
        let mut total = 0.0;
        while times_s.len() < t.max_reps as usize
            && (times_s.len() < t.min_reps as usize || total < t.min_time_s)
        {
            let dt = kernel.timed_run();
            total += dt;
            times_s.push(dt);
            kernel.restore();
        }
    }
    kernel.run();
    if let Some(p) = &private {
        p.copy_back(shared, &job.buffers);
    }
    Ok(Report { times_s })
}

const PAGE: usize = 4096;

/// Gives back the pages wholly inside buffer `b` of the region at `base` (its first and last
/// pages may hold a neighbour's bytes: they stay): `MADV_REMOVE` frees a shared file's pages,
/// which read as zeros until written again; `MADV_DONTNEED` a private mapping's. Failing only
/// means the memory stays in use.
fn release(base: *mut u8, b: &JobBuffer, advice: libc::c_int) {
    let from = b.offset.next_multiple_of(PAGE);
    let to = (b.offset + b.bytes) / PAGE * PAGE;
    if to > from {
        // SAFETY: a page-aligned range inside the buffer (the region is page-aligned), whose
        // contents were copied elsewhere just before.
        unsafe {
            libc::madvise(base.add(from).cast(), to - from, advice);
        }
    }
}

/// Live buffers at least this large get a private copy in huge pages.
const HUGE_FROM: usize = 4 << 20;

/// A private, 2 MiB-aligned anonymous mapping advised to use transparent huge pages, holding
/// a copy of the first `len` bytes of the shared mapping (the live buffers, at the same
/// offsets: the staggering of their page offsets is kept).
struct HugeCopy {
    ptr: *mut u8,
    map: *mut c_void,
    map_len: usize,
}

impl HugeCopy {
    /// The copy, or `None` where it does not pay (small buffers), the system has no memory to
    /// spare for it, `TEML_HUGE_PAGES=0` asks for none, or the mapping fails: the kernel then
    /// runs on the shared mapping.
    fn new(shared: *mut u8, len: usize, buffers: &[JobBuffer]) -> Option<HugeCopy> {
        const HUGE: usize = 2 << 20;
        if len < HUGE_FROM
            || std::env::var("TEML_HUGE_PAGES").is_ok_and(|v| v == "0")
            || super::host::available_memory().is_none_or(|a| a < 2 * len)
        {
            return None;
        }
        let map_len = len.checked_next_multiple_of(HUGE)?.checked_add(HUGE)?;
        // SAFETY: an anonymous private mapping; the result is checked.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return None;
        }
        let ptr = (map as usize).next_multiple_of(HUGE) as *mut u8;
        // SAFETY: `ptr..ptr + len` lies inside the mapping (it has a spare 2 MiB for the
        // alignment); advice failing only means small pages; `shared` holds at least `len`
        // bytes (checked against the job before).
        unsafe {
            libc::madvise(ptr.cast(), len.next_multiple_of(HUGE), libc::MADV_HUGEPAGE);
        }
        // Buffer by buffer, each one's shared pages given back once copied: the shared file's
        // pages are memory too, and a run would otherwise hold its data twice here.
        for b in buffers {
            // SAFETY: every buffer lies inside the first `len` bytes of both regions (checked
            // against the job).
            unsafe { std::ptr::copy_nonoverlapping(shared.add(b.offset), ptr.add(b.offset), b.bytes) };
            release(shared, b, libc::MADV_REMOVE);
        }
        Some(HugeCopy { ptr, map, map_len })
    }

    /// Copies the live buffers (the outputs) back to the shared mapping, one at a time, each
    /// one's private pages given back once copied: the two copies never coexist whole.
    fn copy_back(&self, shared: *mut u8, buffers: &[JobBuffer]) {
        for b in buffers {
            // SAFETY: every buffer lies inside the first `len` bytes of both regions (checked
            // against the job), which do not overlap (one is private).
            unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(b.offset), shared.add(b.offset), b.bytes) };
            release(self.ptr, b, libc::MADV_DONTNEED);
        }
    }
}

impl Drop for HugeCopy {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe {
            libc::munmap(self.map, self.map_len);
        }
    }
}

/// Loads `so_path` and resolves `symbol`. The library is never unloaded: the process ends
/// soon, and unloading code whose threads (OpenMP's) may still exist is asking for trouble.
fn load(so_path: &Path, symbol: &str) -> Result<Entry, String> {
    // SAFETY: loading runs the library's initializers; the library is generated C code with
    // none of its own.
    let lib = unsafe { libloading::Library::new(so_path) }
        .map_err(|e| format!("cannot load `{}`: {e}", so_path.display()))?;
    // SAFETY: the code generator gives the entry symbol exactly this signature.
    let entry = unsafe { lib.get::<Entry>(symbol.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| format!("cannot find `{symbol}` in `{}`: {e}", so_path.display()))?;
    std::mem::forget(lib);
    Ok(entry)
}

/// The kernel and its buffers: the live ones from `base`, their snapshots in the shared
/// mapping from `snapshots`.
struct Kernel<'a> {
    entry: Entry,
    base: *mut u8,
    snapshots: *mut u8,
    buffers: &'a [JobBuffer],
    /// The argument array handed to the entry point.
    args: Vec<*mut c_void>,
}

impl<'a> Kernel<'a> {
    /// `base` holds the live buffers at their offsets, `snapshots` (the shared mapping) the
    /// snapshot regions; every one has been checked to fit.
    fn new(entry: Entry, base: *mut u8, snapshots: *mut u8, buffers: &'a [JobBuffer]) -> Kernel<'a> {
        Kernel { entry, base, snapshots, buffers, args: Vec::with_capacity(buffers.len()) }
    }

    /// Calls the kernel once on the live buffers.
    fn run(&mut self) {
        self.prepare_args();
        // SAFETY: every pointer addresses a live buffer of the size the kernel was generated for.
        unsafe { (self.entry)(self.args.as_mut_ptr()) }
    }

    /// Calls the kernel once and returns the time the call took, in seconds.
    fn timed_run(&mut self) -> f64 {
        self.prepare_args();
        let start = Instant::now();
        // SAFETY: as in `run`.
        unsafe { (self.entry)(self.args.as_mut_ptr()) }
        start.elapsed().as_secs_f64()
    }

    /// Fills the argument array afresh (the kernel may have scribbled on it).
    fn prepare_args(&mut self) {
        self.args.clear();
        // SAFETY: the offsets lie inside the mapping.
        self.args.extend(self.buffers.iter().map(|b| unsafe { self.base.add(b.offset) }.cast::<c_void>()));
    }

    /// Copies the live buffers (the initial data) to their snapshot regions.
    fn save_snapshot(&self) {
        for b in self.buffers {
            if let Some(s) = b.snapshot_offset {
                // SAFETY: both regions lie inside their mappings (checked); `copy` allows
                // overlap, which a well-formed job never has.
                unsafe { std::ptr::copy(self.base.add(b.offset), self.snapshots.add(s), b.bytes) }
            }
        }
    }

    /// Puts the initial data back into the live buffers.
    fn restore(&self) {
        for b in self.buffers {
            if let Some(s) = b.snapshot_offset {
                // SAFETY: as in `save_snapshot`.
                unsafe { std::ptr::copy(self.snapshots.add(s), self.base.add(b.offset), b.bytes) }
            }
        }
    }
}
