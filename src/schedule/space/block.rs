//! The register_block, lane_block and gathered_block sketches: a block of the result in
//! vector registers across the reductions (lanes along the contiguous loop, or gathered along
//! another), its sizes from the registers, and the outer loops on threads.

use super::*;

/// The register block's plan: the lane loop and the row candidates.
pub(super) struct Block {
    pub(super) target: Name,
    pub(super) lane_level: usize,
    pub(super) lane_iter: Name,
    pub(super) lane_extent: i64,
    /// (level, iterator, extent, reason), best first.
    pub(super) rows: Vec<(usize, Name, i64, String)>,
    /// Innermost loops (after the rows and the lanes) with a small constant extent.
    pub(super) windows: Vec<(Name, i64)>,
    pub(super) dtype: crate::ir::DType,
    /// Operands stored with the lanes' dimension last (`permute_layout`): tensor and order.
    pub(super) layouts: Layouts,
    /// Lanes along a loop the result is not contiguous in: its vectors gathered and stored
    /// lane by lane around the block.
    pub(super) gather: Option<Gather>,
}

/// Operands and the order of their dimensions `permute_layout` stores them in.
pub(super) type Layouts = Vec<(Name, Vec<usize>)>;

/// The lanes of a gathered block ([`gathered_plan`]).
pub(super) struct Gather {
    /// Why these lanes.
    pub(super) why: String,
}

/// The layouts that make every operand of `w` (but the result `t`) that varies along `lane`
/// contiguous in it, or `None`: each strided one must be a tensor the kernel only reads, whose
/// one index along the loop is the loop's iterator, every access of it alike, used at least 16
/// times an element (converted once at entry: `permute_layout`, that dimension last).
pub(super) fn lane_layouts(w: &Workload, t: &Access, lane: &LoopInfo) -> Option<Layouts> {
    let written: Vec<&Name> = w.writes().map(|a| &a.tensor).collect();
    let instances: f64 = w.loops.iter().map(|l| l.mean_extent.max(1.0)).product();
    let mut layouts: Layouts = Vec::new();
    for a in w.reads().filter(|a| a.tensor != t.tensor) {
        if a.stride(&lane.iter) == Some(0) || a.contiguous_in(&lane.iter) {
            continue;
        }
        let at: Vec<usize> =
            a.index.iter().enumerate().filter(|(_, x)| x.mentions(&lane.iter)).map(|(k, _)| k).collect();
        let elements: f64 = a.dims.iter().map(|&d| d as f64).product();
        if at.len() != 1
            || a.index[at[0]] != crate::ir::Expr::var(&lane.iter)
            || written.contains(&&a.tensor)
            || a.dims.is_empty()
            || instances < 16.0 * elements
        {
            return None;
        }
        // Every access of the tensor runs along the loop in that dimension (after the
        // permutation, an access contiguous in the loop as declared would not be).
        if w.accesses.iter().filter(|b| b.tensor == a.tensor).any(|b| {
            b.index.len() != a.index.len()
                || b.index.iter().enumerate().any(|(k, x)| (k == at[0]) != x.mentions(&lane.iter))
        }) {
            return None;
        }
        let order: Vec<usize> = (1..=a.index.len()).filter(|&k| k != at[0] + 1).chain([at[0] + 1]).collect();
        match layouts.iter().find(|(n, _)| *n == a.tensor) {
            Some((_, o)) if *o != order => return None,
            Some(_) => {}
            None => layouts.push((a.tensor.clone(), order)),
        }
    }
    Some(layouts)
}

/// `n` and the noun, plural but for one.
pub(super) fn plural(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// A block of lanes without rows ([`lane_plan`]).
pub(super) struct LaneBlock {
    pub(super) target: Name,
    pub(super) lane_level: usize,
    pub(super) lane_iter: Name,
    pub(super) lane_extent: i64,
    /// The loops after the lanes (reductions the block stays in registers across).
    pub(super) reductions: Vec<String>,
    /// The result's element type (the lanes a vector holds).
    pub(super) dtype: crate::ir::DType,
}

/// A register block of lanes alone, where the result has no second data-parallel loop to
/// take rows from (`Y[i] += X[i+k] * F[k]`): the lane loop contiguous in the result and in
/// every operand that varies along it, every loop after it a reduction of the result. Without
/// it the reduction stays innermost, and gcc, which vectorizes the sequential program along
/// `i`, does not once the loop is on threads (4.2M x 32 FIR: 62 ms on threads, 23 ms as written,
/// 4.8-5.5 ms as a block of 32 lanes; Intel Xeon AVX-512).
pub(super) fn lane_plan(w: &Workload, t: &Access, m: &Machine) -> Option<LaneBlock> {
    let lanes = m.lanes(t.dtype).max(1) as i64;
    let lane = w.loops.iter().find(|l| {
        l.kind == Parallelism::Independent
            && t.contiguous_in(&l.iter)
            && l.extent.is_some_and(|e| e >= lanes)
            && w.reads_in_lanes(&l.iter)
    })?;
    let after: Vec<&LoopInfo> = w.loops.iter().filter(|l| l.level > lane.level).collect();
    if after.is_empty()
        || after
            .iter()
            .any(|l| l.kind != Parallelism::Reduction || t.index.iter().any(|x| x.mentions(&l.iter)))
    {
        return None;
    }
    Some(LaneBlock {
        target: t.tensor.clone(),
        lane_level: lane.level,
        lane_iter: lane.iter.clone(),
        lane_extent: lane.extent.unwrap_or(0),
        reductions: after.iter().map(|l| l.iter.to_string()).collect(),
        dtype: t.dtype,
    })
}

/// The lanes' loop strip-mined by `nr` and its block moved innermost, in lanes, the result's
/// vectors kept in registers across the reductions; the outermost loop on threads.
pub(super) fn lane_block(out: &mut Out, w: &Workload, b: &LaneBlock, m: &Machine) {
    let lanes = m.lanes(b.dtype).max(1);
    let e = b.lane_extent.max(1) as usize;
    // Four vectors first: four independent chains of multiply-adds, each step one broadcast
    // and four loads (32 lanes: 4.8 ms against 7.2 for 16 and 5.3 for 64 on the FIR above).
    let mut nrs: Vec<Choice> = Vec::new();
    for v in [4, 8, 2, 1] {
        let n = v * lanes;
        if n <= e || nrs.is_empty() {
            let n = n.min(e);
            let tail = if e.is_multiple_of(n) {
                plural(e / n, "whole block")
            } else {
                format!("{} and a last one of {}", plural(e / n, "block"), e % n)
            };
            if !nrs.iter().any(|c| c.value == n.to_string()) {
                nrs.push(choice(
                    n,
                    format!("{n} lanes: {} in registers; {tail}", plural(n.div_ceil(lanes), "vector")),
                ));
            }
        }
    }
    out.param("nr", "nr", &format!("iterations of {} in vector lanes", b.lane_iter), nrs);
    let d = w.loops.len();
    let l = b.lane_level;
    out.stmt(step("stripmine", vec![int(l), local("nr")]));
    // The block's loop, the reductions, then the lanes innermost.
    let order: Vec<usize> = (1..=l).chain(l + 2..=d + 1).chain([l + 1]).collect();
    if l < d {
        out.stmt(step("permute", vec![ints(&order)]));
    }
    out.stmt(step("vectorize", vec![int(d + 1)]));
    out.stmt(step("registers", vec![int(l + 1), value(&b.target)]));
    let first = &w.loops[0];
    if first.kind == Parallelism::Independent {
        let blocks = if l == 1 { format!("the blocks of {}", first.iter) } else { first.iter.to_string() };
        out.param(
            "parallel",
            "parallel",
            "the outer loop on threads",
            vec![choice("\"outer\"", format!("{blocks} on threads")), choice("\"none\"", "one thread")],
        );
        out.stmt(S::If(local("parallel").eq(text("outer")), vec![step("parallelize", vec![int(1)])]));
    }
}

/// The register block of a result `t`: its lanes along the first data-parallel loop that is
/// contiguous in it and in every operand (or in the operand's layout for the kernel), its rows
/// by [`block_rows`].
pub(super) fn block_plan(w: &Workload, t: &Access) -> Option<Block> {
    // Lanes along a loop contiguous in the result and in every operand that varies along it,
    // or in its layout for the kernel (a strided operand cannot be loaded as a vector:
    // `registers` refuses it): attention's `A[b][h][i][j] = sum_d Q[b][h][i][d] K[b][h][j][d]`
    // with K stored [b][h][d][j], 8-13 ms against 25-80 ms for the block gathered along `i`
    // (Q stored [b][h][d][i], its 64 rows 2 KiB apart), Intel Xeon AVX-512.
    let (lane, layouts) = w.loops.iter().find_map(|l| {
        if l.kind != Parallelism::Independent || !t.contiguous_in(&l.iter) || l.extent.is_none_or(|e| e < 2) {
            return None;
        }
        Some((l, lane_layouts(w, t, l)?))
    })?;
    block_rows(w, t, lane, false, None, layouts)
}

/// Useful lanes per vector operation of a block's first lane choice ([`register_block`]'s
/// `nr`): 7 lanes of 8 are three pieces (4 + 2 + 1), 2.3 a piece; 16 of 32 are two whole ones.
pub(super) fn lanes_per_op(b: &Block, m: &Machine) -> f64 {
    let nr = first_nr(b.lane_extent.max(1) as usize, m.lanes(b.dtype).max(1), m.registers.max(8));
    nr as f64 / m.pieces(nr, b.dtype).max(1) as f64
}

/// The model's lanes of a block whose lane loop runs `e` iterations: all of them where they are
/// at most four vectors (no loop left, and no last, partial block, which would run without
/// registers: 28-wide rows in blocks of 16 leave one of 12); else, of the one to four vectors
/// that divide the loop (no last block without registers: a 200-wide mttkrp block of 16 lanes
/// was twice as slow as one of 8), the most multiply-adds per load ([`fma_per_load`]: bmm's
/// 72-wide rows as 3 vectors x 8 rows, 24 accumulators, not 1 vector x 8 rows, which loads a
/// broadcast for every multiply-add: 51-53 against 71-74 ms, Intel Xeon AVX-512); two vectors
/// where none divides.
pub(super) fn first_nr(e: usize, lanes: usize, regs: usize) -> usize {
    if e <= 4 * lanes {
        return e;
    }
    (1..=4usize)
        .filter(|&v| e.is_multiple_of(v * lanes))
        .max_by(|&a, &b| fma_per_load(a, regs).total_cmp(&fma_per_load(b, regs)))
        .map_or(2 * lanes, |v| v * lanes)
}

/// Multiply-adds per load of a block of `v` vectors a row and as many rows (at most 8) as
/// leave a register for the operand's vectors and one for a broadcast: each step of the
/// reduction loads `v` vectors and broadcasts one element a row, for `rows x v` multiply-adds.
pub(super) fn fma_per_load(v: usize, regs: usize) -> f64 {
    let rows = (regs.saturating_sub(v + 1) / v).clamp(1, 8);
    (rows * v) as f64 / (rows + v) as f64
}

/// A register block whose lanes run along a data-parallel loop the result is not contiguous
/// in (gconv's output channels `o` of `O[n][g][o][h][w]` where the 7-wide `w` fills a vector
/// badly): every operand that varies along it is contiguous in it, or is a tensor the kernel
/// only reads whose one index is that loop, stored with that dimension last (`permute_layout`:
/// the weights `W[g][o][c][kh][kw]` as `[g][c][kh][kw][o]`, converted once at entry, where each
/// element is used at least 16 times). The result's vectors are gathered before the reductions
/// and stored lane by lane after them (TVM's accumulators across a strided axis).
pub(super) fn gathered_plan(w: &Workload, t: &Access, m: &Machine) -> Option<Block> {
    let lanes = m.lanes(t.dtype).max(1) as i64;
    let mut found: Option<(&LoopInfo, Layouts)> = None;
    for l in &w.loops {
        let dims: Vec<usize> =
            t.index.iter().enumerate().filter(|(_, x)| x.mentions(&l.iter)).map(|(k, _)| k).collect();
        if l.kind != Parallelism::Independent
            || l.extent.is_none_or(|e| e < lanes)
            || t.contiguous_in(&l.iter)
            || dims.len() != 1
            || !t.index[dims[0]].is_affine()
            || t.index[dims[0]].coeff(&l.iter) != 1
        {
            continue;
        }
        let Some(layouts) = lane_layouts(w, t, l) else { continue };
        // A multiple of the lanes first, then the fewest elements to convert, then the longest.
        let converted = |ls: &[(Name, Vec<usize>)]| -> u64 {
            ls.iter()
                .filter_map(|(n, _)| w.reads().find(|a| a.tensor == *n))
                .map(|a| a.dims.iter().map(|&d| d as u64).product::<u64>())
                .sum()
        };
        let key = |x: &LoopInfo, ls: &[(Name, Vec<usize>)]| {
            let e = x.extent.unwrap_or(0);
            (e % lanes == 0, std::cmp::Reverse(converted(ls)), e)
        };
        if found.as_ref().is_none_or(|(f, fl)| key(l, &layouts) > key(f, fl)) {
            found = Some((l, layouts));
        }
    }
    let (lane, layouts) = found?;
    let moved: Vec<String> =
        layouts.iter().map(|(n, o)| format!("{n} stored with {} last ({o:?})", lane.iter)).collect();
    let why = format!(
        "{} ({}) in lanes, {}-apart in {}: each vector gathered before the reductions and stored after{}",
        lane.iter,
        lane.extent.unwrap_or(0),
        t.stride(&lane.iter).unwrap_or(0),
        t.tensor,
        if moved.is_empty() { String::new() } else { format!("; {}", moved.join(", ")) }
    );
    block_rows(w, t, lane, true, Some(Gather { why }), layouts)
}

/// The block with lanes along `lane`: its candidate rows (data-parallel loops of the result,
/// before the lanes unless `any_side`), best first, and the small windows after them.
pub(super) fn block_rows(
    w: &Workload,
    t: &Access,
    lane: &LoopInfo,
    any_side: bool,
    gather: Option<Gather>,
    layouts: Layouts,
) -> Option<Block> {
    let mut rows = Vec::new();
    for l in &w.loops {
        if (l.level >= lane.level && !any_side)
            || l.level == lane.level
            || l.kind != Parallelism::Independent
            || !t.index.iter().any(|x| x.mentions(&l.iter))
            || l.extent.is_none_or(|e| e < 2)
        {
            continue;
        }
        // The block stays in registers across every loop after its rows' and lanes' blocks:
        // none of them may index the result (rows `h` before a convolution's `w`, with lanes
        // along its channels, would keep a row of `w` in registers across `w`).
        let last = l.level.max(lane.level);
        if w.loops.iter().any(|x| x.level > last && t.index.iter().any(|e| e.mentions(&x.iter))) {
            continue;
        }
        // Per row of the block: operands loaded as vectors (they depend on the row and on the
        // lanes), broadcast (the row only) or shared by every row (not the row).
        let reads: Vec<&Access> = w.reads().filter(|a| a.tensor != t.tensor).collect();
        let vectors =
            reads.iter().filter(|a| a.stride(&l.iter) != Some(0) && a.stride(&lane.iter) != Some(0)).count();
        let shared = reads.iter().filter(|a| a.stride(&l.iter) == Some(0)).count();
        let mut why = Vec::new();
        for a in &reads {
            let r = a.stride(&l.iter) == Some(0);
            let v = a.stride(&lane.iter) != Some(0);
            why.push(match (r, v) {
                (true, _) => format!("{} shared by every row", a.tensor),
                (false, false) => format!("{} one broadcast a row", a.tensor),
                (false, true) => format!("{} one vector load a row", a.tensor),
            });
        }
        // Gathered lanes: rows that read neighbouring elements of the broadcast operands first
        // (gconv's `w`: I[..][w+kw] one cache line for the whole block).
        let near: i64 = if gather.is_some() {
            reads
                .iter()
                .map(|a| a.stride(&l.iter).map_or(1 << 20, |s| s.abs().min(1 << 20)))
                .max()
                .unwrap_or(0)
        } else {
            0
        };
        rows.push((
            vectors,
            std::cmp::Reverse(shared),
            near,
            l.level,
            l.iter.clone(),
            l.extent.unwrap_or(0),
            why.join(", "),
        ));
    }
    if rows.is_empty() {
        return None;
    }
    rows.sort_by_key(|r| (r.0, r.1, r.2, std::cmp::Reverse(r.5)));
    rows.truncate(3);
    let after = rows.iter().map(|r| r.3).max().unwrap_or(0).max(lane.level);
    let mut windows = Vec::new();
    for l in w.loops.iter().rev() {
        if l.level <= after || l.extent.is_none_or(|e| e > 4) {
            break;
        }
        windows.push((l.iter.clone(), l.extent.unwrap_or(0)));
    }
    Some(Block {
        target: t.tensor.clone(),
        lane_level: lane.level,
        lane_iter: lane.iter.clone(),
        lane_extent: lane.extent.unwrap_or(0),
        rows: rows.into_iter().map(|r| (r.3, r.4, r.5, r.6)).collect(),
        windows,
        dtype: t.dtype,
        layouts,
        gather,
    })
}

/// The register block's `nr` (lanes: `first_nr` first, then one to four vectors) and `mr` (as
/// many rows as the registers hold accumulators for); the model's rows.
pub(super) fn block_sizes(out: &mut Out, b: &Block, m: &Machine) -> usize {
    let lanes = m.lanes(b.dtype).max(1);
    let regs = m.registers.max(8);
    let e = b.lane_extent as usize;
    let max_rows = b.rows.first().map_or(8, |r| r.2 as usize);
    let mut nr0 = first_nr(e, lanes, regs);
    // With 16 registers (no AVX-512), every row's accumulators, the shared operand's vectors and
    // a broadcast must fit: where all the rows do not at this width, fewer vectors a row that
    // hold them all come first (gconv at NB=G=CO=CI=32, 7x7: 7 rows x 1 vector 16.2 ms
    // against 7 x 2 vectors 22-30 ms and 6 + 1 rows x 2 vectors 36 ms; Zen 3, AVX2). With 32
    // registers all the rows' accumulators win even where they take every register (below).
    let fits = |v: usize| max_rows * v + v < regs;
    let wider = m.pieces(nr0, b.dtype).max(1);
    let narrower = (regs < 32 && max_rows <= 8 && !fits(wider))
        .then(|| (1..wider).rev().find(|&v| fits(v) && e.is_multiple_of(v * lanes)))
        .flatten();
    let narrowed = narrower.is_some();
    if let Some(v) = narrower {
        nr0 = v * lanes;
    }
    let mut nrs: Vec<Choice> = Vec::new();
    let whole = choice(
        e,
        format!(
            "all {e} iterations of {} in lanes ({} vectors of up to {lanes} lanes): no loop left",
            b.lane_iter,
            m.pieces(e, b.dtype)
        ),
    );
    if nr0 == e {
        nrs.push(whole.clone());
    }
    let mut ns = vec![nr0];
    ns.extend([2 * lanes, lanes, 3 * lanes, 4 * lanes].into_iter().filter(|&n| n != nr0));
    for n in ns {
        if n < e {
            let tail = if e.is_multiple_of(n) {
                plural(e / n, "whole block")
            } else {
                format!("{} and a last one of {} without registers", plural(e / n, "block"), e % n)
            };
            let v = n / lanes;
            let fit = if narrowed && n == nr0 {
                format!(
                    "; {max_rows} rows of {} each, the operand's {} and a broadcast fit {regs} registers",
                    plural(v, "accumulator"),
                    plural(v, "vector")
                )
            } else {
                String::new()
            };
            nrs.push(choice(n, format!("{n} lanes ({}) a row: {tail}{fit}", plural(v, "vector"))));
        }
    }
    if narrowed && e <= 4 * lanes {
        // The width first_nr chose, second.
        nrs.insert(1, whole);
    }
    out.param("nr", "nr", &format!("iterations of {} in vector lanes", b.lane_iter), nrs.clone());
    let pieces = m.pieces(nr0, b.dtype).max(1);
    let top = ((regs - pieces - 1) / pieces).clamp(1, 8);
    // All the rows where their accumulators fit the registers: a last, partial block of rows
    // would run without registers (8 rows as 6 + 2 leaves a quarter of the work there), which
    // costs more than the operand or the one accumulator the compiler then keeps in L1 (gconv,
    // 8 rows x 4 vectors against 6: 6.1-6.4 ms against 8.8-9.9 ms, Zen 4).
    let all = (regs / pieces).clamp(1, 8);
    let mut mrs = vec![if max_rows <= all { max_rows } else { top.min(max_rows) }];
    for r in [4, 8, 2, 6] {
        if r <= max_rows {
            mrs.push(r);
        }
    }
    out.param(
        "mr",
        "mr",
        "rows of the block",
        mrs.iter()
            .map(|&r| {
                choice(
                    r,
                    format!(
                        "{r} rows x {} = {} accumulators of {regs} registers",
                        plural(pieces, "vector"),
                        r * pieces
                    ),
                )
            })
            .collect(),
    );
    mrs[0]
}

pub(super) fn register_block(out: &mut Out, w: &Workload, b: &Block, m: &Machine) {
    let rows: Vec<Choice> =
        b.rows.iter().map(|(lv, it, e, why)| choice(lv, format!("{it} ({e}): {why}"))).collect();
    out.param("rows", "rows", "the loop unrolled and jammed into the block's rows", rows);
    let mr = block_sizes(out, b, m);
    for (tensor, order) in &b.layouts {
        out.stmt(step("permute_layout", vec![text(tensor), ints(order)]));
    }
    out.stmt(step(
        "register_block",
        vec![value(&b.target), local("rows"), int(b.lane_level), local("mr"), local("nr")],
    ));
    // Small windows right above the block: unrolled, innermost first.
    if !b.windows.is_empty() {
        let names: Vec<String> = b.windows.iter().map(|(n, e)| format!("{n} ({e})")).collect();
        let size: i64 = b.windows.iter().map(|(_, e)| e).product();
        let mut us = vec![choice(
            0,
            format!(
                "the window {} kept as loops (the C compiler unrolls short constant loops itself; the path stays short)",
                names.join(" x ")
            ),
        )];
        if size <= 16 {
            us.push(choice(
                b.windows.len(),
                format!(
                    "the window {} unrolled: {size} copies of the block's multiply-adds, no loop",
                    names.join(" x ")
                ),
            ));
        }
        if b.windows.len() > 1 {
            us.push(choice(1, format!("{} unrolled", names[0])));
        }
        out.param("unroll", "unroll", "small reduction loops above the block, unrolled", us);
        out.stmt(let_("d", int(w.loops.len())));
        out.stmt(S::For(
            "k".into(),
            int(0).to(local("unroll")),
            vec![step("unroll", vec![local("d").minus(local("k"))])],
        ));
    }
    if let Some((k, level, x, y)) = block_groups(w, b) {
        super::tile::dot_groups(out, &k, level, m, x, y);
    }
    parallel_outer(out, w, b, mr, m);
}

/// The reduction a block's product can sum in dot-product groups: the first reduction after
/// the rows and the lanes (its level unchanged by `register_block`, which moves only those two
/// inward) that indexes both operands of a product of bf16 or bytes, and those operands' types
/// (the broadcast one's, the lanes one's). A window unrolled (`unroll`) stays inside it.
fn block_groups(w: &Workload, b: &Block) -> Option<(Name, usize, crate::ir::DType, crate::ir::DType)> {
    let reads: Vec<&Access> = w.reads().filter(|a| a.tensor != b.target).collect();
    let [p, q] = reads.as_slice() else { return None };
    crate::analysis::dot::group(p.dtype, q.dtype)?;
    let after = b.rows.iter().map(|r| r.0).chain([b.lane_level]).max()?;
    let k = w.loops.iter().find(|l| {
        l.level > after
            && l.kind == Parallelism::Reduction
            && !b.windows.iter().any(|(n, _)| *n == l.iter)
            && [p, q].iter().all(|a| a.index.iter().any(|x| x.mentions(&l.iter)))
    })?;
    // The broadcast operand does not vary with the lanes.
    let lanes = |a: &Access| a.index.iter().any(|x| x.mentions(&b.lane_iter));
    let (x, y) = match (lanes(p), lanes(q)) {
        (false, true) => (p, q),
        (true, false) => (q, p),
        _ => return None,
    };
    Some((k.iter.clone(), k.level, x.dtype, y.dtype))
}

/// Threads for the register block's outer loops: the outermost, or it and the next collapsed.
/// `mr`: the model's rows of the block.
pub(super) fn parallel_outer(out: &mut Out, w: &Workload, b: &Block, mr: usize, m: &Machine) {
    // After register_block the outer loops keep their order (the rows' and lanes' blocks in
    // the place of the rows and the lanes): level 1 is the first loop, or its blocks.
    let Some(first) = w.loops.first() else { return };
    let second = w.loops.get(1);
    let e1 = first.extent.unwrap_or(1);
    let cores = m.cores.max(1) as i64;
    let dp = |l: &LoopInfo| l.kind == Parallelism::Independent;
    let mut ch = Vec::new();
    let collapse_ok = dp(first) && second.is_some_and(|s| dp(s) && s.level != b.lane_level);
    // The model's rows' blocks as the second loop, with a last, partial block: collapsed, that
    // loop cannot be split where the partial block starts, and its guards keep every block
    // out of registers (a convolution's 64 output channels in blocks of 6 behind its batch:
    // 17-23 ms collapsed, 3.9 ms with the batch alone on threads; Intel Xeon AVX-512).
    let partial = b.rows.first().is_some_and(|(level, _, e, _)| {
        second.is_some_and(|s| s.level == *level) && mr > 0 && *e % mr as i64 != 0
    });
    let one =
        choice("\"outer\"", format!("{} ({e1}) on threads: {} iterations a core", first.iter, e1 / cores));
    let two = second.map(|s| {
        choice(
            "\"collapse\"",
            format!(
                "{} and {} collapsed ({} iterations) on threads: balanced over {cores} cores",
                first.iter,
                s.iter,
                e1 * s.extent.unwrap_or(1)
            ),
        )
    });
    // A first loop with fewer iterations than cores (a convolution's batch of 1) leaves cores
    // idle on its own: the second loop on threads instead, which a partial block does not
    // stop (it is split where that block starts, as an unmarked loop is).
    let alone = second.filter(|_| collapse_ok && e1 < cores).map(|s| {
        choice(
            "\"second\"",
            format!(
                "{} ({}) on threads: {} has {e1} iteration{}, fewer than the {cores} cores",
                s.iter,
                s.extent.unwrap_or(1),
                first.iter,
                if e1 == 1 { "" } else { "s" }
            ),
        )
    });
    if collapse_ok && partial && e1 < cores {
        ch.extend(alone.clone());
        ch.extend(two.clone());
        ch.push(one.clone());
    } else if collapse_ok && !partial && (e1 < 8 * cores || e1 % cores != 0) {
        ch.extend(two.clone());
        ch.extend(alone.clone());
        ch.push(one.clone());
    } else {
        ch.push(one.clone());
        if collapse_ok {
            ch.extend(two);
        }
    }
    ch.push(choice("\"none\"", "one thread"));
    out.param("parallel", "parallel", "the outer loops on threads", ch);
    parallel_arms(out, alone.is_some());
}

/// `parallel`'s steps: the outer loop on threads, or it and the next collapsed, or (`second`)
/// the second loop alone.
pub(super) fn parallel_arms(out: &mut Out, second: bool) {
    out.stmt(S::If(local("parallel").eq(text("outer")), vec![step("parallelize", vec![int(1)])]));
    out.stmt(S::If(local("parallel").eq(text("collapse")), vec![step("collapse", vec![int(1), int(2)])]));
    if second {
        out.stmt(S::If(local("parallel").eq(text("second")), vec![step("parallelize", vec![int(2)])]));
    }
}
