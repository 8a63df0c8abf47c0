//! Checked algebraic rewrites of one assignment (TeIL Sec. 3.6's equalities; docs/algebra.md):
//!
//! - `factor(t)`: `Σ_K X·R1 ± ... ± Σ_K X·Rn = Σ_K X·(R1 ± ... ± Rn)`, a common operand `X`
//!   (the same tensor at the same indices, a contraction's iterators renamed to match) taken
//!   out of a sum or difference of products summed over the same iterators;
//! - `expand(t)`: the converse, `Σ_K X·(R1 ± ... ± Rn) = Σ_K X·R1 ± ... ± Σ_K X·Rn`
//!   (distributivity).
//!
//! Validation first (the form, the common operand, the same sums), then the rewrite, then the
//! check: the original and the rewrite are run by the expression oracle on the same random data
//! at a small size and must agree. The result is an assignment of a tensor of its own (its
//! target a hole that the binding names: `C2 = factor(C)`), so the original stays as it was.
//! The result remembers the assignment as written ([`crate::ir::TNode::before`]); `build`
//! records the rewrite on its nest ([`record`]), so that verification runs the assignment as
//! written and compares at the rounding bound of the two forms, as it does for `lift`.

use super::tensor::{self, Arith};
use crate::error::{Arg, Error, Result};
use crate::ir::{Before, Dim, Expr, Iters, Name, Op, Rewrite, State, TExpr, TNode};
use std::collections::BTreeMap;
use std::sync::Arc;

fn refuse(builtin: &str, expected: &str, found: String) -> Error {
    Error::bad_argument(builtin, Arg::new(1, "expression"), expected, found)
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
        super::equivalence::agrees_on_small_data(builtin, state, &assign(t), &[assign(&v)], &result)?;
        return Ok(v);
    }
    let x = t.children[0].clone();
    let value = match acc {
        Some(a) => Arc::new(TNode { children: vec![a.children[0].clone(), v], ..(*a).clone() }),
        None => v,
    };
    let new = Arc::new(TNode { children: vec![x.clone(), value], ..(**t).clone() });
    let result = x.id().cloned().unwrap_or_else(|| Name::from("x"));
    super::equivalence::agrees_on_small_data(builtin, state, t, std::slice::from_ref(&new), &result)?;
    // The assignment as written: the first of a chain of rewrites (`expand(factor(Y))`: `Y`).
    let before = match &t.before {
        Some(b) => Arc::new(Before { by: builtin.into(), t: b.t.clone() }),
        None => Arc::new(Before {
            by: builtin.into(),
            t: unfill(&Arc::new(TNode { before: None, inst: None, ..(**t).clone() }), &result),
        }),
    };
    let out = unfill(&new, &result);
    Ok(Arc::new(TNode { before: Some(before), ..(*out).clone() }))
}

/// The extent of every iterator that indexes a dimension of a tensor in `t`, at the named
/// constants' values (where they are bound).
fn extents(state: &State, t: &TExpr) -> BTreeMap<Name, f64> {
    let mut out = BTreeMap::new();
    t.visit(&mut |n| {
        if let (Some(xs), Some(ds)) = (n.index_list(), n.shape.dims()) {
            for (x, d) in xs.iter().zip(ds) {
                if let (Some(v), Dim::Known(e)) = (x.as_var(), d)
                    && let Ok(e) = e.eval(&|c| state.constant(c))
                {
                    out.entry(v.clone()).or_insert(e as f64);
                }
            }
        }
    });
    out
}

/// Per element of the result: the operations, the products summed, and the factors of the
/// largest product (a literal or a tensor is one product of one factor).
fn cost(t: &TExpr, ext: &BTreeMap<Name, f64>) -> (f64, f64, usize) {
    let kids: Vec<(f64, f64, usize)> = t.children.iter().map(|c| cost(c, ext)).collect();
    let ops: f64 = kids.iter().map(|k| k.0).sum();
    let between = kids.len().saturating_sub(1) as f64;
    let product = || {
        (ops + between, kids.iter().map(|k| k.1).product::<f64>(), kids.iter().map(|k| k.2).sum::<usize>())
    };
    match &t.op {
        Op::Hole | Op::Id(_) | Op::Lit(_) => (0.0, 1.0, 1),
        Op::Assign(_) => kids.get(1).copied().unwrap_or((0.0, 1.0, 1)),
        Op::Add | Op::Sub => {
            (ops + between, kids.iter().map(|k| k.1).sum(), kids.iter().map(|k| k.2).max().unwrap_or(1))
        }
        Op::Mul | Op::Div | Op::Call(_) => product(),
        Op::Contract(ks) => {
            let n: f64 = ks.iter().map(|k| ext.get(k).copied().unwrap_or(1.0)).product();
            let (o, terms, factors) = product();
            // n products of the children, n - 1 additions
            (n * o + (n - 1.0).max(0.0), n * terms, factors)
        }
    }
}

/// The operations of the assignment `t` at the program's sizes, and per element of its
/// result the products summed and the factors of the largest. Its loops run every iterator
/// that no `vcontract` binds; those that do not index the result sum (an accumulation).
fn figures(state: &State, t: &TExpr) -> (f64, f64, usize) {
    let ext = extents(state, t);
    let (ops, terms, factors) = cost(t, &ext);
    let iters = loop_iters(t);
    let result: Vec<Name> = t
        .target()
        .and_then(|x| x.index_list())
        .map(|xs| xs.iter().flat_map(|x| x.vars()).collect())
        .unwrap_or_default();
    let extent = |v: &Name| ext.get(v).copied().unwrap_or(1.0);
    let points: f64 = iters.iter().map(extent).product();
    let repeats: f64 = iters.iter().filter(|v| !result.contains(*v)).map(extent).product();
    (ops * points, terms * repeats, factors)
}

/// The iterators the loops of the assignment `t` run: those no `vcontract` binds.
fn loop_iters(t: &TExpr) -> Vec<Name> {
    fn go(t: &TExpr, bound: &[Name], out: &mut Vec<Name>) {
        if let Some(xs) = t.index_list() {
            for v in xs.iter().flat_map(|x| x.vars()) {
                if !bound.contains(&v) && !out.contains(&v) {
                    out.push(v);
                }
            }
        }
        let mut inner = bound.to_vec();
        if let Op::Contract(ks) = &t.op {
            inner.extend(ks.iter().cloned());
        }
        t.children.iter().for_each(|c| go(c, &inner, out));
    }
    let mut out = Vec::new();
    go(t, &[], &mut out);
    out
}

/// The products summed into each element by the assignment `original` at the sizes of
/// `state` (a reduced size sums fewer): what the rounding bound of a `factor` or `expand`
/// counts.
pub fn terms(state: &State, original: &TExpr) -> f64 {
    figures(state, original).1
}

/// The record of the rewrite behind `t`, an assignment `factor` or `expand` made and a name
/// was bound to (`F = factor(Y)`), whose nest `build` makes: the assignment as written with
/// `t`'s target and domain, and the operations of both forms. None where the rounding bound
/// would not hold (a quotient or a function among the factors) or `t`'s ranges name an
/// iterator the original does not use (a rewrite renames summed iterators): the kernel is then
/// verified against its own statement, as checked when it was rewritten.
pub fn record(state: &State, t: &TExpr, before: &Before) -> Option<Rewrite> {
    let result = t.target()?.id()?.clone();
    // The original bound to `t`'s name as `t` was (`F = <original>`): the same target, and the
    // same meaning of the accumulator it reads (zeroed before its nest, or what `F` held).
    let bound = tensor::assign(state, &result, None, crate::ir::Value::Tensor(before.t.clone())).ok()?;
    let Some(crate::ir::Value::Tensor(orig)) = bound.get(&result).cloned() else { return None };
    let original = Arc::new(TNode { dom: t.dom.clone(), before: None, inst: None, ..(*orig).clone() });
    let mut bounded = true;
    let mut scale = 1.0f64;
    original.visit(&mut |n| match n.op {
        Op::Div | Op::Call(_) => bounded = false,
        Op::Lit(v) => scale *= v.abs().max(1.0),
        _ => {}
    });
    let iters = loop_iters(&original);
    let ranged = t.dom.as_ref().is_none_or(|d| d.ranges.iter().all(|r| iters.contains(&r.iter)));
    if !bounded || !ranged {
        return None;
    }
    let (flops_before, terms, factors) = figures(state, &original);
    let (flops_after, _, _) = figures(state, t);
    Some(Rewrite {
        by: before.by.clone(),
        original,
        result,
        temps: Vec::new(),
        order: Vec::new(),
        flops_before,
        flops_after,
        terms,
        factors,
        scale,
    })
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

/// The terms of a sum or difference, with their signs (`p1 - (p2 + p3)`: `+p1, -p2, -p3`).
fn summands(v: &TExpr, positive: bool, out: &mut Vec<(bool, TExpr)>) {
    match (&v.op, v.children.as_slice()) {
        (Op::Add, [a, b]) => {
            summands(a, positive, out);
            summands(b, positive, out);
        }
        (Op::Sub, [a, b]) => {
            summands(a, positive, out);
            summands(b, !positive, out);
        }
        _ => out.push((positive, v.clone())),
    }
}

/// The iterators `q` sums over, sorted, renamed by `map`.
fn sums_of(q: &Prod, map: &BTreeMap<Name, Name>) -> Option<Vec<Name>> {
    q.sum.as_ref().map(|(ks, _)| {
        let mut ks: Vec<Name> = ks.iter().map(|k| map.get(k).cloned().unwrap_or_else(|| k.clone())).collect();
        ks.sort();
        ks
    })
}

/// Where `q` has the operand `x` (the same tensor at the same indices once `q`'s summed
/// iterators are renamed to match `x`'s) and sums over `sums`: `q`'s other factors, renamed.
fn without(q: &Prod, x: &TExpr, sums: &Option<Vec<Name>>) -> Option<Vec<TExpr>> {
    for (j, y) in q.factors.iter().enumerate() {
        if y.id().is_none() || y.id() != x.id() {
            continue;
        }
        let mut map = BTreeMap::new();
        let summed: Vec<Name> = q.sum.as_ref().map(|s| s.0.clone()).unwrap_or_default();
        if let (Some(a), Some(c)) = (x.index_list(), y.index_list()) {
            for (e1, e2) in a.iter().zip(c) {
                if let (Some(v1), Some(v2)) = (e1.as_var(), e2.as_var())
                    && summed.contains(v2)
                {
                    map.insert(v2.clone(), v1.clone());
                }
            }
        }
        let renamed: Vec<TExpr> = q.factors.iter().map(|f| rename(f, &map)).collect();
        if renamed[j] != *x || sums_of(q, &map) != *sums {
            continue;
        }
        return Some(renamed.into_iter().enumerate().filter(|(k, _)| *k != j).map(|(_, f)| f).collect());
    }
    None
}

/// `factor(t)`: `Σ_K X·R1 ± Σ_K X·R2 ± ... ± Σ_K X·Rn` as `Σ_K X·(R1 ± R2 ± ... ± Rn)`.
pub fn factor(state: &State, t: &TExpr) -> Result<TExpr> {
    let b = "factor";
    let (_, acc, v) = parts(b, t)?;
    let mut terms = Vec::new();
    summands(&v, true, &mut terms);
    if terms.len() < 2 {
        return Err(refuse(
            b,
            "an assignment whose value is a sum or difference of products (vcontract, vmul)",
            format!("the value `{v}`, whose `{}` is not a sum", v.op.symbol()),
        ));
    }
    let not_products = || refuse(b, "a sum of products of tensors", format!("`{v}`"));
    let qs: Vec<Prod> =
        terms.iter().map(|(_, p)| product(p).ok_or_else(not_products)).collect::<Result<_>>()?;
    let (q1, rest) = qs.split_first().ok_or_else(not_products)?;
    let sums = sums_of(q1, &BTreeMap::new());
    // A common operand: a factor of the first product that every other one has.
    for (i, x) in q1.factors.iter().enumerate() {
        if x.id().is_none() {
            continue;
        }
        let others: Option<Vec<Vec<TExpr>>> = rest.iter().map(|q| without(q, x, &sums)).collect();
        let Some(others) = others else { continue };
        let first: Vec<TExpr> =
            q1.factors.iter().enumerate().filter(|(k, _)| *k != i).map(|(_, f)| f.clone()).collect();
        let mut inner = mul_all(state, &first)?;
        for ((positive, _), r) in terms[1..].iter().zip(&others) {
            let op = if *positive { Arith::Add } else { Arith::Sub };
            inner = tensor::vop(state, op, &inner, &mul_all(state, r)?, None, None)?;
        }
        let prod = tensor::vop(state, Arith::Mul, x, &inner, None, None)?;
        let value = match &q1.sum {
            Some((ks, shape)) => TNode::node(Op::Contract(ks.clone()), shape.clone(), vec![prod]),
            None => prod,
        };
        return finish(state, b, t, acc, value);
    }
    let all: Vec<String> = terms.iter().map(|(_, p)| format!("`{p}`")).collect();
    Err(refuse(
        b,
        "products with a common operand (the same tensor at the same indices in every one) summed over the same iterators",
        all.join(", "),
    ))
}

/// `expand(t)`: `Σ_K X·(R1 ± R2 ± ... ± Rn)` as `Σ_K X·R1 ± Σ_K X·R2 ± ... ± Σ_K X·Rn`.
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
    let mut rs = Vec::new();
    summands(&s, true, &mut rs);
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
    let mut value = side(&rs[0].1)?;
    for (positive, r) in &rs[1..] {
        let op = if *positive { Arith::Add } else { Arith::Sub };
        value = tensor::vop(state, op, &value, &side(r)?, None, None)?;
    }
    finish(state, b, t, acc, value)
}
