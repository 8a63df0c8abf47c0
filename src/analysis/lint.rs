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
    for leaf in e.indexed_leaves() {
        let Some(xs) = leaf.index_list() else { continue };
        for (d, x) in xs.iter().enumerate() {
            if x.as_var().is_some_and(|n| n == v)
                && let Some(Dim::Known(ext)) = leaf.shape.dims().and_then(|ds| ds.get(d))
            {
                return Some(ext.to_string());
            }
        }
    }
    None
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
