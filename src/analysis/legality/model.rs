//! The model: a nest's origins and accesses, their instances and dependences, and the new
//! schedule of every original instance, as isl texts.

use super::*;

/// One access of an origin statement.
#[derive(Clone, Debug)]
pub(super) struct Access {
    pub(super) tensor: Name,
    pub(super) index: Vec<Expr>,
    pub(super) write: bool,
    /// The target of an accumulating update (`+=`): its self-dependences are a reduction.
    pub(super) accumulates: bool,
    /// An accumulator zeroed at its first update (a contraction's), not an update onto the
    /// values the tensor held (a user's `A = add(A, ..)`).
    pub(super) zeroed: bool,
    /// The update's operator (`Set` for any access but an accumulating target's).
    pub(super) update: Update,
}

/// An origin statement, with the loops around it in the untransformed nest.
#[derive(Clone, Debug)]
pub(super) struct Origin {
    pub(super) stmt: TExpr,
    pub(super) iters: Vec<Name>,
    pub(super) accesses: Vec<Access>,
    /// Its loops in the untransformed nest (outermost first) and its instance there.
    pub(super) loops: Vec<Arc<Loop>>,
    pub(super) inst: Instance,
    /// Its position in the untransformed nest's top-level sequence.
    pub(super) top: usize,
}

/// The origins of `nest`, each with the domain its statement in the untransformed nest has.
pub(super) fn origins(nest: &Nest) -> Result<(Vec<Origin>, Vec<LNode>), String> {
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
        // An integer element summing values that are not integers truncates at every update
        // (`u8 += float`): its updates give another value in another order, so they are not a
        // reduction that may reorder (max and min commute with the truncation: they are).
        let truncates = lw.truncates();
        push(&lw.target, true, acc && !truncates);
        if acc {
            // `x += r` reads x too.
            push(&lw.target, false, !truncates);
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
pub(super) fn isl(e: &Expr, name: &dyn Fn(&str) -> String) -> String {
    let mut s = String::new();
    pub(super) fn atom(
        a: &Atom,
        f: &mut dyn std::fmt::Write,
        name: &dyn Fn(&str) -> String,
    ) -> std::fmt::Result {
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
pub(super) fn bounded(lb: &Expr, x: &str, ub: &Expr, name: &dyn Fn(&str) -> String) -> String {
    pub(super) fn args<'e>(e: &'e Expr, upper: bool, out: &mut Vec<&'e Expr>) {
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
pub(super) struct Names {
    pub(super) params: BTreeSet<Name>,
}

impl Names {
    pub(super) fn param_list(&self) -> String {
        let ps: Vec<String> = self.params.iter().map(|p| format!("p_{p}")).collect();
        format!("[{}]", ps.join(", "))
    }

    /// A variable: one of `iters` (with `prefix`), else a parameter.
    pub(super) fn var<'a>(&'a self, iters: &'a [Name], prefix: &'a str) -> impl Fn(&str) -> String + 'a {
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
pub(super) fn dependences<'c>(
    ctx: &'c Ctx,
    origins: &[Origin],
    names: &Names,
    original: &[String],
    reductions: bool,
    first: bool,
) -> Result<UMap<'c>, String> {
    // Where each origin runs entirely before the next (no loop around a sequence interleaves
    // them), a pair runs from the earlier origin to the later one.
    let in_order = origins.windows(2).all(|w| w[0].top < w[1].top);
    // The pieces of each pair of statements (source, sink).
    let mut pieces = Pieces::default();
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
                        pieces.push(
                            (ka, kb),
                            format!(
                                "S{ka}[{}] -> S{kb}[{}] : {}",
                                dims(&a.iters, "o_"),
                                dims(&b.iters, "q_"),
                                cons.iter().chain(&extra).cloned().collect::<Vec<_>>().join(" and ")
                            ),
                        )
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
    let params = names.param_list();
    // Every transformed nest of one program has the same original statements, so a search
    // (and the rules that generate a space) asks for the same dependences again and again:
    // they are remembered as isl's text, which reads back exactly.
    let key = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&params, &pieces.0, original).hash(&mut h);
        h.finish()
    };
    if let Some(known) = dependence_memo().lock().ok().and_then(|m| m.get(&key).cloned()) {
        return ctx.map(&known);
    }
    // Keep the pairs in the original order, pair of statements by pair: the order of the
    // statements that share no tensor is never asked (most of isl's work on a kernel of many
    // statements, deriche's sixteen).
    let mut deps = ctx.map(&format!("{params} -> {{ }}"))?;
    for ((ka, kb), texts) in &pieces.0 {
        let (Some(a), Some(b)) = (original.get(*ka), original.get(*kb)) else { continue };
        let pair = ctx.map(&format!("{params} -> {{ {} }}", texts.join("; ")))?;
        deps = deps.or(pair.and(ctx.map(a)?.lex_lt(ctx.map(b)?)?)?)?;
    }
    let deps = deps.coalesce()?;
    if let Ok(mut m) = dependence_memo().lock() {
        if m.len() >= DEPENDENCE_MEMO_SIZE {
            m.clear();
        }
        let text = deps.to_string();
        ctx.keep(&text, &deps);
        m.insert(key, text);
    }
    Ok(deps)
}

/// Dependence pieces (isl text) by their pair of statements, in order.
#[derive(Default)]
struct Pieces(BTreeMap<(usize, usize), Vec<String>>);

impl Pieces {
    fn push(&mut self, pair: (usize, usize), text: String) {
        self.0.entry(pair).or_default().push(text);
    }
}

/// Dependence maps remembered at most (then forgotten all at once).
const DEPENDENCE_MEMO_SIZE: usize = 512;

/// [`dependences`] as isl's text, by the hash of the statements' text and the original order.
fn dependence_memo() -> &'static std::sync::Mutex<std::collections::HashMap<u64, String>> {
    static MEMO: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<u64, String>>> =
        std::sync::OnceLock::new();
    MEMO.get_or_init(Default::default)
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
pub(super) fn relaxed_across(x: &Access, y: &Access) -> bool {
    x.accumulates
        && y.accumulates
        && x.update == y.update
        && matches!(x.update, Update::Max | Update::Min)
        && !x.zeroed
        && !y.zeroed
}

pub(super) fn dims(iters: &[Name], prefix: &str) -> String {
    iters.iter().map(|i| format!("{prefix}{i}")).collect::<Vec<_>>().join(", ")
}

/// The instances of origin `o` (its iterators named with `prefix`), as isl constraints: the
/// ranges of its loops in the untransformed nest, read through its instance there. A loop per
/// iterator, in order, with the iterator's own name (what `build` makes, backward ranges
/// aside) is written directly; other forms through the loops' variables.
pub(super) fn domain(o: &Origin, names: &Names, prefix: &str) -> String {
    let var = names.var(&o.iters, prefix);
    let direct = o.loops.len() == o.iters.len()
        && o.inst.guard.is_empty()
        && o.loops
            .iter()
            .zip(&o.iters)
            .zip(&o.inst.at)
            .all(|((l, i), at)| l.iter == *i && at.as_var() == Some(i));
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
pub(super) struct Placed<'a> {
    pub(super) inst: &'a Instance,
    pub(super) loops: Vec<&'a Loop>,
    pub(super) pos: Vec<usize>,
}

pub(super) fn placed<'a>(
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
pub(super) fn new_schedule(
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

/// A nest read for the analysis, once: its origins, the names of the isl texts, its placed
/// statements, and the parameter sets (every size, the program's sizes).
pub(super) struct Model<'n> {
    pub(super) origins: Vec<Origin>,
    pub(super) names: Names,
    pub(super) places: Vec<Placed<'n>>,
    /// The original schedule (the untransformed nest's times), as isl text.
    pub(super) original: String,
    /// The same, statement by statement (by origin): [`dependences`] orders pairs of them.
    pub(super) original_each: Vec<String>,
    /// Dimensions of the new times.
    pub(super) width: usize,
    /// `[params] -> { : every constant >= 1 }`.
    pub(super) all_sizes: String,
    /// `[params] -> { : the constants the program binds }`.
    pub(super) these: String,
    /// Those constants in words, e.g. `N=8`.
    pub(super) sizes: String,
}

impl<'n> Model<'n> {
    pub(super) fn new(state: &State, nest: &'n Nest) -> Result<Model<'n>, String> {
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
        let original_each = (0..origins.len())
            .map(|k| new_schedule(&before, &origins, &names, w0, &|p| (p.inst.origin == k).then_some(w0)))
            .collect();
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
        Ok(Model { origins, names, places, original, original_each, width, all_sizes, these, sizes })
    }

    /// The new times of the statements under loop `l` (at depth `d`) up to `l`, and the
    /// dependences of `deps` that `l` carries, as pairs of such times.
    pub(super) fn carried<'c>(
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
    /// The loop `l` (by identity) as the first placed statement under it and its depth there;
    /// `None` for a loop around no statement.
    pub(super) fn locate(&self, l: &Loop) -> Option<(usize, usize)> {
        self.places
            .iter()
            .enumerate()
            .find_map(|(k, p)| p.loops.iter().position(|x| std::ptr::eq(*x, l)).map(|d| (k, d)))
    }

    /// `S<k>[iters] -> M[element]` for the accesses of `tensor` that `pick` selects, where the
    /// parameters satisfy `params`.
    pub(super) fn accesses<'c>(
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

    /// `M[m0, ..] -> []` over elements of `rank` dimensions: composed after an access map, the
    /// statement instances that make the access (`S[..] -> []`), whatever element.
    pub(super) fn elements_to_unit<'c>(&self, ctx: &'c Ctx, rank: usize) -> Result<UMap<'c>, String> {
        ctx.map(&format!(
            "{} -> {{ M[{}] -> [] }}",
            self.names.param_list(),
            (0..rank).map(|j| format!("m{j}")).collect::<Vec<_>>().join(", ")
        ))
    }

    /// Statement `k` at the point `vals` (with `params`), in words: "statement 2 (`..`) at (i=0, k=1)".
    pub(super) fn instance_words(&self, t: Option<&Tuple>) -> String {
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
    /// An access outside the loop keeps the tensor as declared; it must not see what the
    /// loop's buffers held: each read there must be written first in the same iteration of
    /// the outermost loop around it that is not around `l` (adi's column sweep and row sweep,
    /// sibling loops over blocks of rows, each writing `p` before reading it). Then the
    /// value it reads was written in that iteration, which holds no instance of `l`.
    pub(super) fn escapes(
        &self,
        ctx: &Ctx,
        at: Option<(usize, &Loop)>,
        tensor: &Name,
        params: &str,
    ) -> Result<Option<String>, String> {
        let (o, n, w) = (&self.origins, &self.names, self.width);
        // Only the statements that access the tensor: every relation below is composed with
        // the tensor's accesses, and the lexicographic order of the others' times is most of
        // isl's work (a recursive filter's many statements, one temporary each).
        let accessing = |p: &Placed<'_>| {
            o.get(p.inst.origin).is_some_and(|org| org.accesses.iter().any(|a| a.tensor == *tensor))
        };
        // The loops around `l`, and `l`.
        let chain: Vec<&Loop> = at
            .and_then(|(d, l)| {
                self.places.iter().find_map(|p| {
                    p.loops.get(d).is_some_and(|x| std::ptr::eq(*x, l)).then(|| p.loops[..=d].to_vec())
                })
            })
            .unwrap_or_default();
        // How much of a statement's time names its iteration: `l`'s for a statement under it;
        // outside it, the outermost loop around the statement that is not around `l` (none:
        // the statement is not in any such iteration, and its reads escape).
        let depth = |p: &Placed<'_>| -> Option<usize> {
            let Some((d, _)) = at else { return Some(0) };
            let c = p.loops.iter().zip(&chain).take_while(|(a, b)| std::ptr::eq(**a, **b)).count();
            (c > d || c < p.loops.len()).then_some(2 * c.min(d) + 2)
        };
        let outside = at.is_some_and(|(d, l)| {
            self.places.iter().any(|p| accessing(p) && !p.loops.get(d).is_some_and(|x| std::ptr::eq(*x, l)))
        });
        let theta =
            ctx.map(&new_schedule(&self.places, o, n, w, &|p| accessing(p).then_some(w)))?.coalesce()?;
        let prefix = ctx
            .map(&new_schedule(&self.places, o, n, w, &|p| if accessing(p) { depth(p) } else { None }))?
            .coalesce()?;
        // b -> a: a runs before b, in the same iteration.
        let same = prefix.clone().then(prefix.reverse()?)?;
        let earlier_here = theta.clone().lex_lt(theta)?.reverse()?.and(same.clone())?;
        let iteration = match at {
            None => "the kernel".to_string(),
            Some((_, l)) if outside => format!(
                "an iteration of loop `{}` (outside it: of the outermost loop around the read that is not around `{}`)",
                l.iter, l.iter
            ),
            Some((_, l)) => format!("an iteration of loop `{}`", l.iter),
        };
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
                let reads = read.then(self.elements_to_unit(ctx, x.index.len())?)?;
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

/// Relations between two times of `width` dimensions.
pub(super) enum Rel {
    /// The first is not before the second (lexicographically `>=`).
    NotBefore,
    /// Equal on the first `n` dimensions, different on the next (a loop carries the pair).
    SamePrefixThenDiffer,
}

/// `{ [a0, ..] -> [b0, ..] : .. }` for `rel`; `n` is the prefix length of
/// [`Rel::SamePrefixThenDiffer`].
pub(super) fn time_relation(names: &Names, width: usize, n: usize, rel: Rel) -> String {
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
pub(super) fn domain_map(origins: &[Origin], names: &Names) -> String {
    let pieces: Vec<String> = origins
        .iter()
        .enumerate()
        .map(|(k, o)| format!("S{k}[{}] -> [] : {}", dims(&o.iters, "o_"), domain(o, names, "o_")))
        .collect();
    format!("{} -> {{ {} }}", names.param_list(), pieces.join("; "))
}

/// Loops marked parallel or vector, with their depth (0 for the outermost).
pub(super) fn marked_loops(items: &[LNode]) -> Vec<(usize, &Loop)> {
    loops_where(items, &|l| l.annot.parallel || l.annot.vectorize)
}

/// The loops that `pick` selects, with their depth (0 for the outermost).
pub(super) fn loops_where<'a>(items: &'a [LNode], pick: &dyn Fn(&Loop) -> bool) -> Vec<(usize, &'a Loop)> {
    pub(super) fn go<'a>(
        items: &'a [LNode],
        d: usize,
        pick: &dyn Fn(&Loop) -> bool,
        out: &mut Vec<(usize, &'a Loop)>,
    ) {
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
