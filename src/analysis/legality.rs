//! Legality of a transformed nest, decided exactly with isl from the dependences of its
//! untransformed statements (the polyhedral model, as Polly, PPCG and Pluto use it).
//!
//! - **Instances.** Origin statement `k` of a nest (`Nest::origin`) runs the instances
//!   `S<k>[i1, .., in]` that its loops in the untransformed nest (`Nest::program`) describe:
//!   the box of `build` (every range from 0, upper bounds affine in the named constants, which
//!   are isl parameters), or the ranges its user gave (affine bounds in outer iterators,
//!   backward ranges, loops around a sequence).
//! - **Dependences.** Two instances depend when they touch the same element of a tensor, at
//!   least one writes it, in the original order (the untransformed nest's: statement `k`
//!   entirely before `k+1` unless a loop around a sequence interleaves them, each in the
//!   lexicographic order of its loops): flow, anti and output dependences at once. The
//!   updates of one accumulation into one element (`C[i][j] += ...` of a contraction, or a
//!   user's `A = add(A, t, ...)` summing over an iterator) may run in any order: those
//!   dependences of a statement on itself through its target are left out, as a reduction.
//!   (An accumulator's zeroing happens at its first update, which every order the
//!   transformations produce keeps first.)
//!   For the order (not the marks), the `max` updates of one element by different statements
//!   are left out too, and likewise `min`: they commute exactly ([`relaxed_across`]).
//! - **Schedules.** Each statement of the transformed nest carries its [`Instance`]: the
//!   original instance it runs, as expressions in the loops around it. With the loops'
//!   bounds and the statement's position at each level, that gives the new time of every
//!   original instance: `[p0, v1, p1, v2, ..]`.
//! - **Order.** The path is legal if no dependence runs backwards: no pair `a -> b` whose new
//!   time of `a` is not before that of `b`. Otherwise isl gives a pair, the witness.
//! - **Marks.** A loop marked parallel or vector must carry no dependence: no pair that agrees
//!   on the loops outside it and differs on it. Reductions into one element remain, and code
//!   generation realizes them with private accumulators (`analysis/reduction.rs`).
//!
//! The verdict is for every value of the named constants (at least 1), or, where the nest is
//! only legal at some sizes (a strip-mined nest without `min` is only valid where the factor
//! divides), for the values the program binds; it says which.

use super::isl::{Ctx, UMap};
use crate::ir::{Atom, Expr, Instance, LNode, Loop, Name, Nest, State, TExpr, Update, lower};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What the check concluded.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// No dependence is reversed and no mark carries one, for every value of the constants.
    AllSizes,
    /// Legal with the constants the program binds (e.g. `N=8`), not for all.
    TheseSizes(String),
}

/// Why a nest is illegal: a message with a witness.
#[derive(Clone, Debug, PartialEq)]
pub struct Illegal {
    /// E.g. "C[0][3] is written by statement 1 (`B[i][j] = ...`) at (i=0, j=3) and read by ...".
    pub message: String,
}

/// One access of an origin statement.
#[derive(Clone, Debug)]
struct Access {
    tensor: Name,
    index: Vec<Expr>,
    write: bool,
    /// The target of an accumulating update (`+=`): its self-dependences are a reduction.
    accumulates: bool,
    /// An accumulator zeroed at its first update (a contraction's), not an update onto the
    /// values the tensor held (a user's `A = add(A, ..)`).
    zeroed: bool,
    /// The update's operator (`Set` for any access but an accumulating target's).
    update: Update,
}

/// An origin statement, with the loops around it in the untransformed nest.
#[derive(Clone, Debug)]
struct Origin {
    stmt: TExpr,
    iters: Vec<Name>,
    accesses: Vec<Access>,
    /// Its loops in the untransformed nest (outermost first) and its instance there.
    loops: Vec<Arc<Loop>>,
    inst: Instance,
    /// Its position in the untransformed nest's top-level sequence.
    top: usize,
}

/// The origins of `nest`, each with the domain its statement in the untransformed nest has.
fn origins(nest: &Nest) -> Result<(Vec<Origin>, Vec<LNode>), String> {
    if nest.program.is_empty() {
        return Err("the nest has no untransformed program (a state saved by an older teml?): expected a \
                    nest made by `build`; build it again"
            .into());
    }
    let program = nest.program.clone();
    let mut places = Vec::new();
    placed(&program, &mut Vec::new(), &mut Vec::new(), &mut places)?;
    let mut out = Vec::new();
    for (k, o) in nest.origin.iter().enumerate() {
        let p = places.iter().find(|p| p.inst.origin == k).ok_or_else(|| {
            format!(
                "no statement of the nest records the instances of `{o}` (a state saved by an older \
                     teml?): expected a nest made by `build`; build it again"
            )
        })?;
        let (inst, top) = (p.inst.clone(), p.pos[0]);
        let loops = p.loops.iter().map(|l| Arc::new((*l).clone())).collect();
        let lw = lower(o).ok_or("an origin that is not an assignment")?;
        let mut accesses = Vec::new();
        let zeroed = lw.first.is_some();
        let mut push = |leaf: &crate::ir::TNode, write: bool, accumulates: bool| {
            if let Some(t) = leaf.id() {
                let mut index = leaf.index_list().map(|x| x.to_vec()).unwrap_or_default();
                // A tensor with a copy per iteration (`privatize`): the copy's element.
                if let Some(x) = nest.expanded.get(t) {
                    index.insert(0, Expr::var_name(&x.by));
                }
                // A result stored over an operand (`in_place`) is that operand's element.
                let tensor = nest.over.get(t).unwrap_or(t).clone();
                let update = if accumulates { lw.update } else { Update::Set };
                accesses.push(Access { tensor, index, write, accumulates, zeroed, update });
            }
        };
        let acc = lw.update.accumulates();
        push(&lw.target, true, acc);
        if acc {
            // `x += r` reads x too.
            push(&lw.target, false, true);
        }
        lw.rhs.visit(&mut |n| {
            if n.is_tensor_leaf() {
                push(n, false, false);
            }
        });
        out.push(Origin { iters: inst.iters.clone(), stmt: o.clone(), accesses, loops, inst, top });
    }
    Ok((out, program))
}

/// Prints an expression in isl's syntax, naming variables with `name`.
fn isl(e: &Expr, name: &dyn Fn(&str) -> String) -> String {
    let mut s = String::new();
    fn atom(a: &Atom, f: &mut dyn std::fmt::Write, name: &dyn Fn(&str) -> String) -> std::fmt::Result {
        match a {
            Atom::Var(v) => f.write_str(&name(v)),
            Atom::Min(xs) | Atom::Max(xs) => {
                let fname = if matches!(a, Atom::Min(_)) { "min" } else { "max" };
                for x in &xs[..xs.len() - 1] {
                    write!(f, "{fname}(")?;
                    f.write_str(&isl(x, name))?;
                    f.write_str(", ")?;
                }
                f.write_str(&isl(&xs[xs.len() - 1], name))?;
                for _ in 1..xs.len() {
                    f.write_str(")")?;
                }
                Ok(())
            }
            Atom::FloorDiv(x, d) => write!(f, "floor(({})/{d})", isl(x, name)),
        }
    }
    let _ = e.write_with(&mut s, &|a, f| atom(a, f, name));
    format!("({s})")
}

/// `lb <= x <= ub` as isl constraints, a `max` lower bound and a `min` upper bound split into
/// one constraint per argument: written as `min(a, b)`, isl parses a piece per argument (2^k
/// pieces for a bound of k nested `min`s, which a skewed, tiled nest has: seconds to parse and
/// to coalesce), while `x <= a and x <= b` is one conjunction.
fn bounded(lb: &Expr, x: &str, ub: &Expr, name: &dyn Fn(&str) -> String) -> String {
    fn args<'e>(e: &'e Expr, upper: bool, out: &mut Vec<&'e Expr>) {
        match (e.single_atom(), upper) {
            (Some(Atom::Min(xs)), true) | (Some(Atom::Max(xs)), false) => {
                xs.iter().for_each(|x| args(x, upper, out));
            }
            _ => out.push(e),
        }
    }
    let (mut lo, mut hi) = (Vec::new(), Vec::new());
    args(lb, false, &mut lo);
    args(ub, true, &mut hi);
    let mut cons: Vec<String> = lo.iter().map(|e| format!("{} <= {x}", isl(e, name))).collect();
    cons.extend(hi.iter().map(|e| format!("{x} <= {}", isl(e, name))));
    cons.join(" and ")
}

/// Names in isl texts: parameters `p_N`, original dimensions `o_i` (source) and `q_i` (sink),
/// loop variables `v_i`, statements `S<k>`.
struct Names {
    params: BTreeSet<Name>,
}

impl Names {
    fn param_list(&self) -> String {
        let ps: Vec<String> = self.params.iter().map(|p| format!("p_{p}")).collect();
        format!("[{}]", ps.join(", "))
    }

    /// A variable: one of `iters` (with `prefix`), else a parameter.
    fn var<'a>(&'a self, iters: &'a [Name], prefix: &'a str) -> impl Fn(&str) -> String + 'a {
        move |v: &str| {
            if iters.iter().any(|i| &**i == v) { format!("{prefix}{v}") } else { format!("p_{v}") }
        }
    }
}

/// The dependences as a union map `S<a>[o..] -> S<b>[q..]`: with `reductions`, every pair;
/// else the updates of one accumulated element left out, except (with `first`) those from an
/// accumulator's first update, which zeroes the element and must stay first. With `first`
/// (the order, not the marks), the `max` or `min` updates of one element by different
/// statements are left out too (see [`relaxed_across`]).
fn dependences<'c>(
    ctx: &'c Ctx,
    origins: &[Origin],
    names: &Names,
    original: &str,
    reductions: bool,
    first: bool,
) -> Result<UMap<'c>, String> {
    // Where each origin runs entirely before the next (no loop around a sequence interleaves
    // them), a pair runs from the earlier origin to the later one.
    let in_order = origins.windows(2).all(|w| w[0].top < w[1].top);
    let mut pieces = Vec::new();
    for (ka, a) in origins.iter().enumerate() {
        for (kb, b) in origins.iter().enumerate() {
            if kb < ka && in_order {
                continue;
            }
            for x in &a.accesses {
                for y in &b.accesses {
                    if x.tensor != y.tensor || !(x.write || y.write) || x.index.len() != y.index.len() {
                        continue;
                    }
                    let (va, vb) = (names.var(&a.iters, "o_"), names.var(&b.iters, "q_"));
                    let mut cons = vec![domain(a, names, "o_"), domain(b, names, "q_")];
                    for (ix, iy) in x.index.iter().zip(&y.index) {
                        cons.push(format!("{} = {}", isl(ix, &va), isl(iy, &vb)));
                    }
                    let mut piece = |extra: Vec<String>| {
                        pieces.push(format!(
                            "S{ka}[{}] -> S{kb}[{}] : {}",
                            dims(&a.iters, "o_"),
                            dims(&b.iters, "q_"),
                            cons.iter().chain(&extra).cloned().collect::<Vec<_>>().join(" and ")
                        ))
                    };
                    // The `max` (or `min`) updates of one element by two statements, for the
                    // order: either way round.
                    if ka != kb && first && !reductions && relaxed_across(x, y) {
                        continue;
                    }
                    // The updates of one reduction into one element: any order. One reduction
                    // is one value of the iterators it does not sum over (a loop around a
                    // sequence runs the statement's sum again: those pairs are dependences),
                    // and an accumulator zeroed at its first update (its reduction coordinates
                    // at 0) keeps that update first (a reversal or a skew could move it).
                    if ka == kb && x.accumulates && y.accumulates && !reductions {
                        let split = |red: bool| -> Vec<&Name> {
                            a.iters
                                .iter()
                                .zip(&a.inst.reduction)
                                .filter(|(_, r)| **r == red)
                                .map(|(i, _)| i)
                                .collect()
                        };
                        let apart: Vec<String> = split(false)
                            .iter()
                            .map(|i| format!("({0} < {1} or {0} > {1})", va(i), vb(i)))
                            .collect();
                        if !apart.is_empty() {
                            piece(vec![format!("({})", apart.join(" or "))]);
                        }
                        let zeroes: Vec<String> =
                            split(true).iter().map(|i| format!("{} = 0", va(i))).collect();
                        if first && x.zeroed && y.zeroed && !zeroes.is_empty() {
                            piece(zeroes);
                        }
                        continue;
                    }
                    piece(Vec::new());
                }
            }
        }
    }
    let all = ctx.map(&format!("{} -> {{ {} }}", names.param_list(), pieces.join("; ")))?;
    // Keep the pairs in the original order.
    let sched = ctx.map(original)?;
    all.and(sched.clone().lex_lt(sched)?)?.coalesce()
}

/// The updates of one element by different statements with the same `max` (or `min`), none a
/// zeroing accumulator's: `x = max(x, a)` then `x = max(x, b)` leaves the same `x` in either
/// order, exactly (no rounding), so the order check leaves their pairs out, as Pluto and Polly
/// relax a reduction. Every other access keeps its dependences: a read of the element (a
/// statement's operand, not its own accumulator) still comes after every update before it and
/// before every update after it, so the updates between two reads stay between them. The
/// marks keep these pairs: a parallel or vector loop realizes only a statement's own
/// reduction with private accumulators (`analysis/reduction.rs`). This lets nussinov's four
/// `max` updates of `table[i][j]` run in another order (`sink`, then `interchange`).
fn relaxed_across(x: &Access, y: &Access) -> bool {
    x.accumulates
        && y.accumulates
        && x.update == y.update
        && matches!(x.update, Update::Max | Update::Min)
        && !x.zeroed
        && !y.zeroed
}

fn dims(iters: &[Name], prefix: &str) -> String {
    iters.iter().map(|i| format!("{prefix}{i}")).collect::<Vec<_>>().join(", ")
}

/// The instances of origin `o` (its iterators named with `prefix`), as isl constraints: the
/// ranges of its loops in the untransformed nest, read through its instance there. A loop per
/// iterator, in order, with the iterator's own name (what `build` makes, backward ranges
/// aside) is written directly; other forms through the loops' variables.
fn domain(o: &Origin, names: &Names, prefix: &str) -> String {
    let var = names.var(&o.iters, prefix);
    let direct = o.loops.len() == o.iters.len()
        && o.inst.guard.is_empty()
        && o.loops
            .iter()
            .zip(&o.iters)
            .zip(&o.inst.at)
            .all(|((l, i), at)| l.iter == *i && l.step == 1 && at.as_var() == Some(i));
    if direct {
        if o.iters.is_empty() {
            return "true".into();
        }
        return o
            .loops
            .iter()
            .map(|l| bounded(&l.lb, &var(&l.iter), &l.ub, &var))
            .collect::<Vec<_>>()
            .join(" and ");
    }
    let wp = format!("{prefix}w_");
    let iters: Vec<Name> = o.loops.iter().map(|l| l.iter.clone()).collect();
    let w = names.var(&iters, &wp);
    let mut cons = Vec::new();
    for l in &o.loops {
        cons.push(bounded(&l.lb, &format!("{wp}{}", l.iter), &l.ub, &w));
        if l.step > 1 {
            cons.push(format!("exists (e : {wp}{} = {} + {}*e)", l.iter, isl(&l.lb, &w), l.step));
        }
    }
    for (i, at) in o.iters.iter().zip(&o.inst.at) {
        cons.push(format!("{} = {}", var(i), isl(at, &w)));
    }
    for g in &o.inst.guard {
        cons.push(format!("{} >= 0", isl(g, &w)));
    }
    if cons.is_empty() {
        return "true".into();
    }
    if iters.is_empty() {
        return cons.join(" and ");
    }
    format!("exists ({} : {})", dims(&iters, &wp), cons.join(" and "))
}

/// One statement of the transformed nest: its instance, the loops around it (outermost
/// first) and its position among its siblings at each level (`pos[0]` at the top).
struct Placed<'a> {
    inst: &'a Instance,
    loops: Vec<&'a Loop>,
    pos: Vec<usize>,
}

fn placed<'a>(
    items: &'a [LNode],
    loops: &mut Vec<&'a Loop>,
    pos: &mut Vec<usize>,
    out: &mut Vec<Placed<'a>>,
) -> Result<(), String> {
    for (k, x) in items.iter().enumerate() {
        pos.push(k);
        match x {
            LNode::Stmt(s) => {
                let inst =
                    s.inst.as_deref().ok_or_else(|| format!("the statement `{s}` has no instances"))?;
                out.push(Placed { inst, loops: loops.clone(), pos: pos.clone() });
            }
            LNode::Loop(l) => {
                loops.push(l);
                placed(&l.body, loops, pos, out)?;
                loops.pop();
            }
        }
        pos.pop();
    }
    Ok(())
}

/// The new time of each original instance, truncated to the first `upto` dimensions and
/// restricted to the statements `keep` selects (`Some(upto)`); padded to `width`. (The marks
/// compare full times on a prefix rather than truncated times: projecting loop variables out
/// is what isl does slowest.)
fn new_schedule(
    placed: &[Placed<'_>],
    origins: &[Origin],
    names: &Names,
    width: usize,
    keep: &dyn Fn(&Placed<'_>) -> Option<usize>,
) -> String {
    let mut pieces = Vec::new();
    for p in placed {
        let Some(upto) = keep(p) else { continue };
        let Some(o) = origins.get(p.inst.origin) else { continue };
        let loop_iters: Vec<Name> = p.loops.iter().map(|l| l.iter.clone()).collect();
        let v = names.var(&loop_iters, "v_");
        let mut time: Vec<String> = vec![p.pos[0].to_string()];
        let mut cons: Vec<String> = Vec::new();
        for (d, l) in p.loops.iter().enumerate() {
            time.push(format!("v_{}", l.iter));
            time.push(p.pos[d + 1].to_string());
            cons.push(bounded(&l.lb, &format!("v_{}", l.iter), &l.ub, &v));
            if l.step > 1 {
                cons.push(format!(
                    "exists (e_{0} : v_{0} = {1} + {2}*e_{0})",
                    l.iter,
                    isl(&l.lb, &v),
                    l.step
                ));
            }
        }
        for (i, at) in o.iters.iter().zip(&p.inst.at) {
            cons.push(format!("o_{i} = {}", isl(at, &v)));
        }
        for g in &p.inst.guard {
            cons.push(format!("{} >= 0", isl(g, &v)));
        }
        time.truncate(upto);
        // Loop variables dropped by the truncation stay existential.
        let kept: BTreeSet<String> = time.iter().cloned().collect();
        let hidden: Vec<String> =
            p.loops.iter().map(|l| format!("v_{}", l.iter)).filter(|x| !kept.contains(x)).collect();
        time.resize(width, "0".into());
        let body = if cons.is_empty() { "true".to_string() } else { cons.join(" and ") };
        let body = if hidden.is_empty() { body } else { format!("exists ({} : {body})", hidden.join(", ")) };
        pieces.push(format!(
            "S{}[{}] -> [{}] : {body}",
            p.inst.origin,
            dims(&o.iters, "o_"),
            time.join(", ")
        ));
    }
    format!("{} -> {{ {} }}", names.param_list(), pieces.join("; "))
}

/// Checks the order of `nest` and its marks against the dependences of its origins, for every
/// size first, then at the program's sizes; and that it runs exactly the original instances.
pub fn check(state: &State, nest: &Nest) -> Result<Result<Verdict, Illegal>, String> {
    analyze(state, nest, true)
}

/// [`check`] at the program's sizes only (the named constants fixed from the start, which is
/// faster): what every transformation builtin asks before it returns: the order, the marks,
/// and that the nest runs exactly the original instances at those sizes.
pub fn check_here(state: &State, nest: &Nest) -> Result<Result<(), Illegal>, String> {
    Ok(analyze(state, nest, false)?.map(|_| ()))
}

/// A nest read for the analysis, once: its origins, the names of the isl texts, its placed
/// statements, and the parameter sets (every size, the program's sizes).
struct Model<'n> {
    origins: Vec<Origin>,
    names: Names,
    places: Vec<Placed<'n>>,
    /// The original schedule (the untransformed nest's times), as isl text.
    original: String,
    /// Dimensions of the new times.
    width: usize,
    /// `[params] -> { : every constant >= 1 }`.
    all_sizes: String,
    /// `[params] -> { : the constants the program binds }`.
    these: String,
    /// Those constants in words, e.g. `N=8`.
    sizes: String,
}

impl<'n> Model<'n> {
    fn new(state: &State, nest: &'n Nest) -> Result<Model<'n>, String> {
        let (origins, program) = origins(nest)?;
        // Parameters: the named constants, and whatever else the loops' bounds, the accesses
        // and the guards mention that no loop binds (the free iterator of a nest that will go
        // inside `around`, e.g. cholesky's `i` in `A[i][j]`).
        let mut params: BTreeSet<Name> = state.consts.keys().cloned().collect();
        let mut iters: BTreeSet<Name> = BTreeSet::new();
        let mut mentioned: BTreeSet<Name> = BTreeSet::new();
        for items in [&program[..], &nest.items[..]] {
            for (_, l) in loops_where(items, &|_| true) {
                iters.insert(l.iter.clone());
                mentioned.extend(l.lb.vars());
                mentioned.extend(l.ub.vars());
            }
            for st in items.iter().flat_map(|x| x.stmts()) {
                st.visit(&mut |n| {
                    for x in n.index_list().unwrap_or(&[]) {
                        mentioned.extend(x.vars());
                    }
                });
                for g in st.guard() {
                    mentioned.extend(g.vars());
                }
            }
        }
        params.extend(mentioned.into_iter().filter(|v| !iters.contains(v)));
        let names = Names { params };
        let mut places = Vec::new();
        placed(&nest.items, &mut Vec::new(), &mut Vec::new(), &mut places)?;
        let mut before = Vec::new();
        placed(&program, &mut Vec::new(), &mut Vec::new(), &mut before)?;
        let w0 = 2 * before.iter().map(|p| p.loops.len()).max().unwrap_or(0) + 1;
        let original = new_schedule(&before, &origins, &names, w0, &|_| Some(w0));
        let width = 2 * places.iter().map(|p| p.loops.len()).max().unwrap_or(0) + 1;
        let set = |conds: Vec<String>| {
            let c = if conds.is_empty() { "true".to_string() } else { conds.join(" and ") };
            format!("{} -> {{ : {c} }}", names.param_list())
        };
        let all_sizes = set(names.params.iter().map(|p| format!("p_{p} >= 1")).collect());
        let bound: Vec<(&Name, i64)> =
            names.params.iter().filter_map(|p| state.constant(p).map(|v| (p, v))).collect();
        let these = set(bound.iter().map(|(p, v)| format!("p_{p} = {v}")).collect());
        let sizes = bound.iter().map(|(p, v)| format!("{p}={v}")).collect::<Vec<_>>().join(", ");
        Ok(Model { origins, names, places, original, width, all_sizes, these, sizes })
    }

    /// The new times of the statements under loop `l` (at depth `d`) up to `l`, and the
    /// dependences of `deps` that `l` carries, as pairs of such times.
    fn carried<'c>(
        &self,
        ctx: &'c Ctx,
        deps: &UMap<'c>,
        d: usize,
        l: &Loop,
    ) -> Result<(UMap<'c>, UMap<'c>), String> {
        let under = |p: &Placed<'_>| p.loops.get(d).is_some_and(|x| std::ptr::eq(*x, l));
        let (o, n, w) = (&self.origins, &self.names, self.width);
        let at =
            ctx.map(&new_schedule(&self.places, o, n, w, &|p| under(p).then_some(2 * d + 2)))?.coalesce()?;
        let times = at.clone().reverse()?.then(deps.clone())?.then(at.clone())?;
        let carried = times.and(ctx.map(&time_relation(n, w, 2 * d + 1, Rel::SamePrefixThenDiffer))?)?;
        Ok((at, carried))
    }
}

impl Model<'_> {
    /// `S<k>[iters] -> M[element]` for the accesses of `tensor` that `pick` selects, where the
    /// parameters satisfy `params`.
    fn accesses<'c>(
        &self,
        ctx: &'c Ctx,
        tensor: &Name,
        pick: &dyn Fn(&Access) -> bool,
        params: &str,
    ) -> Result<UMap<'c>, String> {
        let (o, n) = (&self.origins, &self.names);
        let mut pieces = Vec::new();
        for (k, org) in o.iter().enumerate() {
            let v = n.var(&org.iters, "o_");
            for x in org.accesses.iter().filter(|x| x.tensor == *tensor && pick(x)) {
                let idx: Vec<String> = x.index.iter().map(|i| isl(i, &v)).collect();
                pieces.push(format!(
                    "S{k}[{}] -> M[{}] : {}",
                    dims(&org.iters, "o_"),
                    idx.join(", "),
                    domain(org, n, "o_")
                ));
            }
        }
        ctx.map(&format!("{} -> {{ {} }}", n.param_list(), pieces.join("; ")))?.with_params(params)
    }

    /// Statement `k` at the point `vals` (with `params`), in words: "statement 2 (`..`) at (i=0, k=1)".
    fn instance_words(&self, t: Option<&Tuple>) -> String {
        let Some((k, vals)) = t else { return "?".into() };
        let Some(org) = self.origins.get(*k) else { return "?".into() };
        let at: Vec<String> = org.iters.iter().zip(vals).map(|(i, v)| format!("{i}={v}")).collect();
        format!("statement {} (`{}`) at ({})", k + 1, org.stmt, at.join(", "))
    }

    /// Why storing `tensor` per iteration of loop `l` (at depth `d`) would change the nest's
    /// meaning where the parameters satisfy `params`, in words with a witness: a read whose
    /// value was not written earlier in its iteration, or two updates of one accumulated
    /// element in different iterations. `None` where there is none.
    /// With `at = None`, the whole kernel is the one iteration: a read of a value from before
    /// the kernel escapes.
    fn escapes(
        &self,
        ctx: &Ctx,
        at: Option<(usize, &Loop)>,
        tensor: &Name,
        params: &str,
    ) -> Result<Option<String>, String> {
        let under =
            |p: &Placed<'_>| at.is_none_or(|(d, l)| p.loops.get(d).is_some_and(|x| std::ptr::eq(*x, l)));
        let (o, n, w) = (&self.origins, &self.names, self.width);
        let theta = ctx.map(&new_schedule(&self.places, o, n, w, &|p| under(p).then_some(w)))?.coalesce()?;
        let prefix = ctx
            .map(&new_schedule(&self.places, o, n, w, &|p| {
                under(p).then_some(at.map_or(0, |(d, _)| 2 * d + 2))
            }))?
            .coalesce()?;
        // b -> a: a runs before b, in the same iteration.
        let same = prefix.clone().then(prefix.reverse()?)?;
        let earlier_here = theta.clone().lex_lt(theta)?.reverse()?.and(same.clone())?;
        let iteration = at
            .map_or_else(|| "the kernel".to_string(), |(_, l)| format!("an iteration of loop `{}`", l.iter));
        let access_map = |pick: &dyn Fn(&Access) -> bool| self.accesses(ctx, tensor, pick, params);
        let writes = access_map(&|x| x.write)?;
        let instances = ctx.map(&domain_map(o, n))?;
        let sizes = |text: &str| {
            let (ps, _, _) = point(text);
            let s: Vec<String> = ps.iter().map(|(p, v)| format!("{p}={v}")).collect();
            if s.is_empty() { String::new() } else { format!(" ({})", s.join(", ")) }
        };
        // Each read (an accumulator's read of its own target excepted: its first update reads
        // the zero written just before it; an update onto the values a tensor held is a read
        // like any other), on its own, for a precise witness.
        for (k, org) in o.iter().enumerate() {
            for (ax, x) in org.accesses.iter().enumerate() {
                if x.tensor != *tensor || x.write || (x.accumulates && x.zeroed) {
                    continue;
                }
                let read = access_map(&|y| std::ptr::eq(y, &org.accesses[ax]))?;
                let covered = read.clone().then(writes.clone().reverse()?)?.and(earlier_here.clone())?;
                let reads = read.then(ctx.map(&format!(
                    "{} -> {{ M[{}] -> [] }}",
                    n.param_list(),
                    (0..x.index.len()).map(|j| format!("m{j}")).collect::<Vec<_>>().join(", ")
                ))?)?;
                let open = reads.minus(covered.then(instances.clone())?)?;
                if let Some(sample) = open.coalesce()?.sample()? {
                    let (params, a, _) = point(&sample);
                    let Some((_, vals)) = a else {
                        return Ok(Some(format!("a read of `{tensor}` escapes: {sample}")));
                    };
                    let element = element_at(org, x, &vals, &params);
                    let at: Vec<String> =
                        org.iters.iter().zip(&vals).map(|(i, v)| format!("{i}={v}")).collect();
                    return Ok(Some(format!(
                        "{tensor}{element} is read by statement {} (`{}`) at ({}) in {iteration} that does \
                         not write it first: its value comes from another iteration or from before the \
                         kernel, which a buffer per iteration does not keep{}",
                        k + 1,
                        org.stmt,
                        at.join(", "),
                        sizes(&sample)
                    )));
                }
            }
        }
        // The updates of one accumulated element, in one iteration.
        let sums = access_map(&|x| x.write && x.accumulates && x.zeroed)?;
        let split = sums.clone().then(sums.reverse()?)?.minus(same)?;
        if let Some(sample) = split.coalesce()?.sample()? {
            let (_, a, b) = point(&sample);
            let inst = |t: Option<Tuple>| self.instance_words(t.as_ref());
            return Ok(Some(format!(
                "one element of `{tensor}` is summed by {} and by {}, not both in {iteration}: a buffer per \
                 iteration would lose the partial sum{}",
                inst(a),
                inst(b),
                sizes(&sample)
            )));
        }
        Ok(None)
    }
}

/// A verdict, remembered per process: a search evaluates its space once per candidate, and
/// asks the same questions (the legal permutations of the same nest) every time.
type Answer = Result<Result<Verdict, Illegal>, String>;

/// Verdicts remembered at most (then forgotten all at once).
const MEMO_SIZE: usize = 8192;

fn memo() -> &'static std::sync::Mutex<std::collections::HashMap<u64, Answer>> {
    static MEMO: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<u64, Answer>>> =
        std::sync::OnceLock::new();
    MEMO.get_or_init(Default::default)
}

/// [`carries`] answers, remembered like verdicts.
fn carried_memo() -> &'static std::sync::Mutex<std::collections::HashMap<u64, bool>> {
    static MEMO: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<u64, bool>>> =
        std::sync::OnceLock::new();
    MEMO.get_or_init(Default::default)
}

/// What a verdict depends on: the nest (its loops and statements, not its history), the
/// named constants, and whether every size is asked.
fn memo_key(state: &State, nest: &Nest, full: bool) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(nest).ok()?.hash(&mut h);
    state.consts.hash(&mut h);
    full.hash(&mut h);
    Some(h.finish())
}

fn analyze(state: &State, nest: &Nest, full: bool) -> Answer {
    let key = memo_key(state, nest, full);
    if let Some(k) = key
        && let Some(a) = memo().lock().ok().and_then(|m| m.get(&k).cloned())
    {
        return a;
    }
    let a = analyze_now(state, nest, full);
    if let Some(k) = key
        && let Ok(mut m) = memo().lock()
    {
        if m.len() >= MEMO_SIZE {
            m.clear();
        }
        m.insert(k, a.clone());
    }
    a
}

fn analyze_now(state: &State, nest: &Nest, full: bool) -> Answer {
    let m = Model::new(state, nest)?;
    let (origins, names, width) = (&m.origins, &m.names, m.width);
    let ctx = Ctx::new()?;
    let deps = dependences(&ctx, origins, names, &m.original, false, false)?;
    // The order also keeps each accumulator's first update first (the marks realize a
    // reduction with private accumulators, zeroed apart).
    let ordered = dependences(&ctx, origins, names, &m.original, false, true)?;
    let mut verdict = Verdict::AllSizes;
    // At the program's sizes only: fix them before anything is composed.
    let (deps, ordered, all_sizes) = if full {
        (deps, ordered, m.all_sizes.clone())
    } else {
        (deps.with_params(&m.these)?, ordered.with_params(&m.these)?, m.these.clone())
    };

    // Order: no dependence reversed. The dependences are carried over to times
    // (`T^-1 . D . T`, few pieces) and compared there, rather than comparing every pair of
    // schedule pieces.
    let theta = ctx.map(&new_schedule(&m.places, origins, names, width, &|_| Some(width)))?.coalesce()?;
    let times = theta.clone().reverse()?.then(ordered.clone())?.then(theta.clone())?;
    let backwards = times.and(ctx.map(&time_relation(names, width, width, Rel::NotBefore))?)?;
    if !backwards.clone().with_params(&all_sizes)?.is_empty()? {
        let at_these = backwards.with_params(&m.these)?;
        if at_these.is_empty()? {
            verdict = Verdict::TheseSizes(m.sizes.clone());
        } else {
            let pairs = ordered.clone().and(theta.clone().then(at_these)?.then(theta.clone().reverse()?)?)?;
            let w = pairs.with_params(&m.these)?.coalesce()?.sample()?.unwrap_or_default();
            return Ok(Err(Illegal { message: witness(&w, origins, state, None) }));
        }
    }

    // Coverage: exactly the original instances run (at other sizes, a nest strip-mined
    // without `min`, or unrolled, misses some or runs others: it is legal only at these sizes).
    // The gate every builtin runs asks it too, at the program's sizes.
    {
        let unit = format!(
            "{} -> {{ [{}] -> [] }}",
            names.param_list(),
            (0..width).map(|k| format!("a{k}")).collect::<Vec<_>>().join(", ")
        );
        let ran = theta.clone().then(ctx.map(&unit)?)?;
        let domain = ctx.map(&domain_map(origins, names))?;
        let missing = domain.clone().minus(ran.clone())?;
        let extra = ran.minus(domain)?;
        let off = missing.or(extra)?;
        if !off.clone().with_params(&all_sizes)?.is_empty()? {
            match off.with_params(&m.these)?.coalesce()?.sample()? {
                None => verdict = Verdict::TheseSizes(m.sizes.clone()),
                Some(w) => {
                    return Ok(Err(Illegal {
                        message: format!(
                            "the transformed nest does not run exactly the original instances: {w}"
                        ),
                    }));
                }
            }
        }
    }

    // Marks: no dependence carried by a marked loop.
    for (d, l) in marked_loops(&nest.items) {
        let (at, carried) = m.carried(&ctx, &deps, d, l)?;
        if carried.clone().with_params(&all_sizes)?.is_empty()? {
            continue;
        }
        let at_these = carried.with_params(&m.these)?;
        if at_these.is_empty()? {
            verdict = Verdict::TheseSizes(m.sizes.clone());
            continue;
        }
        let what = match (l.annot.parallel, l.annot.vectorize) {
            (true, true) => "parallelized and vectorized",
            (true, false) => "parallelized",
            _ => "vectorized",
        };
        let pairs = deps.clone().and(at.clone().then(at_these)?.then(at.reverse()?)?)?;
        let w = pairs.with_params(&m.these)?.coalesce()?.sample()?.unwrap_or_default();
        let how = format!("loop `{}` is {what} and runs the two in different iterations", l.iter);
        return Ok(Err(Illegal { message: witness(&w, origins, state, Some(&how)) }));
    }

    // In place: each result stored over an operand overwrites only values already read (in the
    // original order; the order above keeps every such read first).
    for y in nest.over.keys() {
        let mut apart = nest.clone();
        let Some(x) = apart.over.remove(y) else { continue };
        if let Err(i) = stays_in_place(state, &apart, y, &x)? {
            return Ok(Err(i));
        }
    }

    // Storage: a tensor stored per iteration of a loop is read only where that iteration wrote it.
    for (d, l) in loops_where(&nest.items, &|l| !l.annot.store_at.is_empty()) {
        for t in &l.annot.store_at {
            match m.escapes(&ctx, Some((d, l)), t, &all_sizes)? {
                None => continue,
                Some(_) if m.escapes(&ctx, Some((d, l)), t, &m.these)?.is_none() => {
                    verdict = Verdict::TheseSizes(m.sizes.clone());
                }
                Some(_) => {
                    let w = m.escapes(&ctx, Some((d, l)), t, &m.these)?.unwrap_or_default();
                    return Ok(Err(Illegal { message: w }));
                }
            }
        }
    }
    Ok(Ok(verdict))
}

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
    let Some(d) = m.places.iter().find_map(|p| p.loops.iter().position(|x| std::ptr::eq(*x, l))) else {
        return Ok(Ok(()));
    };
    let ctx = Ctx::new()?;
    Ok(match m.escapes(&ctx, Some((d, l)), tensor, &m.these)? {
        None => Ok(()),
        Some(message) => Err(Illegal { message }),
    })
}

/// Whether every value of `tensor` that `nest` reads was written before by the nest itself
/// (none comes from before the kernel), decided on the untransformed program: a legal path
/// keeps every read's source, so where this fails, no loop of any path of `nest` can store
/// `tensor` per iteration ([`stays_local`]), and storage contraction need not ask loop by
/// loop (on a time-tiled stencil each of those questions takes isl seconds).
pub fn written_before_read(state: &State, nest: &Nest, tensor: &Name) -> Result<Result<(), Illegal>, String> {
    let program = Nest::new(nest.program.clone(), nest.origin.clone());
    let m = Model::new(state, &program)?;
    let ctx = Ctx::new()?;
    Ok(match m.escapes(&ctx, None, tensor, &m.these)? {
        None => Ok(()),
        Some(message) => Err(Illegal { message }),
    })
}

/// The element access `a` of statement `org` touches at the iterator values `vals` (with the
/// parameters' values `params`), e.g. "[0][3]".
fn element_at(org: &Origin, a: &Access, vals: &[i64], params: &[(String, i64)]) -> String {
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

/// Whether the result `y` of `nest` may be stored over its operand `x` (`in_place`, seed 000):
/// in the original order, no element of `x` is read after the element of `y` over it was
/// written (a read and the write of one instance are in order: the value is read first), and
/// `y` is never read before it is written (it would read `x`). With `y == x`, whether the
/// statement `x = e(x)` may run in place: its old values are read before they are overwritten
/// (the updates of `x += r` excepted: they read what they add to). Decided at the program's
/// sizes; `Err(Illegal)` with a witness otherwise.
pub fn stays_in_place(state: &State, nest: &Nest, y: &Name, x: &Name) -> Result<Result<(), Illegal>, String> {
    let m = Model::new(state, nest)?;
    let ctx = Ctx::new()?;
    let orig = ctx.map(&m.original)?.with_params(&m.these)?;
    // s -> t: t runs before s in the original order.
    let before = orig.clone().lex_lt(orig)?.reverse()?;
    let writes = m.accesses(&ctx, y, &|a| a.write, &m.these)?;
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
            let read = m.accesses(&ctx, &a.tensor, &|b| std::ptr::eq(b, a), &m.these)?;
            let earlier_writes = read.then(writes.clone().reverse()?)?.and(before.clone())?;
            if is(x) {
                // A write of `y` over the element before this read of `x`.
                if let Some(sample) = earlier_writes.coalesce()?.sample()? {
                    let (params, s, t) = point(&sample);
                    let el = s.as_ref().map_or("[?]".into(), |(_, v)| element(org, a, v, &params));
                    let (read, wrote) = (m.instance_words(s.as_ref()), m.instance_words(t.as_ref()));
                    let message = if y == x {
                        format!(
                            "{x}{el} is read by {read} after {wrote} overwrote it: in place, a new value \
                             would be read where the old one is meant (not a compatible statement, seed 000)"
                        )
                    } else {
                        format!(
                            "{x}{el} is read by {read} after {wrote} wrote {y}{el}: stored over `{x}`, `{y}` \
                             would overwrite a value still to be read (not a compatible statement, seed 000)"
                        )
                    };
                    return Ok(Err(Illegal { message }));
                }
            } else {
                // A read of `y` with no write of its element before: over `x`, it would read `x`.
                let unit = ctx.map(&format!(
                    "{} -> {{ M[{}] -> [] }}",
                    m.names.param_list(),
                    (0..a.index.len()).map(|j| format!("m{j}")).collect::<Vec<_>>().join(", ")
                ))?;
                let reads = m.accesses(&ctx, &a.tensor, &|b| std::ptr::eq(b, a), &m.these)?.then(unit)?;
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

fn carries_with(state: &State, nest: &Nest, target: &Loop, reductions: bool) -> Result<bool, String> {
    let m = Model::new(state, nest)?;
    let Some((at, d)) = m
        .places
        .iter()
        .enumerate()
        .find_map(|(k, p)| p.loops.iter().position(|l| std::ptr::eq(*l, target)).map(|d| (k, d)))
    else {
        return Ok(false); // a loop with no statement
    };
    // Remembered like verdicts: code generation asks again for every candidate of a search.
    let key = memo_key(state, nest, false).map(|k| {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (k, "carries", at, d, reductions).hash(&mut h);
        h.finish()
    });
    if let Some(k) = key
        && let Some(c) = carried_memo().lock().ok().and_then(|m| m.get(&k).copied())
    {
        return Ok(c);
    }
    let ctx = Ctx::new()?;
    // At the program's sizes: fixed before anything is composed.
    let deps =
        dependences(&ctx, &m.origins, &m.names, &m.original, reductions, false)?.with_params(&m.these)?;
    let carried = !m.carried(&ctx, &deps, d, target)?.1.is_empty()?;
    if let Some(k) = key
        && let Ok(mut memo) = carried_memo().lock()
    {
        if memo.len() >= MEMO_SIZE {
            memo.clear();
        }
        memo.insert(k, carried);
    }
    Ok(carried)
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
    let ctx = Ctx::new()?;
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
                let ext = extent.eval(&|n| env.get(n).copied()).map_or(extent.to_string(), |e| e.to_string());
                let sizes: Vec<String> = ps.iter().map(|(p, v)| format!("{p}={v}")).collect();
                let sizes = if sizes.is_empty() { String::new() } else { format!(" ({})", sizes.join(", ")) };
                return Ok(Some(format!(
                    "`{}` at ({}) in `{s}` is at index {value} of a dimension of extent {ext}{sizes}",
                    leaf.access(),
                    at.join(", "),
                )));
            }
        }
    }
    Ok(None)
}

/// True if no point of the loops `outer` (outermost first) satisfies every `c >= 0` of `conds`,
/// whatever values the named constants take (at least 1); `None` where isl cannot answer.
/// Steps are ignored (a superset of the points), so `Some(true)` is never wrong.
pub fn never(outer: &[&Loop], conds: &[Expr]) -> Option<bool> {
    empty_within(outer, conds, true)
}

/// [`never`] for every value of the variables the loops do not bind, of any sign (the
/// iterators of loops around a focused sub-tree are among them, and may be 0 or negative).
pub fn never_for_any(outer: &[&Loop], conds: &[Expr]) -> Option<bool> {
    empty_within(outer, conds, false)
}

/// True if no point of the loops `outer` satisfies every `c >= 0` of `conds`, for every value
/// of the named constants (at least 1 where `positive`); `None` where isl cannot answer.
fn empty_within(outer: &[&Loop], conds: &[Expr], positive: bool) -> Option<bool> {
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
    let ctx = Ctx::new().ok()?;
    ctx.map(&text).ok()?.is_empty().ok()
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

fn tidy_bounds_with(outer: &[&Loop], l: &Loop, positive: bool) -> Loop {
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

/// Relations between two times of `width` dimensions.
enum Rel {
    /// The first is not before the second (lexicographically `>=`).
    NotBefore,
    /// Equal on the first `n` dimensions, different on the next (a loop carries the pair).
    SamePrefixThenDiffer,
}

/// `{ [a0, ..] -> [b0, ..] : .. }` for `rel`; `n` is the prefix length of
/// [`Rel::SamePrefixThenDiffer`].
fn time_relation(names: &Names, width: usize, n: usize, rel: Rel) -> String {
    let a: Vec<String> = (0..width).map(|k| format!("a{k}")).collect();
    let b: Vec<String> = (0..width).map(|k| format!("b{k}")).collect();
    let eq = |upto: usize| -> Vec<String> { (0..upto).map(|k| format!("a{k} = b{k}")).collect() };
    let cond = match rel {
        Rel::NotBefore => {
            let mut cases: Vec<String> = (0..width)
                .map(|k| {
                    let mut c = eq(k);
                    c.push(format!("a{k} > b{k}"));
                    format!("({})", c.join(" and "))
                })
                .collect();
            cases.push(format!("({})", eq(width).join(" and ")));
            cases.join(" or ")
        }
        Rel::SamePrefixThenDiffer => {
            let mut c = eq(n);
            c.push(format!("(a{n} < b{n} or a{n} > b{n})"));
            c.join(" and ")
        }
    };
    format!("{} -> {{ [{}] -> [{}] : {cond} }}", names.param_list(), a.join(", "), b.join(", "))
}

/// `{ S<k>[o] -> [] : o in the domain }` for every origin: the domain, as a map.
fn domain_map(origins: &[Origin], names: &Names) -> String {
    let pieces: Vec<String> = origins
        .iter()
        .enumerate()
        .map(|(k, o)| format!("S{k}[{}] -> [] : {}", dims(&o.iters, "o_"), domain(o, names, "o_")))
        .collect();
    format!("{} -> {{ {} }}", names.param_list(), pieces.join("; "))
}

/// Loops marked parallel or vector, with their depth (0 for the outermost).
fn marked_loops(items: &[LNode]) -> Vec<(usize, &Loop)> {
    loops_where(items, &|l| l.annot.parallel || l.annot.vectorize)
}

/// The loops that `pick` selects, with their depth (0 for the outermost).
fn loops_where<'a>(items: &'a [LNode], pick: &dyn Fn(&Loop) -> bool) -> Vec<(usize, &'a Loop)> {
    fn go<'a>(items: &'a [LNode], d: usize, pick: &dyn Fn(&Loop) -> bool, out: &mut Vec<(usize, &'a Loop)>) {
        for x in items {
            if let LNode::Loop(l) = x {
                if pick(l) {
                    out.push((d, l));
                }
                go(&l.body, d + 1, pick, out);
            }
        }
    }
    let mut out = Vec::new();
    go(items, 0, pick, &mut out);
    out
}

/// A statement instance read off a point: the origin index and the iterator values.
type Tuple = (usize, Vec<i64>);

/// Values read off isl's printing of one point, e.g.
/// `[p_N] -> { S0[o_i] -> S1[q_i] : p_N = 4 and o_i = 2 and q_i = 1 }` or `{ S0[2] -> S1[1] }`.
fn point(text: &str) -> (Vec<(String, i64)>, Option<Tuple>, Option<Tuple>) {
    let body = text.split_once('{').map_or(text, |(_, b)| b).trim_end_matches('}').trim();
    let (tuples, cons) = body.split_once(':').unwrap_or((body, ""));
    let mut vals: BTreeMap<String, i64> = BTreeMap::new();
    for c in cons.split(" and ") {
        if let Some((n, v)) = c.split_once('=')
            && let Ok(v) = v.trim().parse::<i64>()
        {
            vals.insert(n.trim().to_string(), v);
        }
    }
    let tuple = |t: &str| -> Option<(usize, Vec<i64>)> {
        let t = t.trim();
        let (head, rest) = t.split_once('[')?;
        let k: usize = head.trim().strip_prefix('S')?.parse().ok()?;
        let inner = rest.trim_end_matches(']');
        let mut out = Vec::new();
        for d in inner.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            let v = match d.split_once('=') {
                Some((_, v)) => v.trim().parse().ok()?,
                None => match d.parse::<i64>() {
                    Ok(v) => v,
                    Err(_) => *vals.get(d)?,
                },
            };
            out.push(v);
        }
        Some((k, out))
    };
    let (a, b) = tuples.split_once("->").unwrap_or((tuples, ""));
    let params =
        vals.iter().filter(|(n, _)| n.starts_with("p_")).map(|(n, v)| (n[2..].to_string(), *v)).collect();
    (params, tuple(a), tuple(b))
}

/// "B[1][0] is written by statement 1 (`..`) at (i=1, j=0) and read by statement 2 (`..`) at
/// (i=0, j=1); the transformed nest reads it before it is written (N=6)", or, for a mark,
/// `mark` says how the loop would break the pair.
fn witness(sample: &str, origins: &[Origin], state: &State, mark: Option<&str>) -> String {
    let (params, a, b) = point(sample);
    let (Some((ka, va)), Some((kb, vb))) = (a, b) else {
        return format!("a dependence would be reversed: {sample}");
    };
    let (Some(oa), Some(ob)) = (origins.get(ka), origins.get(kb)) else {
        return format!("a dependence would be reversed: {sample}");
    };
    let env = |o: &Origin, vals: &[i64]| -> BTreeMap<String, i64> {
        let mut m: BTreeMap<String, i64> =
            o.iters.iter().map(|i| i.to_string()).zip(vals.iter().copied()).collect();
        for (p, v) in &params {
            m.entry(p.clone()).or_insert(*v);
        }
        for (p, v) in &state.consts {
            m.entry(p.to_string()).or_insert(*v);
        }
        m
    };
    let (ea, eb) = (env(oa, &va), env(ob, &vb));
    let at = |x: &Access, e: &BTreeMap<String, i64>| -> Option<Vec<i64>> {
        x.index.iter().map(|i| i.eval(&|v| e.get(v).copied()).ok()).collect()
    };
    // The pair of accesses that meet at one element (the updates of one reduction apart:
    // those of one value of the iterators it does not sum over).
    let one_sum = ka == kb
        && oa
            .iters
            .iter()
            .zip(&oa.inst.reduction)
            .zip(va.iter().zip(&vb))
            .all(|((_, r), (x, y))| *r || x == y);
    let mut found = None;
    'outer: for x in &oa.accesses {
        for y in &ob.accesses {
            if x.tensor == y.tensor
                && (x.write || y.write)
                && !(one_sum && x.accumulates && y.accumulates)
                && let (Some(i), Some(j)) = (at(x, &ea), at(y, &eb))
                && i == j
            {
                found = Some((x, y, i));
                break 'outer;
            }
        }
    }
    let inst = |o: &Origin, vals: &[i64]| -> String {
        let parts: Vec<String> = o.iters.iter().zip(vals).map(|(i, v)| format!("{i}={v}")).collect();
        format!("({})", parts.join(", "))
    };
    let stmt = |k: usize, o: &Origin| format!("statement {} (`{}`)", k + 1, o.stmt);
    let sizes: Vec<String> = params.iter().map(|(p, v)| format!("{p}={v}")).collect();
    let sizes = if sizes.is_empty() { String::new() } else { format!(" ({})", sizes.join(", ")) };
    match found {
        Some((x, y, el)) => {
            let element: String = el.iter().map(|i| format!("[{i}]")).collect();
            let (verb_a, verb_b, reversed) = match (x.write, y.write) {
                (true, false) => ("written", "read", "the transformed nest reads it before it is written"),
                (false, true) => {
                    ("read", "overwritten", "the transformed nest overwrites it before it is read")
                }
                _ => ("written", "written again", "the transformed nest writes it in the opposite order"),
            };
            let how = mark.unwrap_or(reversed);
            format!(
                "{}{element} is {verb_a} by {} at {} and {verb_b} by {} at {}; {how}{sizes}",
                x.tensor,
                stmt(ka, oa),
                inst(oa, &va),
                stmt(kb, ob),
                inst(ob, &vb)
            )
        }
        None if one_sum && oa.accesses.iter().any(|x| x.accumulates && x.zeroed) => format!(
            "{} at {} is the first update of its sum, which zeroes the element, and must come before {} at {}; \
             {}{sizes}",
            stmt(ka, oa),
            inst(oa, &va),
            stmt(kb, ob),
            inst(ob, &vb),
            mark.unwrap_or("the transformed nest runs them in the opposite order")
        ),
        None => format!(
            "{} at {} must come before {} at {}; {}{sizes}",
            stmt(ka, oa),
            inst(oa, &va),
            stmt(kb, ob),
            inst(ob, &vb),
            mark.unwrap_or("the transformed nest runs them in the opposite order")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_read_from_isl_text() {
        let (p, a, b) = point(
            "[p_N] -> { S0[o_i, o_j] -> S1[q_i = 3, q_j] : p_N = 6 and o_i = 0 and o_j = 3 and q_j = 0 }",
        );
        assert_eq!(p, vec![("N".to_string(), 6)]);
        assert_eq!(a, Some((0, vec![0, 3])));
        assert_eq!(b, Some((1, vec![3, 0])));
        let (_, a, b) = point("{ S2[1] -> S2[2] }");
        assert_eq!((a, b), (Some((2, vec![1])), Some((2, vec![2]))));
    }
}
