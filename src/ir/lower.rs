//! The meaning of a statement leaf, flattened for execution: `target (=|+=) rhs`, with
//! contractions realized by the loops around the statement and accumulators zeroed first.
//! Code generation and the reference interpreter both read this one form.

use super::expr::{Expr, Name};
use super::texpr::{AssignMode, Func, Op, TExpr, TNode};
use std::sync::Arc;

/// How the statement writes its target: set it, or combine the value with what it held by a
/// reduction operator (`add`, `sub`, `max` or `min` of the target onto itself). The updates of
/// one element by one combining statement may run in any order (exactly for `max` and `min`,
/// up to rounding for `+` and `-`): legality treats them as a reduction, and a marked loop
/// realizes them with private accumulators (docs/semantics.md, "Reductions").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update {
    /// `x = rhs`
    Set,
    /// `x += rhs`
    Add,
    /// `x -= rhs` (`x = sub(x, r)`)
    Sub,
    /// `x = max(x, rhs)`
    Max,
    /// `x = min(x, rhs)`
    Min,
}

impl Update {
    /// True for every update that combines with what the target held (a reduction operator).
    pub fn accumulates(self) -> bool {
        self != Update::Set
    }

    /// What the target holds after the update, from what it held and the value.
    pub fn combine(self, old: f64, v: f64) -> f64 {
        match self {
            Update::Set => v,
            Update::Add => old + v,
            Update::Sub => old - v,
            Update::Max => old.max(v),
            Update::Min => old.min(v),
        }
    }

    /// The OpenMP reduction identifier of private accumulators of this update (`Sub`'s
    /// accumulator sums what is subtracted).
    pub fn omp(self) -> &'static str {
        match self {
            Update::Max => "max",
            Update::Min => "min",
            _ => "+",
        }
    }
}

/// A statement ready to execute.
#[derive(Clone, Debug, PartialEq)]
pub struct Lowered {
    /// The target access (a leaf with an index list, or a scalar).
    pub target: TExpr,
    /// `=` or `+=`.
    pub update: Update,
    /// The value: arithmetic over leaves only (no contraction nodes).
    pub rhs: TExpr,
    /// The target is an accumulator: the instance where all these expressions are 0 is the
    /// first update of its element, which sets instead of adding (the accumulator is zeroed
    /// there, never earlier). `None` for statements that write or add onto what was there.
    pub first: Option<Vec<Expr>>,
    /// Conditions `g >= 0`: the statement runs only where all hold (an unrolled copy past a
    /// partial block's end does not run). Empty: always.
    pub when: Vec<Expr>,
}

impl Lowered {
    /// Whether it sums values that are not integers into an integer element (`u8 += double`):
    /// each update truncates to the element's type, so its updates give another value in
    /// another order (no reduction that may reorder) and are kept in that type. (`max` and
    /// `min` commute with the truncation.)
    pub fn truncates(&self) -> bool {
        matches!(self.update, Update::Add | Update::Sub)
            && self.target.dtype.is_integer()
            && !self.rhs.dtype.compute().is_integer()
    }
}

/// The reduction operator if `stmt` is `x = x + r`, `x = x - r`, `x = max(x, r)` or
/// `x = min(x, r)` with the same tensor at the same indices.
pub fn accumulates_onto(stmt: &TNode) -> Option<Update> {
    let (x, y) = (stmt.target()?, stmt.value()?);
    let update = match y.op {
        Op::Add => Update::Add,
        Op::Sub => Update::Sub,
        Op::Call(Func::Max) => Update::Max,
        Op::Call(Func::Min) => Update::Min,
        _ => return None,
    };
    let a = y.children.first()?;
    (y.children.len() == 2 && a.is_tensor_leaf() && a.op == x.op && a.iters == x.iters).then_some(update)
}

/// Replaces each contraction by the product of its children (its sum is realized by loops).
pub fn flatten(t: &TExpr) -> TExpr {
    if t.children.is_empty() {
        return t.clone();
    }
    let kids: Vec<TExpr> = t.children.iter().map(flatten).collect();
    match t.op {
        Op::Contract(_) => {
            let mut it = kids.into_iter();
            let first = it.next().unwrap_or_else(|| t.clone());
            it.fold(first, |acc, k| TNode::node(Op::Mul, t.shape.clone(), vec![acc, k]))
        }
        _ => Arc::new(TNode { children: kids, ..(**t).clone() }),
    }
}

/// Lowers an assignment; `None` for anything that is not one.
pub fn lower(stmt: &TExpr) -> Option<Lowered> {
    let (x, y) = (stmt.target()?, stmt.value()?);
    let onto = accumulates_onto(stmt);
    let value = if onto.is_some() { &y.children[1] } else { y };
    let update = match onto {
        Some(u) => u,
        None if value.has_contract() => Update::Add,
        None => Update::Set,
    };
    Some(Lowered {
        target: x.clone(),
        update,
        rhs: flatten(value),
        first: matches!(stmt.op, Op::Assign(AssignMode::Accumulator)).then(|| match stmt.first_update() {
            Some(xs) => xs,
            // Not placed by `build`: the iterators it reads that the target does not index.
            None => {
                let t: Vec<Name> = x.index_vars();
                stmt.index_vars().into_iter().filter(|v| !t.contains(v)).map(|v| Expr::var_name(&v)).collect()
            }
        }),
        when: stmt.guard().to_vec(),
    })
}

/// Number of floating-point operations one execution of the statement performs.
pub fn flops(l: &Lowered) -> u64 {
    let mut n = 0;
    l.rhs.visit(&mut |t| {
        if t.op.is_arith() {
            n += 1;
        }
    });
    n + u64::from(l.update.accumulates())
}
