//! teml: the Tensor optimizations Meta-Language (Susungi et al., GPCE 2018).
//!
//! - [`suite`]: the kernel suite `teml bench` runs: the Table 1 kernels through their paths,
//!   against the anchors, measured in one run (the top-level `bench/` holds the benchmarks of
//!   teml itself, `cargo bench`).
//! - [`analysis`]: exact legality with isl: dependences, the check of every path and mark.
//! - [`ir`]: the values: index expressions, tensor-expression trees, loop trees, the state σ.
//! - [`ops`]: the core builtins as pure functions over values, and the builtin table.
//! - [`error`]: the errors a meta-program can meet.
//! - [`codegen`]: loop nests to C.
//! - [`runtime`]: compiling, loading, running, verifying and timing kernels.
//! - [`lang`]: the `.teml` syntax.
//! - [`cli`], [`repl`]: the `teml` command and its interactive session.
//! - [`export`]: a verified kernel as a C library with a header and a Python module.
//! - [`script`]: the Rhai front-end (`.rhai` meta-programs, REPL sessions) and the standard library.
//! - [`pipeline`]: the one road from a meta-program to verified, timed kernels (evaluate, lower,
//!   compile, run, verify at full or reduced size, time), used by the CLI, the REPL and the tuner.
//! - [`interp`]: the reference interpreter verification compares against.
//! - [`oracle`]: a second, independent evaluator of the tensor expressions themselves.
#![warn(missing_docs)]

pub mod analysis;
pub mod cli;
pub mod cluster;
pub mod codegen;
pub mod error;
pub mod export;
pub mod interp;
pub mod ir;
pub mod lang;
pub mod ops;
pub mod oracle;
pub mod pipeline;
pub mod repl;
pub mod runtime;
pub mod schedule;
pub mod script;
pub mod suite;
pub mod tuner;

pub use error::{Error, Result};
