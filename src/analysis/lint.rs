//! Warnings: programs that are legal but probably do not mean what they say. A warning never
//! changes a program's meaning; `--deny-warnings` turns warnings into errors.

use crate::ir::{Dim, Name, State, TExpr};
use std::collections::BTreeSet;

/// An assignment whose operands carry an iterator that is neither in its result nor summed
/// (eq. 16: the statement runs over every iterator, so each element is overwritten once per
/// value of that iterator and the last value is kept): almost always a forgotten sum. An
/// assignment that reads its own target (`m = max(m, A[i][k])`, an update) reduces over its
/// other iterators on purpose and is not warned about. The warning's text, or `None`.
pub fn forgotten_sum(state: &State, stmt: &TExpr) -> Option<String> {
    let (target, value) = (stmt.target()?, stmt.value()?);
    let tid = target.id()?;
    if value.indexed_leaves().iter().any(|l| l.id() == Some(tid)) {
        return None;
    }
    let result: BTreeSet<Name> = target.index_vars().into_iter().collect();
    let summed: BTreeSet<Name> = value.bound_iters().into_iter().collect();
    let free: Vec<Name> = value
        .index_vars()
        .into_iter()
        .filter(|v| !result.contains(v) && !summed.contains(v) && state.constant(v).is_none())
        .collect();
    if free.is_empty() {
        return None;
    }
    let element = match target.index_list() {
        Some(xs) if !xs.is_empty() => {
            format!("{tid}{}", xs.iter().map(|x| format!("[{x}]")).collect::<String>())
        }
        _ => tid.to_string(),
    };
    let times: Vec<String> =
        free.iter().map(|v| extent_of(value, v).unwrap_or_else(|| "several".into())).collect();
    let (names, verb) = match free.as_slice() {
        [one] => (format!("`{one}` is"), "its"),
        many => {
            (format!("{} are", many.iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(", ")), "their")
        }
    };
    Some(format!(
        "{names} neither in the result nor summed: each {element} is written {} times (once per value of {verb} \
         iteration) and the last value is kept; for a sum, use contract, einsum or a reduction onto `{tid}`",
        times.join(" x ")
    ))
}

/// The extent of iterator `v` where an operand of `e` is indexed by `v` alone.
fn extent_of(e: &TExpr, v: &Name) -> Option<String> {
    extent_expr(e, v).map(|x| x.to_string())
}

/// The extent expression of the dimension of an operand of `e` that `v` indexes alone.
fn extent_expr(e: &TExpr, v: &Name) -> Option<crate::ir::Expr> {
    for leaf in e.indexed_leaves() {
        let Some(xs) = leaf.index_list() else { continue };
        for (d, x) in xs.iter().enumerate() {
            if x.as_var().is_some_and(|n| n == v)
                && let Some(Dim::Known(ext)) = leaf.shape.dims().and_then(|ds| ds.get(d))
            {
                return Some(ext.clone());
            }
        }
    }
    None
}

/// Every warning of a bound statement, in order: [`forgotten_sum`], [`integer_range`].
pub fn warnings(state: &State, stmt: &TExpr) -> Vec<String> {
    forgotten_sum(state, stmt).into_iter().chain(integer_range(state, stmt)).collect()
}

/// An assignment to an integer tensor whose value the extents and the operands' types let
/// reach past the target's range: a sum of `K` products of `u8 * i8` can reach
/// `K * 255 * 128`, past `i32` from `K = 65794`; an `i32` value stored into `i8` keeps its low
/// eight bits (a narrowing). The kernel wraps as C's conversion does, and so does the
/// reference, so such a kernel still verifies: the warning says that the data may not mean
/// what it says. `None` where the value stays in range, or its bound is unknown (a float
/// operand, a function, an accumulation onto the target).
pub fn integer_range(state: &State, stmt: &TExpr) -> Option<String> {
    let (target, value) = (stmt.target()?, stmt.value()?);
    let (lo, hi) = target.dtype.int_range()?;
    let tid = target.id()?;
    // An update of the target (`C[i][j] += A[i][k] * B[k][j]`, how a contraction is bound)
    // adds its value once per value of the iterators the target is not indexed by.
    let result: BTreeSet<Name> = target.index_vars().into_iter().collect();
    let reads_target = value.indexed_leaves().iter().any(|l| l.id() == Some(tid));
    let mut terms = 1.0;
    if reads_target {
        for v in value.index_vars().into_iter().filter(|v| !result.contains(v) && state.constant(v).is_none())
        {
            terms *= summed_extent(state, value, &v)?;
        }
    }
    let reach = max_magnitude(state, value, tid)? * terms;
    if reach <= hi.min(-lo) {
        return None;
    }
    // The type the value computes in: its operands' promotion (the target it updates aside).
    let mut computed: Option<crate::ir::DType> = None;
    value.visit(&mut |n| {
        if let crate::ir::Op::Id(t) = &n.op
            && t != tid
        {
            computed = Some(computed.map_or(n.dtype.compute(), |d| d.promote(n.dtype)));
        }
    });
    let computed = computed?;
    let narrowing = computed != target.dtype;
    let what = if narrowing {
        format!(
            "a narrowing: `{tid}` is {} (from {lo} to {hi}) and its value, computed in {}, can reach {reach:.3e}: \
             only its low {} bits are kept",
            target.dtype,
            computed,
            target.dtype.size() * 8
        )
    } else {
        format!(
            "an integer overflow: the value stored in `{tid}` ({}) can reach {reach:.3e} with these extents, past \
             its range ({lo} to {hi}); it wraps",
            target.dtype
        )
    };
    Some(what)
}

/// The largest magnitude `e` can take from its operands' integer ranges and the extents it
/// sums over, or `None` where that is not known.
/// The target `tid` itself counts 0 (the update's sum starts from it).
fn max_magnitude(state: &State, e: &TExpr, tid: &Name) -> Option<f64> {
    use crate::ir::{Func, Op};
    let kids = || e.children.iter().map(|c| max_magnitude(state, c, tid)).collect::<Option<Vec<f64>>>();
    match &e.op {
        Op::Id(t) if t == tid => Some(0.0),
        Op::Id(_) => e.dtype.int_range().map(|(lo, hi)| lo.abs().max(hi.abs())),
        Op::Lit(x) => Some(x.abs()),
        Op::Add | Op::Sub => kids().map(|k| k.iter().sum()),
        Op::Mul => kids().map(|k| k.iter().product()),
        Op::Div => kids().map(|k| k[0]),
        Op::Call(Func::Max | Func::Min | Func::Abs) => kids().map(|k| k.into_iter().fold(0.0, f64::max)),
        Op::Contract(vs) => {
            let terms: f64 = vs.iter().map(|v| summed_extent(state, e, v)).product::<Option<f64>>()?;
            kids().map(|k| k.iter().product::<f64>() * terms)
        }
        _ => None,
    }
}

/// The extent of the summed iterator `v` of a contraction, at the named constants' values.
fn summed_extent(state: &State, e: &TExpr, v: &Name) -> Option<f64> {
    extent_expr(e, v)?.eval(&|c| state.constant(c)).ok().map(|n| n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stmt(src: &str, id: &str) -> (State, TExpr) {
        let s = crate::lang::eval_with(src, "t.teml", &State::new(), &crate::script::Stdlib::get()).unwrap();
        let t = match s.get(id) {
            Some(crate::ir::Value::Tensor(t)) => t.clone(),
            other => panic!("{other:?}"),
        };
        (s, t)
    }

    #[test]
    fn a_forgotten_sum_is_named_with_its_extent() {
        let (s, y) = stmt(
            "N = 8\nX = tensor([N, N])\nW = tensor([N, N])\nY = mul(X, W, [[i, k], [k, j]] -> [i, j])\n",
            "Y",
        );
        let w = forgotten_sum(&s, &y).expect("a warning");
        assert!(
            w.starts_with("`k` is neither in the result nor summed: each Y[i][j] is written N times"),
            "{w}"
        );
    }

    #[test]
    fn sums_updates_and_plain_statements_are_not_warned_about() {
        let ok = [
            ("N = 8\nA = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\n", "C"),
            ("N = 8\nA = tensor([N, N])\nm = tensor([N])\ns = @m: max(m, A, [[i], [i, k]] -> [i])\n", "s"),
            ("N = 8\nA = tensor([N])\nB = add(A, A, [[i], [N-1-i]] -> [i])\n", "B"),
        ];
        for (src, id) in ok {
            let (s, t) = stmt(src, id);
            assert_eq!(forgotten_sum(&s, &t), None, "{src}");
        }
    }
}
