//! Exact legality: the dependences of a nest's untransformed statements, computed with isl,
//! and the check that a transformed nest (and its parallel and vector marks) keeps them.

pub mod isl;
pub mod legality;

pub use legality::{Illegal, Verdict, check};
