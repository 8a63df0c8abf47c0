//! Line sweeps in vector lanes: a data-parallel loop around recurrences, as adi's rows `i`,
//! each a forward recurrence over `j` (`p[i][j]` from `p[i][j-1]`) then a backward
//! substitution. A recurrence cannot run in lanes along its own loop, and a row at a time on
//! threads leaves each core waiting on the chain of one row's divisions. Its rows can: the
//! rows loop is strip-mined into blocks of a few vectors' worth (on threads), distributed inside
//! the block (legal: the loop carries nothing), and each recurrence of the block interchanged so
//! that the block's rows run innermost, in lanes: `io [ j [ i in lanes ] ]`, every lane its own
//! row's chain (Halide's vectorized pure dimension of a scan). The block keeps each row's sweeps
//! together, in cache, as the program wrote them. A 2-D tensor that only these loops touch, with
//! the row in its first index only (adi's `p`, `q`), is stored transposed (`permute_layout`):
//! the lanes read and write it contiguously; where each row writes its values before it reads
//! them (adi's `p`, `q`), it is stored per block of rows instead (`store_at`, transposed): a
//! buffer per block, in cache, written back nowhere.

use super::code::{E, S, at, int, ints, let_, local, set, step, text};
use super::walk::{extent, loops_in_order};
use super::workload::Workload;
use super::writer::{Out, choice};
use crate::ir::{LNode, Loop, Name, Nest, State, TExpr, TNode};
use std::collections::BTreeSet;

/// One loop of independent rows around recurrences.
pub(super) struct Rows {
    /// The address `focus` takes for the rows loop (`i#1`).
    pub address: String,
    /// Its iterator.
    pub iter: Name,
    /// The recurrences' addresses once the loop is strip-mined and distributed (each item of
    /// its body becomes a loop over the rows: `i#4` for the fourth), with their iterators.
    pub recurrences: Vec<(String, Name)>,
}

/// What [`sweeps`] finds in a nest.
pub(super) struct Sweeps {
    /// The rows loops, in program order.
    pub rows: Vec<Rows>,
    /// 2-D tensors only the rows loops touch, the row in the first index only: transposed.
    pub transpose: Vec<Name>,
    /// Those of them that each rows loop touching them writes before it reads, row by row (isl):
    /// stored per block of rows instead (`store_at`, transposed), with the rows loops (indices
    /// into `rows`) that touch each.
    pub per_block: Vec<(Name, Vec<usize>)>,
    /// Whether a loop runs around the rows loops (adi's time steps): the kernel converts a
    /// transposed tensor once, at entry and exit, for every sweep of every step; with no
    /// loop around, a conversion costs about what the sweep does.
    pub repeated: bool,
    /// Elements in one vector of the machine, for the nest's arithmetic.
    pub lanes: usize,
}

/// The loops of `nest` that run independent rows around recurrences (at least `2 * lanes`
/// rows), and the tensors worth transposing for them; `None` where there is none. `others`:
/// the kernel's other nests (a tensor they touch keeps its layout).
pub(super) fn sweeps(state: &State, nest: &Nest, others: &[&Nest], lanes: usize) -> Option<Sweeps> {
    if !nest.focus.is_empty() {
        return None;
    }
    let mut rows: Vec<Rows> = Vec::new();
    let mut chosen: Vec<Vec<usize>> = Vec::new();
    let mut located: Vec<(std::sync::Arc<Loop>, Vec<std::sync::Arc<Loop>>)> = Vec::new();
    let mut repeated = true;
    for p in loops_in_order(&nest.items) {
        if chosen.iter().any(|c| p.at.starts_with(c)) {
            continue;
        }
        let l = &p.l;
        let Some(extent) = extent(state, l) else { continue };
        if extent < 2 * lanes as i64 {
            continue;
        }
        // Its body: statements, and loops over another iterator whose bounds do not use the
        // row and whose bodies are statements (each interchanges with the rows loop).
        let shallow = |x: &Loop| {
            x.iter != l.iter
                && !x.lb.mentions(&l.iter)
                && !x.ub.mentions(&l.iter)
                && x.body.iter().all(|b| b.as_loop().is_none())
        };
        if !l.body.iter().all(|x| x.as_loop().is_none_or(|x| shallow(x))) {
            continue;
        }
        let Some(n) = p.address.rsplit('#').next().and_then(|n| n.parse::<usize>().ok()) else { continue };
        // Which loops of its body run a recurrence (carry more than a reduction), and whether
        // the rows loop itself carries anything: one reading of the dependences for all.
        let inner: Vec<(usize, &Loop)> =
            l.body.iter().enumerate().filter_map(|(k, x)| x.as_loop().map(|x| (k, x.as_ref()))).collect();
        let asked: Vec<&Loop> = inner.iter().map(|(_, x)| *x).chain([l.as_ref()]).collect();
        let Ok(kinds) = crate::analysis::legality::carried_kinds(state, nest, &asked) else { continue };
        let recurrences: Vec<(String, Name)> = inner
            .iter()
            .zip(&kinds)
            .filter(|(_, (_, beyond))| *beyond)
            .map(|((k, x), _)| (format!("{}#{}", l.iter, n + k), x.iter.clone()))
            .collect();
        if recurrences.is_empty() || kinds.last().is_none_or(|(carried, _)| *carried) {
            continue;
        }
        chosen.push(p.at.clone());
        located.push((p.l.clone(), p.around.clone()));
        repeated &= !p.around.is_empty();
        rows.push(Rows { address: p.address.clone(), iter: l.iter.clone(), recurrences });
    }
    if rows.is_empty() {
        return None;
    }
    // The tensors to transpose: 2-D, touched in no other nest and outside no rows loop, every
    // access inside one with the row (coefficient ±1) in its first index and not its second,
    // and one of them inside a recurrence.
    let mut refused: BTreeSet<Name> = BTreeSet::new();
    let mut wanted: BTreeSet<Name> = BTreeSet::new();
    for o in others {
        if let Ok(w) = Workload::shape(state, o) {
            refused.extend(w.accesses.iter().map(|a| a.tensor.clone()));
        }
    }
    walk(&nest.items, &chosen, &mut Vec::new(), None, false, &mut refused, &mut wanted);
    let transpose: Vec<Name> = wanted
        .into_iter()
        .filter(|t| !refused.contains(t))
        .filter(|t| {
            state
                .real_tensor(t)
                .is_some_and(|x| x.extents_at(&|v| state.constant(v)).is_ok_and(|e| e.len() == 2))
        })
        .collect();
    // A row's values of such a tensor, written before they are read in the row's own sweep,
    // need no whole tensor: a buffer per block of rows holds them, in cache (asked of each row,
    // which a block of rows keeps).
    let per_block = transpose
        .iter()
        .filter_map(|t| {
            // A tensor with values written and never read holds a result: kept whole.
            if !matches!(crate::analysis::legality::leaves_values_unread(state, nest, t), Ok(false)) {
                return None;
            }
            let mut touching = Vec::new();
            for (k, (l, around)) in located.iter().enumerate() {
                let outer: Vec<&Loop> = around.iter().map(|x| &**x).collect();
                if crate::analysis::storage::per_iteration_block(state, nest, &outer, l, t).is_err() {
                    continue;
                }
                if !matches!(crate::analysis::legality::stays_local(state, nest, l, t), Ok(Ok(()))) {
                    return None;
                }
                touching.push(k);
            }
            (!touching.is_empty()).then(|| (t.clone(), touching))
        })
        .collect();
    Some(Sweeps { rows, transpose, per_block, repeated, lanes })
}

/// Sorts the tensors each statement touches: into `refused` where an access does not suit
/// the transposed layout, into `wanted` where one in a recurrence does.
fn walk(
    items: &[LNode],
    chosen: &[Vec<usize>],
    at: &mut Vec<usize>,
    row: Option<&Name>,
    in_recurrence: bool,
    refused: &mut BTreeSet<Name>,
    wanted: &mut BTreeSet<Name>,
) {
    for (k, x) in items.iter().enumerate() {
        at.push(k);
        match x {
            LNode::Loop(l) => {
                if chosen.contains(at) {
                    walk(&l.body, chosen, at, Some(&l.iter), false, refused, wanted);
                } else {
                    walk(&l.body, chosen, at, row, in_recurrence || row.is_some(), refused, wanted);
                }
            }
            LNode::Stmt(s) => {
                for leaf in leaves(s) {
                    let Some(id) = leaf.id() else { continue };
                    let index = leaf.index_list().unwrap_or(&[]);
                    let suits = row.is_some_and(|r| {
                        index.len() == 2
                            && index[0].is_affine()
                            && index[0].coeff(r).abs() == 1
                            && !index[1].mentions(r)
                    });
                    if !suits {
                        refused.insert(id.clone());
                    } else if in_recurrence {
                        wanted.insert(id.clone());
                    }
                }
            }
        }
        at.pop();
    }
}

/// The tensor leaves a statement writes and reads.
fn leaves(s: &TExpr) -> Vec<TNode> {
    let Some(lw) = crate::ir::lower::lower(s) else { return Vec::new() };
    let mut out = vec![(*lw.target).clone()];
    out.extend(lw.rhs.indexed_leaves().into_iter().filter(|l| l.is_tensor_leaf()).cloned());
    out
}

/// The rows of line sweeps of nest `j` (variable `var`) in blocks, each recurrence with the
/// block's rows in lanes (sweep.rs); the nest's other rules where `rows` is 0.
pub(super) fn sweep_rules(out: &mut Out, sw: &super::sweep::Sweeps, var: &str, j: usize, alone: bool) {
    let lanes = sw.lanes;
    let recurrences: Vec<String> =
        sw.rows.iter().flat_map(|r| r.recurrences.iter().map(|(_, it)| it.to_string())).collect();
    let rows: Vec<String> = sw.rows.iter().map(|r| r.iter.to_string()).collect();
    out.comment(&format!(
        "nest {}: independent rows ({}) around recurrences ({})",
        j + 1,
        rows.join(", "),
        recurrences.join(", ")
    ));
    out.prefix = if alone { String::new() } else { format!("n{}_", j + 1) };
    let block = |k: usize, why: &str| {
        choice(k * lanes, format!("blocks of {} rows ({k} vectors) on threads{why}", k * lanes))
    };
    // Transposed, the lanes read and write contiguously: 4 vectors of rows; gathering from as
    // many rows as lanes, 2 (each lane's row is a stream the prefetchers follow).
    let contiguous = !sw.per_block.is_empty() || (sw.repeated && !sw.transpose.is_empty());
    let first = if contiguous { 4 } else { 2 };
    let why = format!(
        ", each loop over {} that carries a dependence interchanged outside the block's rows, which run in lanes: every lane runs its own row's chain, and a block's sweeps stay in cache together{}",
        recurrences.join(", "),
        if contiguous { "" } else { " (2 vectors: each lane's row is a stream for the prefetchers)" }
    );
    let mut choices = vec![block(first, &why)];
    choices.extend([2, 4, 8].into_iter().filter(|&k| k != first).map(|k| block(k, "")));
    choices.push(choice(0, "row by row (the nest's other rules)"));
    out.param(
        "rows",
        "rows",
        "blocks of rows on threads, each recurrence with the block's rows innermost, in vector lanes",
        choices,
    );
    out.begin_if(local("rows").gt(int(0)));
    out.stmt(let_("p", local(var)));
    // Tensors stored per block of rows: asked here, applied in each block loop below.
    let blocked: Vec<&Name> = sw.per_block.iter().map(|(t, _)| t).collect();
    let whole: Vec<String> =
        sw.transpose.iter().filter(|t| !blocked.contains(t)).map(|t| t.to_string()).collect();
    if !sw.transpose.is_empty() {
        let names: Vec<String> = sw.transpose.iter().map(|t| t.to_string()).collect();
        let mut choices = Vec::new();
        if !blocked.is_empty() {
            let b: Vec<String> = blocked.iter().map(|t| t.to_string()).collect();
            choices.push(choice(
                "\"block\"",
                format!(
                    "{} stored per block of rows, transposed (store_at with [2, 1]): every row writes its values before it reads them (isl), so a block's buffer, in cache and contiguous in the lanes, holds them; the whole tensor is never written{}",
                    b.join(", "),
                    if whole.is_empty() { String::new() } else { format!("; {} stored transposed", whole.join(", ")) }
                ),
            ));
        }
        let mut rest = vec![
            choice(
                "\"whole\"",
                format!(
                    "{} stored transposed (permute_layout): the rows in lanes read and write them contiguously, converted once at entry and exit for every sweep around",
                    names.join(", ")
                ),
            ),
            choice("\"none\"", "as declared (the lanes gather and scatter)"),
        ];
        if !sw.repeated {
            rest.swap(0, 1);
            rest[0].reason =
                "as declared: no loop runs around the sweeps, a conversion would cost about what a sweep does".into();
        }
        choices.extend(rest);
        out.param(
            "transpose",
            "transpose",
            "tensors only the rows loops touch, the row in their first index: stored per block of rows or transposed",
            choices,
        );
    }
    // The last rows loop first: transforming it leaves the earlier ones' addresses.
    for (k, r) in sw.rows.iter().enumerate().rev() {
        out.stmts(&[
            step("focus", vec![text(&r.address)]),
            step("stripmine", vec![int(1), local("rows")]),
            step("distribute", vec![int(2)]),
            step("parallelize", vec![int(1)]),
        ]);
        for (t, touching) in &sw.per_block {
            if touching.contains(&k) {
                let store = step("store_at", vec![int(1), text(t), ints(&[2, 1])]);
                out.stmt(S::If(local("transpose").eq(text("block")), vec![store]));
            }
        }
        out.stmt(step("focus", vec![]));
        for (a, _) in r.recurrences.iter().rev() {
            out.stmts(&at(
                a,
                vec![step("interchange", vec![int(1), int(2)]), step("vectorize", vec![int(2)])],
            ));
        }
    }
    for t in &sw.transpose {
        let how = if blocked.contains(&t) {
            local("transpose").eq(text("whole"))
        } else {
            local("transpose").ne(text("none"))
        };
        out.stmt(S::If(how, vec![step("permute_layout", vec![text(t), ints(&[2, 1])])]));
    }
    out.prefix.clear();
    out.stmt(set(local("parts").at(int(j)), local("p")));
    out.stmt(set(local("ruled").at(int(j)), E::Bool(true)));
    out.end();
}
