//! The loops sketch: a legal order of the loops (smallest strides innermost), tiles where the
//! inner loops' data exceed the L2, the outermost parallel loop on threads, the innermost in
//! lanes, streaming stores for a result written once that exceeds the caches.

use super::*;

/// The loops sketch of a perfect nest.
/// The level innermost after `order` permutes the outer `order.len()` of `d` loops.
pub(super) fn innermost_after(d: usize, order: &[usize]) -> usize {
    if d > order.len() { d } else { order[order.len() - 1] }
}

/// The score of a loop order: the strides of the accesses along the loop it leaves innermost
/// (0 unchanged, 1 contiguous, 16 any other; the result's counted twice). Lower is better.
pub(super) fn order_cost(w: &Workload, order: &[usize]) -> i64 {
    let l = &w.loops[innermost_after(w.loops.len(), order) - 1];
    w.accesses
        .iter()
        .map(|a| {
            let s = a.stride(&l.iter).map_or(1 << 20, |s| s.abs().min(1 << 20));
            let s = if s == 0 {
                0
            } else if s == 1 {
                1
            } else {
                16
            };
            if a.write { 2 * s } else { s }
        })
        .sum()
}

/// A better order of a nest's outer loops than the written one (levels, as `permute` takes
/// them), and the loop it puts innermost.
#[derive(Clone, Debug)]
pub(super) struct Reorder {
    pub(super) order: Vec<usize>,
    pub(super) inner: Name,
}

impl Reorder {
    /// Whether the order brings a loop from below level `r` into the first `r` levels (what
    /// fusing the nest at level `r` forbids).
    pub(super) fn crosses(&self, r: usize) -> bool {
        let mut first: Vec<usize> = self.order.iter().take(r).copied().collect();
        first.sort_unstable();
        first.iter().enumerate().any(|(k, &l)| l != k + 1)
    }
}

/// Where another order of a perfect nest's loops scores better than the written one and is
/// legal (isl): that order.
pub(super) fn wants_reorder(state: &State, nest: &Nest, w: &Workload) -> Option<Reorder> {
    let d = w.loops.len();
    if d < 2 || !w.perfect {
        return None;
    }
    let k = d.min(crate::ops::explore::MAX_PERMUTED);
    let written: Vec<usize> = (1..=k).collect();
    let best = all_orders(k).into_iter().min_by_key(|o| order_cost(w, o))?;
    if order_cost(w, &best) >= order_cost(w, &written) {
        return None;
    }
    let moved = crate::ops::explore::permute(&nest.view(), &best).map(|n| nest.splice(n))?;
    crate::analysis::legality::decide_at_sizes(state, &moved).ok()?.ok()?;
    let inner = w.loops[innermost_after(d, &best) - 1].iter.clone();
    Some(Reorder { order: best, inner })
}

pub(super) fn loops(out: &mut Out, w: &Workload, m: &Machine) {
    let d = w.loops.len();
    let k = d.min(crate::ops::explore::MAX_PERMUTED);
    // Every order of the outer k loops, ranked by the strides along the innermost loop; the
    // legality of the one a candidate takes is checked by `permute` (isl) when it is evaluated.
    let mut orders = all_orders(k);
    let innermost = |order: &[usize]| -> usize { innermost_after(d, order) };
    let cost = |order: &[usize]| -> i64 { order_cost(w, order) };
    orders.sort_by_key(|o| cost(o));
    orders.truncate(6);
    if orders.is_empty() {
        orders.push((1..=k).collect());
    }
    let choices = orders
        .iter()
        .map(|o| {
            let names: Vec<String> = o.iter().map(|&lv| w.loops[lv - 1].iter.to_string()).collect();
            let inner = &w.loops[innermost(o) - 1].iter;
            choice(
                format!("{o:?}"),
                format!("{} ({inner} innermost: stride score {})", names.join(" "), cost(o)),
            )
        })
        .collect();
    out.param("order", "order", "an order of the outer loops (permute refuses an illegal one)", choices);
    out.stmt(step("permute", vec![local("order")]));
    let big = w.loops.iter().rev().take(2).all(|l| l.extent.is_some_and(|e| e >= 128)) && d >= 2;
    if big {
        let bytes: u64 = w.accesses.iter().map(|a| a.bytes()).sum();
        let mut ts = vec![choice(0, "no tiles"), choice(32, "32 x 32 tiles"), choice(64, "64 x 64 tiles")];
        if bytes > m.caches[1] && reuse_beyond(w, m.caches[1] / 2) {
            ts.swap(0, 1);
            ts[0].reason = format!(
                "32 x 32 tiles: the tensors ({} KiB) exceed the L2 ({} KiB)",
                bytes >> 10,
                m.caches[1] >> 10
            );
        }
        out.param("tile", "tile", "square tiles of the path", ts);
        out.stmt(S::If(local("tile").gt(int(0)), vec![step("tile", vec![local("tile")])]));
    }
    out.param(
        "parallel",
        "parallel",
        "the outermost loop that runs in parallel, on threads",
        vec![choice("true", "the outermost parallel loop on threads (isl)"), choice("false", "one thread")],
    );
    out.stmt(let_("par", call("parallel_levels", vec![local("p")])));
    // Where the order leaves only the innermost loop parallel (a sum over the outer loops into
    // a row: gramschmidt's `R[k][j] += Q[i][k] * A[i][j]` as `i j`), a team of threads per
    // outer iteration costs more than the work: that loop's strips go outermost, on threads.
    let lanes = m.lanes(w.dtype());
    let strip = 8 * lanes;
    if d >= 2 {
        out.param(
            "strip",
            "strip",
            "where only the innermost loop runs in parallel: its strips outermost, on threads",
            vec![
                choice(
                    strip,
                    format!(
                        "strips of {strip} (8 vectors) outermost, on threads, the rest of the loop in lanes"
                    ),
                ),
                choice(0, "the innermost loop itself on threads"),
            ],
        );
        let depth = || call("depth", vec![local("p")]);
        let innermost = local("parallel")
            .and(local("strip").gt(int(0)))
            .and(some_parallel())
            .and(local("par").at(int(0)).eq(depth()))
            .and(depth().gt(int(1)));
        out.begin_if(innermost);
        out.stmt(let_("d", depth()));
        out.stmt(step("stripmine", vec![local("d"), local("strip")]));
        // The strips' loop outermost, one interchange at a time.
        let swap = step(
            "interchange",
            vec![local("d").minus(int(1)).minus(local("r")), local("d").minus(local("r"))],
        );
        out.stmt(S::For("r".into(), int(0).to(local("d").minus(int(1))), vec![swap]));
        out.stmt(step("parallelize", vec![int(1)]));
        out.end_else_if(local("parallel").and(some_parallel()), &[outermost_parallel()]);
    } else {
        out.stmt(S::If(local("parallel").and(some_parallel()), vec![outermost_parallel()]));
    }
    out.param(
        "vectorize",
        "vectorize",
        "the innermost loop in lanes",
        vec![
            choice(
                "true",
                "the innermost loop in lanes where it is data-parallel or a reduction into one element (a vector of partial sums)",
            ),
            choice("false", "no vectors"),
        ],
    );
    // A reduction into one element in lanes: the compiler may not reorder a floating-point sum
    // on its own (no -ffast-math), so a dot product over `k` innermost (syrk's `C[i][j] +=
    // A[i][k] * A[j][k]` as `i j k`) stays scalar unless marked; only a sum worth it
    // ([`long_sum`]).
    let long: Vec<E> = w
        .loops
        .iter()
        .filter(|l| l.kind != Parallelism::Independent && long_sum(l.mean_extent, lanes))
        .map(|l| text(&l.iter))
        .collect();
    out.stmt(let_("long_sums", E::List(long)));
    out.stmt(let_("inner", call("depth", vec![local("p")])));
    let levels = |f: &'static str| call(f, vec![local("p")]).method("contains", vec![local("inner")]);
    let inner_iter = call("iterators", vec![local("p")]).at(local("inner").minus(int(1)));
    let long_sum = levels("parallel_levels").and(local("long_sums").method("contains", vec![inner_iter]));
    let when = local("vectorize").and(levels("data_parallel_levels").or(long_sum.paren()).paren());
    out.stmt(S::If(when, vec![step("vectorize", vec![local("inner")])]));
    // Streaming stores: a result written once (no reduction, not added onto: a rank update's
    // `C[i][j] += a[i] * b[j]` reads C's lines anyway), larger than the caches.
    let set_once = w.loops.iter().all(|l| l.kind == Parallelism::Independent);
    if let Some(t) = w.writes().next().filter(|t| set_once && !w.updated.contains(&t.tensor)) {
        let big = t.bytes() > m.caches[2] / 2;
        let mut ss = vec![
            choice("false", "ordinary stores"),
            choice("true", format!("{}'s whole vectors stored around the caches", t.tensor)),
        ];
        if big {
            ss.swap(0, 1);
            ss[0].reason = format!(
                "{} ({} MiB) is written once and exceeds half the L3: streaming stores",
                t.tensor,
                t.bytes() >> 20
            );
        }
        out.param("stream", "stream", "non-temporal stores of the result", ss);
        let depth = || call("depth", vec![local("p")]);
        let when = local("stream")
            .and(local("vectorize"))
            .and(call("data_parallel_levels", vec![local("p")]).method("contains", vec![depth()]));
        out.stmt(S::If(when, vec![step("stream", vec![depth(), value(&t.tensor)])]));
    }
}

/// Every permutation of 1..=k, the identity first (lexicographic).
pub(super) fn all_orders(k: usize) -> Vec<Vec<usize>> {
    fn go(rest: &mut Vec<usize>, cur: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if rest.is_empty() {
            out.push(cur.clone());
            return;
        }
        for i in 0..rest.len() {
            let x = rest.remove(i);
            cur.push(x);
            go(rest, cur, out);
            cur.pop();
            rest.insert(i, x);
        }
    }
    let mut out = Vec::new();
    go(&mut (1..=k).collect(), &mut Vec::new(), &mut out);
    out
}

/// `par.len() > 0`: some loop of the path runs in parallel.
fn some_parallel() -> E {
    local("par").method("len", vec![]).gt(int(0))
}

/// `p = parallelize(p, par[0]);`: the outermost parallel loop on threads.
fn outermost_parallel() -> S {
    step("parallelize", vec![local("par").at(int(0))])
}
