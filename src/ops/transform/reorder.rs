//! Reordering: strip-mining, interchange (eq. 20-22), skewing, shifting, reversal.

use super::*;

/// `stripmine(l, r, v)`, eq. 20 (corrected: docs/semantics.md): splits the loop at level `r`
/// into blocks of `v` iterations. The new outer loop `<i>o` counts blocks; the inner loop
/// keeps the iterator `i` (so the body is unchanged) and its marks. A factor that does not
/// divide the trip count gives a last, shorter block through `min`.
///
/// ```text
/// for i in [b, e]            for io in [0, floor((e-b)/v)]
///   S(i)             →         for i in [b+v*io, min(b+v*io+v-1, e)]
///                                S(i)
/// ```
pub fn stripmine(state: &State, nest: &Nest, level: i64, factor: i64) -> Result<Nest> {
    stripmine_aligned(state, nest, level, factor, false)
}

/// `stripmine(l, r, v, "aligned")`: as [`stripmine`], except that a loop whose start moves
/// with an outer loop (a skewed loop, a triangle `j in [i+1, N-1]`) is cut at the multiples of
/// `v` of its iterator rather than from its start, so that the blocks of consecutive outer
/// iterations line up: the lattice of Pluto's tiles, which `tile` builds on (time tiling).
///
/// ```text
/// for i in [b(t), e(t)]          for io in [floor(b(t)/v), floor(e(t)/v)]
///   S(i)                   →       for i in [max(v*io, b(t)), min(v*io+v-1, e(t))]
///                                    S(i)
/// ```
pub fn stripmine_aligned(state: &State, nest: &Nest, level: i64, factor: i64, aligned: bool) -> Result<Nest> {
    let b = "stripmine";
    if !(1..=INT_MAX).contains(&factor) {
        return Err(Error::bad_argument(
            b,
            Arg::new(3, "factor"),
            if factor < 1 {
                "a factor of 1 or more".into()
            } else {
                format!("a factor of at most {INT_MAX}")
            },
            factor.to_string(),
        ));
    }
    let taken = names_in(nest, state);
    let iters: BTreeSet<Name> = nest.path().iter().map(|l| l.iter.clone()).collect();
    rewrite_loop(nest, level, b, &level_arg(2), &mut |l| {
        let outer_name = fresh(&format!("{}o", l.iter), &taken);
        if aligned && l.lb.vars().iter().any(|v| iters.contains(v)) {
            let o = Expr::var_name(&outer_name);
            let ovf = |_| overflow(b, l);
            let start = o.checked_scale(factor).map_err(ovf)?;
            let end = start.checked_add_int(factor - 1).map_err(ovf)?;
            let inner = Loop { lb: Expr::max(&start, &l.lb), ub: Expr::min(&end, &l.ub), ..(**l).clone() };
            let outer = Loop {
                iter: outer_name,
                lb: l.lb.floordiv(factor),
                ub: l.ub.floordiv(factor),
                annot: Default::default(),
                body: vec![LNode::Loop(Arc::new(inner))],
            };
            return Ok(vec![LNode::Loop(Arc::new(outer))]);
        }
        let (lb, ub) = (&l.lb, &l.ub);
        let o = Expr::var_name(&outer_name);
        let ovf = |_| overflow(b, l);
        let inner_lb = lb.checked_add(&o.checked_scale(factor).map_err(ovf)?).map_err(ovf)?;
        let full_ub = inner_lb.checked_add_int(factor - 1).map_err(ovf)?;
        // The trip count, with the named constants the state binds (as `unroll` does): where v
        // divides it, the last block is full and needs no `min`.
        let span = ub.checked_sub(lb).map_err(ovf)?;
        let trip = match span.checked_eval(&|c| state.constant(c)) {
            Ok(d) => Some(d + 1),
            Err(EvalError::Unbound(_)) => None,
            Err(EvalError::Overflow) => return Err(overflow(b, l)),
        };
        if !full_ub.within(INT_MAX) || !inner_lb.within(INT_MAX) {
            return Err(overflow(b, l));
        }
        let inner_ub = match trip {
            Some(n) if n % factor == 0 => full_ub,
            _ => Expr::min(&full_ub, ub),
        };
        let inner = Loop {
            iter: l.iter.clone(),
            lb: inner_lb,
            ub: inner_ub,
            annot: l.annot.clone(),
            body: l.body.clone(),
        };
        let outer = Loop {
            iter: outer_name,
            lb: Expr::int(0),
            ub: span.floordiv(factor),
            annot: Default::default(),
            body: vec![LNode::Loop(Arc::new(inner))],
        };
        Ok(vec![LNode::Loop(Arc::new(outer))])
    })
}

/// `interchange(l, r1, r2)`, eq. 21: swaps the loops at levels `r1` and `r2` of a perfectly
/// nested part of the nest (marks move with their loops). Refused where a loop's bounds
/// depend on a loop it would move past (e.g. a strip-mined inner loop past its outer loop).
/// The levels need not be adjacent: the loops between them stay where they are.
/// `interchange(l, 1, 3)`:
///
/// ```text
/// for i in [0, N-1]  parallel        for k in [0, K-1]
///   for j in [0, M-1]          →       for j in [0, M-1]
///     for k in [0, K-1]                  for i in [0, N-1]  parallel
///       S(i, j, k)                         S(i, j, k)
/// ```
pub fn interchange(nest: &Nest, r1: i64, r2: i64) -> Result<Nest> {
    let b = "interchange";
    locate(nest, r1, b, &level_arg(2))?;
    locate(nest, r2, b, &level_arg(3))?;
    if r1 == r2 {
        return Ok(nest.clone());
    }
    let (lo, hi) = (r1.min(r2) as usize, r1.max(r2) as usize);
    let path = nest.path();
    let chain: Vec<Arc<Loop>> = path[lo - 1..hi].to_vec();
    let (outer, inner) = (&chain[0], &chain[chain.len() - 1]);
    let mids = &chain[1..chain.len() - 1];
    // Adjacent loops whose bounds depend on one another (a triangle, a skewed or tiled loop):
    // their points scanned in the other order (Fourier–Motzkin, `ops::fm`).
    if mids.is_empty() && inner.bounds_mention(&outer.iter) {
        let ((lb_y, ub_y), (lb_x, ub_x)) =
            crate::ops::fm::swap(outer, inner).ok_or_else(|| illegal_move(b, inner, outer))?;
        // Arguments of `min`/`max` that the loops around imply are dropped (isl).
        let above: Vec<&Loop> = path[..lo - 1].iter().map(|l| &**l).collect();
        let y = Loop { lb: lb_y, ub: ub_y, body: Vec::new(), ..(**inner).clone() };
        let y = crate::analysis::legality::tidy_bounds(&above, &y);
        let x = Loop { lb: lb_x, ub: ub_x, body: inner.body.clone(), ..(**outer).clone() };
        let x = crate::analysis::legality::tidy_bounds(&[&above[..], &[&y]].concat(), &x);
        let y = Loop { body: vec![LNode::Loop(Arc::new(x))], ..y };
        for l in [&y, y.body[0].as_loop().map(|l| &**l).unwrap_or(&y)] {
            if !l.lb.within(INT_MAX) || !l.ub.within(INT_MAX) {
                return Err(overflow(b, l));
            }
        }
        let body = vec![LNode::Loop(Arc::new(y))];
        return rewrite_body(nest, lo - 1, &mut |_| Ok(body.clone()));
    }
    // Step 1. Check: the inner loop moves outside the outer one and the loops between.
    for passed in std::iter::once(outer).chain(mids) {
        if inner.bounds_mention(&passed.iter) {
            return Err(illegal_move(b, inner, passed));
        }
    }
    // The outer loop moves inside the loops between.
    for m in mids {
        if m.bounds_mention(&outer.iter) {
            return Err(illegal_move(b, m, outer));
        }
    }
    // Step 2. Rewrite: the same chain with the two headers swapped.
    let mut headers: Vec<Arc<Loop>> = chain.clone();
    headers.swap(0, chain.len() - 1);
    let mut body = inner.body.clone();
    for h in headers.iter().rev() {
        body = vec![LNode::Loop(h.with_body(body))];
    }
    rewrite_body(nest, lo - 1, &mut |_| Ok(body.clone()))
}

/// The loop at `level` with its range moved by `by` (an expression in outer iterators) and its
/// iterator read as `i - by` below: the same instances, in the same order.
pub(super) fn moved(l: &Loop, by: &Expr, b: &str) -> Result<Arc<Loop>> {
    let i = l.iter.clone();
    let back = Expr::var_name(&i).sub(by);
    let sub = |v: &str| (v == &*i).then(|| back.clone());
    let out = Loop {
        lb: l.lb.checked_add(by).map_err(|_| overflow(b, l))?,
        ub: l.ub.checked_add(by).map_err(|_| overflow(b, l))?,
        body: l.body.iter().map(|c| c.subst(&sub)).collect(),
        ..l.clone()
    };
    if !out.lb.within(INT_MAX) || !out.ub.within(INT_MAX) {
        return Err(overflow(b, &out));
    }
    Ok(Arc::new(out))
}

/// `skew(l, r1, r2, f)` (Pluto; Wolf and Lam's skewing): the loop at level `r2` runs
/// `j' = j + f*i`, `i` the iterator of the loop at level `r1 < r2`; its body reads `j` as
/// `j' - f*i`. The instances are the same; a later interchange or tiling (time tiling of a
/// stencil) turns the new order into parallelism. The iterator keeps its name.
///
/// ```text
/// for t in [0, T-1]              for t in [0, T-1]
///   for i in [1, N-2]     →        for i in [t+1, t+N-2]
///     S(t, i)                        S(t, i-t)
/// ```
pub fn skew(nest: &Nest, r1: i64, r2: i64, f: i64) -> Result<Nest> {
    let b = "skew";
    let outer = locate(nest, r1, b, &level_arg(2))?;
    locate(nest, r2, b, &level_arg(3))?;
    if r2 <= r1 {
        return Err(Error::bad_argument(
            b,
            level_arg(3),
            format!("a level inside level {r1} (the loop it is skewed by)"),
            format!("level {r2}"),
        ));
    }
    if f == 0 || f.checked_abs().is_none_or(|a| a > INT_MAX) {
        return Err(Error::bad_argument(
            b,
            Arg::new(4, "factor"),
            "a non-zero integer factor",
            format!("{f}"),
        ));
    }
    let by = Expr::var_name(&outer.iter).scale(f);
    rewrite_loop(nest, r2, b, &level_arg(3), &mut |l| Ok(vec![LNode::Loop(moved(l, &by, b)?)]))
}

/// `shift(l, r, c)` (Pluto's shifting): the loop at level `r` runs `i' = i + c`, its body
/// reading `i` as `i' - c`: the same instances in the same order, now aligned with a sibling
/// loop for `fuse_inner` (which then guards what runs outside its own range).
pub fn shift(nest: &Nest, level: i64, c: i64) -> Result<Nest> {
    let b = "shift";
    if c.checked_abs().is_none_or(|a| a > INT_MAX) {
        return Err(Error::bad_argument(
            b,
            Arg::new(3, "offset"),
            format!("an offset within ±{INT_MAX}"),
            format!("{c}"),
        ));
    }
    rewrite_loop(nest, level, b, &level_arg(2), &mut |l| Ok(vec![LNode::Loop(moved(l, &Expr::int(c), b)?)]))
}

/// `reverse(l, r)` (loop reversal): the loop at level `r` runs its range backwards: its body
/// reads `i` as `lb + ub - i`.
///
/// ```text
/// for i in [0, N-1]        for i in [0, N-1]
///   S(i)             →       S(N-1-i)
/// ```
pub fn reverse(nest: &Nest, level: i64) -> Result<Nest> {
    let b = "reverse";
    rewrite_loop(nest, level, b, &level_arg(2), &mut |l| {
        if !l.lb.is_affine() || !l.ub.is_affine() {
            return Err(Error::bad_argument(
                b,
                level_arg(2),
                "a loop with affine bounds (indices stay affine: reverse before strip-mining)",
                format!("loop {}", l.header()),
            ));
        }
        let i = l.iter.clone();
        let mirror =
            l.lb.checked_add(&l.ub)
                .and_then(|s| s.checked_sub(&Expr::var_name(&i)))
                .map_err(|_| overflow(b, l))?;
        let sub = |v: &str| (v == &*i).then(|| mirror.clone());
        Ok(vec![LNode::Loop(Arc::new(Loop {
            body: l.body.iter().map(|c| c.subst(&sub)).collect(),
            ..(**l).clone()
        }))])
    })
}
