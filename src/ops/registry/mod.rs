//! The builtin table: the language. Both front-ends (`.teml` and Rhai), the REPL's completion
//! and the language reference read this one table; no builtin is implemented twice.
//!
//! Every entry takes the state (for identifiers and named constants) and a list of
//! [`ArgVal`]s, and returns a [`Value`]. Arguments are checked here, with messages that name
//! the builtin, the argument, what was expected and what was found.

mod adapters;
mod args;
mod table;

use crate::error::{Arg, Error, Result};
use crate::ir::{Expr, History, Name, Nest, Op, State, StepArg, Value, state::describe_tensor};
use table::BUILTINS;

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
    /// result against the dependences of the nest's statements ([`legality_gate`], isl) and refuses it
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
                    legality_gate(state, name, n)?;
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
                return Err(Error::bad_argument(
                    name,
                    Arg::new(k + 1, "nest"),
                    "a whole nest (fuse_outer fuses top-level loops; `focus(l)` drops a focus, \
                               `fuse_inner` fuses loops inside one)",
                    format!("a nest focused on the loop {}", l.header()),
                ));
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
pub fn step_arg(state: &State, a: &ArgVal) -> StepArg {
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

/// Describes what a value is, for messages outside the builtins.
pub fn describe(v: &Value) -> String {
    match v {
        Value::Tensor(x) => describe_tensor(x),
        Value::Nest(_) => "a loop nest".into(),
    }
}

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
pub fn legality_gate(state: &State, builtin: &str, nest: &crate::ir::Nest) -> Result<()> {
    match crate::analysis::legality::decide_at_sizes(state, nest) {
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
    crate::ops::tensor::assign(state, id, at, v)
}
