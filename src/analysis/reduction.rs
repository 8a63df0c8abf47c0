//! How a marked loop runs its iterations concurrently (OpenMP `parallel for` / `simd`).
//!
//! Whether a mark is legal is not decided here: isl decides it when the transformation
//! builtins check their results (`analysis::legality`). Code generation asks [`plan`] only for
//! a marked loop that isl shows carries a dependence, reductions included
//! (`analysis::legality::carries`), or where that analysis cannot run; a loop that carries none
//! gets its pragma without a plan. [`plan`] realizes such a loop `p` only when that is correct:
//! - **independent**: for every tensor written in the body there is a dimension in which each
//!   access's index range, for one iteration of `p`, is `[c*p + a, c*p + b]` with the same
//!   `c >= 1` everywhere and `max b - min a < c*step`: different iterations touch disjoint
//!   elements, so no dependence is carried by `p`;
//! - **reduction**: otherwise, if every write to such a tensor is the same reduction operator
//!   (`+=`, `-=`, `max`, `min`) at an element fixed for the whole loop (indices use only
//!   iterators outside `p`) and the body reads it nowhere else, the values are combined in
//!   private scalar accumulators (`reduction(+: acc)`, `reduction(max: acc)`), which are
//!   combined with the element after the loop;
//! - anything else is refused with a message naming the loop and the access.

use crate::ir::{Expr, LNode, Loop, Lowered, Name, TNode, Update, lower};
use std::collections::BTreeSet;

/// How a marked loop is realized.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// Iterations are independent.
    Independent,
    /// The loop accumulates into elements fixed for the loop: one accumulator per target.
    Reduction(Vec<ReductionTarget>),
}

/// A target the loop accumulates into (`+=`, `-=`, `max`, `min`), e.g. `C[i][j]`.
#[derive(Clone, Debug, PartialEq)]
pub struct ReductionTarget {
    /// The target access (as it appears in the statements).
    pub access: String,
    /// How its statements combine values into it (the same for all of them).
    pub op: Update,
    /// The leaf.
    pub leaf: std::sync::Arc<TNode>,
}

struct Access {
    tensor: Name,
    index: Vec<Expr>,
    write: Option<Update>,
    text: String,
}

/// Accesses of the statements below `body`, with the loops between `p` and them.
fn collect(body: &[LNode], inner: &mut Vec<Loop>, out: &mut Vec<(Access, Vec<Loop>)>) {
    for x in body {
        match x {
            LNode::Loop(l) => {
                inner.push(Loop { body: Vec::new(), ..(**l).clone() });
                collect(&l.body, inner, out);
                inner.pop();
            }
            LNode::Stmt(s) => {
                let Some(lw) = lower(s) else { continue };
                let mut push = |leaf: &TNode, write: Option<Update>| {
                    if let Some(name) = leaf.id() {
                        let index = leaf.index_list().map(|x| x.to_vec()).unwrap_or_default();
                        out.push((
                            Access { tensor: name.clone(), index, write, text: leaf.access() },
                            inner.clone(),
                        ));
                    }
                };
                push(&lw.target, Some(lw.update));
                lw.rhs.visit(&mut |n| {
                    if n.is_tensor_leaf() {
                        push(n, None);
                    }
                });
            }
        }
    }
}

/// The range `[lo, hi]` of `e` over the loops `inner` (innermost last), as expressions in the
/// loop variable `p` and the iterators outside it. Over-approximates through `min`/`max`.
fn range(e: &Expr, inner: &[Loop], p: &str) -> Option<(Expr, Expr)> {
    let (mut lo, mut hi) = (e.clone(), e.clone());
    for l in inner.iter().rev() {
        let c_lo = lo.coeff(&l.iter);
        let c_hi = hi.coeff(&l.iter);
        if c_lo == 0 && c_hi == 0 {
            continue; // the access does not depend on this loop
        }
        let (lb, ub) = (affine_lower(&l.lb)?, affine_upper(&l.ub, p)?);
        lo = lo.subst(&l.iter, if c_lo >= 0 { &lb } else { &ub });
        hi = hi.subst(&l.iter, if c_hi >= 0 { &ub } else { &lb });
    }
    (lo.is_affine() && hi.is_affine()).then_some((lo, hi))
}

/// An affine upper bound of a bound expression: itself, or an affine argument of a `min`,
/// preferring one in terms of the marked loop `p` (`min(32*io+31, N-1)` gives `32*io+31`).
fn affine_upper(e: &Expr, p: &str) -> Option<Expr> {
    if e.is_affine() {
        return Some(e.clone());
    }
    let args = e.min_args()?;
    args.iter()
        .find(|a| a.is_affine() && a.mentions(p))
        .or_else(|| args.iter().find(|a| a.is_affine()))
        .cloned()
}

fn affine_lower(e: &Expr) -> Option<Expr> {
    e.is_affine().then(|| e.clone())
}

/// Decides how loop `p` can run its iterations concurrently, or explains why it cannot.
///
/// With `only_reductions` (isl has shown that `p` carries no dependence but the reductions'),
/// reads of an accumulated tensor in the loop are of other elements (cholesky's `A[i][j] -=
/// A[i][k] * A[j][k]`), which no iteration writes: they stay reads of memory.
pub fn plan(p: &Loop, only_reductions: bool) -> Result<Plan, String> {
    let mut accesses = Vec::new();
    collect(&p.body, &mut Vec::new(), &mut accesses);
    // iterators of p and of every loop inside it
    let mut inside: BTreeSet<Name> = BTreeSet::from([p.iter.clone()]);
    for x in &p.body {
        let mut v = Vec::new();
        x.loop_iters(&mut v);
        inside.extend(v);
    }
    let written: BTreeSet<Name> =
        accesses.iter().filter(|(a, _)| a.write.is_some()).map(|(a, _)| a.tensor.clone()).collect();
    let mut reductions: Vec<ReductionTarget> = Vec::new();
    for t in &written {
        let acc: Vec<&(Access, Vec<Loop>)> = accesses.iter().filter(|(a, _)| &a.tensor == t).collect();
        if independent_in_some_dim(p, &acc) {
            continue;
        }
        // A reduction: every write is += at one element fixed for the loop; no other read.
        let writes: Vec<&Access> = acc.iter().filter(|(a, _)| a.write.is_some()).map(|(a, _)| a).collect();
        let w = writes[0];
        let fixed = |a: &Access| a.index.iter().all(|x| x.vars().iter().all(|v| !inside.contains(v)));
        let all_add = w.write.is_some_and(|u| u.accumulates()) && writes.iter().all(|a| a.write == w.write);
        let all_fixed = writes.iter().all(|a| fixed(a) && a.index == w.index);
        let reads = !only_reductions && acc.iter().any(|(a, _)| a.write.is_none());
        if all_add && all_fixed && !reads {
            let leaf =
                leaf_of(&p.body, &w.text).ok_or_else(|| format!("reduction target {} not found", w.text))?;
            let op = w.write.unwrap_or(Update::Add);
            reductions.push(ReductionTarget { access: w.text.clone(), op, leaf });
            continue;
        }
        return Err(if !all_add {
            format!(
                "iterations of `{}` write {} at elements that other iterations also access",
                p.iter, w.text
            )
        } else if reads {
            format!("loop `{}` accumulates into {} and also reads `{t}` in the loop", p.iter, w.text)
        } else if let Some(v) = writes.iter().find(|a| !fixed(a)) {
            format!(
                "loop `{}` accumulates into {}, which varies inside the loop: interchange the loop inward \
                 or mark a loop whose iterator indexes `{t}`",
                p.iter, v.text
            )
        } else {
            // every element is fixed for the loop, but there are several (unrolled copies)
            let mut elems: Vec<&str> = Vec::new();
            for a in &writes {
                if !elems.contains(&a.text.as_str()) {
                    elems.push(&a.text);
                }
            }
            format!(
                "loop `{}` accumulates into {} different elements ({}): expected a reduction into one \
                 element; mark a loop whose iterator indexes `{t}`",
                p.iter,
                elems.len(),
                elems.join(", ")
            )
        });
    }
    Ok(if reductions.is_empty() { Plan::Independent } else { Plan::Reduction(reductions) })
}

fn independent_in_some_dim(p: &Loop, acc: &[&(Access, Vec<Loop>)]) -> bool {
    let rank = acc.iter().map(|(a, _)| a.index.len()).min().unwrap_or(0);
    'dims: for d in 0..rank {
        let mut c0: Option<i64> = None;
        let mut base: Option<Expr> = None;
        let (mut min_a, mut max_b) = (i64::MAX, i64::MIN);
        for (a, inner) in acc {
            let Some((lo, hi)) = range(&a.index[d], inner, &p.iter) else { continue 'dims };
            let c = lo.coeff(&p.iter);
            if c < 1 || hi.coeff(&p.iter) != c || c0.is_some_and(|c0| c0 != c) {
                continue 'dims;
            }
            c0 = Some(c);
            let p_term = Expr::var_name(&p.iter).scale(c);
            let (ra, rb) = (lo.sub(&p_term), hi.sub(&p_term));
            // the parts in outer iterators must agree; the constants give the offsets
            let b0 = base.get_or_insert_with(|| ra.add_int(-ra.constant()));
            let (Some(oa), Some(ob)) = (ra.sub(b0).as_const(), rb.sub(b0).as_const()) else { continue 'dims };
            min_a = min_a.min(oa);
            max_b = max_b.max(ob);
        }
        if let Some(c) = c0
            && let (Some(width), Some(stride)) = (max_b.checked_sub(min_a), Some(c))
            && width < stride
        {
            return true;
        }
    }
    false
}

fn leaf_of(body: &[LNode], access: &str) -> Option<std::sync::Arc<TNode>> {
    for x in body {
        match x {
            LNode::Loop(l) => {
                if let Some(f) = leaf_of(&l.body, access) {
                    return Some(f);
                }
            }
            LNode::Stmt(s) => {
                let lw: Lowered = lower(s)?;
                if lw.target.access() == access {
                    return Some(lw.target.clone());
                }
            }
        }
    }
    None
}
