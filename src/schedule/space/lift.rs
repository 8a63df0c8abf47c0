//! The parts of nests with several statements at a level: a nest's top-level parts (also the
//! contractions of a lifted product, `rules/lift_orders.rs`), its distribution into perfect
//! nests, its innermost loops in lanes, and the sums of a fused nest worth lanes.

use super::*;

/// Whether a loop's sub-tree is a single path of loops (no sequence).
pub(super) fn one_path(l: &crate::ir::Loop) -> bool {
    match l.body.as_slice() {
        [crate::ir::LNode::Loop(x)] => one_path(x),
        body => body.iter().all(|x| x.as_loop().is_none()),
    }
}

/// Whether a loop's sub-tree is a single path down to one statement.
pub(super) fn one_statement(l: &crate::ir::Loop) -> bool {
    match l.body.as_slice() {
        [crate::ir::LNode::Stmt(_)] => true,
        [crate::ir::LNode::Loop(x)] => one_statement(x),
        _ => false,
    }
}

/// The top-level items of `nest` as perfect nests of one statement each: the address `focus`
/// takes for each one's outer loop ("i#2": the second loop over `i` in program order) and its
/// workload; `None` where one is not such a nest.
pub(super) fn top_parts(state: &State, nest: &Nest) -> Option<Vec<Part>> {
    if nest.items.iter().any(|x| x.as_loop().is_none()) {
        return None;
    }
    let mut parts = Vec::new();
    for top in loops_in_order(&nest.items).into_iter().filter(|p| p.at.len() == 1) {
        let sub = Nest { items: vec![crate::ir::LNode::Loop(top.l)], focus: Vec::new(), ..nest.clone() };
        let w = Workload::of(state, &sub).ok()?;
        if !(w.perfect && w.n_stmts == 1 && !w.loops.is_empty()) {
            return None;
        }
        // Reordered in place (the other parts beside it), as `focus` then `permute` do.
        let reorder = wants_reorder(state, &Nest { focus: top.at, ..nest.clone() }, &w);
        parts.push(Part { address: top.address, work: w, reorder });
    }
    Some(parts)
}

/// One perfect nest of one statement among the top-level items of a nest: the address `focus`
/// takes for its outer loop, its workload, and the loop a better order puts innermost.
pub(super) struct Part {
    pub(super) address: String,
    pub(super) work: Workload,
    pub(super) reorder: Option<Reorder>,
}

/// A nest with sequences inside (statements fused as written: covariance's sum, scaling and
/// mirroring under one `i, j`; correlation's `i` around a statement and a `j` loop), distributed
/// into perfect nests of one statement: the loops `distribute` splits, innermost first, as the
/// addresses `focus` takes, and the parts.
pub(super) struct Distribution {
    pub(super) addresses: Vec<String>,
    pub(super) parts: Vec<Part>,
}

/// The first loop whose body is a sequence with no sequence inside it, if any; loops `kept`
/// names (by [`loop_key`]) count as having no sequence.
pub(super) fn innermost_sequence(
    items: &[crate::ir::LNode],
    kept: &std::collections::BTreeSet<String>,
) -> Option<Located> {
    fn splits(l: &crate::ir::Loop, kept: &std::collections::BTreeSet<String>) -> bool {
        l.body.len() > 1 && !kept.contains(&loop_key(l))
    }
    fn has_sequence(items: &[crate::ir::LNode], kept: &std::collections::BTreeSet<String>) -> bool {
        items.iter().any(|x| x.as_loop().is_some_and(|l| splits(l, kept) || has_sequence(&l.body, kept)))
    }
    loops_in_order(items).into_iter().find(|p| splits(&p.l, kept) && !has_sequence(&p.l.body, kept))
}

/// A loop's identity across rewrites of the loops around it: its iterator and its statements.
pub(super) fn loop_key(l: &crate::ir::Loop) -> String {
    let mut stmts = Vec::new();
    fn go(items: &[crate::ir::LNode], out: &mut Vec<String>) {
        for x in items {
            match x {
                crate::ir::LNode::Stmt(s) => out.push(s.to_string()),
                crate::ir::LNode::Loop(l) => go(&l.body, out),
            }
        }
    }
    go(&l.body, &mut stmts);
    format!("{}: {}", l.iter, stmts.join("; "))
}

/// `items` with the loop at `at` (item indices from the top) distributed: one loop per item of
/// its body, the same header, as `focus` then `distribute(p, 1)` make it.
pub(super) fn distribute_at(items: &[crate::ir::LNode], at: &[usize]) -> Vec<crate::ir::LNode> {
    use crate::ir::LNode;
    let Some((&k, rest)) = at.split_first() else { return items.to_vec() };
    let mut out = items[..k].to_vec();
    if let Some(LNode::Loop(l)) = items.get(k) {
        if rest.is_empty() {
            out.extend(l.body.iter().map(|b| LNode::Loop(l.with_body(vec![b.clone()]))));
        } else {
            out.push(LNode::Loop(l.with_body(distribute_at(&l.body, rest))));
        }
    }
    out.extend(items.iter().skip(k + 1).cloned());
    out
}

/// The nest distributed loop by loop, innermost sequences first, each step legal (isl): a
/// sequence whose distribution is illegal stays (adi's `j` around a recurrence of two
/// statements, gramschmidt's `k`), the loops around it are still tried. The parts: where the
/// whole nest distributes into perfect nests of one statement, those; else the loops deeper
/// down whose sub-trees are such nests (gramschmidt's `j` around a sum over `i`, inside `k`).
pub(super) fn distribution(state: &State, nest: &Nest) -> Option<Distribution> {
    if !nest.focus.is_empty() {
        return None;
    }
    let mut cur = nest.clone();
    let mut addresses = Vec::new();
    let mut kept = std::collections::BTreeSet::new();
    loop {
        // The steps from `cur` on, unchecked: each distributes the next innermost sequence of
        // the nest the one before left (addresses as `focus` takes them then).
        let mut steps: Vec<(String, String, Nest)> = Vec::new();
        let mut next = cur.clone();
        while let Some(seq) = innermost_sequence(&next.items, &kept) {
            if addresses.len() + kept.len() + steps.len() >= 32 {
                return None;
            }
            next = Nest { items: distribute_at(&next.items, &seq.at), ..next.clone() };
            steps.push((seq.address, loop_key(&seq.l), next.clone()));
        }
        if steps.is_empty() {
            break;
        }
        // The longest legal run of them (isl). A pair of instances one step reorders stays
        // reordered by the steps after it, so legality only falls along the run: the whole run
        // first, then all but the last (an outer loop carrying the others, as adi's time
        // steps), then by halves.
        let legal = |k: usize| -> Option<bool> {
            Some(k == 0 || crate::analysis::legality::decide_at_sizes(state, &steps[k - 1].2).ok()?.is_ok())
        };
        let n = steps.len();
        let good = if legal(n)? {
            n
        } else if legal(n - 1)? {
            n - 1
        } else {
            let (mut lo, mut hi) = (0, n - 1);
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                if legal(mid)? { lo = mid } else { hi = mid }
            }
            lo
        };
        if good > 0 {
            cur = steps[good - 1].2.clone();
        }
        let refused = (good < n).then(|| steps[good].1.clone());
        addresses.extend(steps.into_iter().take(good).map(|s| s.0));
        match refused {
            Some(key) => {
                kept.insert(key);
            }
            None => break,
        }
    }
    if addresses.is_empty() {
        return None;
    }
    let parts = match top_parts(state, &cur) {
        Some(p) => p,
        None => deep_parts(state, &cur),
    };
    (!parts.is_empty()).then_some(Distribution { addresses, parts })
}

/// The loops of a nest whose sub-trees are perfect nests of one statement and whose parent
/// runs a sequence, in program order (the addresses `focus` takes).
pub(super) fn deep_parts(state: &State, nest: &Nest) -> Vec<Part> {
    use crate::ir::LNode;
    let mut found = Vec::new();
    for p in loops_in_order(&nest.items).into_iter().filter(|p| p.in_sequence && one_statement(&p.l)) {
        // The part inside the loops around it (their bounds and iterators), alone.
        let whole = p.around.iter().rev().fold(p.l.clone(), |inner, a| a.with_body(vec![LNode::Loop(inner)]));
        let outer = p.around.len();
        let sub = Nest { items: vec![LNode::Loop(whole)], focus: Vec::new(), ..nest.clone() };
        let Ok(w) = Workload::shape(state, &sub) else { continue };
        if !(w.perfect && w.n_stmts == 1 && w.loops.len() >= outer + 2) {
            continue;
        }
        found.push((p, sub, w, outer));
    }
    // The parts' own loops classified with one reading of the nest's dependences: a loop carries
    // what the statements inside it carry, the same in the nest as in the part alone (the
    // loops around a part are not its own: drained below).
    let own: Vec<Vec<std::sync::Arc<crate::ir::Loop>>> =
        found.iter().map(|(_, sub, _, outer)| sub.view().path().into_iter().skip(*outer).collect()).collect();
    let asked: Vec<&crate::ir::Loop> = own.iter().flatten().map(|l| l.as_ref()).collect();
    let kinds = crate::analysis::legality::carried_kinds(state, nest, &asked).ok();
    let mut parts = Vec::new();
    let mut at = 0;
    for ((p, sub, mut w, outer), own) in found.into_iter().zip(&own) {
        let classified: Option<Vec<Parallelism>> = match &kinds {
            Some(k) => (0..own.len())
                .map(|i| crate::ops::explore::kind(state, &sub, outer + i + 1, k[at + i]).ok())
                .collect(),
            None => Workload::of_below(state, &sub, outer)
                .ok()
                .map(|x| x.loops.iter().skip(outer).map(|l| l.kind).collect()),
        };
        at += own.len();
        let Some(classified) = classified else { continue };
        // The part's own loops, numbered from its top (as `focus` numbers them).
        w.loops.drain(..outer);
        for (k, (l, c)) in w.loops.iter_mut().zip(classified).enumerate() {
            l.level = k + 1;
            l.kind = c;
        }
        let reorder = wants_reorder(state, &Nest { focus: p.at, ..nest.clone() }, &w);
        parts.push(Part { address: p.address, work: w, reorder });
    }
    parts
}

/// What `inner_lanes` finds.
pub(super) struct Lanes {
    /// The innermost loops in lanes, each as the address `focus` takes, with the reason and,
    /// for a reduction into one element, its mean trip count.
    pub(super) inner: Vec<(String, String, Option<f64>)>,
    /// The loops around such a loop and a statement beside it that carry a dependence
    /// (cholesky's `j`): unrolled by 2, their two iterations' independent work (the two
    /// reductions) overlaps.
    pub(super) unroll: Vec<String>,
    /// The outermost data-parallel loops below the top level, inside loops that carry
    /// dependences (jacobi-2d's two sweeps `i` inside the time loop `t`): on threads.
    pub(super) threads: Vec<String>,
}

/// The innermost loops (no loop inside) of a nest with sequences that can run in vector lanes:
/// data-parallel, or a reduction into one element (cholesky's `A[i][j] -= A[i][k] * A[j][k]`
/// over `k`), every access contiguous or invariant along it.
pub(super) fn inner_lanes(state: &State, nest: &Nest) -> Lanes {
    use crate::ir::LNode;
    let innermost = |l: &crate::ir::Loop| l.body.iter().all(|b| b.as_loop().is_none());
    let all = loops_in_order(&nest.items);
    let mut out = Vec::new();
    let mut unroll: Vec<String> = Vec::new();
    for p in all.iter().filter(|p| innermost(&p.l)) {
        let l = &p.l;
        let alone = Nest { items: vec![LNode::Loop(l.clone())], focus: Vec::new(), ..nest.clone() };
        let Ok(w) = Workload::shape(state, &alone) else { continue };
        if w.accesses.iter().any(|a| a.stride(&l.iter).is_none_or(|s| s != 0 && s != 1)) {
            continue;
        }
        let focused = Nest { focus: p.at.clone(), ..nest.clone() };
        let Ok(kinds) = crate::ops::explore::parallelism(state, &focused) else { continue };
        let (why, sum) = match kinds.first().map(|k| k.2) {
            Some(Parallelism::Independent) => ("data-parallel".to_string(), None),
            Some(Parallelism::Reduction) if crate::analysis::reduction::plan(l, true).is_ok() => (
                format!("a reduction into {}", w.writes().next().map_or(String::new(), |t| t.text())),
                Some(w.loops.first().map_or(0.0, |x| x.mean_extent)),
            ),
            _ => continue,
        };
        out.push((p.address.clone(), why, sum));
        // Its parent, where a statement runs beside it and the parent's body is statements and
        // innermost loops (unrolling a loop around whole nests copies them: cholesky's `i`).
        let Some(parent) = all.iter().find(|q| p.in_sequence && q.at[..] == p.at[..p.at.len() - 1]) else {
            continue;
        };
        let shallow = parent.l.body.iter().all(|b| b.as_loop().is_none_or(|x| innermost(x)));
        if shallow && !unroll.contains(&parent.address) {
            let focused = Nest { focus: parent.at.clone(), ..nest.clone() };
            if crate::ops::explore::parallelism(state, &focused)
                .is_ok_and(|k| k.first().is_some_and(|k| k.2 == Parallelism::Carried))
            {
                unroll.push(parent.address.clone());
            }
        }
    }
    // The outermost loops that carry no dependence and hold loops, with 16 iterations or more:
    // those of a sequence at the top, or below loops that carry dependences (a team of threads
    // per iteration of the loops around: worth it for a sweep, not for a handful of
    // iterations). A nest of one top-level loop that carries none is the generic rule's.
    let mut threads: Vec<String> = Vec::new();
    let mut covered: Vec<Vec<usize>> = Vec::new();
    for p in &all {
        if (p.at.len() < 2 && nest.items.len() < 2)
            || innermost(&p.l)
            || covered.iter().any(|c| p.at.starts_with(c))
        {
            continue;
        }
        let Some(extent) = extent(state, &p.l) else { continue };
        let focused = Nest { focus: p.at.clone(), ..nest.clone() };
        if extent >= 16 && !crate::analysis::legality::carries(state, &focused, &p.l).unwrap_or(true) {
            threads.push(p.address.clone());
            covered.push(p.at.clone());
        }
    }
    Lanes { inner: out, unroll, threads }
}

/// Whether a sum into one element of `mean_extent` terms on average is worth vector lanes:
/// two vectors' terms or more (the 2 terms of a 2 x 2 pooling window's inner loop in 8 lanes
/// cost their horizontal sum and gain nothing: 3.5 ms as written, 8.7 ms in lanes; Zen 5).
pub(super) fn long_sum(mean_extent: f64, lanes: usize) -> bool {
    mean_extent >= (2 * lanes) as f64
}

/// The innermost sums into one element of the fused nest `fused` that are worth `lanes`
/// ([`long_sum`]): their addresses, with the reason (the rules of a single nest put such a sum
/// in lanes; in a fused nest it is left to the compiler, which keeps a floating-point sum
/// scalar).
pub(super) fn fused_sums(state: &State, fused: &Nest, lanes: usize) -> Vec<(String, String)> {
    inner_lanes(state, fused)
        .inner
        .into_iter()
        .filter_map(|(a, why, sum)| sum.filter(|&e| long_sum(e, lanes)).map(|_| (a, why)))
        .collect()
}
