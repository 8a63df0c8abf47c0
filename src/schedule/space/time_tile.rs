//! Time tiling of stencils: tiles skewed across the time loop where reuse reaches past the
//! caches, in wavefronts on threads (the rules for a nest whose outer loop is time).

use super::*;

/// Whether some element or cache line is used again only after more than `bytes` of other
/// data: a loop that is not innermost carries reuse (an access that does not vary along it, two
/// accesses of one tensor apart along it as a stencil's rows, or an access contiguous along it
/// and not along the innermost, as a transposition's) and one of its iterations touches more
/// than `bytes` (mm's `i`: all of B; a transposition's `i`: a column, a cache line an element;
/// not blur's `i`: three rows).
pub(super) fn reuse_beyond(w: &Workload, bytes: u64) -> bool {
    let Some(innermost) = w.loops.last() else { return false };
    let d = w.loops.len();
    (0..d - 1).any(|v| {
        let it = &w.loops[v].iter;
        let inner = &w.loops[v + 1..];
        // An access that does not vary along this loop nor along a loop inside it (before the
        // innermost) is used again at that inner loop, after little data, and stays in cache
        // (ttv's `x[k]` under `i` and `j`): its reuse across this loop is no reason to tile.
        let between = &w.loops[v + 1..d - 1];
        let carries = w.accesses.iter().any(|a| {
            (a.stride(it) == Some(0) && between.iter().all(|u| a.stride(&u.iter) != Some(0)))
                || (a.contiguous_in(it) && !a.contiguous_in(&innermost.iter))
                || w.accesses.iter().any(|b| {
                    b.tensor == a.tensor && b.index != a.index && a.index.iter().any(|x| x.mentions(it))
                })
        });
        // One iteration's footprint: each access's elements over the inner loops it varies
        // along, a cache line each where the innermost loop does not walk it contiguously; a
        // tensor's accesses counted once for each distinct index along this loop (a 3 x 3
        // stencil's nine accesses are three rows).
        let size = |a: &Access| -> f64 {
            let n: f64 = inner
                .iter()
                .filter(|l| a.stride(&l.iter) != Some(0))
                .map(|l| l.mean_extent.max(1.0))
                .product();
            let unit = if a.contiguous_in(&innermost.iter) || a.stride(&innermost.iter) == Some(0) {
                a.dtype.size() as f64
            } else {
                64.0
            };
            n * unit
        };
        let mut tensors: Vec<&Name> = w.accesses.iter().map(|a| &a.tensor).collect();
        tensors.sort();
        tensors.dedup();
        let touched: f64 = tensors
            .iter()
            .map(|t| {
                let of: Vec<&Access> = w.accesses.iter().filter(|a| a.tensor == **t).collect();
                let mut keys: Vec<Vec<String>> = of
                    .iter()
                    .map(|a| a.index.iter().filter(|x| x.mentions(it)).map(|x| x.to_string()).collect())
                    .collect();
                keys.sort();
                keys.dedup();
                of.iter().map(|a| size(a)).fold(0.0, f64::max) * keys.len() as f64
            })
            .sum();
        carries && touched > bytes as f64
    })
}

/// Whether a block has nothing to keep or share: every loop data-parallel, every access
/// varying along every loop and contiguous along the innermost; `Some(true)` where each tensor
/// has one index, so that every element is used once (coars's `C[i][j] = Ixx[i][j] *
/// Iyy[i][j] - ...`), `Some(false)` where a tensor is read at several offsets (blur's 3 x 3
/// stencil). Not a transposition (its blocks turn columns into rows), not a rank update's
/// `u[i] * v[j]` (its rows share `v`).
pub(super) fn in_order(w: &Workload) -> Option<bool> {
    let inner = w.loops.last()?;
    let ok = w.loops.iter().all(|l| l.kind == Parallelism::Independent)
        && w.accesses.iter().all(|a| {
            a.contiguous_in(&inner.iter) && w.loops.iter().all(|l| a.stride(&l.iter).is_some_and(|s| s != 0))
        });
    ok.then(|| {
        w.accesses.iter().all(|a| w.accesses.iter().all(|b| b.tensor != a.tensor || b.index == a.index))
    })
}

/// A stencil swept in place over time (seidel-2d's `t, i, j`): two or three loops, every one
/// carrying a dependence, the outermost used by no access, at least 4 time steps and 32
/// iterations of every other loop.
pub(super) fn time_tiled(w: &Workload) -> bool {
    let d = w.loops.len();
    (2..=3).contains(&d)
        && w.perfect
        && w.n_stmts == 1
        && w.loops.iter().all(|l| l.kind == Parallelism::Carried)
        && w.loops.iter().enumerate().all(|(k, l)| l.extent.is_some_and(|e| e >= if k == 0 { 4 } else { 32 }))
        && w.accesses.iter().all(|a| a.index.iter().all(|x| !x.mentions(&w.loops[0].iter)))
}

/// Time tiling: each loop skewed by every loop outside it (factor 1: a neighbour's value of
/// the step before, or of this step already updated, is then never in a later tile), the band
/// strip-mined on Pluto's tile lattice ("aligned") and its tile loops outermost; optionally
/// the tiles of one wavefront on threads. `permute` and the skews are checked by isl.
pub(super) fn time_tiles(out: &mut Out, w: &Workload) {
    let d = w.loops.len();
    let mut skews = Vec::new();
    for s in 2..=d {
        for r in (1..s).rev() {
            skews.push(step("skew", vec![int(r), int(s), int(1)]));
        }
    }
    out.stmts(&skews);
    out.param(
        "tile",
        "tile",
        "the edge of a tile of the skewed band",
        vec![
            choice(16, "a tile's skewed rows stay in L1 across its time steps"),
            choice(32, "32 (Pluto's default)"),
            choice(8, "8"),
        ],
    );
    let levels: Vec<usize> = (0..d).map(|k| 2 * k + 1).collect();
    let strip = step("stripmine", vec![local("r"), local("tile"), text("aligned")]);
    out.stmt(S::For("r".into(), ints(&levels), vec![strip]));
    let order: Vec<usize> = (0..d).map(|k| 2 * k + 1).chain((0..d).map(|k| 2 * k + 2)).collect();
    out.stmt(step("permute", vec![ints(&order)]));
    out.param(
        "wavefront",
        "wavefront",
        "the tiles of one wavefront on threads",
        vec![
            choice("false", "tiles in order on one thread (their reuse across time is the gain)"),
            choice("true", "the outer tile loops skewed into wavefronts, a wavefront's tiles on threads"),
        ],
    );
    // The outer tile loops skewed into wavefronts, the wavefront's loop second, on threads.
    let skewed = call("skew", vec![local("p"), int(1), int(2), int(1)]);
    let wave = call("parallelize", vec![call("interchange", vec![skewed, int(1), int(2)]), int(2)]);
    out.stmt(S::If(local("wavefront"), vec![set(local("p"), wave)]));
}
