//! The runtime with the real C compiler, real shared libraries and the real `teml` worker:
//! running, crash isolation, timeouts, timing, threads, alignment, compile errors.

use std::path::PathBuf;
use std::time::Duration;

use teml::runtime::{
    BufferSpec, Compiled, Compiler, Flags, RunOutcome, RunSpec, RuntimeError, Timing, run_kernel,
};

/// Compiles `source` into a fresh cache (kept alive by the returned directory).
fn compile(source: &str) -> (tempfile::TempDir, Compiled) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let compiled = Compiler::detect()
        .expect("a C compiler")
        .with_cache_dir(dir.path())
        .compile(source, &Flags::default())
        .unwrap_or_else(|e| panic!("{e}"));
    (dir, compiled)
}

/// A run of `teml_entry` over buffers of the given sizes, with the `teml` binary as worker.
fn spec(compiled: &Compiled, sizes: &[usize]) -> RunSpec {
    let buffers =
        sizes.iter().enumerate().map(|(i, &bytes)| BufferSpec::new(format!("b{i}"), bytes)).collect();
    let mut spec = RunSpec::new(&compiled.so_path, "teml_entry", buffers);
    spec.worker = Some(PathBuf::from(env!("CARGO_BIN_EXE_teml")));
    spec.timeout = Duration::from_secs(20);
    spec
}

fn f64_bytes(xs: &[f64]) -> Vec<u8> {
    xs.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn f64s(bytes: &[u8]) -> Vec<f64> {
    bytes.chunks_exact(8).map(|c| f64::from_ne_bytes(c.try_into().unwrap())).collect()
}

fn i32s(bytes: &[u8]) -> Vec<i32> {
    bytes.chunks_exact(4).map(|c| i32::from_ne_bytes(c.try_into().unwrap())).collect()
}

/// Runs a kernel whose body (given `void **args`) is `body`, expecting an error.
fn run_err(body: &str, timeout: Duration) -> RuntimeError {
    let source = format!(
        "#include <signal.h>\n#include <stddef.h>\nvoid teml_entry(void **args) {{\n    (void)args;\n    \
         {body}\n}}\n"
    );
    let (_dir, compiled) = compile(&source);
    let mut spec = spec(&compiled, &[8]);
    spec.timeout = timeout;
    match run_kernel(&spec, &[&[]]) {
        Ok(outcome) => panic!("expected an error, found {outcome:?}"),
        Err(e) => e,
    }
}

const DOUBLE: &str = "\
static void k(double *restrict a, double *restrict b) {
    for (int i = 0; i < 8; i++) b[i] = 2.0 * a[i];
}
void teml_entry(void **args) { k(args[0], args[1]); }
";

#[test]
fn runs_a_kernel_and_returns_every_buffer() {
    let (_dir, compiled) = compile(DOUBLE);
    let a: Vec<f64> = (0..8).map(|i| i as f64 + 0.5).collect();
    let RunOutcome { outputs, times_s } =
        run_kernel(&spec(&compiled, &[64, 64]), &[&f64_bytes(&a), &[]]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&outputs[0]), a);
    assert_eq!(f64s(&outputs[1]), a.iter().map(|x| 2.0 * x).collect::<Vec<_>>());
    assert!(times_s.is_empty());
}

#[test]
fn the_worker_is_found_next_to_the_test_executable() {
    // Test executables live in target/<profile>/deps, the `teml` executable in target/<profile>.
    let found = teml::runtime::worker_exe().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(found.file_stem().unwrap(), "teml");
    let (_dir, compiled) = compile(DOUBLE);
    let mut spec = spec(&compiled, &[64, 64]);
    spec.worker = None;
    let outcome = run_kernel(&spec, &[&f64_bytes(&[1.0; 8]), &[]]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&outcome.outputs[1]), [2.0; 8]);
}

#[test]
fn timing_repeats_from_the_initial_data() {
    // Aborts unless every run starts from the initial data; the first run's result is returned.
    let source = "\
#include <stdlib.h>
void teml_entry(void **args) {
    double *a = args[0];
    if (a[0] != 1.0) abort();
    a[0] = 5.0;
}
";
    let (_dir, compiled) = compile(source);
    let mut spec = spec(&compiled, &[8]);
    spec.timing = Some(Timing { warmup: 2, min_time_s: 0.0, min_reps: 5, max_reps: 5 });
    let outcome = run_kernel(&spec, &[&f64_bytes(&[1.0])]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&outcome.outputs[0]), [5.0]);
    assert_eq!(outcome.times_s.len(), 5);
    assert!(outcome.times_s.iter().all(|t| t.is_finite() && *t >= 0.0));

    spec.timing = Some(Timing { warmup: 0, min_time_s: 0.02, min_reps: 3, max_reps: 1_000_000 });
    let outcome = run_kernel(&spec, &[&f64_bytes(&[1.0])]).unwrap_or_else(|e| panic!("{e}"));
    let stats = outcome.stats().expect("timed repetitions");
    assert!(stats.reps >= 3);
    assert!(outcome.times_s.iter().sum::<f64>() >= 0.02 || stats.reps == 1_000_000);
    assert!(stats.min_s <= stats.median_s && stats.median_s <= stats.max_s);
}

#[test]
fn read_only_inputs_are_shared_by_the_timed_runs() {
    // b is read-only (no snapshot): every run reads it as it started; a is restored each time.
    let source = "\
#include <stdlib.h>
void teml_entry(void **args) {
    double *a = args[0], *b = args[1];
    if (a[0] != 1.0 || b[0] != 2.0) abort();
    a[0] = a[0] + b[0];
}
";
    let (_dir, compiled) = compile(source);
    let mut spec = spec(&compiled, &[8, 8]);
    spec.buffers[1].read_only = true;
    spec.timing = Some(Timing { warmup: 1, min_time_s: 0.0, min_reps: 4, max_reps: 4 });
    let outcome =
        run_kernel(&spec, &[&f64_bytes(&[1.0]), &f64_bytes(&[2.0])]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&outcome.outputs[0]), [3.0]);
    assert_eq!(f64s(&outcome.outputs[1]), [2.0]);
    assert_eq!(outcome.times_s.len(), 4);
}

#[test]
fn threads_set_omp_num_threads() {
    let source = "\
#include <omp.h>
void teml_entry(void **args) { int *n = args[0]; n[0] = omp_get_max_threads(); }
";
    let (_dir, compiled) = compile(source);
    let mut spec = spec(&compiled, &[4]);
    for threads in [1, 3] {
        spec.threads = Some(threads);
        let outcome = run_kernel(&spec, &[&[]]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(i32s(&outcome.outputs[0]), [threads as i32]);
    }
}

#[test]
fn buffers_are_64_byte_aligned() {
    let source = "\
#include <stdint.h>
void teml_entry(void **args) {
    double *out = args[0];
    for (int i = 0; i < 4; i++) out[i] = (double)((uintptr_t)args[i] % 64);
}
";
    let (_dir, compiled) = compile(source);
    let outcome = run_kernel(&spec(&compiled, &[32, 8, 24, 3]), &[&[], &[], &[], &[]])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&outcome.outputs[0]), [0.0; 4]);
}

#[test]
fn a_null_write_is_reported_as_sigsegv() {
    let e = run_err("*(volatile int *)NULL = 1;", Duration::from_secs(20));
    assert!(matches!(e, RuntimeError::Crashed { signal, .. } if signal == libc::SIGSEGV), "{e:?}");
    assert_eq!(e.to_string(), "kernel crashed: SIGSEGV");
}

#[test]
fn a_floating_point_exception_is_reported_as_sigfpe() {
    let e = run_err("raise(SIGFPE);", Duration::from_secs(20));
    assert_eq!(e.to_string(), "kernel crashed: SIGFPE");
}

#[test]
fn an_endless_kernel_times_out() {
    let start = std::time::Instant::now();
    let e = run_err("volatile unsigned long n = 0; for (;;) n++;", Duration::from_secs(1));
    assert!(matches!(e, RuntimeError::TimedOut { .. }), "{e:?}");
    assert_eq!(e.to_string(), "timed out after 1 s");
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_missing_symbol_is_a_worker_error() {
    let (_dir, compiled) = compile(DOUBLE);
    let mut spec = spec(&compiled, &[64, 64]);
    spec.symbol = "no_such_kernel".into();
    let e = run_kernel(&spec, &[&[], &[]]).expect_err("missing symbol");
    assert!(matches!(e, RuntimeError::Worker(_)), "{e:?}");
    assert!(e.to_string().contains("no_such_kernel"), "{e}");
}

#[test]
fn inconsistent_runs_are_refused() {
    let (_dir, compiled) = compile(DOUBLE);
    let spec = spec(&compiled, &[64, 64]);
    let e = run_kernel(&spec, &[&[]]).expect_err("one initial array for two buffers");
    assert!(matches!(e, RuntimeError::InvalidRun(_)), "{e:?}");
    let e = run_kernel(&spec, &[&[0u8; 8], &[]]).expect_err("8 bytes for a 64-byte buffer");
    assert!(e.to_string().contains("`b0`: expected 64 bytes"), "{e}");
    let mut bad = spec.clone();
    bad.timing = Some(Timing { warmup: 0, min_time_s: 0.0, min_reps: 5, max_reps: 2 });
    assert!(matches!(run_kernel(&bad, &[&[], &[]]), Err(RuntimeError::InvalidRun(_))));
    let mut bad = spec.clone();
    bad.worker = Some(PathBuf::from("/nonexistent/teml"));
    assert!(matches!(run_kernel(&bad, &[&[], &[]]), Err(RuntimeError::NoWorker(_))));
    let mut bad = spec;
    bad.so_path = PathBuf::from("/nonexistent/k.so");
    let e = run_kernel(&bad, &[&[], &[]]).expect_err("missing library");
    assert!(e.to_string().contains("/nonexistent/k.so"), "{e}");
}

#[test]
fn a_compile_error_shows_the_generated_line() {
    let source = "\
void teml_entry(void **args) {
    double *a = args[0];
    a[0] = undeclared_thing + 1.0;
}
";
    let dir = tempfile::tempdir().unwrap();
    let compiler = Compiler::detect().unwrap().with_cache_dir(dir.path());
    let e = compiler.compile(source, &Flags::default()).expect_err("undeclared identifier");
    let RuntimeError::Compile { message } = &e else { panic!("expected a compile error, found {e:?}") };
    assert!(message.contains("undeclared_thing"), "{message}");
    assert!(message.contains("the generated C at each error"), "{message}");
    assert!(
        message.contains("     3 |     a[0] = undeclared_thing + 1.0;\n       |            ^"),
        "{message}"
    );
    // Nothing is cached for a failed compilation, and no temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| n.ends_with(".c") && !n.starts_with('.')), "{names:?}");
}

#[test]
fn a_missing_compiler_is_reported() {
    let e = Compiler::new("/nonexistent/cc".into(), vec![], vec![], std::env::temp_dir())
        .expect_err("no such compiler");
    assert!(matches!(e, RuntimeError::NoCompiler(_)), "{e:?}");
    assert!(e.to_string().contains("/nonexistent/cc"), "{e}");
}

/// 3 x 4 MiB live buffers (above the worker's 4 MiB threshold: a private copy in huge pages
/// where the system gives them), timed: every run must start from the initial data (the
/// restore goes from the shared snapshots into the private copy), the outputs must come back,
/// and a read-only input must stay as it was.
fn large_buffers_come_back() {
    let source = "\
#include <stdlib.h>
void teml_entry(void **args) {
    double *a = args[0], *b = args[1], *c = args[2];
    long n = 4L << 17;
    if (a[0] != 1.0 || a[n - 1] != 1.0) abort();
    for (long i = 0; i < n; i++) { a[i] += b[i] * c[i]; b[i] = 7.0; }
}
";
    let (_dir, compiled) = compile(source);
    let n = 4usize << 17;
    let (a, b, c) = (vec![1.0; n], vec![2.0; n], (0..n).map(|i| i as f64).collect::<Vec<f64>>());
    let mut spec = spec(&compiled, &[8 * n, 8 * n, 8 * n]);
    spec.buffers[2].read_only = true;
    spec.timing = Some(Timing { warmup: 1, min_time_s: 0.0, min_reps: 3, max_reps: 3 });
    let outcome = run_kernel(&spec, &[&f64_bytes(&a), &f64_bytes(&b), &f64_bytes(&c)])
        .unwrap_or_else(|e| panic!("{e}"));
    let out_a = f64s(&outcome.outputs[0]);
    assert!(out_a.iter().enumerate().all(|(i, x)| *x == 1.0 + 2.0 * i as f64));
    assert!(f64s(&outcome.outputs[1]).iter().all(|x| *x == 7.0));
    assert_eq!(f64s(&outcome.outputs[2]), c);
    assert_eq!(outcome.times_s.len(), 3);
}

#[test]
fn large_buffers_run_in_a_private_huge_page_copy_and_come_back() {
    large_buffers_come_back();
}

#[test]
fn large_buffers_run_in_the_shared_mapping_when_huge_pages_are_off() {
    crate::common::in_own_process(
        "runtime_exec::large_buffers_run_in_the_shared_mapping_when_huge_pages_are_off",
        &[("TEML_HUGE_PAGES", std::ffi::OsStr::new("0"))],
        large_buffers_come_back,
    );
}
