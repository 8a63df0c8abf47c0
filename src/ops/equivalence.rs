//! The numerical check of an algebraic rewrite (`lift`, `factor`, `expand`): the original
//! expression and the statements that replace it, run by the expression oracle on the same
//! random data at a small size, must agree on the result.

use crate::error::{Error, Result};
use crate::ir::{DType, Name, Nest, State, TExpr};

/// The rewrite checked: the original and the sequence, run by the expression oracle on the
/// same random data at a small size (each named constant replaced by a small value, equal
/// constants by equal values), must agree on the result. A mismatch is a bug in `lift`.
pub(crate) fn agrees_on_small_data(
    builtin: &str,
    state: &State,
    original: &TExpr,
    stmts: &[TExpr],
    result: &Name,
) -> Result<()> {
    let mut values: Vec<i64> = state.consts.values().copied().collect();
    values.sort_unstable();
    values.dedup();
    let small = |v: i64| 2 + values.iter().position(|x| *x == v).unwrap_or(0) as i64;
    let mut st = state.clone();
    for (c, v) in state.consts.clone() {
        st = st.with_const(&c, small(v).min(v.max(1)));
    }
    // Every tensor either side touches, as statements of one nest (buffers_for reads leaves).
    let both: Vec<TExpr> = std::iter::once(original.clone()).chain(stmts.iter().cloned()).collect();
    let leaves = Nest::new(both.iter().cloned().map(crate::ir::LNode::Stmt).collect(), both);
    let mut fill = |name: &Name, dtype: DType, dims: &[usize]| {
        crate::interp::random_data(7, name, dims.iter().product(), dtype)
    };
    let Ok(init) = crate::interp::buffers_for(&st, &[leaves], &mut fill) else { return Ok(()) };
    let (mut want, mut got) = (init.clone(), init);
    let ran = crate::oracle::run(&st, std::slice::from_ref(original), &mut want)
        .and_then(|_| crate::oracle::run(&st, stmts, &mut got));
    if ran.is_err() {
        // Outside what the oracle defines: verification of every kernel still runs the original.
        return Ok(());
    }
    let (Some(w), Some(g)) = (want.get(result), got.get(result)) else { return Ok(()) };
    let scale = w.data.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(1.0);
    if let Some((k, (a, b))) =
        w.data.iter().zip(&g.data).enumerate().find(|(_, (a, b))| (*a - *b).abs() > 1e-9 * scale)
    {
        return Err(Error::Internal {
            builtin: builtin.into(),
            reason: format!(
                "the rewrite differs from `{original}` at element {k} of `{result}` ({b} against {a}) on small random data"
            ),
        });
    }
    Ok(())
}
