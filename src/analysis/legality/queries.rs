//! The other questions the transformations and code generation ask of the model: whether a
//! tensor stays local to a loop or in place, whether a loop carries a dependence, whether
//! conditions ever hold, bounds tidied under their loops.

use super::*;

/// Whether the tensor `tensor` may be stored per iteration of loop `l` of `nest`
/// (`analysis::storage`): every read of it is preceded by a write of the same element in the
/// same iteration, and an accumulation into one element runs in one iteration. Decided at the
/// program's sizes; `Err(Illegal)` with a witness otherwise.
pub fn stays_local(
    state: &State,
    nest: &Nest,
    l: &Loop,
    tensor: &Name,
) -> Result<Result<(), Illegal>, String> {
    let m = Model::new(state, nest)?;
    let Some((k, d)) = m.locate(l) else {
        return Ok(Ok(()));
    };
    escapes_remembered(state, nest, Some((k, d)), tensor, || {
        with_ctx(|ctx| m.escapes(ctx, Some((d, l)), tensor, &m.these))
    })
}

/// Whether every value of `tensor` that `nest` reads was written before by the nest itself
/// (none comes from before the kernel), decided on the untransformed program: a legal path
/// keeps every read's source, so where this fails, no loop of any path of `nest` can store
/// `tensor` per iteration ([`stays_local`]), and storage contraction need not ask loop by
/// loop (on a time-tiled stencil each of those questions takes isl seconds).
pub fn written_before_read(state: &State, nest: &Nest, tensor: &Name) -> Result<Result<(), Illegal>, String> {
    let program = Nest::new(nest.program.clone(), nest.origin.clone());
    escapes_remembered(state, &program, None, tensor, || {
        let m = Model::new(state, &program)?;
        with_ctx(|ctx| m.escapes(ctx, None, tensor, &m.these))
    })
}

/// Whether some value `nest` writes into `tensor` is never read afterwards in the program's
/// order (decided on the untransformed program, at its sizes): then the tensor holds a result
/// (a recurrence's `Y[i][M-1]`, adi's `u` after the last step), which storing it per iteration
/// would drop, even though the nest reads it too. `Ok(false)`: every value written is read
/// later (adi's `p` and `q`, interp's `t`), a temporary.
pub fn leaves_values_unread(state: &State, nest: &Nest, tensor: &Name) -> Result<bool, String> {
    let program = Nest::new(nest.program.clone(), nest.origin.clone());
    let unread = remembered_as("unread", state, &program, None, tensor, || {
        let m = Model::new(state, &program)?;
        let rank = m
            .origins
            .iter()
            .flat_map(|o| o.accesses.iter())
            .find(|a| a.tensor == *tensor)
            .map_or(0, |a| a.index.len());
        with_ctx(|ctx| {
            let orig = ctx.map(&m.original)?.with_params(&m.these)?;
            // w -> r: r runs after w.
            let after = orig.clone().lex_lt(orig)?;
            let writes = m.accesses(ctx, tensor, &|a| a.write, &m.these)?;
            let reads = m.accesses(ctx, tensor, &|a| !a.write, &m.these)?;
            let unit = m.elements_to_unit(ctx, rank)?;
            let instances = ctx.map(&domain_map(&m.origins, &m.names))?;
            let read_later = writes.clone().then(reads.reverse()?)?.and(after)?;
            let unread = writes.then(unit)?.minus(read_later.then(instances)?)?;
            Ok((!unread.coalesce()?.is_empty()?).then(|| "a value written is never read".to_string()))
        })
    })?;
    Ok(unread.is_err())
}

/// [`Model::escapes`] of `tensor` in `nest` at the loop `at` (the first statement under it, the
/// loop's depth; `None`: the whole kernel), remembered like verdicts: code generation asks for
/// every temporary of every nest it generates, at full size and at the check's size, and a
/// bench or a search generates the same nests again.
fn escapes_remembered(
    state: &State,
    nest: &Nest,
    at: Option<(usize, usize)>,
    tensor: &Name,
    ask: impl FnOnce() -> Result<Option<String>, String>,
) -> Result<Result<(), Illegal>, String> {
    remembered_as("escapes", state, nest, at, tensor, ask)
}

/// [`escapes_remembered`] under the question `tag`.
fn remembered_as(
    tag: &str,
    state: &State,
    nest: &Nest,
    at: Option<(usize, usize)>,
    tensor: &Name,
    ask: impl FnOnce() -> Result<Option<String>, String>,
) -> Result<Result<(), Illegal>, String> {
    let key = memo_key(state, nest, false).map(|k| {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (k, tag, at, tensor).hash(&mut h);
        h.finish()
    });
    Ok(match remembered(escape_memo(), key, ask)? {
        None => Ok(()),
        Some(message) => Err(Illegal { message }),
    })
}

/// The element access `a` of statement `org` touches at the iterator values `vals` (with the
/// parameters' values `params`), e.g. "[0][3]".
pub(super) fn element_at(org: &Origin, a: &Access, vals: &[i64], params: &[(String, i64)]) -> String {
    let env: BTreeMap<String, i64> = org
        .iters
        .iter()
        .map(|i| i.to_string())
        .zip(vals.iter().copied())
        .chain(params.iter().cloned())
        .collect();
    a.index
        .iter()
        .map(|i| i.eval(&|v| env.get(v).copied()).map_or("[?]".into(), |e| format!("[{e}]")))
        .collect()
}

/// Whether the result `y` of `nest` may be stored over its operand `x` (`in_place`, Ullrich 2018's compatible statements):
/// in the original order, no element of `x` is read after the element of `y` over it was
/// written (a read and the write of one instance are in order: the value is read first), and
/// `y` is never read before it is written (it would read `x`). With `y == x`, whether the
/// statement `x = e(x)` may run in place: its old values are read before they are overwritten
/// (the updates of `x += r` excepted: they read what they add to). Decided at the program's
/// sizes; `Err(Illegal)` with a witness otherwise.
pub fn stays_in_place(state: &State, nest: &Nest, y: &Name, x: &Name) -> Result<Result<(), Illegal>, String> {
    let m = Model::new(state, nest)?;
    with_ctx(|ctx| {
        let orig = ctx.map(&m.original)?.with_params(&m.these)?;
        // s -> t: t runs before s in the original order; at_or_before: t is s or runs before it.
        let before = orig.clone().lex_lt(orig.clone())?.reverse()?;
        let at_or_before = orig.clone().lex_ge(orig)?;
        let writes = m.accesses(ctx, y, &|a| a.write, &m.these)?;
        // A zeroed accumulator's first update writes its element (the zeroing) before the
        // instance reads anything: its reads of `x` come after that write.
        let zeroings = m.accesses(ctx, y, &|a| a.write && a.accumulates && a.zeroed, &m.these)?;
        let instances = ctx.map(&domain_map(&m.origins, &m.names))?;
        let bound: Vec<(String, i64)> = state.consts.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let element = |org: &Origin, a: &Access, vals: &[i64], params: &[(String, i64)]| -> String {
            element_at(org, a, vals, &[params, &bound].concat())
        };
        for org in &m.origins {
            for a in org.accesses.iter().filter(|a| !a.write) {
                let is = |t: &Name| a.tensor == *t;
                // An update's read of what it adds to: a zeroed accumulator's reads its own sum; a
                // user's `y = add(y, ..)` reads `y` from before the nest, which over `x` is `x`.
                let own = a.accumulates && (a.zeroed || y == x);
                if own || !(is(x) || (is(y) && y != x)) {
                    continue;
                }
                let read = m.accesses(ctx, &a.tensor, &|b| std::ptr::eq(b, a), &m.these)?;
                let earlier_writes = read.clone().then(writes.clone().reverse()?)?.and(before.clone())?;
                if is(x) {
                    // A write of `y` over the element before this read of `x`.
                    let zeroed_first = read
                        .then(zeroings.clone().reverse()?)?
                        .and(at_or_before.clone())?
                        .minus(earlier_writes.clone())?;
                    if let Some(sample) = earlier_writes.coalesce()?.sample()? {
                        let (params, s, t) = point(&sample);
                        let el = s.as_ref().map_or("[?]".into(), |(_, v)| element(org, a, v, &params));
                        let (read, wrote) = (m.instance_words(s.as_ref()), m.instance_words(t.as_ref()));
                        let message = if y == x {
                            format!(
                                "{x}{el} is read by {read} after {wrote} overwrote it: in place, a new value \
                             would be read where the old one is meant (not a compatible statement, Ullrich 2018)"
                            )
                        } else {
                            format!(
                                "{x}{el} is read by {read} after {wrote} wrote {y}{el}: stored over `{x}`, `{y}` \
                             would overwrite a value still to be read (not a compatible statement, Ullrich 2018)"
                            )
                        };
                        return Ok(Err(Illegal { message }));
                    }
                    // The zeroing of `y`'s element by the same instance, before it reads `x`.
                    if let Some(sample) = zeroed_first.coalesce()?.sample()? {
                        let (params, s, _) = point(&sample);
                        let el = s.as_ref().map_or("[?]".into(), |(_, v)| element(org, a, v, &params));
                        let read = m.instance_words(s.as_ref());
                        let message = if y == x {
                            format!(
                                "{x}{el} is read by {read} after the same update zeroed it (a sum starts from 0): \
                             in place, 0 would be read where the old value is meant (not a compatible statement, \
                             Ullrich 2018)"
                            )
                        } else {
                            format!(
                                "{x}{el} is read by {read} after the same update zeroed {y}{el} (a sum starts from 0): \
                             stored over `{x}`, the zeroing would overwrite a value still to be read (not a \
                             compatible statement, Ullrich 2018)"
                            )
                        };
                        return Ok(Err(Illegal { message }));
                    }
                } else {
                    // A read of `y` with no write of its element before: over `x`, it would read `x`.
                    let unit = m.elements_to_unit(ctx, a.index.len())?;
                    let reads = m.accesses(ctx, &a.tensor, &|b| std::ptr::eq(b, a), &m.these)?.then(unit)?;
                    let open = reads.minus(earlier_writes.then(instances.clone())?)?;
                    if let Some(sample) = open.coalesce()?.sample()? {
                        let (params, s, _) = point(&sample);
                        let el = s.as_ref().map_or("[?]".into(), |(_, v)| element(org, a, v, &params));
                        return Ok(Err(Illegal {
                            message: format!(
                                "{y}{el} is read by {} before the nest writes it: stored over `{x}`, it would \
                             read `{x}`'s value instead of `{y}`'s",
                                m.instance_words(s.as_ref())
                            ),
                        }));
                    }
                }
            }
        }
        Ok(Ok(()))
    })
}

/// True if loop `target` of `nest` carries a dependence at the program's sizes, reductions
/// included: code generation runs the iterations of a marked loop that carries none as they
/// are (`parallel for`, `simd`), and plans private accumulators for one that carries only
/// reductions (`analysis/reduction.rs`).
pub fn carries(state: &State, nest: &Nest, target: &Loop) -> Result<bool, String> {
    carries_with(state, nest, target, true)
}

/// True if loop `target` of `nest` carries a dependence other than a reduction's updates of
/// one element: where it does not, but [`carries`] does, the loop carries only reductions, and
/// nothing else in it reads or writes the elements they accumulate into.
pub fn carries_beyond_reductions(state: &State, nest: &Nest, target: &Loop) -> Result<bool, String> {
    carries_with(state, nest, target, false)
}

/// For each of the loops `targets` of `nest`: ([`carries`], [`carries_beyond_reductions`]),
/// each set of dependences read and fixed at the program's sizes once for all the loops (those
/// with reductions only where a loop carries none of the others). The same answers as asking
/// loop by loop, and remembered alike.
pub fn carried_kinds(state: &State, nest: &Nest, targets: &[&Loop]) -> Result<Vec<(bool, bool)>, String> {
    let m = Model::new(state, nest)?;
    let base = memo_key(state, nest, false);
    with_ctx(|ctx| {
        let mut deps: [Option<UMap<'_>>; 2] = [None, None];
        let mut out = Vec::with_capacity(targets.len());
        for target in targets {
            // Beyond reductions first: where a loop carries such a dependence it carries one, and
            // those dependences are the ones a verdict reads next (remembered as text).
            let beyond = carried_at(ctx, &m, base, target, false, &mut deps[1])?;
            let any = beyond || carried_at(ctx, &m, base, target, true, &mut deps[0])?;
            out.push((any, beyond));
        }
        Ok(out)
    })
}

pub(super) fn carries_with(
    state: &State,
    nest: &Nest,
    target: &Loop,
    reductions: bool,
) -> Result<bool, String> {
    let m = Model::new(state, nest)?;
    with_ctx(|ctx| carried_at(ctx, &m, memo_key(state, nest, false), target, reductions, &mut None))
}

/// Whether `target` carries one of the dependences of `m` (with reductions or without), at the
/// program's sizes: remembered by the nest's memo key `base` like verdicts (code generation
/// asks again for every candidate of a search); `deps` keeps the dependences once read.
fn carried_at<'c>(
    ctx: &'c Ctx,
    m: &Model<'_>,
    base: Option<u64>,
    target: &Loop,
    reductions: bool,
    deps: &mut Option<UMap<'c>>,
) -> Result<bool, String> {
    let Some((at, d)) = m.locate(target) else {
        return Ok(false); // a loop with no statement
    };
    let key = base.map(|k| {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (k, "carries", at, d, reductions).hash(&mut h);
        h.finish()
    });
    remembered(carried_memo(), key, || {
        if deps.is_none() {
            // At the program's sizes: fixed before anything is composed.
            *deps = Some(
                dependences(ctx, &m.origins, &m.names, &m.original_each, reductions, false)?
                    .with_params(&m.these)?,
            );
        }
        let Some(dep) = deps.as_ref() else { unreachable!("set just above") };
        Ok(!m.carried(ctx, dep, d, target)?.1.is_empty()?)
    })
}

/// True if `g >= 0` at every point of the loops `outer` (outermost first), whatever values the
/// named constants take (so it stays true under a `-D`); `None` where isl cannot answer. The
/// loops' steps are ignored: a superset of their points, so `Some(true)` is never wrong.
pub fn always_nonneg(outer: &[&Loop], g: &Expr) -> Option<bool> {
    empty_within(outer, &[g.scale(-1).add_int(-1)], false)
}

/// The first access of `items` that leaves its tensor's bounds at some point of its loops, in
/// words with a witness: "`A[i+1]` at (i=6, j=0) reads element 7 of extent 7 (N=7)". Decided
/// at the named constants' values where the program binds them, else for every value (at
/// least 1). Accesses through an iterator no loop binds yet (one that `around` will bind) are
/// checked when it is bound.
pub fn out_of_bounds(state: &State, items: &[LNode]) -> Result<Option<String>, String> {
    let stmts: Vec<(TExpr, Vec<&Loop>)> = {
        fn go<'a>(xs: &'a [LNode], loops: &mut Vec<&'a Loop>, out: &mut Vec<(TExpr, Vec<&'a Loop>)>) {
            for x in xs {
                match x {
                    LNode::Stmt(s) => out.push((s.clone(), loops.clone())),
                    LNode::Loop(l) => {
                        loops.push(l);
                        go(&l.body, loops, out);
                        loops.pop();
                    }
                }
            }
        }
        let mut out = Vec::new();
        go(items, &mut Vec::new(), &mut out);
        out
    };
    with_ctx(|ctx| {
        for (s, loops) in &stmts {
            let iters: Vec<Name> = loops.iter().map(|l| l.iter.clone()).collect();
            // An iterator no loop binds yet (`around` will, and checks again): skipped.
            let free: Vec<Name> = s.domain().free;
            if loops.iter().any(|l| free.iter().any(|v| l.bounds_mention(v))) {
                continue;
            }
            let mut leaves = Vec::new();
            s.visit(&mut |n| {
                if n.is_tensor_leaf() {
                    leaves.push(n.clone());
                }
            });
            for leaf in &leaves {
                let (Some(xs), Some(ds)) = (leaf.index_list(), leaf.shape.dims()) else { continue };
                for (x, d) in xs.iter().zip(ds) {
                    let crate::ir::Dim::Known(extent) = d else { continue };
                    if x.vars().iter().any(|v| free.contains(v)) {
                        continue;
                    }
                    let mut params: BTreeSet<Name> = state.consts.keys().cloned().collect();
                    for e in loops.iter().flat_map(|l| [&l.lb, &l.ub]).chain([x, extent]) {
                        params.extend(e.vars().into_iter().filter(|v| !iters.contains(v)));
                    }
                    let names = Names { params };
                    let v = names.var(&iters, "v_");
                    let mut cons: Vec<String> =
                        loops.iter().map(|l| bounded(&l.lb, &format!("v_{}", l.iter), &l.ub, &v)).collect();
                    for g in s.guard() {
                        cons.push(format!("{} >= 0", isl(g, &v)));
                    }
                    for p in &names.params {
                        match state.constant(p) {
                            Some(val) => cons.push(format!("p_{p} = {val}")),
                            None => cons.push(format!("p_{p} >= 1")),
                        }
                    }
                    cons.push(format!("({} < 0 or {} > {} - 1)", isl(x, &v), isl(x, &v), isl(extent, &v)));
                    let text = format!(
                        "{} -> {{ S0[{}] -> [] : {} }}",
                        names.param_list(),
                        dims(&iters, "v_"),
                        cons.join(" and ")
                    );
                    let Some(sample) = ctx.map(&text)?.coalesce()?.sample()? else { continue };
                    let (ps, a, _) = point(&sample);
                    let vals = a.map(|(_, v)| v).unwrap_or_default();
                    let mut env: BTreeMap<String, i64> =
                        iters.iter().map(|i| i.to_string()).zip(vals.iter().copied()).collect();
                    env.extend(ps.iter().cloned());
                    env.extend(state.consts.iter().map(|(k, v)| (k.to_string(), *v)));
                    let at: Vec<String> = iters.iter().zip(&vals).map(|(i, v)| format!("{i}={v}")).collect();
                    let value = x.eval(&|n| env.get(n).copied()).map_or("?".into(), |e| e.to_string());
                    let ext =
                        extent.eval(&|n| env.get(n).copied()).map_or(extent.to_string(), |e| e.to_string());
                    let sizes: Vec<String> = ps.iter().map(|(p, v)| format!("{p}={v}")).collect();
                    let sizes =
                        if sizes.is_empty() { String::new() } else { format!(" ({})", sizes.join(", ")) };
                    return Ok(Some(format!(
                        "`{}` at ({}) in `{s}` is at index {value} of a dimension of extent {ext}{sizes}",
                        leaf.access(),
                        at.join(", "),
                    )));
                }
            }
        }
        Ok(None)
    })
}

/// True if no point of the loops `outer` (outermost first) satisfies every `c >= 0` of `conds`,
/// whatever values the named constants take (at least 1); `None` where isl cannot answer.
/// Steps are ignored (a superset of the points), so `Some(true)` is never wrong.
pub fn never(outer: &[&Loop], conds: &[Expr]) -> Option<bool> {
    empty_within(outer, conds, true)
}

/// [`fn@never`] for every value of the variables the loops do not bind, of any sign (the
/// iterators of loops around a focused sub-tree are among them, and may be 0 or negative).
pub fn never_for_any(outer: &[&Loop], conds: &[Expr]) -> Option<bool> {
    empty_within(outer, conds, false)
}

/// True if no point of the loops `outer` satisfies every `c >= 0` of `conds`, for every value
/// of the named constants (at least 1 where `positive`); `None` where isl cannot answer.
pub(super) fn empty_within(outer: &[&Loop], conds: &[Expr], positive: bool) -> Option<bool> {
    let iters: Vec<Name> = outer.iter().map(|l| l.iter.clone()).collect();
    if iters.iter().collect::<BTreeSet<_>>().len() != iters.len() {
        return None;
    }
    let mut params: BTreeSet<Name> = conds.iter().flat_map(|c| c.vars()).collect();
    for l in outer {
        params.extend(l.lb.vars());
        params.extend(l.ub.vars());
    }
    params.retain(|p| !iters.contains(p));
    let names = Names { params };
    let v = names.var(&iters, "v_");
    let mut cons: Vec<String> =
        outer.iter().map(|l| bounded(&l.lb, &format!("v_{}", l.iter), &l.ub, &v)).collect();
    if positive {
        cons.extend(names.params.iter().map(|p| format!("p_{p} >= 1")));
    }
    cons.extend(conds.iter().map(|c| format!("{} >= 0", isl(c, &v))));
    let text =
        format!("{} -> {{ [{}] -> [] : {} }}", names.param_list(), dims(&iters, "v_"), cons.join(" and "));
    with_ctx(|ctx| ctx.map(&text)?.is_empty()).ok()
}

/// Loop `l`'s bounds without the arguments of their `max` (lower) and `min` (upper) that
/// the others imply at every point of the loops `outer` (isl): the same range, fewer tests.
pub fn tidy_bounds(outer: &[&Loop], l: &Loop) -> Loop {
    tidy_bounds_with(outer, l, true)
}

/// [`tidy_bounds`] where the variables the loops `outer` do not bind may take any sign (loops
/// around a focused sub-tree): only what holds for every value goes.
pub fn tidy_bounds_for_any(outer: &[&Loop], l: &Loop) -> Loop {
    tidy_bounds_with(outer, l, false)
}

pub(super) fn tidy_bounds_with(outer: &[&Loop], l: &Loop, positive: bool) -> Loop {
    let tidy = |outer: &[&Loop], e: &Expr, lower: bool| -> Expr {
        let args: Vec<Expr> = if lower {
            match e.single_atom() {
                Some(Atom::Max(xs)) => xs.clone(),
                _ => return e.clone(),
            }
        } else {
            match e.min_args() {
                Some(xs) => xs.to_vec(),
                None => return e.clone(),
            }
        };
        let mut kept = args.clone();
        for a in &args {
            if kept.len() < 2 {
                break;
            }
            let rest: Vec<&Expr> = kept.iter().filter(|x| *x != a).collect();
            // `a` is implied where no point has every other argument beyond it.
            let conds: Vec<Expr> = rest
                .iter()
                .map(|r| if lower { a.sub(r).add_int(-1) } else { r.sub(a).add_int(-1) })
                .collect();
            if empty_within(outer, &conds, positive) == Some(true) {
                kept.retain(|x| x != a);
            }
        }
        let mut it = kept.into_iter();
        let first = it.next().unwrap_or_else(|| e.clone());
        it.fold(first, |acc, x| if lower { Expr::max(&acc, &x) } else { Expr::min(&acc, &x) })
    };
    Loop { lb: tidy(outer, &l.lb, true), ub: tidy(outer, &l.ub, false), ..l.clone() }
}
