//! Sums down a column turned into row updates: a loop `j` of statements beside an inner sum
//! over `k` that reads a column (nussinov's `table[i][j] = max(table[i][j], table[i][k] +
//! table[k+1][j])`: `table[k+1][j]` strides a row per `k`). The statements sink into the sum's
//! loop at its last iteration (`sink(p, 1, "last")`, legal where their updates commute with the
//! sum's: max updates of one element), `j` and `k` are interchanged (`k` outside: the inner loop
//! now walks rows), and `split` peels the one iteration of `j` that runs the sunk statements;
//! what is left of `j` is one statement, contiguous along `j`: in vector lanes.

use super::walk::loops_in_order;
use super::workload::Workload;
use super::writer::{Out, choice};
use crate::ir::{Expr, LNode, Nest, State};
use crate::ops::transform::{SinkAt, interchange, sink, split};

/// One such loop, as the script's steps address it.
pub(super) struct Sunk {
    /// The address `focus` takes for the loop `j` (`j#1`).
    pub address: String,
    /// The address of the sum's loop `k`, outside `j` after the interchange.
    pub outer: String,
    /// Where `j` is split (Rhai: `iter("k") + 2`).
    pub split: String,
    /// The address of the rest of `j` (one statement) after the split.
    pub lanes: String,
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
        let f = Nest { focus: p.at.clone(), ..nest.clone() };
        let Ok(s1) = sink(&f.view(), 1, SinkAt::Last, None).map(|n| f.splice(n)) else { continue };
        let Ok(s2) = interchange(&s1.view(), 1, 2).map(|n| s1.splice(n)) else { continue };
        let Some(outer) = s2.focused() else { continue };
        let Some(inner) = outer.body.iter().find_map(|x| x.as_loop()) else { continue };
        let at: Expr = inner.lb.add_int(1);
        let Ok(s3) = split(&s2.view(), 2, &at).map(|n| s2.splice(n)) else { continue };
        let whole = Nest { focus: Vec::new(), ..s3 };
        if !matches!(crate::analysis::legality::decide_at_sizes(state, &whole), Ok(Ok(_))) {
            continue;
        }
        let locs = loops_in_order(&whole.items);
        let Some(o) = locs.iter().find(|l| l.at == p.at) else { continue };
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
        return Some(Sunk {
            address: p.address.clone(),
            outer: o.address.clone(),
            split: rhai(&at)?,
            lanes: rest.address.clone(),
            column: column.text(),
        });
    }
    None
}

/// An affine expression as Rhai writes it over the program's iterators and constants:
/// `iter("k") + 2`.
pub(super) fn rhai(e: &Expr) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    for (v, c) in e.affine_terms()? {
        parts.push(if c == 1 { format!("iter(\"{v}\")") } else { format!("{c} * iter(\"{v}\")") });
    }
    if e.constant() != 0 || parts.is_empty() {
        parts.push(e.constant().to_string());
    }
    Some(parts.join(" + "))
}

pub(super) fn sink_rules(out: &mut Out, sk: &super::columns::Sunk, var: &str, j: usize, alone: bool) {
    out.line(&format!("// nest {}: a sum down a column ({}) inside {}", j + 1, sk.column, sk.address));
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
    out.line("if sink {");
    out.indent += 1;
    out.line(&format!("let p = {var};"));
    out.line(&format!(
        "p = focus(p, \"{}\"); p = sink(p, 1, \"last\"); p = interchange(p, 1, 2); p = focus(p);",
        sk.address
    ));
    out.line(&format!("p = focus(p, \"{}\"); p = split(p, 2, {}); p = focus(p);", sk.outer, sk.split));
    out.line(&format!("p = focus(p, \"{}\"); p = vectorize(p, 1); p = focus(p);", sk.lanes));
    out.line(&format!("parts[{j}] = p;"));
    out.line(&format!("laned[{j}] = true;"));
    out.indent -= 1;
    out.line("}");
}
