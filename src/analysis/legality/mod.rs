//! Legality of a transformed nest, decided exactly with isl from the dependences of its
//! untransformed statements (the polyhedral model, as Polly, PPCG and Pluto use it).
//!
//! - **Instances.** Origin statement `k` of a nest (`Nest::origin`) runs the instances
//!   `S<k>[i1, .., in]` that its loops in the untransformed nest (`Nest::program`) describe:
//!   the box of `build` (every range from 0, upper bounds affine in the named constants, which
//!   are isl parameters), or the ranges its user gave (affine bounds in outer iterators,
//!   backward ranges, loops around a sequence).
//! - **Dependences.** Two instances depend when they touch the same element of a tensor, at
//!   least one writes it, in the original order (the untransformed nest's: statement `k`
//!   entirely before `k+1` unless a loop around a sequence interleaves them, each in the
//!   lexicographic order of its loops): flow, anti and output dependences at once. The
//!   updates of one accumulation into one element (`C[i][j] += ...` of a contraction, or a
//!   user's `A = add(A, t, ...)` summing over an iterator) may run in any order: those
//!   dependences of a statement on itself through its target are left out, as a reduction.
//!   (An accumulator's zeroing happens at its first update, which every order the
//!   transformations produce keeps first.)
//!   For the order (not the marks), the `max` updates of one element by different statements
//!   are left out too, and likewise `min`: they commute exactly (`model::relaxed_across`).
//! - **Schedules.** Each statement of the transformed nest carries its [`Instance`]: the
//!   original instance it runs, as expressions in the loops around it. With the loops'
//!   bounds and the statement's position at each level, that gives the new time of every
//!   original instance: `[p0, v1, p1, v2, ..]`.
//! - **Order.** The path is legal if no dependence runs backwards: no pair `a -> b` whose new
//!   time of `a` is not before that of `b`. Otherwise isl gives a pair, the witness.
//! - **Marks.** A loop marked parallel or vector must carry no dependence: no pair that agrees
//!   on the loops outside it and differs on it. Reductions into one element remain, and code
//!   generation realizes them with private accumulators (`analysis/reduction.rs`).
//!
//! The verdict is for every value of the named constants (at least 1), or, where the nest is
//! only legal at some sizes (a strip-mined nest without `min` is only valid where the factor
//! divides), for the values the program binds; it says which.

mod model;
mod queries;
mod verdict;
mod witness;

use model::*;
pub use queries::*;
use verdict::*;
use witness::*;

use super::isl::{Ctx, UMap, with_ctx};
use crate::ir::{Atom, Expr, Instance, LNode, Loop, Name, Nest, State, TExpr, Update, lower};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What the analysis decided: `Ok(Ok(x))` legal, `Ok(Err(illegal))` illegal with a witness,
/// `Err(message)` undecided (isl could not build or answer the question, or its operation
/// limit ran out).
pub type Decision<T> = Result<Result<T, Illegal>, String>;

/// What the check concluded.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// No dependence is reversed and no mark carries one, for every value of the constants.
    AllSizes,
    /// Legal with the constants the program binds (e.g. `N=8`), not for all.
    TheseSizes(String),
}

/// Why a nest is illegal: a message with a witness.
#[derive(Clone, Debug, PartialEq)]
pub struct Illegal {
    /// E.g. "`C[0][3]` is written by statement 1 (`B[i][j] = ...`) at (i=0, j=3) and read by ...".
    pub message: String,
}

/// Checks the order of `nest` and its marks against the dependences of its origins, for every
/// size first, then at the program's sizes; and that it runs exactly the original instances.
pub fn decide(state: &State, nest: &Nest) -> Decision<Verdict> {
    analyze(state, nest, true)
}

/// [`decide`] at the program's sizes only (the named constants fixed from the start, which is
/// faster): what every transformation builtin asks before it returns: the order, the marks,
/// and that the nest runs exactly the original instances at those sizes.
pub fn decide_at_sizes(state: &State, nest: &Nest) -> Result<Result<(), Illegal>, String> {
    Ok(analyze(state, nest, false)?.map(|_| ()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_read_from_isl_text() {
        let (p, a, b) = point(
            "[p_N] -> { S0[o_i, o_j] -> S1[q_i = 3, q_j] : p_N = 6 and o_i = 0 and o_j = 3 and q_j = 0 }",
        );
        assert_eq!(p, vec![("N".to_string(), 6)]);
        assert_eq!(a, Some((0, vec![0, 3])));
        assert_eq!(b, Some((1, vec![3, 0])));
        let (_, a, b) = point("{ S2[1] -> S2[2] }");
        assert_eq!((a, b), (Some((2, vec![1])), Some((2, vec![2]))));
    }
}
