//! Fourier–Motzkin elimination for the bounds of two adjacent loops: what interchanging a
//! loop with one whose bounds depend on it (a triangle `j in [0, i]`, a skewed or tiled loop)
//! needs. The pair's points `{(x, y) : lb_x <= x <= ub_x, lb_y(x) <= y <= ub_y(x)}` are
//! rewritten as `{(y, x) : lb'_y <= y <= ub'_y, lb'_x(y) <= x <= ub'_x(y)}`: the same set,
//! scanned in the other order (the polyhedral scanning of CLooG, for two dimensions).
//!
//! Bounds are affine, or an affine expression plus one `min` (upper) or `max` (lower) of such
//! bounds or one `floor(e/d)`, in the two iterators and anything outside them (a skewed tile
//! loop's `to + min(...)`); other forms (an atom of another shape mentioning either iterator)
//! give `None`.

use crate::ir::{Atom, Expr, Loop, Name};

/// `a*x + b*y + r >= 0`, `r` free of `x` and `y`.
#[derive(Clone, Debug)]
struct Cons {
    a: i64,
    b: i64,
    r: Expr,
}

/// `d*v >= e` (a lower bound) or `d*v <= e` (an upper bound), `d >= 1`.
struct Bound {
    d: i64,
    e: Expr,
}

/// A loop's lower (`upper = false`) or upper bound as a conjunction of [`Bound`]s:
/// `v >= r + max(a, b)` is `v >= r + a and v >= r + b` (likewise `min` for an upper bound), and
/// `v >= floor(e/d) + r` is `d*(v-r) >= e - d + 1` (`v <= floor(e/d) + r`: `d*(v-r) <= e`).
fn split_bounds(e: &Expr, upper: bool) -> Option<Vec<Bound>> {
    match (e.atom_plus(), upper) {
        (Some((Atom::Max(xs), r)), false) | (Some((Atom::Min(xs), r)), true) => xs
            .iter()
            .map(|x| split_bounds(&x.add(&r), upper))
            .collect::<Option<Vec<_>>>()
            .map(|v| v.into_iter().flatten().collect()),
        (Some((Atom::FloorDiv(f, d), r)), _) => {
            let slack = if upper { 0 } else { 1 - d };
            Some(vec![Bound { d: *d, e: f.add_int(slack).add(&r.scale(*d)) }])
        }
        _ => Some(vec![Bound { d: 1, e: e.clone() }]),
    }
}

/// `e` as `cx*x + cy*y + rest`, `rest` free of both; `None` where an atom hides either.
fn split(e: &Expr, x: &Name, y: &Name) -> Option<(i64, i64, Expr)> {
    let (cx, cy) = (e.coeff(x), e.coeff(y));
    let rest = e.sub(&Expr::var_name(x).scale(cx)).sub(&Expr::var_name(y).scale(cy));
    (!rest.mentions(x) && !rest.mentions(y)).then_some((cx, cy, rest))
}

fn constraints(l: &Loop, v: &Name, x: &Name, y: &Name) -> Option<Vec<Cons>> {
    let mut out = Vec::new();
    let along = |cx: i64, cy: i64| if v == x { (cx, cy) } else { (cy, cx) };
    for Bound { d, e } in split_bounds(&l.lb, false)? {
        // d*v - e >= 0
        let (cx, cy, r) = split(&e, x, y)?;
        let (dv_x, dv_y) = along(d, 0);
        out.push(Cons { a: dv_x - cx, b: dv_y - cy, r: r.scale(-1) });
    }
    for Bound { d, e } in split_bounds(&l.ub, true)? {
        // e - d*v >= 0
        let (cx, cy, r) = split(&e, x, y)?;
        let (dv_x, dv_y) = along(d, 0);
        out.push(Cons { a: cx - dv_x, b: cy - dv_y, r });
    }
    Some(out)
}

/// `ceil(e/d)` for `d >= 1`.
fn ceil_div(e: &Expr, d: i64) -> Expr {
    if d == 1 { e.clone() } else { e.add_int(d - 1).floordiv(d) }
}

/// The bounds of `v` (coefficient `c` in each constraint, the rest `rest`): lower bounds
/// where `c > 0`, upper where `c < 0`.
fn bounds_of(cons: &[(i64, Expr)]) -> (Vec<Expr>, Vec<Expr>) {
    let (mut lo, mut hi) = (Vec::new(), Vec::new());
    for (c, rest) in cons {
        if *c > 0 {
            // c*v + rest >= 0  =>  v >= ceil(-rest / c)
            lo.push(ceil_div(&rest.scale(-1), *c));
        } else if *c < 0 {
            // rest >= |c|*v  =>  v <= floor(rest / |c|)
            hi.push(rest.floordiv(-c));
        }
    }
    (lo, hi)
}

/// Drops candidates another candidate dominates over the outer loop's range `[olb, oub]` of
/// `o` (`keep_max`: lower bounds, the largest wins).
fn prune(cands: Vec<Expr>, o: &Name, olb: &Expr, oub: &Expr, keep_max: bool) -> Vec<Expr> {
    let dominated = |a: &Expr, b: &Expr| -> bool {
        // b >= a everywhere (keep_max) or b <= a everywhere (min).
        let diff = if keep_max { b.sub(a) } else { a.sub(b) };
        let k = diff.coeff(o);
        // Only where `o` appears as a plain term (not inside a floor, min or max).
        if diff.sub(&Expr::var_name(o).scale(k)).mentions(o) {
            return false;
        }
        let at = if k >= 0 { olb } else { oub };
        diff.subst(o, at).as_const().is_some_and(|c| c >= 0) && (k == 0 || at.is_affine())
    };
    let mut out: Vec<Expr> = Vec::new();
    for (i, a) in cands.iter().enumerate() {
        let beaten =
            cands.iter().enumerate().any(|(j, b)| j != i && dominated(a, b) && (!dominated(b, a) || j < i));
        if !beaten && !out.contains(a) {
            out.push(a.clone());
        }
    }
    out
}

fn fold(xs: Vec<Expr>, is_max: bool) -> Option<Expr> {
    let mut it = xs.into_iter();
    let first = it.next()?;
    Some(it.fold(first, |acc, e| if is_max { Expr::max(&acc, &e) } else { Expr::min(&acc, &e) }))
}

/// The new ranges of `inner` (now outside) and `outer` (now inside) when the two adjacent
/// loops, `outer` around `inner`, are interchanged: `((lb_y, ub_y), (lb_x, ub_x))`. `None`
/// where a bound has a form the elimination does not read.
pub fn swap(outer: &Loop, inner: &Loop) -> Option<((Expr, Expr), (Expr, Expr))> {
    let (x, y) = (&outer.iter, &inner.iter);
    let mut all = constraints(outer, x, x, y)?;
    all.extend(constraints(inner, y, x, y)?);
    // y: eliminate x.
    let (pos, neg): (Vec<&Cons>, Vec<&Cons>) = all.iter().filter(|c| c.a != 0).partition(|c| c.a > 0);
    let mut on_y: Vec<(i64, Expr)> = all.iter().filter(|c| c.a == 0).map(|c| (c.b, c.r.clone())).collect();
    for p in &pos {
        for n in &neg {
            let (ka, kb) = (-n.a, p.a);
            on_y.push((ka * p.b + kb * n.b, p.r.scale(ka).add(&n.r.scale(kb))));
        }
    }
    let (ylo, yhi) = bounds_of(&on_y);
    let lb_y = fold(prune(ylo, y, &Expr::int(0), &Expr::int(0), true), true)?;
    let ub_y = fold(prune(yhi, y, &Expr::int(0), &Expr::int(0), false), false)?;
    // x: its constraints, read with y fixed.
    let on_x: Vec<(i64, Expr)> =
        all.iter().filter(|c| c.a != 0).map(|c| (c.a, c.r.add(&Expr::var_name(y).scale(c.b)))).collect();
    let (xlo, xhi) = bounds_of(&on_x);
    let lb_x = fold(prune(xlo, y, &lb_y, &ub_y, true), true)?;
    let ub_x = fold(prune(xhi, y, &lb_y, &ub_y, false), false)?;
    Some(((lb_y, ub_y), (lb_x, ub_x)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Annotations, name};

    fn lp(i: &str, lb: Expr, ub: Expr) -> Loop {
        Loop { iter: name(i), lb, ub, annot: Annotations::default(), body: Vec::new() }
    }

    #[test]
    fn a_triangle_swaps_into_its_transpose() {
        let (i, j, n) = (Expr::var("i"), Expr::var("j"), Expr::var("N"));
        let ((lby, uby), (lbx, ubx)) =
            swap(&lp("i", Expr::int(0), n.add_int(-1)), &lp("j", Expr::int(0), i)).unwrap();
        assert_eq!((lby.to_string(), uby.to_string()), ("0".into(), "N-1".into()));
        assert_eq!((lbx.to_string(), ubx.to_string()), (j.to_string(), "N-1".into()));
    }

    #[test]
    fn a_strip_mined_triangle_swaps_with_its_block_loop() {
        // i in [8io, min(8io+7, N-1)], jo in [0, floor(i/8)]
        let io = Expr::var("io");
        let i_loop = lp("i", io.scale(8), Expr::min(&io.scale(8).add_int(7), &Expr::var("N").add_int(-1)));
        let jo_loop = lp("jo", Expr::int(0), Expr::var("i").floordiv(8));
        let ((lby, uby), (lbx, ubx)) = swap(&i_loop, &jo_loop).unwrap();
        assert_eq!(lby.to_string(), "0");
        assert!(uby.to_string().contains("io"), "{uby}");
        assert!(lbx.to_string().contains("8*io") && lbx.to_string().contains("8*jo"), "{lbx}");
        assert_eq!(
            ubx.to_string(),
            Expr::min(&io.scale(8).add_int(7), &Expr::var("N").add_int(-1)).to_string()
        );
    }

    #[test]
    fn a_skewed_loop_swaps() {
        // t in [0, T-1], i in [t+1, t+N-2]
        let t = Expr::var("t");
        let ((lby, uby), (lbx, ubx)) = swap(
            &lp("t", Expr::int(0), Expr::var("T").add_int(-1)),
            &lp("i", t.add_int(1), t.add(&Expr::var("N")).add_int(-2)),
        )
        .unwrap();
        assert_eq!((lby.to_string(), uby.to_string()), ("1".into(), "N+T-3".into()));
        assert!(lbx.to_string().contains("max"), "{lbx}");
        assert!(ubx.to_string().contains("min"), "{ubx}");
    }
}
