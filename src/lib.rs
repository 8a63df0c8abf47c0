//! teml: the Tensor optimizations Meta-Language (Susungi et al., GPCE 2018).
//!
//! - [`ir`]: the values: index expressions, tensor-expression trees, loop trees, the state σ.
//! - [`ops`]: the core builtins as pure functions over values, and the builtin table.
//! - [`error`]: the errors a meta-program can meet.
#![warn(missing_docs)]

pub mod error;
pub mod ir;
pub mod ops;

pub use error::{Error, Result};
