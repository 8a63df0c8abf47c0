//! Storage: a copy per iteration of a loop (`privatize`, array expansion) and a result stored
//! over its operand (`in_place`).

use super::*;

/// `privatize(l, r, T)` (scalar and array expansion; Feautrier, "Array expansion", 1988): tensor
/// `T` gets one copy per iteration of the loop `j` at level `r`: every access `T[x]` in the nest
/// becomes `T[j - lb][x]`, so the iterations no longer share it, and the dependences through `T`
/// that only its reuse made (anti and output) are gone: a loop `j` that was pinned by a scalar
/// such as PolyBench's `temp2` may then be interchanged, distributed and vectorized. The
/// converse of `store_at`. Same values exactly when every read of `T` is preceded, in the same
/// iteration of `j` (and of the loops around it), by a write of that element (decided by isl
/// before the rewrite, with a witness when not), every access to `T` is inside the loop, and
/// `T` is no result of the nest (something reads it; its values are dropped after the kernel,
/// which holds its copies). On a focused nest, levels count from the focus. Later
/// transformations are checked against the expanded accesses.
/// `privatize(l, 2, temp2)` for symm:
///
/// ```text
/// for i in [0, M-1]                       for i in [0, M-1]
///   for j in [0, N-1]                        for j in [0, N-1]
///     temp2 = 0                       →        temp2[j] = 0
///     for k in [0, i-1]                        for k in [0, i-1]
///       temp2 += B[k][j]*A[i][k]                 temp2[j] += B[k][j]*A[i][k]
///     C[i][j] = ... + alpha*temp2                C[i][j] = ... + alpha*temp2[j]
/// ```
pub fn privatize(state: &State, nest: &Nest, level: i64, tensor: &Name) -> Result<Nest> {
    let b = "privatize";
    // Levels count from the focus; the checks see the whole nest.
    let view = nest.view();
    let l = locate(&view, level, b, &level_arg(2))?;
    let bad = |k: usize, name: &str, expected: &str, found: String| {
        Error::bad_argument(b, Arg::new(k, name), expected, found)
    };
    let illegal = |reason: String| Error::Illegal { builtin: b.into(), reason };
    let accesses = |s: &crate::ir::TExpr| s.mentions_tensor(tensor);
    if let Some(x) = nest.expanded.get(tensor) {
        return Err(illegal(format!(
            "`{tensor}` already has a copy per iteration of `{}` (`{}`): expected one privatize per tensor",
            x.by, x.buffer
        )));
    }
    let all = nest.stmts();
    if !all.iter().any(accesses) {
        return Err(bad(3, "tensor", "a tensor the nest accesses", format!("`{tensor}`, which it does not")));
    }
    if let Some(r) = nest.refusal(Mark::Privatize, tensor) {
        return Err(bad(3, "tensor", r.expected, r.found));
    }
    if let Some(v) = l.lb.vars().into_iter().chain(l.ub.vars()).find(|v| state.constant(v).is_none()) {
        return Err(bad(
            2,
            "level",
            "a loop whose bounds are named constants (each copy of the tensor is at `j - lb`)",
            format!("loop {}, whose bounds use `{v}`", l.header()),
        ));
    }
    let inside: Vec<crate::ir::TExpr> = l.body.iter().flat_map(|x| x.stmts()).collect();
    if let Some(s) = all.iter().find(|s| accesses(s) && !inside.iter().any(|x| Arc::ptr_eq(x, s))) {
        return Err(illegal(format!(
            "`{s}` accesses `{tensor}` outside loop `{}`: expected every access to it inside the loop",
            l.iter
        )));
    }
    // The original iterator that the loop runs, in every statement that accesses the tensor.
    let here = Expr::var_name(&l.iter);
    let mut original: Option<Name> = None;
    for s in inside.iter().filter(|s| accesses(s)) {
        let inst = s
            .inst
            .as_ref()
            .ok_or_else(|| illegal(format!("`{s}` records no instances: expected a nest made by `build`")))?;
        let Some(k) = inst.at.iter().position(|e| *e == here) else {
            return Err(illegal(format!(
                "loop `{}` runs no iterator of `{s}` as it is (it was strip-mined, skewed or shifted): \
                 expected a loop of the program's own iterator (privatize first)",
                l.iter
            )));
        };
        match &original {
            Some(o) if *o != inst.iters[k] => {
                return Err(illegal(format!(
                    "loop `{}` runs the iterator `{o}` of one statement and `{}` of `{s}`: expected one \
                     iterator of the program in every statement that accesses `{tensor}`",
                    l.iter, inst.iters[k]
                )));
            }
            _ => original = Some(inst.iters[k].clone()),
        }
    }
    let original = original.expect("the loop holds a statement that accesses the tensor");
    if !inside.iter().any(|s| crate::ir::lower(s).is_some_and(|lw| lw.target.id() == Some(tensor))) {
        return Err(illegal(format!(
            "no statement in loop `{}` writes `{tensor}`: expected a tensor the loop computes (an \
             operand it only reads needs no copies)",
            l.iter
        )));
    }
    let reads = |s: &crate::ir::TExpr| {
        crate::ir::lower(s).is_some_and(|lw| {
            let mut hit = false;
            lw.rhs.visit(&mut |n| hit |= n.id() == Some(tensor));
            // An update onto the values it held (`x = add(x, ..)`, not a zeroed sum) reads x.
            hit || (lw.update.accumulates() && lw.first.is_none() && lw.target.id() == Some(tensor))
        })
    };
    if !inside.iter().any(reads) {
        return Err(illegal(format!(
            "no statement reads `{tensor}`: it is a result of the nest, whose values must be kept"
        )));
    }
    if !state.unchecked
        && let Err(why) = crate::analysis::legality::stays_local(state, nest, &l, tensor)
            .map_err(|e| Error::Internal { builtin: b.into(), reason: e })?
    {
        return Err(illegal(format!(
            "cannot give `{tensor}` a copy per iteration of loop `{}`: {}",
            l.iter, why.message
        )));
    }
    let index = here.sub(&l.lb);
    let extent = l.ub.sub(&l.lb).add_int(1);
    // The copies' buffer: a name of its own (`temp2_j`), so that another nest of a kernel may
    // give the tensor copies along another loop.
    let mut taken = names_in(nest, state);
    taken.extend(state.vars.keys().cloned());
    for s in &all {
        s.visit(&mut |n| {
            if let Some(t) = n.id() {
                taken.insert(t.clone());
            }
        });
    }
    let buffer = fresh(&format!("{tensor}_{original}"), &taken);
    let expand = |s: &crate::ir::TExpr| expanded_leaves(s, tensor, &buffer, &index, &extent);
    let sub = rewrite_loop(&view, level, b, &level_arg(2), &mut |l| {
        Ok(vec![LNode::Loop(l.with_body(l.body.iter().map(|x| x.map_stmts(&expand)).collect()))])
    })?;
    let mut out = nest.splice(sub);
    out.expanded.insert(tensor.clone(), crate::ir::Expansion { by: original, buffer });
    Ok(out)
}

/// `s` with every leaf of `tensor` renamed `buffer` and given a new first dimension: index
/// `index`, extent `extent`.
pub(super) fn expanded_leaves(
    s: &crate::ir::TExpr,
    tensor: &Name,
    buffer: &Name,
    index: &Expr,
    extent: &Expr,
) -> crate::ir::TExpr {
    use crate::ir::{Dim, Iters, Op, Shape, TNode};
    let children = s.children.iter().map(|c| expanded_leaves(c, tensor, buffer, index, extent)).collect();
    let mut node = TNode { children, ..(**s).clone() };
    if s.is_tensor_leaf() && s.id() == Some(tensor) {
        node.op = Op::Id(buffer.clone());
        let xs =
            std::iter::once(index.clone()).chain(s.index_list().unwrap_or(&[]).iter().cloned()).collect();
        let dims = std::iter::once(Dim::Known(extent.clone()))
            .chain(s.shape.dims().unwrap_or(&[]).iter().cloned())
            .collect();
        node.iters = Iters::List(xs);
        node.shape = Shape::Dims(dims);
    }
    Arc::new(node)
}

/// `in_place(l, y, x)` (Ullrich 2018, "other variable vs. in-place"): the result `y` is stored
/// over the operand `x`: every statement of the nest that wrote `y` writes `x` instead, and
/// the kernel's buffer holds `x` at entry and `y` at exit. Legal where `x` and `y` have one
/// shape and element type, the nest only reads `x` and only writes `y` (or sums into it from
/// zero), and, decided by isl in the original order (`analysis::legality::stays_in_place`, part
/// of the legality check), no element of `x` is read after the element of `y` over it was written: each old value is
/// read before it is overwritten (Ullrich 2018's compatible statements, Definition 2, where every
/// read of `x` is at the written index). Every later transformation is checked against the
/// nest as it runs in place. `in_place(l, y, x)` for `y = exp(x)`:
///
/// ```text
/// for i in [0, N-1]          for i in [0, N-1]
///   y[i] = exp(x[i])    →      x[i] = exp(x[i])      in place: y is stored over x
/// ```
pub fn in_place(state: &State, nest: &Nest, y: &Name, x: &Name) -> Result<Nest> {
    let b = "in_place";
    let bad = |k: usize, name: &str, expected: String, found: String| {
        Error::bad_argument(b, Arg::new(k, name), expected, found)
    };
    if y == x {
        return Err(bad(
            3,
            "operand",
            format!("an operand other than the result `{y}`"),
            format!("`{x}`: a statement `{x} = e({x})` already writes over its operand where it can"),
        ));
    }
    let stmts = nest.stmts();
    let writes = |t: &Name| stmts.iter().any(|s| s.target().and_then(|x| x.id()) == Some(t));
    let reads = |t: &Name| {
        stmts.iter().any(|s| {
            let mut found = false;
            if let Some(v) = s.value() {
                v.visit(&mut |n| found |= n.id() == Some(t));
            }
            found
        })
    };
    if nest.rank_of(y).is_none() || !writes(y) {
        return Err(bad(
            2,
            "result",
            "a tensor the nest writes".into(),
            format!("`{y}`, which it does not write"),
        ));
    }
    if nest.rank_of(x).is_none() || !reads(x) {
        return Err(bad(
            3,
            "operand",
            "a tensor the nest reads".into(),
            format!("`{x}`, which it does not read"),
        ));
    }
    if writes(x) {
        return Err(bad(
            3,
            "operand",
            "an operand the nest only reads".into(),
            format!("`{x}`, which it writes"),
        ));
    }
    // Every element of `y` must be written (condition 3): a statement writing affine positions
    // (an interior, a slice) would leave `x`'s values where `y` should keep its own.
    // Ranges given to `build` (a triangle, an interior) may leave elements unwritten too.
    if let Some(s) = stmts.iter().find(|s| {
        s.target().is_some_and(|t| {
            t.id() == Some(y)
                && (t.index_list().is_some_and(|xs| xs.iter().any(|e| e.as_var().is_none()))
                    || s.dom.as_ref().is_some_and(|d| !d.ranges.is_empty()))
        })
    }) {
        return Err(bad(
            2,
            "result",
            "a result the nest writes whole (every element, at plain iterators over whole ranges)".into(),
            if s.dom.as_ref().is_some_and(|d| !d.ranges.is_empty()) {
                format!("`{y}`, written over the ranges given to `build` by `{s}`")
            } else {
                format!("`{y}`, written at affine positions by `{s}`")
            },
        ));
    }
    for (k, t, name) in [(2, y, "result"), (3, x, "operand")] {
        if let Some(r) = nest.refusal(Mark::InPlace, t) {
            return Err(bad(k, name, r.expected.into(), r.found));
        }
    }
    let shape = |t: &Name| state.real_tensor(t).map(|d| (d.dtype, d.shape.clone()));
    let (sy, sx) = (shape(y), shape(x));
    if sy.is_none() || sy != sx {
        let show = |s: Option<(crate::ir::DType, crate::ir::Shape)>| match s {
            Some((d, sh)) => format!("{} {sh}", d.c_name()),
            None => "no declared shape".into(),
        };
        return Err(Error::Illegal {
            builtin: b.into(),
            reason: format!(
                "`{y}` is {} and `{x}` is {}: expected one shape and element type",
                show(sy),
                show(sx)
            ),
        });
    }
    let rename = |t: &crate::ir::TExpr| t.rename_tensor(y, x);
    let mut out = nest.with_items(nest.items.iter().map(|n| n.map_stmts(&rename)).collect());
    out.over.insert(y.clone(), x.clone());
    Ok(out)
}
