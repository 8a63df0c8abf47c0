//! Legality as a value, for scripts that search: a verdict for one nest, the legal loop
//! permutations of a nest, the legal fusion levels of two nests. A tuning script prunes with
//! these before it compiles anything.

use crate::analysis::legality::{Verdict, decide, decide_at_sizes};
use crate::ir::{Nest, State};

/// The most levels [`permutations`] permutes (5! = 120 checks).
pub const MAX_PERMUTED: usize = 5;

/// `Ok` with the verdict, or `Err` with the reason (`illegal: ...` with a witness).
pub fn legal(state: &State, nest: &Nest) -> Result<Verdict, String> {
    match decide(state, nest)? {
        Ok(v) => Ok(v),
        Err(e) => Err(format!("illegal: {}", e.message)),
    }
}

/// A verdict in words: "legal for all sizes", "legal at N=8".
pub fn describe(v: &Verdict) -> String {
    match v {
        Verdict::AllSizes => "legal for all sizes".into(),
        Verdict::TheseSizes(s) => format!("legal at {s} (not for every size)"),
    }
}

/// The nest with its outer `order.len()` loops reordered: `order[k]` is the (1-based) level
/// that ends up at level `k + 1`. `None` where a loop's bounds depend on one it would pass.
pub fn permute(nest: &Nest, order: &[usize]) -> Option<Nest> {
    let mut cur: Vec<usize> = (1..=order.len()).collect();
    let mut n = nest.clone();
    // Each wanted loop moves outward one level at a time (the others keep their order), so no
    // loop passes one it does not end up outside of: an order whose every loop stays inside
    // the loops its bounds use is reached.
    for (k, want) in order.iter().enumerate() {
        let mut at = cur.iter().position(|x| x == want)?;
        while at > k {
            let mut next = super::transform::interchange(&n, at as i64, at as i64 + 1).ok()?;
            next.history = crate::ir::History::step(
                "interchange",
                vec![
                    crate::ir::StepArg::Nest(n.history.clone()),
                    crate::ir::StepArg::Text(at.to_string()),
                    crate::ir::StepArg::Text((at + 1).to_string()),
                ],
            );
            n = next;
            cur.swap(at - 1, at);
            at -= 1;
        }
    }
    Some(n)
}

/// Every permutation of the outer `depth` levels (at most [`MAX_PERMUTED`] and the depth of
/// the single path) that is expressible and legal at the program's sizes, in lexicographic
/// order; the identity first.
pub fn permutations(state: &State, nest: &Nest, depth: usize) -> Result<Vec<Vec<usize>>, String> {
    let view = nest.view();
    let d = depth.min(view.path().len()).min(MAX_PERMUTED);
    let mut out = Vec::new();
    let mut perm: Vec<usize> = (1..=d).collect();
    loop {
        if let Some(n) = permute(&view, &perm).map(|p| nest.splice(p))
            && decide_at_sizes(state, &n)?.is_ok()
        {
            out.push(perm.clone());
        }
        if !next_permutation(&mut perm) {
            break;
        }
    }
    Ok(out)
}

fn next_permutation(p: &mut [usize]) -> bool {
    let Some(i) = (1..p.len()).rev().find(|&i| p[i - 1] < p[i]) else { return false };
    let j = (i..p.len()).rev().find(|&j| p[j] > p[i - 1]).unwrap_or(i);
    p.swap(i - 1, j);
    p[i..].reverse();
    true
}

/// How a loop's iterations depend on one another (data-parallel loops in the sense of Ullrich 2018).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parallelism {
    /// It carries no dependence: its iterations can run in any order, on threads or lanes.
    Independent,
    /// It carries only reductions: it runs in parallel with private accumulators.
    Reduction,
    /// It carries a dependence that is not a reduction: `parallelize` is refused.
    Carried,
}

impl Parallelism {
    /// In words, for the REPL's `:legal` and scripts.
    pub fn describe(self) -> &'static str {
        match self {
            Parallelism::Independent => "data-parallel",
            Parallelism::Reduction => "a reduction (parallel with private accumulators)",
            Parallelism::Carried => "carries a dependence",
        }
    }
}

/// Each loop on the nest's single path (from its focus), outermost first: its level, iterator and whether it
/// can run in parallel, decided by isl at the program's sizes (`analysis::legality::carries`,
/// and the check `parallelize` makes).
pub fn parallelism(state: &State, nest: &Nest) -> Result<Vec<(usize, crate::ir::Name, Parallelism)>, String> {
    parallelism_below(state, nest, 0)
}

/// [`parallelism`] of the loops below the `outer` outermost ones of the path; those `outer` are
/// reported as carrying, unasked (a part of a nest inside loops around it that are not its own).
pub fn parallelism_below(
    state: &State,
    nest: &Nest,
    outer: usize,
) -> Result<Vec<(usize, crate::ir::Name, Parallelism)>, String> {
    let path = nest.view().path();
    let asked: Vec<&crate::ir::Loop> = path.iter().skip(outer).map(|l| l.as_ref()).collect();
    // One reading of the dependences for every loop of the path.
    let kinds = crate::analysis::legality::carried_kinds(state, nest, &asked)?;
    let mut out = Vec::new();
    for (k, l) in path.iter().enumerate() {
        let level = k + 1;
        let p = match k.checked_sub(outer).map(|i| kinds[i]) {
            None => Parallelism::Carried,
            Some(c) => kind(state, nest, level, c)?,
        };
        out.push((level, l.iter.clone(), p));
    }
    Ok(out)
}

/// The kind of the loop at `level` of `nest`'s path from what it carries
/// ([`crate::analysis::legality::carried_kinds`]: any dependence, one beyond reductions).
pub fn kind(state: &State, nest: &Nest, level: usize, carried: (bool, bool)) -> Result<Parallelism, String> {
    Ok(match carried {
        (false, _) => Parallelism::Independent,
        // Carrying more than a reduction's updates, `parallelize`'s check refuses it.
        (true, true) => Parallelism::Carried,
        (true, false) => {
            match super::transform::parallelize(&nest.view(), level as i64).map(|p| nest.splice(p)) {
                Ok(n) if decide_at_sizes(state, &n)?.is_ok() => Parallelism::Reduction,
                _ => Parallelism::Carried,
            }
        }
    })
}

/// The levels `r` at which `fuse_outer(n1, n2, r)` applies and is legal at the program's sizes.
///
/// Legality is monotone in the level: every dependence between the nests runs from an
/// instance of the first to one of the second; fused at `r + 1`, the first `r + 1` shared loops
/// order each such pair (source no later than sink), so their first `r` do too (a prefix of a
/// lexicographic order is one), and each nest's own order is the same at every level. So the
/// deepest legal level is found from the deepest down, and every level that applies above it
/// is legal without asking isl again.
pub fn fusion_levels(state: &State, n1: &Nest, n2: &Nest) -> Result<Vec<usize>, String> {
    let applies: Vec<(usize, Nest)> = (1..=n1.path().len().min(n2.path().len()))
        .filter_map(|r| super::transform::fuse_outer(n1, n2, r as i64).ok().map(|f| (r, f)))
        .collect();
    for (r, f) in applies.iter().rev() {
        if decide_at_sizes(state, f)?.is_ok() {
            return Ok(applies.iter().map(|(k, _)| *k).filter(|k| k <= r).collect());
        }
    }
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutations_in_order() {
        let mut p = vec![1, 2, 3];
        let mut all = vec![p.clone()];
        while next_permutation(&mut p) {
            all.push(p.clone());
        }
        assert_eq!(all.len(), 6);
        assert_eq!(all[1], vec![1, 3, 2]);
        assert_eq!(all[5], vec![3, 2, 1]);
    }
}
