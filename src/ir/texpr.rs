//! Tensor-expression trees (Sec. 3.1, eq. 1): nodes `(op, shape, iters)`.
//!
//! Leaves are identifiers (real tensors and scalars), the hole `□` that an assignment fills
//! in (eq. 17-18), or numeric literals. Inner nodes are the arithmetic operations, the virtual
//! contraction of Sec. 4.2.3, and the assignment `(=, •, •)`. Trees are immutable and shared
//! through [`Arc`]; every operation returns a new tree.

pub use super::dtype::DType;
use super::expr::{Expr, Name};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// A shared, immutable tensor-expression tree.
pub type TExpr = Arc<TNode>;

/// How an assignment writes its target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum AssignMode {
    /// `x = y`, exactly as eq. 14 says; `A = add(A, t, ..)` accumulates onto what `A` held.
    #[default]
    Plain,
    /// The target is an accumulator that a contraction introduces (eq. 33, or an assignment
    /// of a `vcontract`): it is zeroed at the first update of each element (see `analysis::zeroing`).
    Accumulator,
}

/// The `op` component of a node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// `□`: the placeholder that `P_stmt` fills with an identifier (eq. 17-18).
    Hole,
    /// A real tensor or scalar.
    Id(Name),
    /// A numeric literal used as a scalar operand (extension).
    Lit(f64),
    /// `(=, •, •)`: assignment of the second child to the first.
    Assign(AssignMode),
    /// Element-wise `+`.
    Add,
    /// Element-wise `-`.
    Sub,
    /// Element-wise `*`.
    Mul,
    /// Element-wise `/`.
    Div,
    /// Virtual contraction (Sec. 4.2.3): the sum over the named iterators of the product of
    /// the children. Fundamental: it has no accumulator of its own.
    Contract(Vec<Name>),
    /// An element-wise scalar function of the children (extension: `sqrt`, `pow`, `max`, ...).
    Call(Func),
}

/// A scalar function applied element-wise (the math of PolyBench's kernels: `sqrt` in
/// correlation and cholesky, `exp` and `pow` in deriche, `min` in floyd-warshall, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Func {
    /// `sqrt(x)`
    Sqrt,
    /// `exp(x)`
    Exp,
    /// `log(x)` (natural)
    Log,
    /// `abs(x)`
    Abs,
    /// `pow(x, y)`
    Pow,
    /// `min(x, y)`
    Min,
    /// `max(x, y)`
    Max,
    /// `x < y` (1 or 0)
    Lt,
    /// `x <= y` (1 or 0)
    Le,
    /// `x > y` (1 or 0)
    Gt,
    /// `x >= y` (1 or 0)
    Ge,
    /// `x == y` (1 or 0)
    Eq,
    /// `x != y` (1 or 0)
    Ne,
    /// `c != 0 ? x : y`
    Select,
}

impl Func {
    /// Every function, unary ones first.
    pub const ALL: [Func; 7] = [Func::Sqrt, Func::Exp, Func::Log, Func::Abs, Func::Pow, Func::Min, Func::Max];

    /// The comparisons, with their C operators.
    pub const COMPARISONS: [(Func, &'static str); 6] = [
        (Func::Lt, "<"),
        (Func::Le, "<="),
        (Func::Gt, ">"),
        (Func::Ge, ">="),
        (Func::Eq, "=="),
        (Func::Ne, "!="),
    ];

    /// The C operator of a comparison.
    pub fn operator(self) -> Option<&'static str> {
        Func::COMPARISONS.iter().find(|(f, _)| *f == self).map(|(_, o)| *o)
    }

    /// The name the builtins and the printed expressions use.
    pub fn name(self) -> &'static str {
        match self {
            Func::Sqrt => "sqrt",
            Func::Exp => "exp",
            Func::Log => "log",
            Func::Abs => "abs",
            Func::Pow => "pow",
            Func::Min => "min",
            Func::Max => "max",
            Func::Lt => "lt",
            Func::Le => "le",
            Func::Gt => "gt",
            Func::Ge => "ge",
            Func::Eq => "eq",
            Func::Ne => "ne",
            Func::Select => "select",
        }
    }

    /// How many operands it takes.
    pub fn arity(self) -> usize {
        match self {
            Func::Sqrt | Func::Exp | Func::Log | Func::Abs => 1,
            Func::Select => 3,
            _ => 2,
        }
    }

    /// Its value on `args` (as many as its arity), as C computes it in double (`<math.h>`).
    pub fn eval(self, args: &[f64]) -> f64 {
        let at = |k: usize| args.get(k).copied().unwrap_or(0.0);
        let (a, b) = (at(0), at(1));
        let truth = |t: bool| if t { 1.0 } else { 0.0 };
        match self {
            Func::Sqrt => a.sqrt(),
            Func::Exp => a.exp(),
            Func::Log => a.ln(),
            Func::Abs => a.abs(),
            Func::Pow => a.powf(b),
            Func::Min => a.min(b),
            Func::Max => a.max(b),
            Func::Lt => truth(a < b),
            Func::Le => truth(a <= b),
            Func::Gt => truth(a > b),
            Func::Ge => truth(a >= b),
            Func::Eq => truth(a == b),
            Func::Ne => truth(a != b),
            Func::Select => {
                if a != 0.0 {
                    b
                } else {
                    at(2)
                }
            }
        }
    }

    /// The C function of `<math.h>` for the element type: `sqrt`, `sqrtf`, `fabs`, `fmin`, ...
    pub fn c_name(self, dtype: DType) -> String {
        let base = match self {
            Func::Abs => "fabs",
            Func::Min => "fmin",
            Func::Max => "fmax",
            f => f.name(),
        };
        if dtype == DType::Float { format!("{base}f") } else { base.to_string() }
    }
}

impl Op {
    /// The symbol the paper's figures use for the node.
    pub fn symbol(&self) -> String {
        match self {
            Op::Hole => "□".into(),
            Op::Id(n) => n.to_string(),
            Op::Lit(x) => fmt_lit(*x),
            Op::Assign(_) => "=".into(),
            Op::Add => "+".into(),
            Op::Sub => "-".into(),
            Op::Mul => "*".into(),
            Op::Div => "/".into(),
            Op::Contract(ks) => format!("Σ[{}]", join(ks)),
            Op::Call(f) => f.name().into(),
        }
    }

    /// True for the arithmetic operations `+ - * /` and the scalar functions (one
    /// floating-point operation each, as the flop counts go).
    pub fn is_arith(&self) -> bool {
        matches!(self, Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Call(_))
    }
}

/// Prints a literal so that it reads back as the same `f64` and is valid C.
pub fn fmt_lit(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 { format!("{x:.1}") } else { format!("{x:?}") }
}

fn join<T: fmt::Display>(xs: &[T]) -> String {
    xs.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
}

/// One extent of a shape: known (an affine expression in named constants) or not yet
/// inferable (`?`, e.g. an iterator that appears only inside `h+kh`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Dim {
    /// A known extent.
    Known(Expr),
    /// Not inferable from this subtree alone.
    Unknown,
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Known(e) => write!(f, "{e}"),
            Dim::Unknown => f.write_str("?"),
        }
    }
}

/// The `shape` component: a list of extents, or `•` for assignments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Shape {
    /// `•`: assignments have no shape.
    Bullet,
    /// A list of extents (`[]` for scalars).
    Dims(Vec<Dim>),
}

impl Shape {
    /// A shape of known extents.
    pub fn known(dims: Vec<Expr>) -> Shape {
        Shape::Dims(dims.into_iter().map(Dim::Known).collect())
    }

    /// The extents, if this is not `•`.
    pub fn dims(&self) -> Option<&[Dim]> {
        match self {
            Shape::Bullet => None,
            Shape::Dims(d) => Some(d),
        }
    }

    /// The rank (0 for `•`).
    pub fn rank(&self) -> usize {
        self.dims().map_or(0, |d| d.len())
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::Bullet => f.write_str("•"),
            Shape::Dims(d) => write!(f, "[{}]", join(d)),
        }
    }
}

/// The `iters` component: unset (ε), none (•) or a list of index expressions. The three are
/// distinct: ε ≠ [] and ε ≠ • (Sec. 3.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Iters {
    /// ε: a declared tensor not yet indexed.
    Unset,
    /// •: operations, assignments and scalars take no iterators.
    Bullet,
    /// A list of index expressions.
    List(Vec<Expr>),
}

impl fmt::Display for Iters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Iters::Unset => f.write_str("ε"),
            Iters::Bullet => f.write_str("•"),
            Iters::List(xs) => write!(f, "[{}]", join(xs)),
        }
    }
}

/// Where a statement placed in a loop nest comes from: which of the nest's origin assignments
/// it runs, and at which of that assignment's instances (the values of the iterators of the
/// nest `build` gave it, eq. 19), as expressions in the loops now around it. Transformations
/// carry it along: unrolling and renaming substitute into `at` like into every index, and
/// fusion renumbers `origin`. Legality analysis maps each statement of a transformed nest back
/// to the original instances through it; an accumulator's first update is where its
/// reduction coordinates are all 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    /// Position among the nest's origin assignments ([`crate::ir::Nest::origin`]).
    pub origin: usize,
    /// The original iterators, in the loop order `build` chose.
    pub iters: Vec<Name>,
    /// Their upper bounds in the untransformed nest (every range starts at 0), in the named
    /// constants: the statement's iteration domain.
    #[serde(default)]
    pub ubs: Vec<Expr>,
    /// Their values at this statement, in terms of the loops around it.
    pub at: Vec<Expr>,
    /// Which of them the statement sums over (they do not index its target).
    pub reduction: Vec<bool>,
    /// Conditions `g >= 0` in the loops around it: the statement runs only where all hold.
    /// Empty unless `unroll` expanded a loop whose trip count is bounded but not constant
    /// (the last, partial block of a strip-mine): each copy runs where its value is in range.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guard: Vec<Expr>,
}

/// A node `(op, shape, iters)` with its children.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TNode {
    /// Operation or identifier.
    pub op: Op,
    /// Shape of the expression.
    pub shape: Shape,
    /// Iterator list (leaves only; `•` on inner nodes).
    pub iters: Iters,
    /// Element type (of the tensor for leaves; the promoted type for inner nodes).
    pub dtype: DType,
    /// Sub-trees.
    pub children: Vec<TExpr>,
    /// For an assignment placed in a nest by `build`: the original instances it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inst: Option<Arc<Instance>>,
    /// For an assignment: the iteration domain its user gave (`build(s, ranges)`, `around`),
    /// where it is not eq. 19's inference alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dom: Option<Arc<Domain>>,
    /// For an assignment an algebraic rewrite made (`factor`, `expand`): which, and the
    /// assignment as the program wrote it (its target a hole too), which verification runs
    /// instead (docs/algebra.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Arc<Before>>,
}

/// The assignment an algebraic rewrite replaced ([`TNode::before`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Before {
    /// The builtin that rewrote it last (`factor`, `expand`).
    pub by: String,
    /// The assignment as written, before the first rewrite of a chain (`expand(factor(Y))`
    /// keeps `Y`).
    pub t: TExpr,
}

/// An assignment's iteration domain where it differs from eq. 19's (every range `0..extent-1`,
/// one loop per iterator): ranges with affine bounds in outer iterators and named constants,
/// backward ranges, and iterators bound by a loop around a sequence (`around`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Domain {
    /// Ranges given explicitly, by iterator (the others are inferred, eq. 19).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<Range>,
    /// Iterators the statement uses that no loop of its own binds: a loop around the sequence
    /// it belongs to must (`around`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub free: Vec<Name>,
    /// Iterators bound by loops around the sequence the statement belongs to, outermost first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outer: Vec<Name>,
}

/// An explicit range `iter = lb..ub` (inclusive), run upwards or, `backward`, from `ub` down.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Range {
    /// The iterator.
    pub iter: Name,
    /// Lower bound: affine in outer iterators and named constants.
    pub lb: Expr,
    /// Upper bound (inclusive): affine in outer iterators and named constants.
    pub ub: Expr,
    /// Runs from `ub` down to `lb`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub backward: bool,
}

impl Range {
    /// `[j, 0, i-1]`, `[i, N-1, 0, -1]` (as written in a program).
    pub fn describe(&self) -> String {
        if self.backward {
            format!("[{}, {}, {}, -1]", self.iter, self.ub, self.lb)
        } else {
            format!("[{}, {}, {}]", self.iter, self.lb, self.ub)
        }
    }
}

impl Domain {
    /// The explicit range of `v`, if any.
    pub fn range(&self, v: &str) -> Option<&Range> {
        self.ranges.iter().find(|r| &*r.iter == v)
    }

    /// True where nothing differs from eq. 19.
    pub fn is_plain(&self) -> bool {
        self.ranges.is_empty() && self.free.is_empty() && self.outer.is_empty()
    }
}

impl TNode {
    /// A leaf.
    pub fn leaf(op: Op, shape: Shape, iters: Iters, dtype: DType) -> TExpr {
        Arc::new(TNode { op, shape, iters, dtype, children: Vec::new(), inst: None, dom: None, before: None })
    }

    /// An inner node; its iterator list is `•` and its type the promotion of its children
    /// ([`DType::promote`]; literals adapt: a literal alone is double). A comparison or a
    /// select of integers stays integer.
    pub fn node(op: Op, shape: Shape, children: Vec<TExpr>) -> TExpr {
        let dtype = children
            .iter()
            .filter(|c| !c.is_lit())
            .map(|c| c.dtype)
            .reduce(DType::promote)
            .map_or(DType::Double, DType::compute);
        Arc::new(TNode {
            op,
            shape,
            iters: Iters::Bullet,
            dtype,
            children,
            inst: None,
            dom: None,
            before: None,
        })
    }

    /// The extents of this leaf's shape at the named constants' values (`constant`), or the
    /// named constant that is unbound (`Some`), or `None` where the shape is not known.
    pub fn extents_at(&self, constant: &dyn Fn(&str) -> Option<i64>) -> Result<Vec<usize>, Option<Name>> {
        self.shape
            .dims()
            .unwrap_or(&[])
            .iter()
            .map(|d| match d {
                Dim::Known(e) => e.eval(constant).map(|x| x.max(0) as usize).map_err(Some),
                Dim::Unknown => Err(None),
            })
            .collect()
    }

    /// True for a numeric literal.
    pub fn is_lit(&self) -> bool {
        matches!(self.op, Op::Lit(_))
    }

    /// True for an assignment `(=, •, •)`.
    pub fn is_assign(&self) -> bool {
        matches!(self.op, Op::Assign(_))
    }

    /// True for a leaf naming a tensor (an identifier or the hole).
    pub fn is_tensor_leaf(&self) -> bool {
        matches!(self.op, Op::Id(_) | Op::Hole)
    }

    /// The identifier of a leaf (`None` for the hole, literals and inner nodes).
    pub fn id(&self) -> Option<&Name> {
        match &self.op {
            Op::Id(n) => Some(n),
            _ => None,
        }
    }

    /// The target leaf of an assignment.
    pub fn target(&self) -> Option<&TExpr> {
        self.is_assign().then(|| &self.children[0])
    }

    /// The assigned value of an assignment.
    pub fn value(&self) -> Option<&TExpr> {
        self.is_assign().then(|| &self.children[1])
    }

    /// The reduction coordinates of an accumulator statement placed in a nest by `build`: the
    /// current values of the iterators it sums over (their loops all start at 0). The
    /// statement instance where all of them are 0 is the first update of its target element,
    /// in any order the loop transformations produce; the accumulator is zeroed there.
    pub fn first_update(&self) -> Option<Vec<Expr>> {
        match (&self.op, &self.inst) {
            (Op::Assign(AssignMode::Accumulator), Some(i)) => {
                Some(i.at.iter().zip(&i.reduction).filter(|(_, r)| **r).map(|(x, _)| x.clone()).collect())
            }
            _ => None,
        }
    }

    /// The conditions `g >= 0` under which a placed statement runs (empty: always).
    pub fn guard(&self) -> &[Expr] {
        self.inst.as_ref().map_or(&[], |i| &i.guard)
    }

    /// The same node placed as statement `inst`.
    pub fn with_instance(&self, inst: Instance) -> TExpr {
        Arc::new(TNode { inst: Some(Arc::new(inst)), ..self.clone() })
    }

    /// The same assignment with the iteration domain `dom` (none where it is plain).
    pub fn with_domain(&self, dom: Domain) -> TExpr {
        let dom = (!dom.is_plain()).then(|| Arc::new(dom));
        Arc::new(TNode { dom, ..self.clone() })
    }

    /// The iteration domain its user gave an assignment (empty: eq. 19's).
    pub fn domain(&self) -> Domain {
        self.dom.as_deref().cloned().unwrap_or_default()
    }

    /// The index expressions of a leaf, if it has a list.
    pub fn index_list(&self) -> Option<&[Expr]> {
        match &self.iters {
            Iters::List(xs) => Some(xs),
            _ => None,
        }
    }

    /// Returns a copy with another iterator list.
    pub fn with_iters(&self, iters: Iters) -> TExpr {
        Arc::new(TNode { iters, ..self.clone() })
    }

    /// The access as C writes it, e.g. `A[i1][i2+1]` (or `A` for a scalar).
    pub fn access(&self) -> String {
        let mut s = self.op.symbol();
        if let Iters::List(xs) = &self.iters {
            for x in xs {
                s.push_str(&format!("[{x}]"));
            }
        }
        s
    }

    /// Does the tree contain the hole `□`?
    pub fn has_hole(&self) -> bool {
        matches!(self.op, Op::Hole) || self.children.iter().any(|c| c.has_hole())
    }

    /// `x[id/□]`: fills every hole with `id` (eq. 17-18).
    pub fn fill_hole(self: &TExpr, id: &Name) -> TExpr {
        if !self.has_hole() {
            return self.clone();
        }
        let op = if matches!(self.op, Op::Hole) { Op::Id(id.clone()) } else { self.op.clone() };
        let children = self.children.iter().map(|c| c.fill_hole(id)).collect();
        Arc::new(TNode { op, children, ..(**self).clone() })
    }

    /// The tree with every leaf of tensor `from` naming `to` instead.
    pub fn rename_tensor(self: &TExpr, from: &Name, to: &Name) -> TExpr {
        let op = match &self.op {
            Op::Id(n) if n == from => Op::Id(to.clone()),
            other => other.clone(),
        };
        let children = self.children.iter().map(|c| c.rename_tensor(from, to)).collect();
        Arc::new(TNode { op, children, ..(**self).clone() })
    }

    /// True if some leaf is the tensor `t`.
    pub fn mentions_tensor(&self, t: &str) -> bool {
        self.id().is_some_and(|x| &**x == t) || self.children.iter().any(|c| c.mentions_tensor(t))
    }

    /// True if some node is a virtual contraction.
    pub fn has_contract(&self) -> bool {
        matches!(self.op, Op::Contract(_)) || self.children.iter().any(|c| c.has_contract())
    }

    /// Visits every node, parents before children, left to right.
    pub fn visit(&self, f: &mut dyn FnMut(&TNode)) {
        f(self);
        for c in &self.children {
            c.visit(f);
        }
    }

    /// Every leaf with an index list, left to right.
    pub fn indexed_leaves(&self) -> Vec<&TNode> {
        fn go<'a>(n: &'a TNode, out: &mut Vec<&'a TNode>) {
            if matches!(n.iters, Iters::List(_)) {
                out.push(n);
            }
            for c in &n.children {
                go(c, out);
            }
        }
        let mut out = Vec::new();
        go(self, &mut out);
        out
    }

    /// Iterators bound by contractions inside the tree.
    pub fn bound_iters(&self) -> Vec<Name> {
        let mut out = Vec::new();
        self.visit(&mut |n| {
            if let Op::Contract(ks) = &n.op {
                out.extend(ks.iter().cloned());
            }
        });
        out
    }

    /// Every variable in an index expression, in order of first appearance (iterators and any
    /// named constants used in indices).
    pub fn index_vars(&self) -> Vec<Name> {
        let mut out: Vec<Name> = Vec::new();
        for leaf in self.indexed_leaves() {
            for x in leaf.index_list().unwrap_or(&[]) {
                for (v, _) in x.affine_terms().unwrap_or_default() {
                    if !out.contains(&v) {
                        out.push(v);
                    }
                }
            }
        }
        out
    }

    /// Replaces iterators in every index list (and renames contraction-bound iterators that
    /// are replaced by a plain iterator; those replaced by anything else are dropped).
    pub fn subst_iters(self: &TExpr, f: &dyn Fn(&str) -> Option<Expr>) -> TExpr {
        let iters = match &self.iters {
            Iters::List(xs) => Iters::List(xs.iter().map(|x| x.subst_with(f)).collect()),
            other => other.clone(),
        };
        let op = match &self.op {
            Op::Contract(ks) => Op::Contract(
                ks.iter()
                    .filter_map(|k| match f(k) {
                        None => Some(k.clone()),
                        Some(e) => e.as_var().cloned(),
                    })
                    .collect(),
            ),
            other => other.clone(),
        };
        let children = self.children.iter().map(|c| c.subst_iters(f)).collect();
        let inst = self.inst.as_ref().map(|i| {
            Arc::new(Instance {
                at: i.at.iter().map(|x| x.subst_with(f)).collect(),
                guard: i.guard.iter().map(|x| x.subst_with(f)).collect(),
                ..(**i).clone()
            })
        });
        Arc::new(TNode {
            op,
            iters,
            children,
            shape: self.shape.clone(),
            dtype: self.dtype,
            inst,
            dom: self.dom.clone(),
            before: self.before.clone(),
        })
    }

    /// The paper's notation `⟨(op, S, I), [..]⟩`.
    pub fn paper(&self) -> String {
        let kids: Vec<String> = self.children.iter().map(|c| c.paper()).collect();
        format!("⟨({}, {}, {}), [{}]⟩", self.op.symbol(), self.shape, self.iters, kids.join(", "))
    }

    /// An indented tree, one node per line.
    pub fn tree(&self) -> String {
        let mut out = String::new();
        self.tree_into(&mut out, "", "");
        out
    }

    fn tree_into(&self, out: &mut String, first: &str, rest: &str) {
        let mut line = format!("{first}({}, {}, {})", self.op.symbol(), self.shape, self.iters);
        if self.dtype != DType::Double && self.is_tensor_leaf() {
            line.push(' ');
            line.push_str(self.dtype.name());
        }
        if let Op::Assign(AssignMode::Accumulator) = self.op {
            line.push_str("  accumulator: zeroed at its first update");
        }
        out.push_str(&line);
        out.push('\n');
        let n = self.children.len();
        for (k, c) in self.children.iter().enumerate() {
            let last = k + 1 == n;
            let (f, r) = if last { ("└─ ", "   ") } else { ("├─ ", "│  ") };
            c.tree_into(out, &format!("{rest}{f}"), &format!("{rest}{r}"));
        }
    }

    fn prec(&self) -> u8 {
        match self.op {
            Op::Add | Op::Sub => 1,
            Op::Mul | Op::Div => 2,
            _ => 3,
        }
    }
}

/// Infix printing as the paper's C listings show statements: `E[i1][i2] = C[i1][i2] *
/// (A[i1][i2] + B[i1][i2])`. Contractions print as `sum[k](...)`.
impl fmt::Display for TNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.op {
            Op::Assign(mode) => {
                let op = if *mode == AssignMode::Accumulator { "+=" } else { "=" };
                let (t, v) = (&self.children[0], &self.children[1]);
                // An accumulator's value repeats the target (eq. 33): print only the addend.
                if *mode == AssignMode::Accumulator && v.op == Op::Add && v.children[0].access() == t.access()
                {
                    return write!(f, "{} {op} {}", t, v.children[1]);
                }
                write!(f, "{} {op} {}", t, v)
            }
            Op::Add | Op::Sub | Op::Mul | Op::Div => {
                let p = self.prec();
                let (l, r) = (&self.children[0], &self.children[1]);
                let lp = l.prec() < p;
                // Right operand of - and / needs parentheses at equal precedence too.
                let rp = r.prec() < p || (r.prec() == p && matches!(self.op, Op::Sub | Op::Div));
                wrap(f, l, lp)?;
                write!(f, " {} ", self.op.symbol())?;
                wrap(f, r, rp)
            }
            Op::Call(func) => {
                let args: Vec<String> = self.children.iter().map(|c| c.to_string()).collect();
                match (func.operator(), args.as_slice()) {
                    (Some(o), [a, b]) => write!(f, "({a} {o} {b})"),
                    (None, [c, a, b]) if *func == Func::Select => write!(f, "({c} ? {a} : {b})"),
                    _ => write!(f, "{}({})", func.name(), args.join(", ")),
                }
            }
            Op::Contract(ks) => {
                write!(f, "sum[{}](", join(ks))?;
                for (k, c) in self.children.iter().enumerate() {
                    if k > 0 {
                        f.write_str(" * ")?;
                    }
                    wrap(f, c, c.prec() < 2)?;
                }
                f.write_str(")")
            }
            _ => f.write_str(&self.access()),
        }
    }
}

fn wrap(f: &mut fmt::Formatter<'_>, t: &TNode, paren: bool) -> fmt::Result {
    if paren { write!(f, "({t})") } else { write!(f, "{t}") }
}

/// The real tensor behind an indexed leaf: the same node with its iterator list reset to ε
/// (scalars keep •).
pub fn real_leaf(x: &TExpr) -> TExpr {
    let iters = if x.shape.rank() == 0 { Iters::Bullet } else { Iters::Unset };
    if x.iters == iters { x.clone() } else { x.with_iters(iters) }
}
