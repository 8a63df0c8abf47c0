//! Two contractions of a lifted product computed block by block: the first (the producer)
//! fills a register block of its temporary, the second (the consumer) uses it at once, and the
//! temporary shrinks to that block (Halide's `compute_at` with its storage folded, TVM's
//! `compute_at` of a cache stage; TeIL's lifted mttkrp by hand). The producer keeps what lifting
//! saved (1.5x fewer operations for mttkrp and sddmm) without the temporary's trip through
//! memory that makes the unfused lifted product slower than the product as written.
//!
//! The rule reads two workloads, in program order, and says how to order both so that their
//! outer loops match: the rows' loop first, the other dimensions of the temporary, the lanes'
//! loop last; the producer's reductions after them.

use super::workload::{Access, LoopInfo, Workload};
use crate::ir::Name;
use crate::ops::explore::Parallelism;

/// How the two contractions are ordered and fused.
#[derive(Clone, Debug, PartialEq)]
pub struct Chain {
    /// The temporary the producer writes and the consumer reads.
    pub temp: Name,
    /// The consumer's result.
    pub target: Name,
    /// The consumer's loops in the fused order (levels of the consumer as lifted): `permute`'s
    /// argument.
    pub consumer_order: Vec<usize>,
    /// The producer's loops: the same dimensions of the temporary, then its reductions.
    pub producer_order: Vec<usize>,
    /// Loops the two share (the temporary's dimensions): the fused levels after `register_block`.
    pub shared: usize,
    /// The producer's rows' and lanes' loops (its iterators).
    pub rows: Name,
    pub lanes: Name,
    /// The rows' loop's extent.
    pub rows_extent: i64,
    /// The shared loop after the rows' blocks, where it is data-parallel in both (a batch):
    /// its iterator and extent, for `collapse`.
    pub next_parallel: Option<(Name, i64)>,
    /// Why this order.
    pub why: String,
}

/// The iterator each index of `a` is, where every index is a distinct plain iterator.
fn plain(a: &Access) -> Option<Vec<Name>> {
    let v: Vec<Name> = a.index.iter().map(|x| x.as_var().cloned()).collect::<Option<_>>()?;
    let mut s = v.clone();
    s.sort();
    s.dedup();
    (s.len() == v.len()).then_some(v)
}

/// The fused order of a producer `p` and its consumer `c`, rows along `rows` (an iterator of
/// the producer), or `None` where the two do not chain: the consumer reads the temporary once,
/// each index a plain iterator; every consumer loop is a dimension of the temporary, with the
/// producer's extent (no iteration of the producer is computed twice); the producer's other
/// loops sum into the temporary; the lanes' loop is contiguous in the temporary and in the consumer's
/// result, and every other operand is contiguous in it or does not vary along it.
pub fn chain(p: &Workload, c: &Workload, rows: &str) -> Option<Chain> {
    let t = p.writes().next()?;
    let x = c.writes().next()?;
    let mut uses = c.reads().filter(|a| a.tensor == t.tensor);
    let (tr, None) = (uses.next()?, uses.next()) else { return None };
    // One statement each (the producer writes only the temporary), and the producer does not
    // read the consumer's result.
    if p.n_stmts != 1 || c.n_stmts != 1 || x.tensor == t.tensor || p.reads().any(|a| a.tensor == x.tensor) {
        return None;
    }
    let (pd, cd) = (plain(t)?, plain(tr)?);
    if pd.len() != cd.len() {
        return None;
    }
    // The iterator of the same dimension of the temporary on the other side.
    let across =
        |from: &[Name], to: &[Name], it: &str| from.iter().position(|d| **d == *it).map(|k| to[k].clone());
    for l in &c.loops {
        let k = cd.iter().position(|d| *d == l.iter)?;
        if p.find(&pd[k]).is_none_or(|q| q.extent != l.extent || l.extent.is_none()) {
            return None;
        }
    }
    if c.loops.len() != cd.len() {
        return None;
    }
    // The producer's other loops sum into the temporary: the temporary does not depend on
    // them and the statement reads it only as its own accumulator (isl may still call such a
    // loop carried where `parallelize` would refuse its reduction).
    let reductions: Vec<&LoopInfo> = p.loops.iter().filter(|l| !pd.contains(&l.iter)).collect();
    if reductions.is_empty()
        || reductions.iter().any(|l| l.kind == Parallelism::Independent)
        || p.reads().any(|a| a.tensor == t.tensor && a.index != t.index)
    {
        return None;
    }
    // Lanes: the temporary's last dimension, contiguous in the result too.
    let lanes_p = pd.last()?.clone();
    let lanes_c = cd.last()?.clone();
    let dp = |w: &Workload, it: &str| w.find(it).is_some_and(|l| l.kind == Parallelism::Independent);
    if !dp(c, &lanes_c) || !x.contiguous_in(&lanes_c) {
        return None;
    }
    if !p.reads_in_lanes(&lanes_p) || !c.reads_in_lanes(&lanes_c) {
        return None;
    }
    // Rows: a data-parallel loop of the result other than the lanes.
    let rows_c = across(&pd, &cd, rows)?;
    if rows_c == lanes_c || !dp(c, &rows_c) || !x.index.iter().any(|e| e.mentions(&rows_c)) {
        return None;
    }
    let mids = c.loops.iter().map(|l| l.iter.clone()).filter(|it| *it != rows_c && *it != lanes_c);
    let order_c: Vec<Name> = std::iter::once(rows_c.clone()).chain(mids).chain([lanes_c.clone()]).collect();
    let level = |w: &Workload, it: &str| w.find(it).map(|l| l.level);
    let consumer_order: Vec<usize> = order_c.iter().map(|it| level(c, it)).collect::<Option<_>>()?;
    let order_p: Vec<Name> = order_c.iter().map(|it| across(&cd, &pd, it)).collect::<Option<_>>()?;
    let producer_order: Vec<usize> = order_p
        .iter()
        .map(|it| level(p, it))
        .chain(reductions.iter().map(|l| Some(l.level)))
        .collect::<Option<_>>()?;
    let names = |v: &[Name]| v.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ");
    let red: Vec<Name> = reductions.iter().map(|l| l.iter.clone()).collect();
    let next_parallel = order_c.get(1).filter(|_| order_c.len() > 2).and_then(|it| {
        let l = c.find(it)?;
        (l.kind == Parallelism::Independent).then(|| (it.clone(), l.extent.unwrap_or(1)))
    });
    Some(Chain {
        rows_extent: c.find(&rows_c).and_then(|l| l.extent).unwrap_or(1),
        next_parallel,
        temp: t.tensor.clone(),
        target: x.tensor.clone(),
        shared: order_c.len(),
        consumer_order,
        producer_order,
        rows: rows.into(),
        lanes: lanes_p,
        why: format!(
            "both contractions over {} (blocks of rows and lanes), fused: each block of {} summed over {} in registers, then used at once by {}; {} stored a block at a time",
            names(&order_c),
            t.tensor,
            names(&red),
            x.tensor,
            t.tensor
        ),
    })
}
