//! Packing: which block of a tensor a loop band reads, so that code generation can copy it into
//! a contiguous buffer before the band and read the copy inside it (the A and B panels of BLIS;
//! TVM's `cache_read`, Halide's `in().compute_at()`, Exo's `stage_mem` for a read).
//!
//! `pack(l, r, T)` marks the loop at level `r`. Its **footprint** is the box of elements of `T`
//! that the loop's body may read: for every index of every access to `T`, its smallest and
//! largest values over the loops of the band (the loop and those inside it), each loop running
//! from its lower bound to its upper bound (a strip-mined block `[e, min(e+c, u)]` counts as
//! full: the box may reach past the tensor at a tail, or before its start where a backward
//! loop was strip-mined, and the copy takes only the elements inside the tensor).
//! The box starts at `lo` (affine in the loops outside the band) and has a constant extent in
//! every dimension, so the buffer's shape is fixed.
//!
//! The copy denotes the same computation when `T` is not written inside the band (then every
//! read of `T` in the band sees the values the copy took just before it): checked here, so a
//! written operand is refused with the statement that writes it. The order of statement
//! instances is unchanged; no dependence analysis is needed.

use crate::ir::{DType, Expr, LNode, Loop, Name, TNode, lower};

/// The named constants' values, by name.
pub type Constants<'a> = &'a dyn Fn(&str) -> Option<i64>;

/// Largest buffer a packing may allocate, in elements (512 MiB of doubles).
pub const MAX_ELEMENTS: i64 = 1 << 26;

/// The box of `T` a band reads.
#[derive(Clone, Debug, PartialEq)]
pub struct Footprint {
    /// The first element, per dimension (affine in the loops outside the band).
    pub lo: Vec<Expr>,
    /// The extent of the box, per dimension: constants, or expressions in named constants.
    pub extent: Vec<Expr>,
    /// The element type.
    pub dtype: DType,
}

/// The footprint of `tensor` in the loop `l` (inside loops over `outer`), or why it cannot be
/// packed.
pub fn footprint(outer: &[Name], l: &Loop, tensor: &Name) -> Result<Footprint, String> {
    let cannot = |why: String| format!("cannot pack `{tensor}` for loop `{}`: {why}", l.iter);
    let header = Loop { body: Vec::new(), ..l.clone() };
    let what = "the loop's body does not read";
    block(outer, vec![header], &l.body, tensor, false, what, None).map_err(cannot)
}

/// The box of elements of `tensor` that `body` accesses (reads only, unless `writes`; a write
/// is refused otherwise), its loops and the `band` around it running over their ranges, in the
/// iterators `outer` outside the band; `absent` says why where `body` does not access it.
/// With `constants` (the named constants' values), ranges apart by an amount in named
/// constants are compared at those sizes; without, they must be a constant apart.
pub fn block(
    outer: &[Name],
    band: Vec<Loop>,
    body: &[LNode],
    tensor: &Name,
    writes: bool,
    absent: &str,
    constants: Option<Constants<'_>>,
) -> Result<Footprint, String> {
    let mut accesses: Vec<(TNode, Vec<Loop>)> = Vec::new();
    collect(body, &mut band.clone(), tensor, writes, &mut accesses)?;
    let Some((first, _)) = accesses.first() else {
        return Err(format!("{absent} `{tensor}`"));
    };
    let rank = first.index_list().map_or(0, |xs| xs.len());
    if rank == 0 {
        return Err(format!("`{tensor}` is a scalar: expected a tensor with dimensions"));
    }
    let dtype = first.dtype;
    let mut lo: Vec<Expr> = Vec::new();
    let mut extent: Vec<Expr> = Vec::new();
    for d in 0..rank {
        // The smallest first element and the largest last over the accesses: ranges a constant
        // apart, or (a buffer per iteration) apart by an amount in named constants, compared
        // at the program's sizes (`p[i][0]` and `p[i][j]` for `j` up to `N-2`).
        let mut bounds: Option<(Expr, Expr)> = None;
        for (leaf, loops) in &accesses {
            let e = &leaf.index_list().unwrap_or(&[])[d];
            let (a, b) = range(e, loops).ok_or_else(|| {
                format!("the range of index {e} of {} over the loops is not an affine box", leaf.access())
            })?;
            let Some((a0, b0)) = bounds.take() else {
                bounds = Some((a, b));
                continue;
            };
            let apart = |x: &Expr, y: &Expr| {
                let gap = x.sub(y);
                gap.as_const().or_else(|| constants.and_then(|size| gap.eval(size).ok()))
            };
            let (Some(oa), Some(ob)) = (apart(&a, &a0), apart(&b, &b0)) else {
                return Err(format!(
                    "the accesses to `{tensor}` reach ranges that are no constant apart ({a0} to {b0}, and {a} to {b})"
                ));
            };
            bounds = Some((if oa < 0 { a } else { a0 }, if ob > 0 { b } else { b0 }));
        }
        let (first, last) = bounds.unwrap_or_default();
        let size = last.sub(&first).add_int(1);
        if let Some(v) = outer.iter().find(|v| size.mentions(v)) {
            return Err(format!(
                "the block's extent {size} in dimension {} moves with loop `{v}`: expected a fixed shape",
                d + 1
            ));
        }
        lo.push(first);
        extent.push(size);
    }
    let elements =
        extent.iter().try_fold(1i64, |acc, e| e.as_const().and_then(|e| acc.checked_mul(e))).unwrap_or(0);
    if elements > MAX_ELEMENTS {
        return Err(format!(
            "the block is {} elements: expected at most {MAX_ELEMENTS} (choose a loop further in)",
            extent.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(" x ")
        ));
    }
    Ok(Footprint { lo, extent, dtype })
}

/// The reads of `tensor` below (and the writes, if `writes`; else a write is an error), with
/// the band's loops around each (outermost first).
fn collect(
    body: &[LNode],
    loops: &mut Vec<Loop>,
    tensor: &Name,
    writes: bool,
    out: &mut Vec<(TNode, Vec<Loop>)>,
) -> Result<(), String> {
    for x in body {
        match x {
            LNode::Loop(inner) => {
                loops.push(Loop { body: Vec::new(), ..(**inner).clone() });
                collect(&inner.body, loops, tensor, writes, out)?;
                loops.pop();
            }
            LNode::Stmt(s) => {
                let Some(lw) = lower(s) else { continue };
                if lw.target.id() == Some(tensor) {
                    if !writes {
                        return Err(format!(
                            "`{s}` writes it inside the loop: expected an operand the band only reads"
                        ));
                    }
                    out.push(((*lw.target).clone(), loops.clone()));
                }
                lw.rhs.visit(&mut |n| {
                    if n.id() == Some(tensor) {
                        out.push((n.clone(), loops.clone()));
                    }
                });
            }
        }
    }
    Ok(())
}

/// The smallest and largest value of `e` over `loops` (innermost last), in the iterators
/// outside them.
fn range(e: &Expr, loops: &[Loop]) -> Option<(Expr, Expr)> {
    if !e.is_affine() {
        return None;
    }
    let (mut lo, mut hi) = (e.clone(), e.clone());
    for l in loops.iter().rev() {
        let (c_lo, c_hi) = (lo.coeff(&l.iter), hi.coeff(&l.iter));
        if c_lo == 0 && c_hi == 0 {
            continue;
        }
        let lb = l.lb.is_affine().then(|| l.lb.clone())?;
        // A block loop's `floor((N-1)/v)` bound stays: `affine_bound` reads it below.
        let ub = super::vector::full_ub(l).unwrap_or_else(|| l.ub.clone());
        // A strip-mined loop of blocks (`io in [0, floor((N-1)/v)]`, the band reaching its last,
        // partial block): the box's affine hull, past the tensor's edge by less than a block
        // (the copy stops at the edge).
        lo = lo.subst(&l.iter, if c_lo >= 0 { &lb } else { &ub }).affine_bound(false)?;
        hi = hi.subst(&l.iter, if c_hi >= 0 { &ub } else { &lb }).affine_bound(true)?;
    }
    Some((lo, hi))
}
