//! The lift orders (TeIL Sec. 5): a product of three or more tensors summed over some
//! iterators (an einsum of several operands) as written, or as a sequence of single
//! contractions in one of its cheapest orders (`contraction_orders`), each contraction then
//! scheduled by the single-nest rules (through `focus`), or two contractions fused block by
//! block ([`crate::schedule::chain`]: the temporary a register block at a time). Lifted first
//! when it saves at least half the operations, or at least 1.3x where an order's contractions
//! fuse. A row of [`super::FORMS`].

use super::*;

/// The rule.
pub(in crate::schedule::space) struct LiftOrders;

impl FormRule for LiftOrders {
    fn name(&self) -> &'static str {
        "lift"
    }

    fn detect(&self, state: &State, _: &Nest, w: &Workload) -> Result<FormPlan, String> {
        lift_plan(state, w)
            .map(FormPlan::Lift)
            .ok_or_else(|| "not a product of three or more operands with a cheaper order".into())
    }

    fn emit(
        &self,
        out: &mut Out,
        plan: &FormPlan,
        _: &Workload,
        m: &Machine,
        rest: &mut dyn FnMut(&mut Out),
    ) {
        if let FormPlan::Lift(plan) = plan {
            lifted_or_written(out, plan, m, rest);
        }
    }
}

/// How many of the cheapest contraction orders the space offers.
pub(in crate::schedule::space) const LIFT_ORDERS: usize = 2;

/// One contraction order of a lifted product: its steps, its FLOPs, and its contractions (the
/// focus address of each one's outer loop, its workload), in program order.
pub(in crate::schedule::space) struct LiftOrder {
    pub(in crate::schedule::space) steps: Vec<(usize, usize)>,
    pub(in crate::schedule::space) flops: f64,
    pub(in crate::schedule::space) parts: Vec<Part>,
}

/// A product of three or more operands and its cheapest contraction orders, each with the
/// sequence `lift` makes.
pub(in crate::schedule::space) struct LiftPlan {
    pub(in crate::schedule::space) tensor: Name,
    /// FLOPs as written.
    pub(in crate::schedule::space) before: f64,
    pub(in crate::schedule::space) orders: Vec<LiftOrder>,
    pub(in crate::schedule::space) fact: String,
}

pub(in crate::schedule::space) fn lift_plan(state: &State, w: &Workload) -> Option<LiftPlan> {
    use crate::ir::Value;
    use crate::ops::lift::{self, TempLayout};
    let target = w.writes().next()?;
    let Some(Value::Tensor(x)) = state.vars.get(&target.tensor) else { return None };
    let orders = lift::orders(state, x).ok()?;
    if orders.first()?.0.len() < 2 {
        return None;
    }
    let mut out = Vec::new();
    let mut before = 0.0;
    for (path, _) in orders.into_iter().take(LIFT_ORDERS) {
        let steps: Vec<(i64, i64)> = path.iter().map(|&(a, b)| (a as i64, b as i64)).collect();
        let Ok(l) = lift::lift(state, x, Some(&steps), TempLayout::SummedFirst) else { continue };
        let Some(r) = l.nest.rewrites.first() else { continue };
        before = r.flops_before;
        // The temporaries as tensors of the state, so that their accesses have extents.
        let mut s = state.clone();
        for st in &l.stmts {
            if let Some(id) = st.target().and_then(|t| t.id()) {
                s.vars.insert(id.clone(), Value::Tensor(st.clone()));
            }
        }
        let parts = top_parts(&s, &l.nest)?;
        out.push(LiftOrder { steps: path, flops: r.flops_after, parts });
    }
    let best = out.first()?.flops;
    Some(LiftPlan {
        tensor: target.tensor.clone(),
        before,
        fact: format!(
            "{} is a product of {} operands: {:.3e} flops as written, {:.3e} lifted in its cheapest order ({:.1}x fewer)",
            target.tensor,
            out[0].steps.len() + 1,
            before,
            best,
            before / best.max(1.0)
        ),
        orders: out,
    })
}

/// The product as written (the rules of a single nest) or lifted (each contraction by the
/// rules of a single nest, or two contractions fused block by block: [`super::chain`]), lifted
/// first when it saves at least half the operations, or at least 1.3x where the contractions
/// fuse (no temporary's traffic).
pub(in crate::schedule::space) fn lifted_or_written(
    out: &mut Out,
    plan: &LiftPlan,
    m: &Machine,
    rest: &mut dyn FnMut(&mut Out),
) {
    let best = plan.orders[0].flops;
    let chains: Vec<Option<(crate::schedule::chain::Chain, Block)>> =
        plan.orders.iter().map(chain_plan).collect();
    // Orders that fuse first, where they cost at most 10% more operations than the cheapest.
    let mut ranked: Vec<usize> = (0..plan.orders.len()).collect();
    ranked.sort_by_key(|&k| chains[k].is_none() || plan.orders[k].flops > 1.1 * best);
    let fused = chains[ranked[0]].is_some();
    let ratio = plan.before / plan.orders[ranked[0]].flops.max(1.0);
    let lifted = choice(
        "\"lifted\"",
        format!(
            "{} as single contractions through temporaries: {ratio:.1}x fewer operations ({:.2e} -> {:.2e}){}",
            plan.tensor,
            plan.before,
            plan.orders[ranked[0]].flops,
            if fused { ", the temporary a register block at a time" } else { "" }
        ),
    );
    let written = choice(
        "\"as_written\"",
        format!(
            "the product as written: lifting saves {ratio:.1}x the operations and adds temporaries' traffic"
        ),
    );
    let forms =
        if ratio >= 2.0 || (fused && ratio >= 1.3) { vec![lifted, written] } else { vec![written, lifted] };
    out.param("form", "form", &format!("{} as written or lifted (TeIL Sec. 5)", plan.tensor), forms);
    out.begin_if(local("form").eq(text("as_written")));
    rest(out);
    out.else_();
    let show = |path: &[(usize, usize)]| E::List(path.iter().map(|&(a, b)| ints(&[a, b])).collect());
    out.param(
        "contraction",
        "contraction",
        "the contraction order (opt_einsum's path: each step contracts two operands of the list; summed_first: each temporary contiguous along the result of the step that reads it)",
        ranked
            .iter()
            .map(|&k| {
                let o = &plan.orders[k];
                choice(
                    show(&o.steps),
                    format!(
                        "{:.2e} flops in {} contractions{}",
                        o.flops,
                        o.parts.len(),
                        if chains[k].is_some() { ", which fuse" } else { "" }
                    ),
                )
            })
            .collect(),
    );
    out.stmt(set(
        local("p"),
        call("lift", vec![value(&plan.tensor), local("contraction"), text("summed_first")]),
    ));
    for (n, &k) in ranked.iter().enumerate() {
        let o = &plan.orders[k];
        out.arm(n, local("contraction").eq(show(&o.steps)));
        if let Some((ch, b)) = &chains[k] {
            out.prefix = if k == 0 { String::new() } else { format!("o{}_", k + 1) };
            out.param(
                "fusion",
                "fusion",
                "the two contractions fused block by block, or each by its own rules",
                vec![
                    choice("\"fused\"", ch.why.clone()),
                    choice("\"apart\"", "each contraction by its own rules, the temporary whole in memory"),
                ],
            );
            out.begin_if(local("fusion").eq(text("fused")));
            out.prefix = if k == 0 { "f_".into() } else { format!("o{}f_", k + 1) };
            fused_chain(out, o, ch, b, m);
            out.prefix.clear();
            out.else_();
        }
        // The last contraction first: transforming it leaves the earlier ones' addresses as
        // they are.
        for (j, Part { address, work: wc, .. }) in o.parts.iter().enumerate().rev() {
            out.comment(&format!("contraction {}: {}", j + 1, wc.statements.join("; ")));
            out.stmt(step("focus", vec![text(address)]));
            out.prefix = if k == 0 { format!("c{}_", j + 1) } else { format!("o{}c{}_", k + 1, j + 1) };
            single(out, wc, m);
            out.prefix.clear();
        }
        out.stmt(step("focus", vec![]));
        if chains[k].is_some() {
            out.end();
        }
    }
    out.end();
    out.end();
}

/// The fused schedule of an order of two contractions ([`super::chain`]), with the producer's
/// register block (its rows the first of `block_plan`'s that chain).
pub(in crate::schedule::space) fn chain_plan(
    o: &LiftOrder,
) -> Option<(crate::schedule::chain::Chain, Block)> {
    let [p, c] = o.parts.as_slice() else { return None };
    let t = p.work.writes().next()?;
    // The fused schedule converts no layout.
    let mut b = block_plan(&p.work, t).filter(|b| b.layouts.is_empty())?;
    let (row, ch) = b.rows.iter().find_map(|r| {
        let ch = crate::schedule::chain::chain(&p.work, &c.work, &r.1)?;
        (ch.lanes == b.lane_iter).then(|| (r.clone(), ch))
    })?;
    b.rows = vec![row];
    Some((ch, b))
}

/// Both contractions ordered alike, register-blocked alike, fused over their shared loops, the
/// temporary stored per block (`store_at`), the rows' blocks on threads.
pub(in crate::schedule::space) fn fused_chain(
    out: &mut Out,
    o: &LiftOrder,
    ch: &crate::schedule::chain::Chain,
    b: &Block,
    m: &Machine,
) {
    let mr = block_sizes(out, b, m);
    let perm = |order: &[usize]| -> Option<S> {
        let identity = order.iter().enumerate().all(|(k, &l)| l == k + 1);
        (!identity).then(|| step("permute", vec![ints(order)]))
    };
    // The consumer first: transforming it leaves the producer's address as it is.
    for (part, order, t) in
        [(&o.parts[1], &ch.consumer_order, &ch.target), (&o.parts[0], &ch.producer_order, &ch.temp)]
    {
        out.comment(&part.work.statements.join("; "));
        out.stmt(step("focus", vec![text(&part.address)]));
        if let Some(l) = perm(order) {
            out.stmt(l);
        }
        out.stmt(step("register_block", vec![value(t), int(1), int(ch.shared), local("mr"), local("nr")]));
    }
    out.stmt(step("focus", vec![]));
    out.stmt(S::For("r".into(), int(1).through(int(ch.shared)), vec![step("fuse_inner", vec![local("r")])]));
    out.stmt(step("store_at", vec![int(ch.shared), value(&ch.temp)]));
    // The rows' blocks on threads, or collapsed with the next shared loop where it is
    // data-parallel and the blocks are few or uneven for the cores.
    let cores = m.cores.max(1) as i64;
    let mr = mr.max(1) as i64;
    let blocks = (ch.rows_extent + mr - 1) / mr;
    let mut ch_par = vec![choice(
        "\"outer\"",
        format!("the {blocks} blocks of {} rows (at mr = {mr}) on threads", ch.rows),
    )];
    if let Some((next, e)) = &ch.next_parallel {
        let c = choice(
            "\"collapse\"",
            format!(
                "the blocks of {} rows and {next} ({e}) collapsed on threads: {} iterations",
                ch.rows,
                blocks * e
            ),
        );
        // Not where the last block of rows is partial: collapsed, the rows' loop cannot be
        // split where it starts (see `parallel_outer`).
        if (blocks < 8 * cores || blocks % cores != 0) && ch.rows_extent % mr == 0 {
            ch_par.insert(0, c)
        } else {
            ch_par.push(c)
        }
    }
    ch_par.push(choice("\"none\"", "one thread"));
    out.param("parallel", "parallel", "the outer loops on threads", ch_par);
    parallel_arms(out, false);
}

#[cfg(test)]
mod tests {
    use super::super::detect_forms;
    use super::super::tests::workload_state;

    #[test]
    fn a_chain_of_three_matrices_is_lifted_and_a_product_of_two_is_not() {
        let chain = "N = 64\nA = tensor([N, N])\nB = tensor([N, N])\nC = tensor([N, N])\n\
                     D = einsum(\"ij,jk,kl->il\", [A, B, C])\nl = build(D)\n";
        let (s, n, w) = workload_state(chain);
        let (found, _) = detect_forms(&s, &n, &w);
        assert_eq!(found.iter().map(|(r, _)| r.name()).collect::<Vec<_>>(), ["lift"]);
        let mm = "N = 64\nA = tensor([N, N])\nB = tensor([N, N])\nC = einsum(\"ik,kj->ij\", [A, B])\nl = build(C)\n";
        let (s, n, w) = workload_state(mm);
        let (_, not) = detect_forms(&s, &n, &w);
        assert!(not.iter().any(|x| x.starts_with("lift: not a product of three")), "{not:?}");
    }
}
