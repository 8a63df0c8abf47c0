//! Scalars that pin a loop: a temporary such as symm's `temp2`, set, summed into and read
//! within one iteration of `j`, makes every iteration of `j` depend on the one before (it
//! reuses the one element). Privatized at `j` (`privatize`: one copy per iteration, Feautrier's
//! scalar expansion), `j` carries nothing more and the rules that follow can distribute,
//! interchange, vectorize and parallelize it.

use super::walk::loops_in_order;
use crate::analysis::legality::{carries, decide_at_sizes};
use crate::ir::{LNode, Name, Nest, State};

/// `nest` with each scalar it writes privatized at the deepest loop around all its accesses,
/// where that loop carried a dependence before and carries none after (isl), with the script's
/// steps; `None` where no scalar pins a loop.
pub(super) fn privatized(state: &State, nest: &Nest) -> Option<(Nest, Vec<String>)> {
    if !nest.focus.is_empty() {
        return None;
    }
    let mut scalars: Vec<Name> = Vec::new();
    for s in nest.stmts() {
        if let Some(t) = s.target().and_then(|x| x.id())
            && nest.rank_of(t) == Some(0)
            && !scalars.contains(t)
        {
            scalars.push(t.clone());
        }
    }
    let mut cur = nest.clone();
    let mut lines = Vec::new();
    for t in scalars {
        let all = count(&cur.items, &t);
        // The deepest loop around every access (pre-order: the last one that holds them all).
        let Some(l) = loops_in_order(&cur.items).into_iter().filter(|p| count(&p.l.body, &t) == all).last()
        else {
            continue;
        };
        let focused = Nest { focus: l.at.clone(), ..cur.clone() };
        if !carries(state, &focused, &l.l).unwrap_or(false) {
            continue;
        }
        let Ok(next) = crate::ops::transform::privatize(state, &focused, 1, &t) else { continue };
        let next = Nest { focus: Vec::new(), ..next };
        if !matches!(decide_at_sizes(state, &next), Ok(Ok(_))) {
            continue;
        }
        let again = Nest { focus: l.at.clone(), ..next.clone() };
        let Some(after) = again.focused().cloned() else { continue };
        if carries(state, &again, &after).unwrap_or(true) {
            continue;
        }
        lines.push(format!("p = focus(p, \"{}\"); p = privatize(p, 1, \"{t}\"); p = focus(p);", l.address));
        cur = next;
    }
    (!lines.is_empty()).then_some((cur, lines))
}

/// Statements of `items` that access `t`.
fn count(items: &[LNode], t: &Name) -> usize {
    items
        .iter()
        .map(|x| match x {
            LNode::Stmt(s) => usize::from(s.mentions_tensor(t)),
            LNode::Loop(l) => count(&l.body, t),
        })
        .sum()
}
