//! Explicit vector code: whether a vectorized loop is printed with explicit vector types
//! (GCC/Clang vector extensions: vector loads and stores, broadcasts, multiply-adds), and in
//! which blocks of lanes, instead of being left to the compiler's loop vectorizer behind
//! `#pragma omp simd`.
//!
//! A loop marked `vectorize` that isl shows carries no dependence is printed with explicit
//! vectors when its body is statements only, every element it accesses is computed in one lane
//! type ([`lane_type`]: bf16 reads widened into float lanes, i8 and u8 reads into i32 lanes;
//! every store of the lanes' own type), and
//! every access is either contiguous in the loop (the loop's iterator appears only in the last
//! index, with coefficient 1: a vector load or store) or, for a read, does not depend on it (a
//! broadcast). Its lanes are then:
//! - **unrolled** for a constant trip count of at most [`MAX_BLOCKS`] vectors: the iterations
//!   are cut into whole vectors of the target's width, then narrower vectors, then scalar
//!   copies (a trip count of 12 doubles on AVX-512 is one 8-lane and one 4-lane vector): no loop
//!   is left, and [`super::registers`] can keep each block in a vector register;
//! - **strided** otherwise: a loop stepping by the width while a whole vector fits, then a
//!   scalar remainder loop.
//!
//! Anything else keeps the pragma (the reason is printed beside it). The width comes from the
//! [`Target`], made from the one machine description (`runtime::machine`): the host's widest
//! vectors (AVX-512: 512 bits), or the width `TEML_MACHINE` or `TEML_VECTOR_BITS` sets (0: no
//! explicit vectors, every vectorized loop keeps its pragma). Vector types of any width build on
//! every GCC or Clang target (a 512-bit vector becomes two 256-bit ones without AVX-512), so the
//! choice changes speed, never results; verification compares every kernel.

use crate::ir::{DType, Expr, LNode, Loop, Name, TNode, lower};

/// Most vectors an unrolled vector loop is cut into.
pub const MAX_BLOCKS: i64 = 16;

/// What the generated C may assume about the machine's vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// The width of the widest vector registers, in bits (0: no explicit vectors).
    pub vector_bits: u32,
}

impl Target {
    /// The vectors of `m` (`runtime::machine`: the host's widest, or the width `TEML_MACHINE` or
    /// `TEML_VECTOR_BITS` sets).
    pub fn of(m: &crate::runtime::machine::Machine) -> Target {
        Target { vector_bits: m.vector_bits }
    }

    /// The vectors of this machine ([`crate::runtime::machine::Machine::current`]).
    pub fn native() -> Target {
        Target::of(&crate::runtime::machine::Machine::current())
    }

    /// Lanes of a full vector of `dtype` (1: no explicit vectors).
    pub fn lanes(&self, dtype: DType) -> usize {
        let bytes = (self.vector_bits / 8) as usize;
        let elem = dtype.size();
        (bytes / elem).max(1)
    }
}

/// How the lanes of a vectorized loop are printed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lanes {
    /// A constant trip count cut into blocks `(offset from the lower bound, lanes)`; a block of
    /// one lane is a scalar copy of the body.
    Unrolled {
        /// The element type of every access.
        dtype: DType,
        /// The blocks, in order.
        blocks: Vec<(i64, usize)>,
    },
    /// A loop by `width` lanes while a whole vector fits, then a scalar remainder loop.
    Strided {
        /// The element type of every access.
        dtype: DType,
        /// Lanes per step.
        width: usize,
    },
}

/// The element type of a vectorized loop whose body can be printed with explicit vectors, or
/// why it cannot: the structural conditions, independent of the target.
pub fn contiguous(l: &Loop, layouts: &Layouts) -> Result<DType, String> {
    contiguous_summing(l, &[], layouts)
}

/// The tensors of a nest stored in another layout ([`crate::ir::Nest::layouts`]): lanes are
/// contiguous where they are in the buffer.
pub type Layouts = std::collections::BTreeMap<Name, crate::ir::Layout>;

/// [`contiguous`] for a loop inside a band that keeps `sums` in registers: a `+=` into an
/// element of one of them that every lane adds to (a reduction across the lanes) is allowed (a
/// band keeps that element as a vector of partial sums, one per lane, added up when it is
/// stored: `registers`, rfactor), and so are their lanes along any one dimension ([`gathered`]:
/// the band loads such a vector lane by lane before it and stores it lane by lane after).
pub fn contiguous_summing(l: &Loop, sums: &[Name], layouts: &Layouts) -> Result<DType, String> {
    let mut dtype: Option<DType> = None;
    for x in &l.body {
        let LNode::Stmt(s) = x else {
            return Err(format!("loop `{}` has a loop inside", l.iter));
        };
        let lw = lower(s).ok_or_else(|| format!("`{s}` is not an assignment"))?;
        let mut leaves: Vec<(&TNode, bool)> = vec![(&lw.target, true)];
        let mut reads: Vec<TNode> = Vec::new();
        lw.rhs.visit(&mut |n| {
            if n.is_tensor_leaf() {
                reads.push(n.clone());
            }
        });
        leaves.extend(reads.iter().map(|r| (r, false)));
        for (leaf, write) in leaves {
            let lanes = lane_type(leaf.dtype, write).map_err(|why| {
                format!(
                    "{why}, and `{}` is {}",
                    leaf.id().map(|t| t.to_string()).unwrap_or_default(),
                    leaf.dtype
                )
            })?;
            match dtype {
                None => dtype = Some(lanes),
                Some(d) if d != lanes => {
                    return Err(format!(
                        "loop `{}` mixes {d} and {lanes} lanes ({} elements)",
                        l.iter, leaf.dtype
                    ));
                }
                _ => {}
            }
            let summed = write
                && lw.update == crate::ir::Update::Add
                && leaf.id().is_some_and(|t| sums.contains(t))
                && !leaf.index_list().unwrap_or(&[]).iter().any(|x| x.mentions(&l.iter));
            if !summed
                && let Err(why) = lane_access(leaf, &l.iter, write, layouts)
                && !(leaf.id().is_some_and(|t| sums.contains(t)) && gathered(leaf, &l.iter).is_some())
            {
                return Err(why);
            }
        }
    }
    let dtype = dtype.ok_or_else(|| format!("loop `{}` accesses no tensor", l.iter))?;
    if dtype.is_integer() {
        // Integer lanes take the arithmetic of the statements as written: no literal (a
        // double beside integer vectors), no quotient (the real one) and no call.
        for x in &l.body {
            if let LNode::Stmt(s) = x
                && let Some(lw) = lower(s)
            {
                let mut other = None;
                lw.rhs.visit(&mut |n| {
                    if matches!(n.op, crate::ir::Op::Lit(_) | crate::ir::Op::Div | crate::ir::Op::Call(_)) {
                        other.get_or_insert_with(|| n.to_string());
                    }
                });
                if let Some(n) = other {
                    return Err(format!(
                        "integer lanes hold products and sums of elements, and `{s}` has `{n}`"
                    ));
                }
            }
        }
    }
    Ok(dtype)
}

/// The lanes an element of `stored` type is computed in: doubles in double lanes, floats and
/// bf16s in float lanes (a bf16 read is widened, 8 or 16 at a time), the integers in i32 lanes
/// (an 8-bit read is widened: u8 by zeros, i8 by its sign). A store holds its lanes' own type
/// (a narrowing store of lanes is not written), and f16 has no lanes.
pub fn lane_type(stored: DType, write: bool) -> Result<DType, String> {
    if write && stored.is_narrow() {
        return Err("explicit vectors store double, float or i32 lanes".into());
    }
    if stored == DType::F16 {
        return Err("explicit vectors widen bf16, i8 and u8 reads, not f16".into());
    }
    Ok(stored.compute())
}

/// Whether `leaf` is a lane access of the loop over `iter` (`Some(true)`: contiguous,
/// `Some(false)`: a broadcast read), or why not. A tensor whose buffer holds its dimensions in
/// another order (`permute_layout`) is asked where its buffer is contiguous: `Q[i][k]` stored
/// as `[k][i]` is a lane access of `i`. (A regrouped one is asked of its declared rows, which
/// code generation accepts where the layout keeps them.)
pub fn lane_access(leaf: &TNode, iter: &str, write: bool, layouts: &Layouts) -> Result<bool, String> {
    let declared: &[Expr] = leaf.index_list().unwrap_or(&[]);
    let buffer;
    let index: &[Expr] = match leaf.id().and_then(|t| layouts.get(t)) {
        Some(lay) if lay.regroup.is_none() && !lay.keeps_rows(declared.len()) => {
            buffer = lay.map(declared);
            &buffer
        }
        _ => declared,
    };
    let strided = || format!("{} is not contiguous in `{iter}`", leaf.access());
    let (last, rest) = match index.split_last() {
        Some((last, rest)) => (Some(last), rest),
        None => (None, index),
    };
    if rest.iter().any(|x| x.mentions(iter)) {
        return Err(strided());
    }
    let Some(last) = last.filter(|x| x.mentions(iter)) else {
        return if write {
            Err(format!("{} is written at one element by every lane of `{iter}`", leaf.access()))
        } else {
            Ok(false)
        };
    };
    if !last.is_affine() || last.coeff(iter) != 1 {
        return Err(strided());
    }
    Ok(true)
}

/// The dimension along which the lanes of the loop over `iter` run through `leaf`, where they
/// are not its rows: exactly one declared index mentions `iter`, with coefficient 1 (lanes `o`
/// of `O[n][o][h][w]`, 49 elements apart in a 7 x 7 image). A band keeps such lanes in one
/// vector register, loaded and stored lane by lane once around it (TVM's accumulators of a
/// cache_write across a strided axis); anywhere else they stay behind the pragma.
pub fn gathered(leaf: &TNode, iter: &str) -> Option<usize> {
    let index = leaf.index_list()?;
    let mut at = index.iter().enumerate().filter(|(_, x)| x.mentions(iter));
    let (dim, x) = at.next()?;
    (at.next().is_none() && x.is_affine() && x.coeff(iter) == 1).then_some(dim)
}

/// The trip count of `l` where it is a constant whatever the named constants are (the C a
/// kernel prints stays right when a `-D` changes them).
pub fn constant_trip(l: &Loop) -> Option<i64> {
    let span = l.ub.checked_sub(&l.lb).ok()?;
    let d = span.as_const()?;
    Some(if d < 0 { 0 } else { d + 1 })
}

/// A loop of at most `trip` iterations from its lower bound: a constant trip count, or the
/// block `[e, min(e + trip - 1, u, ...)]` that strip-mining by a factor that does not divide
/// the extent leaves (full except the last one).
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// Iterations of a full block.
    pub trip: i64,
    /// The upper bound of a full block (`e + trip - 1`).
    pub full_ub: Expr,
    /// When the block is full: `full_ub <= u` for each other argument `u` of the `min` (empty
    /// for a constant trip count).
    pub full_when: Vec<(Expr, Expr)>,
}

/// `l` as a [`Block`], if it is one.
pub fn block(l: &Loop) -> Option<Block> {
    if let Some(trip) = constant_trip(l) {
        return Some(Block { trip, full_ub: l.ub.clone(), full_when: Vec::new() });
    }
    let (k, span) = block_arg(l)?;
    let args = l.ub.min_args()?;
    let full_ub = args[k].clone();
    let full_when =
        args.iter().enumerate().filter(|(j, _)| *j != k).map(|(_, u)| (full_ub.clone(), u.clone())).collect();
    Some(Block { trip: span + 1, full_ub, full_when })
}

/// The argument of `l`'s upper-bound `min` that is a constant `d >= 0` away from its lower
/// bound (the bound of a full strip-mined block): its position and `d`.
fn block_arg(l: &Loop) -> Option<(usize, i64)> {
    l.ub.min_args()?.iter().enumerate().find_map(|(k, a)| {
        let d = a.checked_sub(&l.lb).ok()?.as_const()?;
        (d >= 0).then_some((k, d))
    })
}

/// The upper bound of `l` as a full block: itself where affine, else the argument of its
/// `min` a constant away from the lower bound (any step).
pub fn full_ub(l: &Loop) -> Option<Expr> {
    if l.ub.is_affine() {
        return Some(l.ub.clone());
    }
    block_arg(l).and_then(|(k, _)| l.ub.min_args().map(|args| args[k].clone()))
}

/// True if the bounds of `l` do not depend on the values of any of `iters` (the loop's
/// blocks are the same at every iteration of those loops).
pub fn bounds_free_of(l: &Loop, iters: &[Name]) -> bool {
    iters.iter().all(|v| !l.bounds_mention(v))
}

/// How the vectorized loop `l` (which carries no dependence) is printed for `target`, or why
/// it keeps its pragma. `unrolled` asks for the unrolled form at any width (a loop whose lanes
/// [`super::registers`] keeps in registers): the blocks are then scalar copies where the target
/// has no vectors.
/// `sums` are the tensors whose elements a band keeps as partial sums across the lanes.
pub fn lanes(
    l: &Loop,
    target: &Target,
    unrolled: bool,
    sums: &[Name],
    layouts: &Layouts,
) -> Result<Lanes, String> {
    let dtype = contiguous_summing(l, sums, layouts)?;
    let width = target.lanes(dtype);
    if width < 2 && !unrolled {
        return Err("no explicit vectors for this target".into());
    }
    let trip = constant_trip(l);
    if let Some(n) = trip
        && (unrolled || n <= MAX_BLOCKS * width as i64)
    {
        if n > MAX_BLOCKS * width as i64 {
            return Err(format!(
                "loop `{}` runs {n} lanes: expected at most {} ({MAX_BLOCKS} vectors of {width})",
                l.iter,
                MAX_BLOCKS * width as i64
            ));
        }
        return Ok(Lanes::Unrolled { dtype, blocks: blocks(n, width) });
    }
    if unrolled {
        return Err(format!("loop `{}` has no constant trip count ({})", l.iter, l.range()));
    }
    Ok(Lanes::Strided { dtype, width })
}

/// `n` lanes cut into vectors of `width`, then halves, down to single lanes.
fn blocks(n: i64, width: usize) -> Vec<(i64, usize)> {
    let mut out = Vec::new();
    let (mut at, mut w) = (0i64, width.max(1));
    while at < n {
        while w > 1 && at + w as i64 > n {
            w /= 2;
        }
        out.push((at, w));
        at += w as i64;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_reads_are_widened_into_their_compute_lanes_and_never_stored() {
        assert_eq!(lane_type(DType::Bf16, false), Ok(DType::Float));
        assert_eq!(lane_type(DType::U8, false), Ok(DType::I32));
        assert_eq!(lane_type(DType::I8, false), Ok(DType::I32));
        assert_eq!(lane_type(DType::I32, true), Ok(DType::I32));
        assert_eq!(lane_type(DType::Float, true), Ok(DType::Float));
        assert!(lane_type(DType::Bf16, true).unwrap_err().contains("store double, float or i32 lanes"));
        assert!(lane_type(DType::I8, true).is_err());
        assert!(lane_type(DType::F16, false).unwrap_err().contains("not f16"));
    }

    #[test]
    fn lanes_are_cut_into_vectors_then_halves_then_scalars() {
        assert_eq!(blocks(24, 8), vec![(0, 8), (8, 8), (16, 8)]);
        assert_eq!(blocks(13, 8), vec![(0, 8), (8, 4), (12, 1)]);
        assert_eq!(blocks(3, 8), vec![(0, 2), (2, 1)]);
        assert_eq!(blocks(4, 1), vec![(0, 1), (1, 1), (2, 1), (3, 1)]);
    }

    #[test]
    fn target_lanes_follow_the_element_size() {
        let t = Target { vector_bits: 512 };
        assert_eq!(t.lanes(DType::Double), 8);
        assert_eq!(t.lanes(DType::Float), 16);
        assert_eq!(Target { vector_bits: 0 }.lanes(DType::Double), 1);
    }

    #[test]
    fn a_strip_mined_block_is_full_but_for_the_last() {
        let o = Expr::var("o");
        let lb = o.scale(16);
        let ub = Expr::min(&lb.add_int(15), &Expr::var("N").add_int(-1));
        let l = Loop { iter: "j".into(), lb: lb.clone(), ub, annot: Default::default(), body: Vec::new() };
        let b = block(&l).unwrap();
        assert_eq!((b.trip, b.full_ub.clone()), (16, lb.add_int(15)));
        assert_eq!(b.full_when, vec![(lb.add_int(15), Expr::var("N").add_int(-1))]);
        let l = Loop { ub: lb.add_int(7), ..l };
        assert_eq!(block(&l).map(|b| (b.trip, b.full_when.len())), Some((8, 0)));
    }

    #[test]
    fn only_the_last_index_may_move_with_the_lanes() {
        use crate::ir::{Iters, Op, Shape};
        let leaf = |xs: Vec<Expr>| {
            TNode::leaf(
                Op::Id("A".into()),
                Shape::known(vec![Expr::int(4), Expr::int(4)]),
                Iters::List(xs),
                DType::Double,
            )
        };
        let (c, d) = (Expr::var("c"), Expr::var("d"));
        assert_eq!(lane_access(&leaf(vec![d.clone(), c.clone()]), "c", false, &Layouts::new()), Ok(true));
        assert_eq!(lane_access(&leaf(vec![d.clone(), d.clone()]), "c", false, &Layouts::new()), Ok(false));
        assert!(lane_access(&leaf(vec![c.clone(), d.clone()]), "c", false, &Layouts::new()).is_err());
        assert!(lane_access(&leaf(vec![d.clone(), c.scale(2)]), "c", false, &Layouts::new()).is_err());
        assert!(lane_access(&leaf(vec![d.clone(), d]), "c", true, &Layouts::new()).is_err());
    }
}
