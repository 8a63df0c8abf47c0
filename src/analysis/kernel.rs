//! Can the kernel of these nests be realised as correct C? The one answer both callers need:
//! a `codegen` statement validates its request with [`realizable`] (so that `teml check` and every
//! front-end refuse what `teml run` would), and code generation asks [`layout`] what the kernel
//! is made of and [`realise`] how to print each marked loop. No C is generated here.
//!
//! - **Tensors** ([`layout`]): every real tensor the nests use, with one shape and one element
//!   type.
//! - **Integer ranges** ([`layout`]): named constants, loop bounds, indices and extents fit the
//!   C `int` the generated loops run over; every tensor fits the address space.
//! - **Marks** ([`realise`]): isl decides whether a marked loop carries a dependence
//!   (docs/legality.md); one that carries none runs as it is, one that carries reductions sums
//!   into private accumulators ([`reduction::plan`], whose range test decides alone where the
//!   analysis cannot run); a parallel loop inside a vectorized one, or an accumulator zeroed
//!   inside the loop that sums into it, is refused with the reason.

use super::reduction::{self, Plan};
use super::zeroing::{self, PlacedNode};
use crate::error::{Error, Result};
use crate::ir::marks::{self, Mark, Scope};
use crate::ir::{DType, Dim, Expr, LNode, Loop, Name, Nest, State, TNode, lower};
use std::collections::BTreeSet;
use std::sync::Arc;

/// A real tensor (or scalar) a kernel uses.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// Its identifier.
    pub name: Name,
    /// Element type.
    pub dtype: DType,
    /// Extents (empty for a scalar).
    pub dims: Vec<Expr>,
    /// Written by some statement.
    pub written: bool,
}

/// The refusal of a kernel code generation cannot realize, with the reason.
pub fn unrealizable(reason: String) -> Error {
    Error::Unrealizable { builtin: "codegen".into(), reason }
}

/// Refuses, with the reason, a kernel of `nests` that code generation could not realise: a
/// tensor used with two shapes ([`Error::Unrealizable`]), an integer outside C `int`
/// ([`Error::Limit`]), a mark that cannot be realised ([`Error::Unrealizable`]).
pub fn realizable(state: &State, nests: &[(Name, Nest)]) -> Result<()> {
    // A tensor with a copy per iteration of a loop (`privatize`) in one nest is not kept: no
    // other nest of the kernel may access it as it is (each nest that accesses it gives it
    // copies of its own, and no value passes from one nest to another).
    for (name, n) in nests {
        for (t, x) in &n.expanded {
            if let Some((other, _)) =
                nests.iter().find(|(_, m)| m.stmts().iter().any(|s| s.mentions_tensor(t)))
            {
                return Err(unrealizable(format!(
                    "`{t}` has a copy per iteration of loop `{}` in `{name}` (privatize), but `{other}` of \
                     the same kernel accesses `{t}` itself; expected privatize in every nest of the kernel \
                     that accesses it",
                    x.by
                )));
            }
        }
    }
    layout(state, nests)?;
    // The kernel's buffers: a layout one nest sets holds in every nest (codegen converts the
    // tensor once), so lanes and registers are asked of it everywhere.
    let laid: super::vector::Layouts =
        nests.iter().flat_map(|(_, n)| n.layouts.iter().map(|(t, l)| (t.clone(), l.clone()))).collect();
    fn walk<'a>(
        state: &State,
        nest: &Nest,
        laid: &super::vector::Layouts,
        g: &'a PlacedNode,
        outer: &mut Vec<&'a Loop>,
    ) -> std::result::Result<(), String> {
        if let PlacedNode::Loop(l, body) = g {
            realise(state, nest, l, body)?;
            // `registers` marks moved by interchange or fusion are checked where they are now.
            for t in &l.annot.registers {
                super::registers::units(outer, l, t, laid)?;
            }
            let iters: Vec<Name> = outer.iter().map(|o| o.iter.clone()).collect();
            for t in &l.annot.pack {
                super::packing::footprint(&iters, l, t)?;
            }
            outer.push(l);
            let r = body.iter().try_for_each(|c| walk(state, nest, laid, c, outer));
            outer.pop();
            r?;
        }
        Ok(())
    }
    for (_, n) in nests {
        zeroing::place(n.items())
            .iter()
            .try_for_each(|g| walk(state, n, &laid, g, &mut Vec::new()))
            .map_err(unrealizable)?;
    }
    one_layout_per_tensor(nests, &Default::default()).map_err(unrealizable)?;
    // A result stored over an operand: no other nest of the kernel accesses either.
    for (k, (name, n)) in nests.iter().enumerate() {
        for (y, x) in &n.over {
            let elsewhere = nests.iter().enumerate().find_map(|(j, (other, m))| {
                [y, x].into_iter().find(|t| j != k && m.rank_of(t).is_some()).map(|t| (other, t))
            });
            if let Some((other, t)) = elsewhere {
                return Err(unrealizable(format!(
                    "`{y}` is stored over `{x}` (in_place) in `{name}`, but `{other}` of the same kernel \
                     accesses `{t}`; expected in_place on a nest whose kernel accesses neither elsewhere"
                )));
            }
        }
    }
    // A tensor stored per iteration of a loop exists nowhere else.
    for (k, (name, n)) in nests.iter().enumerate() {
        for (outer, l) in super::storage::marked(n.items()) {
            for t in &l.annot.store_at {
                super::storage::per_iteration_block(state, n, &outer, l, t).map_err(unrealizable)?;
                let elsewhere = nests.iter().enumerate().find(|(j, (_, m))| {
                    *j != k
                        && m.stmts().iter().any(|s| {
                            let mut hit = false;
                            s.visit(&mut |x| hit |= x.id() == Some(t));
                            hit
                        })
                });
                if let Some((_, (other, _))) = elsewhere {
                    return Err(unrealizable(format!(
                        "`{t}` is stored per iteration of loop `{}` in `{name}`, but `{other}` of the same \
                         kernel accesses it too; expected its every access inside that loop",
                        l.iter
                    )));
                }
            }
        }
    }
    Ok(())
}

/// What the kernel of `nests` is made of, checked: its tensors (one shape each, else
/// [`Error::Inexpressible`]), its loop iterators and the named constants it uses, every integer
/// within C `int` (else [`Error::Limit`]).
pub fn layout(state: &State, nests: &[(Name, Nest)]) -> Result<(Vec<Tensor>, BTreeSet<Name>, Vec<Name>)> {
    let tensors =
        tensors(nests).map_err(|reason| Error::Inexpressible { builtin: "codegen".into(), reason })?;
    let (iters, consts) = iters_and_constants(nests, &tensors);
    check_ranges(state, &tensors, nests, &consts)
        .map_err(|reason| Error::Limit { builtin: "codegen".into(), reason })?;
    Ok((tensors, iters, consts))
}

/// How code generation realises the loop `l` of `nest` (its body with the zeroings placed):
/// `None` for an unmarked loop, else the plan of its pragma, or why it cannot be realised.
pub fn realise(
    state: &State,
    nest: &Nest,
    l: &Loop,
    body: &[PlacedNode],
) -> std::result::Result<Option<Plan>, String> {
    // Marks moved by interchange or fusion can still put `parallel for` inside `simd`.
    if l.annot.vectorize
        && let Some(inner) = l.body.iter().find_map(parallel_loop)
    {
        return Err(simd_around_parallel_reason(l, &inner));
    }
    if !(l.annot.parallel || l.annot.vectorize) {
        return Ok(None);
    }
    if l.annot.collapse > 1 {
        return realise_band(state, nest, l, body).map(Some);
    }
    let what = match (l.annot.parallel, l.annot.vectorize) {
        (true, true) => "parallelize and vectorize",
        (true, false) => "parallelize",
        _ => "vectorize",
    };
    // isl decides whether the loop carries a dependence (docs/legality.md); one that carries
    // none runs as it is, one that carries reductions gets private accumulators. Where the
    // analysis cannot run (statements without instances, no isl), the range test of
    // `reduction.rs` decides alone.
    let carries = super::legality::carries(state, nest, l).unwrap_or(true);
    if !carries {
        return Ok(Some(Plan::Independent));
    }
    let only_reductions = super::legality::carries_beyond_reductions(state, nest, l) == Ok(false);
    let plan = reduction::plan(l, only_reductions).map_err(|why| {
        format!(
            "cannot {what} loop `{}` ({}): {why}; expected iterations that write disjoint elements, or a reduction into one element",
            l.iter,
            l.range()
        )
    })?;
    if let Plan::Reduction(targets) = &plan
        && let Some(t) = targets.iter().find(|t| zeroes_inside(body, &t.access))
    {
        return Err(format!(
            "cannot {} loop `{}` ({}): the accumulator {} is zeroed at its first update \
             inside the loop, which sums into it; expected its zeroing outside the loop \
             (keep the loops over its indices outside the marked loop)",
            if l.annot.parallel { "parallelize" } else { "vectorize" },
            l.iter,
            l.range(),
            t.access
        ));
    }
    Ok(Some(plan))
}

/// A collapsed band (`collapse(n)` on `l`) as code generation prints it: `n` loops perfectly
/// nested (no zeroing between them), each marked parallel, each one's bounds free of the
/// band's outer iterators (OpenMP's rectangular `collapse`), and none carrying a dependence,
/// reductions included (a reduction would need private accumulators per loop).
fn realise_band(
    state: &State,
    nest: &Nest,
    l: &Loop,
    body: &[PlacedNode],
) -> std::result::Result<Plan, String> {
    let n = l.annot.collapse;
    let cannot = |why: String| format!("cannot collapse the {n} loops from `{}`: {why}", l.iter);
    let mut band: Vec<&Loop> = vec![l];
    let mut rest = body;
    while band.len() < n {
        match rest {
            [PlacedNode::Loop(inner, b)] => {
                band.push(inner);
                rest = b;
            }
            _ => {
                return Err(cannot(format!(
                    "expected {n} perfectly nested loops, found {} (a statement or a zeroing between them; \
                     keep the accumulator's loops inside the band)",
                    band.len()
                )));
            }
        }
    }
    // A packed copy or a register band's loads would be printed between the collapsed loops.
    let row = marks::rule(Mark::Collapse, Mark::Pack, Scope::Kernel);
    if let Some(x) = band[1..].iter().find(|x| x.annot.marks().iter().any(|(m, _)| row.others.contains(m))) {
        return Err(cannot(row.words(&[("loop", &x.iter), ("marks", &x.annot.words().join(" "))])));
    }
    if let Some((x, o)) = not_rectangular(&band) {
        return Err(cannot(format!(
            "the bounds of `{}` ({}) depend on `{}`: expected a rectangular band",
            x.iter,
            x.range(),
            o.iter
        )));
    }
    for x in &band {
        if !x.annot.parallel || x.annot.vectorize {
            return Err(cannot(format!(
                "expected every loop of the band marked parallel only, found `{}` {:?}",
                x.iter,
                x.annot.words()
            )));
        }
        if super::legality::carries(state, nest, x).unwrap_or(true)
            && reduction::plan(x, false) != Ok(Plan::Independent)
        {
            return Err(cannot(format!(
                "loop `{}` carries a dependence (a reduction included): expected iterations that write disjoint elements",
                x.iter
            )));
        }
    }
    Ok(Plan::Independent)
}

/// The first loop of a band (outermost first) whose bounds use the iterator of a loop outside
/// it in the band, with that loop: OpenMP collapses rectangular bands only. The one check of
/// `collapse` and of its realisation.
pub fn not_rectangular<'a>(band: &[&'a Loop]) -> Option<(&'a Loop, &'a Loop)> {
    band.iter()
        .enumerate()
        .find_map(|(k, x)| band[..k].iter().find(|o| x.bounds_mention(&o.iter)).map(|o| (*x, *o)))
}

/// The first loop marked parallel at or below `x`.
pub fn parallel_loop(x: &LNode) -> Option<Arc<Loop>> {
    let l = x.as_loop()?;
    if l.annot.parallel {
        return Some(l.clone());
    }
    l.body.iter().find_map(parallel_loop)
}

/// The layouts of the kernel's tensors: one per tensor across its nests, none on a tensor
/// stored per iteration of a loop (`local`).
pub fn one_layout_per_tensor(
    nests: &[(Name, Nest)],
    local: &std::collections::BTreeSet<Name>,
) -> std::result::Result<std::collections::BTreeMap<Name, crate::ir::Layout>, String> {
    let mut layouts: std::collections::BTreeMap<Name, crate::ir::Layout> = Default::default();
    for (nname, n) in nests {
        for (t, lay) in &n.layouts {
            if local.contains(t) {
                return Err(marks::rule(Mark::StoreAt, Mark::Layout, Scope::Kernel)
                    .words(&[("t", t), ("nest", nname)]));
            }
            if layouts.get(t).is_some_and(|other| other != lay) {
                return Err(marks::rule(Mark::Layout, Mark::Layout, Scope::Kernel).words(&[("t", t)]));
            }
            layouts.insert(t.clone(), lay.clone());
        }
    }
    Ok(layouts)
}

/// Why a parallel loop cannot run inside a vectorized one (a transformation's refusal, and code generation's).
pub fn simd_around_parallel_reason(outer: &Loop, inner: &Loop) -> String {
    marks::rule(Mark::Parallel, Mark::Vector, Scope::Around)
        .words(&[("here", &inner.iter), ("loop", &outer.iter)])
}

/// True if a zeroing of `access` is among `body`'s items, at any depth.
fn zeroes_inside(body: &[PlacedNode], access: &str) -> bool {
    body.iter().any(|g| match g {
        PlacedNode::Zero(z) => z.target.access() == access,
        PlacedNode::Loop(_, b) => zeroes_inside(b, access),
        PlacedNode::Stmt(_) => false,
    })
}

/// The real tensors the nests use, in order of first appearance.
fn tensors(nests: &[(Name, Nest)]) -> Result<Vec<Tensor>, String> {
    let mut out: Vec<Tensor> = Vec::new();
    for (_, n) in nests {
        for s in n.stmts() {
            let Some(lw) = lower(&s) else { continue };
            let mut visit = |leaf: &TNode, written: bool| -> Result<(), String> {
                let Some(name) = leaf.id() else { return Ok(()) };
                let dims: Vec<Expr> = leaf
                    .shape
                    .dims()
                    .unwrap_or(&[])
                    .iter()
                    .map(|d| match d {
                        Dim::Known(e) => Ok(e.clone()),
                        Dim::Unknown => Err(format!("the shape of `{name}` is not known")),
                    })
                    .collect::<Result<_, _>>()?;
                match out.iter_mut().find(|p| &p.name == name) {
                    Some(p) if p.dims != dims || p.dtype != leaf.dtype => Err(format!(
                        "tensor `{name}` is used with two shapes: expected one, found {} {:?} and {} {:?}",
                        p.dtype,
                        p.dims.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
                        leaf.dtype,
                        dims.iter().map(|d| d.to_string()).collect::<Vec<_>>()
                    )),
                    Some(p) => {
                        p.written |= written;
                        Ok(())
                    }
                    None => {
                        out.push(Tensor { name: name.clone(), dtype: leaf.dtype, dims, written });
                        Ok(())
                    }
                }
            };
            // operands first, then the target: `f(A, B, C)` for C = A + B
            let mut res = Ok(());
            lw.rhs.visit(&mut |n| {
                if res.is_ok() && n.is_tensor_leaf() {
                    res = visit(n, false);
                }
            });
            res?;
            visit(&lw.target, true)?;
        }
    }
    Ok(out)
}

/// Checks one expression; the closure names it in the message.
type RangeCheck<'a> = dyn Fn(&Expr, &dyn Fn() -> String) -> Result<(), String> + 'a;

/// Every integer of the kernel fits the C `int` its loops run over, and every tensor fits in
/// memory's address range: named constants' values, loop bounds and indices (their
/// coefficients, and their values where the named constants give them).
fn check_ranges(
    state: &State,
    tensors: &[Tensor],
    nests: &[(Name, Nest)],
    consts: &[Name],
) -> Result<(), String> {
    let limit = crate::ir::expr::INT_MAX;
    for c in consts {
        if let Some(v) = state.constant(c)
            && !(-limit..=limit).contains(&v)
        {
            return Err(format!(
                "named constant {c} = {v}: expected a value in -{limit}..={limit} (the generated loops run over C int)"
            ));
        }
    }
    let check = |e: &Expr, what: &dyn Fn() -> String| -> Result<(), String> {
        let value = e.checked_eval(&|v| state.constant(v));
        let out = !e.within(limit)
            || matches!(value, Err(crate::ir::EvalError::Overflow))
            || value.is_ok_and(|v| !(-limit..=limit).contains(&v));
        if out {
            return Err(format!(
                "{} leaves the integer range: expected values within -{limit}..={limit} (the generated loops run over C int)",
                what()
            ));
        }
        Ok(())
    };
    fn walk(x: &LNode, check: &RangeCheck<'_>) -> Result<(), String> {
        match x {
            LNode::Loop(l) => {
                check(&l.lb, &|| format!("the lower bound {} of loop `{}`", l.lb, l.iter))?;
                check(&l.ub, &|| format!("the upper bound {} of loop `{}`", l.ub, l.iter))?;
                l.body.iter().try_for_each(|c| walk(c, check))
            }
            LNode::Stmt(s) => {
                for leaf in s.indexed_leaves() {
                    for e in leaf.index_list().unwrap_or(&[]) {
                        check(e, &|| format!("the index {e} of {}", leaf.access()))?;
                    }
                }
                Ok(())
            }
        }
    }
    for (_, n) in nests {
        n.items().iter().try_for_each(|x| walk(x, &check))?;
    }
    for p in tensors {
        let mut bytes: Option<u64> = Some(p.dtype.size() as u64);
        for d in &p.dims {
            check(d, &|| format!("the extent {d} of tensor `{}`", p.name))?;
            if let Ok(v) = d.checked_eval(&|v| state.constant(v)) {
                bytes = bytes.and_then(|b| b.checked_mul(v.max(0) as u64));
            }
        }
        if bytes.is_none_or(|b| b > isize::MAX as u64) {
            return Err(format!("tensor `{}` is too large: expected at most {} bytes", p.name, isize::MAX));
        }
    }
    Ok(())
}

fn collect_vars(x: &LNode, out: &mut BTreeSet<Name>) {
    match x {
        LNode::Loop(l) => {
            out.extend(l.lb.vars());
            out.extend(l.ub.vars());
            l.body.iter().for_each(|c| collect_vars(c, out));
        }
        LNode::Stmt(s) => out.extend(s.index_vars()),
    }
}

/// The loop iterators of `nests`, and the named constants their bounds, accesses and tensor
/// shapes use.
fn iters_and_constants(nests: &[(Name, Nest)], tensors: &[Tensor]) -> (BTreeSet<Name>, Vec<Name>) {
    let mut iters = BTreeSet::new();
    for (_, n) in nests {
        for x in n.items() {
            let mut v = Vec::new();
            x.loop_iters(&mut v);
            iters.extend(v);
        }
    }
    let mut consts: BTreeSet<Name> = BTreeSet::new();
    for p in tensors {
        p.dims.iter().for_each(|d| consts.extend(d.vars()));
    }
    for (_, n) in nests {
        for x in n.items() {
            collect_vars(x, &mut consts);
        }
    }
    let consts = consts.into_iter().filter(|v| !iters.contains(v)).collect();
    (iters, consts)
}

/// The named constants the kernel of `nests` needs that `state` does not bind (`-D` must
/// give them before it can run).
pub fn unbound_constants(state: &State, nests: &[(Name, Nest)]) -> Vec<Name> {
    let Ok(tensors) = tensors(nests) else { return Vec::new() };
    iters_and_constants(nests, &tensors).1.into_iter().filter(|c| state.constant(c).is_none()).collect()
}
