//! Right-looking column steps turned left-looking, in blocks of columns: a loop `k` over
//! columns whose body finishes column `k` (statements, loops down it) and then updates every
//! later column `j` in `[k+1, ub]` (gramschmidt's norm, `Q[.][k]`, then `R[k][j]` and `A[.][j]`
//! for every `j > k`), where that update writes what a column's own steps read (a
//! factorization: each column waits on the updates of every earlier one). As written, each `k`
//! sweeps the whole trailing matrix: as many passes over it as there are columns. Here `k` is split where `j`'s range is empty (its last columns), the
//! column's own statements sink into `j` at its first iteration (`sink(.., "first", "j")`), `j`
//! is strip-mined into aligned blocks and the blocks go outside `k`: each block of columns
//! takes, in turn, the update of every earlier column, while it is in cache (the left-looking
//! order of a blocked factorization). The 2-D tensors the innermost loops walk down a column
//! (`A[i][j]`, `Q[i][k]`) are stored by columns (`permute_layout(.., [2, 1])`); the block's
//! first column (the one that ran the sunk statements) is split off, and the rest of the block's
//! columns run on threads, each column's loops in lanes. Every step is checked by isl here,
//! and again when the script runs.

use super::code::{E, S, apply, at, index, int, ints, let_, local, set, step, text};
use super::walk::loops_in_order;
use super::writer::{Out, choice};
use crate::ir::{Expr, LNode, Name, Nest, State};
use crate::ops::registry::ArgVal;

/// One such loop, as the script's steps address it.
pub(super) struct Left {
    /// The address `focus` takes for the loop over columns `k` (`k#1`).
    pub address: String,
    /// The iterator of the loop over later columns (`j`).
    pub into: Name,
    /// The tensors stored by columns.
    pub layouts: Vec<Name>,
    /// The steps over `p`, line by line, with the block's columns in the variable `left`.
    pub steps: Vec<Vec<S>>,
}

/// Columns per block the rule tries first.
pub(super) const BLOCK: i64 = 64;

/// The first top-level loop of `nest` this rule turns left-looking, where every step is legal
/// (isl) with blocks of `block` columns.
pub(super) fn left(state: &State, nest: &Nest, block: i64) -> Option<Left> {
    if !nest.focus.is_empty() {
        return None;
    }
    for p in loops_in_order(&nest.items) {
        if p.at.len() != 1 {
            continue;
        }
        let k = &p.l;
        let Some((LNode::Loop(j), before)) = k.body.split_last() else { continue };
        // `j` from `k + 1`, to a bound that does not move with `k`; the column's own work
        // before it; nothing but statements and loops over other iterators below `j`.
        if before.is_empty()
            || j.lb.sub(&Expr::var_name(&k.iter)).as_const() != Some(1)
            || j.ub.mentions(&k.iter)
            || !j.body.iter().any(|x| x.as_loop().is_some())
        {
            continue;
        }
        // A factorization: the later columns' update writes what a column's own steps read
        // (gramschmidt's `A`), so each column waits on every earlier one's update. (Where it
        // does not, as correlation's products, the columns are independent: other rules.)
        let written: Vec<Name> = j
            .body
            .iter()
            .flat_map(|x| x.stmts())
            .filter_map(|s| crate::ir::lower(&s).and_then(|lw| lw.target.id().cloned()))
            .collect();
        let mut feeds = false;
        for s in before.iter().flat_map(|x| x.stmts()) {
            if let Some(lw) = crate::ir::lower(&s) {
                lw.rhs.visit(&mut |n| feeds |= n.id().is_some_and(|t| written.contains(t)));
            }
        }
        if !feeds {
            continue;
        }
        if let Some(lf) = probe(state, nest, &p, j, block) {
            return Some(lf);
        }
    }
    None
}

/// The steps of the rule on the loop over columns `p` (its loop over later columns `j`), each
/// line applied through the registry as the script applies it; `None` where one is refused.
fn probe(
    state: &State,
    nest: &Nest,
    p: &super::walk::Located,
    j: &crate::ir::Loop,
    block: i64,
) -> Option<Left> {
    let env = [("left", ArgVal::Int(block))];
    let run = |n: &Nest, line: &[S]| apply(state, "p", n, line, &env).ok();
    let mut steps: Vec<Vec<S>> = Vec::new();
    // `k` split where `j`'s range is empty; the column's statements sunk into `j`'s first
    // iteration, `j` in aligned blocks, the blocks outside `k`.
    let line = at(&p.address, vec![step("split", vec![int(1), index(&j.ub)?])]);
    let mut cur = run(nest, &line)?;
    steps.push(line);
    let line = at(
        &p.address,
        vec![
            step("sink", vec![int(1), text("first"), text(&j.iter)]),
            step("stripmine", vec![int(2), local("left"), text("aligned")]),
            step("interchange", vec![int(1), int(2)]),
        ],
    );
    cur = run(&cur, &line)?;
    steps.push(line);
    let blocks = loops_in_order(&cur.items).into_iter().find(|l| l.at == p.at)?;
    // The tensors every innermost loop walks down a column: stored by columns.
    let layouts = columns(state, &cur);
    for t in &layouts {
        let line = vec![step("permute_layout", vec![text(t), ints(&[2, 1])])];
        cur = run(&cur, &line)?;
        steps.push(line);
    }
    // A block's first column (the one that runs the sunk statements) split off.
    let line = at(&blocks.address, vec![step("split", vec![int(3), index(&j.lb.add_int(1))?])]);
    cur = run(&cur, &line)?;
    steps.push(line);
    // The rest of a block's columns: the second loop over `j` in the loop over `k`.
    let locs = loops_in_order(&cur.items);
    let rest = locs
        .iter()
        .filter(|l| l.l.iter == j.iter && l.at.starts_with(&p.at) && l.at.len() == p.at.len() + 2)
        .nth(1)?;
    let rest_at = rest.at.clone();
    let rest_address = rest.address.clone();
    let inner: Vec<String> = locs
        .iter()
        .filter(|l| l.at.starts_with(&rest_at) && l.at.len() > rest_at.len())
        .filter(|l| l.l.body.iter().all(|x| x.as_loop().is_none()))
        .map(|l| l.address.clone())
        .collect();
    for address in &inner {
        let line = at(address, vec![step("vectorize", vec![int(1)])]);
        if let Some(n) = run(&cur, &line) {
            cur = n;
            steps.push(line);
        }
    }
    let line = at(&rest_address, vec![step("parallelize", vec![int(1)])]);
    cur = run(&cur, &line)?;
    steps.push(line);
    if !matches!(crate::analysis::legality::decide_at_sizes(state, &cur), Ok(Ok(_))) {
        return None;
    }
    Some(Left { address: p.address.clone(), into: j.iter.clone(), layouts, steps })
}

/// The 2-D tensors of `nest` every access to which, inside an innermost loop, has that loop's
/// iterator in its first index and not its second (a column), and which some such access
/// touches; an access outside every innermost loop with the row fixed counts as a column too.
fn columns(state: &State, nest: &Nest) -> Vec<Name> {
    let mut wanted: Vec<Name> = Vec::new();
    let mut refused: Vec<Name> = Vec::new();
    fn go(items: &[LNode], inner: Option<&Name>, wanted: &mut Vec<Name>, refused: &mut Vec<Name>) {
        for x in items {
            match x {
                LNode::Loop(l) => {
                    let innermost = l.body.iter().all(|b| b.as_loop().is_none());
                    go(&l.body, if innermost { Some(&l.iter) } else { None }, wanted, refused);
                }
                LNode::Stmt(s) => {
                    let Some(lw) = crate::ir::lower(s) else { continue };
                    let mut leaves = vec![(*lw.target).clone()];
                    leaves
                        .extend(lw.rhs.indexed_leaves().into_iter().filter(|l| l.is_tensor_leaf()).cloned());
                    for leaf in leaves {
                        let Some(t) = leaf.id() else { continue };
                        let index = leaf.index_list().unwrap_or(&[]);
                        if index.len() != 2 {
                            continue;
                        }
                        let down = inner.is_some_and(|i| index[0].mentions(i) && !index[1].mentions(i));
                        if down {
                            if !wanted.contains(t) {
                                wanted.push(t.clone());
                            }
                        } else if index.iter().any(|e| inner.is_some_and(|i| e.mentions(i)))
                            && !refused.contains(t)
                        {
                            refused.push(t.clone());
                        }
                    }
                }
            }
        }
    }
    go(&nest.items, None, &mut wanted, &mut refused);
    wanted
        .into_iter()
        .filter(|t| !refused.contains(t) && state.real_tensor(t).is_some() && !nest.layouts.contains_key(t))
        .collect()
}

/// Nest `j`'s sum down a column turned into row updates in lanes (columns.rs).
/// Nest `j`'s column steps left-looking, in blocks of columns (left.rs); the nest's other
/// rules where `left` is 0.
pub(super) fn left_rules(out: &mut Out, lf: &super::left::Left, var: &str, j: usize, alone: bool) {
    let into = &lf.into;
    out.comment(&format!(
        "nest {}: {} over columns, each updating every later column {into} (right-looking)",
        j + 1,
        lf.address
    ));
    out.prefix = if alone { String::new() } else { format!("n{}_", j + 1) };
    let stored = if lf.layouts.is_empty() {
        String::new()
    } else {
        format!(
            "; {} stored by columns (permute_layout): the loops down a column read them contiguously",
            lf.layouts.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ")
        )
    };
    let b = super::left::BLOCK;
    out.param(
        "left",
        "left",
        "the column steps left-looking: blocks of later columns outside the loop over columns",
        vec![
            choice(
                b,
                format!(
                    "blocks of {b} columns outside {}: each block takes every earlier column's update in turn while it is in cache, instead of one pass over all later columns per column (the column's own statements sunk into {into}'s first iteration){stored}; a block's columns after its first on threads, each column's loops in lanes",
                    lf.address
                ),
            ),
            choice(b / 2, format!("blocks of {} columns", b / 2)),
            choice(b * 2, format!("blocks of {} columns", b * 2)),
            choice(0, "right-looking, as written (the nest's other rules)"),
        ],
    );
    out.prefix.clear();
    out.begin_if(local("left").gt(int(0)));
    out.stmt(let_("p", local(var)));
    for l in &lf.steps {
        out.stmts(l);
    }
    for flag in ["parts", "ruled", "laned"] {
        out.stmt(set(local(flag).at(int(j)), if flag == "parts" { local("p") } else { E::Bool(true) }));
    }
    out.end();
}
