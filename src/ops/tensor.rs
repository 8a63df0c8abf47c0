//! Tensor-expression builtins (Fig. 8, eq. 12-18) and the fundamental `vcontract`
//! (Sec. 4.2.3). Each is a pure function: it reads trees and returns a new tree.

use crate::analysis::infer::{constants, extent_of, iterators, nonneg, same_extent};
use crate::error::{Arg, Error, Result};
use crate::ir::expr::INT_MAX;
use crate::ir::{
    AssignMode, DType, Dim, Expr, Func, Iters, Name, Op, Shape, State, TExpr, TNode, Value, real_leaf,
};
use std::collections::BTreeSet;

/// The arithmetic operation of `vadd`/`add` and friends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arith {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `pow(x, y)`
    Pow,
    /// `min(x, y)`
    Min,
    /// `max(x, y)`
    Max,
    /// A comparison (`Func::Lt`, ...): 1 where it holds, else 0.
    Cmp(Func),
}

impl Arith {
    fn op(self) -> Op {
        match self {
            Arith::Add => Op::Add,
            Arith::Sub => Op::Sub,
            Arith::Mul => Op::Mul,
            Arith::Div => Op::Div,
            Arith::Pow => Op::Call(Func::Pow),
            Arith::Min => Op::Call(Func::Min),
            Arith::Max => Op::Call(Func::Max),
            Arith::Cmp(f) => Op::Call(f),
        }
    }

    /// The builtin's stem: `add`, `sub`, `mul`, `div`.
    pub fn stem(self) -> &'static str {
        match self {
            Arith::Add => "add",
            Arith::Sub => "sub",
            Arith::Mul => "mul",
            Arith::Div => "div",
            Arith::Pow => "pow",
            Arith::Min => "min",
            Arith::Max => "max",
            Arith::Cmp(f) => f.name(),
        }
    }
}

/// A name not in `taken`: `base`, else `base2`, `base3`, ...
pub fn fresh(base: &str, taken: &BTreeSet<Name>) -> Name {
    if !taken.iter().any(|t| &**t == base) {
        return Name::from(base);
    }
    (2..)
        .map(|k| format!("{base}{k}"))
        .find(|c| !taken.iter().any(|t| **t == **c))
        .map(|c| Name::from(c.as_str()))
        .unwrap_or_else(|| Name::from(base))
}

/// `scalar()`, eq. 12: `⟨(□, [], •), []⟩`.
pub fn scalar(dtype: DType) -> TExpr {
    TNode::leaf(Op::Hole, Shape::Dims(vec![]), Iters::Bullet, dtype)
}

/// `tensor(S)` / `tensor(type, S)`, eq. 13: `⟨(□, S, ε), []⟩`. Extents are positive integers
/// or affine expressions in named constants.
pub fn tensor(state: &State, builtin: &str, dims: &[Expr], dtype: DType) -> Result<TExpr> {
    let arg = Arg::new(if builtin == "tensor" { 1 } else { 2 }, "shape");
    for (k, d) in dims.iter().enumerate() {
        let value = d.checked_eval(&|x| state.constant(x));
        let with_value = match &value {
            Ok(v) if d.as_const().is_none() => format!(" (= {v})"),
            _ => String::new(),
        };
        if matches!(value, Err(crate::ir::EvalError::Overflow))
            || !d.within(INT_MAX)
            || value.as_ref().is_ok_and(|v| *v > INT_MAX)
        {
            return Err(Error::bad_argument(
                builtin,
                arg.clone(),
                format!("extents of at most {INT_MAX} (the generated loops run over C int)"),
                format!(
                    "extent {d} in dimension {}{}",
                    k + 1,
                    if value.is_err() { " (an integer overflow)".into() } else { with_value }
                ),
            ));
        }
        if value.as_ref().is_ok_and(|v| *v < 1) || nonneg(&d.add_int(-1), state) == Some(false) {
            return Err(Error::bad_argument(
                builtin,
                arg.clone(),
                "positive extents",
                format!("extent {d} in dimension {}{with_value}", k + 1),
            ));
        }
        if !d.is_affine() {
            return Err(Error::bad_argument(
                builtin,
                Arg::new(1, "shape"),
                "extents that are integers or affine in named constants",
                d.to_string(),
            ));
        }
    }
    Ok(TNode::leaf(Op::Hole, Shape::known(dims.to_vec()), Iters::Unset, dtype))
}

/// How a tensor expression enters a larger one (the where-clauses of eq. 14-15).
///
/// A declared tensor (`I' = ε`) must be given an iterator list of its rank; an operand that
/// already carries iterators (an operation, a scalar) must be given none. An identifier bound
/// to an assignment stands for the real tensor it assigns (docs/semantics.md).
/// Generalization, so that the compositions of Sec. 4 can index virtual operands: a list given to an operation
/// renames its free iterators, position by position.
pub fn operand(state: &State, builtin: &str, arg: &Arg, t: &TExpr, list: Option<&[Expr]>) -> Result<TExpr> {
    let t = if t.is_assign() { real_leaf(t.target().unwrap_or(t)) } else { t.clone() };
    let err = |expected: String, found: String| Error::IteratorList {
        builtin: builtin.into(),
        arg: arg.clone(),
        expected,
        found,
    };
    match (&t.op, &t.iters, list) {
        (Op::Id(_) | Op::Hole, Iters::Unset, None) => Err(err(
            format!("an iterator list for {} (it has none: I' = ε, eq. 14-15)", name_of(&t)),
            "no list".into(),
        )),
        (Op::Id(_) | Op::Hole, Iters::Unset, Some(xs)) => {
            if xs.len() != t.shape.rank() {
                return Err(err(
                    format!("{} indices for {} {} (its rank)", t.shape.rank(), name_of(&t), t.shape),
                    format!("{} ({})", xs.len(), fmt_list(xs)),
                ));
            }
            for x in xs {
                if !x.is_affine() {
                    return Err(err("affine index expressions".into(), x.to_string()));
                }
            }
            Ok(t.with_iters(Iters::List(xs.to_vec())))
        }
        (_, Iters::Bullet | Iters::List(_), None) => Ok(t),
        (Op::Id(_) | Op::Hole | Op::Lit(_), Iters::Bullet, Some(xs)) => Err(err(
            format!("no iterator list for the scalar {} (•, eq. 12)", name_of(&t)),
            format!("[{}]", fmt_list(xs)),
        )),
        (_, _, Some(xs)) if !t.children.is_empty() => rename_free(state, builtin, arg, &t, xs),
        (_, _, Some(xs)) => Err(err(
            format!("no iterator list for {} (it already has one)", t.access()),
            format!("[{}]", fmt_list(xs)),
        )),
        (_, Iters::Unset, None) => Err(err("an indexable tensor".into(), format!("`{t}`"))),
    }
}

fn name_of(t: &TNode) -> String {
    match &t.op {
        Op::Id(n) => format!("`{n}`"),
        Op::Hole => "the tensor being defined".into(),
        Op::Lit(x) => format!("the literal {x}"),
        _ => format!("`{t}`"),
    }
}

fn fmt_list(xs: &[Expr]) -> String {
    xs.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
}

/// Renames the free iterators of an operation, position by position (see [`operand`]).
fn rename_free(state: &State, builtin: &str, arg: &Arg, t: &TExpr, xs: &[Expr]) -> Result<TExpr> {
    let consts = constants(state, &[t]);
    let bound: BTreeSet<Name> = t.bound_iters().into_iter().collect();
    let free: Vec<Name> = iterators(t, &consts).into_iter().filter(|v| !bound.contains(v)).collect();
    if free.len() != xs.len() {
        return Err(Error::IteratorList {
            builtin: builtin.into(),
            arg: arg.clone(),
            expected: format!(
                "{} iterators to rename the free iterators [{}] of `{t}`",
                free.len(),
                free.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")
            ),
            found: format!("{} ([{}])", xs.len(), fmt_list(xs)),
        });
    }
    let mut taken: BTreeSet<Name> = xs.iter().flat_map(|x| x.vars()).collect();
    taken.extend(free.iter().cloned());
    let t = avoid_capture(t, &taken);
    Ok(t.subst_iters(&|v| free.iter().position(|f| &**f == v).map(|k| xs[k].clone())))
}

/// Renames iterators bound by contractions inside `t` that clash with `taken`.
fn avoid_capture(t: &TExpr, taken: &BTreeSet<Name>) -> TExpr {
    let mut t = t.clone();
    let mut all: BTreeSet<Name> = taken.clone();
    all.extend(t.index_vars());
    for k in t.bound_iters() {
        if taken.contains(&k) {
            let n = fresh(&k, &all);
            all.insert(n.clone());
            t = t.subst_iters(&|v| (v == &*k).then(|| Expr::var_name(&n)));
        }
    }
    t
}

/// The shape of an operation: the extents of its free iterators, in order of appearance.
fn infer_shape(state: &State, builtin: &str, arg: &Arg, t: &TNode) -> Result<Shape> {
    let consts = constants(state, &[t]);
    let bound: BTreeSet<Name> = t.bound_iters().into_iter().collect();
    let mut dims = Vec::new();
    for v in iterators(t, &consts) {
        if bound.contains(&v) {
            // still checks that the contracted dimensions agree
            extent_of(&v, &[t], state, builtin, arg)?;
            continue;
        }
        dims.push(match extent_of(&v, &[t], state, builtin, arg)? {
            Some(e) => Dim::Known(e),
            None => Dim::Unknown,
        });
    }
    Ok(Shape::Dims(dims))
}

/// `vop(t0, t1, [I0, I1])`, eq. 15: the virtual expression `t0 op t1`.
pub fn vop(
    state: &State,
    op: Arith,
    t0: &TExpr,
    t1: &TExpr,
    i0: Option<&[Expr]>,
    i1: Option<&[Expr]>,
) -> Result<TExpr> {
    let builtin = format!("v{}", op.stem());
    vop_named(state, &builtin, op, t0, t1, i0, i1)
}

/// The deepest tensor expression teml accepts: code generation, legality and the expression
/// oracle walk expressions recursively, and a chain of virtual expressions thousands deep would
/// overflow their stacks. Each statement is bounded as it is built.
pub const MAX_EXPRESSION_DEPTH: usize = 400;

/// Refuses `node` (made by `builtin`) when it is deeper than [`MAX_EXPRESSION_DEPTH`]. Its
/// children were bounded when they were made, so the walk is bounded too; shared sub-trees are
/// measured once.
fn bounded(builtin: &str, node: &TExpr) -> Result<()> {
    fn depth(e: &TExpr, seen: &mut std::collections::HashMap<*const TNode, usize>) -> usize {
        if let Some(d) = seen.get(&std::sync::Arc::as_ptr(e)) {
            return *d;
        }
        let d = 1 + e.children.iter().map(|c| depth(c, seen)).max().unwrap_or(0);
        seen.insert(std::sync::Arc::as_ptr(e), d);
        d
    }
    let d = depth(node, &mut Default::default());
    if d > MAX_EXPRESSION_DEPTH {
        return Err(Error::Limit {
            builtin: builtin.into(),
            reason: format!(
                "expected a tensor expression at most {MAX_EXPRESSION_DEPTH} operations deep, found one {d} deep \
                 (virtual expressions nest into the statements that use them): assign an intermediate \
                 result to a tensor (`T = add(...)`, then build it) to cut the chain"
            ),
        });
    }
    Ok(())
}

fn vop_named(
    state: &State,
    builtin: &str,
    op: Arith,
    t0: &TExpr,
    t1: &TExpr,
    i0: Option<&[Expr]>,
    i1: Option<&[Expr]>,
) -> Result<TExpr> {
    let y0 = operand(state, builtin, &Arg::new(1, "operand"), t0, i0)?;
    let y1 = operand(state, builtin, &Arg::new(2, "operand"), t1, i1)?;
    // Iterators bound inside one operand must not capture the other's.
    let y0 = avoid_capture(&y0, &y1.index_vars().into_iter().collect());
    let y1 = avoid_capture(&y1, &y0.index_vars().into_iter().collect());
    let node = TNode::node(op.op(), Shape::Dims(vec![]), vec![y0, y1]);
    bounded(builtin, &node)?;
    let shape = infer_shape(state, builtin, &Arg::new(3, "iterators"), &node)?;
    Ok(std::sync::Arc::new(TNode { shape, ..(*node).clone() }))
}

/// `vselect(c, t, f, [Ic, It, If])` (extension, by eq. 15's pattern): the virtual element-wise
/// `c[Ic] != 0 ? t[It] : f[If]`, `c` a comparison (`vle`, ...) or any tensor. Each list is
/// omitted where its operand carries iterators.
pub fn vselect(state: &State, ops: [&TExpr; 3], lists: [Option<&[Expr]>; 3]) -> Result<TExpr> {
    vselect_named(state, "vselect", ops, lists)
}

fn vselect_named(
    state: &State,
    builtin: &str,
    ops: [&TExpr; 3],
    lists: [Option<&[Expr]>; 3],
) -> Result<TExpr> {
    let roles = ["condition", "then", "else"];
    let mut ys = Vec::new();
    for k in 0..3 {
        ys.push(operand(state, builtin, &Arg::new(k + 1, roles[k]), ops[k], lists[k])?);
    }
    // Iterators bound inside one operand must not capture another's.
    for k in 0..3 {
        let others: BTreeSet<Name> =
            ys.iter().enumerate().filter(|(j, _)| *j != k).flat_map(|(_, y)| y.index_vars()).collect();
        ys[k] = avoid_capture(&ys[k], &others);
    }
    let node = TNode::node(Op::Call(Func::Select), Shape::Dims(vec![]), ys);
    bounded(builtin, &node)?;
    let shape = infer_shape(state, builtin, &Arg::new(4, "iterators"), &node)?;
    Ok(std::sync::Arc::new(TNode { shape, ..(*node).clone() }))
}

/// `select(c, t, f, [Ic, It, If] -> I)`: the assignment `□[I] = c[Ic] != 0 ? t[It] : f[If]`.
pub fn select(state: &State, ops: [&TExpr; 3], lists: [Option<&[Expr]>; 3], i: &[Expr]) -> Result<TExpr> {
    let x = vselect_named(state, "select", ops, lists)?;
    assign_node(state, "select", x, i, &Arg::new(5, "result iterators"))
}

/// `vsqrt(t, I0)` and the other unary functions (extension, by eq. 15's pattern): the virtual
/// element-wise `f(t[I0])`; `I0` is omitted where `t` carries iterators.
pub fn vcall(state: &State, f: Func, t: &TExpr, i0: Option<&[Expr]>) -> Result<TExpr> {
    vcall_named(state, &format!("v{}", f.name()), f, t, i0)
}

fn vcall_named(state: &State, builtin: &str, f: Func, t: &TExpr, i0: Option<&[Expr]>) -> Result<TExpr> {
    let y = operand(state, builtin, &Arg::new(1, "operand"), t, i0)?;
    let node = TNode::node(Op::Call(f), Shape::Dims(vec![]), vec![y]);
    bounded(builtin, &node)?;
    let shape = infer_shape(state, builtin, &Arg::new(2, "iterators"), &node)?;
    Ok(std::sync::Arc::new(TNode { shape, ..(*node).clone() }))
}

/// `sqrt(t, I0 -> I1)` and the other unary functions (extension, by eq. 16's pattern):
/// `eq(vsqrt(t, I0), ε -> I1)`, the assignment `□[I1] = f(t[I0])`.
pub fn call(state: &State, f: Func, t: &TExpr, i0: Option<&[Expr]>, i1: &[Expr]) -> Result<TExpr> {
    let x = vcall_named(state, f.name(), f, t, i0)?;
    assign_node(state, f.name(), x, i1, &Arg::new(3, "result iterators"))
}

/// `eq(t, I0 -> I1)`, eq. 14: the assignment `□[I1] = t[I0]`.
pub fn eq(state: &State, t: &TExpr, i0: Option<&[Expr]>, i1: &[Expr]) -> Result<TExpr> {
    let y = operand(state, "eq", &Arg::new(1, "tensor"), t, i0)?;
    assign_node(state, "eq", y, i1, &Arg::new(3, "result iterators"))
}

/// `op(t0, t1, [I0, I1] -> I2)`, eq. 16: `eq(vop(t0, t1, [I0, I1]), ε -> I2)`.
pub fn op(
    state: &State,
    op: Arith,
    t0: &TExpr,
    t1: &TExpr,
    i0: Option<&[Expr]>,
    i1: Option<&[Expr]>,
    i2: &[Expr],
) -> Result<TExpr> {
    let builtin = op.stem();
    let x = vop_named(state, builtin, op, t0, t1, i0, i1)?;
    assign_node(state, builtin, x, i2, &Arg::new(4, "result iterators"))
}

fn assign_node(state: &State, builtin: &str, y: TExpr, i1: &[Expr], arg: &Arg) -> Result<TExpr> {
    let consts = constants(state, &[&y]);
    let bound: BTreeSet<Name> = y.bound_iters().into_iter().collect();
    let mut seen: Vec<Name> = Vec::new();
    let mut dims = Vec::new();
    let list_error = |expected: String, found: String| Error::IteratorList {
        builtin: builtin.into(),
        arg: arg.clone(),
        expected,
        found,
    };
    // One iterator of the result list: free, not a named constant. It may come back (a
    // diagonal `A[i][i]`: still one element per iteration); the later positions then take
    // the declared tensor's extents.
    let check = |v: &Name, _seen: &[Name]| -> Result<()> {
        if bound.contains(v) {
            return Err(list_error(
                "free iterators in the result list".into(),
                format!("`{v}`, which is summed over by a contraction"),
            ));
        }
        Ok(())
    };
    for x in i1 {
        if let Some(v) = x.as_var() {
            if consts.contains(v) {
                return Err(list_error(
                    "free iterators in the result list".into(),
                    format!("`{v}`, which is a named constant"),
                ));
            }
            check(v, &seen)?;
            if seen.contains(v) {
                dims.push(Dim::Unknown);
                continue;
            }
            seen.push(v.clone());
            dims.push(match extent_of(v, &[&y], state, builtin, arg)? {
                Some(e) => Dim::Known(e),
                None => Dim::Unknown,
            });
            continue;
        }
        // An affine position (an interior `i+1`, a slice `0` or `N-1`): one iterator with
        // coefficient 1 plus a constant, or a constant, so that no two iterations write one
        // element. The extent is the declared tensor's.
        if !x.is_affine() {
            return Err(list_error(
                "iterators, or affine positions `i+c` and constants, in the result list".into(),
                x.to_string(),
            ));
        }
        let its: Vec<Name> = x.vars().into_iter().filter(|v| !consts.contains(v)).collect();
        match its.as_slice() {
            [] => {}
            [v] if x.coeff(v).abs() == 1 => {
                check(v, &seen)?;
                seen.push(v.clone());
            }
            [v] => {
                return Err(list_error(
                    format!("`{v}` with coefficient 1 or -1 in a result position (`{v}+c`, `c-{v}`)"),
                    format!("{x}: its iterations would write every {}th element only", x.coeff(v).abs()),
                ));
            }
            _ => {
                return Err(list_error(
                    "at most one iterator per result position".into(),
                    format!("{x}: two iterations would write one element"),
                ));
            }
        }
        dims.push(Dim::Unknown);
    }
    let x = TNode::leaf(Op::Hole, Shape::Dims(dims), Iters::List(i1.to_vec()), y.dtype);
    let mode = if y.has_contract() || y.has_hole() { AssignMode::Accumulator } else { AssignMode::Plain };
    let stmt = TNode::node(Op::Assign(mode), Shape::Bullet, vec![x, y]);
    check_reductions(builtin, &stmt, true)?;
    Ok(stmt)
}

/// True if the assignment has the form `x = x + r` (the same tensor at the same indices). With
/// `lenient`, an unnamed target (□) matches any tensor indexed the same way.
fn accumulates_onto(stmt: &TNode, lenient: bool) -> bool {
    let (Some(x), Some(y)) = (stmt.target(), stmt.value()) else {
        return false;
    };
    if y.op != Op::Add {
        return false;
    }
    let a = &y.children[0];
    a.is_tensor_leaf() && a.iters == x.iters && (a.op == x.op || (lenient && x.op == Op::Hole))
}

/// A contraction's sum can be realized by the loops of a nest only where the sum distributes:
/// as the whole value, as a factor of a product, as a numerator, or as the addend of an
/// accumulation `A = add(A, sum)` onto the target itself.
fn check_reductions(builtin: &str, stmt: &TNode, lenient: bool) -> Result<()> {
    let Some(y) = stmt.value() else { return Ok(()) };
    fn go(builtin: &str, n: &TNode, linear: bool, parent: &str) -> Result<()> {
        match &n.op {
            Op::Contract(ks) if !linear => Err(Error::Inexpressible {
                builtin: builtin.into(),
                reason: format!(
                    "the contraction `{n}` (a sum over {}) is an operand of {parent}, where the \
                     sum does not distribute over the loop nest: expected it as a whole value, \
                     a factor of a product or a numerator; assign it to a tensor first",
                    ks.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", ")
                ),
            }),
            Op::Contract(_) | Op::Mul => n.children.iter().try_for_each(|c| go(builtin, c, linear, "*")),
            Op::Div => {
                go(builtin, &n.children[0], linear, "/")?;
                go(builtin, &n.children[1], false, "a denominator")
            }
            Op::Add | Op::Sub => {
                let sym = if n.op == Op::Add { "+" } else { "-" };
                n.children.iter().try_for_each(|c| go(builtin, c, false, sym))
            }
            Op::Call(f) => n.children.iter().try_for_each(|c| go(builtin, c, false, f.name())),
            _ => Ok(()),
        }
    }
    if accumulates_onto(stmt, lenient) {
        go(builtin, &y.children[1], true, "+")
    } else {
        go(builtin, y, true, "=")
    }
}

/// The assignment mode once the target is named: an accumulator when the value reads the
/// tensor being defined (□, eq. 33) or assigns a contraction's sum; plain otherwise,
/// including `A = add(A, sum)`, which accumulates onto what `A` held.
fn finish_assign(builtin: &str, stmt: &TExpr, reads_itself: bool) -> Result<TExpr> {
    check_reductions(builtin, stmt, false)?;
    let contracts = stmt.value().is_some_and(|y| y.has_contract());
    let mode = if reads_itself || (contracts && !accumulates_onto(stmt, false)) {
        AssignMode::Accumulator
    } else {
        AssignMode::Plain
    };
    Ok(std::sync::Arc::new(TNode { op: Op::Assign(mode), ..(**stmt).clone() }))
}

/// The type of a value read without the tensor being defined (□): the promotion of its
/// tensor operands ([`DType::promote`]: `bf16 * bf16` sums in float, `u8 * i8` in `i32`);
/// `None` when it has no other tensor operand.
fn operand_dtype(y: Option<&TExpr>) -> Option<DType> {
    let mut out: Option<DType> = None;
    y?.visit(&mut |n| {
        if let Op::Id(_) = n.op {
            out = Some(out.map_or(n.dtype.compute(), |d| d.promote(n.dtype)));
        }
    });
    out
}

/// `vcontract(t0, t1, [r0, r1])` (Sec. 4.2.3, fundamental): the virtual sum over the shared
/// index of the product, `Σk t0[.., k, ..] * t1[.., k, ..]`, for one or several pairs of
/// 1-based dimensions. Its free iterators are `I' = (I \ k) || (J \ k)`, named `i1, i2, ...`.
pub fn vcontract(state: &State, t0: &TExpr, t1: &TExpr, pairs: &[(i64, i64)]) -> Result<TExpr> {
    let b = "vcontract";
    let pair_arg = Arg::new(3, "dimension pairs");
    let shape_of = |t: &TExpr, pos: usize| -> Result<Vec<Dim>> {
        let t = if t.is_assign() { real_leaf(t.target().unwrap_or(t)) } else { t.clone() };
        match t.shape.dims() {
            Some(d) if !d.is_empty() => Ok(d.to_vec()),
            _ => Err(Error::WrongKind {
                builtin: b.into(),
                arg: Arg::new(pos, "operand"),
                expected: "a tensor of rank 1 or more".into(),
                found: crate::ir::state::describe_tensor(&t),
            }),
        }
    };
    let (s0, s1) = (shape_of(t0, 1)?, shape_of(t1, 2)?);
    if pairs.is_empty() {
        return Err(Error::bad_argument(b, pair_arg, "at least one pair [r0, r1]", "[]"));
    }
    let mut used0 = BTreeSet::new();
    let mut used1 = BTreeSet::new();
    for &(r0, r1) in pairs {
        let bad = |expected: String, found: String| Error::bad_argument(b, pair_arg.clone(), expected, found);
        if r0 < 1 || r0 as usize > s0.len() {
            return Err(bad(format!("a dimension of operand 1 in 1..={}", s0.len()), r0.to_string()));
        }
        if r1 < 1 || r1 as usize > s1.len() {
            return Err(bad(format!("a dimension of operand 2 in 1..={}", s1.len()), r1.to_string()));
        }
        if !used0.insert(r0) || !used1.insert(r1) {
            return Err(bad(
                "each dimension contracted at most once".into(),
                format!("[{r0}, {r1}] repeated"),
            ));
        }
        if let (Dim::Known(e0), Dim::Known(e1)) = (&s0[r0 as usize - 1], &s1[r1 as usize - 1])
            && same_extent(e0, e1, state) != Some(true)
        {
            return Err(Error::ShapeMismatch {
                builtin: b.into(),
                arg: pair_arg.clone(),
                expected: format!(
                    "dimension {r0} of operand 1 and dimension {r1} of operand 2 of one extent"
                ),
                found: format!("{e0} and {e1}"),
            });
        }
    }
    let mut taken: BTreeSet<Name> = t0.bound_iters().into_iter().chain(t1.bound_iters()).collect();
    taken.extend(constants(state, &[t0, t1]));
    let mut ks = Vec::new();
    for n in 1..=pairs.len() {
        let k = fresh(&format!("k{n}"), &taken);
        taken.insert(k.clone());
        ks.push(k);
    }
    let mut ilist: Vec<Expr> = Vec::new();
    let mut jlist: Vec<Expr> = Vec::new();
    let mut n = 0;
    let mut next = |taken: &mut BTreeSet<Name>| {
        n += 1;
        let v = fresh(&format!("i{n}"), taken);
        taken.insert(v.clone());
        Expr::var_name(&v)
    };
    for d in 1..=s0.len() as i64 {
        match pairs.iter().position(|p| p.0 == d) {
            Some(p) => ilist.push(Expr::var_name(&ks[p])),
            None => ilist.push(next(&mut taken)),
        }
    }
    for d in 1..=s1.len() as i64 {
        match pairs.iter().position(|p| p.1 == d) {
            Some(p) => jlist.push(Expr::var_name(&ks[p])),
            None => jlist.push(next(&mut taken)),
        }
    }
    let y0 = operand(state, b, &Arg::new(1, "operand"), t0, Some(&ilist))?;
    let y1 = operand(state, b, &Arg::new(2, "operand"), t1, Some(&jlist))?;
    let node = TNode::node(Op::Contract(ks), Shape::Dims(vec![]), vec![y0, y1]);
    bounded(b, &node)?;
    let shape = infer_shape(state, b, &pair_arg, &node)?;
    Ok(std::sync::Arc::new(TNode { shape, ..(*node).clone() }))
}

/// `P_stmt[id = e]` and `P_stmt[id1 = @id2: e]` (eq. 17-18, 26): binds `id` to the value,
/// filling the hole `□` with `id` (or `id2`). An assignment to a declared tensor must match
/// its shape; one to an undeclared identifier declares it with the inferred shape.
pub fn assign(state: &State, id: &str, at: Option<&str>, value: Value) -> Result<State> {
    let t = match value {
        Value::Nest(n) => return Ok(state.with(id, Value::Nest(n))),
        Value::Tensor(t) => t,
    };
    let target_name: Name = Name::from(at.unwrap_or(id));
    let builtin = match at {
        Some(_) => format!("{id} = @{target_name}:"),
        None => format!("{id} ="),
    };
    if !t.is_assign() {
        let t = t.fill_hole(&target_name);
        return Ok(state.with(id, Value::Tensor(t)));
    }
    let x = t.target().cloned().unwrap_or_else(|| t.clone());
    let reads_itself = t.value().is_some_and(|y| y.has_hole());
    let declared = state.real_tensor(&target_name);
    let mut dims: Vec<Dim> = x.shape.dims().unwrap_or(&[]).to_vec();
    let mut dtype = x.dtype;
    if let Some(d) = &declared {
        let ddims = d.shape.dims().unwrap_or(&[]);
        if ddims.len() != dims.len() {
            return Err(Error::ShapeMismatch {
                builtin,
                arg: Arg::new(1, "result"),
                expected: format!("rank {} as `{target_name}` is declared {}", ddims.len(), d.shape),
                found: format!("rank {} ({})", dims.len(), x.shape),
            });
        }
        for (k, (got, want)) in dims.iter_mut().zip(ddims).enumerate() {
            let Dim::Known(w) = want else { continue };
            // A value narrowed by offsets (`x[i] = x[i+1]`, no access `y[i]` of another
            // extent) writes part of the target: `build` then needs the range
            // (`build(s, [[i, 0, N-2]])`), every access checked.
            let offsets_only =
                x.index_list().and_then(|xs| xs.get(k)).and_then(|e| e.as_var()).is_some_and(|v| {
                    let mut plain_other = false;
                    if let Some(y) = t.value() {
                        y.visit(&mut |n| {
                            if let (Some(is), Some(ds)) = (n.index_list(), n.shape.dims()) {
                                for (e, d) in is.iter().zip(ds) {
                                    if e.as_var() == Some(v)
                                        && let Dim::Known(de) = d
                                        && same_extent(de, w, state) != Some(true)
                                    {
                                        plain_other = true;
                                    }
                                }
                            }
                        });
                    }
                    !plain_other
                });
            if let Dim::Known(g) = got
                && same_extent(g, w, state) != Some(true)
                && !(offsets_only && crate::analysis::infer::nonneg(&w.sub(g), state) == Some(true))
            {
                return Err(Error::ShapeMismatch {
                    builtin,
                    arg: Arg::new(1, "result"),
                    expected: format!("`{target_name}` {} as declared", d.shape),
                    found: format!("extent {g} in dimension {} (the value's shape is {})", k + 1, x.shape),
                });
            }
            *got = want.clone();
        }
        dtype = d.dtype;
    } else if reads_itself && let Some(d) = operand_dtype(t.value()) {
        // The tensor being defined (an accumulator) takes its operands' type, not the
        // default double its own `accumulator(...)` leaf was made with.
        dtype = d;
    }
    if declared.is_none()
        && let Some(k) = dims.iter().position(|d| *d == Dim::Unknown)
    {
        return Err(Error::RangeInference {
            builtin,
            arg: Arg::new(1, "result"),
            iterator: x.index_list().and_then(|xs| xs.get(k)).map(|e| e.to_string()).unwrap_or_default(),
            reason: match x.index_list().and_then(|xs| xs.get(k)) {
                Some(e) if e.as_var().is_none() => format!(
                    "a result at affine positions writes part of a tensor, and `{target_name}` is not \
                     declared: declare it with tensor([...])"
                ),
                Some(e) if x.index_list().is_some_and(|xs| xs[..k].contains(e)) => format!(
                    "it comes back in the result list (a diagonal writes part of a tensor), and \
                     `{target_name}` is not declared: declare it with tensor([...])"
                ),
                _ => format!(
                    "no access of the value determines it, and `{target_name}` is not declared: declare it with tensor([...])"
                ),
            },
        });
    }
    let shape = Shape::Dims(dims);
    // Fill the hole, and give the target (and any accumulator reference) the final shape.
    let fix = |n: &TExpr| -> TExpr {
        if matches!(n.op, Op::Hole) {
            std::sync::Arc::new(TNode {
                op: Op::Id(target_name.clone()),
                shape: shape.clone(),
                dtype,
                ..(**n).clone()
            })
        } else {
            n.clone()
        }
    };
    fn map_leaves(t: &TExpr, f: &dyn Fn(&TExpr) -> TExpr) -> TExpr {
        if t.children.is_empty() {
            return f(t);
        }
        std::sync::Arc::new(TNode {
            children: t.children.iter().map(|c| map_leaves(c, f)).collect(),
            ..(**t).clone()
        })
    }
    // Check accumulator references against the final shape.
    let mut bad = None;
    t.visit(&mut |n| {
        if matches!(n.op, Op::Hole) && n.shape.rank() != shape.rank() {
            bad = Some(n.shape.to_string());
        }
    });
    if let Some(found) = bad {
        return Err(Error::ShapeMismatch {
            builtin,
            arg: Arg::new(1, "accumulator"),
            expected: format!("the accumulator to have the result's shape {shape}"),
            found,
        });
    }
    let t = finish_assign(&builtin, &map_leaves(&t, &fix), reads_itself)?;
    let mut s = state.with(id, Value::Tensor(t.clone()));
    // `D = @C: e` with C undeclared declares C too; `X = @X: e` is `X = e`, which already does.
    if at.is_some() && declared.is_none() && *target_name != *id {
        let x = t.target().map(real_leaf).unwrap_or_else(|| t.clone());
        s = s.with(&target_name, Value::Tensor(x));
    }
    Ok(s)
}
