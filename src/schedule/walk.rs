//! The loops of a nest as `focus` addresses them, for the rules that transform loops below a
//! sequence: each with its address, its position, the loops around it.

use crate::ir::{LNode, Loop, Name, State};
use std::sync::Arc;

/// A loop of a nest where `focus` finds it.
pub(super) struct Located {
    /// `iter#k`: the k-th loop over `iter` in program order (pre-order), as `focus` takes it.
    pub address: String,
    /// The indices of the items from the top down to it (a nest's `focus`).
    pub at: Vec<usize>,
    pub l: Arc<Loop>,
    /// The loops around it, outermost first.
    pub around: Vec<Arc<Loop>>,
    /// Whether other items share its parent's body (or the top level) with it.
    pub in_sequence: bool,
}

/// Every loop of `items`, in program order.
pub(super) fn loops_in_order(items: &[LNode]) -> Vec<Located> {
    fn go(
        items: &[LNode],
        at: &mut Vec<usize>,
        around: &mut Vec<Arc<Loop>>,
        seen: &mut std::collections::BTreeMap<Name, usize>,
        out: &mut Vec<Located>,
    ) {
        for (k, x) in items.iter().enumerate() {
            let Some(l) = x.as_loop() else { continue };
            let n = seen.entry(l.iter.clone()).or_default();
            *n += 1;
            at.push(k);
            out.push(Located {
                address: format!("{}#{n}", l.iter),
                at: at.clone(),
                l: l.clone(),
                around: around.clone(),
                in_sequence: items.len() > 1,
            });
            around.push(l.clone());
            go(&l.body, at, around, seen, out);
            around.pop();
            at.pop();
        }
    }
    let mut out = Vec::new();
    go(items, &mut Vec::new(), &mut Vec::new(), &mut Default::default(), &mut out);
    out
}

/// The trip count of `l` at the program's sizes, where its bounds are constants there.
pub(super) fn extent(state: &State, l: &Loop) -> Option<i64> {
    let at = |v: &str| state.constant(v);
    Some(l.ub.eval(&at).ok()? - l.lb.eval(&at).ok()? + 1)
}
