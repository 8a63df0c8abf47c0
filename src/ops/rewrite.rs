//! Checked algebraic rewrites of one assignment (TeIL Sec. 3.6's equalities; docs/algebra.md):
//!
//! - `factor(t)`: `Σ_K X·R1 ± Σ_K X·R2 = Σ_K X·(R1 ± R2)`, a common operand `X` (the same
//!   tensor at the same indices, a contraction's iterators renamed to match) taken out of a sum
//!   or difference of two products summed over the same iterators;
//! - `expand(t)`: the converse, `Σ_K X·(R1 ± R2) = Σ_K X·R1 ± Σ_K X·R2` (distributivity).
//!
//! Validation first (the form, the common operand, the same sums), then the rewrite, then the
//! check: the original and the rewrite are run by the expression oracle on the same random data
//! at a small size and must agree. The result is an assignment of a tensor of its own (its
//! target a hole that the binding names: `C2 = factor(C)`), so the original stays as it was.

use super::tensor::{self, Arith};
use crate::error::{Arg, Error, Result};
use crate::ir::{Expr, Iters, Name, Op, State, TExpr, TNode};
use std::collections::BTreeMap;
use std::sync::Arc;

fn refuse(builtin: &str, expected: &str, found: String) -> Error {
    Error::BadArgument {
        builtin: builtin.into(),
        arg: Arg::new(1, "expression"),
        expected: expected.into(),
        found,
    }
}

/// A product: its factors, and the iterators a `vcontract` around it sums over (with that
/// node's shape), if any.
struct Prod {
    factors: Vec<TExpr>,
    sum: Option<(Vec<Name>, crate::ir::Shape)>,
}

fn product(t: &TExpr) -> Option<Prod> {
    fn factors(t: &TExpr, out: &mut Vec<TExpr>) -> bool {
        match &t.op {
            Op::Mul => t.children.iter().all(|c| factors(c, out)),
            Op::Id(_) | Op::Lit(_) => {
                out.push(t.clone());
                true
            }
            _ => false,
        }
    }
    let mut fs = Vec::new();
    match &t.op {
        Op::Contract(ks) => t
            .children
            .iter()
            .all(|c| factors(c, &mut fs))
            .then_some(Prod { factors: fs, sum: Some((ks.clone(), t.shape.clone())) }),
        _ => factors(t, &mut fs).then_some(Prod { factors: fs, sum: None }),
    }
}

/// `t` with every leaf of tensor `id` turned back into the hole (its indices kept).
fn unfill(t: &TExpr, id: &Name) -> TExpr {
    if t.id() == Some(id) {
        return Arc::new(TNode { op: Op::Hole, ..(**t).clone() });
    }
    if t.children.is_empty() {
        return t.clone();
    }
    Arc::new(TNode { children: t.children.iter().map(|c| unfill(c, id)).collect(), ..(**t).clone() })
}

/// Renames the iterators of `t` by `map`.
fn rename(t: &TExpr, map: &BTreeMap<Name, Name>) -> TExpr {
    let sub = |e: &Expr| e.subst_with(&|v| map.get(v).map(Expr::var_name));
    let iters = match &t.iters {
        Iters::List(xs) => Iters::List(xs.iter().map(sub).collect()),
        other => other.clone(),
    };
    let op = match &t.op {
        Op::Contract(ks) => {
            Op::Contract(ks.iter().map(|k| map.get(k).cloned().unwrap_or_else(|| k.clone())).collect())
        }
        other => other.clone(),
    };
    Arc::new(TNode {
        op,
        iters,
        children: t.children.iter().map(|c| rename(c, map)).collect(),
        ..(**t).clone()
    })
}

/// The assignment's parts: target, the accumulation onto it (`x = x + v`: the `+` node) and
/// the value `v`.
fn parts(builtin: &str, t: &TExpr) -> Result<(TExpr, Option<TExpr>, TExpr)> {
    if !t.is_assign() && !t.children.is_empty() {
        // A virtual expression (a sum of contractions cannot be assigned before `factor`).
        return Ok((t.clone(), None, t.clone()));
    }
    let (Op::Assign(_), Some(x), Some(y)) = (&t.op, t.target(), t.value()) else {
        return Err(refuse(builtin, "an assignment", crate::ir::state::describe_tensor(t)));
    };
    match (&y.op, y.children.as_slice()) {
        (Op::Add, [a, v]) if a.id().is_some() && a.id() == x.id() && a.iters == x.iters => {
            Ok((x.clone(), Some(y.clone()), v.clone()))
        }
        _ => Ok((x.clone(), None, y.clone())),
    }
}

/// The assignment with value `v` (onto its target again where it accumulated), its target a
/// hole, then checked against `t` by the oracle.
fn finish(state: &State, builtin: &str, t: &TExpr, acc: Option<TExpr>, v: TExpr) -> Result<TExpr> {
    if !t.is_assign() {
        // Checked as the assignments `x[I] = t` and `x[I] = v`, I its free iterators, built
        // here for the oracle alone (eq. 14 may refuse the original: a sum of contractions).
        let consts = crate::analysis::infer::constants(state, &[&**t]);
        let bound: Vec<Name> = t.bound_iters();
        let free: Vec<Expr> = crate::analysis::infer::iterators(t, &consts)
            .into_iter()
            .filter(|i| !bound.contains(i))
            .map(|i| Expr::var_name(&i))
            .collect();
        let result = Name::from("teml_rewritten");
        let x = TNode::leaf(Op::Id(result.clone()), t.shape.clone(), Iters::List(free), t.dtype);
        let assign = |y: &TExpr| {
            TNode::node(
                Op::Assign(crate::ir::AssignMode::Plain),
                crate::ir::Shape::Bullet,
                vec![x.clone(), y.clone()],
            )
        };
        super::lift::check(builtin, state, &assign(t), &[assign(&v)], &result)?;
        return Ok(v);
    }
    let x = t.children[0].clone();
    let value = match acc {
        Some(a) => Arc::new(TNode { children: vec![a.children[0].clone(), v], ..(*a).clone() }),
        None => v,
    };
    let new = Arc::new(TNode { children: vec![x.clone(), value], ..(**t).clone() });
    let result = x.id().cloned().unwrap_or_else(|| Name::from("x"));
    super::lift::check(builtin, state, t, std::slice::from_ref(&new), &result)?;
    Ok(unfill(&new, &result))
}

fn sum_of_two(builtin: &str, v: &TExpr) -> Result<(Arith, TExpr, TExpr)> {
    match (&v.op, v.children.as_slice()) {
        (Op::Add, [a, b]) => Ok((Arith::Add, a.clone(), b.clone())),
        (Op::Sub, [a, b]) => Ok((Arith::Sub, a.clone(), b.clone())),
        _ => Err(refuse(
            builtin,
            "an assignment whose value is a sum or difference of two products (vcontract, vmul)",
            format!("the value `{v}`, whose `{}` is not a sum", v.op.symbol()),
        )),
    }
}

/// The product of `fs` (a literal 1 where none is left).
fn mul_all(state: &State, fs: &[TExpr]) -> Result<TExpr> {
    let Some((first, rest)) = fs.split_first() else {
        return Ok(TNode::leaf(
            Op::Lit(1.0),
            crate::ir::Shape::Dims(vec![]),
            Iters::Bullet,
            crate::ir::DType::Double,
        ));
    };
    rest.iter().try_fold(first.clone(), |p, f| tensor::vop(state, Arith::Mul, &p, f, None, None))
}

/// `factor(t)`: `Σ_K X·R1 ± Σ_K X·R2` as `Σ_K X·(R1 ± R2)`.
pub fn factor(state: &State, t: &TExpr) -> Result<TExpr> {
    let b = "factor";
    let (_, acc, v) = parts(b, t)?;
    let (op, p1, p2) = sum_of_two(b, &v)?;
    let not_products = || refuse(b, "a sum of two products of tensors", format!("`{v}`"));
    let (q1, q2) = (product(&p1).ok_or_else(not_products)?, product(&p2).ok_or_else(not_products)?);
    // Align q2's contraction iterators with q1's through a common operand.
    for (i, x1) in q1.factors.iter().enumerate() {
        for (j, x2) in q2.factors.iter().enumerate() {
            if x1.id().is_none() || x1.id() != x2.id() {
                continue;
            }
            let mut map = BTreeMap::new();
            let summed2: Vec<Name> = q2.sum.as_ref().map(|s| s.0.clone()).unwrap_or_default();
            if let (Some(a), Some(c)) = (x1.index_list(), x2.index_list()) {
                for (e1, e2) in a.iter().zip(c) {
                    if let (Some(v1), Some(v2)) = (e1.as_var(), e2.as_var())
                        && summed2.contains(v2)
                    {
                        map.insert(v2.clone(), v1.clone());
                    }
                }
            }
            let r2: Vec<TExpr> = q2.factors.iter().map(|f| rename(f, &map)).collect();
            let sum2 = q2.sum.as_ref().map(|(ks, _)| {
                let mut ks: Vec<Name> =
                    ks.iter().map(|k| map.get(k).cloned().unwrap_or_else(|| k.clone())).collect();
                ks.sort();
                ks
            });
            let sum1 = q1.sum.as_ref().map(|(ks, _)| {
                let mut ks = ks.clone();
                ks.sort();
                ks
            });
            if r2[j] != *x1 || sum1 != sum2 {
                continue;
            }
            let rest1: Vec<TExpr> =
                q1.factors.iter().enumerate().filter(|(k, _)| *k != i).map(|(_, f)| f.clone()).collect();
            let rest2: Vec<TExpr> =
                r2.iter().enumerate().filter(|(k, _)| *k != j).map(|(_, f)| f.clone()).collect();
            let inner =
                tensor::vop(state, op, &mul_all(state, &rest1)?, &mul_all(state, &rest2)?, None, None)?;
            let prod = tensor::vop(state, Arith::Mul, x1, &inner, None, None)?;
            let value = match &q1.sum {
                Some((ks, shape)) => TNode::node(Op::Contract(ks.clone()), shape.clone(), vec![prod]),
                None => prod,
            };
            return finish(state, b, t, acc, value);
        }
    }
    Err(refuse(
        b,
        "two products with a common operand (the same tensor at the same indices) summed over the same iterators",
        format!("`{p1}` and `{p2}`"),
    ))
}

/// `expand(t)`: `Σ_K X·(R1 ± R2)` as `Σ_K X·R1 ± Σ_K X·R2`.
pub fn expand(state: &State, t: &TExpr) -> Result<TExpr> {
    let b = "expand";
    let (_, acc, v) = parts(b, t)?;
    let (inner, sum) = match &v.op {
        Op::Contract(ks) if v.children.len() == 1 => {
            (v.children[0].clone(), Some((ks.clone(), v.shape.clone())))
        }
        _ => (v.clone(), None),
    };
    let found = || format!("the value `{v}`");
    let expected = "an assignment whose value is a product with a sum or difference among its factors";
    let (Op::Mul, [a, c]) = (&inner.op, inner.children.as_slice()) else {
        return Err(refuse(b, expected, found()));
    };
    let (x, s, sum_left) = match (&a.op, &c.op) {
        (_, Op::Add | Op::Sub) => (a.clone(), c.clone(), false),
        (Op::Add | Op::Sub, _) => (c.clone(), a.clone(), true),
        _ => return Err(refuse(b, expected, found())),
    };
    let (op, r1, r2) = sum_of_two(b, &s)?;
    let side = |r: &TExpr| -> Result<TExpr> {
        let p = if sum_left {
            tensor::vop(state, Arith::Mul, r, &x, None, None)?
        } else {
            tensor::vop(state, Arith::Mul, &x, r, None, None)?
        };
        Ok(match &sum {
            Some((ks, shape)) => TNode::node(Op::Contract(ks.clone()), shape.clone(), vec![p]),
            None => p,
        })
    };
    let value = tensor::vop(state, op, &side(&r1)?, &side(&r2)?, None, None)?;
    finish(state, b, t, acc, value)
}
