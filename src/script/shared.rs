//! What the engine's callbacks share with the host: σ, the recent reads, the last TeML error,
//! captured output, and the naming of values by the variables that hold them (eq. 17).

use super::values::{TensorVal, to_dynamic, to_value};
use crate::error::Error;
use crate::ir::{Name, State, Value};
use crate::ops;
use rhai::{Dynamic, EvalAltResult, Position, Scope};
use std::cell::RefCell;
use std::collections::VecDeque;

/// How many recent variable reads are remembered (for the names `codegen` records).
const READS_KEPT: usize = 64;

/// What the engine's callbacks share with the host: σ, the recent reads, the last TeML error
/// and captured output.
#[derive(Default)]
pub(crate) struct Shared {
    /// σ.
    pub state: RefCell<State>,
    /// Recent reads of variables holding values, oldest first.
    pub reads: RefCell<VecDeque<(Name, Value)>>,
    /// The TeML error a builtin raised last (to keep its type across Rhai).
    pub last_error: RefCell<Option<Error>>,
    /// Captured `print`/`debug` output.
    pub output: RefCell<String>,
    /// The variable whose binding failed last (its `let` is where the error points).
    pub binding: RefCell<Option<String>>,
    /// Set when a builtin returned a value carrying the hole: the top-level scope may hold
    /// values to bind.
    pub holes: std::cell::Cell<bool>,
    /// The leaves `accumulator(...)` returned: bound to a name, one would be an ordinary tensor.
    /// Held (not their addresses alone), so that no other value is ever allocated where one
    /// was and mistaken for it.
    pub accumulators: RefCell<Vec<crate::ir::TExpr>>,
    /// When the running script is stopped (see [`Limits::max_time`]).
    pub deadline: std::cell::Cell<Option<std::time::Instant>>,
    /// The measurer of `time(l)` and where `print` goes.
    pub env: super::Env,
    /// Warnings about top-level variables bound since the last sweep: (variable, message),
    /// located at the variable's definition when the script's source is at hand.
    pub warned: RefCell<Vec<(String, String)>>,
}

impl Shared {
    /// A Rhai error carrying a TeML error's message; the error itself is kept aside.
    pub fn fail(&self, e: Error) -> Box<EvalAltResult> {
        let msg = e.to_string();
        *self.last_error.borrow_mut() = Some(e);
        *self.binding.borrow_mut() = None;
        Box::new(EvalAltResult::ErrorRuntime(msg.into(), Position::NONE))
    }

    /// [`Shared::fail`] for an error met binding a variable (keeps its name).
    pub fn fail_binding(&self, e: Error) -> Box<EvalAltResult> {
        let name = self.binding.borrow_mut().take();
        let out = self.fail(e);
        *self.binding.borrow_mut() = name;
        out
    }

    pub fn remember(&self, name: &str, v: &Value) {
        let mut r = self.reads.borrow_mut();
        if r.len() == READS_KEPT {
            r.pop_front();
        }
        r.push_back((Name::from(name), v.clone()));
    }

    /// Binds the value a variable holds (eq. 17): a value carrying the hole □ gets the
    /// variable's name; at the top level the binding is also recorded in σ. Returns the bound
    /// value when it changed.
    pub fn bind(&self, name: &str, v: Value, top: bool) -> Result<Option<Value>, Error> {
        self.bind_inner(name, v, top).inspect_err(|_| *self.binding.borrow_mut() = Some(name.to_string()))
    }

    fn bind_inner(&self, name: &str, v: Value, top: bool) -> Result<Option<Value>, Error> {
        let holed = matches!(&v, Value::Tensor(t) if t.has_hole());
        if let Value::Tensor(t) = &v
            && self.accumulators.borrow().iter().any(|a| std::sync::Arc::ptr_eq(a, t))
        {
            return Err(ops::registry::named_accumulator(name));
        }
        if !holed {
            if top {
                self.state.borrow_mut().vars.insert(Name::from(name), v);
            }
            return Ok(None);
        }
        let s2 = ops::assign(&self.state.borrow(), name, None, v.clone())?;
        let bound = s2.get(name).cloned().unwrap_or(v);
        if top {
            if let Value::Tensor(t) = &bound {
                for w in crate::analysis::lint::warnings(&s2, t) {
                    self.warned.borrow_mut().push((name.to_string(), w));
                }
            }
            *self.state.borrow_mut() = s2;
        }
        Ok(Some(bound))
    }

    /// Binds every top-level variable whose value carries the hole, in the order of the scope
    /// (as `.teml` binds statement by statement), when a builtin may have made one since the
    /// last time. Shadowed variables are bound too: a declaration stays in σ.
    pub fn bind_pending(&self, scope: &mut Scope) -> Result<(), Error> {
        if !self.holes.replace(false) {
            return Ok(());
        }
        // `iter_raw` runs from the last entry (and keeps shared values shared).
        let mut entries: Vec<(String, bool, Dynamic)> =
            scope.iter_raw().map(|(n, c, v)| (n.to_string(), c, v.clone())).collect();
        entries.reverse();
        let mut changed = false;
        for (name, _, value) in entries.iter_mut() {
            if name.starts_with('_') {
                continue;
            }
            let Some(v @ Value::Tensor(_)) = to_value(&value.flatten_clone()) else { continue };
            if let Some(b) = self.bind(name, v, true)? {
                if value.is_shared() {
                    if let (Some(mut g), Value::Tensor(t)) = (value.write_lock::<TensorVal>(), &b) {
                        *g = TensorVal(t.clone());
                    }
                } else {
                    *value = to_dynamic(b);
                    changed = true;
                }
            }
        }
        if changed {
            scope.clear();
            for (name, constant, value) in entries {
                if constant {
                    scope.push_constant_dynamic(name, value);
                } else {
                    scope.push_dynamic(name, value);
                }
            }
        }
        Ok(())
    }

    /// The variable names the arguments of a call were read from, matched from the last
    /// argument backwards against the recent reads.
    pub fn arg_names(&self, args: &[Value]) -> Vec<Option<Name>> {
        let reads = self.reads.borrow();
        let mut cursor = reads.len();
        let mut out = vec![None; args.len()];
        for k in (0..args.len()).rev() {
            if let Some(p) = reads.iter().take(cursor).rposition(|(_, r)| *r == args[k]) {
                out[k] = Some(reads[p].0.clone());
                cursor = p;
            }
        }
        out
    }
}
