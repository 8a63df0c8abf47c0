//! `build(t)`, eq. 19: the perfect loop nest around an assignment.

use crate::analysis::infer::{check_bounds, constants, eval_note, extent_of, iterators, nonneg};
use crate::error::{Arg, Error, Result};
use crate::ir::{Annotations, Expr, Instance, LNode, Loop, Name, Nest, State, TExpr};
use std::sync::Arc;

/// The loop order `build` uses: by number when every iterator is named `i<k>` (the paper's
/// "iterator ik is introduced by the loop at nesting level k"); otherwise the assigned
/// tensor's iterators first, in order, then the others in order of first appearance.
pub fn loop_order(stmt: &TExpr, consts: &std::collections::BTreeSet<Name>) -> Vec<Name> {
    let all = iterators(stmt, consts);
    let numbered: Option<Vec<(u64, Name)>> = all
        .iter()
        .map(|v| v.strip_prefix('i').and_then(|d| d.parse::<u64>().ok()).map(|k| (k, v.clone())))
        .collect();
    if let Some(mut ks) = numbered
        && !ks.is_empty()
    {
        ks.sort();
        return ks.into_iter().map(|(_, v)| v).collect();
    }
    // index_vars is in order of first appearance, target first: exactly the rule.
    all
}

/// `build(t)`, eq. 19: wraps the assignment `σ(t)` in one loop per iterator, ranges inferred
/// from the accesses (an iterator of the assigned tensor ranges over that dimension), loops
/// ordered by [`loop_order`]. Every access is checked to stay in bounds.
pub fn build(state: &State, t: &TExpr) -> Result<Nest> {
    let b = "build";
    let arg = Arg::new(1, "assignment");
    refuse_unbuildable(state, t, &arg)?;
    let consts = constants(state, &[t]);
    let dom = t.domain();
    let outside: Vec<Name> = dom.free.iter().chain(&dom.outer).cloned().collect();
    let mut order = loop_order(t, &consts);
    order.retain(|v| !outside.contains(v));
    check_ranges(t, &dom, &order, &consts, &arg)?;
    let order = bounds_first(&order, &dom, &arg)?;
    let x = t.target().cloned().unwrap_or_else(|| t.clone());
    let ranges = loop_ranges(state, t, &dom, &order, &arg)?;
    let (sub, heads) = loop_heads(&ranges, &arg)?;
    if dom.ranges.is_empty() && outside.is_empty() {
        let box_ranges: Vec<(Name, Expr)> =
            ranges.iter().map(|(v, _, ub, _)| (v.clone(), ub.clone())).collect();
        check_bounds(&[t], &box_ranges, state, b, &arg)?;
    }
    // The statement remembers the instances it runs (see `Instance`).
    let target: Vec<Name> = x.index_vars();
    let placed = if sub.is_empty() { t.clone() } else { t.subst_iters(&|n| sub.get(n).cloned()) };
    let stmt = placed.with_instance(Instance {
        origin: 0,
        iters: order.clone(),
        ubs: ranges.iter().map(|(_, _, ub, _)| ub.clone()).collect(),
        at: order.iter().map(|v| sub.get(v).cloned().unwrap_or_else(|| Expr::var_name(v))).collect(),
        reduction: order.iter().map(|v| !target.contains(v)).collect(),
        guard: Vec::new(),
    });
    let mut body = vec![LNode::Stmt(stmt)];
    for (v, lb, ub) in heads.iter().rev() {
        body = vec![LNode::Loop(Arc::new(Loop {
            iter: v.clone(),
            lb: lb.clone(),
            ub: ub.clone(),
            annot: Annotations::default(),
            body,
        }))];
    }
    let nest = Nest::new(body, vec![t.clone()]);
    if !(dom.ranges.is_empty() && outside.is_empty()) {
        // Ranges with affine bounds: every access in bounds at every point (isl).
        if let Some(why) = crate::analysis::legality::out_of_bounds(state, &nest.items).map_err(|e| {
            Error::Internal { builtin: b.into(), reason: format!("the bounds check failed: {e}") }
        })? {
            return Err(Error::bad_argument(
                b,
                Arg::new(2, "ranges"),
                "ranges over which every access stays in bounds (TeIL's rule)",
                why,
            ));
        }
    }
    refuse_sum_reading_target(state, t, &x, &nest)?;
    // An assignment `factor` or `expand` made: verification runs the one as written.
    let mut nest = nest;
    if let Some(before) = &t.before {
        nest.rewrites.extend(super::algebra::record(state, t, before));
    }
    Ok(nest)
}

/// Refuses what `build` cannot build: not an assignment, an unnamed one, a tensor of an empty
/// extent (a named constant bound since its declaration can make one empty).
fn refuse_unbuildable(state: &State, t: &TExpr, arg: &Arg) -> Result<()> {
    let b = "build";
    let arg = arg.clone();
    if !t.is_assign() {
        return Err(Error::WrongKind {
            builtin: b.into(),
            arg,
            expected: "an assignment ⟨(=, •, •), [x, y]⟩ (eq. 19)".into(),
            found: crate::ir::state::describe_tensor(t),
        });
    }
    if t.has_hole() {
        return Err(Error::WrongKind {
            builtin: b.into(),
            arg,
            expected: "an assignment bound to an identifier".into(),
            found: format!("the unnamed assignment `{t}`"),
        });
    }
    let mut empty = None;
    t.visit(&mut |n| {
        for d in n.shape.dims().unwrap_or(&[]) {
            if let crate::ir::Dim::Known(e) = d
                && empty.is_none()
                && nonneg(&e.add_int(-1), state) == Some(false)
                && n.is_tensor_leaf()
            {
                empty = Some(format!("extent {} of {}", eval_note(e, state), n.op.symbol()));
            }
        }
    });
    if let Some(found) = empty {
        return Err(Error::bad_argument(b, arg, "tensors of positive extents", found));
    }
    Ok(())
}

/// The range of each iterator in loop order, `(iterator, lb, ub, backward)`: a range given to
/// `build`, else the extent of the target's dimension it indexes, else the accesses that bound
/// it (eq. 19).
fn loop_ranges(
    state: &State,
    t: &TExpr,
    dom: &crate::ir::Domain,
    order: &[Name],
    arg: &Arg,
) -> Result<Vec<(Name, Expr, Expr, bool)>> {
    let b = "build";
    let arg = arg.clone();
    let x = t.target().cloned().unwrap_or_else(|| t.clone());
    let y = t.value().cloned().unwrap_or_else(|| t.clone());
    let mut ranges: Vec<(Name, Expr, Expr, bool)> = Vec::new();
    for v in order {
        if let Some(r) = dom.range(v) {
            ranges.push((v.clone(), r.lb.clone(), r.ub.clone(), r.backward));
            continue;
        }
        // An iterator of the assigned tensor ranges over that dimension's extent.
        let from_target = x.index_list().and_then(|xs| {
            xs.iter().position(|e| e.as_var() == Some(v)).and_then(|k| match x.shape.dims()?.get(k)? {
                crate::ir::Dim::Known(e) => Some(e.clone()),
                crate::ir::Dim::Unknown => None,
            })
        });
        let extent = match from_target {
            Some(e) => e,
            // Else the accesses that bound it, the target's affine positions (`B[i+1]`) too.
            None => match extent_of(v, &[&y, &x], state, b, &arg)? {
                Some(e) => e,
                None => {
                    return Err(Error::RangeInference {
                        builtin: b.into(),
                        arg,
                        iterator: v.to_string(),
                        reason: format!(
                            "it indexes no dimension on its own in `{t}` (only inside expressions with other \
                             iterators); give its range (`build(s, [[{v}, LB, UB]])`)"
                        ),
                    });
                }
            },
        };
        if nonneg(&extent.add_int(-1), state) == Some(false) {
            return Err(Error::RangeInference {
                builtin: b.into(),
                arg,
                iterator: v.to_string(),
                reason: format!(
                    "expected a range of at least one value, found extent {}",
                    eval_note(&extent, state)
                ),
            });
        }
        let ub = extent.checked_add_int(-1).map_err(|_| {
            Error::bad_argument(
                b,
                arg.clone(),
                format!("extents of at most {}", crate::ir::expr::INT_MAX),
                format!("the extent {extent} of iterator `{v}` (an integer overflow)"),
            )
        })?;
        ranges.push((v.clone(), Expr::int(0), ub, false));
    }
    Ok(ranges)
}

/// The loops' headers, outermost first: a backward range runs its loop's variable from 0 up,
/// the iterator being `ub - v` (bounds of inner ranges read through it); and that substitution.
#[allow(clippy::type_complexity)]
fn loop_heads(
    ranges: &[(Name, Expr, Expr, bool)],
    arg: &Arg,
) -> Result<(std::collections::BTreeMap<Name, Expr>, Vec<(Name, Expr, Expr)>)> {
    let b = "build";
    let mut sub: std::collections::BTreeMap<Name, Expr> = std::collections::BTreeMap::new();
    let mut heads: Vec<(Name, Expr, Expr)> = Vec::new();
    for (v, lb, ub, backward) in ranges {
        let through = |e: &Expr| e.subst_with(&|n| sub.get(n).cloned());
        let (lb, ub) = (through(lb), through(ub));
        if *backward {
            let span = ub.checked_sub(&lb).map_err(|_| overflow_in(b, arg, v))?;
            sub.insert(v.clone(), ub.sub(&Expr::var_name(v)));
            heads.push((v.clone(), Expr::int(0), span));
        } else {
            heads.push((v.clone(), lb, ub));
        }
    }
    Ok((sub, heads))
}

/// Refuses a sum into `x` that reads `x` (`x = M x`) unless each old element is read before it
/// is first written: its loops zero `x[i]` at the first update and add into it while other
/// instances still read `x`, so what they read depends on where the partial sums live (memory
/// in the reference, registers in a kernel). isl gives the witness (Ullrich 2018's compatible
/// statements). Other statements over their own operand (`A = @A: eq(A, [i, j] -> [j, i])`)
/// mean what their loops do (docs/semantics.md).
fn refuse_sum_reading_target(state: &State, t: &TExpr, x: &TExpr, nest: &Nest) -> Result<()> {
    let b = "build";
    if let (Some(name), Some(lw)) = (x.id(), crate::ir::lower(t))
        && lw.first.is_some()
    {
        let mut reads_target = false;
        lw.rhs.visit(&mut |n| reads_target |= n.id() == Some(name));
        if reads_target
            && let Ok(Err(why)) = crate::analysis::legality::stays_in_place(state, nest, name, name)
        {
            return Err(Error::Illegal {
                builtin: b.into(),
                reason: format!(
                    "`{t}` sums into `{name}` while reading it: {}; expected a sum that reads `{name}` only at \
                     the element it writes, or a result under a new name (e.g. `{name}2 = ...`)",
                    why.message
                ),
            });
        }
    }
    Ok(())
}

fn overflow_in(b: &str, arg: &Arg, v: &Name) -> Error {
    Error::bad_argument(
        b,
        arg.clone(),
        format!("bounds of at most {}", crate::ir::expr::INT_MAX),
        format!("an integer overflow in the range of `{v}`"),
    )
}

/// Checks the explicit ranges of `t`'s domain: one per iterator of the statement, bounds
/// affine in named constants, other iterators and iterators bound outside; the iterators a
/// zeroed accumulator (a contraction) sums over start at 0 and run forwards (its first update
/// zeroes its element).
fn check_ranges(
    t: &TExpr,
    dom: &crate::ir::Domain,
    order: &[Name],
    consts: &std::collections::BTreeSet<Name>,
    _arg: &Arg,
) -> Result<()> {
    let b = "build";
    let arg = Arg::new(2, "ranges");
    let bad = |expected: String, found: String| Error::bad_argument(b, arg.clone(), expected, found);
    let target = t.target().map(|x| x.index_vars()).unwrap_or_default();
    let accumulator = matches!(t.op, crate::ir::Op::Assign(crate::ir::AssignMode::Accumulator));
    for (k, r) in dom.ranges.iter().enumerate() {
        if dom.ranges[..k].iter().any(|q| q.iter == r.iter) {
            return Err(bad("one range per iterator".into(), format!("two ranges of `{}`", r.iter)));
        }
        if !order.contains(&r.iter) {
            let its: Vec<&str> = order.iter().map(|v| &**v).collect();
            return Err(bad(
                format!("ranges of the statement's iterators ({})", its.join(", ")),
                format!("a range of `{}`, which `{t}` does not use", r.iter),
            ));
        }
        for e in [&r.lb, &r.ub] {
            if !e.is_affine() {
                return Err(bad(
                    "affine bounds (e.g. `i+1`, `N-1`)".into(),
                    format!("the bound `{e}` of `{}`", r.iter),
                ));
            }
            for v in e.vars() {
                let known = consts.contains(&v)
                    || order.contains(&v)
                    || dom.free.contains(&v)
                    || dom.outer.contains(&v);
                if v == r.iter || !known {
                    return Err(bad(
                        format!("bounds of `{}` in named constants and other iterators", r.iter),
                        format!("`{v}` in the bound `{e}`"),
                    ));
                }
            }
        }
        if accumulator && !target.contains(&r.iter) && (r.backward || r.lb.as_const() != Some(0)) {
            return Err(bad(
                format!(
                    "a range from 0, forwards, for `{}`, which the contraction sums over (its first update zeroes the sum)",
                    r.iter
                ),
                format!("{}; write the sum as an update `C = @C: add(C, ...)` instead", r.describe()),
            ));
        }
    }
    Ok(())
}

/// `order` with every iterator after those its explicit bounds mention (stable otherwise).
fn bounds_first(order: &[Name], dom: &crate::ir::Domain, arg: &Arg) -> Result<Vec<Name>> {
    let needs = |v: &Name| -> Vec<Name> {
        dom.range(v)
            .map(|r| r.lb.vars().into_iter().chain(r.ub.vars()).filter(|x| order.contains(x)).collect())
            .unwrap_or_default()
    };
    let mut out: Vec<Name> = Vec::new();
    while out.len() < order.len() {
        let next = order.iter().find(|v| !out.contains(v) && needs(v).iter().all(|x| out.contains(x)));
        match next {
            Some(v) => out.push(v.clone()),
            None => {
                let left: Vec<&str> = order.iter().filter(|v| !out.contains(v)).map(|v| &**v).collect();
                return Err(Error::bad_argument(
                    "build",
                    arg.clone(),
                    "ranges whose bounds depend on one another without a cycle",
                    format!("the ranges of {} bound each other", left.join(", ")),
                ));
            }
        }
    }
    Ok(out)
}

/// `state` with every nest's untransformed program filled in where a state saved by an older
/// teml lacks it (each origin's `build`, one after the other): what loading a saved state does,
/// so that legality always finds [`Nest::program`].
pub fn with_programs(state: &State) -> Result<State> {
    let mut out = state.clone();
    for v in out.vars.values_mut() {
        if let crate::ir::Value::Nest(n) = v
            && n.program.is_empty()
        {
            n.program = program(state, n)?;
        }
    }
    for k in &mut out.kernels {
        for n in &mut k.nests {
            if n.program.is_empty() {
                n.program = program(state, n)?;
            }
        }
    }
    Ok(out)
}

/// The untransformed nest of `nest` (its [`Nest::program`]; for a state saved before that
/// was kept, each origin's `build`, one after the other).
pub fn program(state: &State, nest: &Nest) -> Result<Vec<LNode>> {
    if !nest.program.is_empty() {
        return Ok(nest.program.clone());
    }
    Ok(sequence(state, &nest.origin)?.items)
}

/// The assignments `stmts`, each built (eq. 19), as one nest running them in order (a
/// top-level sequence): a program's untransformed nests, `lift`'s steps.
pub fn sequence(state: &State, stmts: &[TExpr]) -> Result<Nest> {
    let mut items = Vec::new();
    for (k, o) in stmts.iter().enumerate() {
        let built = build(state, o)?;
        // `build` numbers its one origin 0.
        items.extend(built.items.iter().map(|x| x.map_stmts(&|t| super::transform::shift_origin(t, k))));
    }
    Ok(Nest::new(items, stmts.to_vec()))
}

/// The origin or placed statement `s` inside a new loop `it` of a sequence (`around`): its
/// origin moved by `shift`, `it` its outermost iterator (no longer free).
fn enclosed(s: &TExpr, it: &Name, ub: &Expr, at: &Expr, shift: usize) -> TExpr {
    let mut dom = s.domain();
    dom.free.retain(|v| v != it);
    dom.outer.insert(0, it.clone());
    let s = match &s.inst {
        Some(i) => s.with_instance(Instance {
            origin: i.origin + shift,
            iters: std::iter::once(it.clone()).chain(i.iters.iter().cloned()).collect(),
            ubs: std::iter::once(ub.clone()).chain(i.ubs.iter().cloned()).collect(),
            at: std::iter::once(at.clone()).chain(i.at.iter().cloned()).collect(),
            reduction: std::iter::once(false).chain(i.reduction.iter().copied()).collect(),
            guard: i.guard.clone(),
        }),
        None => s.clone(),
    };
    s.with_domain(dom)
}

/// `around(t, [lb, ub], l1, .., lk)` (PolyBench's time loops; the paper's eq. 2 allows a loop
/// over a sequence, which eq. 19 never builds): the loop `t` from `lb` to `ub` around the
/// sequence of the nests `l1, .., lk`, each as it is (transformed or not). Statements that
/// use `t` are built with `[t]` among their ranges. Every access is checked in bounds.
pub fn around(state: &State, it: &Name, lb: &Expr, ub: &Expr, nests: &[Nest]) -> Result<Nest> {
    around_dir(state, it, lb, ub, false, nests)
}

/// [`around`], the loop running from `ub` down to `lb` where `backward` (`around(t, [ub, lb,
/// -1], ...)`): its variable runs from 0 up, the iterator being `ub - v` (as `build` does).
pub fn around_dir(
    state: &State,
    it: &Name,
    lb: &Expr,
    ub: &Expr,
    backward: bool,
    nests: &[Nest],
) -> Result<Nest> {
    let b = "around";
    let bad = |pos: usize, role: &str, expected: String, found: String| {
        Error::bad_argument(b, Arg::new(pos, role), expected, found)
    };
    if !crate::ir::is_c_ident(it) || state.constant(it).is_some() {
        return Err(bad(1, "iterator", "a new iterator name".into(), format!("`{it}`")));
    }
    let mut free: Vec<Name> = Vec::new();
    for n in nests {
        for o in &n.origin {
            free.extend(o.domain().free);
        }
    }
    let all: Vec<&TExpr> = nests.iter().flat_map(|n| n.origin.iter()).collect();
    let consts = constants(state, &all.iter().map(|t| &***t).collect::<Vec<_>>());
    for e in [lb, ub] {
        if !e.is_affine() {
            return Err(bad(2, "range", "affine bounds".into(), format!("the bound `{e}`")));
        }
        if let Some(v) = e.vars().into_iter().find(|v| v == it || !(consts.contains(v) || free.contains(v))) {
            return Err(bad(
                2,
                "range",
                "bounds in named constants (or iterators a loop further out binds)".into(),
                format!("`{v}` in the bound `{e}`"),
            ));
        }
    }
    if nests.is_empty() {
        return Err(bad(3, "nests", "one or more loop nests".into(), "none".into()));
    }
    let mut shift = 0;
    let mut items = Vec::new();
    let mut program_items = Vec::new();
    let mut origin = Vec::new();
    let mut layouts = std::collections::BTreeMap::new();
    let mut over = std::collections::BTreeMap::new();
    for (k, n) in nests.iter().enumerate() {
        let pos = k + 3;
        let prog = program(state, n)?;
        let mut own = None;
        for x in n.items.iter().chain(&prog) {
            x.visit_loops(&mut |l| {
                if l.iter == *it {
                    own = Some(l.header());
                }
            });
        }
        if let Some(h) = own {
            return Err(bad(
                pos,
                "nest",
                format!(
                    "nests without a loop over `{it}` (build a statement that uses `{it}` with `[{it}]` among its ranges)"
                ),
                format!("the loop {h}"),
            ));
        }
        for (t, lay) in &n.layouts {
            if layouts.get(t).is_some_and(|l| l != lay) {
                return Err(bad(
                    pos,
                    "nest",
                    "one layout per tensor".into(),
                    format!("two layouts of `{t}`"),
                ));
            }
            layouts.insert(t.clone(), lay.clone());
        }
        over.extend(n.over.iter().map(|(y, x)| (y.clone(), x.clone())));
        if let Some(t) = n.expanded.keys().next() {
            return Err(bad(
                pos,
                "nest",
                "nests whose tensors are stored as declared (privatize after `around`)".into(),
                format!("a nest where `{t}` has a copy per iteration of a loop (privatize)"),
            ));
        }
        if let Some(r) = n.rewrites.first() {
            return Err(bad(
                pos,
                "nest",
                "nests without an algebraic rewrite (verification would run the original outside the loop)"
                    .into(),
                format!("the nest whose `{}` is {} (`{}`)", r.result, r.done(), r.by),
            ));
        }
        let ub2 = ub.clone();
        let value = if backward { ub.sub(&Expr::var_name(it)) } else { Expr::var_name(it) };
        let v2 = value.clone();
        let update = move |s: &TExpr| enclosed(s, it, &ub2, &v2, shift);
        let through =
            |x: &LNode| if backward { x.subst(&|v| (v == &**it).then(|| value.clone())) } else { x.clone() };
        items.extend(n.items.iter().map(|x| through(x).map_stmts(&update)));
        program_items.extend(prog.iter().map(|x| through(x).map_stmts(&update)));
        origin.extend(n.origin.iter().map(|o| enclosed(o, it, ub, &Expr::var_name(it), 0)));
        shift += n.origin.len();
    }
    // A result of the sequence read before any statement of it writes it would be read at the
    // first iteration before it has a value.
    check_defined_first(state, &origin)?;
    let (hlb, hub) = if backward { (Expr::int(0), ub.sub(lb)) } else { (lb.clone(), ub.clone()) };
    let head = |body: Vec<LNode>| {
        vec![LNode::Loop(Arc::new(Loop {
            iter: it.clone(),
            lb: hlb.clone(),
            ub: hub.clone(),
            annot: Annotations::default(),
            body,
        }))]
    };
    let mut out = Nest::new(head(items), origin);
    out.program = head(program_items);
    out.layouts = layouts;
    out.over = over;
    if let Some(why) = crate::analysis::legality::out_of_bounds(state, &out.program)
        .map_err(|e| Error::Internal { builtin: b.into(), reason: format!("the bounds check failed: {e}") })?
    {
        return Err(bad(
            2,
            "range",
            "a range over which every access stays in bounds (TeIL's rule)".into(),
            why,
        ));
    }
    Ok(out)
}

/// Refuses a sequence whose statements read a tensor that only a statement defines (no
/// `tensor(...)` declares it) before any statement writes it.
fn check_defined_first(state: &State, origin: &[TExpr]) -> Result<()> {
    let defined_only = |n: &Name| matches!(state.get(n), Some(crate::ir::Value::Tensor(t)) if t.is_assign());
    let mut seen: Vec<Name> = Vec::new();
    for (k, o) in origin.iter().enumerate() {
        let mut reads: Vec<Name> = Vec::new();
        let accumulator = matches!(o.op, crate::ir::Op::Assign(crate::ir::AssignMode::Accumulator));
        let target = o.target().and_then(|x| x.id()).cloned();
        if let Some(y) = o.value() {
            y.visit(&mut |n| {
                if n.is_tensor_leaf()
                    && let Some(id) = n.id()
                    && !(accumulator && Some(id) == target.as_ref())
                {
                    reads.push(id.clone());
                }
            });
        }
        if let Some(r) = reads.iter().find(|r| !seen.contains(r) && defined_only(r)) {
            return Err(Error::Illegal {
                builtin: "around".into(),
                reason: format!(
                    "statement {} (`{o}`) reads `{r}` before any statement of the loop writes it: at the first \
                     iteration it has no value; expected a statement writing `{r}` first, or `{r}` declared with \
                     tensor(...) (then its initial values are read)",
                    k + 1
                ),
            });
        }
        seen.extend(target);
    }
    Ok(())
}
