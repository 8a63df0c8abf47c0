//! Exact legality: the dependences of a nest's untransformed statements, computed with isl,
//! and the check that a transformed nest (and its parallel and vector marks) keeps them; and
//! whether the kernel of some nests can be realised as C (its tensors, integer ranges, marks);
//! and the inference of iterator ranges from accesses (eq. 19, TeIL's bounds rule), which
//! `build`, the script helpers and the expression oracle share.

pub mod amx;
pub mod dot;
pub mod infer;
pub mod isl;
pub mod kernel;
pub mod legality;
pub mod lint;
pub mod packing;
pub mod reduction;
pub mod registers;
pub mod storage;
pub mod vector;
pub mod zeroing;

pub use legality::{Decision, Illegal, Verdict, decide};
