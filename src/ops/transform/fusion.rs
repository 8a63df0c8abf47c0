//! Fusion and distribution (eq. 23-24), sinking a statement into a loop, splitting a loop's
//! range in two.

use super::*;

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
        let (lb, ub) = loops.iter().skip(1).fold((first.lb.clone(), first.ub.clone()), |(lb, ub), l| {
            (Expr::min(&lb, &l.lb), Expr::max(&ub, &l.ub))
        });
        for l in &loops {
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
            return Err(Error::bad_argument(
                b,
                level_arg(2),
                "a loop whose body is a sequence of two or more items",
                format!("loop {} around one item", l.header()),
            ));
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
            return Err(Error::bad_argument(
                b,
                level_arg(2),
                format!(
                    "{expected}, or the inner loop named (sink(l, {level}, \"first\", \"{}\"))",
                    loops.last().map_or("k", |l| &*l.1.iter)
                ),
                format!("loop {} around {} loops", outer.header(), loops.len()),
            ));
        }
        (Some(k), _) => {
            let named: Vec<&(usize, &Arc<Loop>)> = loops.iter().filter(|l| &*l.1.iter == k).collect();
            let [one] = named[..] else {
                let have: Vec<String> = loops.iter().map(|l| format!("`{}`", l.1.iter)).collect();
                return Err(Error::bad_argument(
                    b,
                    Arg::new(4, "into"),
                    format!(
                        "the iterator of exactly one loop directly inside loop {} (it holds loops {})",
                        outer.header(),
                        have.join(", ")
                    ),
                    format!("\"{k}\" ({} such loops)", named.len()),
                ));
            };
            *one
        }
    };
    if outer.body.len() < 2 {
        return Err(Error::bad_argument(
            b,
            level_arg(2),
            expected,
            format!("loop {} around one loop and no statement", outer.header()),
        ));
    }
    // Runs at least once wherever the loop around it runs (else its guarded statements would
    // not run there).
    let path = nest.path();
    let chain: Vec<&Loop> = path[..level as usize].iter().map(|l| &**l).collect();
    if crate::analysis::legality::never_for_any(&chain, &[inner.lb.sub(&inner.ub).add_int(-1)]) != Some(true)
    {
        return Err(Error::bad_argument(
            b,
            level_arg(2),
            format!(
                "an inner loop that runs at least once in every iteration of loop `{}` (the statements \
                 sunk into it run at one of its iterations)",
                outer.iter
            ),
            format!("loop {}, which can be empty there", inner.header()),
        ));
    }
    let k = Expr::var_name(&inner.iter);
    let end = |first: bool| -> Result<Expr> {
        let bound = if first { &inner.lb } else { &inner.ub };
        if !bound.is_affine() {
            return Err(Error::bad_argument(
                b,
                level_arg(2),
                "an inner loop whose bound at that end is affine (sink before strip-mining)",
                format!("loop {}", inner.header()),
            ));
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
        return Err(Error::bad_argument(
            b,
            level_arg(2),
            format!(
                "statements and loops beside loop `{}` that do not bind `{v}` (the guard that places them reads it)",
                inner.iter
            ),
            format!("a loop over `{v}` beside {}", inner.header()),
        ));
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
    let mut below = Vec::new();
    l.body.iter().for_each(|x| x.loop_iters(&mut below));
    if !at.is_affine() || at.mentions(&l.iter) || below.iter().any(|v| at.mentions(v)) {
        return Err(Error::bad_argument(
            b,
            Arg::new(3, "at"),
            format!("an affine expression in the iterators of loops around `{}` and named constants", l.iter),
            format!("`{at}`"),
        ));
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
        let body: Vec<LNode> = part.body.iter().filter_map(|x| drop_settled_guards(&chain, x)).collect();
        if !body.is_empty() {
            out.push(LNode::Loop(Arc::new(Loop { body, ..part.clone() })));
        }
    }
    rewrite_loop(nest, level, b, &level_arg(2), &mut |_| Ok(out.clone()))
}

/// `x` inside the loops `chain` with the guards they decide settled: a guard that always holds
/// dropped, a statement whose guards never all hold (or a loop left empty) gone (`None`).
pub(super) fn drop_settled_guards(chain: &[&Loop], x: &LNode) -> Option<LNode> {
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
            let body: Vec<LNode> = l.body.iter().filter_map(|c| drop_settled_guards(&inner, c)).collect();
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
