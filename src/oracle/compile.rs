//! The oracle's compiler: each statement's expression turned into a tree of linear index
//! maps over the tensors' buffers (`Node`), its free iterators and extents found, the
//! statements of a program checked and compiled in order.

use super::*;

/// Compiles one statement: slots for iterators, extents, the form of eq. 14/16/33.
pub(super) struct Compiler<'a> {
    pub(super) state: &'a State,
    pub(super) text: String,
    /// Leaves with an index list, the target first: where extents come from.
    pub(super) leaves: Vec<&'a TNode>,
    /// The target and the value: an iterator the target does not index on its own ranges
    /// as TeIL's rules (and `build`) infer it from all the accesses.
    pub(super) target: &'a TNode,
    pub(super) value: &'a TNode,
    pub(super) scope: Vec<(Name, usize)>,
    pub(super) extents: Vec<i64>,
    pub(super) reads: Vec<(Name, Vec<usize>)>,
}

impl<'a> Compiler<'a> {
    /// The extent of iterator `v`: the target's dimension it indexes on its own; else, where the
    /// target writes affine positions (`B[i+1]`), the range every access allows (`build`'s
    /// inference: the target's positions bound it too); else a dimension it indexes on its own.
    pub(super) fn extent(&self, v: &Name) -> Res<i64> {
        let xs = self.target.index_list().unwrap_or(&[]);
        let plain_target = xs.iter().any(|e| e.as_var() == Some(v));
        if !plain_target && xs.iter().any(|e| e.as_var().is_none()) {
            let arg = crate::error::Arg::new(1, "statement");
            if let Ok(Some(e)) =
                crate::analysis::infer::extent_of(v, &[self.value, self.target], self.state, "oracle", &arg)
            {
                return e
                    .eval(&|x| self.state.constant(x))
                    .or_else(|x| data(format!("named constant `{x}` in the range of `{v}` is not bound")));
            }
        }
        for leaf in &self.leaves {
            let dims = leaf.shape.dims().unwrap_or(&[]);
            for (k, e) in leaf.index_list().unwrap_or(&[]).iter().enumerate() {
                if e.as_var() == Some(v)
                    && let Some(Dim::Known(d)) = dims.get(k)
                {
                    return d.eval(&|x| self.state.constant(x)).or_else(|x| {
                        data(format!("named constant `{x}` in the shape of {} is not bound", leaf.access()))
                    });
                }
            }
        }
        unsupported(format!("iterator `{v}` indexes no dimension on its own in `{}`", self.text))
    }

    pub(super) fn new_slot(&mut self, v: &Name) -> Res<usize> {
        let e = self.extent(v)?;
        self.extents.push(e);
        let s = self.extents.len() - 1;
        self.scope.push((v.clone(), s));
        Ok(s)
    }

    pub(super) fn lin(&self, e: &Expr) -> Res<Lin> {
        let terms = e
            .affine_terms()
            .ok_or_else(|| OracleError::Unsupported(format!("index {e} is not affine in `{}`", self.text)))?;
        let mut lin = Lin { c: e.constant(), terms: Vec::new() };
        for (v, k) in terms {
            if let Some(c) = self.state.constant(&v) {
                lin.c += k * c;
            } else if let Some((_, s)) = self.scope.iter().rev().find(|(n, _)| *n == v) {
                lin.terms.push((*s, k));
            } else {
                return data(format!("`{v}` is neither an iterator nor a bound constant in `{}`", self.text));
            }
        }
        Ok(lin)
    }

    pub(super) fn node(&mut self, t: &TNode) -> Res<Node> {
        Ok(match &t.op {
            Op::Lit(x) => Node::Lit(*x),
            Op::Id(name) => {
                let dims = dims_of(self.state, t)?;
                let xs: &[Expr] = match &t.iters {
                    Iters::List(xs) => xs,
                    Iters::Bullet => &[],
                    Iters::Unset => return unsupported(format!("`{name}` is read without indices")),
                };
                if xs.len() != dims.len() {
                    return data(format!("{} indexes a tensor of rank {}", t.access(), dims.len()));
                }
                let idx = xs.iter().map(|x| self.lin(x)).collect::<Res<Vec<_>>>()?;
                self.reads.push((name.clone(), dims.clone()));
                Node::Read { tensor: name.clone(), access: t.access(), dims, idx }
            }
            Op::Hole => return unsupported(format!("an unfilled hole □ in `{}`", self.text)),
            Op::Add | Op::Sub | Op::Mul | Op::Div => {
                let [a, b] = t.children.as_slice() else {
                    return unsupported(format!("`{}` with {} operands", t.op.symbol(), t.children.len()));
                };
                let op = match t.op {
                    Op::Add => Bin::Add,
                    Op::Sub => Bin::Sub,
                    Op::Mul => Bin::Mul,
                    _ => Bin::Div,
                };
                Node::Bin(op, Box::new(self.node(a)?), Box::new(self.node(b)?))
            }
            Op::Call(f) => {
                if t.children.len() != f.arity() {
                    return unsupported(format!("`{}` with {} operands", f.name(), t.children.len()));
                }
                Node::Call(*f, t.children.iter().map(|c| self.node(c)).collect::<Res<Vec<_>>>()?)
            }
            Op::Contract(ks) => {
                let depth = self.scope.len();
                let over = ks.iter().map(|k| self.new_slot(k)).collect::<Res<Vec<_>>>()?;
                let factors = t.children.iter().map(|c| self.node(c)).collect::<Res<Vec<_>>>();
                self.scope.truncate(depth);
                Node::Sum { over, factors: factors? }
            }
            Op::Assign(_) => return unsupported(format!("a nested assignment in `{}`", self.text)),
        })
    }
}

/// Free iterators of a value tree (not bound by an enclosing contraction, not named
/// constants), in order of first appearance.
pub(super) fn free_iters(t: &TNode, state: &State, bound: &mut Vec<Name>, out: &mut Vec<Name>) {
    if let Op::Contract(ks) = &t.op {
        let depth = bound.len();
        bound.extend(ks.iter().cloned());
        for c in &t.children {
            free_iters(c, state, bound, out);
        }
        bound.truncate(depth);
        return;
    }
    for x in t.index_list().unwrap_or(&[]) {
        for (v, _) in x.affine_terms().unwrap_or_default() {
            if state.constant(&v).is_none() && !bound.contains(&v) && !out.contains(&v) {
                out.push(v);
            }
        }
    }
    for c in &t.children {
        free_iters(c, state, bound, out);
    }
}

pub(super) fn compile(state: &State, s: &TExpr) -> Res<Stmt> {
    let text = s.to_string();
    let (Some(x), Some(y), Op::Assign(mode)) = (s.target(), s.value(), &s.op) else {
        return unsupported(format!("`{text}` is not an assignment"));
    };
    let target =
        x.id().cloned().ok_or_else(|| OracleError::Unsupported(format!("unnamed target in `{text}`")))?;
    if s.dom.is_some() {
        // Ranges its user gave, or a loop around a sequence: the meaning is the loops'.
        return unsupported(format!(
            "`{text}` runs over ranges given to `build` or in a loop around a sequence"
        ));
    }
    let dims = dims_of(state, x)?;
    let xs: &[Expr] = x.index_list().unwrap_or(&[]);
    if xs.len() != dims.len() {
        return data(format!("{} indexes a tensor of rank {} in `{text}`", x.access(), dims.len()));
    }
    let mut leaves = x.indexed_leaves();
    leaves.extend(y.indexed_leaves());
    let mut cx = Compiler {
        state,
        text: text.clone(),
        leaves,
        target: x,
        value: y,
        scope: Vec::new(),
        extents: Vec::new(),
        reads: Vec::new(),
    };

    // The target: `i + c` per dimension, distinct iterators.
    let mut at = Vec::new();
    for (d, e) in xs.iter().enumerate() {
        let terms = e.affine_terms().unwrap_or_default();
        let iters: Vec<&(Name, i64)> = terms.iter().filter(|(v, _)| state.constant(v).is_none()).collect();
        let [(v, 1)] = iters.as_slice() else {
            return unsupported(format!("target index {e} is not `iterator + constant` in `{text}`"));
        };
        if cx.scope.iter().any(|(n, _)| n == v) {
            return unsupported(format!("iterator `{v}` indexes the target twice in `{text}`"));
        }
        let slot = cx.new_slot(v)?;
        let c = cx.lin(e)?.c;
        let ext = cx.extents[slot];
        if ext > 0 && (c < 0 || ext - 1 + c >= dims[d] as i64) {
            return data(format!(
                "`{text}` writes {} out of bounds: indices {c}..{} in dimension {} of extent {}",
                x.access(),
                ext - 1 + c,
                d + 1,
                dims[d]
            ));
        }
        at.push((slot, c));
    }
    let mut free = Vec::new();
    free_iters(y, state, &mut Vec::new(), &mut free);
    let mut extra = Vec::new();
    for v in &free {
        if !cx.scope.iter().any(|(n, _)| n == v) {
            extra.push(cx.new_slot(v)?);
        }
    }

    // `x = x + r`: the same tensor at the same indices as the first operand of `+`.
    let onto = y.op == Op::Add && {
        let a = &y.children[0];
        a.is_tensor_leaf() && a.op == x.op && a.iters == x.iters
    };
    let value = if onto { &y.children[1] } else { y };
    // Reading the element being written is the same in both semantics only when it is read
    // once, before its single write: no sum, and no zeroing (an accumulator would read 0).
    let sums = !extra.is_empty() || value.has_contract() || *mode == AssignMode::Accumulator;
    let mut bad = None;
    value.visit(&mut |n| {
        if bad.is_none() && n.is_tensor_leaf() && n.op == x.op {
            if n.iters != x.iters {
                bad = Some(format!(
                    "`{text}` reads its own target at {} while writing {} (in place: functional and sequential semantics differ)",
                    n.access(),
                    x.access()
                ));
            } else if sums {
                bad = Some(format!(
                    "`{text}` reads its own target {} inside a sum or an accumulator (sequential semantics compound it)",
                    n.access()
                ));
            }
        }
    });
    // An integer target summing terms that are not integers truncates at every update (as the
    // interpreter and the C store it); the oracle rounds the whole sum once.
    if bad.is_none() && sums && x.dtype.is_integer() && !value.dtype.compute().is_integer() {
        bad = Some(format!(
            "`{text}` sums {} terms into the {} tensor {} (each update truncates; the oracle rounds the sum once)",
            value.dtype.compute(),
            x.dtype,
            x.access()
        ));
    }
    // A 16-bit float target summing rounds to its type at every update likewise (a bf16 `A12[h]
    // += ...`: -1.34375 updated, -1.3515625 rounded once; found by the fuzzer).
    if bad.is_none() && sums && x.dtype.is_narrow() && !x.dtype.is_integer() {
        bad = Some(format!(
            "`{text}` sums into the {} tensor {} (each update rounds to {}; the oracle rounds the sum once)",
            x.dtype,
            x.access(),
            x.dtype
        ));
    }
    if let Some(b) = bad {
        return unsupported(b);
    }
    let node = cx.node(value)?;
    let form = if onto {
        Form::Onto { zeroed: *mode == AssignMode::Accumulator, r: node }
    } else if *mode == AssignMode::Accumulator {
        Form::Sum(node)
    } else {
        Form::Last(node)
    };
    Ok(Stmt { text, target, dtype: x.dtype, dims, at, extents: cx.extents, extra, form, reads: cx.reads })
}

/// Compiles the statements and checks that every tensor is read with the extents it has at
/// that point (`known`: the tensors present before the first statement).
pub(super) fn compile_all(
    state: &State,
    stmts: &[TExpr],
    mut known: BTreeMap<Name, Vec<usize>>,
) -> Res<Vec<Stmt>> {
    let mut out = Vec::new();
    for s in stmts {
        let st = compile(state, s)?;
        for (name, dims) in &st.reads {
            match known.get(name) {
                Some(d) if d != dims => {
                    return data(format!(
                        "`{}` reads `{name}` with extents {dims:?}, but it has {d:?}",
                        st.text
                    ));
                }
                Some(_) => {}
                None if *name == st.target => {}
                None => return data(format!("no data for tensor `{name}` read by `{}`", st.text)),
            }
        }
        match known.get(&st.target) {
            Some(d) if *d != st.dims => {
                return data(format!(
                    "`{}` writes `{}` with extents {:?}, but it has {d:?}",
                    st.text, st.target, st.dims
                ));
            }
            _ => {
                known.insert(st.target.clone(), st.dims.clone());
            }
        }
        out.push(st);
    }
    Ok(out)
}
