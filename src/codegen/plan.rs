//! The kernel's plan, decided before any C is printed: the nests after storage contraction
//! (temporaries that live within one iteration of a fused loop, `analysis::storage`), the
//! tensors stored per iteration or held by the kernel, the layouts (one per tensor), the
//! parameters in order with their C spellings, and the named constants. The printer
//! ([`super::print`]) reads the plan and prints it; it decides nothing about the kernel as a
//! whole.

use super::*;
pub(super) use crate::analysis::kernel::unrealizable;

/// What one kernel is, before it is printed.
pub(super) struct KernelPlan {
    /// The nests in order, after storage contraction.
    pub(super) nests: Vec<(Name, Nest)>,
    /// Per nest, the tensors code generation stores per iteration on its own (not the program's
    /// `store_at`).
    pub(super) auto: Vec<Vec<Name>>,
    /// The parameters, in order, before the kernel's own buffers are taken out of them.
    pub(super) params: Vec<Param>,
    /// Tensors with a copy per iteration of a loop (`privatize`) or temporaries of `lift`: the
    /// kernel allocates them (never parameters, never converted).
    pub(super) internal: BTreeSet<Name>,
    /// Tensors held by a copy per iteration of a loop (`privatize`).
    pub(super) expanded: BTreeSet<Name>,
    /// Tensors stored in another layout for the whole kernel, one layout each.
    pub(super) layouts: BTreeMap<Name, crate::ir::Layout>,
    /// The named constants the kernel uses.
    pub(super) consts: Vec<Name>,
    /// The C spelling of every name.
    pub(super) names: Rc<CNames>,
}

impl KernelPlan {
    /// The parameters the kernel function takes: all but the buffers it holds itself.
    pub(super) fn taken(&self) -> Vec<Param> {
        self.params.iter().filter(|p| !self.internal.contains(&p.name)).cloned().collect()
    }
}

/// Plans kernel `name` running `nests` in order, keeping the tensors of `keep` whole (`-o`
/// saves them). Refuses what cannot be realized: a kept tensor stored per iteration or
/// privatized, a tensor with two layouts, or a layout on a tensor stored per iteration.
pub(super) fn plan_kernel(
    state: &State,
    name: &str,
    nests: &[(Name, Nest)],
    keep: &BTreeSet<Name>,
) -> Result<KernelPlan> {
    if !is_c_ident(name) {
        return Err(Error::bad_argument(
            "codegen",
            crate::error::Arg::new(nests.len() + 1, "name"),
            "a C identifier as kernel name",
            format!("`{name}`"),
        ));
    }
    for (_, n) in nests {
        for x in n.items() {
            registers_outside_their_pack(x)?;
        }
    }
    // Temporaries that live within one iteration of a loop after fusion are stored there.
    let (contracted, auto) = storage::contract(state, nests, keep);
    let nests = contracted;
    let mut local: BTreeSet<Name> = BTreeSet::new();
    for (_, n) in &nests {
        for (_, l) in storage::marked(n.items()) {
            local.extend(l.annot.store_at.iter().cloned());
        }
    }
    // Tensors with a copy per iteration of a loop (`privatize`): the kernel holds them.
    let expanded: BTreeSet<Name> =
        nests.iter().flat_map(|(_, n)| n.expanded.values().map(|x| x.buffer.clone())).collect();
    if let Some(t) = nests.iter().flat_map(|(_, n)| n.expanded.keys()).find(|t| keep.contains(*t)) {
        return Err(unrealizable(format!(
            "`{t}` has a copy per iteration of a loop (privatize), so its values are not kept after the \
             kernel; expected no -o for it, or no privatize (`result({t})` in the program, or --result {t}, \
             declares it a result: then no path privatizes it)"
        )));
    }
    if let Some(t) = local.iter().find(|t| keep.contains(*t)) {
        return Err(unrealizable(format!(
            "`{t}` is stored per iteration of a loop (store_at), so its values are not kept after the \
             kernel; expected no -o for it, or no store_at (`result({t})` in the program, or --result {t}, \
             declares it a result: then teml auto and its spaces keep it whole)"
        )));
    }
    let layouts = kernel::one_layout_per_tensor(&nests, &local).map_err(unrealizable)?;
    let (tensors, iters, consts) = kernel::layout(state, &nests)?;
    let mut params: Vec<Param> = tensors
        .into_iter()
        .map(|t| Param {
            c_name: t.name.to_string(),
            name: t.name,
            dtype: t.dtype,
            dims: t.dims,
            written: t.written,
            holds: None,
            fresh: false,
        })
        .collect();
    let names = Rc::new(CNames::new(name, iters.iter().chain(&consts), params.iter().map(|p| &p.name)));
    for p in params.iter_mut() {
        p.c_name = names.tensor(&p.name).to_string();
    }
    // A result stored over its operand: the operand's buffer is the result's parameter.
    for (_, n) in &nests {
        for (y, x) in &n.over {
            if let Some(p) = params.iter_mut().find(|p| &p.name == x) {
                p.holds = Some(x.clone());
                p.name = y.clone();
            }
        }
    }
    // A tensor stored per iteration is no parameter where every access is in such a loop: the
    // kernel holds it (accessed outside them too, it stays one; its values are not compared).
    params.retain(|p| {
        !(local.contains(&p.name) && nests.iter().all(|(_, n)| storage::held_in_loops(n.items(), &p.name)))
    });
    for p in params.iter_mut() {
        p.fresh = p.written
            && p.holds.is_none()
            && !layouts.contains_key(&p.name)
            && computed_afresh(&nests, &p.name);
    }
    // The temporaries of `lift` (not kept with -o, not stored per iteration) are the kernel's
    // own: allocated per call, never parameters, never converted.
    let internal: BTreeSet<Name> = nests
        .iter()
        .flat_map(|(_, n)| n.temps().cloned())
        .chain(expanded.iter().cloned())
        .filter(|t| !keep.contains(t) && !local.contains(t) && params.iter().any(|p| &p.name == t))
        .collect();
    let auto = (0..nests.len())
        .map(|k| auto.iter().filter(|(j, _, _)| *j == k).map(|(_, t, _)| t.clone()).collect())
        .collect();
    Ok(KernelPlan { nests, auto, params, internal, expanded, layouts, consts, names })
}

/// True if the first of `nests` that accesses `t` only writes it, each statement setting every
/// element or summing into it from zero (an accumulator zeroed at its first update; `build`
/// makes statements that write their whole target): the kernel's result does not depend on
/// what `t` held at entry.
pub(super) fn computed_afresh(nests: &[(Name, Nest)], t: &Name) -> bool {
    let Some((_, n)) = nests.iter().find(|(_, n)| n.rank_of(t).is_some()) else { return false };
    n.stmts().iter().all(|s| {
        let Some(lw) = lower(s) else { return false };
        let mut reads = false;
        lw.rhs.visit(&mut |x| reads |= x.id() == Some(t));
        let target = lw.target.id() == Some(t);
        // A statement writing affine positions (an interior, a slice) leaves the rest as it was.
        let whole = lw.target.index_list().is_none_or(|xs| xs.iter().all(|x| x.as_var().is_some()));
        !reads && (!target || (whole && (lw.update == Update::Set || lw.first.is_some())))
    })
}

/// Refuses a tensor kept in registers across a loop (`registers`) that a loop inside it packs
/// (`pack`): the register is loaded before the loop, from a buffer filled only inside it (a
/// reordering that moved the packing loop inward: found by the fuzzer's `teml auto` check).
fn registers_outside_their_pack(x: &crate::ir::LNode) -> Result<()> {
    let mut err = None;
    x.visit_loops(&mut |l| {
        for t in &l.annot.registers {
            for inner in l.body.iter() {
                inner.visit_loops(&mut |p| {
                    if err.is_none() && p.annot.pack.contains(t) {
                        err = Some(Error::Limit {
                            builtin: "codegen".into(),
                            reason: format!(
                                "expected `{t}` packed by a loop around the one that keeps it in registers, found it in registers across loop `{}` and packed by loop `{}` inside it (its register would be read before its pack is filled): pack it outside, or keep it in registers inside the packing loop",
                                l.iter, p.iter
                            ),
                        });
                    }
                });
            }
        }
    });
    err.map_or(Ok(()), Err)
}
