//! Evaluation: each statement through the builtin table (or a front-end's extensions), with
//! every error located at the argument it names.

use super::ast::{CallExpr, Ident, Program, Span, Stmt, StmtKind};
use super::diag::Located;
use crate::error::{Arg, Error, Result};
use crate::ir::{State, Value};
use crate::ops::{self, ArgVal};

/// Library functions written in another front-end (e.g. `tile` or `contract` from a Rhai
/// standard library). A call whose name is not in the builtin table is offered to
/// [`Extensions::call`].
pub trait Extensions {
    /// Calls `name` on `args`: `None` when `name` is not one of these functions.
    fn call(&self, state: &State, name: &str, args: &[ArgVal]) -> Option<Result<Value>>;

    /// The names of these functions (for suggestions and completion).
    fn names(&self) -> Vec<String>;
}

/// No extensions: only the builtin table.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoExtensions;

impl Extensions for NoExtensions {
    fn call(&self, _state: &State, _name: &str, _args: &[ArgVal]) -> Option<Result<Value>> {
        None
    }

    fn names(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Evaluates a parsed program from `state`, statement by statement. Pure: on error the caller
/// still has `state`.
pub fn eval_program(program: &Program, state: &State, ext: &dyn Extensions) -> Result<State, Located> {
    let mut s = state.clone();
    for stmt in &program.stmts {
        s = eval_one(program, stmt, &s, ext)?;
    }
    Ok(s)
}

/// Evaluates one statement of `program`.
pub fn eval_one(
    program: &Program,
    stmt: &Stmt,
    state: &State,
    ext: &dyn Extensions,
) -> Result<State, Located> {
    let at = |span: Span, msg: String| Located::at(&program.file, &program.src, span.start, span.len(), msg);
    match &stmt.kind {
        StmtKind::Const { name, value } => {
            if state.const_defs.contains(name.name.as_str()) {
                let old = state.constant(&name.name).unwrap_or(*value);
                return Err(at(
                    name.span,
                    format!(
                        "named constant `{}` is already defined ({} = {old}): expected one definition per constant (-D {}=INT overrides it), found a second",
                        name.name, name.name, name.name
                    ),
                ));
            }
            // A value given on the command line (-D) overrides the program's default.
            let mut s = if state.constant(&name.name).is_some() {
                state.clone()
            } else {
                state.with_const(&name.name, *value)
            };
            s.const_defs.insert(name.name.as_str().into());
            Ok(s)
        }
        StmtKind::Assign { target, at: at_id, call } => {
            let args = call.arg_vals();
            let name = call.name.name.as_str();
            let target_ref = Some((target, at_id.as_ref()));
            let result = if ops::lookup(name).is_some() {
                ops::exec(state, &target.name, at_id.as_ref().map(|i| i.name.as_str()), name, &args)
            } else {
                match ext.call(state, name, &args) {
                    Some(r) => r.and_then(|v| {
                        ops::assign(state, &target.name, at_id.as_ref().map(|i| i.name.as_str()), v)
                    }),
                    None => return Err(unknown_builtin(program, call, ext)),
                }
            };
            let mut s = result.map_err(|e| locate(program, stmt, call, target_ref, e))?;
            if let Some(crate::ir::Value::Tensor(t)) = s.get(&target.name) {
                for w in crate::analysis::lint::warnings(&s, t) {
                    let here = Located::at(&program.file, &program.src, call.name.span.start, 1, "");
                    s.warnings.0.push(format!("{}:{}:{}: {w}", here.file, here.line, here.col));
                }
            }
            Ok(s)
        }
        StmtKind::Call(call) => {
            let name = call.name.name.as_str();
            match ops::lookup(name) {
                Some(_) => {
                    let mut s = ops::run_stmt(state, name, &call.arg_vals())
                        .map_err(|e| locate(program, stmt, call, None, e))?;
                    // A kernel remembers the statement that asked for it.
                    if s.kernels.len() > state.kernels.len()
                        && let Some(k) = s.kernels.last_mut()
                    {
                        let here = Located::at(&program.file, &program.src, call.name.span.start, 1, "");
                        k.at = Some(format!("{}:{}:{}", here.file, here.line, here.col));
                    }
                    Ok(s)
                }
                None if ext.names().iter().any(|n| n == name) => Err(at(
                    call.name.span,
                    format!(
                        "`{name}` returns a value, which a statement would drop: bind it with `id = {name}(...)`"
                    ),
                )),
                None => Err(unknown_builtin(program, call, ext)),
            }
        }
    }
}

/// "unknown builtin `stripmin`; did you mean `stripmine`?"
fn unknown_builtin(program: &Program, call: &CallExpr, ext: &dyn Extensions) -> Located {
    let name = call.name.name.as_str();
    let mut names: Vec<String> = ops::builtins().iter().map(|b| b.name.to_string()).collect();
    names.extend(ext.names());
    let close = close_names(name, &names);
    let mut msg = format!("unknown builtin `{name}`");
    if !close.is_empty() {
        let quoted: Vec<String> = close.iter().map(|n| format!("`{n}`")).collect();
        let list = match quoted.as_slice() {
            [init @ .., last] if !init.is_empty() => format!("{} or {last}", init.join(", ")),
            _ => quoted.join(""),
        };
        msg.push_str(&format!("; did you mean {list}?"));
    }
    let span = call.name.span;
    Located::at(&program.file, &program.src, span.start, span.len(), msg).with_error(
        Error::UnknownIdentifier { builtin: name.into(), arg: Arg::new(0, "builtin"), name: name.into() },
    )
}

/// The names within a small edit distance of `name` (or sharing a prefix of 3 or more), closest
/// first, at most 3.
pub fn close_names(name: &str, names: &[String]) -> Vec<String> {
    let limit = (name.chars().count() / 3).max(1);
    let mut scored: Vec<(usize, &String)> = names
        .iter()
        .filter_map(|n| {
            let d = edit_distance(name, n);
            let prefix = name.len() >= 3 && (n.starts_with(name) || name.starts_with(n.as_str()));
            (d <= limit || prefix).then_some((d, n))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(3).map(|(_, n)| n.clone()).collect()
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = Vec::with_capacity(b.len() + 1);
        cur.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev.last().copied().unwrap_or(0)
}

/// Where an error of `call` points: the argument it names; the target (or `@id`) for the
/// binding's errors (builtin `id =`); the call's name for errors of another builtin (an
/// extension calling core builtins); else the start of the statement.
fn locate(
    program: &Program,
    stmt: &Stmt,
    call: &CallExpr,
    target: Option<(&Ident, Option<&Ident>)>,
    e: Error,
) -> Located {
    let stmt_start = Span { start: stmt.span.start, end: stmt.span.start + 1 };
    let builtin = e.builtin();
    let span = if builtin != call.name.name {
        match target {
            Some((t, at)) if builtin.ends_with('=') || builtin.ends_with(':') => at.unwrap_or(t).span,
            _ => call.name.span,
        }
    } else {
        match e.arg() {
            None => stmt_start,
            Some(a) if a.role.starts_with("result iterators") => {
                call.args.last().map_or(call.span, |x| x.span)
            }
            Some(a) if a.pos == 0 => call.name.span,
            Some(a) => match call.args.get(a.pos - 1).or(call.args.last()) {
                Some(x) => x.span,
                None => Span { start: call.span.end.saturating_sub(1), end: call.span.end },
            },
        }
    };
    Located::at(&program.file, &program.src, span.start, span.len(), e.to_string()).with_error(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        let names: Vec<String> =
            ["stripmine", "interchange", "vcontract", "unroll", "eq"].map(String::from).to_vec();
        assert_eq!(close_names("stripmin", &names), vec!["stripmine"]);
        assert_eq!(close_names("interchnage", &names), vec!["interchange"]);
        assert_eq!(close_names("vcont", &names), vec!["vcontract"]);
        assert_eq!(close_names("q", &names), vec!["eq"]);
        assert!(close_names("frobnicate", &names).is_empty());
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
