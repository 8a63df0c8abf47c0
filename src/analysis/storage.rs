//! Storage contraction: where a temporary lives. `store_at(l, r, T)` marks the loop at level
//! `r`; code generation then gives each iteration of that loop its own buffer holding the block
//! of `T` the iteration accesses (a local array: private to the thread that runs the iteration,
//! small enough to stay in cache), instead of the whole tensor. Halide's `store_at`, TVM's
//! storage of a stage inlined by `compute_at`, Exo's `lift_alloc`/`sink_alloc`; in the
//! literature, array contraction after fusion.
//!
//! That is the same computation exactly when (docs/semantics.md, "Storage contraction"):
//! - no other nest of the kernel accesses `T` (checked by `codegen`);
//! - every read of an element of `T` in the loop is preceded, in the same iteration of the
//!   loop (and of the loops around it), by a write of that element, so that the value read was
//!   computed in that iteration; and the updates of one element of an accumulation all run in
//!   one iteration (decided exactly by isl, [`super::legality`], after this and every later
//!   transformation);
//! - a statement of the nest outside the loop accesses `T` as declared; each of its reads is
//!   preceded by a write of the element in the same iteration of the outermost loop around
//!   it that is not around the marked loop (isl again), so it never reads what a buffer held
//!   and no buffer needs what it wrote: adi's column and row sweeps, sibling loops over blocks
//!   of rows, each computing its own `p` before reading it, store `p` per block in both;
//! - `T` is not a result: some statement of the nest reads it. Its values are dropped after
//!   the kernel (they are not compared by verification, and `-o` cannot save them).
//!
//! The buffer of an iteration is the box of elements its body may access ([`block`]: reads and
//! writes, affine in the loops around, of a fixed shape); an access `T[x]` becomes
//! `T_local[x - lo]`, injective within the iteration.

use super::packing::{self, Footprint};
use crate::ir::marks::Mark;
use crate::ir::{LNode, Loop, Name, Nest, State, lower};

/// Largest buffer of one iteration, in bytes: it lives on the stack of the thread that runs the
/// iteration (1 MiB, well inside the 8 MiB a thread has by default).
pub const MAX_BYTES: i64 = 1 << 20;

/// The block of `tensor` one iteration of loop `l` (inside loops over `outer`) accesses, its
/// ranges compared at the sizes `constants` gives.
pub fn block(
    outer: &[Name],
    l: &Loop,
    tensor: &Name,
    constants: packing::Constants<'_>,
) -> Result<Footprint, String> {
    let mut around: Vec<Name> = outer.to_vec();
    around.push(l.iter.clone());
    packing::block(
        &around,
        Vec::new(),
        &l.body,
        tensor,
        true,
        "the loop's body does not access",
        Some(constants),
    )
}

/// The conditions of storing `tensor` per iteration of loop `l` of `nest` (inside the loops
/// `outer`) that do not need dependence analysis, and the block an iteration stores; or why
/// not.
pub fn per_iteration_block(
    state: &State,
    nest: &Nest,
    outer: &[&Loop],
    l: &Loop,
    tensor: &Name,
) -> Result<Footprint, String> {
    let cannot = |why: String| format!("cannot store `{tensor}` per iteration of loop `{}`: {why}", l.iter);
    if let Some(r) = nest.refusal(Mark::StoreAt, tensor) {
        return Err(cannot(format!("{}: expected {}", r.found, r.expected)));
    }
    if l.annot.vectorize {
        return Err(cannot(
            "the loop is vectorized: its iterations run together in vector lanes; expected a loop \
             outside the lanes"
                .into(),
        ));
    }
    // Accesses outside the loop keep the tensor as declared; isl decides that none of them
    // reads what an iteration's buffer held (`legality::stays_local`).
    let inside = l.body.iter().flat_map(|x| x.stmts()).collect::<Vec<_>>();
    if !inside.iter().any(|s| lower(s).is_some_and(|lw| lw.target.id() == Some(tensor))) {
        return Err(cannot(format!("no statement in the loop writes `{tensor}`")));
    }
    let reads = |s: &crate::ir::TExpr| {
        lower(s).is_some_and(|lw| {
            let mut hit = false;
            lw.rhs.visit(&mut |n| hit |= n.id() == Some(tensor));
            hit
        })
    };
    if !inside.iter().any(reads) {
        return Err(cannot(format!(
            "no statement reads `{tensor}`: it is a result of the nest, whose values must be kept"
        )));
    }
    let iters: Vec<Name> = outer.iter().map(|o| o.iter.clone()).collect();
    let size = |v: &str| state.constant(v);
    let fp = block(&iters, l, tensor, &size).map_err(cannot)?;
    let mut elements: i64 = 1;
    for e in &fp.extent {
        let n =
            e.eval(&size).map_err(|c| cannot(format!("the block's extent {e} needs the constant {c}")))?;
        elements = elements.saturating_mul(n.max(0));
    }
    let bytes = elements.saturating_mul(fp.dtype.size() as i64);
    if bytes > MAX_BYTES {
        return Err(cannot(format!(
            "the block of an iteration is {} elements ({} KiB): expected at most {} KiB, which a \
             thread's stack holds (store it at a loop further in)",
            fp.extent.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(" x "),
            bytes / 1024,
            MAX_BYTES / 1024
        )));
    }
    Ok(fp)
}

/// The loops of `items` marked `store_at`, with the loops around each (outermost first).
pub fn marked(items: &[LNode]) -> Vec<(Vec<&Loop>, &Loop)> {
    fn go<'a>(items: &'a [LNode], outer: &mut Vec<&'a Loop>, out: &mut Vec<(Vec<&'a Loop>, &'a Loop)>) {
        for x in items {
            if let LNode::Loop(l) = x {
                if !l.annot.store_at.is_empty() {
                    out.push((outer.clone(), l));
                }
                outer.push(l);
                go(&l.body, outer, out);
                outer.pop();
            }
        }
    }
    let mut out = Vec::new();
    go(items, &mut Vec::new(), &mut out);
    out
}

/// Whether every statement of `items` that accesses `tensor` is inside a loop that stores it
/// per iteration: then the kernel holds no whole `tensor` (no parameter, no buffer); else the
/// statements outside those loops access it as declared.
pub fn held_in_loops(items: &[LNode], tensor: &Name) -> bool {
    items.iter().all(|x| match x {
        LNode::Loop(l) => l.annot.store_at.contains(tensor) || held_in_loops(&l.body, tensor),
        LNode::Stmt(s) => {
            let mut hit = false;
            s.visit(&mut |n| hit |= n.id() == Some(tensor));
            !hit
        }
    })
}

/// A temporary code generation stores per iteration: (the nest's position, the tensor, the
/// loop's iterator).
pub type Contracted = (usize, Name, Name);

/// Where code generation stores a temporary per iteration on its own (storage contraction
/// after fusion): for every tensor that one nest of the kernel writes and reads, that no other
/// nest accesses, that is not in `keep` (`-o` saves it) and not already marked, the innermost
/// loop around all its accesses (or, failing the conditions there, the next one out) where
/// [`per_iteration_block`] and isl ([`super::legality::stays_local`]) allow it and the block is smaller than
/// the tensor, and where every value written is read (else it holds a result). Returns the
/// nests with those marks added, and what was marked: (nest, tensor, loop iterator).
pub fn contract(
    state: &State,
    nests: &[(Name, Nest)],
    keep: &std::collections::BTreeSet<Name>,
) -> (Vec<(Name, Nest)>, Vec<Contracted>) {
    let mut out: Vec<(Name, Nest)> = nests.to_vec();
    let mut done = Vec::new();
    let touched: Vec<std::collections::BTreeSet<Name>> = nests
        .iter()
        .map(|(_, n)| {
            let mut ts = std::collections::BTreeSet::new();
            for s in n.stmts() {
                s.visit(&mut |x| {
                    if let Some(id) = x.id()
                        && x.index_list().is_some_and(|xs| !xs.is_empty())
                    {
                        ts.insert(id.clone());
                    }
                });
            }
            ts
        })
        .collect();
    for (k, (_, nest)) in out.iter_mut().enumerate() {
        let candidates: Vec<Name> = temporaries(nest)
            .into_iter()
            .filter(|t| !keep.contains(t) && !state.is_result(t))
            .filter(|t| touched.iter().enumerate().all(|(j, ts)| j == k || !ts.contains(t)))
            .collect();
        for t in candidates {
            if let Some((marked, at)) = place(state, nest, &t) {
                done.push((k, t.clone(), at));
                *nest = marked;
            }
        }
    }
    (out, done)
}

/// The tensors `nest` writes and reads (on a right-hand side), with dimensions, not already
/// stored per iteration anywhere.
fn temporaries(nest: &Nest) -> Vec<Name> {
    let stored: Vec<Name> = marked(nest.items()).iter().flat_map(|(_, l)| l.annot.store_at.clone()).collect();
    let mut written: Vec<Name> = Vec::new();
    let mut read: std::collections::BTreeSet<Name> = std::collections::BTreeSet::new();
    for s in nest.stmts() {
        let Some(lw) = lower(&s) else { continue };
        if let Some(t) = lw.target.id()
            && lw.target.index_list().is_some_and(|xs| !xs.is_empty())
            && !written.contains(t)
        {
            written.push(t.clone());
        }
        lw.rhs.visit(&mut |n| {
            if let Some(id) = n.id() {
                read.insert(id.clone());
            }
        });
    }
    written
        .into_iter()
        .filter(|t| {
            read.contains(t) && !stored.contains(t) && !nest.layouts.contains_key(t) && !nest.in_place(t)
        })
        .collect()
}

/// `nest` with `tensor` stored per iteration of the innermost loop that allows it, and that
/// loop's iterator; `None` where none does.
fn place(state: &State, nest: &Nest, tensor: &Name) -> Option<(Nest, Name)> {
    // The loops around every statement that accesses the tensor: their common chain.
    let mut common: Option<Vec<std::sync::Arc<Loop>>> = None;
    fn chains(
        items: &[LNode],
        outer: &mut Vec<std::sync::Arc<Loop>>,
        tensor: &Name,
        out: &mut Vec<Vec<std::sync::Arc<Loop>>>,
    ) {
        for x in items {
            match x {
                LNode::Loop(l) => {
                    outer.push(l.clone());
                    chains(&l.body, outer, tensor, out);
                    outer.pop();
                }
                LNode::Stmt(s) => {
                    let mut hit = false;
                    s.visit(&mut |n| hit |= n.id() == Some(tensor));
                    if hit {
                        out.push(outer.clone());
                    }
                }
            }
        }
    }
    let mut all = Vec::new();
    chains(nest.items(), &mut Vec::new(), tensor, &mut all);
    for c in all {
        common = Some(match common {
            None => c,
            Some(prev) => prev
                .iter()
                .zip(&c)
                .take_while(|(a, b)| std::sync::Arc::ptr_eq(a, b))
                .map(|(a, _)| a.clone())
                .collect(),
        });
    }
    let common = common?;
    // The tensor's declaration, else (a temporary of `lift`, bound nowhere) a leaf of the nest.
    let whole: Option<i64> = state.real_tensor(tensor).or_else(|| nest.leaf(tensor)).and_then(|t| {
        t.shape.dims()?.iter().try_fold(1i64, |acc, d| match d {
            crate::ir::Dim::Known(e) => e.eval(&|v| state.constant(v)).ok().map(|n| acc.saturating_mul(n)),
            crate::ir::Dim::Unknown => None,
        })
    });
    // A value from before the kernel rules out every loop: asked once, of the simple program.
    if !matches!(super::legality::written_before_read(state, nest, tensor), Ok(Ok(()))) {
        return None;
    }
    // So does a value written and never read: the tensor holds a result (a recurrence's last
    // column), even though the nest reads it too.
    if !matches!(super::legality::leaves_values_unread(state, nest, tensor), Ok(false)) {
        return None;
    }
    for d in (0..common.len()).rev() {
        let l = &common[d];
        let outer: Vec<&Loop> = common[..d].iter().map(|x| &**x).collect();
        let Ok(fp) = per_iteration_block(state, nest, &outer, l, tensor) else { continue };
        let elements = fp
            .extent
            .iter()
            .try_fold(1i64, |acc, e| e.eval(&|v| state.constant(v)).ok().map(|n| acc.saturating_mul(n)));
        if !matches!((elements, whole), (Some(a), Some(b)) if a < b) {
            continue;
        }
        if !matches!(super::legality::stays_local(state, nest, l, tensor), Ok(Ok(()))) {
            continue;
        }
        let mut l2 = (**l).clone();
        l2.annot.store_at.push(tensor.clone());
        let items = replace(nest.items(), l, &std::sync::Arc::new(l2));
        return Some((nest.with_items(items), l.iter.clone()));
    }
    None
}

/// `items` with the loop `old` (by identity) replaced by `new`.
fn replace(items: &[LNode], old: &std::sync::Arc<Loop>, new: &std::sync::Arc<Loop>) -> Vec<LNode> {
    items
        .iter()
        .map(|x| match x {
            LNode::Loop(l) if std::sync::Arc::ptr_eq(l, old) => LNode::Loop(new.clone()),
            LNode::Loop(l) => LNode::Loop(l.with_body(replace(&l.body, old, new))),
            s => s.clone(),
        })
        .collect()
}
