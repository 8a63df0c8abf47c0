//! The generated space as typed code. A rule never types a builtin call as text: it builds
//! [`E`]xpressions and [`S`]tatements (a call is the builtin's name, checked against the
//! registry, and its arguments), probes legality by applying exactly those statements through
//! the registry ([`apply`]), and the `.rhai` space is printed from them here (`Display`). Names
//! of the program's values go through [`crate::lang::rhai_ref`], so that a tensor named after
//! a word Rhai reserves (`var`, `fn`, ...) is written as `lookup("var")` everywhere.

use crate::ir::{Expr, Name, Nest, State, Value};
use crate::lang::{rhai_ref, rhai_string};
use crate::ops::registry::{self, ArgVal};
use std::fmt;

/// The functions a generated space calls that are not core builtins: the standard library's
/// composites and the script host's helpers (a test in `script` checks that each is one).
pub const SCRIPT_CALLEES: &[&str] = &[
    "permute",
    "tile",
    "register_tile",
    "amx_tile",
    "register_block",
    "param",
    "iter",
    "iterators",
    "depth",
    "parallel_levels",
    "data_parallel_levels",
];

/// An expression of a generated script.
#[derive(Clone, Debug, PartialEq)]
pub enum E {
    /// A variable of the script (`p`, `mr`, `parts`).
    Var(String),
    /// A value of the program, by its name (`C`; `lookup("var")` where Rhai reserves it).
    Value(Name),
    /// An integer.
    Int(i64),
    /// A string.
    Str(String),
    /// A boolean.
    Bool(bool),
    /// An affine index expression over the program's iterators and constants (`iter("k") + 2`).
    Index(Expr),
    /// A list `[...]`.
    List(Vec<E>),
    /// A call of a core builtin, a standard-library composite or a helper ([`call`]).
    Call(&'static str, Vec<E>),
    /// A method call: `x.len()`, `x.contains(y)`.
    Method(Box<E>, &'static str, Vec<E>),
    /// `x[i]`.
    At(Box<E>, Box<E>),
    /// `a op b` (`==`, `&&`, `+`, ...).
    Op(Box<E>, &'static str, Box<E>),
    /// `!a`.
    Not(Box<E>),
    /// `(a)`.
    Paren(Box<E>),
    /// A choice's value as `param` lists it and a test compares it (`8`, `"outer"`).
    Literal(String),
    /// `a..b`, or `a..=b` when inclusive.
    Range(Box<E>, Box<E>, bool),
}

/// A statement of a generated script.
#[derive(Clone, Debug, PartialEq)]
pub enum S {
    /// `let x = e;`
    Let(String, E),
    /// `x = e;` (`x` a variable or an element `parts[0]`).
    Set(E, E),
    /// `if c { ... }` (on one line).
    If(E, Vec<S>),
    /// `for x in e { ... }` (on one line).
    For(String, E, Vec<S>),
    /// `if c1 { ... } else if c2 { ... } else { ... }` (on one line).
    Chain(Vec<(E, Vec<S>)>, Vec<S>),
    /// `e;`: a statement builtin's call (`codegen(p);`).
    Call(E),
    /// `throw e;`: the script stops with the message `e`.
    Throw(E),
}

/// A call of `builtin` (a core builtin or one of [`SCRIPT_CALLEES`]) on `args`.
pub fn call(builtin: &'static str, args: Vec<E>) -> E {
    debug_assert!(callable(builtin), "`{builtin}` is neither a builtin nor a script callee");
    E::Call(builtin, args)
}

/// True for a core builtin or one of [`SCRIPT_CALLEES`].
pub fn callable(name: &str) -> bool {
    registry::lookup(name).is_some() || SCRIPT_CALLEES.contains(&name)
}

/// The script variable `name`.
pub fn local(name: &str) -> E {
    E::Var(name.to_string())
}

/// The integer `i`.
pub fn int(i: impl TryInto<i64>) -> E {
    E::Int(i.try_into().unwrap_or(i64::MAX))
}

/// The string `s`.
pub fn text(t: impl ToString) -> E {
    E::Str(t.to_string())
}

/// The program's value `name`.
pub fn value(name: &Name) -> E {
    E::Value(name.clone())
}

/// A list of integers.
pub fn ints<T: TryInto<i64> + Copy>(xs: &[T]) -> E {
    E::List(xs.iter().map(|&x| int(x)).collect())
}

/// `var = builtin(var, args...)`: one step of the path in `var`.
pub fn step_on(var: &str, builtin: &'static str, mut args: Vec<E>) -> S {
    args.insert(0, local(var));
    S::Set(local(var), call(builtin, args))
}

/// `p = builtin(p, args...)`.
pub fn step(builtin: &'static str, args: Vec<E>) -> S {
    step_on("p", builtin, args)
}

/// `p = focus(p, "address");`, the `steps`, then `p = focus(p);`: steps on one loop.
pub fn at(address: &str, steps: Vec<S>) -> Vec<S> {
    at_on("p", address, steps)
}

/// [`at`] on the path in `var`.
pub fn at_on(var: &str, address: &str, steps: Vec<S>) -> Vec<S> {
    let mut out = vec![step_on(var, "focus", vec![text(address)])];
    out.extend(steps);
    out.push(step_on(var, "focus", vec![]));
    out
}

/// `let x = e;`
pub fn let_(x: &str, e: E) -> S {
    S::Let(x.to_string(), e)
}

/// `x = e;`
pub fn set(x: E, e: E) -> S {
    S::Set(x, e)
}

impl E {
    fn op(self, op: &'static str, b: E) -> E {
        E::Op(Box::new(self), op, Box::new(b))
    }
    /// `self == b`
    pub fn eq(self, b: E) -> E {
        self.op("==", b)
    }
    /// `self != b`
    pub fn ne(self, b: E) -> E {
        self.op("!=", b)
    }
    /// `self && b`
    pub fn and(self, b: E) -> E {
        self.op("&&", b)
    }
    /// `self || b`
    pub fn or(self, b: E) -> E {
        self.op("||", b)
    }
    /// `self > b`
    pub fn gt(self, b: E) -> E {
        self.op(">", b)
    }
    /// `self + b`
    pub fn plus(self, b: E) -> E {
        self.op("+", b)
    }
    /// `self - b`
    pub fn minus(self, b: E) -> E {
        self.op("-", b)
    }
    /// `self[i]`
    pub fn at(self, i: E) -> E {
        E::At(Box::new(self), Box::new(i))
    }
    /// `self.name(args)`
    pub fn method(self, name: &'static str, args: Vec<E>) -> E {
        E::Method(Box::new(self), name, args)
    }
    /// `!self`
    pub fn negated(self) -> E {
        E::Not(Box::new(self))
    }
    /// `(self)`
    pub fn paren(self) -> E {
        E::Paren(Box::new(self))
    }
    /// `self..b`
    pub fn to(self, b: E) -> E {
        E::Range(Box::new(self), Box::new(b), false)
    }
    /// `self..=b`
    pub fn through(self, b: E) -> E {
        E::Range(Box::new(self), Box::new(b), true)
    }
}

fn list(f: &mut fmt::Formatter, xs: &[E]) -> fmt::Result {
    for (k, x) in xs.iter().enumerate() {
        if k > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{x}")?;
    }
    Ok(())
}

impl fmt::Display for E {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            E::Var(x) => f.write_str(x),
            E::Value(n) => f.write_str(&rhai_ref(n)),
            E::Int(i) => write!(f, "{i}"),
            E::Str(t) => f.write_str(&rhai_string(t)),
            E::Bool(b) => write!(f, "{b}"),
            E::Index(e) => f.write_str(&index_text(e)),
            E::List(xs) => {
                f.write_str("[")?;
                list(f, xs)?;
                f.write_str("]")
            }
            E::Call(name, args) => {
                write!(f, "{name}(")?;
                list(f, args)?;
                f.write_str(")")
            }
            E::Method(x, name, args) => {
                write!(f, "{x}.{name}(")?;
                list(f, args)?;
                f.write_str(")")
            }
            E::At(x, i) => write!(f, "{x}[{i}]"),
            E::Op(a, op, b) => write!(f, "{a} {op} {b}"),
            E::Not(a) => write!(f, "!{a}"),
            E::Paren(a) => write!(f, "({a})"),
            E::Literal(x) => f.write_str(x),
            E::Range(a, b, inclusive) => write!(f, "{a}..{}{b}", if *inclusive { "=" } else { "" }),
        }
    }
}

impl fmt::Display for S {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let block = |f: &mut fmt::Formatter, body: &[S]| -> fmt::Result {
            f.write_str("{ ")?;
            for s in body {
                write!(f, "{s} ")?;
            }
            f.write_str("}")
        };
        match self {
            S::Let(x, e) => write!(f, "let {x} = {e};"),
            S::Set(x, e) => write!(f, "{x} = {e};"),
            S::If(c, body) => {
                write!(f, "if {c} ")?;
                block(f, body)
            }
            S::For(x, e, body) => {
                write!(f, "for {x} in {e} ")?;
                block(f, body)
            }
            S::Chain(arms, otherwise) => {
                for (k, (c, body)) in arms.iter().enumerate() {
                    write!(f, "{}if {c} ", if k == 0 { "" } else { " else " })?;
                    block(f, body)?;
                }
                f.write_str(" else ")?;
                block(f, otherwise)
            }
            S::Call(e) => write!(f, "{e};"),
            S::Throw(e) => write!(f, "throw {e};"),
        }
    }
}

/// An affine expression as Rhai writes it over the program's iterators and constants:
/// `iter("k") + 2` (a constant part alone where it has no iterator).
fn index_text(e: &Expr) -> String {
    let mut parts: Vec<String> = Vec::new();
    for (x, c) in e.affine_terms().unwrap_or_default() {
        let it = format!("iter({})", rhai_string(x.as_ref()));
        parts.push(if c == 1 { it } else { format!("{c} * {it}") });
    }
    if e.constant() != 0 || parts.is_empty() {
        parts.push(e.constant().to_string());
    }
    parts.join(" + ")
}

/// `e` as an index expression of a script, where it is affine.
pub fn index(e: &Expr) -> Option<E> {
    e.affine_terms().map(|_| E::Index(e.clone()))
}

/// The statements of one line, as the space prints them.
pub fn line(stmts: &[S]) -> String {
    stmts.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(" ")
}

/// The nest in `var` after `steps`, each applied through the registry as the script applies
/// it (its validation, its rewrite, and the legality check of the builtins that reorder or
/// mark loops), from `nest` in `var` and the script variables `env`. A probe runs straight
/// steps only: a statement other than `let`/`=` of a call is refused, as is a call of a
/// standard-library composite.
pub fn apply(
    state: &State,
    var: &str,
    nest: &Nest,
    steps: &[S],
    env: &[(&str, ArgVal)],
) -> Result<Nest, String> {
    let mut vars = owned(env);
    vars.push((var.to_string(), ArgVal::Value(Value::Nest(nest.clone()))));
    for st in steps {
        let (x, e) = match st {
            S::Let(x, e) => (x.clone(), e),
            S::Set(E::Var(x), e) => (x.clone(), e),
            other => return Err(format!("a probe applies steps, found `{other}`")),
        };
        let a = eval(state, &vars, e)?;
        vars.retain(|(y, _)| *y != x);
        vars.push((x, a));
    }
    match vars.into_iter().rev().find(|(x, _)| x == var) {
        Some((_, ArgVal::Value(Value::Nest(n)))) => Ok(n),
        _ => Err(format!("`{var}` holds no nest after the steps")),
    }
}

/// The nest `e` makes (a call through the registry) from the script variables `env`.
pub fn nest_of(state: &State, env: &[(&str, ArgVal)], e: &E) -> Result<Nest, String> {
    match eval(state, &owned(env), e)? {
        ArgVal::Value(Value::Nest(n)) => Ok(n),
        other => Err(format!("expected a nest from `{e}`, found {}", other.describe())),
    }
}

/// The script variables `env`, as the probe keeps them.
fn owned(env: &[(&str, ArgVal)]) -> Vec<(String, ArgVal)> {
    env.iter().map(|(x, a)| (x.to_string(), a.clone())).collect()
}

/// The argument the script hands the registry for `e`.
fn eval(state: &State, vars: &[(String, ArgVal)], e: &E) -> Result<ArgVal, String> {
    Ok(match e {
        E::Var(x) => vars
            .iter()
            .rev()
            .find(|(y, _)| y == x)
            .map(|(_, a)| a.clone())
            .ok_or_else(|| format!("the probe has no variable `{x}`"))?,
        E::Value(n) => ArgVal::Word(n.clone()),
        E::Int(i) => ArgVal::Int(*i),
        E::Str(t) => ArgVal::Str(t.clone()),
        E::Index(x) => ArgVal::Index(x.clone()),
        E::List(xs) => ArgVal::List(xs.iter().map(|x| eval(state, vars, x)).collect::<Result<_, _>>()?),
        E::Call(name, args) if registry::lookup(name).is_some() => {
            let args: Vec<ArgVal> = args.iter().map(|x| eval(state, vars, x)).collect::<Result<_, _>>()?;
            ArgVal::Value(registry::call(state, name, &args).map_err(|err| err.to_string())?)
        }
        other => return Err(format!("a probe evaluates builtin calls and literals, found `{other}`")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_print_as_the_space_writes_them() {
        let st = at("k#1", vec![step("split", vec![int(1), index(&Expr::var("k").add_int(2)).unwrap()])]);
        assert_eq!(line(&st), "p = focus(p, \"k#1\"); p = split(p, 1, iter(\"k\") + 2); p = focus(p);");
        let c = local("pack").eq(text("B")).or(local("pack").eq(text("both")));
        let st = S::If(c, vec![step("pack", vec![int(3), value(&"var".into())])]);
        assert_eq!(
            st.to_string(),
            "if pack == \"B\" || pack == \"both\" { p = pack(p, 3, lookup(\"var\")); }"
        );
        let st = S::For("r".into(), int(1).through(int(3)), vec![step("fuse_inner", vec![local("r")])]);
        assert_eq!(st.to_string(), "for r in 1..=3 { p = fuse_inner(p, r); }");
    }

    #[test]
    fn a_probe_applies_the_printed_steps_through_the_registry() {
        let src = "N = 64\nA = tensor([N, N])\nB = tensor([N, N])\nB = add(A, A, [[i, j], [i, j]] -> [i, j])\nl = build(B)\n";
        let st = crate::lang::eval_with(src, "t.teml", &State::new(), &crate::script::Stdlib::get()).unwrap();
        let Some(Value::Nest(n)) = st.get("l") else { panic!("no nest") };
        let steps =
            vec![step("stripmine", vec![int(2), local("w")]), step("interchange", vec![int(1), int(2)])];
        let out = apply(&st, "p", n, &steps, &[("w", ArgVal::Int(8))]).unwrap();
        assert_eq!(out.history.lines().last().map(String::as_str), Some("l3 = interchange(l2, 1, 2)"));
        // An illegal step is refused as the script's would be.
        let bad = vec![step("stripmine", vec![int(3), int(8)])];
        assert!(apply(&st, "p", n, &bad, &[]).is_err());
    }
}
