//! Loops carried only through a pivot: floyd-warshall's `path[i][j] = min(path[i][j],
//! path[i][k] + path[k][j])` under `k` writes row `i` and reads row `k`; only the iteration
//! `i == k` writes what the others read, so `i` carries a dependence as a whole but not on
//! either side of the pivot. Index-set splitting at the pivot (`split` at `k` and at `k + 1`:
//! `i < k`, `i == k`, `i > k`; the same for `j` against the column `path[i][k]`) leaves pieces
//! whose loops isl finds free: the outer ones on threads, the inner ones in lanes.

use super::code::{S, apply, at, index, int, step};
use super::walk::loops_in_order;
use super::workload::Workload;
use crate::analysis::legality::{carries, decide_at_sizes};
use crate::ir::{Expr, Name, Nest, State};

/// The steps of the split and what runs on threads and in lanes after it.
pub(super) struct Pivots {
    /// The lines of steps that split and mark the nest `p`.
    pub steps: Vec<Vec<S>>,
    /// `i` at `k`, `j` at `k`: the loops split and their pivots.
    pub why: String,
}

/// The pivot splits of a perfect nest of one statement, where each is legal and leaves a loop
/// on threads (isl); `None` otherwise.
pub(super) fn pivots(state: &State, nest: &Nest, w: &Workload) -> Option<Pivots> {
    if !nest.focus.is_empty() || !w.perfect || w.n_stmts != 1 || w.loops.len() < 2 {
        return None;
    }
    let target = w.writes().next()?;
    let level = |v: &Name| w.loops.iter().position(|l| &l.iter == v);
    // (loop, pivot): the write indexes a dimension by a carried loop's iterator where a read
    // of the same tensor indexes it by an outer loop's.
    let mut cuts: Vec<(Name, Name)> = Vec::new();
    for r in w.reads().filter(|a| a.tensor == target.tensor && a.index.len() == target.index.len()) {
        for (x, y) in target.index.iter().zip(&r.index) {
            let (Some(v), Some(u)) = (x.as_var(), y.as_var()) else { continue };
            let (Some(lv), Some(lu)) = (level(v), level(u)) else { continue };
            if lu < lv
                && w.loops[lv].kind == crate::ops::explore::Parallelism::Carried
                && !cuts.iter().any(|(c, _)| c == v)
            {
                cuts.push((v.clone(), u.clone()));
            }
        }
    }
    if cuts.is_empty() {
        return None;
    }
    // Innermost first: each loop is still one loop when it is split.
    cuts.sort_by_key(|(v, _)| std::cmp::Reverse(level(v)));
    let mut cur = nest.clone();
    let mut steps = Vec::new();
    for (v, u) in &cuts {
        let pivot = Expr::var_name(u);
        let mut line = at(&format!("{v}#1"), vec![step("split", vec![int(1), index(&pivot)?])]);
        line.extend(at(&format!("{v}#2"), vec![step("split", vec![int(1), index(&pivot.add_int(1))?])]));
        cur = apply(state, "p", &cur, &line, &[]).ok()?;
        steps.push(line);
    }
    if !matches!(decide_at_sizes(state, &cur), Ok(Ok(_))) {
        return None;
    }

    // The pieces: the outermost free loop of each on threads, innermost free loops in lanes
    // (a piece of one iteration, `i == k`, neither).
    let all = loops_in_order(&cur.items);
    let single = |l: &crate::ir::Loop| {
        let lows = match l.lb.single_atom() {
            Some(crate::ir::Atom::Max(xs)) => xs.clone(),
            _ => vec![l.lb.clone()],
        };
        let highs = l.ub.min_args().map_or_else(|| vec![l.ub.clone()], |xs| xs.to_vec());
        // ub <= x <= lb for a common argument x, or a constant difference of at most 0.
        l.ub.sub(&l.lb).as_const().is_some_and(|d| d <= 0) || lows.iter().any(|x| highs.contains(x))
    };
    let free = |p: &super::walk::Located| {
        !single(&p.l) && !carries(state, &Nest { focus: p.at.clone(), ..cur.clone() }, &p.l).unwrap_or(true)
    };
    let mut lanes = Vec::new();
    let mut threads: Vec<&super::walk::Located> = Vec::new();
    for p in &all {
        let innermost = p.l.body.iter().all(|x| x.as_loop().is_none());
        if innermost && free(p) {
            lanes.push(p.address.clone());
        }
        let outer_free = p.around.iter().any(|a| threads.iter().any(|t| std::sync::Arc::ptr_eq(&t.l, a)));
        if !outer_free && !innermost && free(p) {
            threads.push(p);
        }
    }
    if threads.is_empty() {
        return None;
    }
    for a in &lanes {
        steps.push(at(a, vec![step("vectorize", vec![int(1)])]));
    }
    for t in &threads {
        steps.push(at(&t.address, vec![step("parallelize", vec![int(1)])]));
    }
    let why = cuts.iter().map(|(v, u)| format!("{v} at {u}")).collect::<Vec<_>>().join(", ");
    Some(Pivots { steps, why })
}
