//! Compiling, loading, running and timing generated kernels, and `.npy` I/O.
//!
//! The pieces, in the order a kernel meets them:
//!
//! 1. [`Compiler`] ([`compiler`]): [`Compiler::detect`] finds the system C compiler (the `cc`
//!    crate's rules, so `CC` is honoured; `CFLAGS` is appended to every compilation);
//!    [`Compiler::compile`]`(source, &`[`Flags`]`)` returns a [`Compiled`] shared library, from
//!    the on-disk cache (`$TEML_CACHE_DIR`, else `~/.cache/teml`) when the same source was
//!    already compiled with the same flags by the same compiler. [`compiler_invocations`]
//!    counts the real compilations of this process. A rejected source is a
//!    [`RuntimeError::Compile`] that shows the generated C line of each error.
//! 2. [`run_kernel`]`(&`[`RunSpec`]`, initial)` ([`exec`]): runs the translation unit's entry
//!    point, `void teml_entry(void **args)`, in a child worker process (the `teml` executable
//!    with first argument `__worker`, found by [`worker_exe`]; [`worker_main`] is its side).
//!    Buffers live in a shared-memory file, each 64-byte aligned; the kernel runs once from the
//!    initial data (giving [`RunOutcome::outputs`]); with [`Timing`], the warm-up and timed
//!    repetitions come before that run, each from the initial data too (giving
//!    [`RunOutcome::times_s`], summarized by [`TimeStats`]). A kernel that crashes is a
//!    [`RuntimeError::Crashed`] (`kernel crashed: SIGSEGV`), one that runs past the timeout a
//!    [`RuntimeError::TimedOut`] (`timed out after N s`); the calling process is unaffected
//!    either way.
//! 3. [`npy`]: [`read_npy`], [`write_npy_f64`], [`write_npy_f32`] for `<f8` / `<f4` C-order
//!    arrays.
//!
//! ```no_run
//! use teml::runtime::{BufferSpec, Compiler, Flags, RunSpec, Timing, run_kernel};
//! # fn main() -> Result<(), teml::runtime::RuntimeError> {
//! let source = "void teml_entry(void **a) { double *x = a[0]; x[0] *= 2; }";
//! let compiled = Compiler::detect()?.compile(source, &Flags::default())?;
//! let mut spec = RunSpec::new(&compiled.so_path, "teml_entry", vec![BufferSpec::new("x", 8)]);
//! spec.timing = Some(Timing::default());
//! let outcome = run_kernel(&spec, &[&1.5f64.to_ne_bytes()])?;
//! assert_eq!(outcome.outputs[0], 3.0f64.to_ne_bytes());
//! println!("{:?}", outcome.stats());
//! # Ok(())
//! # }
//! ```

pub mod compiler;
mod error;
pub mod exec;
pub mod host;
pub mod interrupt;
pub mod machine;
pub mod npy;
mod worker;

pub use compiler::{Compiled, Compiler, Flags, compiler_invocations};
pub use error::{RuntimeError, signal_name};
pub use exec::{
    BUFFER_ALIGN, BufferSpec, RunOutcome, RunSpec, TimeStats, Timing, WORKER_ARG, run_kernel,
    run_kernel_with, worker_exe,
};
pub use npy::{NpyArray, NpyData, read_npy, write_npy_as, write_npy_f32, write_npy_f64};
pub use worker::worker_main;
