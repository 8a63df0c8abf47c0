//! The builtin table: the language. Both front-ends (`.teml` and Rhai), the REPL's completion
//! and the language reference read this one table; no builtin is implemented twice.
//!
//! Every entry takes the state (for identifiers and named constants) and a list of
//! [`ArgVal`]s, and returns a [`Value`]. Arguments are checked here, with messages that name
//! the builtin, the argument, what was expected and what was found.

use super::tensor::Arith;
use super::{build, tensor, transform};
use crate::error::{Arg, Error, Result};
use crate::ir::Func;
use crate::ir::{
    DType, Expr, History, Init, KernelRequest, Name, Nest, Op, Shape, State, StepArg, TExpr, TNode, Value,
    state::describe_tensor,
};

/// A list of index expressions.
type Indices = Vec<Expr>;

/// An argument as a front-end hands it over.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgVal {
    /// A value (tensor expression or loop nest).
    Value(Value),
    /// An integer.
    Int(i64),
    /// A floating-point literal.
    Float(f64),
    /// An index expression (`i`, `i+1`, `h+kh`).
    Index(Expr),
    /// A bare identifier: resolved by the builtin (a state entry, an iterator, a named
    /// constant or a type name, depending on the position).
    Word(Name),
    /// A string.
    Str(String),
    /// A list `[...]`.
    List(Vec<ArgVal>),
    /// An omitted argument (`[, [k, j]]`, or the left of `-> I`).
    Omitted,
}

impl ArgVal {
    /// A short description for error messages.
    pub fn describe(&self) -> String {
        match self {
            ArgVal::Value(v) => v.kind(),
            ArgVal::Int(i) => format!("the integer {i}"),
            ArgVal::Float(x) => format!("the number {x}"),
            ArgVal::Index(e) => format!("the index expression {e}"),
            ArgVal::Word(w) => format!("`{w}`"),
            ArgVal::Str(s) => format!("the string \"{s}\""),
            ArgVal::List(xs) => format!("a list of {} items", xs.len()),
            ArgVal::Omitted => "nothing".into(),
        }
    }
}

/// What a builtin returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Returns {
    /// A tensor expression (`T`).
    Tensor,
    /// A loop nest (`L`).
    Nest,
    /// Nothing: a statement (`init`, `codegen`) that changes the state.
    Stmt,
}

/// The implementation of a builtin.
#[derive(Clone, Copy)]
pub enum Call {
    /// An expression builtin: `id = f(args)`.
    Value(fn(&State, &[ArgVal]) -> Result<Value>),
    /// A statement builtin: `f(args)` gives the next state.
    Stmt(fn(&State, &[ArgVal]) -> Result<State>),
}

/// One builtin of the language.
pub struct Builtin {
    /// Name, as written in programs.
    pub name: &'static str,
    /// Signature, as the language reference shows it.
    pub signature: &'static str,
    /// Where the paper defines it.
    pub equation: &'static str,
    /// One line on what it means.
    pub summary: &'static str,
    /// An example in `.teml` syntax.
    pub example: &'static str,
    /// What it returns.
    pub returns: Returns,
    /// It reorders a nest or marks its loops: after the rewrite, the registry checks the
    /// result against the dependences of the nest's statements ([`legal`], isl) and refuses it
    /// with a witness (skipped under `--unchecked`).
    pub checked: bool,
    /// The implementation.
    pub call: Call,
}

/// The table of core builtins.
pub fn builtins() -> &'static [Builtin] {
    BUILTINS
}

/// The builtin called `name`.
pub fn lookup(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

fn unknown_builtin(name: &str) -> Error {
    Error::UnknownIdentifier { builtin: name.into(), arg: Arg::new(0, "builtin"), name: name.into() }
}

/// Calls the expression builtin `name` on `args`.
pub fn call(state: &State, name: &str, args: &[ArgVal]) -> Result<Value> {
    match lookup(name).map(|b| b.call) {
        // Validation (arguments, levels, patterns) inside `f`, then the rewrite, then the
        // legality of the result for the builtins whose entry says `checked`.
        Some(Call::Value(f)) => {
            let mut v = match focused_first(state, name, args)? {
                // A focused nest: the builtin rewrites the focused loop's sub-tree, which is
                // spliced back; legality below checks the whole nest.
                Some((full, view_args)) => match f(state, &view_args)? {
                    Value::Nest(sub) => Value::Nest(splice_checked(name, &full, sub)?),
                    other => other,
                },
                None => f(state, args)?,
            };
            if let Value::Nest(n) = &mut v {
                if lookup(name).is_some_and(|b| b.checked) && !state.unchecked {
                    legal(state, name, n)?;
                }
                n.history = History::step(name, args.iter().map(|a| step_arg(state, a)).collect());
            }
            Ok(v)
        }
        Some(Call::Stmt(_)) => Err(Error::WrongKind {
            builtin: name.into(),
            arg: Arg::new(0, "use"),
            expected: "an expression builtin on the right of `id =`".into(),
            found: format!("the statement `{name}(...)`, which has no value"),
        }),
        None => Err(unknown_builtin(name)),
    }
}

/// Builtins that take a nest first and rewrite it where it is focused (`focus`); the others
/// that take nests (`build`, `around`, `fuse_outer`, `focus` itself) see whole nests.
fn works_on_view(name: &str) -> bool {
    !matches!(name, "build" | "around" | "fuse_outer" | "focus" | "privatize")
        && lookup(name).is_some_and(|b| b.returns == Returns::Nest)
}

/// Where `args[0]` is a focused nest and `name` rewrites nests: the whole nest, and the
/// arguments with the focused loop's sub-tree in its place.
fn focused_first(state: &State, name: &str, args: &[ArgVal]) -> Result<Option<(Nest, Vec<ArgVal>)>> {
    let nest_at = |a: &ArgVal| match a {
        ArgVal::Value(Value::Nest(n)) => Some(n.clone()),
        ArgVal::Word(w) => match state.get(w) {
            Some(Value::Nest(n)) => Some(n.clone()),
            _ => None,
        },
        _ => None,
    };
    if name == "fuse_outer" {
        for (k, a) in args.iter().enumerate().take(2) {
            if let Some(l) = nest_at(a).as_ref().and_then(|n| n.focused().cloned()) {
                return Err(Error::BadArgument {
                    builtin: name.into(),
                    arg: Arg::new(k + 1, "nest"),
                    expected: "a whole nest (fuse_outer fuses top-level loops; `focus(l)` drops a focus, \
                               `fuse_inner` fuses loops inside one)"
                        .into(),
                    found: format!("a nest focused on the loop {}", l.header()),
                });
            }
        }
        return Ok(None);
    }
    if !works_on_view(name) {
        return Ok(None);
    }
    let Some(full) = args.first().and_then(nest_at).filter(|n| n.focused().is_some()) else {
        return Ok(None);
    };
    let mut view_args = args.to_vec();
    view_args[0] = ArgVal::Value(Value::Nest(full.view()));
    Ok(Some((full, view_args)))
}

/// `full` with its focused loop replaced by `sub`; refused where a loop of `sub` takes the
/// iterator of a loop around the focus (a fresh name made on the sub-tree alone).
fn splice_checked(name: &str, full: &Nest, sub: Nest) -> Result<Nest> {
    let outer = full.outer_iters();
    let mut clash = None;
    for x in &sub.items {
        x.visit_loops(&mut |l| {
            if clash.is_none() && outer.contains(&l.iter) {
                clash = Some(l.header());
            }
        });
    }
    if let Some(h) = clash {
        return Err(Error::Limit {
            builtin: name.into(),
            reason: format!(
                "expected new loops with iterators other than those of the loops around the focus ({}), \
                 found the loop {h}",
                outer.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
            ),
        });
    }
    Ok(full.splice(sub))
}

/// An argument as the history of a nest records it: nests (given as values, or by their
/// identifier in the paper's syntax) by their own history, everything else as `.teml` source
/// text.
fn step_arg(state: &State, a: &ArgVal) -> StepArg {
    match a {
        ArgVal::Value(Value::Nest(n)) => StepArg::Nest(n.history.clone()),
        ArgVal::Word(w) => match state.get(w) {
            Some(Value::Nest(n)) => StepArg::Nest(n.history.clone()),
            _ => StepArg::Text(w.to_string()),
        },
        other => StepArg::Text(source_text(other)),
    }
}

/// An argument written back in the paper's syntax: tensors by the name they are bound to.
pub fn source_text(a: &ArgVal) -> String {
    match a {
        ArgVal::Value(Value::Tensor(t)) => match (&t.op, t.target()) {
            (Op::Id(n), _) => n.to_string(),
            (_, Some(target)) => target.id().map_or_else(|| t.to_string(), |n| n.to_string()),
            _ => t.to_string(),
        },
        ArgVal::Value(Value::Nest(_)) => "<nest>".into(),
        ArgVal::Int(i) => i.to_string(),
        ArgVal::Float(x) => format!("{x:?}"),
        ArgVal::Index(e) => e.to_string(),
        ArgVal::Word(w) => w.to_string(),
        ArgVal::Str(s) => format!("{s:?}"),
        ArgVal::List(xs) => format!("[{}]", xs.iter().map(source_text).collect::<Vec<_>>().join(", ")),
        ArgVal::Omitted => String::new(),
    }
}

/// Runs the statement builtin `name` (`init`, `codegen`) on `args`.
pub fn run_stmt(state: &State, name: &str, args: &[ArgVal]) -> Result<State> {
    match lookup(name).map(|b| b.call) {
        Some(Call::Stmt(f)) => f(state, args),
        Some(Call::Value(_)) => Err(Error::WrongKind {
            builtin: name.into(),
            arg: Arg::new(0, "use"),
            expected: "a statement".into(),
            found: format!("the expression builtin `{name}`: bind its value with `id = {name}(...)`"),
        }),
        None => Err(unknown_builtin(name)),
    }
}

// ---------------------------------------------------------------------------------------------
// Argument checking

struct Args<'a> {
    builtin: &'static str,
    state: &'a State,
    args: &'a [ArgVal],
}

impl<'a> Args<'a> {
    fn new(
        builtin: &'static str,
        state: &'a State,
        args: &'a [ArgVal],
        min: usize,
        max: usize,
        usage: &str,
    ) -> Result<Self> {
        if args.len() < min || args.len() > max {
            let expected = if min == max {
                format!("{min} arguments: {usage}")
            } else {
                format!("{min} to {max} arguments: {usage}")
            };
            return Err(Error::BadArgument {
                builtin: builtin.into(),
                arg: Arg::new(args.len().min(max.saturating_add(1)), "arguments"),
                expected,
                found: format!("{} arguments", args.len()),
            });
        }
        Ok(Args { builtin, state, args })
    }

    fn get(&self, pos: usize) -> &ArgVal {
        self.args.get(pos - 1).unwrap_or(&ArgVal::Omitted)
    }

    fn wrong(&self, pos: usize, role: &str, expected: &str) -> Error {
        Error::WrongKind {
            builtin: self.builtin.into(),
            arg: Arg::new(pos, role),
            expected: expected.into(),
            found: self.get(pos).describe(),
        }
    }

    fn value(&self, pos: usize, role: &str) -> Result<Value> {
        match self.get(pos) {
            ArgVal::Value(v) => Ok(v.clone()),
            ArgVal::Word(_) | ArgVal::Index(_) if self.word(pos).is_some() => {
                let w = self.word(pos).cloned().unwrap_or_else(|| Name::from(""));
                self.state.get(&w).cloned().or_else(|| self.temporary(&w)).ok_or_else(|| {
                    Error::UnknownIdentifier {
                        builtin: self.builtin.into(),
                        arg: Arg::new(pos, role),
                        name: w.to_string(),
                    }
                })
            }
            _ => Err(self.wrong(pos, role, "an identifier")),
        }
    }

    /// A temporary that `lift` introduced in a nest among the arguments (`store_at(l, 1, v_1)`):
    /// the assignment that defines it there.
    fn temporary(&self, name: &str) -> Option<Value> {
        self.args.iter().find_map(|a| {
            let nest = match a {
                ArgVal::Value(Value::Nest(n)) => n,
                ArgVal::Word(w) => match self.state.get(w) {
                    Some(Value::Nest(n)) => n,
                    _ => return None,
                },
                _ => return None,
            };
            nest.temporary(name).map(Value::Tensor)
        })
    }

    fn word(&self, pos: usize) -> Option<&Name> {
        match self.get(pos) {
            ArgVal::Word(w) => Some(w),
            ArgVal::Index(e) => e.as_var(),
            _ => None,
        }
    }

    /// A tensor expression; numbers are accepted as literal scalar operands when `lit`.
    fn tensor(&self, pos: usize, role: &str, lit: bool) -> Result<TExpr> {
        match self.get(pos) {
            ArgVal::Int(i) if lit => Ok(literal(*i as f64)),
            ArgVal::Float(x) if lit => Ok(literal(*x)),
            ArgVal::Index(e) if lit && e.as_const().is_some() => Ok(literal(e.constant() as f64)),
            // A named constant as a value (PolyBench's `(DATA_TYPE)_PB_N`): its value now.
            ArgVal::Word(w) if lit && self.state.get(w).is_none() && self.state.constant(w).is_some() => {
                Ok(literal(self.state.constant(w).unwrap_or(0) as f64))
            }
            _ => match self.value(pos, role)? {
                Value::Tensor(t) => Ok(t),
                v @ Value::Nest(_) => Err(Error::WrongKind {
                    builtin: self.builtin.into(),
                    arg: Arg::new(pos, role),
                    expected: "a tensor expression".into(),
                    found: v.kind(),
                }),
            },
        }
    }

    /// The name of a real tensor: given as its name (a string), as the tensor, or as the
    /// assignment that defines it.
    fn real_tensor_name(&self, pos: usize) -> Result<Name> {
        if let ArgVal::Str(name) = self.get(pos) {
            return if self.state.real_tensor(name).is_some() || self.temporary(name).is_some() {
                Ok(Name::from(name.as_str()))
            } else {
                Err(self.wrong(pos, "tensor", "the name of a real tensor"))
            };
        }
        let t = self.tensor(pos, "tensor", false)?;
        match (&t.op, t.target().and_then(|x| x.id())) {
            (Op::Id(n), _) => Ok(n.clone()),
            (_, Some(n)) => Ok(n.clone()),
            _ => Err(self.wrong(pos, "tensor", "a real tensor (declared, or the target of an assignment)")),
        }
    }

    fn nest(&self, pos: usize, role: &str) -> Result<Nest> {
        match self.value(pos, role)? {
            Value::Nest(n) => Ok(n),
            v @ Value::Tensor(_) => Err(Error::WrongKind {
                builtin: self.builtin.into(),
                arg: Arg::new(pos, role),
                expected: "a loop nest (build a tensor expression first)".into(),
                found: v.kind(),
            }),
        }
    }

    fn int(&self, pos: usize, role: &str) -> Result<i64> {
        match self.get(pos) {
            ArgVal::Int(i) => Ok(*i),
            ArgVal::Index(e) if e.as_const().is_some() => Ok(e.constant()),
            ArgVal::Word(w) if self.state.constant(w).is_some() => Ok(self.state.constant(w).unwrap_or(0)),
            _ => Err(self.wrong(pos, role, "an integer")),
        }
    }

    fn ints(&self, pos: usize, role: &str) -> Result<Vec<i64>> {
        match self.get(pos) {
            ArgVal::List(xs) => xs
                .iter()
                .map(|x| match x {
                    ArgVal::Int(i) => Ok(*i),
                    ArgVal::Index(e) if e.as_const().is_some() => Ok(e.constant()),
                    other => Err(Error::WrongKind {
                        builtin: self.builtin.into(),
                        arg: Arg::new(pos, role),
                        expected: "a list of integers".into(),
                        found: format!("{} in the list", other.describe()),
                    }),
                })
                .collect(),
            _ => Err(self.wrong(pos, role, "a list of integers")),
        }
    }

    /// An index expression (iterator, integer or affine expression).
    fn index(&self, x: &ArgVal, pos: usize, role: &str) -> Result<Expr> {
        match x {
            ArgVal::Index(e) => Ok(e.clone()),
            ArgVal::Word(w) => Ok(Expr::var_name(w)),
            ArgVal::Int(i) => Ok(Expr::int(*i)),
            other => Err(Error::IteratorList {
                builtin: self.builtin.into(),
                arg: Arg::new(pos, role),
                expected: "iterators or affine index expressions".into(),
                found: other.describe(),
            }),
        }
    }

    /// An iterator list `[i, j+1]`, or `None` where omitted (ε).
    fn iters(&self, x: &ArgVal, pos: usize, role: &str) -> Result<Option<Vec<Expr>>> {
        match x {
            ArgVal::Omitted => Ok(None),
            ArgVal::List(xs) => {
                xs.iter().map(|x| self.index(x, pos, role)).collect::<Result<Vec<_>>>().map(Some)
            }
            other => Err(Error::IteratorList {
                builtin: self.builtin.into(),
                arg: Arg::new(pos, role),
                expected: "an iterator list [...]".into(),
                found: other.describe(),
            }),
        }
    }

    /// The pair `[I0?, I1?]` of vop/op; an omitted argument omits both.
    fn iter_pair(&self, pos: usize) -> Result<(Option<Indices>, Option<Indices>)> {
        let role = "iterator lists [I0, I1]";
        match self.get(pos) {
            ArgVal::Omitted => Ok((None, None)),
            ArgVal::List(xs)
                if xs.len() == 2 && xs.iter().all(|x| matches!(x, ArgVal::List(_) | ArgVal::Omitted)) =>
            {
                Ok((self.iters(&xs[0], pos, role)?, self.iters(&xs[1], pos, role)?))
            }
            other => Err(Error::IteratorList {
                builtin: self.builtin.into(),
                arg: Arg::new(pos, role),
                expected: "a pair of iterator lists [I0, I1] (either may be omitted: [, [k, j]])".into(),
                found: other.describe(),
            }),
        }
    }

    fn result_iters(&self, pos: usize) -> Result<Vec<Expr>> {
        match self.iters(self.get(pos), pos, "result iterators")? {
            Some(xs) => Ok(xs),
            None => Err(self.wrong(pos, "result iterators", "a result iterator list -> [...]")),
        }
    }

    fn extents(&self, pos: usize) -> Result<Vec<Expr>> {
        match self.get(pos) {
            ArgVal::List(xs) => xs
                .iter()
                .map(|x| match x {
                    ArgVal::Int(i) => Ok(Expr::int(*i)),
                    ArgVal::Word(w) => Ok(Expr::var_name(w)),
                    ArgVal::Index(e) => Ok(e.clone()),
                    other => Err(Error::WrongKind {
                        builtin: self.builtin.into(),
                        arg: Arg::new(pos, "shape"),
                        expected: "extents: integers or named constants".into(),
                        found: other.describe(),
                    }),
                })
                .collect(),
            _ => Err(self.wrong(pos, "shape", "a shape [extent, ...]")),
        }
    }

    /// The ranges of `build(t, ranges)`: `[[j, 0, i-1], [i, N-1, 0, -1], [t]]`: an iterator
    /// with its bounds (inclusive; `-1` last: from the first bound down to the second), or
    /// alone: bound by a loop around the sequence (`around`).
    fn ranges(&self, pos: usize) -> Result<crate::ir::Domain> {
        let role = "ranges";
        let usage = "a list of ranges [[i, lb, ub], [j, ub, lb, -1] (backward), [t] (bound by `around`)]";
        let ArgVal::List(rs) = self.get(pos) else { return Err(self.wrong(pos, role, usage)) };
        let mut dom = crate::ir::Domain::default();
        for r in rs {
            let bad = |found: String| Error::BadArgument {
                builtin: self.builtin.into(),
                arg: Arg::new(pos, role),
                expected: usage.into(),
                found,
            };
            let ArgVal::List(xs) = r else { return Err(bad(format!("{} in the list", r.describe()))) };
            let it = match xs.first() {
                Some(ArgVal::Word(w)) => w.clone(),
                Some(ArgVal::Index(e)) if e.as_var().is_some() => {
                    e.as_var().cloned().unwrap_or_else(|| "".into())
                }
                Some(other) => {
                    return Err(bad(format!("{} where an iterator starts a range", other.describe())));
                }
                None => return Err(bad("an empty range []".into())),
            };
            if self.state.constant(&it).is_some() {
                return Err(bad(format!("the named constant `{it}` where an iterator starts a range")));
            }
            let bound = |x: &ArgVal| -> Result<Expr> {
                match x {
                    ArgVal::Int(i) => Ok(Expr::int(*i)),
                    ArgVal::Word(w) => Ok(Expr::var_name(w)),
                    ArgVal::Index(e) => Ok(e.clone()),
                    other => Err(bad(format!("{} as a bound of `{it}`", other.describe()))),
                }
            };
            match xs.as_slice() {
                [_] => dom.free.push(it),
                [_, lb, ub] => dom.ranges.push(crate::ir::Range {
                    iter: it.clone(),
                    lb: bound(lb)?,
                    ub: bound(ub)?,
                    backward: false,
                }),
                [_, hi, lo, step] => {
                    let step = match step {
                        ArgVal::Int(k) => Some(*k),
                        ArgVal::Index(e) => e.as_const(),
                        _ => None,
                    };
                    match step {
                        Some(-1) => dom.ranges.push(crate::ir::Range {
                            iter: it.clone(),
                            lb: bound(lo)?,
                            ub: bound(hi)?,
                            backward: true,
                        }),
                        Some(1) => dom.ranges.push(crate::ir::Range {
                            iter: it.clone(),
                            lb: bound(hi)?,
                            ub: bound(lo)?,
                            backward: false,
                        }),
                        _ => {
                            return Err(bad(format!(
                                "the step {} of `{it}` (expected 1 or -1)",
                                xs[3].describe()
                            )));
                        }
                    }
                }
                _ => return Err(bad(format!("a range of {} elements for `{it}`", xs.len()))),
            }
        }
        Ok(dom)
    }

    fn dtype(&self, pos: usize) -> Result<DType> {
        match self.word(pos).map(|w| &**w) {
            Some("double") => Ok(DType::Double),
            Some("float") => Ok(DType::Float),
            _ => match self.get(pos) {
                ArgVal::Str(s) if s == "double" => Ok(DType::Double),
                ArgVal::Str(s) if s == "float" => Ok(DType::Float),
                _ => Err(self.wrong(pos, "element type", "an element type: double or float")),
            },
        }
    }
}

fn literal(x: f64) -> TExpr {
    TNode::leaf(Op::Lit(x), Shape::Dims(vec![]), crate::ir::Iters::Bullet, DType::Double)
}

fn t(x: TExpr) -> Value {
    Value::Tensor(x)
}

fn n(x: Nest) -> Value {
    Value::Nest(x)
}

// ---------------------------------------------------------------------------------------------
// The builtins

fn b_scalar(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("scalar", s, a, 0, 1, "scalar() or scalar(type)")?;
    let dtype = if a.args.is_empty() { DType::Double } else { a.dtype(1)? };
    Ok(t(tensor::scalar(dtype)))
}

fn b_tensor(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("tensor", s, a, 1, 2, "tensor([extents]) or tensor(type, [extents])")?;
    let (dtype, dims) =
        if a.args.len() == 2 { (a.dtype(1)?, a.extents(2)?) } else { (DType::Double, a.extents(1)?) };
    Ok(t(tensor::tensor(s, "tensor", &dims, dtype)?))
}

fn b_accumulator(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("accumulator", s, a, 1, 1, "accumulator([extents]) or accumulator(t)")?;
    let dims = match a.get(1) {
        ArgVal::List(_) => a.extents(1)?,
        _ => {
            let x = a.tensor(1, "shape of", false)?;
            match x.shape.dims() {
                Some(d) => d
                    .iter()
                    .map(|d| match d {
                        crate::ir::Dim::Known(e) => Ok(e.clone()),
                        crate::ir::Dim::Unknown => {
                            Err(a.wrong(1, "shape of", "a tensor expression of known shape"))
                        }
                    })
                    .collect::<Result<Vec<_>>>()?,
                None => return Err(a.wrong(1, "shape of", "a tensor expression with a shape")),
            }
        }
    };
    Ok(t(tensor::tensor(s, "accumulator", &dims, DType::Double)?))
}

fn b_eq(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("eq", s, a, 3, 3, "eq(t, I0 -> I1)")?;
    let x = a.tensor(1, "tensor", true)?;
    let i0 = a.iters(a.get(2), 2, "iterators")?;
    let i1 = a.result_iters(3)?;
    Ok(t(tensor::eq(s, &x, i0.as_deref(), &i1)?))
}

macro_rules! vop_builtin {
    ($f:ident, $name:literal, $op:expr) => {
        fn $f(s: &State, a: &[ArgVal]) -> Result<Value> {
            let a = Args::new($name, s, a, 2, 3, concat!($name, "(t0, t1, [I0, I1])"))?;
            let (x0, x1) = (a.tensor(1, "operand", true)?, a.tensor(2, "operand", true)?);
            let (i0, i1) = a.iter_pair(3)?;
            Ok(t(tensor::vop(s, $op, &x0, &x1, i0.as_deref(), i1.as_deref())?))
        }
    };
}

macro_rules! op_builtin {
    ($f:ident, $name:literal, $op:expr) => {
        fn $f(s: &State, a: &[ArgVal]) -> Result<Value> {
            let a = Args::new($name, s, a, 4, 4, concat!($name, "(t0, t1, [I0, I1] -> I2)"))?;
            let (x0, x1) = (a.tensor(1, "operand", true)?, a.tensor(2, "operand", true)?);
            let (i0, i1) = a.iter_pair(3)?;
            let i2 = a.result_iters(4)?;
            Ok(t(tensor::op(s, $op, &x0, &x1, i0.as_deref(), i1.as_deref(), &i2)?))
        }
    };
}

vop_builtin!(b_vadd, "vadd", Arith::Add);
vop_builtin!(b_vsub, "vsub", Arith::Sub);
vop_builtin!(b_vmul, "vmul", Arith::Mul);
vop_builtin!(b_vdiv, "vdiv", Arith::Div);
op_builtin!(b_add, "add", Arith::Add);
op_builtin!(b_sub, "sub", Arith::Sub);
op_builtin!(b_mul, "mul", Arith::Mul);
op_builtin!(b_div, "div", Arith::Div);
vop_builtin!(b_vpow, "vpow", Arith::Pow);
vop_builtin!(b_vmin, "vmin", Arith::Min);
vop_builtin!(b_vmax, "vmax", Arith::Max);
op_builtin!(b_pow, "pow", Arith::Pow);
op_builtin!(b_min, "min", Arith::Min);
op_builtin!(b_max, "max", Arith::Max);
vop_builtin!(b_vlt, "vlt", Arith::Cmp(Func::Lt));
vop_builtin!(b_vle, "vle", Arith::Cmp(Func::Le));
vop_builtin!(b_vgt, "vgt", Arith::Cmp(Func::Gt));
vop_builtin!(b_vge, "vge", Arith::Cmp(Func::Ge));
vop_builtin!(b_veq, "veq", Arith::Cmp(Func::Eq));
vop_builtin!(b_vne, "vne", Arith::Cmp(Func::Ne));

/// The three operands of `vselect`/`select` and their iterator lists.
type SelectArgs = ([TExpr; 3], [Option<Vec<Expr>>; 3]);

/// The three operands and lists of `vselect`/`select`; a missing else is refused.
fn select_args(a: &Args<'_>, name: &str) -> Result<SelectArgs> {
    let ops = [a.tensor(1, "condition", true)?, a.tensor(2, "then", true)?, a.tensor(3, "else", true)?];
    let lists = match a.get(4) {
        ArgVal::Omitted => [None, None, None],
        ArgVal::List(xs)
            if xs.len() == 3 && xs.iter().all(|x| matches!(x, ArgVal::List(_) | ArgVal::Omitted)) =>
        {
            [
                a.iters(&xs[0], 4, "iterator lists")?,
                a.iters(&xs[1], 4, "iterator lists")?,
                a.iters(&xs[2], 4, "iterator lists")?,
            ]
        }
        other => {
            return Err(Error::IteratorList {
                builtin: name.into(),
                arg: Arg::new(4, "iterator lists"),
                expected: "three iterator lists [Ic, It, If] (any may be omitted: [[i], , [i]])".into(),
                found: other.describe(),
            });
        }
    };
    Ok((ops, lists))
}

fn b_vselect(s: &State, a: &[ArgVal]) -> Result<Value> {
    let usage = "vselect(c, t, f, [Ic, It, If]): a condition, a value where it holds, and an else value";
    let a = Args::new("vselect", s, a, 3, 4, usage)?;
    let (ops, lists) = select_args(&a, "vselect")?;
    let l = [lists[0].as_deref(), lists[1].as_deref(), lists[2].as_deref()];
    Ok(t(tensor::vselect(s, [&ops[0], &ops[1], &ops[2]], l)?))
}

fn b_select(s: &State, a: &[ArgVal]) -> Result<Value> {
    let usage =
        "select(c, t, f, [Ic, It, If] -> I): a condition, a value where it holds, an else value, the result";
    let a = Args::new("select", s, a, 5, 5, usage)?;
    let (ops, lists) = select_args(&a, "select")?;
    let l = [lists[0].as_deref(), lists[1].as_deref(), lists[2].as_deref()];
    let i = a.result_iters(5)?;
    Ok(t(tensor::select(s, [&ops[0], &ops[1], &ops[2]], l, &i)?))
}

macro_rules! vfn_builtin {
    ($f:ident, $name:literal, $func:expr) => {
        fn $f(s: &State, a: &[ArgVal]) -> Result<Value> {
            let a = Args::new($name, s, a, 1, 2, concat!($name, "(t, I0)"))?;
            let x = a.tensor(1, "operand", true)?;
            let i0 = a.iters(a.get(2), 2, "iterators")?;
            Ok(t(tensor::vcall(s, $func, &x, i0.as_deref())?))
        }
    };
}

macro_rules! fn_builtin {
    ($f:ident, $name:literal, $func:expr) => {
        fn $f(s: &State, a: &[ArgVal]) -> Result<Value> {
            let a = Args::new($name, s, a, 3, 3, concat!($name, "(t, I0 -> I1)"))?;
            let x = a.tensor(1, "operand", true)?;
            let i0 = a.iters(a.get(2), 2, "iterators")?;
            let i1 = a.result_iters(3)?;
            Ok(t(tensor::call(s, $func, &x, i0.as_deref(), &i1)?))
        }
    };
}

vfn_builtin!(b_vsqrt, "vsqrt", Func::Sqrt);
vfn_builtin!(b_vexp, "vexp", Func::Exp);
vfn_builtin!(b_vlog, "vlog", Func::Log);
vfn_builtin!(b_vabs, "vabs", Func::Abs);
fn_builtin!(b_sqrt, "sqrt", Func::Sqrt);
fn_builtin!(b_exp, "exp", Func::Exp);
fn_builtin!(b_log, "log", Func::Log);
fn_builtin!(b_abs, "abs", Func::Abs);

fn b_vcontract(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new(
        "vcontract",
        s,
        a,
        3,
        3,
        "vcontract(t0, t1, [r0, r1]) or vcontract(t0, t1, [[r0, r1], ...])",
    )?;
    let (x0, x1) = (a.tensor(1, "operand", false)?, a.tensor(2, "operand", false)?);
    let pairs = match a.get(3) {
        ArgVal::List(xs) if xs.iter().all(|x| matches!(x, ArgVal::List(_))) && !xs.is_empty() => {
            let mut out = Vec::new();
            for x in xs {
                let sub = Args { builtin: a.builtin, state: s, args: std::slice::from_ref(x) };
                let p = sub.ints(1, "dimension pairs")?;
                if p.len() != 2 {
                    return Err(a.wrong(3, "dimension pairs", "pairs [r0, r1] of 1-based dimensions"));
                }
                out.push((p[0], p[1]));
            }
            out
        }
        _ => {
            let p = a.ints(3, "dimension pair")?;
            if p.len() != 2 {
                return Err(a.wrong(3, "dimension pair", "a pair [r0, r1] of 1-based dimensions"));
            }
            vec![(p[0], p[1])]
        }
    };
    Ok(t(tensor::vcontract(s, &x0, &x1, &pairs)?))
}

fn b_build(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("build", s, a, 1, 2, "build(t) or build(t, ranges)")?;
    let x = a.tensor(1, "assignment", false)?;
    if a.args.len() == 1 {
        return Ok(n(build::build(s, &x)?));
    }
    let dom = a.ranges(2)?;
    if !x.is_assign() {
        return Ok(n(build::build(s, &x)?)); // build says what it expected
    }
    let mut full = x.domain();
    full.ranges = dom.ranges;
    full.free.extend(dom.free.into_iter().filter(|v| !full.outer.contains(v)));
    Ok(n(build::build(s, &x.with_domain(full))?))
}

/// `lift(t)` / `lift(t, order)`: TeIL Sec. 5's lifting of a nested contraction into single
/// contractions through temporaries (`ops::lift`).
fn b_lift(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("lift", s, a, 1, 3, "lift(t), lift(t, order) or lift(t, order, layout)")?;
    let x = a.tensor(1, "expression", false)?;
    let order = match a.get(2) {
        // `lift(t, , "summed_first")` or `lift(t, [], ...)`: the best order.
        ArgVal::Omitted => None,
        ArgVal::List(steps) if steps.is_empty() => None,
        ArgVal::List(steps) => Some(
            steps
                .iter()
                .map(|step| match step {
                    ArgVal::List(xs) if xs.len() == 2 => {
                        let int = |x: &ArgVal| match x {
                            ArgVal::Int(i) => Some(*i),
                            ArgVal::Index(e) => e.as_const(),
                            _ => None,
                        };
                        int(&xs[0]).zip(int(&xs[1])).ok_or(())
                    }
                    _ => Err(()),
                })
                .collect::<std::result::Result<Vec<(i64, i64)>, ()>>()
                .map_err(|_| {
                    a.wrong(2, "order", "a list of steps [a, b] (two positions each), as opt_einsum's paths")
                })?,
        ),
        _ => {
            return Err(a.wrong(
                2,
                "order",
                "a list of steps [a, b] (two positions each), as opt_einsum's paths",
            ));
        }
    };
    let layout = match a.get(3) {
        ArgVal::Omitted => super::lift::TempLayout::default(),
        ArgVal::Str(w) => super::lift::TempLayout::NAMES
            .iter()
            .find(|(name, _)| name == w)
            .map(|(_, l)| *l)
            .ok_or_else(|| a.wrong(3, "layout", "\"result_first\" or \"summed_first\""))?,
        _ => return Err(a.wrong(3, "layout", "\"result_first\" or \"summed_first\"")),
    };
    Ok(n(super::lift::lift(s, &x, order.as_deref(), layout)?.nest))
}

/// `factor(t)`: a common operand out of a sum of two products (`ops::rewrite`).
fn b_factor(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("factor", s, a, 1, 1, "factor(t)")?;
    Ok(t(super::rewrite::factor(s, &a.tensor(1, "expression", false)?)?))
}

/// `expand(t)`: a product distributed over a sum among its factors (`ops::rewrite`).
fn b_expand(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("expand", s, a, 1, 1, "expand(t)")?;
    Ok(t(super::rewrite::expand(s, &a.tensor(1, "expression", false)?)?))
}

fn b_around(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("around", s, a, 3, usize::MAX, "around(t, [lb, ub], l1, l2, ...)")?;
    let it = match a.get(1) {
        ArgVal::Word(w) => w.clone(),
        ArgVal::Index(e) if e.as_var().is_some() => e.as_var().cloned().unwrap_or_else(|| "".into()),
        _ => return Err(a.wrong(1, "iterator", "an iterator name")),
    };
    let usage = "a range [lb, ub] (inclusive), or [ub, lb, -1] (backward)";
    let (lb, ub, backward) = match a.get(2) {
        ArgVal::List(xs) if xs.len() == 2 => {
            (a.index(&xs[0], 2, "range")?, a.index(&xs[1], 2, "range")?, false)
        }
        ArgVal::List(xs) if xs.len() == 3 => match a.index(&xs[2], 2, "range")?.as_const() {
            Some(-1) => (a.index(&xs[1], 2, "range")?, a.index(&xs[0], 2, "range")?, true),
            Some(1) => (a.index(&xs[0], 2, "range")?, a.index(&xs[1], 2, "range")?, false),
            _ => return Err(a.wrong(2, "range", usage)),
        },
        _ => return Err(a.wrong(2, "range", usage)),
    };
    let nests = (3..=a.args.len()).map(|k| a.nest(k, "nest")).collect::<Result<Vec<_>>>()?;
    Ok(n(build::around_dir(s, &it, &lb, &ub, backward, &nests)?))
}

fn b_stripmine(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("stripmine", s, a, 3, 4, "stripmine(l, r, v) or stripmine(l, r, v, \"aligned\")")?;
    let aligned = match a.get(4) {
        ArgVal::Omitted => false,
        ArgVal::Str(m) if m == "aligned" => true,
        _ => return Err(a.wrong(4, "mode", "\"aligned\" (blocks at multiples of v)")),
    };
    let (l, r, v) = (a.nest(1, "nest")?, a.int(2, "level")?, a.int(3, "factor")?);
    Ok(n(transform::stripmine_aligned(s, &l, r, v, aligned)?))
}

fn b_skew(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("skew", s, a, 4, 4, "skew(l, r1, r2, f)")?;
    let l = a.nest(1, "nest")?;
    Ok(n(transform::skew(&l, a.int(2, "level")?, a.int(3, "level")?, a.int(4, "factor")?)?))
}

fn b_shift(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("shift", s, a, 3, 3, "shift(l, r, c)")?;
    Ok(n(transform::shift(&a.nest(1, "nest")?, a.int(2, "level")?, a.int(3, "offset")?)?))
}

fn b_reverse(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("reverse", s, a, 2, 2, "reverse(l, r)")?;
    Ok(n(transform::reverse(&a.nest(1, "nest")?, a.int(2, "level")?)?))
}

fn b_sink(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new(
        "sink",
        s,
        a,
        2,
        4,
        "sink(l, r), sink(l, r, \"first\" | \"last\") or sink(l, r, where, \"k\")",
    )?;
    let at = match a.get(3) {
        ArgVal::Omitted => transform::SinkAt::Keep,
        ArgVal::Str(m) if m == "first" => transform::SinkAt::First,
        ArgVal::Str(m) if m == "last" => transform::SinkAt::Last,
        _ => {
            return Err(a.wrong(
                3,
                "where",
                "\"first\" or \"last\" (the inner loop's iteration that runs the statements)",
            ));
        }
    };
    let into = match a.get(4) {
        ArgVal::Omitted => None,
        ArgVal::Str(k) => Some(k.clone()),
        _ => {
            return Err(a.wrong(
                4,
                "into",
                "the iterator of the inner loop that takes the statements, a string (\"j\")",
            ));
        }
    };
    Ok(n(transform::sink(&a.nest(1, "nest")?, a.int(2, "level")?, at, into.as_deref())?))
}

fn b_split(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("split", s, a, 3, 3, "split(l, r, e)")?;
    let at = a.index(a.get(3), 3, "at")?;
    Ok(n(transform::split(&a.nest(1, "nest")?, a.int(2, "level")?, &at)?))
}

fn b_distribute(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("distribute", s, a, 2, 2, "distribute(l, r)")?;
    Ok(n(transform::distribute(&a.nest(1, "nest")?, a.int(2, "level")?)?))
}

fn b_focus(s: &State, a: &[ArgVal]) -> Result<Value> {
    let usage = "focus(l), focus(l, r) or focus(l, \"k\") / focus(l, \"k#2\")";
    let a = Args::new("focus", s, a, 1, 2, usage)?;
    let l = a.nest(1, "nest")?;
    let addr = match a.get(2) {
        ArgVal::Omitted => return Ok(n(Nest { focus: Vec::new(), ..l })),
        ArgVal::Str(x) => crate::ir::LoopAddr::parse(x).ok_or_else(|| {
            a.wrong(2, "loop", "a loop's iterator, \"k\", or \"k#2\" for the second loop of iterator k")
        })?,
        ArgVal::Word(w) if s.constant(w).is_none() => crate::ir::LoopAddr::Iter(w.to_string(), None),
        _ => crate::ir::LoopAddr::Level(a.int(2, "level")?),
    };
    l.focus_on(&addr).map(n).map_err(|(expected, found)| Error::BadArgument {
        builtin: "focus".into(),
        arg: Arg::new(2, "loop"),
        expected,
        found,
    })
}

fn b_interchange(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("interchange", s, a, 2, 3, "interchange(l, r1, r2) or interchange(l, [r1, r2])")?;
    let l = a.nest(1, "nest")?;
    let (r1, r2) = if a.args.len() == 3 {
        (a.int(2, "level")?, a.int(3, "level")?)
    } else {
        match a.ints(2, "levels")?.as_slice() {
            [r1, r2] => (*r1, *r2),
            _ => return Err(a.wrong(2, "levels", "two levels [r1, r2]")),
        }
    };
    Ok(n(transform::interchange(&l, r1, r2)?))
}

fn b_fuse_outer(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("fuse_outer", s, a, 3, 3, "fuse_outer(l1, l2, r)")?;
    Ok(n(transform::fuse_outer(&a.nest(1, "nest")?, &a.nest(2, "nest")?, a.int(3, "level")?)?))
}

fn b_fuse_inner(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("fuse_inner", s, a, 2, 2, "fuse_inner(l, r)")?;
    Ok(n(transform::fuse_inner(&a.nest(1, "nest")?, a.int(2, "level")?)?))
}

fn b_unroll(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("unroll", s, a, 2, 2, "unroll(l, r)")?;
    Ok(n(transform::unroll(s, &a.nest(1, "nest")?, a.int(2, "level")?)?))
}

fn b_parallelize(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("parallelize", s, a, 2, 2, "parallelize(l, r)")?;
    Ok(n(transform::parallelize(&a.nest(1, "nest")?, a.int(2, "level")?)?))
}

fn b_collapse(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("collapse", s, a, 3, 3, "collapse(l, r, n)")?;
    Ok(n(transform::collapse(&a.nest(1, "nest")?, a.int(2, "level")?, a.int(3, "count")?)?))
}

fn b_vectorize(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("vectorize", s, a, 2, 3, "vectorize(l, r) or vectorize(l, r, bits)")?;
    let bits = match a.get(3) {
        ArgVal::Omitted => 0,
        _ => {
            let b = a.int(3, "bits")?;
            u32::try_from(b).map_err(|_| Error::BadArgument {
                builtin: "vectorize".into(),
                arg: Arg::new(3, "bits"),
                expected: "a vector width: 128, 256 or 512".into(),
                found: b.to_string(),
            })?
        }
    };
    Ok(n(transform::vectorize(&a.nest(1, "nest")?, a.int(2, "level")?, bits)?))
}

fn b_stream(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("stream", s, a, 3, 3, "stream(l, r, T)")?;
    Ok(n(transform::stream(&a.nest(1, "nest")?, a.int(2, "level")?, &a.real_tensor_name(3)?)?))
}

fn b_registers(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("registers", s, a, 3, 3, "registers(l, r, T)")?;
    Ok(n(transform::registers(&a.nest(1, "nest")?, a.int(2, "level")?, &a.real_tensor_name(3)?)?))
}

fn b_store_at(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("store_at", s, a, 3, 3, "store_at(l, r, T)")?;
    Ok(n(transform::store_at(s, &a.nest(1, "nest")?, a.int(2, "level")?, &a.real_tensor_name(3)?)?))
}

fn b_privatize(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("privatize", s, a, 3, 3, "privatize(l, r, T)")?;
    Ok(n(transform::privatize(s, &a.nest(1, "nest")?, a.int(2, "level")?, &a.real_tensor_name(3)?)?))
}

fn b_in_place(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("in_place", s, a, 3, 3, "in_place(l, y, x)")?;
    Ok(n(transform::in_place(s, &a.nest(1, "nest")?, &a.real_tensor_name(2)?, &a.real_tensor_name(3)?)?))
}

fn b_regroup(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("regroup", s, a, 4, 5, "regroup(l, T, d, V) or regroup(l, T, d, V, pad)")?;
    let pad = match a.get(5) {
        ArgVal::Omitted => false,
        _ => a.int(5, "pad")? != 0,
    };
    let nest = a.nest(1, "nest")?;
    Ok(n(transform::regroup(
        s,
        &nest,
        &a.real_tensor_name(2)?,
        a.int(3, "dimension")?,
        a.int(4, "width")?,
        pad,
    )?))
}

fn b_permute_layout(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("permute_layout", s, a, 3, 3, "permute_layout(l, T, order)")?;
    Ok(n(transform::permute_layout(&a.nest(1, "nest")?, &a.real_tensor_name(2)?, &a.ints(3, "order")?)?))
}

fn b_pad(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("pad", s, a, 4, 5, "pad(l, T, d, m) or pad(l, T, d, m, extra)")?;
    let extra = match a.get(5) {
        ArgVal::Omitted => 0,
        _ => a.int(5, "extra")?,
    };
    Ok(n(transform::pad(
        &a.nest(1, "nest")?,
        &a.real_tensor_name(2)?,
        a.int(3, "dimension")?,
        a.int(4, "multiple")?,
        extra,
    )?))
}

fn b_pack(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a =
        Args::new("pack", s, a, 3, 5, "pack(l, r, T), pack(l, r, T, order) or pack(l, r, T, order, pad)")?;
    let order = match a.get(4) {
        ArgVal::Omitted => Vec::new(),
        _ => a
            .ints(4, "order")?
            .into_iter()
            .map(|d| usize::try_from(d - 1).map_err(|_| a.wrong(4, "order", "dimensions numbered from 1")))
            .collect::<Result<Vec<_>>>()?,
    };
    let pad = match a.get(5) {
        ArgVal::Omitted => 1,
        _ => usize::try_from(a.int(5, "pad")?).unwrap_or(0),
    };
    let layout = crate::ir::PackLayout { order, pad };
    Ok(n(transform::pack(&a.nest(1, "nest")?, a.int(2, "level")?, &a.real_tensor_name(3)?, &layout)?))
}

fn b_init(s: &State, a: &[ArgVal]) -> Result<State> {
    let a = Args::new("init", s, a, 2, 2, "init(t, random | number | \"file.npy\")")?;
    let name = a.word(1).cloned().ok_or_else(|| a.wrong(1, "tensor", "the identifier of a real tensor"))?;
    if s.real_tensor(&name).is_none() {
        return Err(match s.get(&name) {
            None => Error::UnknownIdentifier {
                builtin: "init".into(),
                arg: Arg::new(1, "tensor"),
                name: name.to_string(),
            },
            Some(v) => Error::WrongKind {
                builtin: "init".into(),
                arg: Arg::new(1, "tensor"),
                expected: "a real tensor (declared with tensor, or assigned)".into(),
                found: v.kind(),
            },
        });
    }
    let init = match a.get(2) {
        ArgVal::Word(w) if &**w == "random" => Init::Random,
        ArgVal::Int(i) => Init::Value(*i as f64),
        ArgVal::Float(x) => Init::Value(*x),
        ArgVal::Index(e) if e.as_const().is_some() => Init::Value(e.constant() as f64),
        ArgVal::Str(p) => Init::Npy(p.clone()),
        _ => return Err(a.wrong(2, "data", "random, a number or a \"file.npy\" path")),
    };
    let mut out = s.clone();
    out.inits.insert(name, init);
    Ok(out)
}

fn b_codegen(s: &State, a: &[ArgVal]) -> Result<State> {
    let a = Args::new("codegen", s, a, 1, usize::MAX, "codegen(l1, l2, ..., \"name\")")?;
    let mut req = KernelRequest::default();
    let mut nests = a.args.len();
    if let Some(ArgVal::Str(label)) = a.args.last() {
        if !crate::ir::is_c_ident(label) || nests == 1 {
            return Err(a.wrong(
                nests,
                "name",
                "nests, then the kernel's name as a C identifier (\"mm_tiled\")",
            ));
        }
        req.label = Some(label.clone());
        nests -= 1;
    }
    for pos in 1..=nests {
        let nest = a.nest(pos, "nest")?;
        if let Some((o, v)) =
            nest.origin.iter().find_map(|o| o.domain().free.first().map(|v| (o.clone(), v.clone())))
        {
            return Err(Error::BadArgument {
                builtin: "codegen".into(),
                arg: Arg::new(pos, "nest"),
                expected: format!(
                    "a nest whose every iterator a loop binds (wrap it: around({v}, [lb, ub], ...))"
                ),
                found: format!("`{o}`, which uses `{v}` and has no loop over it"),
            });
        }
        req.nests.push(nest);
        req.names.push(a.word(pos).cloned().unwrap_or_else(|| Name::from(format!("nest{pos}").as_str())));
    }
    // Validate now what `teml run` would refuse when generating C (marks that cannot be
    // realized, ...): the refusal is then this statement's error, in every front-end and in
    // `teml check`. No C is generated here.
    let named: Vec<(Name, Nest)> = req.names.iter().cloned().zip(req.nests.iter().cloned()).collect();
    crate::analysis::kernel::check(s, &named)?;
    let mut out = s.clone();
    out.kernels.push(req);
    Ok(out)
}

/// Describes what a value is, for messages outside the builtins.
pub fn describe(v: &Value) -> String {
    match v {
        Value::Tensor(x) => describe_tensor(x),
        Value::Nest(_) => "a loop nest".into(),
    }
}

static BUILTINS: &[Builtin] = &[
    Builtin {
        name: "init",
        signature: "init(t, random | number | \"file.npy\")",
        equation: "Sec. 2",
        summary: "how the real tensor t gets its initial data when kernels run (default: seeded random)",
        example: "init(A, \"a.npy\")",
        returns: Returns::Stmt,
        checked: false,
        call: Call::Stmt(b_init),
    },
    Builtin {
        name: "codegen",
        signature: "codegen(l1, l2, ..., \"name\")",
        equation: "Sec. 2",
        summary: "asks for one C kernel running the nests in order, named by the optional last string (else by its nests); `teml run` compiles, runs, verifies and times it",
        example: "codegen(ld, l2, \"transpose_then_scale\")",
        returns: Returns::Stmt,
        checked: false,
        call: Call::Stmt(b_codegen),
    },
    Builtin {
        name: "scalar",
        signature: "scalar() | scalar(type)",
        equation: "eq. 12",
        summary: "a new scalar ⟨(□, [], •), []⟩; takes no iterators",
        example: "alpha = scalar()",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_scalar),
    },
    Builtin {
        name: "tensor",
        signature: "tensor([extents]) | tensor(type, [extents])",
        equation: "eq. 13",
        summary: "a new real tensor ⟨(□, S, ε), []⟩; extents are integers or named constants, type double (default) or float",
        example: "A = tensor(double, [N, 250])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_tensor),
    },
    Builtin {
        name: "eq",
        signature: "eq(t, I0 -> I1)",
        equation: "eq. 14",
        summary: "the assignment □[I1] = t[I0]; I0 is omitted when t already carries iterators",
        example: "B = eq(A, [i1, i2] -> [i2, i1])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_eq),
    },
    Builtin {
        name: "vadd",
        signature: "vadd(t0, t1, [I0, I1])",
        equation: "eq. 15",
        summary: "the virtual element-wise sum t0[I0] + t1[I1]",
        example: "D = vadd(A, B, [[i1, i2], [i1, i2]])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_vadd),
    },
    Builtin {
        name: "vsub",
        signature: "vsub(t0, t1, [I0, I1])",
        equation: "eq. 15",
        summary: "the virtual element-wise difference t0[I0] - t1[I1]",
        example: "D = vsub(A, B, [[i], [i+1]])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_vsub),
    },
    Builtin {
        name: "vmul",
        signature: "vmul(t0, t1, [I0, I1])",
        equation: "eq. 15",
        summary: "the virtual product t0[I0] * t1[I1] (no summation)",
        example: "P = vmul(A, B, [[i, k], [k, j]])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_vmul),
    },
    Builtin {
        name: "vdiv",
        signature: "vdiv(t0, t1, [I0, I1])",
        equation: "eq. 15",
        summary: "the virtual quotient t0[I0] / t1[I1]",
        example: "Q = vdiv(A, 3.0, [[i], ])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_vdiv),
    },
    Builtin {
        name: "add",
        signature: "add(t0, t1, [I0, I1] -> I2)",
        equation: "eq. 16",
        summary: "□[I2] = t0[I0] + t1[I1]; add(A, t, ...) onto A accumulates onto what A held",
        example: "D = @C: add(A, B, [[i1, i2], [i1, i2]] -> [i1, i2])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_add),
    },
    Builtin {
        name: "sub",
        signature: "sub(t0, t1, [I0, I1] -> I2)",
        equation: "eq. 16",
        summary: "□[I2] = t0[I0] - t1[I1]",
        example: "E = sub(A, B, [[i], [i]] -> [i])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_sub),
    },
    Builtin {
        name: "mul",
        signature: "mul(t0, t1, [I0, I1] -> I2)",
        equation: "eq. 16",
        summary: "□[I2] = t0[I0] * t1[I1]",
        example: "E = mul(C, D, [[i1, i2], ] -> [i1, i2])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_mul),
    },
    Builtin {
        name: "div",
        signature: "div(t0, t1, [I0, I1] -> I2)",
        equation: "eq. 16",
        summary: "□[I2] = t0[I0] / t1[I1]",
        example: "E = div(A, B, [[i], [i]] -> [i])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_div),
    },
    Builtin {
        name: "vsqrt",
        signature: "vsqrt(t, I0)",
        equation: "eq. 15 (extension)",
        summary: "the virtual element-wise the square root sqrt(t[I0]); I0 is omitted when t carries iterators",
        example: "S = vsqrt(A, [i, j])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_vsqrt),
    },
    Builtin {
        name: "sqrt",
        signature: "sqrt(t, I0 -> I1)",
        equation: "eq. 16 (extension)",
        summary: "□[I1] = sqrt(t[I0]), the square root (C's <math.h>)",
        example: "B = sqrt(A, [i, j] -> [i, j])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_sqrt),
    },
    Builtin {
        name: "vexp",
        signature: "vexp(t, I0)",
        equation: "eq. 15 (extension)",
        summary: "the virtual element-wise the exponential exp(t[I0]); I0 is omitted when t carries iterators",
        example: "S = vexp(A, [i, j])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_vexp),
    },
    Builtin {
        name: "exp",
        signature: "exp(t, I0 -> I1)",
        equation: "eq. 16 (extension)",
        summary: "□[I1] = exp(t[I0]), the exponential (C's <math.h>)",
        example: "B = exp(A, [i, j] -> [i, j])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_exp),
    },
    Builtin {
        name: "vlog",
        signature: "vlog(t, I0)",
        equation: "eq. 15 (extension)",
        summary: "the virtual element-wise the natural logarithm log(t[I0]); I0 is omitted when t carries iterators",
        example: "S = vlog(A, [i, j])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_vlog),
    },
    Builtin {
        name: "log",
        signature: "log(t, I0 -> I1)",
        equation: "eq. 16 (extension)",
        summary: "□[I1] = log(t[I0]), the natural logarithm (C's <math.h>)",
        example: "B = log(A, [i, j] -> [i, j])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_log),
    },
    Builtin {
        name: "vabs",
        signature: "vabs(t, I0)",
        equation: "eq. 15 (extension)",
        summary: "the virtual element-wise the absolute value abs(t[I0]); I0 is omitted when t carries iterators",
        example: "S = vabs(A, [i, j])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_vabs),
    },
    Builtin {
        name: "abs",
        signature: "abs(t, I0 -> I1)",
        equation: "eq. 16 (extension)",
        summary: "□[I1] = abs(t[I0]), the absolute value (C's <math.h>)",
        example: "B = abs(A, [i, j] -> [i, j])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_abs),
    },
    Builtin {
        name: "vlt",
        signature: "vlt(t0, t1, [I0, I1])",
        equation: "eq. 15 (extension)",
        summary: "the virtual element-wise comparison (t0[I0] < t1[I1]): 1 where t0[I0] is less than t1[I1], else 0 (a condition for vselect)",
        example: "c = vlt(S, 0.1, [[j], ])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_vlt),
    },
    Builtin {
        name: "vle",
        signature: "vle(t0, t1, [I0, I1])",
        equation: "eq. 15 (extension)",
        summary: "the virtual element-wise comparison (t0[I0] <= t1[I1]): 1 where t0[I0] is at most t1[I1], else 0 (a condition for vselect)",
        example: "c = vle(S, 0.1, [[j], ])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_vle),
    },
    Builtin {
        name: "vgt",
        signature: "vgt(t0, t1, [I0, I1])",
        equation: "eq. 15 (extension)",
        summary: "the virtual element-wise comparison (t0[I0] > t1[I1]): 1 where t0[I0] is greater than t1[I1], else 0 (a condition for vselect)",
        example: "c = vgt(S, 0.1, [[j], ])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_vgt),
    },
    Builtin {
        name: "vge",
        signature: "vge(t0, t1, [I0, I1])",
        equation: "eq. 15 (extension)",
        summary: "the virtual element-wise comparison (t0[I0] >= t1[I1]): 1 where t0[I0] is at least t1[I1], else 0 (a condition for vselect)",
        example: "c = vge(S, 0.1, [[j], ])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_vge),
    },
    Builtin {
        name: "veq",
        signature: "veq(t0, t1, [I0, I1])",
        equation: "eq. 15 (extension)",
        summary: "the virtual element-wise comparison (t0[I0] == t1[I1]): 1 where t0[I0] is equal to t1[I1], else 0 (a condition for vselect)",
        example: "c = veq(S, 0.1, [[j], ])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_veq),
    },
    Builtin {
        name: "vne",
        signature: "vne(t0, t1, [I0, I1])",
        equation: "eq. 15 (extension)",
        summary: "the virtual element-wise comparison (t0[I0] != t1[I1]): 1 where t0[I0] is not equal to t1[I1], else 0 (a condition for vselect)",
        example: "c = vne(S, 0.1, [[j], ])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_vne),
    },
    Builtin {
        name: "vselect",
        signature: "vselect(c, t, f, [Ic, It, If])",
        equation: "eq. 15 (extension)",
        summary: "the virtual element-wise select (c[Ic] != 0 ? t[It] : f[If]); c is a comparison (vle, ...) or any tensor; an else value is required",
        example: "v = vselect(c, 1.0, S, [[j], , [j]])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_vselect),
    },
    Builtin {
        name: "select",
        signature: "select(c, t, f, [Ic, It, If] -> I)",
        equation: "eq. 16 (extension)",
        summary: "□[I] = (c[Ic] != 0 ? t[It] : f[If])",
        example: "S2 = @S: select(c, 1.0, S, [[j], , [j]] -> [j])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_select),
    },
    Builtin {
        name: "vpow",
        signature: "vpow(t0, t1, [I0, I1])",
        equation: "eq. 15 (extension)",
        summary: "the virtual element-wise pow(t0[I0], t1[I1]): t0[I0] raised to the power t1[I1]",
        example: "P = vpow(A, 2.0, [[i], ])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_vpow),
    },
    Builtin {
        name: "pow",
        signature: "pow(t0, t1, [I0, I1] -> I2)",
        equation: "eq. 16 (extension)",
        summary: "□[I2] = pow(t0[I0], t1[I1]): t0[I0] raised to the power t1[I1] (C's <math.h>)",
        example: "P = pow(A, 2.0, [[i], ] -> [i])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_pow),
    },
    Builtin {
        name: "vmin",
        signature: "vmin(t0, t1, [I0, I1])",
        equation: "eq. 15 (extension)",
        summary: "the virtual element-wise min(t0[I0], t1[I1]): the smaller of t0[I0] and t1[I1]",
        example: "M = vmin(A, B, [[i, k], [k, j]])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_vmin),
    },
    Builtin {
        name: "min",
        signature: "min(t0, t1, [I0, I1] -> I2)",
        equation: "eq. 16 (extension)",
        summary: "□[I2] = min(t0[I0], t1[I1]): the smaller of t0[I0] and t1[I1] (C's <math.h>)",
        example: "M = min(A, B, [[i, j], [i, j]] -> [i, j])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_min),
    },
    Builtin {
        name: "vmax",
        signature: "vmax(t0, t1, [I0, I1])",
        equation: "eq. 15 (extension)",
        summary: "the virtual element-wise max(t0[I0], t1[I1]): the larger of t0[I0] and t1[I1]",
        example: "M = vmax(A, 0.0, [[i], ])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_vmax),
    },
    Builtin {
        name: "max",
        signature: "max(t0, t1, [I0, I1] -> I2)",
        equation: "eq. 16 (extension)",
        summary: "□[I2] = max(t0[I0], t1[I1]): the larger of t0[I0] and t1[I1] (C's <math.h>)",
        example: "M = max(A, 0.0, [[i], ] -> [i])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_max),
    },
    Builtin {
        name: "vcontract",
        signature: "vcontract(t0, t1, [r0, r1]) | vcontract(t0, t1, [[r0, r1], ...])",
        equation: "Sec. 4.2.3",
        summary: "the virtual contraction Σk t0[..k..] * t1[..k..] over 1-based dimension pairs; free iterators i1, i2, ...",
        example: "tmp = vcontract(B, Dt, [3, 1])",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_vcontract),
    },
    Builtin {
        name: "accumulator",
        signature: "accumulator([extents]) | accumulator(t)",
        equation: "eq. 33",
        summary: "the tensor being defined (□) read as its own accumulator, zero before its nest: t' in add(t', t2, [I', ] -> I'); only as an operand in place (stdlib, Rhai): bound to a name (`Z = accumulator(...)`) it is refused; in .teml, assign a vcontract (`C = eq(P, -> [i1, i2])`), which is zeroed the same way",
        example: "let A = add(accumulator([N, N]), P, [[i, j], ()], [i, j]);",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_accumulator),
    },
    Builtin {
        name: "build",
        signature: "build(t) | build(t, ranges)",
        equation: "eq. 19",
        summary: "the perfect loop nest around the assignment t; ranges inferred, or given: [[j, 0, i-1]] (affine bounds in outer iterators and constants), [i, N-1, 0, -1] (backward), [t] (bound by `around`); every access checked in bounds",
        example: "l = build(E, [[j, 0, i]])",
        returns: Returns::Nest,
        checked: false,
        call: Call::Value(b_build),
    },
    Builtin {
        name: "around",
        signature: "around(t, [lb, ub], l1, l2, ...) | around(t, [ub, lb, -1], l1, ...)",
        equation: "eq. 2 (extension)",
        summary: "the loop t from lb to ub (inclusive; [ub, lb, -1]: backward) around the sequence of the nests l1, l2, ... (a time loop); statements that use t are built with [t] among their ranges",
        example: "l = around(t, [0, T-1], l1, l2)",
        returns: Returns::Nest,
        checked: false,
        call: Call::Value(b_around),
    },
    Builtin {
        name: "lift",
        signature: "lift(t) | lift(t, order) | lift(t, order, layout)",
        equation: "TeIL Sec. 5 (lifting) and Sec. 3.6 eq. 5 (extension)",
        summary: "the nest of the sequence of single contractions, through fresh temporaries t_1, t_2, ..., that computes the assignment t (a product of three or more tensors summed over some iterators: einsum, nested vcontract; or of two where one carries a summed iterator of its own), each operand first summed over the iterators it alone carries where they span more than one point (TeIL eq. 5), then contracted in the order of fewest operations at the program's sizes (exhaustive up to 10 operands, greedy beyond) or in the order given (opt_einsum's path: each step [a, b] contracts the operands at positions a and b of the current list and appends the result; [] for the best); layout \"result_first\" (default: a temporary's dimensions in the order of the result's iterators, then the others) or \"summed_first\" (the iterators the next step sums over first, so that the temporary is contiguous along that step's result, as a register block wants); checked on random data, verified against t, its FLOPs before and after in its tree (docs/algebra.md)",
        example: "l = lift(v)",
        returns: Returns::Nest,
        checked: false,
        call: Call::Value(b_lift),
    },
    Builtin {
        name: "factor",
        signature: "factor(t)",
        equation: "TeIL Sec. 3.6 (distributivity; extension)",
        summary: "the assignment t with a common operand taken out of the sum or difference of products in its value: Σ_K X·R1 ± ... ± Σ_K X·Rn = Σ_K X·(R1 ± ... ± Rn) (the same tensor at the same indices in every product, a vcontract's iterators renamed to match, the same sums); checked on random data; the result defines a tensor of its own (C2 = factor(C)), whose kernels are verified against t as written (docs/algebra.md)",
        example: "C2 = factor(C)",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_factor),
    },
    Builtin {
        name: "expand",
        signature: "expand(t)",
        equation: "TeIL Sec. 3.6 (distributivity; extension)",
        summary: "the assignment t with its product distributed over the sum or difference among its factors: Σ_K X·(R1 ± ... ± Rn) = Σ_K X·R1 ± ... ± Σ_K X·Rn, the converse of factor; checked on random data; the result defines a tensor of its own, whose kernels are verified against t as written (docs/algebra.md)",
        example: "C3 = expand(C2)",
        returns: Returns::Tensor,
        checked: false,
        call: Call::Value(b_expand),
    },
    Builtin {
        name: "focus",
        signature: "focus(l, \"k\") | focus(l, \"k#2\") | focus(l, r) | focus(l)",
        equation: "eq. 2 (extension: an address below a branch)",
        summary: "l with its levels counted from the loop of iterator k (\"k#2\": the second such loop of the nest in program order; r: the loop at level r from the current focus), so that loops below a branch (in a sequence) can be transformed; every later transformation rewrites that loop's sub-tree and is checked on the whole nest; focus(l): the whole nest again",
        example: "lf = focus(l, \"j#2\")",
        returns: Returns::Nest,
        checked: false,
        call: Call::Value(b_focus),
    },
    Builtin {
        name: "stripmine",
        signature: "stripmine(l, r, v) | stripmine(l, r, v, \"aligned\")",
        equation: "eq. 20",
        summary: "splits the loop at level r into blocks of v iterations (outer <i>o, inner keeps i); remainders handled; \"aligned\": a loop whose start moves with an outer loop is cut at multiples of v (Pluto's tile lattice; `tile` does this)",
        example: "l1 = stripmine(l, 2, 32)",
        returns: Returns::Nest,
        checked: true,
        call: Call::Value(b_stripmine),
    },
    Builtin {
        name: "interchange",
        signature: "interchange(l, r1, r2) | interchange(l, [r1, r2])",
        equation: "eq. 21",
        summary: "swaps the loops at levels r1 and r2 of a perfect part of the nest",
        example: "l2 = interchange(l1, [2, 3])",
        returns: Returns::Nest,
        checked: true,
        call: Call::Value(b_interchange),
    },
    Builtin {
        name: "skew",
        signature: "skew(l, r1, r2, f)",
        equation: "Pluto (extension): j' = j + f*i",
        summary: "the loop at level r2 runs j' = j + f*i, i the loop at level r1 < r2; the body reads j as j' - f*i (then interchange or tile: time tiling)",
        example: "s = skew(l, 1, 2, 1)",
        returns: Returns::Nest,
        checked: true,
        call: Call::Value(b_skew),
    },
    Builtin {
        name: "shift",
        signature: "shift(l, r, c)",
        equation: "Pluto (extension): i' = i + c",
        summary: "the loop at level r runs i' = i + c, its body reading i as i' - c (aligns loops for fuse_inner, which guards each body by its range)",
        example: "s = shift(l2, 1, 1)",
        returns: Returns::Nest,
        checked: true,
        call: Call::Value(b_shift),
    },
    Builtin {
        name: "reverse",
        signature: "reverse(l, r)",
        equation: "loop reversal (extension): i' = lb + ub - i",
        summary: "the loop at level r runs its range backwards: its body reads i as lb + ub - i",
        example: "r = reverse(l, 2)",
        returns: Returns::Nest,
        checked: true,
        call: Call::Value(b_reverse),
    },
    Builtin {
        name: "distribute",
        signature: "distribute(l, r)",
        equation: "loop distribution (extension; the inverse of eq. 23)",
        summary: "the loop at level r, whose body is a sequence, becomes one loop per item, each with the same header and marks",
        example: "d = distribute(l, 1)",
        returns: Returns::Nest,
        checked: true,
        call: Call::Value(b_distribute),
    },
    Builtin {
        name: "sink",
        signature: "sink(l, r) | sink(l, r, \"first\" | \"last\") | sink(l, r, where, \"k\")",
        equation: "code sinking (extension; makes an imperfect nest perfect)",
        summary: "the statements beside the one inner loop k of the loop at level r move into k, guarded to run at one of its iterations: those before k at its first, those after at its last (the same order); \"first\" or \"last\" puts them all there (legal where their updates commute, e.g. max updates of one element); a loop beside k moves in whole, and where the body holds several loops the last argument names k (sink(l, 1, \"first\", \"j\")); then interchange, split",
        example: "s = sink(fj, 1, \"last\")",
        returns: Returns::Nest,
        checked: true,
        call: Call::Value(b_sink),
    },
    Builtin {
        name: "split",
        signature: "split(l, r, e)",
        equation: "index-set splitting (extension)",
        summary: "the loop at level r over [lb, ub] becomes two loops in turn, over [lb, e-1] and [e, ub] (e affine in outer iterators and constants); guards and inner bounds a part's range decides go (peels what sink guarded; a tile past the diagonal loses its triangle's bound)",
        example: "p = split(fj, 1, k+2)",
        returns: Returns::Nest,
        checked: true,
        call: Call::Value(b_split),
    },
    Builtin {
        name: "fuse_outer",
        signature: "fuse_outer(l1, l2, r)",
        equation: "eq. 22",
        summary: "fuses two nests whose loops at levels 1..r are the same; l1's body runs first",
        example: "l = fuse_outer(l4, l5, 5)",
        returns: Returns::Nest,
        checked: true,
        call: Call::Value(b_fuse_outer),
    },
    Builtin {
        name: "fuse_inner",
        signature: "fuse_inner(l, r)",
        equation: "eq. 23",
        summary: "fuses the sibling loops at level r (same range) into one",
        example: "l2 = fuse_inner(l1, 2)",
        returns: Returns::Nest,
        checked: true,
        call: Call::Value(b_fuse_inner),
    },
    Builtin {
        name: "unroll",
        signature: "unroll(l, r)",
        equation: "eq. 25",
        summary: "fully unrolls the loop at level r; level 1 yields a top-level sequence",
        example: "l2 = unroll(l1, 3)",
        returns: Returns::Nest,
        checked: true,
        call: Call::Value(b_unroll),
    },
    Builtin {
        name: "parallelize",
        signature: "parallelize(l, r)",
        equation: "Sec. 3.3.3",
        summary: "marks the loop at level r to run on several threads (OpenMP)",
        example: "l1 = parallelize(l, 1)",
        returns: Returns::Nest,
        checked: true,
        call: Call::Value(b_parallelize),
    },
    Builtin {
        name: "collapse",
        signature: "collapse(l, r, n)",
        equation: "OpenMP collapse",
        summary: "marks the n perfectly nested loops from level r to run on threads as one iteration space (`parallel for collapse(n)`): for parallel loops whose outer trip count is small",
        example: "l1 = collapse(l, 1, 2)",
        returns: Returns::Nest,
        checked: true,
        call: Call::Value(b_collapse),
    },
    Builtin {
        name: "registers",
        signature: "registers(l, r, T)",
        equation: "scalar replacement",
        summary: "keeps the elements of tensor T that the loop at level r accesses in local variables (vector registers inside explicit vector lanes) for the loop's duration: loaded before it, stored after it",
        example: "l2 = registers(l1, 4, C)",
        returns: Returns::Nest,
        checked: false,
        call: Call::Value(b_registers),
    },
    Builtin {
        name: "pack",
        signature: "pack(l, r, T [, order [, pad]])",
        equation: "packing",
        summary: "copies the block of tensor T that the loop at level r reads into a contiguous buffer before the loop, and reads the copy inside it (BLIS's packed panels); T must not be written in the loop; order lays the block's dimensions out in another order ([2, 1]: transposed), pad rounds the buffer's rows up to a multiple",
        example: "l2 = pack(l1, 2, B)",
        returns: Returns::Nest,
        checked: false,
        call: Call::Value(b_pack),
    },
    Builtin {
        name: "stream",
        signature: "stream(l, r, T)",
        equation: "non-temporal stores",
        summary: "the vectorized innermost loop at level r stores its whole vectors of T with streaming (non-temporal) stores, which skip reading the cache line first, after peeling the loop to T's vector alignment; for a result written once per kernel and not read back soon",
        example: "l3 = stream(l2, 2, B)",
        returns: Returns::Nest,
        checked: false,
        call: Call::Value(b_stream),
    },
    Builtin {
        name: "regroup",
        signature: "regroup(l, T, d, V [, pad])",
        equation: "layouts and padding",
        summary: "stores tensor T with dimension d regrouped into blocks of V (seed 004's layout type: element x at [.., x_d div V, .., x_d mod V], AoS to SoA/AoSoA); V must divide the extent unless pad is 1; the kernel converts T at entry and back at exit",
        example: "l2 = regroup(l1, P, 1, 8)",
        returns: Returns::Nest,
        checked: false,
        call: Call::Value(b_regroup),
    },
    Builtin {
        name: "permute_layout",
        signature: "permute_layout(l, T, order)",
        equation: "layouts and padding",
        summary: "stores tensor T with its dimensions in another order ([2, 1]: transposed), every access rewritten; the kernel converts T at entry and back at exit",
        example: "l2 = permute_layout(l1, B, [2, 1])",
        returns: Returns::Nest,
        checked: false,
        call: Call::Value(b_permute_layout),
    },
    Builtin {
        name: "pad",
        signature: "pad(l, T, d, m [, extra])",
        equation: "layouts and padding",
        summary: "pads dimension d of tensor T's buffer up to a multiple of m, then extra more elements (seed 001: rows of whole vectors, leading dimensions against conflict misses); invisible to the program, its inputs and outputs",
        example: "l2 = pad(l1, A, 2, 8, 8)",
        returns: Returns::Nest,
        checked: false,
        call: Call::Value(b_pad),
    },
    Builtin {
        name: "in_place",
        signature: "in_place(l, y, x)",
        equation: "seed 000, compatible statements",
        summary: "stores the result y over the operand x: the nest writes x where it wrote y, and the kernel's buffer holds x at entry and y at exit (no second buffer); x and y must have one shape and type, the nest must only read x, and each element of x must be read before the element of y over it is written (refused with a witness otherwise)",
        example: "l2 = in_place(l1, y, x)",
        returns: Returns::Nest,
        checked: true,
        call: Call::Value(b_in_place),
    },
    Builtin {
        name: "privatize",
        signature: "privatize(l, r, T)",
        equation: "scalar and array expansion (Feautrier 1988; the converse of store_at)",
        summary: "gives tensor T one copy per iteration of the loop j at level r: every access T[x] becomes T[j - lb][x], which removes the dependences only T's reuse made (a scalar such as symm's temp2 then no longer pins j); every access to T must be inside the loop, each read must follow a write of that element in the same iteration (isl decides; a witness otherwise), T must not be a result, and the loop's bounds must be named constants",
        example: "l2 = privatize(l1, 2, temp2)",
        returns: Returns::Nest,
        checked: true,
        call: Call::Value(b_privatize),
    },
    Builtin {
        name: "store_at",
        signature: "store_at(l, r, T)",
        equation: "storage contraction",
        summary: "stores tensor T per iteration of the loop at level r: each iteration gets its own buffer of the block of T it accesses (private to its thread, in cache) instead of the whole tensor; every access to T must be inside the loop and read only what the same iteration wrote (after fusion, a temporary), and T must not be a result",
        example: "l2 = store_at(l1, 1, t)",
        returns: Returns::Nest,
        checked: true,
        call: Call::Value(b_store_at),
    },
    Builtin {
        name: "vectorize",
        signature: "vectorize(l, r [, bits])",
        equation: "Sec. 3.3.3",
        summary: "marks the loop at level r to run in SIMD lanes; bits (128, 256, 512) asks for vectors narrower than the target's widest",
        example: "l1 = vectorize(l, 3)",
        returns: Returns::Nest,
        checked: true,
        call: Call::Value(b_vectorize),
    },
];

/// The error for `id = accumulator(...)`: named, an accumulator would be an ordinary tensor
/// (random data, never zeroed); it is only the tensor being defined, inside the assignment that
/// defines it. Both front-ends raise it.
pub fn named_accumulator(id: &str) -> Error {
    Error::WrongKind {
        builtin: "accumulator".into(),
        arg: Arg::new(0, "use"),
        expected: "an accumulator as an operand of the assignment it accumulates for (Rhai: \
                   `let C = add(accumulator([N, N]), P, [[i, j], ()], [i, j]);`)"
            .into(),
        found: format!(
            "`{id} = accumulator(...)`, which would make `{id}` an ordinary tensor; in .teml, assign \
             the contraction itself (`C = eq(P, -> [i1, i2])` with `P = vcontract(...)`) to sum from zero"
        ),
    }
}

/// Refuses a transformed nest that reverses a dependence of its statements, or marks a loop
/// that carries one, with a witness.
pub fn legal(state: &State, builtin: &str, nest: &crate::ir::Nest) -> Result<()> {
    match crate::analysis::legality::check_here(state, nest) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => {
            Err(Error::Illegal { builtin: builtin.into(), reason: format!("illegal: {}", e.message) })
        }
        Err(e) if e.starts_with(crate::analysis::isl::UNDECIDED) => {
            Err(Error::Environment { builtin: builtin.into(), reason: e })
        }
        Err(e) => Err(Error::Environment {
            builtin: builtin.into(),
            reason: format!("cannot decide legality: {e}"),
        }),
    }
}

/// `P_stmt[id = builtin(args)]` (eq. 17, 18, 26): calls the builtin and binds the result to
/// `id` (with `@at:` naming the target tensor in generated code).
pub fn exec(state: &State, id: &str, at: Option<&str>, builtin: &str, args: &[ArgVal]) -> Result<State> {
    if builtin == "accumulator" {
        return Err(named_accumulator(id));
    }
    let v = call(state, builtin, args)?;
    super::tensor::assign(state, id, at, v)
}
