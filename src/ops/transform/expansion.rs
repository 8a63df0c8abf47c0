//! Expansion: unrolling (eq. 25), with the guards of a partial block.

use super::*;

/// Largest trip count `unroll` expands.
pub const MAX_UNROLL: i64 = 4096;

/// `unroll(l, r)`, eq. 25: replaces the loop at level `r` by copies of its body, one per
/// iteration, with the iterator replaced by `b + s*j` (an affine expression when the bounds
/// depend on outer iterators). Unrolling level 1 yields a top-level sequence (eq. 3). The trip
/// count `(e-b)/s + 1` must be a constant, named constants taking the values the state binds,
/// or the loop a strip-mined block `[b, min(b + c, e, ..)]`: then copy `j` is guarded by
/// `e - (b + s*j) >= 0` (docs/semantics.md, "unroll of a partial block"). At most
/// [`MAX_UNROLL`] copies. `unroll(l, 1)`, and `unroll(l, 2)` of a strip-mined loop:
///
/// ```text
/// for i in [0, 2]                  seq
///   S(i)                     →        S(0)
///                                     S(1)
///                                     S(2)
///
/// for io in [0, 3]                  for io in [0, 3]
///   for i in [2*io, 2*io+1]  →        S(2*io)
///     S(i)                            S(2*io+1)
/// ```
pub fn unroll(state: &State, nest: &Nest, level: i64) -> Result<Nest> {
    let b = "unroll";
    let path = nest.path();
    rewrite_loop(nest, level, b, &level_arg(2), &mut |l| {
        let span = l.ub.checked_sub(&l.lb).map_err(|_| overflow(b, l))?;
        let trip = |d: i64| if d < 0 { 0 } else { d + 1 };
        let constant = span.as_const().or_else(|| span.checked_eval(&|v| state.constant(v)).ok());
        let (k, tail) = match constant {
            Some(d) => (trip(d), Vec::new()),
            None => {
                let (d, rest) = bounded_trip(l).ok_or_else(|| Error::Illegal {
                    builtin: b.into(),
                    reason: format!(
                        "loop `{}` has no constant trip count (range {}): expected bounds whose \
                         difference is a constant, or an upper bound `min(lb + c, ..)` (a strip-mined \
                         block) with affine terms",
                        l.iter,
                        l.range()
                    ),
                })?;
                (trip(d), rest)
            }
        };
        if k > MAX_UNROLL {
            return Err(Error::Limit {
                builtin: b.into(),
                reason: format!(
                    "loop `{}` runs {k} times: expected at most {MAX_UNROLL} iterations to unroll fully; \
                     strip-mine it first and unroll the inner loop",
                    l.iter
                ),
            });
        }
        let outer: Vec<&Loop> = path[..level as usize - 1].iter().map(|x| &**x).collect();
        let mut out = Vec::new();
        for j in 0..k {
            let val = l.lb.checked_add_int(j).ok();
            let val = val.ok_or_else(|| overflow(b, l))?;
            let sub = |v: &str| (v == &*l.iter).then(|| val.clone());
            // A copy past the end of a partial block does not run: it is guarded by the bounds
            // the block's `min` holds besides its length (unless they always hold there).
            let mut guard = Vec::new();
            for y in &tail {
                let g = y.checked_sub(&val).map_err(|_| overflow(b, l))?;
                if j == 0 && crate::analysis::legality::always_nonneg(&outer, &g) == Some(true) {
                    continue;
                }
                guard.push(g);
            }
            for c in &l.body {
                let c = c.subst(&sub);
                out.push(if guard.is_empty() {
                    c
                } else {
                    guarded(&c, &guard).map_err(|why| Error::Illegal {
                        builtin: b.into(),
                        reason: format!(
                            "cannot unroll loop `{}` ({}) with a partial last block: {why}",
                            l.iter,
                            l.range()
                        ),
                    })?
                });
            }
        }
        Ok(out)
    })
}

/// The bounded trip of `for i in [lb, min(lb + c, y1, ..)]` (a strip-mined block): `c`, and the
/// other terms `y1, ..` (affine), which each copy's value must not pass.
pub(super) fn bounded_trip(l: &Loop) -> Option<(i64, Vec<Expr>)> {
    let args = l.ub.min_args()?;
    let mut c: Option<i64> = None;
    let mut rest = Vec::new();
    for x in args {
        match x.sub(&l.lb).as_const() {
            Some(d) => c = Some(c.map_or(d, |c: i64| c.min(d))),
            None if x.is_affine() => rest.push(x.clone()),
            None => return None,
        }
    }
    (l.lb.is_affine()).then_some(())?;
    c.map(|c| (c, rest))
}

/// `x` with every statement below guarded by `g >= 0` for each `g` of `guard`.
pub(super) fn guarded(x: &LNode, guard: &[Expr]) -> std::result::Result<LNode, String> {
    let mut missing = None;
    let out = x.map_stmts(&|s| match &s.inst {
        Some(i) => {
            let mut inst = (**i).clone();
            inst.guard.extend(guard.iter().cloned());
            s.with_instance(inst)
        }
        None => s.clone(),
    });
    out.stmts().iter().for_each(|s| {
        if s.inst.is_none() {
            missing = Some(format!("the statement `{s}` was not placed by `build`"));
        }
    });
    missing.map_or(Ok(out), Err)
}
