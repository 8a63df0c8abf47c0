//! Sums down a column turned into row updates: a loop `j` of statements beside an inner sum
//! over `k` that reads a column (nussinov's `table[i][j] = max(table[i][j], table[i][k] +
//! table[k+1][j])`: `table[k+1][j]` strides a row per `k`). The statements sink into the sum's
//! loop at its last iteration (`sink(p, 1, "last")`, legal where their updates commute with the
//! sum's: max updates of one element), `j` and `k` are interchanged (`k` outside: the inner loop
//! now walks rows), and `split` peels the one iteration of `j` that runs the sunk statements;
//! what is left of `j` is one statement, contiguous along `j`: in vector lanes.

use super::code::{E, S, apply, at, index, int, let_, local, set, step, text};
use super::walk::loops_in_order;
use super::workload::Workload;
use super::writer::{Out, choice};
use crate::ir::{Expr, LNode, Nest, State};

/// One such loop, as the script's steps address it.
pub(super) struct Sunk {
    /// The address `focus` takes for the loop `j` (`j#1`).
    pub address: String,
    /// The address of the sum's loop `k`, outside `j` after the interchange.
    pub outer: String,
    /// The steps, each line's: the sink and interchange, the split, the lanes.
    pub steps: Vec<Vec<S>>,
    /// The column the sum read (`table[k+1][j]`).
    pub column: String,
}

/// The first loop of `nest` whose sum down a column this rule turns into row updates, where
/// every step is legal (isl) and the rest of `j` runs in lanes.
pub(super) fn sunk(state: &State, nest: &Nest) -> Option<Sunk> {
    if !nest.focus.is_empty() {
        return None;
    }
    for p in loops_in_order(&nest.items) {
        let j = &p.l;
        let Some((LNode::Loop(k), stmts)) = j.body.split_last() else { continue };
        if stmts.is_empty() || stmts.iter().any(|x| x.as_loop().is_some()) {
            continue;
        }
        if !matches!(k.body.as_slice(), [LNode::Stmt(_)]) {
            continue;
        }
        let alone = Nest { items: vec![LNode::Loop(j.clone())], focus: Vec::new(), ..nest.clone() };
        let Ok(w) = Workload::shape(state, &alone) else { continue };
        // A column along k; everything contiguous or invariant along j.
        let Some(column) = w.accesses.iter().find(|a| a.stride(&k.iter).is_some_and(|s| s.abs() > 1)) else {
            continue;
        };
        if w.accesses.iter().any(|a| a.stride(&j.iter).is_none_or(|s| s != 0 && s != 1)) {
            continue;
        }
        let first = at(
            &p.address,
            vec![step("sink", vec![int(1), text("last")]), step("interchange", vec![int(1), int(2)])],
        );
        let Ok(s2) = apply(state, "p", nest, &first, &[]) else { continue };
        let locs = loops_in_order(&s2.items);
        let Some(o) = locs.iter().find(|l| l.at == p.at) else { continue };
        let Some(inner) = o.l.body.iter().find_map(|x| x.as_loop()) else { continue };
        let split_at: Expr = inner.lb.add_int(1);
        let Some(split_at) = index(&split_at) else { continue };
        let second = at(&o.address, vec![step("split", vec![int(2), split_at])]);
        let Ok(whole) = apply(state, "p", &s2, &second, &[]) else { continue };
        if !matches!(crate::analysis::legality::decide_at_sizes(state, &whole), Ok(Ok(_))) {
            continue;
        }
        let outer = o.address.clone();
        let locs = loops_in_order(&whole.items);
        let parts: Vec<_> =
            locs.iter().filter(|l| l.at.len() == p.at.len() + 1 && l.at.starts_with(&p.at)).collect();
        let [_, rest] = parts.as_slice() else { continue };
        if !matches!(rest.l.body.as_slice(), [LNode::Stmt(_)]) {
            continue;
        }
        let focused = Nest { focus: rest.at.clone(), ..whole.clone() };
        if crate::analysis::legality::carries(state, &focused, &rest.l).unwrap_or(true) {
            continue;
        }
        let lanes = at(&rest.address, vec![step("vectorize", vec![int(1)])]);
        return Some(Sunk {
            address: p.address.clone(),
            outer,
            steps: vec![first, second, lanes],
            column: column.text(),
        });
    }
    None
}

pub(super) fn sink_rules(out: &mut Out, sk: &super::columns::Sunk, var: &str, j: usize, alone: bool) {
    out.comment(&format!("nest {}: a sum down a column ({}) inside {}", j + 1, sk.column, sk.address));
    out.prefix = if alone { String::new() } else { format!("n{}_", j + 1) };
    out.param(
        "sink",
        "sink",
        "the statements beside a sum down a column sunk into it, its loops interchanged, the rows in lanes",
        vec![
            choice(
                "true",
                format!(
                    "{}'s statements sunk into the sum at its last iteration, then {} outside: {} is read along rows, the rest of the loop in lanes",
                    sk.address, sk.outer, sk.column
                ),
            ),
            choice("false", "as written (the sum walks a column)"),
        ],
    );
    out.prefix.clear();
    out.begin_if(local("sink"));
    out.stmt(let_("p", local(var)));
    for l in &sk.steps {
        out.stmts(l);
    }
    out.stmt(set(local("parts").at(int(j)), local("p")));
    out.stmt(set(local("laned").at(int(j)), E::Bool(true)));
    out.end();
}
