//! A second, independent oracle: evaluates assignment statements straight from the meaning of
//! their tensor expressions (Sec. 3-4, eq. 10-26), with no loop nests.
//!
//! The reference interpreter ([`crate::interp`]) runs the untransformed *loop nests*, reading
//! each statement through [`fn@crate::ir::lower`], exactly as code generation does; a defect
//! there is shared by both. This module reads the trees themselves and uses none of
//! `ir::lower`, `flatten`, `analysis::infer` (its extent inference aside) or `interp`'s execution (only its [`Buffers`] type):
//!
//! - an indexed leaf `A[e1]..[en]` denotes one element of `A` (the index maps of eq. 14-15);
//! - `+ - * /` are element-wise (eq. 15-16);
//! - a virtual contraction `Σ[k..](t0 * t1 ..)` is the sum over its iterators of the product
//!   of its children (Sec. 4.2.3), whatever its position in the tree;
//! - an assignment `(=, •, •)[x, y]` (eq. 14, 16-18, 26) defines `x` element by element, for
//!   every instance of its *target iterators* `T` (the variables of `x`'s index list). The
//!   value's other free iterators `E` are summed over when the assignment accumulates
//!   (`x = x + r`, or an accumulator of eq. 33 / of a contraction's sum, which starts from 0);
//!   in a plain assignment the last instance wins (all of `E` at their last values), as the
//!   loops of `build` (eq. 19) would leave it.
//!
//! Every iterator ranges over `0..extent-1` (eq. 19), the extent being that of a dimension it
//! indexes on its own (`A[.., i, ..]`) in some leaf of the statement, the target first; an
//! iterator the target holds at an affine position (`B[i+1]`) ranges as far as every access
//! allows (TeIL's rule, `build`'s inference). `+ - * /` and the scalar functions (`sqrt`,
//! `pow`, `max`, ...) are element-wise. Reads
//! see the values from before the statement (functional semantics); a statement that reads its
//! own target elsewhere than at the element it writes is refused (sequential and functional
//! semantics differ there). Elements that no instance writes keep their values. Everything is
//! computed in `f64`.
//!
//! [`run`] computes whole tensors; [`Spot`] computes single elements of the final values on
//! demand (memoized, within a budget of leaf reads), for spot checks of kernels too large to
//! interpret. Both go through one per-element function.

use crate::interp::{Buffers, Tensor};
use crate::ir::{AssignMode, DType, Dim, Expr, Iters, Name, Op, State, TExpr, TNode};
use std::collections::{BTreeMap, HashMap};
mod compile;
use compile::*;

/// Why the oracle gave no value.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum OracleError {
    /// A statement whose meaning the oracle does not define (in-place reads at other
    /// elements, targets indexed other than by `iterator + constant`, unfilled holes...).
    #[error("not supported by the oracle: {0}")]
    Unsupported(String),
    /// [`Spot`] read more leaves than its budget allows (the budget is given).
    #[error("the oracle's budget of {0} leaf reads is spent")]
    Budget(u64),
    /// Missing or ill-shaped data, unbound named constants, out-of-bounds accesses.
    #[error("{0}")]
    Data(String),
}

type Res<T> = Result<T, OracleError>;

fn data<T>(msg: String) -> Res<T> {
    Err(OracleError::Data(msg))
}

fn unsupported<T>(msg: String) -> Res<T> {
    Err(OracleError::Unsupported(msg))
}

/// An affine index over iterator slots, named constants folded in: `c + Σ coef * slot`.
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

#[derive(Clone, Copy, Debug)]
enum Bin {
    Add,
    Sub,
    Mul,
    Div,
}

/// A value tree ready to evaluate.
#[derive(Clone, Debug)]
enum Node {
    Lit(f64),
    /// One element of a tensor (eq. 14-15's index map).
    Read {
        tensor: Name,
        access: String,
        dims: Vec<usize>,
        idx: Vec<Lin>,
    },
    Bin(Bin, Box<Node>, Box<Node>),
    /// A scalar function of its operands.
    Call(crate::ir::Func, Vec<Node>),
    /// A contraction: the sum over the slots of the product of the factors.
    Sum {
        over: Vec<usize>,
        factors: Vec<Node>,
    },
}

/// How an assignment combines its instances.
#[derive(Clone, Debug)]
enum Form {
    /// `x = x + r`: the old value (0 for an accumulator) plus `r` summed over `E`.
    Onto { zeroed: bool, r: Node },
    /// An accumulator: the value summed over `E`, from 0.
    Sum(Node),
    /// A plain assignment: the value with `E` at their last values.
    Last(Node),
}

/// One assignment, compiled.
#[derive(Clone, Debug)]
struct Stmt {
    text: String,
    target: Name,
    dtype: DType,
    dims: Vec<usize>,
    /// Per target dimension: the iterator's slot and the constant offset (`i + c`).
    at: Vec<(usize, i64)>,
    /// Extent of every slot.
    extents: Vec<i64>,
    /// The extra iterators `E`: free in the value, absent from the target.
    extra: Vec<usize>,
    form: Form,
    /// Every tensor read, with the extents the leaf gives it.
    reads: Vec<(Name, Vec<usize>)>,
}

fn dims_of(state: &State, leaf: &TNode) -> Res<Vec<usize>> {
    let name = leaf.id().map(|n| n.to_string()).unwrap_or_else(|| "□".into());
    leaf.extents_at(&|v| state.constant(v)).or_else(|e| match e {
        Some(v) => data(format!("named constant `{v}` in the shape of `{name}` is not bound")),
        None => data(format!("the shape of `{name}` is not known")),
    })
}

/// The values a statement reads: `read(U, k)` is element `k` (row-major) of tensor `U` as it
/// was before the statement.
trait Reader {
    fn read(&mut self, tensor: &Name, lin: usize) -> Res<f64>;
}

/// A summand: evaluated at the iterator values `env`, reading through the reader.
type Body<'a> = dyn FnMut(&mut [i64], &mut dyn Reader) -> Res<f64> + 'a;

/// Sums `body` over every point of the box of `over` (each slot in `0..extent`).
fn sum_box(
    over: &[usize],
    ext: &[i64],
    env: &mut [i64],
    rd: &mut dyn Reader,
    body: &mut Body<'_>,
) -> Res<f64> {
    if over.iter().any(|s| ext[*s] <= 0) {
        return Ok(0.0);
    }
    for &s in over {
        env[s] = 0;
    }
    let mut acc = 0.0;
    loop {
        acc += body(env, rd)?;
        let mut k = over.len();
        loop {
            if k == 0 {
                return Ok(acc);
            }
            k -= 1;
            env[over[k]] += 1;
            if env[over[k]] < ext[over[k]] {
                break;
            }
            env[over[k]] = 0;
        }
    }
}

fn eval(n: &Node, ext: &[i64], env: &mut [i64], rd: &mut dyn Reader) -> Res<f64> {
    match n {
        Node::Lit(x) => Ok(*x),
        Node::Read { tensor, access, dims, idx } => {
            let mut lin = 0usize;
            for (d, l) in dims.iter().zip(idx) {
                let i = l.eval(env);
                if i < 0 || i >= *d as i64 {
                    return data(format!("{access} reads index {i} of a dimension of extent {d}"));
                }
                lin = lin * d + i as usize;
            }
            rd.read(tensor, lin)
        }
        Node::Bin(op, a, b) => {
            let (a, b) = (eval(a, ext, env, rd)?, eval(b, ext, env, rd)?);
            Ok(match op {
                Bin::Add => a + b,
                Bin::Sub => a - b,
                Bin::Mul => a * b,
                Bin::Div => a / b,
            })
        }
        Node::Call(f, args) => {
            let vals = args.iter().map(|x| eval(x, ext, env, rd)).collect::<Res<Vec<f64>>>()?;
            Ok(f.eval(&vals))
        }
        Node::Sum { over, factors } => sum_box(over, ext, env, rd, &mut |env, rd| {
            let mut p = 1.0;
            for (k, f) in factors.iter().enumerate() {
                let v = eval(f, ext, env, rd)?;
                p = if k == 0 { v } else { p * v };
            }
            Ok(p)
        }),
    }
}

/// The one per-element evaluation [`run`] and [`Spot`] share: the value of the statement's
/// target at `idx` (row-major offset `lin`) after the statement, as its tensor holds it: rounded
/// to `float` or a 16-bit float, an integer truncated and wrapped (`DType::round`, as the
/// interpreter and the C store it: `i8 + 1.5` into an i32 of -3 + 1.5 is -1).
fn element(st: &Stmt, idx: &[usize], lin: usize, rd: &mut dyn Reader) -> Res<f64> {
    let v = element_exact(st, idx, lin, rd)?;
    Ok(st.dtype.round(v))
}

fn element_exact(st: &Stmt, idx: &[usize], lin: usize, rd: &mut dyn Reader) -> Res<f64> {
    let mut env = vec![0i64; st.extents.len()];
    for (&(slot, c), &e) in st.at.iter().zip(idx) {
        let v = e as i64 - c;
        if v < 0 || v >= st.extents[slot] {
            return rd.read(&st.target, lin); // no instance writes this element
        }
        env[slot] = v;
    }
    if st.extra.iter().any(|s| st.extents[*s] <= 0) {
        return rd.read(&st.target, lin);
    }
    let ext = &st.extents;
    match &st.form {
        Form::Onto { zeroed, r } => {
            let base = if *zeroed { 0.0 } else { rd.read(&st.target, lin)? };
            let s = sum_box(&st.extra, ext, &mut env, rd, &mut |env, rd| eval(r, ext, env, rd))?;
            Ok(base + s)
        }
        Form::Sum(y) => sum_box(&st.extra, ext, &mut env, rd, &mut |env, rd| eval(y, ext, env, rd)),
        Form::Last(y) => {
            for &s in &st.extra {
                env[s] = ext[s] - 1;
            }
            eval(y, ext, &mut env, rd)
        }
    }
}

fn unravel(mut lin: usize, dims: &[usize], idx: &mut [usize]) {
    for (i, d) in idx.iter_mut().zip(dims).rev() {
        *i = lin % d;
        lin /= d;
    }
}

struct BufReader<'a>(&'a Buffers);

impl Reader for BufReader<'_> {
    fn read(&mut self, tensor: &Name, lin: usize) -> Res<f64> {
        let t =
            self.0.get(tensor).ok_or_else(|| OracleError::Data(format!("no data for tensor `{tensor}`")))?;
        t.data.get(lin).copied().ok_or_else(|| OracleError::Data(format!("`{tensor}` has no element {lin}")))
    }
}

/// Runs the assignments `stmts` in order on `bufs`, each from the meaning of its tree. The
/// tensors they read must be present; those they write are created (zero-filled, with the
/// target leaf's shape under the state's named constants) when absent.
pub fn run(state: &State, stmts: &[TExpr], bufs: &mut Buffers) -> Result<(), OracleError> {
    let known = bufs.iter().map(|(n, t)| (n.clone(), t.dims.clone())).collect();
    for st in compile_all(state, stmts, known)? {
        bufs.entry(st.target.clone()).or_insert_with(|| Tensor::zeros(st.dtype, st.dims.clone()));
        let n: usize = st.dims.iter().product();
        let mut idx = vec![0usize; st.dims.len()];
        let mut out = Vec::with_capacity(n);
        let mut rd = BufReader(bufs);
        for lin in 0..n {
            unravel(lin, &st.dims, &mut idx);
            out.push(element(&st, &idx, lin, &mut rd)?);
        }
        if let Some(t) = bufs.get_mut(&st.target) {
            t.data = out;
        }
    }
    Ok(())
}

struct Memo<'a> {
    initial: &'a Buffers,
    values: HashMap<(usize, usize), f64>,
    budget: u64,
    reads: u64,
}

/// Element `lin` of `tensor` as statement `s` reads it: after the last statement before `s`
/// that writes it, else the initial data (0 for `s`'s own target when it has none).
fn before(stmts: &[Stmt], m: &mut Memo, s: usize, tensor: &Name, lin: usize) -> Res<f64> {
    match stmts[..s].iter().rposition(|t| t.target == *tensor) {
        Some(t) => after(stmts, m, t, lin),
        None => match m.initial.get(tensor) {
            Some(t) => t
                .data
                .get(lin)
                .copied()
                .ok_or_else(|| OracleError::Data(format!("`{tensor}` has no element {lin}"))),
            None if stmts.get(s).is_some_and(|st| st.target == *tensor) => Ok(0.0),
            None => data(format!("no data for tensor `{tensor}`")),
        },
    }
}

/// Element `lin` of statement `t`'s target right after it, memoized.
fn after(stmts: &[Stmt], m: &mut Memo, t: usize, lin: usize) -> Res<f64> {
    if let Some(v) = m.values.get(&(t, lin)) {
        return Ok(*v);
    }
    let st = &stmts[t];
    let mut idx = vec![0usize; st.dims.len()];
    unravel(lin, &st.dims, &mut idx);
    let v = element(st, &idx, lin, &mut SpotReader { stmts, m, s: t })?;
    m.values.insert((t, lin), v);
    Ok(v)
}

struct SpotReader<'a, 'b> {
    stmts: &'a [Stmt],
    m: &'a mut Memo<'b>,
    s: usize,
}

impl Reader for SpotReader<'_, '_> {
    fn read(&mut self, tensor: &Name, lin: usize) -> Res<f64> {
        self.m.reads += 1;
        if self.m.reads > self.m.budget {
            return Err(OracleError::Budget(self.m.budget));
        }
        before(self.stmts, self.m, self.s, tensor, lin)
    }
}

/// Single elements of the final values, computed on demand from the initial data without
/// computing whole tensors: an element of an `N x N` matrix product costs `N` products.
/// Statements reading earlier statements' results recurse into them, memoized per
/// (statement, element), so chains stay polynomial. The budget bounds the leaf reads over the
/// whole life of the `Spot` (memoized values are reused across calls).
pub struct Spot<'a> {
    compiled: Res<Vec<Stmt>>,
    memo: Memo<'a>,
}

impl<'a> Spot<'a> {
    /// Prepares to evaluate `stmts` (in order) from `initial`, reading at most `budget` leaves.
    pub fn new(state: &'a State, stmts: &'a [TExpr], initial: &'a Buffers, budget: u64) -> Spot<'a> {
        let known = initial.iter().map(|(n, t)| (n.clone(), t.dims.clone())).collect();
        Spot {
            compiled: compile_all(state, stmts, known),
            memo: Memo { initial, values: HashMap::new(), budget, reads: 0 },
        }
    }

    /// The value of `tensor` at `idx` after every statement.
    pub fn element(&mut self, tensor: &str, idx: &[usize]) -> Result<f64, OracleError> {
        let stmts = self.compiled.as_ref().map_err(Clone::clone)?;
        let name: Name = Name::from(tensor);
        let dims = match stmts.iter().rev().find(|s| s.target == name) {
            Some(s) => &s.dims,
            None => match self.memo.initial.get(&name) {
                Some(t) => &t.dims,
                None => return data(format!("no tensor `{tensor}`")),
            },
        };
        if idx.len() != dims.len() || idx.iter().zip(dims).any(|(i, d)| i >= d) {
            return data(format!("index {idx:?} is outside `{tensor}` of extents {dims:?}"));
        }
        let lin = idx.iter().zip(dims).fold(0, |acc, (i, d)| acc * d + i);
        before(stmts, &mut self.memo, stmts.len(), &name, lin)
    }

    /// Leaf reads so far.
    pub fn reads(&self) -> u64 {
        self.memo.reads
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Shape, TNode};

    fn ix(s: &str) -> Expr {
        match s.split_once('+') {
            Some((v, c)) => Expr::var(v).add_int(c.parse().unwrap()),
            None => match s.parse::<i64>() {
                Ok(c) => Expr::int(c),
                Err(_) => Expr::var(s),
            },
        }
    }

    fn leaf(name: &str, dims: &[i64], idx: &[&str]) -> TExpr {
        TNode::leaf(
            Op::Id(Name::from(name)),
            Shape::known(dims.iter().map(|d| Expr::int(*d)).collect()),
            Iters::List(idx.iter().map(|s| ix(s)).collect()),
            DType::Double,
        )
    }

    fn bin(op: Op, a: TExpr, b: TExpr) -> TExpr {
        TNode::node(op, Shape::Dims(vec![]), vec![a, b])
    }

    fn contract(ks: &[&str], a: TExpr, b: TExpr) -> TExpr {
        TNode::node(
            Op::Contract(ks.iter().map(|k| Name::from(*k)).collect()),
            Shape::Dims(vec![]),
            vec![a, b],
        )
    }

    fn assign(mode: AssignMode, x: TExpr, y: TExpr) -> TExpr {
        TNode::node(Op::Assign(mode), Shape::Bullet, vec![x, y])
    }

    fn tensor(dims: &[usize], f: impl Fn(usize) -> f64) -> Tensor {
        let n = dims.iter().product();
        Tensor { dtype: DType::Double, dims: dims.to_vec(), data: (0..n).map(f).collect() }
    }

    fn bufs(ts: Vec<(&str, Tensor)>) -> Buffers {
        ts.into_iter().map(|(n, t)| (Name::from(n), t)).collect()
    }

    #[test]
    fn elementwise_and_transpose() {
        // C[i][j] = A[i][j] * B[j][i] - 1
        let s = assign(
            AssignMode::Plain,
            leaf("C", &[2, 3], &["i", "j"]),
            bin(
                Op::Sub,
                bin(Op::Mul, leaf("A", &[2, 3], &["i", "j"]), leaf("B", &[3, 2], &["j", "i"])),
                TNode::leaf(Op::Lit(1.0), Shape::Dims(vec![]), Iters::Bullet, DType::Double),
            ),
        );
        let mut b =
            bufs(vec![("A", tensor(&[2, 3], |k| k as f64)), ("B", tensor(&[3, 2], |k| 10.0 + k as f64))]);
        run(&State::new(), &[s], &mut b).unwrap();
        let c = &b["C"];
        assert_eq!(c.dims, vec![2, 3]);
        for i in 0..2 {
            for j in 0..3 {
                let want = (i * 3 + j) as f64 * (10.0 + (j * 2 + i) as f64) - 1.0;
                assert_eq!(c.data[i * 3 + j], want);
            }
        }
    }

    fn matmul(n: i64) -> TExpr {
        assign(
            AssignMode::Accumulator,
            leaf("C", &[n, n], &["i", "j"]),
            contract(&["k"], leaf("A", &[n, n], &["i", "k"]), leaf("B", &[n, n], &["k", "j"])),
        )
    }

    #[test]
    fn contraction_is_a_matrix_product() {
        let mut b = bufs(vec![
            ("A", tensor(&[3, 3], |k| k as f64)),
            ("B", tensor(&[3, 3], |k| 1.0 + k as f64)),
            ("C", tensor(&[3, 3], |_| 99.0)),
        ]);
        run(&State::new(), &[matmul(3)], &mut b).unwrap();
        for i in 0..3 {
            for j in 0..3 {
                let want: f64 = (0..3).map(|k| (i * 3 + k) as f64 * (1.0 + (k * 3 + j) as f64)).sum();
                assert_eq!(b["C"].data[i * 3 + j], want);
            }
        }
    }

    #[test]
    fn accumulate_onto_sums_extra_iterators() {
        // y[i] = y[i] + A[i][j]: plain, onto the old value; j summed.
        let s = assign(
            AssignMode::Plain,
            leaf("y", &[2], &["i"]),
            bin(Op::Add, leaf("y", &[2], &["i"]), leaf("A", &[2, 3], &["i", "j"])),
        );
        let init = bufs(vec![("A", tensor(&[2, 3], |k| k as f64)), ("y", tensor(&[2], |_| 100.0))]);
        let mut b = init.clone();
        run(&State::new(), std::slice::from_ref(&s), &mut b).unwrap();
        assert_eq!(b["y"].data, vec![103.0, 112.0]);
        // The same as an accumulator (eq. 33): zeroed first.
        let acc = assign(AssignMode::Accumulator, s.children[0].clone(), s.children[1].clone());
        let mut b = init;
        run(&State::new(), &[acc], &mut b).unwrap();
        assert_eq!(b["y"].data, vec![3.0, 12.0]);
    }

    #[test]
    fn plain_assignment_keeps_the_last_instance() {
        // B[j] = A[i][j]: the loops leave i at its last value.
        let s = assign(AssignMode::Plain, leaf("B", &[3], &["j"]), leaf("A", &[2, 3], &["i", "j"]));
        let mut b = bufs(vec![("A", tensor(&[2, 3], |k| k as f64))]);
        run(&State::new(), &[s], &mut b).unwrap();
        assert_eq!(b["B"].data, vec![3.0, 4.0, 5.0]);
    }

    #[test]
    fn in_place_reads_elsewhere_are_unsupported() {
        let s = assign(AssignMode::Plain, leaf("A", &[2, 2], &["i", "j"]), leaf("A", &[2, 2], &["j", "i"]));
        let mut b = bufs(vec![("A", tensor(&[2, 2], |k| k as f64))]);
        let e = run(&State::new(), &[s], &mut b).unwrap_err();
        assert!(matches!(e, OracleError::Unsupported(ref m) if m.contains("in place")), "{e}");
        // At the same element, without sums, it is fine: A[i][j] = A[i][j] * A[i][j].
        let s = assign(
            AssignMode::Plain,
            leaf("A", &[2, 2], &["i", "j"]),
            bin(Op::Mul, leaf("A", &[2, 2], &["i", "j"]), leaf("A", &[2, 2], &["i", "j"])),
        );
        run(&State::new(), std::slice::from_ref(&s), &mut b).unwrap();
        assert_eq!(b["A"].data, vec![0.0, 1.0, 4.0, 9.0]);
        // ... but not in an accumulator, which reads it zeroed.
        let acc = assign(AssignMode::Accumulator, s.children[0].clone(), s.children[1].clone());
        assert!(matches!(run(&State::new(), &[acc], &mut b), Err(OracleError::Unsupported(_))));
    }

    #[test]
    fn partial_target_keeps_unwritten_elements() {
        // B[i+1] = A[i] * 2 over i in 0..3: B[0] keeps its value.
        let s = assign(
            AssignMode::Plain,
            leaf("B", &[4], &["i+1"]),
            bin(
                Op::Mul,
                leaf("A", &[3], &["i"]),
                TNode::leaf(Op::Lit(2.0), Shape::Dims(vec![]), Iters::Bullet, DType::Double),
            ),
        );
        let mut b = bufs(vec![("A", tensor(&[3], |k| k as f64 + 1.0)), ("B", tensor(&[4], |_| -1.0))]);
        run(&State::new(), std::slice::from_ref(&s), &mut b).unwrap();
        assert_eq!(b["B"].data, vec![-1.0, 2.0, 4.0, 6.0]);
        // A target index that is not `iterator + constant` is refused.
        let s2 = assign(AssignMode::Plain, leaf("B", &[4], &["0"]), leaf("A", &[3], &["i"]));
        assert!(matches!(run(&State::new(), &[s2], &mut b), Err(OracleError::Unsupported(_))));
        // The target's position bounds the range as `build` does (TeIL's rules): B[i+1] of
        // extent 3 runs i over 0..1 though A[i] has 3 elements; nothing is written past the end.
        let s3 = assign(AssignMode::Plain, leaf("B", &[3], &["i+1"]), leaf("A", &[3], &["i"]));
        let mut b = bufs(vec![("A", tensor(&[3], |k| k as f64 + 1.0)), ("B", tensor(&[3], |_| -1.0))]);
        run(&State::new(), &[s3], &mut b).unwrap();
        assert_eq!(b["B"].data, vec![-1.0, 1.0, 2.0]);
    }

    #[test]
    fn spot_on_a_chain_equals_run() {
        // C = A x B, then D[i][j] = C[i][j] + C[j][i], then C = C + D (onto).
        let n = 4;
        let s1 = matmul(n);
        let s2 = assign(
            AssignMode::Plain,
            leaf("D", &[n, n], &["i", "j"]),
            bin(Op::Add, leaf("C", &[n, n], &["i", "j"]), leaf("C", &[n, n], &["j", "i"])),
        );
        let s3 = assign(
            AssignMode::Plain,
            leaf("C", &[n, n], &["i", "j"]),
            bin(Op::Add, leaf("C", &[n, n], &["i", "j"]), leaf("D", &[n, n], &["j", "i"])),
        );
        let stmts = vec![s1, s2, s3];
        let init = bufs(vec![
            ("A", tensor(&[4, 4], |k| 0.5 + k as f64)),
            ("B", tensor(&[4, 4], |k| 1.0 / (1.0 + k as f64))),
        ]);
        let mut full = init.clone();
        run(&State::new(), &stmts, &mut full).unwrap();
        let st = State::new();
        let mut spot = Spot::new(&st, &stmts, &init, 1_000_000);
        for t in ["C", "D", "A"] {
            for i in 0..4 {
                for j in 0..4 {
                    let v = spot.element(t, &[i, j]).unwrap();
                    assert_eq!(v, full[t].data[i * 4 + j], "{t}[{i}][{j}]");
                }
            }
        }
        assert!(spot.element("C", &[4, 0]).is_err());
        assert!(spot.element("Q", &[0, 0]).is_err());
    }

    #[test]
    fn spot_budget_is_enforced() {
        let stmts = vec![matmul(50)];
        let init = bufs(vec![("A", tensor(&[50, 50], |_| 1.0)), ("B", tensor(&[50, 50], |_| 2.0))]);
        let st = State::new();
        let mut spot = Spot::new(&st, &stmts, &init, 150);
        assert_eq!(spot.element("C", &[3, 7]), Ok(100.0));
        assert_eq!(spot.reads(), 100);
        assert_eq!(spot.element("C", &[3, 7]), Ok(100.0)); // memoized: no reads
        assert_eq!(spot.element("C", &[4, 7]), Err(OracleError::Budget(150)));
    }

    #[test]
    fn iterators_without_a_plain_dimension_are_refused() {
        // B[i] = A[i + j]: j indexes nothing on its own.
        let a = leaf("A", &[6], &["i"]).with_iters(Iters::List(vec![Expr::var("i").add(&Expr::var("j"))]));
        let s = assign(AssignMode::Plain, leaf("B", &[3], &["i"]), a);
        let mut b = bufs(vec![("A", tensor(&[6], |k| k as f64))]);
        assert!(matches!(run(&State::new(), &[s], &mut b), Err(OracleError::Unsupported(_))));
    }
}
