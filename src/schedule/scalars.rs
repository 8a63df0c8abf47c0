//! Scalars that pin a loop: a temporary such as symm's `temp2`, set, summed into and read
//! within one iteration of `j`, makes every iteration of `j` depend on the one before (it
//! reuses the one element). Privatized at `j` (`privatize`: one copy per iteration, Feautrier's
//! scalar expansion), `j` carries nothing more and the rules that follow can distribute,
//! interchange, vectorize and parallelize it.

use super::code::{S, apply, int, step, text};
use super::walk::loops_in_order;
use crate::analysis::legality::{carries, decide_at_sizes};
use crate::ir::{LNode, Name, Nest, State};

/// `nest` with each scalar it writes privatized at the deepest loop around all its accesses,
/// where that loop carried a dependence before and carries none after (isl), with the script's
/// steps; `None` where no scalar pins a loop.
pub(super) fn privatized(state: &State, nest: &Nest) -> Option<(Nest, Vec<Vec<S>>)> {
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
    // Each scalar's loop: the deepest loop around all its accesses. Scalars that share one are
    // privatized together (deriche's `ym1`, `ym2`, `xm1` each pin its row loop `i`: privatizing
    // one alone leaves `i` carried by the others).
    let mut groups: Vec<(super::walk::Located, Vec<Name>)> = Vec::new();
    for t in scalars {
        let all = count(&nest.items, &t);
        let Some(l) = loops_in_order(&nest.items).into_iter().filter(|p| count(&p.l.body, &t) == all).last()
        else {
            continue;
        };
        match groups.iter_mut().find(|(g, _)| g.at == l.at) {
            Some((_, ts)) => ts.push(t),
            None => groups.push((l, vec![t])),
        }
    }
    let mut cur = nest.clone();
    let mut lines = Vec::new();
    for (l, ts) in groups {
        let focused = Nest { focus: l.at.clone(), ..cur.clone() };
        if !carries(state, &focused, &l.l).unwrap_or(false) {
            continue;
        }
        // Applied through the registry as the script applies it, the loop still in focus.
        let mut line = vec![step("focus", vec![text(&l.address)])];
        line.extend(ts.iter().map(|t| step("privatize", vec![int(1), text(t)])));
        let Ok(next) = apply(state, "p", &cur, &line, &[]) else { continue };
        let Some(after) = next.focused().cloned() else { continue };
        if carries(state, &next, &after).unwrap_or(true) {
            continue;
        }
        let next = Nest { focus: Vec::new(), ..next };
        if !matches!(decide_at_sizes(state, &next), Ok(Ok(_))) {
            continue;
        }
        line.push(step("focus", vec![]));
        lines.push(line);
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
