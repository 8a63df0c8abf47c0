//! The core builtins: one pure function per builtin of Fig. 1 and Sec. 3.3.3, their shape
//! inference, and the table both front-ends read (range inference: `analysis::infer`).

pub mod algebra;
pub mod build;
pub mod equivalence;
pub mod explore;
pub mod fm;
pub mod lift;
pub mod registry;
pub mod tensor;
pub mod transform;

pub use build::{build, program, sequence, with_programs};
pub use registry::{ArgVal, Builtin, Call, Returns, builtins, call, exec, lookup, run_stmt};
pub use tensor::{Arith, assign, eq, op, operand, scalar, tensor, vcontract, vop};
pub use transform::{
    fuse_inner, fuse_outer, interchange, parallelize, sink, split, stripmine, unroll, vectorize,
};
