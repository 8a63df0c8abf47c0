//! Scalar replacement (register tiles): which elements of a tensor a loop band keeps in local
//! variables, and whether that keeps the nest's meaning.
//!
//! `registers(l, r, T)` marks the loop at level `r`; code generation then loads every element
//! of `T` that the loop's body accesses into a local variable before the loop, computes on the
//! variables, and stores the written ones back after it (Carr and Kennedy's scalar replacement;
//! Exo's `stage_mem`, TVM's `cache_write(.., "local")`, Halide's `store_in(Register)`). Inside an
//! explicit vector loop ([`super::vector`]) a block of lanes is one variable: a vector register.
//!
//! That is the same computation exactly when, for every tensor the loop keeps:
//! - every access to it in the loop's body is **invariant**: its indices mention neither the
//!   loop's iterator nor that of any loop inside it, except the lanes of an innermost vectorized
//!   loop of constant trip count (or a strip-mined block of one, `[e, min(e+c, u)]`) whose bounds
//!   are themselves invariant and whose accesses move along one index with coefficient 1
//!   (each such access covers a fixed range of that index: of the last, a vector load; of
//!   another, a vector gathered lane by lane before the band and scattered after it). Code
//!   generation keeps the registers where every such block is full and runs the last, partial
//!   block without them (the tail);
//! - two different accesses never touch the same element: they differ by a nonzero constant in
//!   some index (in the one their lanes run along, by at least the range they cover), so no
//!   element has two variables;
//! - an element that every lane of such a loop adds to (`+=`, the lanes' iterator not in its
//!   index: a reduction across the lanes) is kept as one partial sum per lane and stored as
//!   their sum (rfactor: the same sum reassociated); those lanes may move with the band, and
//!   the element may not be accessed otherwise in the band;
//! - no loop of the band runs on threads (a variable is private to the thread that declared
//!   it), the marked loop is not itself vectorized, and no loop around it is.
//!
//! Tensors are distinct arrays (the kernel's parameters are `restrict`), so nothing else in the
//! loop can read or write those elements behind the variables' back. The order of iterations
//! is unchanged: no dependence analysis is needed.

use super::vector;
use crate::ir::{Expr, LNode, Loop, Name, TNode, lower};

/// One element (or fixed range of lanes) a band keeps in a variable.
#[derive(Clone, Debug, PartialEq)]
pub struct Unit {
    /// The access, with the lanes' iterator at its first lane.
    pub index: Vec<Expr>,
    /// Lanes covered in index `dim` (1: one element); for a sum, the lanes that each add to
    /// the one element.
    pub lanes: i64,
    /// The index the lanes run along: the last (a vector load), or another ([`vector::gathered`]:
    /// loaded and stored lane by lane around the band).
    pub dim: usize,
    /// One element every lane of a vectorized loop adds to (`+=`): kept as a vector of partial
    /// sums, one per lane, added up when stored (rfactor into registers).
    pub summed: bool,
    /// The access as the program writes it.
    pub text: String,
}

/// Checks the loop `l` (marked `registers` for `tensor`, inside the loops `outer`) and returns
/// the distinct units it keeps, or why that would change the nest's meaning.
pub fn units(
    outer: &[&Loop],
    l: &Loop,
    tensor: &Name,
    layouts: &vector::Layouts,
) -> Result<Vec<Unit>, String> {
    let cannot = |why: String| format!("cannot keep `{tensor}` in registers across loop `{}`: {why}", l.iter);
    if let Some(lay) = layouts.get(tensor).filter(|lay| lay.regroup.is_none() && !lay.order.is_empty())
        && !lay.keeps_rows(lay.order.len())
    {
        return Err(cannot(format!(
            "it is stored with its last dimension moved ({}): expected a layout that keeps its rows \
             for a tensor kept in registers",
            lay.describe(lay.order.len())
        )));
    }
    if l.annot.parallel || l.annot.vectorize {
        return Err(cannot(format!(
            "the loop is marked {}; expected an unmarked loop (keep the registers on a loop outside \
             the vector lanes, inside the threads)",
            l.annot.words().join(" and ")
        )));
    }
    if let Some(o) = outer.iter().find(|o| o.annot.vectorize) {
        return Err(cannot(format!("it is inside the vectorized loop `{}`", o.iter)));
    }
    let mut band: Vec<Name> = vec![l.iter.clone()];
    for x in &l.body {
        x.loop_iters(&mut band);
    }
    let mut found: Vec<Unit> = Vec::new();
    walk(&l.body, &band, tensor, None, layouts, &mut found).map_err(cannot)?;
    if found.is_empty() {
        return Err(cannot(format!("the loop's body does not access `{tensor}`")));
    }
    // Distinct units never overlap.
    for (k, a) in found.iter().enumerate() {
        for b in &found[k + 1..] {
            if !disjoint(a, b) {
                return Err(cannot(format!(
                    "{} and {} may be the same element: expected accesses that are equal or differ by a \
                     constant",
                    a.text, b.text
                )));
            }
        }
    }
    Ok(found)
}

/// The lanes of the innermost vectorized loop an access is in: its iterator, lower bound and
/// trip count.
type LaneLoop<'a> = Option<(&'a Name, &'a Expr, i64)>;

fn walk(
    body: &[LNode],
    band: &[Name],
    tensor: &Name,
    lanes: LaneLoop<'_>,
    layouts: &vector::Layouts,
    out: &mut Vec<Unit>,
) -> Result<(), String> {
    for x in body {
        match x {
            LNode::Loop(inner) => {
                if inner.annot.parallel {
                    return Err(format!("loop `{}` inside it runs on threads", inner.iter));
                }
                let lane = if inner.annot.vectorize && touches(inner, tensor) {
                    vector::contiguous_summing(inner, std::slice::from_ref(tensor), layouts).map_err(
                        |why| format!("the vectorized loop `{}` cannot be lanes: {why}", inner.iter),
                    )?;
                    let trip = vector::block(inner).map(|b| b.trip).ok_or_else(|| {
                        format!(
                            "the vectorized loop `{}` has no constant trip count ({}): expected a block \
                             of lanes (strip-mine it by the register tile's width first)",
                            inner.iter,
                            inner.range()
                        )
                    })?;
                    // Lanes that only sum into `tensor` may move with the band: each block's lanes
                    // add to the same partial sums, whichever iterations they run.
                    if !vector::bounds_free_of(inner, band) && !only_sums(inner, tensor) {
                        return Err(format!(
                            "the lanes of the vectorized loop `{}` ({}) move with the band's loops",
                            inner.iter,
                            inner.range()
                        ));
                    }
                    Some((&inner.iter, &inner.lb, trip))
                } else {
                    None
                };
                walk(&inner.body, band, tensor, lane, layouts, out)?;
            }
            LNode::Stmt(s) => {
                let Some(lw) = lower(s) else { continue };
                if let Some(g) = lw.when.iter().find(|g| band.iter().any(|v| g.mentions(v))) {
                    return Err(format!(
                        "the statement `{s}` runs only where {g} >= 0, which changes inside the band; \
                         expected conditions on the loops outside it (unroll the partial block's rows \
                         outside the band)"
                    ));
                }
                let mut leaves: Vec<(TNode, bool)> = vec![((*lw.target).clone(), true)];
                lw.rhs.visit(&mut |n| {
                    if n.is_tensor_leaf() {
                        leaves.push((n.clone(), false));
                    }
                });
                for (leaf, write) in leaves.iter().filter(|(n, _)| n.id() == Some(tensor)) {
                    let u = unit(leaf, *write, band, lanes)?;
                    if !out.iter().any(|o| {
                        o.index == u.index && o.lanes == u.lanes && o.summed == u.summed && o.dim == u.dim
                    }) {
                        out.push(u);
                    }
                }
            }
        }
    }
    Ok(())
}

fn touches(l: &Loop, tensor: &Name) -> bool {
    l.body.iter().flat_map(|x| x.stmts()).any(|s| {
        s.target().and_then(|t| t.id()) == Some(tensor)
            || s.indexed_leaves().iter().any(|n| n.id() == Some(tensor))
    })
}

/// True if the vectorized loop `l` accesses `tensor` only as the target of `+=` at an element
/// every lane adds to (a sum across its lanes).
fn only_sums(l: &Loop, tensor: &Name) -> bool {
    l.body.iter().all(|x| match x {
        LNode::Stmt(s) => lower(s).is_none_or(|lw| {
            let mut reads = false;
            lw.rhs.visit(&mut |n| reads |= n.id() == Some(tensor));
            let moving = lw.target.id() == Some(tensor)
                && lw.target.index_list().unwrap_or(&[]).iter().any(|x| x.mentions(&l.iter));
            !reads && !moving
        }),
        LNode::Loop(_) => false,
    })
}

fn unit(leaf: &TNode, write: bool, band: &[Name], lanes: LaneLoop<'_>) -> Result<Unit, String> {
    let mut index: Vec<Expr> = leaf.index_list().unwrap_or(&[]).to_vec();
    let mut width = 1;
    let mut summed = false;
    let mut dim = index.len().saturating_sub(1);
    if let Some((iter, lb, trip)) = lanes {
        if index.iter().any(|x| x.mentions(iter)) {
            if let Err(why) = vector::lane_access(leaf, iter, false, &vector::Layouts::new()) {
                dim = vector::gathered(leaf, iter).ok_or(why)?;
            }
            index[dim] = index[dim].subst(iter, lb);
            width = trip;
        } else if write {
            // every lane adds to it (`contiguous_summing` checked the `+=`)
            width = trip;
            summed = true;
        }
    }
    if let Some(v) = band.iter().find(|v| index.iter().any(|x| x.mentions(v))) {
        return Err(format!(
            "{} varies with `{v}`: expected an access at the same element for the whole loop",
            leaf.access()
        ));
    }
    Ok(Unit { index, lanes: width, dim, summed, text: leaf.access() })
}

/// Two different units touch no common element.
fn disjoint(a: &Unit, b: &Unit) -> bool {
    if a.index.len() != b.index.len() {
        return false;
    }
    for (d, (x, y)) in a.index.iter().zip(&b.index).enumerate() {
        let Some(diff) = y.checked_sub(x).ok().and_then(|e| e.as_const()) else { continue };
        let cover = |u: &Unit| if u.summed || u.dim != d { 1 } else { u.lanes };
        let (wa, wb) = (cover(a), cover(b));
        if diff >= wa || -diff >= wb {
            return true;
        }
    }
    false
}
