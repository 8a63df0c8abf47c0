//! The one pipeline behind `teml run`, the REPL's `:c`/`:run`/`:time` and the tuner: a
//! [`Program`] (re-evaluable at other sizes) is evaluated once; then for each kernel
//! ([`KernelRef`]) [`Pipeline::run`] generates C, compiles it (cached), runs it in a worker
//! process on fresh initial data, checks every written tensor against the reference
//! interpreter running that kernel's own untransformed statements on the same data (at a
//! reduced size when the full one is too big, then spot-checks the full-size kernel against
//! the expression oracle), times it, and times the untransformed build compiled with the same
//! flags in the same run for the speedup, returning a typed [`KernelRun`]. Nothing is reported
//! as a speedup unless it was verified: [`Pipeline::time`] and [`time_interleaved`] take the
//! [`Verified`] evidence only a verified run gives. The shells only parse arguments and print
//! reports.
//!
//! - `options.rs`: [`RunOptions`], [`RunError`];
//! - `program.rs`: [`Program`], program files and the `// program:` line;
//! - `data.rs`: initial data (`-i`, `init`, the seeded fill, cropping), bytes, `-o` files;
//! - `compare.rs`: tolerances, comparisons, the spot check against the expression oracle;
//! - `evidence.rs`: the verification record ([`Evidence`]): what checked a kernel, at which size;
//! - `memory.rs`: the refusal of a run too large for the memory;
//! - `run.rs`: the pipeline itself ([`Pipeline`], [`Verified`]): which size checks a kernel,
//!   the recheck of a compiler defect, timing the checked artifact;
//! - `check.rs`: one kernel run and checked at one size, and the full-size checks;
//! - `compiled.rs`: compiling a kernel and running its binary in a worker;
//! - `cost.rs`: a kernel's untransformed nests, reference instances and flops;
//! - `measure.rs`: interleaved rounds, `time(l)` in scripts;
//! - `report.rs`: [`KernelReport`] and its summary.

mod check;
mod compare;
mod compiled;
mod cost;
mod data;
mod evidence;
mod measure;
mod memory;
mod options;
mod program;
mod report;
mod run;

pub use crate::interp::Buffers;
pub use crate::runtime::{Flags, Timing};
pub use check::symbol;
pub use compare::{Comparison, SPOT_BUDGET, SPOT_SAMPLES, compare, compare_within, magnitude, tolerance};
pub use compiled::{compile_kernel, run_source, toolchain};
pub use cost::{flop_count, reference_cost, untransformed};
pub use data::{initial_data, initial_store, random_data, save_npy};
pub use evidence::{Artifact, CompilerDefect, Evidence, FullSizeCheck, ReferenceCheck};
pub use measure::{Rounds, measure, script_env, script_env_with, time_interleaved};
pub use options::{RunError, RunOptions};
pub use program::{EvalFn, PROGRAM_DIRECTIVE, Program, eval_file, eval_file_in, program_of};
pub use report::KernelReport;
pub use run::{KernelRef, KernelRun, Pipeline, RunAllError, Verified, run_request};
