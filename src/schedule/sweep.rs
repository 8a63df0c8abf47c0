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

use super::walk::{extent, loops_in_order};
use super::workload::Workload;
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
