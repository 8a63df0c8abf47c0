//! `build(t)`, eq. 19: the perfect loop nest around an assignment.

use super::infer::{check_bounds, constants, eval_note, extent_of, iterators, nonneg};
use crate::error::{Arg, Error, Result};
use crate::ir::{Annotations, Expr, Instance, LNode, Loop, Name, Nest, State, TExpr};
use std::sync::Arc;

/// The loop order `build` uses: by number when every iterator is named `i<k>` (the paper's
/// "iterator ik is introduced by the loop at nesting level k"); otherwise the assigned
/// tensor's iterators first, in order, then the others in order of first appearance.
pub fn loop_order(stmt: &TExpr, consts: &std::collections::BTreeSet<Name>) -> Vec<Name> {
    let all = iterators(stmt, consts);
    let numbered: Option<Vec<(u64, Name)>> = all
        .iter()
        .map(|v| v.strip_prefix('i').and_then(|d| d.parse::<u64>().ok()).map(|k| (k, v.clone())))
        .collect();
    if let Some(mut ks) = numbered
        && !ks.is_empty()
    {
        ks.sort();
        return ks.into_iter().map(|(_, v)| v).collect();
    }
    // index_vars is in order of first appearance, target first: exactly the rule.
    all
}

/// `build(t)`, eq. 19: wraps the assignment `σ(t)` in one loop per iterator, ranges inferred
/// from the accesses (an iterator of the assigned tensor ranges over that dimension), loops
/// ordered by [`loop_order`]. Every access is checked to stay in bounds.
pub fn build(state: &State, t: &TExpr) -> Result<Nest> {
    let b = "build";
    let arg = Arg::new(1, "assignment");
    if !t.is_assign() {
        return Err(Error::WrongKind {
            builtin: b.into(),
            arg,
            expected: "an assignment ⟨(=, •, •), [x, y]⟩ (eq. 19)".into(),
            found: crate::ir::state::describe_tensor(t),
        });
    }
    if t.has_hole() {
        return Err(Error::WrongKind {
            builtin: b.into(),
            arg,
            expected: "an assignment bound to an identifier".into(),
            found: format!("the unnamed assignment `{t}`"),
        });
    }
    // Extents are checked when declared; a named constant bound since can make one empty.
    let mut empty = None;
    t.visit(&mut |n| {
        for d in n.shape.dims().unwrap_or(&[]) {
            if let crate::ir::Dim::Known(e) = d
                && empty.is_none()
                && nonneg(&e.add_int(-1), state) == Some(false)
                && n.is_tensor_leaf()
            {
                empty = Some(format!("extent {} of {}", eval_note(e, state), n.op.symbol()));
            }
        }
    });
    if let Some(found) = empty {
        return Err(Error::BadArgument {
            builtin: b.into(),
            arg,
            expected: "tensors of positive extents".into(),
            found,
        });
    }
    let consts = constants(state, &[t]);
    let order = loop_order(t, &consts);
    let x = t.target().cloned().unwrap_or_else(|| t.clone());
    let y = t.value().cloned().unwrap_or_else(|| t.clone());
    let mut ranges: Vec<(Name, Expr)> = Vec::new();
    for v in &order {
        // An iterator of the assigned tensor ranges over that dimension's extent.
        let from_target = x.index_list().and_then(|xs| {
            xs.iter().position(|e| e.as_var() == Some(v)).and_then(|k| match x.shape.dims()?.get(k)? {
                crate::ir::Dim::Known(e) => Some(e.clone()),
                crate::ir::Dim::Unknown => None,
            })
        });
        let extent = match from_target {
            Some(e) => e,
            // Else the accesses that bound it, the target's affine positions (`B[i+1]`) too.
            None => match extent_of(v, &[&y, &x], state, b, &arg)? {
                Some(e) => e,
                None => {
                    return Err(Error::RangeInference {
                        builtin: b.into(),
                        arg,
                        iterator: v.to_string(),
                        reason: format!(
                            "it indexes no dimension on its own in `{t}` (only inside expressions with other iterators)"
                        ),
                    });
                }
            },
        };
        if nonneg(&extent.add_int(-1), state) == Some(false) {
            return Err(Error::RangeInference {
                builtin: b.into(),
                arg,
                iterator: v.to_string(),
                reason: format!(
                    "expected a range of at least one value, found extent {}",
                    eval_note(&extent, state)
                ),
            });
        }
        let ub = extent.checked_add_int(-1).map_err(|_| Error::BadArgument {
            builtin: b.into(),
            arg: arg.clone(),
            expected: format!("extents of at most {}", crate::ir::expr::INT_MAX),
            found: format!("the extent {extent} of iterator `{v}` (an integer overflow)"),
        })?;
        ranges.push((v.clone(), ub));
    }
    check_bounds(&[t], &ranges, state, b, &arg)?;
    // The statement remembers the instances it runs (see `Instance`).
    let target: Vec<Name> = x.index_vars();
    let stmt = t.with_instance(Instance {
        origin: 0,
        iters: order.clone(),
        ubs: ranges.iter().map(|(_, ub)| ub.clone()).collect(),
        at: order.iter().map(Expr::var_name).collect(),
        reduction: order.iter().map(|v| !target.contains(v)).collect(),
        guard: Vec::new(),
    });
    let mut body = vec![LNode::Stmt(stmt)];
    for (v, ub) in ranges.iter().rev() {
        body = vec![LNode::Loop(Arc::new(Loop {
            iter: v.clone(),
            lb: Expr::int(0),
            ub: ub.clone(),
            step: 1,
            annot: Annotations::default(),
            body,
        }))];
    }
    let nest = Nest::new(body, vec![t.clone()]);
    // A sum into `x` that reads `x` (`x = M x`): its loops zero `x[i]` at the first update and
    // add into it while other instances still read `x`, so what they read depends on where the
    // partial sums live (memory in the reference, registers in a kernel): refused, with isl's
    // witness, unless each old element is read before it is first written (seed 000's
    // compatible statements). Other statements over their own operand (`A = @A: eq(A, [i, j] ->
    // [j, i])`) mean what their loops do (docs/semantics.md).
    if let (Some(name), Some(lw)) = (x.id(), crate::ir::lower(t))
        && lw.first.is_some()
    {
        let mut reads_target = false;
        lw.rhs.visit(&mut |n| reads_target |= n.id() == Some(name));
        if reads_target
            && let Ok(Err(why)) = crate::analysis::legality::stays_in_place(state, &nest, name, name)
        {
            return Err(Error::Illegal {
                builtin: b.into(),
                reason: format!(
                    "`{t}` sums into `{name}` while reading it: {}; expected a sum that reads `{name}` only at \
                     the element it writes, or a result under a new name (e.g. `{name}2 = ...`)",
                    why.message
                ),
            });
        }
    }
    Ok(nest)
}
