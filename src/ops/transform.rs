//! Loop transformations (Fig. 9, eq. 20-25) and the annotations of Sec. 3.3.3.
//!
//! Each is a pure function from a nest to a new nest: validation first (the arguments, the
//! levels, the tree patterns, and what the rewrite needs: bounds that do not depend on a loop an
//! interchange moves them past, new bounds within C's `int`, a constant trip count to unroll),
//! rewrite second. None of these functions looks at dependences: the builtin registry checks
//! the result's legality after the rewrite ([`crate::ops::registry::call`], through
//! [`crate::ops::registry::legal`]: isl, `analysis::legality`, docs/legality.md) unless the
//! state says `unchecked` (`--unchecked`); called directly, these functions return the rewrite
//! unchecked. Unchanged sub-trees are shared, not copied. A level `r` counts loops along the
//! single path from the root; a level below a branch is an error.

use super::tensor::fresh;
use crate::analysis::kernel::{not_rectangular, parallel_loop, simd_around_parallel_reason};
use crate::error::{Arg, Error, Result};
use crate::ir::expr::INT_MAX;
use crate::ir::{EvalError, Expr, LNode, Loop, Name, Nest, Overflow, PackLayout, State};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Largest trip count `unroll` expands.
pub const MAX_UNROLL: i64 = 4096;

/// The loop at `level` (1-based) on the single path from the root, validated.
fn locate(nest: &Nest, level: i64, builtin: &str, arg: &Arg) -> Result<Arc<Loop>> {
    let path = nest.path();
    if level >= 1 && (level as usize) <= path.len() {
        return Ok(path[level as usize - 1].clone());
    }
    let below: Vec<LNode> = match path.last() {
        Some(l) => l.body.clone(),
        None => nest.items.clone(),
    };
    if level > path.len() as i64 && below.len() > 1 && below.iter().any(|x| x.as_loop().is_some()) {
        return Err(Error::BelowBranch {
            builtin: builtin.into(),
            arg: arg.clone(),
            level: level as usize,
            at: path.len() + 1,
            found: format!(
                "{} siblings: {}",
                below.len(),
                below.iter().map(|x| x.describe()).collect::<Vec<_>>().join("; ")
            ),
        });
    }
    Err(Error::LevelOutOfRange { builtin: builtin.into(), arg: arg.clone(), level, depth: path.len() })
}

/// Replaces the items at `depth` (0: the top level; d: the body of the loop at level d) by
/// what `f` returns, rebuilding the path above and sharing everything else.
fn rewrite_body(
    nest: &Nest,
    depth: usize,
    f: &mut dyn FnMut(&[LNode]) -> Result<Vec<LNode>>,
) -> Result<Nest> {
    fn go(
        items: &[LNode],
        depth: usize,
        f: &mut dyn FnMut(&[LNode]) -> Result<Vec<LNode>>,
    ) -> Result<Vec<LNode>> {
        if depth == 0 {
            return f(items);
        }
        match items {
            [LNode::Loop(l)] => Ok(vec![LNode::Loop(l.with_body(go(&l.body, depth - 1, f)?))]),
            _ => unreachable!("rewrite_body: path validated by locate"),
        }
    }
    Ok(nest.with_items(go(&nest.items, depth, f)?))
}

/// Replaces the loop at `level` by the items `f` returns.
fn rewrite_loop(
    nest: &Nest,
    level: i64,
    builtin: &str,
    arg: &Arg,
    f: &mut dyn FnMut(&Arc<Loop>) -> Result<Vec<LNode>>,
) -> Result<Nest> {
    locate(nest, level, builtin, arg)?;
    rewrite_body(nest, level as usize - 1, &mut |items| match items {
        [LNode::Loop(l)] => f(l),
        _ => unreachable!("rewrite_loop: path validated by locate"),
    })
}

/// Every iterator of the nest and every named constant its bounds or indices mention.
fn names_in(nest: &Nest, state: &State) -> BTreeSet<Name> {
    let mut out: BTreeSet<Name> = state.consts.keys().cloned().collect();
    for x in &nest.items {
        collect_names(x, &mut out);
    }
    out
}

fn collect_names(x: &LNode, out: &mut BTreeSet<Name>) {
    match x {
        LNode::Stmt(s) => out.extend(s.index_vars()),
        LNode::Loop(l) => {
            out.insert(l.iter.clone());
            out.extend(l.lb.vars());
            out.extend(l.ub.vars());
            l.body.iter().for_each(|c| collect_names(c, out));
        }
    }
}

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

fn level_arg(pos: usize) -> Arg {
    Arg::new(pos, "level")
}

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
        return Err(Error::BadArgument {
            builtin: b.into(),
            arg: Arg::new(3, "factor"),
            expected: if factor < 1 {
                "a factor of 1 or more".into()
            } else {
                format!("a factor of at most {INT_MAX}")
            },
            found: factor.to_string(),
        });
    }
    let taken = names_in(nest, state);
    let iters: BTreeSet<Name> = nest.path().iter().map(|l| l.iter.clone()).collect();
    rewrite_loop(nest, level, b, &level_arg(2), &mut |l| {
        let outer_name = fresh(&format!("{}o", l.iter), &taken);
        if aligned && l.step == 1 && l.lb.vars().iter().any(|v| iters.contains(v)) {
            let o = Expr::var_name(&outer_name);
            let ovf = |_| overflow(b, l);
            let start = o.checked_scale(factor).map_err(ovf)?;
            let end = start.checked_add_int(factor - 1).map_err(ovf)?;
            let inner = Loop { lb: Expr::max(&start, &l.lb), ub: Expr::min(&end, &l.ub), ..(**l).clone() };
            let outer = Loop {
                iter: outer_name,
                lb: l.lb.floordiv(factor),
                ub: l.ub.floordiv(factor),
                step: 1,
                annot: Default::default(),
                body: vec![LNode::Loop(Arc::new(inner))],
            };
            return Ok(vec![LNode::Loop(Arc::new(outer))]);
        }
        let (lb, ub, s) = (&l.lb, &l.ub, l.step);
        let o = Expr::var_name(&outer_name);
        let ovf = |_| overflow(b, l);
        let block = s.checked_mul(factor).ok_or(Overflow).map_err(ovf)?;
        let inner_lb = lb.checked_add(&o.checked_scale(block).map_err(ovf)?).map_err(ovf)?;
        let full_ub = inner_lb.checked_add_int(block - s).map_err(ovf)?;
        // The trip count, with the named constants the state binds (as `unroll` does): where v
        // divides it, the last block is full and needs no `min`.
        let span = ub.checked_sub(lb).map_err(ovf)?;
        let trip = match span.checked_eval(&|c| state.constant(c)) {
            Ok(d) => Some(d.div_euclid(s) + 1),
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
            step: s,
            annot: l.annot.clone(),
            body: l.body.clone(),
        };
        let outer = Loop {
            iter: outer_name,
            lb: Expr::int(0),
            ub: span.floordiv(block),
            step: 1,
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
            super::fm::swap(outer, inner).ok_or_else(|| illegal_move(b, inner, outer))?;
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

/// Renames iterator `from` to `to` in a loop's subtree (bounds and statements), refusing to
/// capture a name already used inside it.
fn rename_loop(l: &Arc<Loop>, to: &Name, builtin: &str, level: usize) -> Result<Arc<Loop>> {
    if l.iter == *to {
        return Ok(l.clone());
    }
    let mut used = BTreeSet::new();
    for c in &l.body {
        collect_names(c, &mut used);
    }
    // A loop inside that binds `to` is renamed first (its iterator is bound there: a fresh name
    // means the same), so that two nests whose loops run the same ranges under swapped names
    // fuse (mvt: `x2`'s nest interchanged runs `j, i` where `x1`'s runs `i, j`).
    let mut inner = Vec::new();
    l.body.iter().for_each(|c| c.loop_iters(&mut inner));
    if inner.contains(to) {
        let fresh = (2..)
            .map(|n| Name::from(format!("{to}{n}").as_str()))
            .find(|f| !used.contains(f) && f != &l.iter)
            .unwrap_or_else(|| to.clone());
        // Each loop that binds `to` takes the fresh name (unused, so never refused).
        fn alpha(x: &LNode, from: &Name, fresh: &Name, builtin: &str, level: usize) -> Result<LNode> {
            Ok(match x {
                LNode::Loop(m) if m.iter == *from => LNode::Loop(rename_loop(m, fresh, builtin, level)?),
                LNode::Loop(m) => LNode::Loop(m.with_body(
                    m.body.iter().map(|c| alpha(c, from, fresh, builtin, level)).collect::<Result<_>>()?,
                )),
                LNode::Stmt(_) => x.clone(),
            })
        }
        let body = l.body.iter().map(|c| alpha(c, to, &fresh, builtin, level)).collect::<Result<_>>()?;
        let renamed = Arc::new(Loop { body, ..(**l).clone() });
        used.clear();
        renamed.body.iter().for_each(|c| collect_names(c, &mut used));
        if !used.contains(to) {
            return rename_loop(&renamed, to, builtin, level);
        }
    }
    if used.contains(to) {
        return Err(Error::FuseMismatch {
            builtin: builtin.into(),
            level,
            expected: format!("iterator `{}` renamable to `{to}`", l.iter),
            found: format!("`{to}` already used inside loop `{}`", l.iter),
        });
    }
    let from = l.iter.clone();
    let sub = |v: &str| (v == &*from).then(|| Expr::var_name(to));
    Ok(Arc::new(Loop {
        iter: to.clone(),
        body: l.body.iter().map(|c| c.subst(&sub)).collect(),
        ..(**l).clone()
    }))
}

/// `fuse_outer(l1, l2, r)`, eq. 22: the loops at levels 1..r of both nests are the same;
/// the result runs both bodies at level r, `l1`'s first. Iterator names of `l2` that differ
/// are renamed to `l1`'s; a loop inside `l2` that binds such a name is renamed first, to a
/// fresh one (`j, i` fused with `i, j`: the inner `i` becomes `i2`). (Eq. 22 asks for the same
/// iterators; here the same ranges suffice.)
/// The loops at levels 1..r are `l1`'s, with the marks of both; the loops below level r stay
/// apart (`fuse_inner` merges them). `fuse_outer(l1, l2, 1)`:
///
/// ```text
/// for i in [0, N-1]      for k in [0, N-1]          for i in [0, N-1]
///   for j in [0, M-1]      for j in [0, M-1]    →     for j in [0, M-1]
///     S1(i, j)               S2(k, j)                   S1(i, j)
///                                                     for j in [0, M-1]
///                                                       S2(i, j)
/// ```
pub fn fuse_outer(n1: &Nest, n2: &Nest, level: i64) -> Result<Nest> {
    let b = "fuse_outer";
    locate(n1, level, b, &Arg::new(3, "level"))?;
    locate(n2, level, b, &Arg::new(3, "level"))?;
    let (p1, p2) = (n1.path(), n2.path());
    let r = level as usize;
    for (m, (a, b2)) in p1.iter().zip(&p2).take(r).enumerate() {
        if !a.same_range(b2) {
            return Err(Error::FuseMismatch {
                builtin: b.into(),
                level: m + 1,
                expected: format!("loop {} (as in the first nest)", a.header()),
                found: format!("loop {} in the second nest", b2.header()),
            });
        }
    }
    // Rename l2's iterators to l1's, outermost first: each renaming rewrites the loops below.
    let mut cur = p2[0].clone();
    for (m, a) in p1.iter().take(r).enumerate() {
        cur = rename_loop(&cur, &a.iter, b, m + 1)?;
        if m + 1 < r {
            cur = cur.body[0].as_loop().cloned().unwrap_or_else(|| cur.clone());
        }
    }
    // The second nest's statements run the origins that follow the first nest's.
    let shift = n1.origin.len();
    let ys: Vec<LNode> = cur.body.iter().map(|x| x.map_stmts(&|t| shift_origin(t, shift))).collect();
    let annots: Vec<_> = (0..r).map(|k| p1[k].annot.union(&p2[k].annot)).collect();
    let mut body: Vec<LNode> = p1[r - 1].body.iter().cloned().chain(ys).collect();
    for k in (0..r).rev() {
        body = vec![LNode::Loop(Arc::new(Loop { annot: annots[k].clone(), body, ..(*p1[k]).clone() }))];
    }
    // One layout per tensor.
    let mut layouts = n1.layouts.clone();
    for (t, lay) in &n2.layouts {
        match layouts.get(t) {
            Some(other) if other != lay => {
                return Err(Error::Illegal {
                    builtin: b.into(),
                    reason: format!(
                        "`{t}` has one layout in the first nest and another in the second: expected one \
                         layout per tensor"
                    ),
                });
            }
            _ => {
                layouts.insert(t.clone(), lay.clone());
            }
        }
    }
    // A tensor with a copy per iteration (`privatize`): the other nest does not access it.
    for (a, b2) in [(n1, n2), (n2, n1)] {
        let names = a.expanded.iter().flat_map(|(t, x)| [t, &x.buffer]);
        if let Some(t) = names.into_iter().find(|t| b2.stmts().iter().any(|s| s.mentions_tensor(t))) {
            return Err(Error::Illegal {
                builtin: b.into(),
                reason: format!(
                    "`{t}` has a copy per iteration of a loop (privatize) in one nest and the other accesses \
                     it: expected privatize after the fusion"
                ),
            });
        }
    }
    // A result stored over an operand: the other nest accesses neither.
    for (a, b2) in [(n1, n2), (n2, n1)] {
        for (y, x) in &a.over {
            if let Some(t) = [y, x].into_iter().find(|t| b2.rank_of(t).is_some()) {
                return Err(Error::Illegal {
                    builtin: b.into(),
                    reason: format!(
                        "`{y}` is stored over `{x}` (in_place) in one nest and the other accesses `{t}`: \
                         expected in_place after the fusion"
                    ),
                });
            }
        }
    }
    let fused = rewrite_body(n1, 0, &mut |_| Ok(body.clone()))?;
    let mut out = Nest::new(fused.items, n1.origin.iter().chain(&n2.origin).cloned().collect());
    // What the two mean: the first nest's program, then the second's.
    out.program = n1
        .program
        .iter()
        .cloned()
        .chain(n2.program.iter().map(|x| x.map_stmts(&|t| shift_origin(t, shift))))
        .collect();
    out.layouts = layouts;
    out.over = n1.over.iter().chain(&n2.over).map(|(y, x)| (y.clone(), x.clone())).collect();
    out.rewrites = n1.rewrites.iter().chain(&n2.rewrites).cloned().collect();
    out.expanded = n1.expanded.iter().chain(&n2.expanded).map(|(t, x)| (t.clone(), x.clone())).collect();
    Ok(out)
}

/// The statement with its origin index moved by `by` (see [`crate::ir::Instance`]).
pub(crate) fn shift_origin(t: &crate::ir::TExpr, by: usize) -> crate::ir::TExpr {
    match &t.inst {
        Some(i) => t.with_instance(crate::ir::Instance { origin: i.origin + by, ..(**i).clone() }),
        None => t.clone(),
    }
}

/// `fuse_inner(l, r)`, eq. 23: the loops that are the children of level `r-1` (the top level
/// for `r = 1`) iterate over the same range; they become one loop running their bodies in
/// order. (Extension: loops over other ranges, e.g. after `shift`, run over the hull of the
/// ranges, each body guarded by its own range.) The fused loop is the first one, with the marks of all; the others' iterators are
/// renamed to its iterator (eq. 23 asks for the same iterator). `fuse_inner(l, 2)`:
///
/// ```text
/// for i in [0, N-1]            for i in [0, N-1]
///   for j in [0, M-1]     →      for j in [0, M-1]
///     S1(i, j)                     S1(i, j)
///   for k in [0, M-1]              S2(i, j)
///     S2(i, k)
/// ```
pub fn fuse_inner(nest: &Nest, level: i64) -> Result<Nest> {
    let b = "fuse_inner";
    let arg = level_arg(2);
    if level < 1 {
        return Err(Error::LevelOutOfRange { builtin: b.into(), arg, level, depth: nest.path().len() });
    }
    if level > 1 {
        locate(nest, level - 1, b, &arg)?;
    }
    rewrite_body(nest, level as usize - 1, &mut |items| {
        let loops: Vec<&Arc<Loop>> = items.iter().filter_map(|x| x.as_loop()).collect();
        if loops.len() != items.len() || loops.is_empty() {
            let found = items.iter().find(|x| x.as_loop().is_none()).map(|x| x.describe());
            return Err(Error::FuseMismatch {
                builtin: b.into(),
                level: level as usize,
                expected: "only loops at this level".into(),
                found: found.unwrap_or_else(|| "no loop".into()),
            });
        }
        if loops.len() < 2 {
            return Err(Error::FuseMismatch {
                builtin: b.into(),
                level: level as usize,
                expected: "two or more sibling loops to fuse".into(),
                found: format!("one loop ({}): nothing to fuse", loops[0].header()),
            });
        }
        let first = loops[0];
        let mut body = Vec::new();
        let mut annot = first.annot.clone();
        // Loops over other ranges (shifted, or of other extents) run over the hull of all,
        // each body guarded by its own range.
        let same = loops.iter().all(|l| l.same_range(first));
        let (lb, ub) = loops.iter().skip(1).fold((first.lb.clone(), first.ub.clone()), |(lb, ub), l| {
            (Expr::min(&lb, &l.lb), Expr::max(&ub, &l.ub))
        });
        for l in &loops {
            if l.step != first.step || (!same && l.step != 1) {
                return Err(Error::FuseMismatch {
                    builtin: b.into(),
                    level: level as usize,
                    expected: format!("loops of one step (as the first loop, {})", first.header()),
                    found: format!("loop {}", l.header()),
                });
            }
            let l = rename_loop(l, &first.iter, b, level as usize)?;
            annot = annot.union(&l.annot);
            // The guards `i - lb >= 0`, `ub - i >= 0`, affine: one per argument of a `max`
            // lower bound or a `min` upper bound; other forms are refused.
            let i = Expr::var_name(&first.iter);
            let mut guard = Vec::new();
            let args = |e: &Expr, lower: bool| -> Option<Vec<Expr>> {
                let xs = if lower {
                    match e.single_atom() {
                        Some(crate::ir::Atom::Max(xs)) => xs.clone(),
                        _ => vec![e.clone()],
                    }
                } else {
                    e.min_args().map_or_else(|| vec![e.clone()], |xs| xs.to_vec())
                };
                xs.iter().all(|x| x.is_affine()).then_some(xs)
            };
            let unaligned = |what: &Expr| Error::FuseMismatch {
                builtin: b.into(),
                level: level as usize,
                expected: "loops of one range, or ranges with affine bounds (min, max of them) to guard"
                    .into(),
                found: format!("loop {} (bound {what})", l.header()),
            };
            if l.lb != lb {
                for x in args(&l.lb, true).ok_or_else(|| unaligned(&l.lb))? {
                    guard.push(i.sub(&x));
                }
            }
            if l.ub != ub {
                for x in args(&l.ub, false).ok_or_else(|| unaligned(&l.ub))? {
                    guard.push(x.sub(&i));
                }
            }
            for x in &l.body {
                let g = if guard.is_empty() { Ok(x.clone()) } else { guarded(x, &guard) };
                body.push(g.map_err(|reason| Error::Illegal { builtin: b.into(), reason })?);
            }
        }
        Ok(vec![LNode::Loop(Arc::new(Loop { annot, body, lb, ub, ..(**first).clone() }))])
    })
}

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
        let trip = |d: i64| if d < 0 { 0 } else { d / l.step + 1 };
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
            let val = l.step.checked_mul(j).and_then(|x| l.lb.checked_add_int(x).ok());
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
fn bounded_trip(l: &Loop) -> Option<(i64, Vec<Expr>)> {
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
fn guarded(x: &LNode, guard: &[Expr]) -> std::result::Result<LNode, String> {
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

/// `parallelize(l, r)` (Sec. 3.3.3): marks the loop at level `r` to run on several threads.
/// Refused inside a vectorized loop: OpenMP has no `parallel for` inside `simd`.
pub fn parallelize(nest: &Nest, level: i64) -> Result<Nest> {
    let b = "parallelize";
    let l = locate(nest, level, b, &level_arg(2))?;
    if let Some(outer) = nest.path().iter().take(level as usize - 1).find(|o| o.annot.vectorize) {
        return Err(simd_around_parallel(b, outer, &l));
    }
    rewrite_loop(nest, level, b, &level_arg(2), &mut |l| {
        let mut l2 = (**l).clone();
        l2.annot.parallel = true;
        Ok(vec![LNode::Loop(Arc::new(l2))])
    })
}

/// `vectorize(l, r)` (Sec. 3.3.3): marks the loop at level `r` to run in SIMD lanes.
/// Refused around a parallelized loop: OpenMP has no `parallel for` inside `simd`.
///
/// `bits` (128, 256 or 512; 0: the target's widest) asks for narrower vectors than the target's
/// widest (AVX2-width lanes on an AVX-512 machine, to compare, or to tune); a width the target
/// lacks is refused.
pub fn vectorize(nest: &Nest, level: i64, bits: u32) -> Result<Nest> {
    let b = "vectorize";
    let widest = crate::analysis::vector::Target::native().vector_bits;
    if bits != 0 && (![128, 256, 512].contains(&bits) || bits > widest) {
        return Err(Error::BadArgument {
            builtin: b.into(),
            arg: Arg::new(3, "bits"),
            expected: if widest >= 128 {
                format!(
                    "a vector width this target has: {}",
                    [128, 256, 512]
                        .iter()
                        .filter(|w| **w <= widest)
                        .map(|w| w.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            } else {
                "no width: this target has no explicit vectors (TEML_VECTOR_BITS=0 or no SIMD)".to_string()
            },
            found: bits.to_string(),
        });
    }
    let l = locate(nest, level, b, &level_arg(2))?;
    if let Some(inner) = l.body.iter().find_map(parallel_loop) {
        return Err(simd_around_parallel(b, &l, &inner));
    }
    rewrite_loop(nest, level, b, &level_arg(2), &mut |l| {
        let mut l2 = (**l).clone();
        l2.annot.vectorize = true;
        l2.annot.vector_bits = bits;
        Ok(vec![LNode::Loop(Arc::new(l2))])
    })
}

/// `collapse(l, r, n)` (OpenMP `collapse(n)`): the `n` loops from level `r`, perfectly nested
/// on the nest's single path, run as one parallel iteration space, for parallel loops whose
/// outer trip count alone is too small to feed every thread. Every loop of the band is marked
/// parallel (so the registry checks that none carries a dependence) and the outermost says
/// how many it collapses. Refused where an inner loop's bounds depend on an outer loop of the
/// band (OpenMP's rectangular collapse), where a loop of the band is vectorized, or inside a
/// vectorized loop.
///
/// ```text
/// for i in [0, 3]                  for i in [0, 3]  parallel collapse(2)
///   for j in [0, N-1]      →         for j in [0, N-1]  parallel
///     S(i, j)                           S(i, j)
/// ```
pub fn collapse(nest: &Nest, level: i64, n: i64) -> Result<Nest> {
    let b = "collapse";
    let first = locate(nest, level, b, &level_arg(2))?;
    let depth = nest.path().len() as i64;
    if n < 2 || level + n - 1 > depth {
        return Err(Error::BadArgument {
            builtin: b.into(),
            arg: Arg::new(3, "count"),
            expected: if depth - level + 1 >= 2 {
                format!(
                    "2..={} (the loops from level {level} on the single path of the nest)",
                    depth - level + 1
                )
            } else {
                format!(
                    "at least 2 loops from level {level} on the single path of the nest, which has {} there",
                    depth - level + 1
                )
            },
            found: n.to_string(),
        });
    }
    let path = nest.path();
    let band: Vec<&Loop> = path[level as usize - 1..(level + n - 1) as usize].iter().map(|l| &**l).collect();
    if let Some(outer) = path.iter().take(level as usize - 1).find(|o| o.annot.vectorize) {
        return Err(simd_around_parallel(b, outer, &first));
    }
    if let Some((x, o)) = not_rectangular(&band) {
        return Err(Error::Illegal {
            builtin: b.into(),
            reason: format!(
                "the bounds of loop `{}` ({}) depend on `{}`: expected a rectangular band (OpenMP \
                 collapses loops whose bounds are independent)",
                x.iter,
                x.range(),
                o.iter
            ),
        });
    }
    for x in &band {
        if x.annot.vectorize {
            return Err(Error::Illegal {
                builtin: b.into(),
                reason: format!(
                    "loop `{}` is vectorized: expected a band of loops that run on threads only (vectorize \
                     the loop inside the band instead)",
                    x.iter
                ),
            });
        }
    }
    // Code between the loops of the band (a buffer per iteration, a packed block, registers)
    // would leave them not perfectly nested.
    for x in &band[..band.len() - 1] {
        let a = &x.annot;
        if !(a.store_at.is_empty() && a.pack.is_empty() && a.registers.is_empty()) {
            return Err(Error::Illegal {
                builtin: b.into(),
                reason: format!(
                    "loop `{}` has {} of its own (code before its body): expected a band whose loops are \
                     perfectly nested (mark the innermost loop of the band instead)",
                    x.iter,
                    a.words()
                        .into_iter()
                        .filter(|w| w.starts_with("store_at")
                            || w.starts_with("pack")
                            || w.starts_with("registers"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
    }
    fn mark(l: &Arc<Loop>, k: usize, n: usize) -> Arc<Loop> {
        let mut l2 = (**l).clone();
        l2.annot.parallel = true;
        if k == 0 {
            l2.annot.collapse = n;
        }
        if k + 1 < n
            && let [LNode::Loop(inner)] = l.body.as_slice()
        {
            l2.body = vec![LNode::Loop(mark(inner, k + 1, n))];
        }
        Arc::new(l2)
    }
    rewrite_loop(nest, level, b, &level_arg(2), &mut |l| Ok(vec![LNode::Loop(mark(l, 0, n as usize))]))
}

/// `registers(l, r, T)` (scalar replacement): the elements of tensor `T` that the body of the
/// loop at level `r` accesses are kept in local variables for the loop's duration: loaded
/// before it, stored after it if written (`analysis::registers`). Inside an explicit vector
/// loop, a block of lanes is one vector register. Refused where an access to `T` varies inside
/// the loop, where two accesses may be the same element, or where a loop of the band runs on
/// threads. `registers(l, 3, C)` after unroll-and-jam of `i` by 2:
///
/// ```text
/// for k in [0, K-1]                         c0 = C[2*io][j]; c1 = C[2*io+1][j]
///   C[2*io][j] += A[2*io][k] * B[k][j]   →  for k in [0, K-1]  registers(C)
///   C[2*io+1][j] += A[2*io+1][k] * B[k][j]     c0 += A[2*io][k] * B[k][j]
///                                              c1 += A[2*io+1][k] * B[k][j]
///                                           C[2*io][j] = c0; C[2*io+1][j] = c1
/// ```
pub fn registers(nest: &Nest, level: i64, tensor: &Name) -> Result<Nest> {
    mark_tensor(
        nest,
        level,
        "registers",
        tensor,
        TensorMark { get: |a| &a.registers, get_mut: |a| &mut a.registers, what: "kept in registers across" },
        &|outer, l| crate::analysis::registers::units(outer, l, tensor, &nest.layouts).map(|_| ()),
    )
}

/// Why a mark would change a nest's meaning, given the loops outside and the marked loop.
type MarkCheck<'a> = dyn Fn(&[&Loop], &Loop) -> std::result::Result<(), String> + 'a;

/// Which list of tensors a loop's mark goes into (`registers`, `pack`), and how a refusal
/// names it.
struct TensorMark {
    get: fn(&crate::ir::Annotations) -> &Vec<Name>,
    get_mut: fn(&mut crate::ir::Annotations) -> &mut Vec<Name>,
    what: &'static str,
}

/// Adds `tensor` to the list `mark` of the loop at `level`: refused where an enclosing or an
/// inner loop already has it there (one band per tensor), or where `check` (given the loops
/// outside and the marked loop) says why the mark would change the nest's meaning.
fn mark_tensor(
    nest: &Nest,
    level: i64,
    b: &str,
    tensor: &Name,
    mark: TensorMark,
    check: &MarkCheck<'_>,
) -> Result<Nest> {
    let l = locate(nest, level, b, &level_arg(2))?;
    let path = nest.path();
    let outer: Vec<&Loop> = path.iter().take(level as usize - 1).map(|o| &**o).collect();
    let illegal = |reason: String| Error::Illegal { builtin: b.into(), reason };
    let what = mark.what;
    if let Some(o) = outer.iter().find(|o| (mark.get)(&o.annot).contains(tensor)) {
        return Err(illegal(format!(
            "`{tensor}` is already {what} the enclosing loop `{}`: expected one band per tensor",
            o.iter
        )));
    }
    fn inner(body: &[LNode], t: &Name, get: fn(&crate::ir::Annotations) -> &Vec<Name>) -> Option<Name> {
        body.iter().filter_map(|x| x.as_loop()).find_map(|x| {
            if get(&x.annot).contains(t) { Some(x.iter.clone()) } else { inner(&x.body, t, get) }
        })
    }
    if let Some(i) = inner(&l.body, tensor, mark.get) {
        return Err(illegal(format!(
            "`{tensor}` is already {what} the inner loop `{i}`: expected one band per tensor"
        )));
    }
    let mut l2 = (*l).clone();
    if !(mark.get)(&l2.annot).contains(tensor) {
        (mark.get_mut)(&mut l2.annot).push(tensor.clone());
    }
    check(&outer, &l2).map_err(illegal)?;
    let l2 = Arc::new(l2);
    rewrite_loop(nest, level, b, &level_arg(2), &mut |_| Ok(vec![LNode::Loop(l2.clone())]))
}

/// `pack(l, r, T)` (packing): the block of tensor `T` that the body of the loop at level `r`
/// reads is copied into a contiguous buffer before the loop (each time it starts) and read
/// from there inside it (`analysis::packing`): the A and B panels of BLIS. Refused where the
/// loop's body writes `T`, where the block read has no fixed shape, or where `T` is already
/// packed around or inside the loop. `pack(l, 2, B)` for a k block:
///
/// ```text
/// for ko in [0, 3]                      for ko in [0, 3]
///   for k in [64*ko, 64*ko+63]   →         Bp[0..63][0..N-1] = B[64*ko..64*ko+63][0..N-1]
///     ... B[k][j] ...                      for k in [64*ko, 64*ko+63]  pack(B)
///                                            ... Bp[k-64*ko][j] ...
/// ```
///
/// `layout` lays the buffer out otherwise: its dimensions in another order (BLIS's A panel,
/// `[2, 1]`: the block of `A[i][k]` stored `Ap[k][i]`, so the rows a register tile reads for
/// one `k` are adjacent) and its innermost dimension rounded up to a multiple of `pad` (rows
/// that start on a vector or cache-line boundary). Only the buffer changes; every read is
/// rewritten to it, so the meaning does not.
pub fn pack(nest: &Nest, level: i64, tensor: &Name, layout: &PackLayout) -> Result<Nest> {
    let b = "pack";
    if layout.pad < 1 || layout.pad > MAX_PAD {
        return Err(Error::BadArgument {
            builtin: b.into(),
            arg: Arg::new(5, "pad"),
            expected: format!("a padding multiple from 1 to {MAX_PAD}"),
            found: layout.pad.to_string(),
        });
    }
    // The block's rank, from the footprint the mark's check computes.
    let rank = std::cell::Cell::new(0);
    let marked = mark_tensor(
        nest,
        level,
        b,
        tensor,
        TensorMark { get: |a| &a.pack, get_mut: |a| &mut a.pack, what: "packed for" },
        &|outer, l| {
            let iters: Vec<Name> = outer.iter().map(|o| o.iter.clone()).collect();
            rank.set(crate::analysis::packing::footprint(&iters, l, tensor)?.extent.len());
            Ok(())
        },
    )?;
    let rank = rank.get();
    if !layout.order.is_empty() {
        let mut sorted = layout.order.clone();
        sorted.sort_unstable();
        if sorted != (0..rank).collect::<Vec<_>>() {
            return Err(Error::BadArgument {
                builtin: b.into(),
                arg: Arg::new(4, "order"),
                expected: format!("a permutation of 1..{rank}: the {rank} dimensions of `{tensor}`'s block"),
                found: format!(
                    "[{}]",
                    layout.order.iter().map(|d| (d + 1).to_string()).collect::<Vec<_>>().join(", ")
                ),
            });
        }
    }
    let order = layout.order(rank);
    if order.last().is_some_and(|d| d + 1 != rank) {
        let l = locate(&marked, level, b, &level_arg(2))?;
        if let Some((v, access)) = lanes_along(std::slice::from_ref(&LNode::Loop(l)), tensor) {
            return Err(Error::Illegal {
                builtin: b.into(),
                reason: format!(
                    "the vectorized loop `{v}` reads {access} along its last dimension, which the order \
                     [{}] moves: its lanes would not be adjacent in the buffer; expected an order that \
                     ends with {rank}",
                    order.iter().map(|d| (d + 1).to_string()).collect::<Vec<_>>().join(", ")
                ),
            });
        }
    }
    rewrite_loop(&marked, level, b, &level_arg(2), &mut |l| {
        let mut l2 = (**l).clone();
        if layout.is_plain() {
            l2.annot.pack_layout.remove(tensor);
        } else {
            l2.annot.pack_layout.insert(tensor.clone(), layout.clone());
        }
        Ok(vec![LNode::Loop(Arc::new(l2))])
    })
}

/// A vectorized loop among `items` (or below) whose iterator indexes an access to `tensor`,
/// and the access.
fn lanes_along(items: &[LNode], tensor: &Name) -> Option<(Name, String)> {
    items.iter().filter_map(|x| x.as_loop()).find_map(|l| {
        let hit = l.annot.vectorize.then(|| {
            l.body.iter().flat_map(|x| x.stmts()).find_map(|s| {
                let lw = crate::ir::lower(&s)?;
                let mut found = None;
                lw.rhs.visit(&mut |n| {
                    if found.is_none()
                        && n.id() == Some(tensor)
                        && n.index_list().is_some_and(|xs| xs.iter().any(|x| x.mentions(&l.iter)))
                    {
                        found = Some(n.access());
                    }
                });
                found
            })
        });
        match hit.flatten() {
            Some(a) => Some((l.iter.clone(), a)),
            None => lanes_along(&l.body, tensor),
        }
    })
}

/// `stream(l, r, T)` (non-temporal stores): the vectorized loop at level `r` stores its whole
/// vectors of `T` with streaming stores, which write a cache line without reading it first
/// (the read for ownership a plain store costs) and keep it out of the caches. The loop is
/// peeled until `T`'s first lane starts a vector-aligned address; the stores are fenced after
/// it. Only the code changes, not the order: the nest means what it meant. For a result
/// written once and read later (blur's output, at 2/3 of its memory traffic). Refused where
/// the loop is not an innermost vectorized loop, where its body does not set (`=`) `T` with
/// lanes along its last dimension, or where `T` is kept in registers, stored per iteration or
/// another tensor is streamed by the loop. `stream(l, 2, B)`:
///
/// ```text
/// for j in [0, N-3]  vectorize      for j in [0, N-3]  vectorize stream(B)
///   B[i][j] = (A[i][j] + ...) / 9  →   B[i][j] = (A[i][j] + ...) / 9   (streamed)
/// ```
pub fn stream(nest: &Nest, level: i64, tensor: &Name) -> Result<Nest> {
    let b = "stream";
    // A result stored over its operand (`in_place`) is stored as the operand.
    let tensor = nest.over.get(tensor).unwrap_or(tensor);
    let l = locate(nest, level, b, &level_arg(2))?;
    let illegal = |reason: String| Error::Illegal { builtin: b.into(), reason };
    if !l.annot.vectorize {
        return Err(illegal(format!(
            "loop `{}` is not vectorized: expected a vectorized loop (streaming stores write whole \
             vectors of lanes; vectorize it first)",
            l.iter
        )));
    }
    if let Some(inner) = l.body.iter().find_map(|x| x.as_loop()) {
        return Err(illegal(format!(
            "loop `{}` has the loop `{}` inside: expected an innermost vectorized loop (its lanes are \
             the vectors stored)",
            l.iter, inner.iter
        )));
    }
    if let Some(other) = l.annot.stream.iter().find(|t| *t != tensor) {
        return Err(illegal(format!(
            "loop `{}` already streams `{other}`: expected one streamed tensor per loop (its stores \
             decide where the loop is peeled to)",
            l.iter
        )));
    }
    let path = nest.path();
    let outer = path.iter().take(level as usize - 1);
    if let Some(o) = outer.clone().find(|o| o.annot.registers.contains(tensor)) {
        return Err(illegal(format!(
            "`{tensor}` is kept in registers across loop `{}`: its stores are after that loop, not in \
             `{}`'s lanes",
            o.iter, l.iter
        )));
    }
    if let Some(o) = outer.clone().chain([&l]).find(|o| o.annot.store_at.contains(tensor)) {
        return Err(illegal(format!(
            "`{tensor}` is stored per iteration of loop `{}`: its small buffer lives in the cache, which \
             streaming stores would bypass",
            o.iter
        )));
    }
    let mut set = None;
    let mut summed = None;
    for s in l.body.iter().flat_map(|x| x.stmts()) {
        let Some(lw) = crate::ir::lower(&s) else { continue };
        if lw.target.id() != Some(tensor) {
            continue;
        }
        let index = lw.target.index_list().unwrap_or(&[]);
        let along = index
            .split_last()
            .is_some_and(|(last, rest)| last.mentions(&l.iter) && !rest.iter().any(|x| x.mentions(&l.iter)));
        match lw.update {
            crate::ir::Update::Set if along => set = Some(lw.target.access()),
            crate::ir::Update::Set => summed = summed.or(Some((lw.target.access(), false))),
            _ => summed = summed.or(Some((lw.target.access(), true))),
        }
    }
    if set.is_none() {
        let found = match summed {
            Some((a, true)) => format!(
                "{a} summed into (+=): its old values are read, so its lines come into the cache anyway"
            ),
            Some((a, false)) => {
                format!("{a}, whose lanes along `{}` are not adjacent elements of a row", l.iter)
            }
            None => format!("no statement in loop `{}` that writes `{tensor}`", l.iter),
        };
        return Err(illegal(format!(
            "expected a tensor that loop `{}` sets (=) along its last dimension; found {found}",
            l.iter
        )));
    }
    rewrite_loop(nest, level, b, &level_arg(2), &mut |l| {
        let mut l2 = (**l).clone();
        if !l2.annot.stream.contains(tensor) {
            l2.annot.stream.push(tensor.clone());
        }
        Ok(vec![LNode::Loop(Arc::new(l2))])
    })
}

/// `store_at(l, r, T)` (storage contraction): tensor `T` is stored per iteration of the loop at
/// level `r`: each iteration has its own buffer of the block of `T` its body accesses (a local
/// array, private to the thread that runs it), instead of the whole tensor
/// (`analysis::storage`; Halide's `store_at`). Refused where a statement outside the loop
/// accesses `T`, where nothing reads `T` (a result), where the block has no fixed shape or
/// exceeds a thread's stack, and, with a witness (isl, after this and every later
/// transformation), where an iteration reads an element of `T` it did not write first.
/// `store_at(l, 1, t)` after fusing the element loops of interp:
///
/// ```text
/// for e in [0, E-1]                       for e in [0, E-1]  store_at(t)
///   t[e][a][b][c] += A[a][d]*u[e][d][b][c]   →  t'[a][b][c] += A[a][d]*u[e][d][b][c]
///   w[e][a][b][c] += A[b][d]*t[e][a][d][c]      w[e][a][b][c] += A[b][d]*t'[a][d][c]
/// ```
pub fn store_at(state: &State, nest: &Nest, level: i64, tensor: &Name) -> Result<Nest> {
    mark_tensor(
        nest,
        level,
        "store_at",
        tensor,
        TensorMark { get: |a| &a.store_at, get_mut: |a| &mut a.store_at, what: "stored per iteration of" },
        &|outer, l| crate::analysis::storage::check(state, nest, outer, l, tensor).map(|_| ()),
    )
}

/// `privatize(l, r, T)` (scalar and array expansion; Feautrier, "Array expansion", 1988): tensor
/// `T` gets one copy per iteration of the loop `j` at level `r`: every access `T[x]` in the nest
/// becomes `T[j - lb][x]`, so the iterations no longer share it, and the dependences through `T`
/// that only its reuse made (anti and output) are gone: a loop `j` that was pinned by a scalar
/// such as PolyBench's `temp2` may then be interchanged, distributed and vectorized. The
/// converse of `store_at`. Same values exactly when every read of `T` is preceded, in the same
/// iteration of `j` (and of the loops around it), by a write of that element (decided by isl
/// before the rewrite, with a witness when not), every access to `T` is inside the loop, and
/// `T` is no result of the nest (something reads it; its values are dropped after the kernel,
/// which holds its copies). On a focused nest, levels count from the focus. Later
/// transformations are checked against the expanded accesses.
/// `privatize(l, 2, temp2)` for symm:
///
/// ```text
/// for i in [0, M-1]                       for i in [0, M-1]
///   for j in [0, N-1]                        for j in [0, N-1]
///     temp2 = 0                       →        temp2[j] = 0
///     for k in [0, i-1]                        for k in [0, i-1]
///       temp2 += B[k][j]*A[i][k]                 temp2[j] += B[k][j]*A[i][k]
///     C[i][j] = ... + alpha*temp2                C[i][j] = ... + alpha*temp2[j]
/// ```
pub fn privatize(state: &State, nest: &Nest, level: i64, tensor: &Name) -> Result<Nest> {
    let b = "privatize";
    // Levels count from the focus; the checks see the whole nest.
    let view = nest.view();
    let l = locate(&view, level, b, &level_arg(2))?;
    let bad = |k: usize, name: &str, expected: &str, found: String| Error::BadArgument {
        builtin: b.into(),
        arg: Arg::new(k, name),
        expected: expected.into(),
        found,
    };
    let illegal = |reason: String| Error::Illegal { builtin: b.into(), reason };
    let accesses = |s: &crate::ir::TExpr| s.mentions_tensor(tensor);
    if let Some(x) = nest.expanded.get(tensor) {
        return Err(illegal(format!(
            "`{tensor}` already has a copy per iteration of `{}` (`{}`): expected one privatize per tensor",
            x.by, x.buffer
        )));
    }
    let all = nest.stmts();
    if !all.iter().any(accesses) {
        return Err(bad(3, "tensor", "a tensor the nest accesses", format!("`{tensor}`, which it does not")));
    }
    let own = "a tensor stored as declared (privatize before giving it storage of its own)";
    if let Some(lay) = nest.layouts.get(tensor) {
        let rank = nest.rank_of(tensor).unwrap_or(0);
        return Err(bad(
            3,
            "tensor",
            own,
            format!("`{tensor}`, which has the layout {}", lay.describe(rank)),
        ));
    }
    if nest.in_place(tensor) {
        return Err(bad(3, "tensor", own, format!("`{tensor}`, stored in place (in_place)")));
    }
    let mut marked = None;
    for x in nest.items() {
        x.visit_loops(&mut |o| {
            let a = &o.annot;
            if marked.is_none()
                && [&a.store_at, &a.pack, &a.registers, &a.stream].iter().any(|ts| ts.contains(tensor))
            {
                marked = Some(o.header());
            }
        });
    }
    if let Some(h) = marked {
        return Err(bad(3, "tensor", own, format!("`{tensor}`, marked on loop {h}")));
    }
    unit_step(b, 2, &l)?;
    if let Some(v) = l.lb.vars().into_iter().chain(l.ub.vars()).find(|v| state.constant(v).is_none()) {
        return Err(bad(
            2,
            "level",
            "a loop whose bounds are named constants (each copy of the tensor is at `j - lb`)",
            format!("loop {}, whose bounds use `{v}`", l.header()),
        ));
    }
    let inside: Vec<crate::ir::TExpr> = l.body.iter().flat_map(|x| x.stmts()).collect();
    if let Some(s) = all.iter().find(|s| accesses(s) && !inside.iter().any(|x| Arc::ptr_eq(x, s))) {
        return Err(illegal(format!(
            "`{s}` accesses `{tensor}` outside loop `{}`: expected every access to it inside the loop",
            l.iter
        )));
    }
    // The original iterator that the loop runs, in every statement that accesses the tensor.
    let here = Expr::var_name(&l.iter);
    let mut original: Option<Name> = None;
    for s in inside.iter().filter(|s| accesses(s)) {
        let inst = s
            .inst
            .as_ref()
            .ok_or_else(|| illegal(format!("`{s}` records no instances: expected a nest made by `build`")))?;
        let Some(k) = inst.at.iter().position(|e| *e == here) else {
            return Err(illegal(format!(
                "loop `{}` runs no iterator of `{s}` as it is (it was strip-mined, skewed or shifted): \
                 expected a loop of the program's own iterator (privatize first)",
                l.iter
            )));
        };
        match &original {
            Some(o) if *o != inst.iters[k] => {
                return Err(illegal(format!(
                    "loop `{}` runs the iterator `{o}` of one statement and `{}` of `{s}`: expected one \
                     iterator of the program in every statement that accesses `{tensor}`",
                    l.iter, inst.iters[k]
                )));
            }
            _ => original = Some(inst.iters[k].clone()),
        }
    }
    let original = original.expect("the loop holds a statement that accesses the tensor");
    if !inside.iter().any(|s| crate::ir::lower(s).is_some_and(|lw| lw.target.id() == Some(tensor))) {
        return Err(illegal(format!(
            "no statement in loop `{}` writes `{tensor}`: expected a tensor the loop computes (an \
             operand it only reads needs no copies)",
            l.iter
        )));
    }
    let reads = |s: &crate::ir::TExpr| {
        crate::ir::lower(s).is_some_and(|lw| {
            let mut hit = false;
            lw.rhs.visit(&mut |n| hit |= n.id() == Some(tensor));
            // An update onto the values it held (`x = add(x, ..)`, not a zeroed sum) reads x.
            hit || (lw.update.accumulates() && lw.first.is_none() && lw.target.id() == Some(tensor))
        })
    };
    if !inside.iter().any(reads) {
        return Err(illegal(format!(
            "no statement reads `{tensor}`: it is a result of the nest, whose values must be kept"
        )));
    }
    if !state.unchecked
        && let Err(why) = crate::analysis::legality::stays_local(state, nest, &l, tensor)
            .map_err(|e| Error::Internal { builtin: b.into(), reason: e })?
    {
        return Err(illegal(format!(
            "cannot give `{tensor}` a copy per iteration of loop `{}`: {}",
            l.iter, why.message
        )));
    }
    let index = here.sub(&l.lb);
    let extent = l.ub.sub(&l.lb).add_int(1);
    // The copies' buffer: a name of its own (`temp2_j`), so that another nest of a kernel may
    // give the tensor copies along another loop.
    let mut taken = names_in(nest, state);
    taken.extend(state.vars.keys().cloned());
    for s in &all {
        s.visit(&mut |n| {
            if let Some(t) = n.id() {
                taken.insert(t.clone());
            }
        });
    }
    let buffer = fresh(&format!("{tensor}_{original}"), &taken);
    let expand = |s: &crate::ir::TExpr| expanded_leaves(s, tensor, &buffer, &index, &extent);
    let sub = rewrite_loop(&view, level, b, &level_arg(2), &mut |l| {
        Ok(vec![LNode::Loop(l.with_body(l.body.iter().map(|x| x.map_stmts(&expand)).collect()))])
    })?;
    let mut out = nest.splice(sub);
    out.expanded.insert(tensor.clone(), crate::ir::Expansion { by: original, buffer });
    Ok(out)
}

/// `s` with every leaf of `tensor` renamed `buffer` and given a new first dimension: index
/// `index`, extent `extent`.
fn expanded_leaves(
    s: &crate::ir::TExpr,
    tensor: &Name,
    buffer: &Name,
    index: &Expr,
    extent: &Expr,
) -> crate::ir::TExpr {
    use crate::ir::{Dim, Iters, Op, Shape, TNode};
    let children = s.children.iter().map(|c| expanded_leaves(c, tensor, buffer, index, extent)).collect();
    let mut node = TNode { children, ..(**s).clone() };
    if s.is_tensor_leaf() && s.id() == Some(tensor) {
        node.op = Op::Id(buffer.clone());
        let xs =
            std::iter::once(index.clone()).chain(s.index_list().unwrap_or(&[]).iter().cloned()).collect();
        let dims = std::iter::once(Dim::Known(extent.clone()))
            .chain(s.shape.dims().unwrap_or(&[]).iter().cloned())
            .collect();
        node.iters = Iters::List(xs);
        node.shape = Shape::Dims(dims);
    }
    Arc::new(node)
}

/// `in_place(l, y, x)` (seed 000, "other variable vs. in-place"): the result `y` is stored
/// over the operand `x`: every statement of the nest that wrote `y` writes `x` instead, and
/// the kernel's buffer holds `x` at entry and `y` at exit. Legal where `x` and `y` have one
/// shape and element type, the nest only reads `x` and only writes `y` (or sums into it from
/// zero), and, decided by isl in the original order (`analysis::legality::stays_in_place`, part
/// of the legality check), no element of `x` is read after the element of `y` over it was written: each old value is
/// read before it is overwritten (seed 000's compatible statements, Definition 2, where every
/// read of `x` is at the written index). Every later transformation is checked against the
/// nest as it runs in place. `in_place(l, y, x)` for `y = exp(x)`:
///
/// ```text
/// for i in [0, N-1]          for i in [0, N-1]
///   y[i] = exp(x[i])    →      x[i] = exp(x[i])      in place: y is stored over x
/// ```
pub fn in_place(state: &State, nest: &Nest, y: &Name, x: &Name) -> Result<Nest> {
    let b = "in_place";
    let bad = |k: usize, name: &str, expected: String, found: String| Error::BadArgument {
        builtin: b.into(),
        arg: Arg::new(k, name),
        expected,
        found,
    };
    if y == x {
        return Err(bad(
            3,
            "operand",
            format!("an operand other than the result `{y}`"),
            format!("`{x}`: a statement `{x} = e({x})` already writes over its operand where it can"),
        ));
    }
    let stmts = nest.stmts();
    let writes = |t: &Name| stmts.iter().any(|s| s.target().and_then(|x| x.id()) == Some(t));
    let reads = |t: &Name| {
        stmts.iter().any(|s| {
            let mut found = false;
            if let Some(v) = s.value() {
                v.visit(&mut |n| found |= n.id() == Some(t));
            }
            found
        })
    };
    if nest.rank_of(y).is_none() || !writes(y) {
        return Err(bad(
            2,
            "result",
            "a tensor the nest writes".into(),
            format!("`{y}`, which it does not write"),
        ));
    }
    if nest.rank_of(x).is_none() || !reads(x) {
        return Err(bad(
            3,
            "operand",
            "a tensor the nest reads".into(),
            format!("`{x}`, which it does not read"),
        ));
    }
    if writes(x) {
        return Err(bad(
            3,
            "operand",
            "an operand the nest only reads".into(),
            format!("`{x}`, which it writes"),
        ));
    }
    // Every element of `y` must be written (condition 3): a statement writing affine positions
    // (an interior, a slice) would leave `x`'s values where `y` should keep its own.
    // Ranges given to `build` (a triangle, an interior) may leave elements unwritten too.
    if let Some(s) = stmts.iter().find(|s| {
        s.target().is_some_and(|t| {
            t.id() == Some(y)
                && (t.index_list().is_some_and(|xs| xs.iter().any(|e| e.as_var().is_none()))
                    || s.dom.as_ref().is_some_and(|d| !d.ranges.is_empty()))
        })
    }) {
        return Err(bad(
            2,
            "result",
            "a result the nest writes whole (every element, at plain iterators over whole ranges)".into(),
            if s.dom.as_ref().is_some_and(|d| !d.ranges.is_empty()) {
                format!("`{y}`, written over the ranges given to `build` by `{s}`")
            } else {
                format!("`{y}`, written at affine positions by `{s}`")
            },
        ));
    }
    for (k, t, name) in [(2, y, "result"), (3, x, "operand")] {
        if nest.in_place(t) {
            return Err(bad(
                k,
                name,
                "a tensor not yet stored in place".into(),
                format!("`{t}`, already in place"),
            ));
        }
        if nest.layouts.contains_key(t) {
            return Err(bad(
                k,
                name,
                "a tensor in its declared layout".into(),
                format!("`{t}`, which has a layout"),
            ));
        }
        if crate::analysis::storage::marked(nest.items()).iter().any(|(_, l)| l.annot.store_at.contains(t)) {
            return Err(bad(
                k,
                name,
                "a tensor with storage of its own".into(),
                format!("`{t}`, stored per iteration (store_at)"),
            ));
        }
    }
    let shape = |t: &Name| state.real_tensor(t).map(|d| (d.dtype, d.shape.clone()));
    let (sy, sx) = (shape(y), shape(x));
    if sy.is_none() || sy != sx {
        let show = |s: Option<(crate::ir::DType, crate::ir::Shape)>| match s {
            Some((d, sh)) => format!("{} {sh}", d.c_name()),
            None => "no declared shape".into(),
        };
        return Err(Error::Illegal {
            builtin: b.into(),
            reason: format!(
                "`{y}` is {} and `{x}` is {}: expected one shape and element type",
                show(sy),
                show(sx)
            ),
        });
    }
    let rename = |t: &crate::ir::TExpr| t.rename_tensor(y, x);
    let mut out = nest.with_items(nest.items.iter().map(|n| n.map_stmts(&rename)).collect());
    out.over.insert(y.clone(), x.clone());
    Ok(out)
}

/// What a layout builtin changes: the tensor's current layout in `nest` and its rank, after
/// checking that the nest accesses it and does not store it per iteration.
fn layout_of(nest: &Nest, b: &str, tensor: &Name) -> Result<(crate::ir::Layout, usize)> {
    let rank = nest.rank_of(tensor);
    let bad = |expected: &str, found: String| Error::BadArgument {
        builtin: b.into(),
        arg: Arg::new(2, "tensor"),
        expected: expected.into(),
        found,
    };
    let rank =
        rank.ok_or_else(|| bad("a tensor the nest accesses", format!("`{tensor}`, which it does not")))?;
    if rank == 0 {
        return Err(bad("a tensor with dimensions", format!("the scalar `{tensor}`")));
    }
    if crate::analysis::storage::marked(nest.items()).iter().any(|(_, l)| l.annot.store_at.contains(tensor)) {
        return Err(bad(
            "a tensor with storage of its own",
            format!("`{tensor}`, stored per iteration of a loop (store_at)"),
        ));
    }
    if nest.in_place(tensor) {
        return Err(bad(
            "a tensor with storage of its own",
            format!("`{tensor}`, stored in place (in_place)"),
        ));
    }
    Ok((nest.layouts.get(tensor).cloned().unwrap_or_default(), rank))
}

fn with_layout(nest: &Nest, tensor: &Name, layout: crate::ir::Layout, rank: usize) -> Nest {
    let mut out = nest.with_items(nest.items.clone());
    if layout.is_plain(rank) {
        out.layouts.remove(tensor);
    } else {
        out.layouts.insert(tensor.clone(), layout);
    }
    out
}

/// `regroup(l, T, d, V [, pad])` (seed 004's layout type `d`): tensor `T` is stored with its
/// dimension `d` regrouped into blocks of `V`: element `x` lives at
/// `[x1, .., xd div V, .., xn, xd mod V]` (its `I_d`), AoS to SoA (`d` the rows of structures)
/// or AoSoA. The kernel converts `T` at entry and back at exit. `V` must divide the extent, or
/// `pad` be true (the last block is padded). The meaning is unchanged: `I_d` is injective.
pub fn regroup(state: &State, nest: &Nest, tensor: &Name, dim: i64, width: i64, pad: bool) -> Result<Nest> {
    let b = "regroup";
    let (mut layout, rank) = layout_of(nest, b, tensor)?;
    if dim < 1 || dim as usize > rank {
        return Err(Error::BadArgument {
            builtin: b.into(),
            arg: Arg::new(3, "dimension"),
            expected: format!("a dimension of `{tensor}`, from 1 to {rank}"),
            found: dim.to_string(),
        });
    }
    if !(2..=4096).contains(&width) {
        return Err(Error::BadArgument {
            builtin: b.into(),
            arg: Arg::new(4, "width"),
            expected: "a block width from 2 to 4096".into(),
            found: width.to_string(),
        });
    }
    if !layout.is_plain(rank) {
        return Err(Error::Illegal {
            builtin: b.into(),
            reason: format!(
                "`{tensor}` already has the layout {}: expected regroup first, then permute_layout and pad",
                layout.describe(rank)
            ),
        });
    }
    let k = dim as usize - 1;
    let extent = state.real_tensor(tensor).and_then(|t| match t.shape.dims()?.get(k)? {
        crate::ir::Dim::Known(e) => e.eval(&|v| state.constant(v)).ok(),
        crate::ir::Dim::Unknown => None,
    });
    if let Some(n) = extent
        && n % width != 0
        && !pad
    {
        return Err(Error::BadArgument {
            builtin: b.into(),
            arg: Arg::new(4, "width"),
            expected: format!(
                "a width that divides dimension {dim} of `{tensor}` (extent {n}), or regroup(l, {tensor}, {dim}, \
                 {width}, true) to pad its last block"
            ),
            found: width.to_string(),
        });
    }
    layout.regroup = Some((k, width));
    Ok(with_layout(nest, tensor, layout, rank))
}

/// `permute_layout(l, T, order)`: tensor `T` is stored with its dimensions in `order` (1-based;
/// after a `regroup`, its block dimension is the last): a transpose kept as the layout instead
/// of a copy. The kernel converts `T` at entry and back at exit.
pub fn permute_layout(nest: &Nest, tensor: &Name, order: &[i64]) -> Result<Nest> {
    let b = "permute_layout";
    let (mut layout, rank) = layout_of(nest, b, tensor)?;
    let r = layout.rank(rank);
    let mut sorted: Vec<i64> = order.to_vec();
    sorted.sort_unstable();
    if sorted != (1..=r as i64).collect::<Vec<_>>() {
        return Err(Error::BadArgument {
            builtin: b.into(),
            arg: Arg::new(3, "order"),
            expected: format!("a permutation of 1..{r}: the {r} dimensions of `{tensor}`'s buffer"),
            found: format!("[{}]", order.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
        });
    }
    if layout.pad.iter().any(|(m, e)| *m > 1 || *e > 0) {
        return Err(Error::Illegal {
            builtin: b.into(),
            reason: format!("`{tensor}` is already padded: expected permute_layout before pad"),
        });
    }
    let current = layout.order(rank);
    layout.order = order.iter().map(|d| current[*d as usize - 1]).collect();
    Ok(with_layout(nest, tensor, layout, rank))
}

/// `pad(l, T, d, m [, extra])` (seed 001's padding): dimension `d` of `T`'s buffer is rounded
/// up to a multiple of `m`, then `extra` more elements are added (leading-dimension padding
/// against conflict misses; rows of whole vectors). The padding is never read by the program;
/// inputs and outputs keep their shape (the kernel converts at entry and exit).
pub fn pad(nest: &Nest, tensor: &Name, dim: i64, multiple: i64, extra: i64) -> Result<Nest> {
    let b = "pad";
    let (mut layout, rank) = layout_of(nest, b, tensor)?;
    let r = layout.rank(rank);
    let bad = |pos: usize, role: &str, expected: String, found: i64| Error::BadArgument {
        builtin: b.into(),
        arg: Arg::new(pos, role),
        expected,
        found: found.to_string(),
    };
    if dim < 1 || dim as usize > r {
        return Err(bad(3, "dimension", format!("a dimension of `{tensor}`'s buffer, from 1 to {r}"), dim));
    }
    if !(1..=MAX_PAD as i64).contains(&multiple) {
        return Err(bad(4, "multiple", format!("a multiple from 1 to {MAX_PAD}"), multiple));
    }
    if !(0..=4096).contains(&extra) {
        return Err(bad(5, "extra", "from 0 to 4096 more elements".into(), extra));
    }
    layout.pad.resize(r, (1, 0));
    layout.pad[dim as usize - 1] = (multiple, extra);
    Ok(with_layout(nest, tensor, layout, rank))
}

/// Largest padding multiple `pack` accepts.
pub const MAX_PAD: usize = 64;

/// The refusal of a parallel loop inside a vectorized one.
fn simd_around_parallel(builtin: &str, outer: &Loop, inner: &Loop) -> Error {
    Error::Illegal { builtin: builtin.into(), reason: simd_around_parallel_reason(outer, inner) }
}

/// Refuses a loop whose step is not 1 (argument `pos` names its level).
fn unit_step(b: &str, pos: usize, l: &Loop) -> Result<()> {
    if l.step == 1 {
        return Ok(());
    }
    Err(Error::BadArgument {
        builtin: b.into(),
        arg: level_arg(pos),
        expected: "a loop of step 1".into(),
        found: format!("loop {}", l.header()),
    })
}

/// The loop at `level` with its range moved by `by` (an expression in outer iterators) and its
/// iterator read as `i - by` below: the same instances, in the same order.
fn moved(l: &Loop, by: &Expr, b: &str) -> Result<Arc<Loop>> {
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
        return Err(Error::BadArgument {
            builtin: b.into(),
            arg: level_arg(3),
            expected: format!("a level inside level {r1} (the loop it is skewed by)"),
            found: format!("level {r2}"),
        });
    }
    if f == 0 || f.checked_abs().is_none_or(|a| a > INT_MAX) {
        return Err(Error::BadArgument {
            builtin: b.into(),
            arg: Arg::new(4, "factor"),
            expected: "a non-zero integer factor".into(),
            found: format!("{f}"),
        });
    }
    let by = Expr::var_name(&outer.iter).scale(f);
    rewrite_loop(nest, r2, b, &level_arg(3), &mut |l| {
        unit_step(b, 3, l)?;
        Ok(vec![LNode::Loop(moved(l, &by, b)?)])
    })
}

/// `shift(l, r, c)` (Pluto's shifting): the loop at level `r` runs `i' = i + c`, its body
/// reading `i` as `i' - c`: the same instances in the same order, now aligned with a sibling
/// loop for `fuse_inner` (which then guards what runs outside its own range).
pub fn shift(nest: &Nest, level: i64, c: i64) -> Result<Nest> {
    let b = "shift";
    if c.checked_abs().is_none_or(|a| a > INT_MAX) {
        return Err(Error::BadArgument {
            builtin: b.into(),
            arg: Arg::new(3, "offset"),
            expected: format!("an offset within ±{INT_MAX}"),
            found: format!("{c}"),
        });
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
        unit_step(b, 2, l)?;
        if !l.lb.is_affine() || !l.ub.is_affine() {
            return Err(Error::BadArgument {
                builtin: b.into(),
                arg: level_arg(2),
                expected: "a loop with affine bounds (indices stay affine: reverse before strip-mining)"
                    .into(),
                found: format!("loop {}", l.header()),
            });
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

/// `distribute(l, r)` (loop distribution, or fission; the inverse of `fuse_inner`): the loop at
/// level `r`, whose body is a sequence, becomes one loop per item of the sequence, each with
/// the same header and marks, in order.
///
/// ```text
/// for i in [0, N-1]          for i in [0, N-1]
///   S1(i)             →        S1(i)
///   S2(i)                    for i in [0, N-1]
///                              S2(i)
/// ```
pub fn distribute(nest: &Nest, level: i64) -> Result<Nest> {
    let b = "distribute";
    rewrite_loop(nest, level, b, &level_arg(2), &mut |l| {
        if l.body.len() < 2 {
            return Err(Error::BadArgument {
                builtin: b.into(),
                arg: level_arg(2),
                expected: "a loop whose body is a sequence of two or more items".into(),
                found: format!("loop {} around one item", l.header()),
            });
        }
        Ok(l.body.iter().map(|x| LNode::Loop(l.with_body(vec![x.clone()]))).collect())
    })
}

/// Where `sink` puts the statements it moves into the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SinkAt {
    /// Those before the loop at its first iteration, those after it at its last: the same
    /// order (code sinking).
    Keep,
    /// All at its first iteration, before its body.
    First,
    /// All at its last iteration, after its body.
    Last,
}

/// `sink(l, r)`, `sink(l, r, "first" | "last")` (code sinking, which makes an imperfect nest
/// perfect): the loop at level `r` runs statements beside one inner loop `k`; they move into
/// `k`, guarded to run at one iteration of it: by default those before `k` at its first
/// iteration (before its body) and those after at its last (after its body), the same order;
/// `"first"` or `"last"` puts them all there, another order that legality accepts where the
/// updates commute (the `max` updates of one element: nussinov). A loop beside `k` moves in
/// whole, its statements guarded; where the body holds several loops, `into` names `k`
/// (`sink(l, 1, "first", "j")`: gramschmidt's column steps into its loop over later columns). `k`
/// must run at least once wherever its loop does, and its bound at that end must be affine.
///
/// ```text
/// for j in [a, b]                    for j in [a, b]
///   S1(j)                              for k in [c(j), d(j)]
///   for k in [c(j), d(j)]      →         S2(j, k)
///     S2(j, k)                           if k == d(j): S1(j)      ("last")
/// ```
pub fn sink(nest: &Nest, level: i64, at: SinkAt, into: Option<&str>) -> Result<Nest> {
    let b = "sink";
    let outer = locate(nest, level, b, &level_arg(2))?;
    let loops: Vec<(usize, &Arc<Loop>)> =
        outer.body.iter().enumerate().filter_map(|(k, x)| Some((k, x.as_loop()?))).collect();
    let expected = "a loop whose body is statements beside exactly one loop".to_string();
    let (pos, inner) = match (into, &loops[..]) {
        (None, [one]) => *one,
        (None, _) => {
            return Err(Error::BadArgument {
                builtin: b.into(),
                arg: level_arg(2),
                expected: format!(
                    "{expected}, or the inner loop named (sink(l, {level}, \"first\", \"{}\"))",
                    loops.last().map_or("k", |l| &*l.1.iter)
                ),
                found: format!("loop {} around {} loops", outer.header(), loops.len()),
            });
        }
        (Some(k), _) => {
            let named: Vec<&(usize, &Arc<Loop>)> = loops.iter().filter(|l| &*l.1.iter == k).collect();
            let [one] = named[..] else {
                let have: Vec<String> = loops.iter().map(|l| format!("`{}`", l.1.iter)).collect();
                return Err(Error::BadArgument {
                    builtin: b.into(),
                    arg: Arg::new(4, "into"),
                    expected: format!(
                        "the iterator of exactly one loop directly inside loop {} (it holds loops {})",
                        outer.header(),
                        have.join(", ")
                    ),
                    found: format!("\"{k}\" ({} such loops)", named.len()),
                });
            };
            *one
        }
    };
    if outer.body.len() < 2 {
        return Err(Error::BadArgument {
            builtin: b.into(),
            arg: level_arg(2),
            expected,
            found: format!("loop {} around one loop and no statement", outer.header()),
        });
    }
    unit_step(b, 2, inner)?;
    // Runs at least once wherever the loop around it runs (else its guarded statements would
    // not run there).
    let path = nest.path();
    let chain: Vec<&Loop> = path[..level as usize].iter().map(|l| &**l).collect();
    if crate::analysis::legality::never_for_any(&chain, &[inner.lb.sub(&inner.ub).add_int(-1)]) != Some(true)
    {
        return Err(Error::BadArgument {
            builtin: b.into(),
            arg: level_arg(2),
            expected: format!(
                "an inner loop that runs at least once in every iteration of loop `{}` (the statements \
                 sunk into it run at one of its iterations)",
                outer.iter
            ),
            found: format!("loop {}, which can be empty there", inner.header()),
        });
    }
    let k = Expr::var_name(&inner.iter);
    let end = |first: bool| -> Result<Expr> {
        let bound = if first { &inner.lb } else { &inner.ub };
        if !bound.is_affine() {
            return Err(Error::BadArgument {
                builtin: b.into(),
                arg: level_arg(2),
                expected: "an inner loop whose bound at that end is affine (sink before strip-mining)".into(),
                found: format!("loop {}", inner.header()),
            });
        }
        // `k == lb` is `lb - k >= 0` inside the loop; `k == ub` is `k - ub >= 0`.
        Ok(if first { bound.sub(&k) } else { k.sub(bound) })
    };
    let place = |x: &LNode, first: bool| -> Result<LNode> {
        guarded(x, &[end(first)?]).map_err(|why| Error::Illegal { builtin: b.into(), reason: why })
    };
    let (before, after) = (&outer.body[..pos], &outer.body[pos + 1..]);
    // A moved loop that binds `k` (or a variable of its bounds) would take the guard for its own.
    let mut bound = Vec::new();
    before.iter().chain(after).for_each(|x| x.loop_iters(&mut bound));
    let mut used: Vec<Name> = vec![inner.iter.clone()];
    used.extend(inner.lb.vars().into_iter().chain(inner.ub.vars()));
    if let Some(v) = bound.iter().find(|v| used.contains(v)) {
        return Err(Error::BadArgument {
            builtin: b.into(),
            arg: level_arg(2),
            expected: format!(
                "statements and loops beside loop `{}` that do not bind `{v}` (the guard that places them reads it)",
                inner.iter
            ),
            found: format!("a loop over `{v}` beside {}", inner.header()),
        });
    }
    let mut head = Vec::new();
    let mut tail = Vec::new();
    for x in before {
        match at {
            SinkAt::Last => tail.push(place(x, false)?),
            _ => head.push(place(x, true)?),
        }
    }
    for x in after {
        match at {
            SinkAt::First => head.push(place(x, true)?),
            _ => tail.push(place(x, false)?),
        }
    }
    let body: Vec<LNode> = head.into_iter().chain(inner.body.iter().cloned()).chain(tail).collect();
    let sunk = LNode::Loop(outer.with_body(vec![LNode::Loop(inner.with_body(body))]));
    rewrite_loop(nest, level, b, &level_arg(2), &mut |_| Ok(vec![sunk.clone()]))
}

/// `split(l, r, e)` (index-set splitting): the loop at level `r` over `[lb, ub]` becomes two
/// loops in turn, over `[lb, e-1]` and `[e, ub]` (`e` affine in outer iterators and named
/// constants; each part clipped to the range). A guard that a part's range decides goes: a
/// statement whose guard always holds there runs untested, one whose guard never holds leaves
/// that part (and a part left empty goes), and the bounds of the loops inside drop what the part
/// implies. The same instances in the same order: what peels
/// the iteration a `sink` guarded off its loop.
///
/// ```text
/// for j in [k+1, N-1]                         for j in [k+1, k+1]
///   S1(j)                     split at k+2      S1(j)
///   if j == k+1: S2(j)             →            S2(j)
///                                             for j in [k+2, N-1]
///                                               S1(j)
/// ```
pub fn split(nest: &Nest, level: i64, at: &Expr) -> Result<Nest> {
    let b = "split";
    let l = locate(nest, level, b, &level_arg(2))?;
    unit_step(b, 2, &l)?;
    let mut below = Vec::new();
    l.body.iter().for_each(|x| x.loop_iters(&mut below));
    if !at.is_affine() || at.mentions(&l.iter) || below.iter().any(|v| at.mentions(v)) {
        return Err(Error::BadArgument {
            builtin: b.into(),
            arg: Arg::new(3, "at"),
            expected: format!(
                "an affine expression in the iterators of loops around `{}` and named constants",
                l.iter
            ),
            found: format!("`{at}`"),
        });
    }
    let path = nest.path();
    let above: Vec<&Loop> = path[..level as usize - 1].iter().map(|l| &**l).collect();
    let tidy = crate::analysis::legality::tidy_bounds_for_any;
    let parts = [
        Loop { ub: Expr::min(&l.ub, &at.add_int(-1)), ..(*l).clone() },
        Loop { lb: Expr::max(&l.lb, at), ..(*l).clone() },
    ];
    let mut out = Vec::new();
    for part in parts {
        let part = tidy(&above, &part);
        if !part.lb.within(INT_MAX) || !part.ub.within(INT_MAX) {
            return Err(overflow(b, &part));
        }
        let mut chain = above.clone();
        chain.push(&part);
        if crate::analysis::legality::never_for_any(&chain, &[]) == Some(true) {
            continue;
        }
        let body: Vec<LNode> = part.body.iter().filter_map(|x| settle(&chain, x)).collect();
        if !body.is_empty() {
            out.push(LNode::Loop(Arc::new(Loop { body, ..part.clone() })));
        }
    }
    rewrite_loop(nest, level, b, &level_arg(2), &mut |_| Ok(out.clone()))
}

/// `x` inside the loops `chain` with the guards they decide settled: a guard that always holds
/// dropped, a statement whose guards never all hold (or a loop left empty) gone (`None`).
fn settle(chain: &[&Loop], x: &LNode) -> Option<LNode> {
    use crate::analysis::legality::never_for_any;
    match x {
        LNode::Loop(l) => {
            // Its bounds without what the part implies (`max(32*jo, i)` is `32*jo` in the
            // tiles past the diagonal, `jo >= io+1`).
            let tidied = crate::analysis::legality::tidy_bounds_for_any(chain, l);
            let l = &tidied;
            let mut inner = chain.to_vec();
            inner.push(l);
            if never_for_any(&inner, &[]) == Some(true) {
                return None;
            }
            let body: Vec<LNode> = l.body.iter().filter_map(|c| settle(&inner, c)).collect();
            (!body.is_empty()).then(|| LNode::Loop(l.with_body(body)))
        }
        LNode::Stmt(s) => {
            let Some(inst) = s.inst.as_ref().filter(|i| !i.guard.is_empty()) else {
                return Some(x.clone());
            };
            if never_for_any(chain, &inst.guard) == Some(true) {
                return None;
            }
            let mut kept = inst.guard.clone();
            for g in &inst.guard {
                let others: Vec<Expr> = kept.iter().filter(|h| *h != g).cloned().collect();
                // `g` holds wherever the others do: no point has `g < 0`, i.e. `-g - 1 >= 0`.
                let broken = [others.clone(), vec![Expr::int(0).sub(g).add_int(-1)]].concat();
                if never_for_any(chain, &broken) == Some(true) {
                    kept = others;
                }
            }
            let mut inst = (**inst).clone();
            inst.guard = kept;
            Some(LNode::Stmt(s.with_instance(inst)))
        }
    }
}
