//! [`Stdlib`]: the standard library (`super::library`) as extensions of the `.teml` front-end.

use super::host::{Host, Output};
use super::library::{HELPERS, StdlibFn, function_names, functions};
use super::values::{from_arg, to_value};
use super::{Limits, ScriptError};
use crate::error::{Arg, Error, Result};
use crate::ir::{State, Value};
use crate::lang::Extensions;
use crate::ops::ArgVal;
use rhai::{Dynamic, EvalAltResult, Scope};
use std::rc::Rc;

thread_local! {
    /// One engine per thread for calls from the `.teml` front-end.
    static HOST: std::cell::OnceCell<std::result::Result<Rc<Host>, ScriptError>> =
        const { std::cell::OnceCell::new() };
}

/// The standard library as [`Extensions`] of the `.teml` front-end: `lt = tile(l, 32)` in a
/// `.teml` program calls the Rhai function `tile`.
///
/// ```
/// use teml::script::Stdlib;
/// let src = "A = tensor([8, 8])\nB = transpose(A, [[1, 2]])\nl = build(B)\nlt = tile(l, 4)\n";
/// let s = teml::lang::eval_with(src, "t.teml", &teml::ir::State::new(), &Stdlib::get()).unwrap();
/// assert!(s.get("lt").is_some());
/// ```
#[derive(Clone)]
pub struct Stdlib {
    host: std::result::Result<Rc<Host>, ScriptError>,
}

impl Stdlib {
    /// The library (its engine is built once per thread, on first use).
    pub fn get() -> Stdlib {
        let host = HOST.with(|cell| {
            cell.get_or_init(|| {
                Host::new(State::new(), &Limits::default(), Output::Std, super::Env::default()).map(Rc::new)
            })
            .clone()
        });
        Stdlib { host }
    }

    /// The documented functions.
    pub fn functions() -> &'static [StdlibFn] {
        functions()
    }

    /// A Markdown section documenting every function of the library (signature, paper
    /// equation, meaning, example), read from the `///` comments of `stdlib/*.rhai`, followed
    /// by the host helpers scripts may use.
    pub fn reference() -> String {
        let mut out = String::from(
            "\n## Standard library\n\nThe Sec. 4 compositions, written in Rhai in `stdlib/*.rhai` from the core builtins \
             exactly as the paper composes them. Both front-ends call them by name: `lt = tile(l, 32)` \
             in `.teml`, `let lt = tile(l, 32);` in `.rhai`. In Rhai the arrow of the paper's syntax is an \
             extra argument and an omitted iterator list is `()`.\n\n",
        );
        out.push_str("| function | signatures | paper | meaning | example |\n|---|---|---|---|---|\n");
        for f in functions() {
            let sigs: Vec<String> = f.signatures.iter().map(|s| format!("`{s}`")).collect();
            out.push_str(&format!(
                "| `{}` | {} | {} | {} | `{}` |\n",
                f.name,
                sigs.join("<br>"),
                f.equation,
                f.summary.replace('|', "\\|"),
                f.example.replace('|', "\\|")
            ));
        }
        for f in functions() {
            out.push_str(&format!("\n### `{}`\n\n", f.name));
            for s in &f.signatures {
                out.push_str(&format!("- `{s}`\n"));
            }
            out.push_str(&format!("\n{} ({}, `{}`)\n", f.summary, f.equation, f.file));
            if !f.details.is_empty() {
                out.push_str(&format!("\n{}\n", f.details));
            }
            if !f.example.is_empty() {
                out.push_str(&format!("\nExample: `{}`\n", f.example));
            }
        }
        out.push_str(
            "\n## Script helpers\n\nHost functions available to `.rhai` scripts (not TeML builtins: they \
             inspect values, so that the library can be written as compositions).\n\n| helper | signature | meaning |\n|---|---|---|\n",
        );
        for (name, sig, meaning) in HELPERS {
            out.push_str(&format!("| `{name}` | `{sig}` | {} |\n", meaning.replace('|', "\\|")));
        }
        out
    }

    fn signatures(name: &str) -> String {
        functions()
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.signatures.join(" or "))
            .unwrap_or_else(|| name.to_string())
    }

    fn run(&self, host: &Host, state: &State, name: &str, args: &[ArgVal]) -> Result<Value> {
        host.set_state(state.clone());
        *host.shared.last_error.borrow_mut() = None;
        let lookup = |w: &crate::ir::Name| state.get(w).cloned();
        let mut scope = Scope::new();
        let mut params = Vec::new();
        for (k, a) in args.iter().enumerate() {
            let p = format!("_a{k}");
            scope.push_dynamic(p.clone(), from_arg(a, &lookup));
            params.push(p);
        }
        let call = format!("{name}({})", params.join(", "));
        let result = host.engine.eval_with_scope::<Dynamic>(&mut scope, &call);
        host.set_state(State::new());
        let fail = |e: &EvalAltResult| -> Error {
            if let EvalAltResult::ErrorFunctionNotFound(sig, _) = e
                && sig.starts_with(&format!("{name} ("))
            {
                return Error::bad_argument(
                    name,
                    Arg::new(args.len(), "arguments"),
                    Self::signatures(name),
                    format!("{} arguments", args.len()),
                );
            }
            let err = host.error("stdlib", &call, e, None);
            // Stopped from outside (Ctrl-C, the time limit) or by a sandbox limit: not a bug.
            let stopped = matches!(
                e.unwrap_inner(),
                EvalAltResult::ErrorTerminated(..)
                    | EvalAltResult::ErrorTooManyOperations(..)
                    | EvalAltResult::ErrorStackOverflow(..)
                    | EvalAltResult::ErrorDataTooLarge(..)
            );
            match err.error {
                Some(core) => core,
                None if stopped => Error::Limit { builtin: name.into(), reason: err.message },
                // A library function stopped by an error of its own (not a builtin's, not `fail`).
                None => Error::Internal { builtin: name.into(), reason: err.message },
            }
        };
        match result {
            Ok(d) => to_value(&d).ok_or_else(|| Error::WrongKind {
                builtin: name.into(),
                arg: Arg::new(0, "result"),
                expected: "a tensor expression or a loop nest".into(),
                found: super::values::describe(&d),
            }),
            Err(e) => Err(fail(&e)),
        }
    }
}

/// The helpers that make nests, callable from `.teml` programs too: a written path uses them
/// (`l2 = permute(l1, [2, 1, 3])`).
pub const NEST_HELPERS: &[&str] = &["permute"];

impl Extensions for Stdlib {
    fn call(&self, state: &State, name: &str, args: &[ArgVal]) -> Option<Result<Value>> {
        if !functions().iter().any(|f| f.name == name) && !NEST_HELPERS.contains(&name) {
            return None;
        }
        Some(match &self.host {
            Ok(host) => self.run(host, state, name, args),
            Err(e) => Err(Error::Internal {
                builtin: name.into(),
                reason: format!("the standard library failed to load: {e}"),
            }),
        })
    }

    fn names(&self) -> Vec<String> {
        let mut names = function_names();
        names.extend(NEST_HELPERS.iter().map(|h| h.to_string()));
        names
    }
}
