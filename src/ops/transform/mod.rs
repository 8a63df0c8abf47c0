//! Loop transformations (Fig. 9, eq. 20-25) and the annotations of Sec. 3.3.3.
//!
//! Each is a pure function from a nest to a new nest: validation first (the arguments, the
//! levels, the tree patterns, and what the rewrite needs: bounds that do not depend on a loop an
//! interchange moves them past, new bounds within C's `int`, a constant trip count to unroll),
//! rewrite second. None of these functions looks at dependences: the builtin registry checks
//! the result's legality after the rewrite ([`crate::ops::registry::call`], through
//! [`crate::ops::registry::legality_gate`]: isl, `analysis::legality`, docs/legality.md) unless the
//! state says `unchecked` (`--unchecked`); called directly, these functions return the rewrite
//! unchecked. Unchanged sub-trees are shared, not copied. A level `r` counts loops along the
//! single path from the root; a level below a branch is an error.

mod expansion;
mod fusion;
mod layouts;
mod loop_marks;
mod navigate;
mod reorder;
mod storage;
mod tensor_marks;

pub use expansion::*;
pub use fusion::*;
pub use layouts::*;
pub use loop_marks::*;
use navigate::*;
pub use reorder::*;
pub use storage::*;
pub use tensor_marks::*;

use crate::analysis::kernel::{not_rectangular, parallel_loop, simd_around_parallel_reason};
use crate::error::{Arg, Error, Result};
use crate::ir::expr::INT_MAX;
use crate::ir::marks::{Mark, Scope, rule};
use crate::ir::{EvalError, Expr, LNode, Loop, Name, Nest, PackLayout, State};
use crate::ops::tensor::fresh;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Bounds of the rewritten loop `l` that leave the range of the generated C's `int`.
fn overflow(builtin: &str, l: &Loop) -> Error {
    Error::Limit {
        builtin: builtin.into(),
        reason: format!(
            "the bounds of loop `{}` ({}) leave the integer range: expected bounds within \
             -{INT_MAX}..={INT_MAX} (the generated loops run over C int), found an integer overflow",
            l.iter,
            l.range()
        ),
    }
}

fn illegal_move(b: &str, dependent: &Loop, on: &Loop) -> Error {
    Error::Illegal {
        builtin: b.into(),
        reason: format!(
            "the bounds of loop `{}` ({}) depend on `{}`, and the interchange would move it \
             outside loop `{}`: expected loops with independent bounds, found a dependence",
            dependent.iter,
            dependent.range(),
            on.iter,
            on.iter
        ),
    }
}

/// The refusal of a parallel loop inside a vectorized one.
fn simd_around_parallel(builtin: &str, outer: &Loop, inner: &Loop) -> Error {
    Error::Illegal { builtin: builtin.into(), reason: simd_around_parallel_reason(outer, inner) }
}
