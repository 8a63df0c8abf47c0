//! Where an accumulator is zeroed: immediately before the first update of each of its elements
//! in the *transformed* order, never by a clear hoisted above statements that still read the
//! old values.
//!
//! `build` gives every accumulator statement its reduction coordinates (the iterators it sums
//! over, whose loops start at 0; [`crate::ir::TNode::first_update`]). The instance where all of
//! them are 0 is the first update of its element in every order that strip-mining,
//! interchange, fusion, tiling and unrolling produce (each keeps the loops of one statement
//! increasing). So the zeroing `Z` starts as a guarded statement right before its statement:
//!
//! ```text
//! for i, j, k:  if (k == 0) C[i][j] = 0;  C[i][j] += A[i][k] * B[k][j]
//! ```
//!
//! and is then hoisted outward, loop by loop, while that keeps its meaning:
//! - out of a loop over a reduction coordinate (`k`), where `Z` runs at the loop's first
//!   iteration only: the guard is evaluated at the loop's lower bound (`k == 0` becomes true,
//!   `k == 4*ko` gives `ko == 0` one level up);
//! - out of a loop over a target index (`j`, or the block loop `jo` of a strip-mined `j`),
//!   becoming a loop of zeroings, where different iterations touch different elements and
//!   nothing else in the loop touches the accumulator at another index, and only while the
//!   guard still waits for a reduction loop further out (an unconditional zeroing stays next
//!   to its updates, for locality);
//! - in both cases only past statements that do not touch the accumulator.
//!
//! For the untransformed `i, j, k` nest this gives `C[i][j] = 0.0;` just before the `k` loop;
//! for `i, k, j` a zeroing loop over `j` before the `k` loop; for `k, i, j` a zeroing nest
//! over `i, j` before it. Where hoisting stops, the
//! guarded form stays (still correct; gcc unswitches it).

use crate::ir::{Atom, Expr, LNode, Loop, Lowered, Name, TExpr, lower};
use std::sync::Arc;

/// A zeroing of one accumulator access, possibly inside loops, under a guard.
#[derive(Clone, Debug)]
pub struct Zero {
    /// The target leaf, e.g. `C[i][j]`.
    pub target: TExpr,
    /// Conjuncts `e == 0`; empty means always.
    pub guard: Vec<Expr>,
    /// Loops around the zeroing (outermost first): the target loops it was hoisted out of.
    pub loops: Vec<Arc<Loop>>,
    /// The statement's own conditions `g >= 0` (an unrolled copy of a partial block's end):
    /// the zeroing runs only where they hold. Empty: always.
    pub when: Vec<Expr>,
}

/// The items of a nest with zeroings placed.
#[derive(Clone, Debug)]
pub enum PlacedNode {
    /// A loop of the nest (its header) with its items.
    Loop(Arc<Loop>, Vec<PlacedNode>),
    /// A statement of the nest.
    Stmt(TExpr),
    /// A zeroing.
    Zero(Zero),
}

impl PlacedNode {
    /// The accesses to `tensor` below, as (text, indices).
    pub fn accesses(&self, tensor: &Name, out: &mut Vec<(String, Vec<Expr>)>) {
        match self {
            PlacedNode::Loop(_, body) => body.iter().for_each(|g| g.accesses(tensor, out)),
            PlacedNode::Stmt(s) => {
                if let Some(lw) = lower(s) {
                    accesses_of(&lw, tensor, out);
                }
            }
            PlacedNode::Zero(z) => {
                if z.target.id() == Some(tensor) {
                    out.push((z.target.access(), z.target.index_list().unwrap_or(&[]).to_vec()));
                }
            }
        }
    }

    /// The conditions `g >= 0` of the statements and zeroings below (unrolled copies of a
    /// partial block's end), each once.
    pub fn conditions(&self, out: &mut Vec<Expr>) {
        let mut add = |gs: &[Expr]| {
            for g in gs {
                if !out.contains(g) {
                    out.push(g.clone());
                }
            }
        };
        match self {
            PlacedNode::Loop(_, body) => body.iter().for_each(|g| g.conditions(out)),
            PlacedNode::Stmt(s) => add(s.guard()),
            PlacedNode::Zero(z) => add(&z.when),
        }
    }

    /// The iterators of the loops below (those of a zeroing's own loops included).
    pub fn iters(&self, out: &mut Vec<Name>) {
        match self {
            PlacedNode::Loop(l, body) => {
                out.push(l.iter.clone());
                body.iter().for_each(|g| g.iters(out));
            }
            PlacedNode::Stmt(_) => {}
            PlacedNode::Zero(z) => out.extend(z.loops.iter().map(|l| l.iter.clone())),
        }
    }
}

fn accesses_of(lw: &Lowered, tensor: &Name, out: &mut Vec<(String, Vec<Expr>)>) {
    if lw.target.id() == Some(tensor) {
        out.push((lw.target.access(), lw.target.index_list().unwrap_or(&[]).to_vec()));
    }
    lw.rhs.visit(&mut |n| {
        if n.id() == Some(tensor) {
            out.push((n.access(), n.index_list().unwrap_or(&[]).to_vec()));
        }
    });
}

/// Places the zeroings of every accumulator statement in `items`.
pub fn place(items: &[LNode]) -> Vec<PlacedNode> {
    place_in(items, &mut Vec::new())
}

/// [`place`] inside loops whose iterators in `signed` may be negative (a skewed or shifted
/// loop starting below 0); every other iterator starts at 0 or above.
fn place_in(items: &[LNode], signed: &mut Vec<Name>) -> Vec<PlacedNode> {
    let mut out = Vec::new();
    for x in items {
        match x {
            LNode::Stmt(s) => {
                if let Some(lw) = lower(s)
                    && let Some(first) = lw.first
                    && let Some(guard) = simplify(first, signed)
                {
                    out.push(PlacedNode::Zero(Zero {
                        target: lw.target,
                        guard,
                        loops: Vec::new(),
                        when: lw.when,
                    }));
                }
                out.push(PlacedNode::Stmt(s.clone()));
            }
            LNode::Loop(l) => {
                let below_zero = !nonneg(&l.lb, signed);
                if below_zero {
                    signed.push(l.iter.clone());
                }
                let body = place_in(&l.body, signed);
                if below_zero {
                    signed.pop();
                }
                let (hoisted, body) = hoist(l, body, signed);
                out.extend(hoisted);
                out.push(PlacedNode::Loop(l.clone(), body));
            }
        }
    }
    out
}

/// True if `e` is never negative, where every name but those in `signed` is (iterators of
/// loops starting at 0 or above, named sizes).
fn nonneg(e: &Expr, signed: &[Name]) -> bool {
    if let Some(c) = e.as_const() {
        return c >= 0;
    }
    if let Some(ts) = e.affine_terms() {
        return e.constant() >= 0 && ts.iter().all(|(v, a)| *a >= 0 && !signed.contains(v));
    }
    match e.atom_plus() {
        Some((atom, rest)) => {
            nonneg(&rest, signed)
                && match atom {
                    Atom::Max(xs) => xs.iter().any(|x| nonneg(x, signed)),
                    Atom::Min(xs) => xs.iter().all(|x| nonneg(x, signed)),
                    Atom::FloorDiv(x, _) => nonneg(x, signed),
                    Atom::Var(_) => false,
                }
        }
        None => false,
    }
}

/// Drops conjuncts that always hold; `None` if one never holds (the statement copy is never
/// a first update, as in the later copies of an unrolled reduction loop). An iterator outside
/// `signed` is non-negative, so `5*ko + 1 == 0` never holds; with `k1` skewed to start at
/// `-j`, the unrolled copy's `k1 + 1 == 0` does (at `k1 = -1`) and stays.
fn simplify(guard: Vec<Expr>, signed: &[Name]) -> Option<Vec<Expr>> {
    let mut out = Vec::new();
    for g in guard {
        let positive = g.constant() > 0 && g.is_affine() && nonneg(&g, signed);
        match g.as_const() {
            Some(0) => {}
            Some(_) => return None,
            None if positive => return None,
            None => out.push(g),
        }
    }
    Some(out)
}

/// Moves the zeroings at the front of `l`'s body that may run before the loop out of it.
fn hoist(l: &Arc<Loop>, body: Vec<PlacedNode>, signed: &[Name]) -> (Vec<PlacedNode>, Vec<PlacedNode>) {
    let mut hoisted = Vec::new();
    let mut kept: Vec<PlacedNode> = Vec::new();
    let all = body.clone();
    // The iterators that move inside the loop (its own, those of its loops and zeroings).
    let mut moving: Vec<Name> = vec![l.iter.clone()];
    all.iter().for_each(|g| g.iters(&mut moving));
    for g in body {
        let PlacedNode::Zero(z) = g else {
            kept.push(g);
            continue;
        };
        let Some(tensor) = z.target.id().cloned() else {
            kept.push(PlacedNode::Zero(z));
            continue;
        };
        // Only past items that do not touch the elements it zeroes.
        let mut before: Vec<(String, Vec<Expr>)> = Vec::new();
        kept.iter().for_each(|k| k.accesses(&tensor, &mut before));
        let clear = before.iter().all(|(_, index)| apart(&z.target, index, &moving));
        let out = if clear { hoist_one(l, &z, &tensor, &all, &moving, signed) } else { None };
        match out {
            Some(Some(z2)) => hoisted.push(PlacedNode::Zero(z2)),
            Some(None) => {} // never runs
            None => kept.push(PlacedNode::Zero(z)),
        }
    }
    (hoisted, kept)
}

/// The zeroing as it reads outside loop `l`: `Some(None)` if it never runs, `None` if it
/// cannot move.
fn hoist_one(
    l: &Loop,
    z: &Zero,
    tensor: &Name,
    body: &[PlacedNode],
    moving: &[Name],
    signed: &[Name],
) -> Option<Option<Zero>> {
    let v = &l.iter;
    // Its own conditions hold at some iterations only: it stays where they are tested.
    if z.when.iter().any(|g| g.mentions(v)) {
        return None;
    }
    let in_target = z.target.index_list().unwrap_or(&[]).iter().any(|x| x.mentions(v));
    let in_loops = z.loops.iter().any(|zl| zl.lb.mentions(v) || zl.ub.mentions(v));
    let in_guard = z.guard.iter().any(|g| g.mentions(v));
    if in_guard {
        // A reduction coordinate: the zeroing runs at the loop's first iteration, if at all.
        // Each conjunct mentioning v grows with v and is never negative, so it is 0 at some
        // iteration only if it is 0 at the first.
        if in_target || in_loops {
            return None;
        }
        let mut guard = Vec::new();
        for g in &z.guard {
            if !g.mentions(v) {
                guard.push(g.clone());
                continue;
            }
            if !g.is_affine() || g.coeff(v) < 1 {
                return None;
            }
            guard.push(normalize(g.subst(v, &l.lb)));
        }
        return Some(simplify(guard, signed).map(|guard| Zero { guard, ..z.clone() }));
    }
    // Out of the loops over its indices only on the way out of a reduction loop above: an
    // unconditional zeroing stays next to the updates (locality).
    if !(in_target || in_loops) || z.guard.is_empty() {
        return None;
    }
    // A target index: a loop of zeroings. Every other access to the accumulator in the loop
    // must be to other elements (a nonzero constant apart in an index that no iterator of the
    // loop moves: the rows of an unroll-and-jam), and different iterations must touch
    // different elements.
    let mut acc = Vec::new();
    body.iter().for_each(|g| g.accesses(tensor, &mut acc));
    let me = z.target.access();
    if acc.iter().any(|(text, index)| *text != me && !apart(&z.target, index, moving)) {
        return None;
    }
    let injective = if in_target {
        z.target.index_list().unwrap_or(&[]).iter().any(|x| x.is_affine() && x.coeff(v) != 0)
    } else {
        // The block loop of a strip-mined loop: `j in [c + a*jo, min(c + a*jo + a - 1, ..)]`.
        z.loops.first().is_some_and(|zl| blocks_of(zl, v))
    };
    if !injective {
        return None;
    }
    let header = Arc::new(Loop { body: Vec::new(), annot: Default::default(), ..l.clone() });
    let mut loops = vec![header];
    loops.extend(z.loops.iter().cloned());
    Some(Some(Zero { loops, ..z.clone() }))
}

/// True if the access `other` never touches an element the zeroing of `target` writes: they
/// are a nonzero constant apart in an index that none of the `moving` iterators changes (the
/// rows of an unroll-and-jam).
fn apart(target: &TExpr, other: &[Expr], moving: &[Name]) -> bool {
    let mine = target.index_list().unwrap_or(&[]);
    other.len() == mine.len()
        && other.iter().zip(mine).any(|(a, b)| {
            moving.iter().all(|m| !a.mentions(m) && !b.mentions(m))
                && a.sub(b).as_const().is_some_and(|d| d != 0)
        })
}

/// True if the ranges of `inner` for different values of `v` are disjoint blocks.
fn blocks_of(inner: &Loop, v: &str) -> bool {
    if !inner.lb.is_affine() {
        return false;
    }
    let a = inner.lb.coeff(v);
    if a < 1 {
        return false;
    }
    let last = inner.lb.add_int(a - 1);
    inner.ub == last || inner.ub.min_args().is_some_and(|xs| xs.contains(&last))
}

/// `a*v + b == 0` with `a` dividing `b` reads `v == -b/a`; other forms stay.
fn normalize(g: Expr) -> Expr {
    match g.affine_terms().as_deref() {
        Some([(v, a)]) if *a > 1 && g.constant() % a == 0 => Expr::var_name(v).add_int(g.constant() / a),
        _ => g,
    }
}
