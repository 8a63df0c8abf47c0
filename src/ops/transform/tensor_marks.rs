//! Marks a loop carries for a tensor: registers, packing, streaming stores, storage per
//! iteration (`store_at`).

use super::*;

/// `registers(l, r, T)` (scalar replacement): the elements of tensor `T` that the body of the
/// loop at level `r` accesses are kept in local variables for the loop's duration: loaded
/// before it, stored after it if written (`analysis::registers`). Inside an explicit vector
/// loop, a block of lanes is one vector register. Refused where an access to `T` varies inside
/// the loop, where two accesses may be the same element, or where a loop of the band runs on
/// threads. `registers(l, 3, C)` after unroll-and-jam of `i` by 2:
///
/// ```text
/// for k in [0, K-1]                         c0 = C[2*io][j]; c1 = C[2*io+1][j]
///   C[2*io][j] += A[2*io][k] * B[k][j]   →  for k in [0, K-1]  registers(C)
///   C[2*io+1][j] += A[2*io+1][k] * B[k][j]     c0 += A[2*io][k] * B[k][j]
///                                              c1 += A[2*io+1][k] * B[k][j]
///                                           C[2*io][j] = c0; C[2*io+1][j] = c1
/// ```
pub fn registers(nest: &Nest, level: i64, tensor: &Name) -> Result<Nest> {
    mark_tensor(
        nest,
        level,
        "registers",
        tensor,
        TensorMark { get: |a| &a.registers, get_mut: |a| &mut a.registers, what: "kept in registers across" },
        &|outer, l| crate::analysis::registers::units(outer, l, tensor, &nest.layouts).map(|_| ()),
    )
}

/// Why a mark would change a nest's meaning, given the loops outside and the marked loop.
pub(super) type MarkCheck<'a> = dyn Fn(&[&Loop], &Loop) -> std::result::Result<(), String> + 'a;

/// Which list of tensors a loop's mark goes into (`registers`, `pack`), and how a refusal
/// names it.
pub(super) struct TensorMark {
    get: fn(&crate::ir::Annotations) -> &Vec<Name>,
    get_mut: fn(&mut crate::ir::Annotations) -> &mut Vec<Name>,
    what: &'static str,
}

/// Adds `tensor` to the list `mark` of the loop at `level`: refused where an enclosing or an
/// inner loop already has it there (one band per tensor), or where `check` (given the loops
/// outside and the marked loop) says why the mark would change the nest's meaning.
pub(super) fn mark_tensor(
    nest: &Nest,
    level: i64,
    b: &str,
    tensor: &Name,
    mark: TensorMark,
    check: &MarkCheck<'_>,
) -> Result<Nest> {
    let l = locate(nest, level, b, &level_arg(2))?;
    let path = nest.path();
    let outer: Vec<&Loop> = path.iter().take(level as usize - 1).map(|o| &**o).collect();
    let illegal = |reason: String| Error::Illegal { builtin: b.into(), reason };
    let what = mark.what;
    if let Some(o) = outer.iter().find(|o| (mark.get)(&o.annot).contains(tensor)) {
        return Err(illegal(format!(
            "`{tensor}` is already {what} the enclosing loop `{}`: expected one band per tensor",
            o.iter
        )));
    }
    fn inner(body: &[LNode], t: &Name, get: fn(&crate::ir::Annotations) -> &Vec<Name>) -> Option<Name> {
        body.iter().filter_map(|x| x.as_loop()).find_map(|x| {
            if get(&x.annot).contains(t) { Some(x.iter.clone()) } else { inner(&x.body, t, get) }
        })
    }
    if let Some(i) = inner(&l.body, tensor, mark.get) {
        return Err(illegal(format!(
            "`{tensor}` is already {what} the inner loop `{i}`: expected one band per tensor"
        )));
    }
    let mut l2 = (*l).clone();
    if !(mark.get)(&l2.annot).contains(tensor) {
        (mark.get_mut)(&mut l2.annot).push(tensor.clone());
    }
    check(&outer, &l2).map_err(illegal)?;
    let l2 = Arc::new(l2);
    rewrite_loop(nest, level, b, &level_arg(2), &mut |_| Ok(vec![LNode::Loop(l2.clone())]))
}

/// `pack(l, r, T)` (packing): the block of tensor `T` that the body of the loop at level `r`
/// reads is copied into a contiguous buffer before the loop (each time it starts) and read
/// from there inside it (`analysis::packing`): the A and B panels of BLIS. Refused where the
/// loop's body writes `T`, where the block read has no fixed shape, or where `T` is already
/// packed around or inside the loop. `pack(l, 2, B)` for a k block:
///
/// ```text
/// for ko in [0, 3]                      for ko in [0, 3]
///   for k in [64*ko, 64*ko+63]   →         Bp[0..63][0..N-1] = B[64*ko..64*ko+63][0..N-1]
///     ... B[k][j] ...                      for k in [64*ko, 64*ko+63]  pack(B)
///                                            ... Bp[k-64*ko][j] ...
/// ```
///
/// `layout` lays the buffer out otherwise: its dimensions in another order (BLIS's A panel,
/// `[2, 1]`: the block of `A[i][k]` stored `Ap[k][i]`, so the rows a register tile reads for
/// one `k` are adjacent) and its innermost dimension rounded up to a multiple of `pad` (rows
/// that start on a vector or cache-line boundary). Only the buffer changes; every read is
/// rewritten to it, so the meaning does not.
pub fn pack(nest: &Nest, level: i64, tensor: &Name, layout: &PackLayout) -> Result<Nest> {
    let b = "pack";
    if layout.pad < 1 || layout.pad > MAX_PAD {
        return Err(Error::bad_argument(
            b,
            Arg::new(5, "pad"),
            format!("a padding multiple from 1 to {MAX_PAD}"),
            layout.pad.to_string(),
        ));
    }
    // The block's rank, from the footprint the mark's check computes.
    let rank = std::cell::Cell::new(0);
    let marked = mark_tensor(
        nest,
        level,
        b,
        tensor,
        TensorMark { get: |a| &a.pack, get_mut: |a| &mut a.pack, what: "packed for" },
        &|outer, l| {
            let iters: Vec<Name> = outer.iter().map(|o| o.iter.clone()).collect();
            rank.set(crate::analysis::packing::footprint(&iters, l, tensor)?.extent.len());
            Ok(())
        },
    )?;
    let rank = rank.get();
    if !layout.order.is_empty() {
        let mut sorted = layout.order.clone();
        sorted.sort_unstable();
        if sorted != (0..rank).collect::<Vec<_>>() {
            return Err(Error::bad_argument(
                b,
                Arg::new(4, "order"),
                format!("a permutation of 1..{rank}: the {rank} dimensions of `{tensor}`'s block"),
                format!(
                    "[{}]",
                    layout.order.iter().map(|d| (d + 1).to_string()).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    let order = layout.order(rank);
    if order.last().is_some_and(|d| d + 1 != rank) {
        let l = locate(&marked, level, b, &level_arg(2))?;
        if let Some((v, access)) = lanes_along(std::slice::from_ref(&LNode::Loop(l)), tensor) {
            return Err(Error::Illegal {
                builtin: b.into(),
                reason: format!(
                    "the vectorized loop `{v}` reads {access} along its last dimension, which the order \
                     [{}] moves: its lanes would not be adjacent in the buffer; expected an order that \
                     ends with {rank}",
                    order.iter().map(|d| (d + 1).to_string()).collect::<Vec<_>>().join(", ")
                ),
            });
        }
    }
    if layout.group > 1 {
        grouped_reads(&marked, level, tensor, rank, &order, layout.group)?;
    }
    rewrite_loop(&marked, level, b, &level_arg(2), &mut |l| {
        let mut l2 = (**l).clone();
        if layout.is_plain() {
            l2.annot.pack_layout.remove(tensor);
        } else {
            l2.annot.pack_layout.insert(tensor.clone(), layout.clone());
        }
        Ok(vec![LNode::Loop(Arc::new(l2))])
    })
}

/// `pack`'s groups: each read of `tensor` in the loop at `level` is an operand of a `dot` loop
/// of `group` iterations whose iterator indexes the buffer's first dimension (`order[0]`) and no
/// other (its lanes read the groups whole; a buffer in groups has no rows of adjacent lanes).
fn grouped_reads(
    nest: &Nest,
    level: i64,
    tensor: &Name,
    rank: usize,
    order: &[usize],
    group: usize,
) -> Result<()> {
    let b = "pack";
    if ![2, 4].contains(&group) {
        return Err(Error::bad_argument(
            b,
            Arg::new(6, "group"),
            "a group of 2 (bf16 pairs) or 4 (byte quads)",
            group.to_string(),
        ));
    }
    let illegal = |reason: String| Error::Illegal { builtin: b.into(), reason };
    if rank < 2 {
        return Err(illegal(format!(
            "`{tensor}`'s block has {rank} dimension: groups need a second to run along"
        )));
    }
    let first = order[0];
    fn walk(
        items: &[LNode],
        t: &Name,
        dot: Option<(&Name, usize)>,
        first: usize,
        group: usize,
    ) -> std::result::Result<(), String> {
        for x in items {
            match x {
                LNode::Loop(l) => {
                    let inner = if l.annot.dot > 0 { Some((&l.iter, l.annot.dot)) } else { dot };
                    walk(&l.body, t, inner, first, group)?;
                }
                LNode::Stmt(s) => {
                    let Some(lw) = crate::ir::lower(s) else { continue };
                    let mut bad = None;
                    lw.rhs.visit(&mut |n| {
                        if bad.is_some() || n.id() != Some(t) {
                            return;
                        }
                        let xs = n.index_list().unwrap_or(&[]);
                        let ok = dot.is_some_and(|(k, g)| {
                            g == group
                                && xs.iter().enumerate().all(|(d, e)| e.mentions(k) == (d == first))
                                && xs.get(first).is_some_and(|e| e.is_affine() && e.coeff(k) == 1)
                        });
                        if !ok {
                            bad = Some(match dot {
                                Some((k, g)) if g != group => {
                                    format!("{} is read by the loop `{k}` in groups of {g}, not {group}", n.access())
                                }
                                Some((k, _)) => format!(
                                    "{} is not indexed by `{k}` in its first dimension alone, with coefficient 1: expected `{k}` (plus a constant) there and nowhere else",
                                    n.access()
                                ),
                                None => format!(
                                    "{} is read outside a `dot` loop: apply dot to its reduction first",
                                    n.access()
                                ),
                            });
                        }
                    });
                    if let Some(why) = bad {
                        return Err(why);
                    }
                }
            }
        }
        Ok(())
    }
    let l = locate(nest, level, b, &level_arg(2))?;
    walk(&l.body, tensor, None, first, group).map_err(|why| {
        illegal(format!(
            "`{tensor}` packed in groups of {group} must be read by dot-product groups alone: {why}"
        ))
    })
}

/// A vectorized loop among `items` (or below) whose iterator indexes an access to `tensor`,
/// and the access.
pub(super) fn lanes_along(items: &[LNode], tensor: &Name) -> Option<(Name, String)> {
    items.iter().filter_map(|x| x.as_loop()).find_map(|l| {
        let hit = l.annot.vectorize.then(|| {
            l.body.iter().flat_map(|x| x.stmts()).find_map(|s| {
                let lw = crate::ir::lower(&s)?;
                let mut found = None;
                lw.rhs.visit(&mut |n| {
                    if found.is_none()
                        && n.id() == Some(tensor)
                        && n.index_list().is_some_and(|xs| xs.iter().any(|x| x.mentions(&l.iter)))
                    {
                        found = Some(n.access());
                    }
                });
                found
            })
        });
        match hit.flatten() {
            Some(a) => Some((l.iter.clone(), a)),
            None => lanes_along(&l.body, tensor),
        }
    })
}

/// `stream(l, r, T)` (non-temporal stores): the vectorized loop at level `r` stores its whole
/// vectors of `T` with streaming stores, which write a cache line without reading it first
/// (the read for ownership a plain store costs) and keep it out of the caches. The loop is
/// peeled until `T`'s first lane starts a vector-aligned address; the stores are fenced after
/// it. Only the code changes, not the order: the nest means what it meant. For a result
/// written once and read later (blur's output, at 2/3 of its memory traffic). Refused where
/// the loop is not an innermost vectorized loop, where its body does not set (`=`) `T` with
/// lanes along its last dimension, or where `T` is kept in registers, stored per iteration or
/// another tensor is streamed by the loop. `stream(l, 2, B)`:
///
/// ```text
/// for j in [0, N-3]  vectorize      for j in [0, N-3]  vectorize stream(B)
///   B[i][j] = (A[i][j] + ...) / 9  →   B[i][j] = (A[i][j] + ...) / 9   (streamed)
/// ```
pub fn stream(nest: &Nest, level: i64, tensor: &Name) -> Result<Nest> {
    let b = "stream";
    // A result stored over its operand (`in_place`) is stored as the operand.
    let tensor = nest.over.get(tensor).unwrap_or(tensor);
    let l = locate(nest, level, b, &level_arg(2))?;
    let illegal = |reason: String| Error::Illegal { builtin: b.into(), reason };
    if !l.annot.vectorize {
        return Err(illegal(rule(Mark::Stream, Mark::Vector, Scope::Loop).words(&[("here", &l.iter)])));
    }
    if let Some(inner) = l.body.iter().find_map(|x| x.as_loop()) {
        return Err(illegal(format!(
            "loop `{}` has the loop `{}` inside: expected an innermost vectorized loop (its lanes are \
             the vectors stored)",
            l.iter, inner.iter
        )));
    }
    if let Some(other) = l.annot.stream.iter().find(|t| *t != tensor) {
        return Err(illegal(format!(
            "loop `{}` already streams `{other}`: expected one streamed tensor per loop (its stores \
             decide where the loop is peeled to)",
            l.iter
        )));
    }
    let path = nest.path();
    let outer = path.iter().take(level as usize - 1);
    // Registers on the loops around (their stores are after them); storage per iteration on
    // those or on this loop.
    let met = |o: &Loop, m: Mark| o.annot.marks_for(tensor).contains(&m);
    let at = |o: &Loop, m: Mark| {
        illegal(rule(Mark::Stream, m, Scope::Around).words(&[
            ("t", tensor),
            ("loop", &o.iter),
            ("here", &l.iter),
        ]))
    };
    if let Some(o) = outer.clone().find(|o| met(o, Mark::Registers)) {
        return Err(at(o, Mark::Registers));
    }
    if let Some(o) = outer.clone().chain([&l]).find(|o| met(o, Mark::StoreAt)) {
        return Err(at(o, Mark::StoreAt));
    }
    let mut set = None;
    let mut summed = None;
    for s in l.body.iter().flat_map(|x| x.stmts()) {
        let Some(lw) = crate::ir::lower(&s) else { continue };
        if lw.target.id() != Some(tensor) {
            continue;
        }
        let index = lw.target.index_list().unwrap_or(&[]);
        let along = index
            .split_last()
            .is_some_and(|(last, rest)| last.mentions(&l.iter) && !rest.iter().any(|x| x.mentions(&l.iter)));
        match lw.update {
            crate::ir::Update::Set if along => set = Some(lw.target.access()),
            crate::ir::Update::Set => summed = summed.or(Some((lw.target.access(), false))),
            _ => summed = summed.or(Some((lw.target.access(), true))),
        }
    }
    if set.is_none() {
        let found = match summed {
            Some((a, true)) => format!(
                "{a} summed into (+=): its old values are read, so its lines come into the cache anyway"
            ),
            Some((a, false)) => {
                format!("{a}, whose lanes along `{}` are not adjacent elements of a row", l.iter)
            }
            None => format!("no statement in loop `{}` that writes `{tensor}`", l.iter),
        };
        return Err(illegal(format!(
            "expected a tensor that loop `{}` sets (=) along its last dimension; found {found}",
            l.iter
        )));
    }
    rewrite_loop(nest, level, b, &level_arg(2), &mut |l| {
        let mut l2 = (**l).clone();
        if !l2.annot.stream.contains(tensor) {
            l2.annot.stream.push(tensor.clone());
        }
        Ok(vec![LNode::Loop(Arc::new(l2))])
    })
}

/// `store_at(l, r, T [, order])` (storage contraction): tensor `T` is stored per iteration of
/// the loop at level `r`: each iteration has its own buffer of the block of `T` its body
/// accesses (a local array, private to the thread that runs it), instead of the whole tensor
/// (`analysis::storage`; Halide's `store_at`). `order` lays the block's dimensions out in
/// another order (`[2, 1]`: transposed, as `pack`'s), so that lanes along its first dimension
/// are adjacent. Refused where nothing reads `T` (a result), where the block has no fixed
/// shape or exceeds a thread's stack, and, with a witness (isl, after this and every later
/// transformation), where an iteration reads an element of `T` it did not write first, or a
/// statement outside the loop reads one that no write in its own iteration of the outermost
/// loop around it but not around `l` wrote first (there, `T` stays as declared).
/// `store_at(l, 1, t)` after fusing the element loops of interp:
///
/// ```text
/// for e in [0, E-1]                       for e in [0, E-1]  store_at(t)
///   t[e][a][b][c] += A[a][d]*u[e][d][b][c]   →  t'[a][b][c] += A[a][d]*u[e][d][b][c]
///   w[e][a][b][c] += A[b][d]*t[e][a][d][c]      w[e][a][b][c] += A[b][d]*t'[a][d][c]
/// ```
pub fn store_at(state: &State, nest: &Nest, level: i64, tensor: &Name, order: &[usize]) -> Result<Nest> {
    let b = "store_at";
    let rank = std::cell::Cell::new(0);
    let marked = mark_tensor(
        nest,
        level,
        b,
        tensor,
        TensorMark { get: |a| &a.store_at, get_mut: |a| &mut a.store_at, what: "stored per iteration of" },
        &|outer, l| {
            let fp = crate::analysis::storage::per_iteration_block(state, nest, outer, l, tensor)?;
            rank.set(fp.extent.len());
            Ok(())
        },
    )?;
    let rank = rank.get();
    let mut sorted = order.to_vec();
    sorted.sort_unstable();
    if !order.is_empty() && sorted != (0..rank).collect::<Vec<_>>() {
        return Err(Error::bad_argument(
            b,
            Arg::new(4, "order"),
            format!("a permutation of 1..{rank}: the {rank} dimensions of `{tensor}`'s block"),
            format!("[{}]", order.iter().map(|d| (d + 1).to_string()).collect::<Vec<_>>().join(", ")),
        ));
    }
    rewrite_loop(&marked, level, b, &level_arg(2), &mut |l| {
        let mut l2 = (**l).clone();
        if order.iter().enumerate().all(|(k, d)| k == *d) {
            l2.annot.store_layout.remove(tensor);
        } else {
            l2.annot.store_layout.insert(tensor.clone(), order.to_vec());
        }
        Ok(vec![LNode::Loop(Arc::new(l2))])
    })
}
