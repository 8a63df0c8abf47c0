//! The reference interpreter: executes loop nests directly from the trees, in `f64`.
//!
//! Verification runs the *untransformed* program (each nest's origin assignments, built with
//! `build`, one after the other) here and compares with the compiled kernel. Statements are
//! compiled once into a small postfix form over flat buffers, so that the interpreter is fast
//! enough for the test sizes and for moderate real sizes.

use crate::ir::{DType, Expr, LNode, Name, Nest, Op, State, TNode, Update, lower};
use std::collections::BTreeMap;

/// A tensor's data, row-major, held in `f64` whatever its element type.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// Element type of the real tensor.
    pub dtype: DType,
    /// Extents (empty for a scalar).
    pub dims: Vec<usize>,
    /// Elements, row-major.
    pub data: Vec<f64>,
}

impl Tensor {
    /// A tensor of zeros.
    pub fn zeros(dtype: DType, dims: Vec<usize>) -> Tensor {
        let n = dims.iter().product();
        Tensor { dtype, dims, data: vec![0.0; n] }
    }
}

/// Tensors by name.
pub type Buffers = BTreeMap<Name, Tensor>;

/// Affine form over iterator slots: `c + sum(coef * slot)`.
#[derive(Clone, Debug)]
struct Lin {
    c: i64,
    terms: Vec<(usize, i64)>,
}

impl Lin {
    fn eval(&self, env: &[i64]) -> i64 {
        self.terms.iter().fold(self.c, |acc, (s, k)| acc + k * env[*s])
    }
}

/// A bound: affine (fast) or general (evaluated through names).
#[derive(Clone, Debug)]
enum Bound {
    Lin(Lin),
    General(Expr, Vec<(Name, usize)>),
}

impl Bound {
    fn eval(&self, env: &[i64], state: &State) -> Result<i64, String> {
        match self {
            Bound::Lin(l) => Ok(l.eval(env)),
            Bound::General(e, slots) => e
                .eval(&|v| {
                    slots.iter().find(|(n, _)| &**n == v).map(|(_, s)| env[*s]).or_else(|| state.constant(v))
                })
                .map_err(|v| format!("unbound `{v}` in bound {e}")),
        }
    }
}

#[derive(Clone, Debug)]
enum ROp {
    Load(usize, Lin),
    Lit(f64),
    Add,
    Sub,
    Mul,
    Div,
    /// A scalar function of the top one or two values.
    Call(crate::ir::Func),
}

#[derive(Clone, Debug)]
struct CStmt {
    buf: usize,
    at: Lin,
    update: Update,
    rhs: Vec<ROp>,
    /// An accumulator's reduction coordinates: where all are 0, the update sets.
    first: Option<Vec<Lin>>,
    /// Conditions `g >= 0`: the statement runs only where all hold.
    when: Vec<Lin>,
    /// The target's element type: stored values are rounded (or wrapped) to it, as the
    /// kernel stores them.
    store: DType,
}

#[derive(Clone, Debug)]
enum Node {
    Loop { slot: usize, lb: Bound, ub: Bound, body: Vec<Node> },
    Stmt(CStmt),
}

struct Compiler<'a> {
    state: &'a State,
    names: Vec<Name>,
    dims: Vec<Vec<usize>>,
    slots: Vec<Name>,
}

impl Compiler<'_> {
    fn buf(&mut self, leaf: &TNode, bufs: &Buffers) -> Result<usize, String> {
        let name = leaf.id().ok_or_else(|| format!("unnamed tensor in `{leaf}`"))?;
        if let Some(k) = self.names.iter().position(|n| n == name) {
            return Ok(k);
        }
        let t = bufs.get(name).ok_or_else(|| format!("no data for tensor `{name}`"))?;
        self.names.push(name.clone());
        self.dims.push(t.dims.clone());
        Ok(self.names.len() - 1)
    }

    fn lin(&self, e: &Expr) -> Result<Lin, String> {
        let terms = e.affine_terms().ok_or_else(|| format!("index {e} is not affine"))?;
        let mut lin = Lin { c: e.constant(), terms: Vec::new() };
        for (v, k) in terms {
            match self.slots.iter().rposition(|s| *s == v) {
                Some(s) => lin.terms.push((s, k)),
                None => {
                    lin.c += k * self
                        .state
                        .constant(&v)
                        .ok_or_else(|| format!("`{v}` is neither an iterator nor a bound constant"))?
                }
            }
        }
        Ok(lin)
    }

    fn bound(&self, e: &Expr) -> Result<Bound, String> {
        if e.is_affine() {
            return self.lin(e).map(Bound::Lin);
        }
        let slots = self.slots.iter().enumerate().map(|(k, n)| (n.clone(), k)).collect();
        Ok(Bound::General(e.clone(), slots))
    }

    /// Row-major linear offset of an access.
    fn access(&mut self, leaf: &TNode, bufs: &Buffers) -> Result<(usize, Lin), String> {
        let b = self.buf(leaf, bufs)?;
        let dims = self.dims[b].clone();
        let xs = leaf.index_list().unwrap_or(&[]);
        if xs.len() != dims.len() {
            return Err(format!("{} indexes a tensor of rank {}", leaf.access(), dims.len()));
        }
        let mut off = Lin { c: 0, terms: Vec::new() };
        let mut stride: i64 = 1;
        for (x, d) in xs.iter().zip(&dims).rev() {
            let l = self.lin(x)?;
            off.c += stride * l.c;
            off.terms.extend(l.terms.iter().map(|(s, k)| (*s, k * stride)));
            stride *= *d as i64;
        }
        Ok((b, off))
    }

    fn rhs(&mut self, t: &TNode, out: &mut Vec<ROp>, bufs: &Buffers) -> Result<(), String> {
        match &t.op {
            Op::Lit(x) => out.push(ROp::Lit(*x)),
            Op::Id(_) => {
                let (b, at) = self.access(t, bufs)?;
                out.push(ROp::Load(b, at));
            }
            Op::Add | Op::Sub | Op::Mul | Op::Div => {
                self.rhs(&t.children[0], out, bufs)?;
                self.rhs(&t.children[1], out, bufs)?;
                out.push(match t.op {
                    Op::Add => ROp::Add,
                    Op::Sub => ROp::Sub,
                    Op::Mul => ROp::Mul,
                    _ => ROp::Div,
                });
            }
            Op::Call(f) if t.children.len() == f.arity() => {
                for c in &t.children {
                    self.rhs(c, out, bufs)?;
                }
                out.push(ROp::Call(*f));
            }
            _ => return Err(format!("cannot evaluate `{t}`")),
        }
        Ok(())
    }

    fn node(&mut self, x: &LNode, bufs: &Buffers) -> Result<Node, String> {
        match x {
            LNode::Stmt(s) => {
                let lw = lower(s).ok_or_else(|| format!("not an assignment: {s}"))?;
                let (buf, at) = self.access(&lw.target, bufs)?;
                let mut rhs = Vec::new();
                self.rhs(&lw.rhs, &mut rhs, bufs)?;
                let first = match &lw.first {
                    Some(xs) => Some(xs.iter().map(|x| self.lin(x)).collect::<Result<Vec<_>, _>>()?),
                    None => None,
                };
                let when = lw.when.iter().map(|x| self.lin(x)).collect::<Result<Vec<_>, _>>()?;
                let store = lw.target.dtype;
                Ok(Node::Stmt(CStmt { buf, at, update: lw.update, rhs, first, when, store }))
            }
            LNode::Loop(l) => {
                let lb = self.bound(&l.lb)?;
                let ub = self.bound(&l.ub)?;
                self.slots.push(l.iter.clone());
                let slot = self.slots.len() - 1;
                let body = l.body.iter().map(|c| self.node(c, bufs)).collect::<Result<Vec<_>, _>>()?;
                self.slots.pop();
                Ok(Node::Loop { slot, lb, ub, body })
            }
        }
    }
}

/// The interpreter, for one kind of arithmetic (`A`: an [`Arith`] as `u8`, so that the
/// values' run compiles to plain arithmetic, with no test of the kind per operation).
struct Machine<'a, const A: u8> {
    data: Vec<&'a mut Vec<f64>>,
    env: Vec<i64>,
    stack: Vec<f64>,
    state: &'a State,
    count: u64,
}

/// What the interpreter computes: the values, or, for the rounding bound of a comparison
/// (docs/verification.md), what each value's rounding error is bounded by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arith {
    /// The statements' values, in `f64`.
    Values,
    /// Each value's magnitude `M`: the value computed with every operand's absolute value and
    /// subtraction as addition (Σ|terms| for a sum of products, Higham Sec. 3.1); infinite
    /// where no such bound holds (a division, a comparison, a function other than
    /// `abs`/`min`/`max`), from the buffers holding the operands' absolute values.
    Magnitude,
    /// Each value's count of roundings `n` along its longest chain (a sum: the larger count
    /// plus one; a product: both counts plus one), from buffers of zeros: `|computed - exact| <=
    /// γ_n M` whatever the order of the sums (Higham, Lemma 3.3 and Sec. 3.1).
    Roundings,
}

impl Arith {
    const fn of(a: u8) -> Arith {
        match a {
            0 => Arith::Values,
            1 => Arith::Magnitude,
            _ => Arith::Roundings,
        }
    }

    fn lit(self, x: f64) -> f64 {
        match self {
            Arith::Values => x,
            Arith::Magnitude => x.abs(),
            // A literal may be rounded to the kernel's element type (`0.1f`).
            Arith::Roundings => 1.0,
        }
    }

    fn call(self, f: crate::ir::Func, args: &[f64]) -> f64 {
        use crate::ir::Func;
        match (self, f) {
            (Arith::Values, _) => f.eval(args),
            (_, Func::Abs | Func::Min | Func::Max) => args.iter().fold(0.0f64, |m, x| m.max(*x)),
            (Arith::Magnitude, _) => f64::INFINITY,
            (Arith::Roundings, _) => 0.0,
        }
    }

    fn binary(self, op: &ROp, l: f64, r: f64) -> f64 {
        match (self, op) {
            (Arith::Values, ROp::Add) => l + r,
            (Arith::Values, ROp::Sub) => l - r,
            (Arith::Values, ROp::Mul) => l * r,
            (Arith::Values, _) => l / r,
            (Arith::Magnitude, ROp::Add | ROp::Sub) => l + r,
            (Arith::Magnitude, ROp::Mul) => l * r,
            (Arith::Magnitude, _) => f64::INFINITY,
            (Arith::Roundings, ROp::Add | ROp::Sub) => l.max(r) + 1.0,
            (Arith::Roundings, _) => l + r + 1.0,
        }
    }

    fn update(self, u: crate::ir::lower::Update, old: f64, v: f64) -> f64 {
        use crate::ir::lower::Update;
        match (self, u) {
            (Arith::Values, _) => u.combine(old, v),
            (_, Update::Set) => v,
            (Arith::Magnitude, Update::Add | Update::Sub) => old + v,
            (Arith::Roundings, Update::Add | Update::Sub) => old.max(v) + 1.0,
            (_, Update::Max | Update::Min) => old.max(v),
        }
    }
}

impl<const A: u8> Machine<'_, A> {
    const ARITH: Arith = Arith::of(A);

    fn exec(&mut self, n: &Node) -> Result<(), String> {
        match n {
            Node::Stmt(s) => {
                if s.when.iter().any(|g| g.eval(&self.env) < 0) {
                    return Ok(());
                }
                self.stack.clear();
                for op in &s.rhs {
                    let v = match op {
                        ROp::Load(b, at) => {
                            let off = at.eval(&self.env);
                            *self.data[*b]
                                .get(off as usize)
                                .ok_or_else(|| format!("read out of bounds at offset {off}"))?
                        }
                        ROp::Lit(x) => Self::ARITH.lit(*x),
                        ROp::Call(f) => {
                            let n = f.arity();
                            let mut args = [0.0; 3];
                            for k in (0..n).rev() {
                                args[k] = self.stack.pop().unwrap_or(0.0);
                            }
                            Self::ARITH.call(*f, &args[..n])
                        }
                        _ => {
                            let r = self.stack.pop().unwrap_or(0.0);
                            let l = self.stack.pop().unwrap_or(0.0);
                            Self::ARITH.binary(op, l, r)
                        }
                    };
                    self.stack.push(v);
                }
                let v = self.stack.pop().unwrap_or(0.0);
                let off = s.at.eval(&self.env);
                let slot = self.data[s.buf]
                    .get_mut(off as usize)
                    .ok_or_else(|| format!("write out of bounds at offset {off}"))?;
                let first = s.first.as_ref().is_some_and(|xs| xs.iter().all(|x| x.eval(&self.env) == 0));
                *slot = if first { v } else { Self::ARITH.update(s.update, *slot, v) };
                if s.store != DType::Double && A == 0 {
                    *slot = s.store.round(*slot);
                }
                self.count += 1;
                if self.count.is_multiple_of(1 << 20) && crate::runtime::interrupt::requested() {
                    return Err("interrupted (Ctrl-C) while the reference ran".into());
                }
                Ok(())
            }
            Node::Loop { slot, lb, ub, body } => {
                let (lb, ub) = (lb.eval(&self.env, self.state)?, ub.eval(&self.env, self.state)?);
                if self.env.len() <= *slot {
                    self.env.resize(slot + 1, 0);
                }
                let mut i = lb;
                while i <= ub {
                    self.env[*slot] = i;
                    for c in body {
                        self.exec(c)?;
                    }
                    i += 1;
                }
                Ok(())
            }
        }
    }
}

/// Runs `nests` in order on `bufs`. An accumulator is zeroed at the first update of each of
/// its elements (the update sets instead of adding), as generated code does. Returns the
/// number of statement instances executed.
pub fn run(state: &State, nests: &[Nest], bufs: &mut Buffers) -> Result<u64, String> {
    run_with(state, nests, bufs, Arith::Values)
}

/// [`run`] computing `arith` instead of the values: the buffers hold, for
/// [`Arith::Magnitude`], the absolute values of the data, for [`Arith::Roundings`], zeros.
pub fn run_with(state: &State, nests: &[Nest], bufs: &mut Buffers, arith: Arith) -> Result<u64, String> {
    let mut total = 0;
    for n in nests {
        // A result stored over its operand (`in_place`): the nest writes the operand's buffer;
        // afterwards the result has those values and the operand its own again, as in a kernel.
        let kept: Vec<(Name, Name, Option<Tensor>)> =
            n.over.iter().map(|(y, x)| (y.clone(), x.clone(), bufs.get(x).cloned())).collect();
        // A tensor with a copy per iteration of a loop (`privatize`): the nest's buffer of
        // copies, its own as a kernel's (the tensor keeps its values).
        let mut own: Vec<(Name, Option<Tensor>)> = Vec::new();
        for t in n.expanded.values().map(|x| &x.buffer) {
            let Some(leaf) = n.leaf(t) else { continue };
            let dims = extents(state, t, &leaf)?;
            own.push((t.clone(), bufs.insert(t.clone(), Tensor::zeros(leaf.dtype, dims))));
        }
        let mut cx = Compiler { state, names: Vec::new(), dims: Vec::new(), slots: Vec::new() };
        let code = n.items().iter().map(|x| cx.node(x, bufs)).collect::<Result<Vec<_>, _>>()?;
        let names = cx.names;
        // Borrow each named buffer mutably once, in compile order.
        let mut taken: Vec<(Name, Tensor)> = names
            .iter()
            .map(|n| (n.clone(), bufs.remove(n).unwrap_or_else(|| Tensor::zeros(DType::Double, vec![]))))
            .collect();
        let result = {
            let data: Vec<&mut Vec<f64>> = taken.iter_mut().map(|(_, t)| &mut t.data).collect();
            macro_rules! machine {
                ($a:expr) => {{
                    let mut m = Machine::<{ $a }> {
                        data,
                        env: Vec::new(),
                        stack: Vec::with_capacity(16),
                        state,
                        count: 0,
                    };
                    code.iter().try_for_each(|c| m.exec(c)).map(|_| m.count)
                }};
            }
            match arith {
                Arith::Values => machine!(0),
                Arith::Magnitude => machine!(1),
                Arith::Roundings => machine!(2),
            }
        };
        for (n, t) in taken {
            bufs.insert(n, t);
        }
        for (y, x, before) in kept {
            if let Some(before) = before
                && let Some(result) = bufs.insert(x, before)
            {
                bufs.insert(y, result);
            }
        }
        for (t, before) in own {
            match before {
                Some(b) => bufs.insert(t, b),
                None => bufs.remove(&t),
            };
        }
        total += result?;
    }
    Ok(total)
}

/// The extents of tensor `name` as its leaf `leaf` declares them, at the named constants' values.
fn extents(state: &State, name: &Name, leaf: &TNode) -> Result<Vec<usize>, String> {
    leaf.extents_at(&|v| state.constant(v)).map_err(|e| match e {
        Some(v) => format!("named constant `{v}` is not bound: give -D {v}=INT"),
        None => format!("the shape of `{name}` is not known"),
    })
}

/// splitmix64: a tiny, stable generator, so that a seed means the same data in every version.
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform values of magnitude in [0.5, 1.5) (an integer type: whole numbers 1 to 8; `u8`
/// only positive) and of either sign: away from zero (divisors), and
/// of both signs, so that sums cancel and a dropped or doubled term shows (docs/verification.md).
/// Seeded per tensor name; the magnitudes are those of [`random_positive_data`].
pub fn random_data(seed: u64, name: &str, n: usize, dtype: DType) -> Vec<f64> {
    seeded(seed, name, n, dtype, true)
}

/// Uniform values in [0.5, 1.5): the seeded fill of a program that needs positive data (a
/// `sqrt`, `log` or `pow`, or a division, whose divisor a cancelling sum could bring near zero).
pub fn random_positive_data(seed: u64, name: &str, n: usize, dtype: DType) -> Vec<f64> {
    seeded(seed, name, n, dtype, false)
}

fn seeded(seed: u64, name: &str, n: usize, dtype: DType, signed: bool) -> Vec<f64> {
    let mut s = seed
        ^ name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    (0..n)
        .map(|_| {
            let r = splitmix(&mut s);
            // An integer type: whole magnitudes 1..=8, never 0 (a dropped term shows).
            let x = if dtype.is_integer() {
                1.0 + ((r >> 11) % 8) as f64
            } else {
                0.5 + (r >> 11) as f64 / (1u64 << 53) as f64
            };
            let x = if signed && r & 1 == 1 && dtype != DType::U8 { -x } else { x };
            dtype.round(x)
        })
        .collect()
}

/// True where the statements of `nests` compute a `sqrt`, `log` or `pow`, divide, or take the
/// `min` or `max` of a sum (a shortest path: negative weights would make its cycles run to
/// -inf): their seeded data is positive ([`random_positive_data`]).
pub fn needs_positive_data<'a>(stmts: impl IntoIterator<Item = &'a crate::ir::TExpr>) -> bool {
    use crate::ir::{Func, Op};
    let mut yes = false;
    for s in stmts {
        s.visit(&mut |t| {
            if matches!(t.op, Op::Div | Op::Call(Func::Sqrt | Func::Log | Func::Pow)) {
                yes = true;
            }
            if matches!(t.op, Op::Call(Func::Min | Func::Max)) {
                for c in &t.children {
                    c.visit(&mut |x| yes |= matches!(x.op, Op::Add | Op::Sub));
                }
            }
        });
    }
    yes
}

/// Makes a tensor's data from its name, element type and extents.
pub type FillFn<'a> = dyn FnMut(&Name, DType, &[usize]) -> Vec<f64> + 'a;

/// Buffers for every real tensor the nests use, filled by `fill(name, dtype, dims)`.
pub fn buffers_for(state: &State, nests: &[Nest], fill: &mut FillFn<'_>) -> Result<Buffers, String> {
    let mut out = Buffers::new();
    for n in nests {
        for s in n.stmts() {
            let mut res = Ok(());
            s.visit(&mut |leaf| {
                let Some(name) = leaf.id() else { return };
                if out.contains_key(name) || res.is_err() {
                    return;
                }
                match extents(state, name, leaf) {
                    Ok(d) => {
                        let data = fill(name, leaf.dtype, &d);
                        out.insert(name.clone(), Tensor { dtype: leaf.dtype, dims: d, data });
                    }
                    Err(e) => res = Err(e),
                }
            });
            res?;
        }
    }
    Ok(out)
}
