//! The Rhai engine: the builtin table registered for arities 0..=6, the value types and their
//! operators, variable resolution (iterators, σ, naming by eq. 17), the host helpers the
//! standard library is written with, and the sandbox limits.

use super::Limits;
use super::error::{self, STDLIB_ID, ScriptError};
use super::values::{
    IndexVal, NestVal, TensorVal, describe, index_dynamic, short, to_arg, to_dynamic, to_value,
};
use crate::error::{Arg, Error};
use crate::ir::{Dim, Expr, Iters, Name, Nest, Op, State, TExpr, Value};
use crate::ops::{self, ArgVal, Returns};
use rhai::{
    Array, Dynamic, Engine, EvalAltResult, ImmutableString, NativeCallContext, OptimizationLevel, Position,
    Scope,
};

/// A compiled module, shared.
type SharedModule = rhai::Shared<rhai::Module>;
use std::any::TypeId;
use std::cell::RefCell;
use std::collections::{BTreeSet, VecDeque};
use std::rc::Rc;

/// How many recent variable reads are remembered (for the names `codegen` records).
const READS_KEPT: usize = 64;

/// The most arguments a builtin is registered for (`codegen` takes more).
pub(crate) const MAX_ARITY: usize = 6;

/// The most nests one `codegen` call is registered for.
const MAX_CODEGEN: usize = 16;

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

/// Where `print` and `debug` go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Output {
    /// Standard output (`print`) and standard error (`debug`).
    Std,
    /// Collected, for the REPL to show.
    Capture,
}

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
    pub accumulators: RefCell<Vec<*const crate::ir::TNode>>,
    /// When the running script is stopped (see [`Limits::max_time`]).
    pub deadline: std::cell::Cell<Option<std::time::Instant>>,
    /// The measurer of `time(l)` and where `print` goes.
    pub env: super::Env,
}

impl Shared {
    /// A Rhai error carrying a TeML error's message; the error itself is kept aside.
    fn fail(&self, e: Error) -> Box<EvalAltResult> {
        let msg = e.to_string();
        *self.last_error.borrow_mut() = Some(e);
        *self.binding.borrow_mut() = None;
        Box::new(EvalAltResult::ErrorRuntime(msg.into(), Position::NONE))
    }

    /// [`Shared::fail`] for an error met binding a variable (keeps its name).
    fn fail_binding(&self, e: Error) -> Box<EvalAltResult> {
        let name = self.binding.borrow_mut().take();
        let out = self.fail(e);
        *self.binding.borrow_mut() = name;
        out
    }

    fn remember(&self, name: &str, v: &Value) {
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
            && self.accumulators.borrow().contains(&std::sync::Arc::as_ptr(t))
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
    fn arg_names(&self, args: &[Value]) -> Vec<Option<Name>> {
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

thread_local! {
    /// The standard library, compiled once per thread (Rhai values are not `Send`).
    static STDLIB: std::cell::OnceCell<Result<SharedModule, ScriptError>> = const { std::cell::OnceCell::new() };
}

/// The standard library as a module (compiled on first use in this thread).
pub(crate) fn stdlib_module() -> Result<SharedModule, ScriptError> {
    STDLIB.with(|cell| cell.get_or_init(compile_stdlib).clone())
}

fn compile_stdlib() -> Result<SharedModule, ScriptError> {
    let mut engine = Engine::new_raw();
    engine.set_optimization_level(OptimizationLevel::None);
    engine.set_max_expr_depths(0, 0);
    let src = super::stdlib::source();
    let mut ast = engine.compile(&src).map_err(|e| error::from_parse("stdlib", &src, &e))?;
    ast.set_source(STDLIB_ID);
    let mut module = rhai::Module::eval_ast_as_new(Scope::new(), &ast, &engine)
        .map_err(|e| ScriptError::plain("stdlib", e.to_string()))?;
    module.set_id(STDLIB_ID);
    Ok(SharedModule::new(module))
}

/// An engine, its σ and its limits.
pub(crate) struct Host {
    pub engine: Engine,
    pub shared: Rc<Shared>,
    pub limits: Limits,
}

impl Host {
    /// A sandboxed engine starting from `state`, with the builtins, the helpers and the
    /// standard library.
    pub fn new(state: State, limits: &Limits, output: Output, env: super::Env) -> Result<Host, ScriptError> {
        let to_stderr = env.print_to_stderr;
        let shared = Rc::new(Shared { state: RefCell::new(state), env, ..Shared::default() });
        let mut engine = Engine::new();
        sandbox(&mut engine, limits);
        register_types(&mut engine);
        register_builtins(&mut engine, &shared);
        register_helpers(&mut engine, &shared);
        resolve_variables(&mut engine, &shared);
        let sh = shared.clone();
        engine.on_progress(move |ops| {
            if ops % 256 != 0 {
                return None;
            }
            if crate::runtime::interrupt::requested() {
                return Some(Dynamic::from("interrupted (Ctrl-C)"));
            }
            let late = sh.deadline.get().is_some_and(|d| std::time::Instant::now() > d);
            late.then(|| Dynamic::from("time limit"))
        });
        let (out, err) = (shared.clone(), shared.clone());
        match output {
            Output::Std => {
                engine.on_print(move |s| {
                    if to_stderr {
                        eprintln!("{s}");
                    } else {
                        println!("{s}");
                    }
                });
                engine.on_debug(|s, _, _| eprintln!("{s}"));
            }
            Output::Capture => {
                engine.on_print(move |s| {
                    let mut o = out.output.borrow_mut();
                    o.push_str(s);
                    o.push('\n');
                });
                engine.on_debug(move |s, _, _| {
                    let mut o = err.output.borrow_mut();
                    o.push_str(s);
                    o.push('\n');
                });
            }
        }
        engine.register_global_module(stdlib_module()?);
        Ok(Host { engine, shared, limits: limits.clone() })
    }

    /// Starts the clock of [`Limits::max_time`] for the script about to run.
    pub fn start_clock(&self) {
        self.shared.deadline.set(std::time::Instant::now().checked_add(self.limits.max_time));
    }

    /// σ now.
    pub fn state(&self) -> State {
        self.shared.state.borrow().clone()
    }

    /// Replaces σ.
    pub fn set_state(&self, s: State) {
        *self.shared.state.borrow_mut() = s;
    }

    /// Every name a script can call (for suggestions).
    pub fn callable_names(&self, ast: Option<&rhai::AST>) -> Vec<String> {
        let mut names: Vec<String> = ops::builtins().iter().map(|b| b.name.to_string()).collect();
        names.extend(super::stdlib::function_names());
        names.extend(HELPERS.iter().map(|h| h.0.to_string()));
        if let Some(ast) = ast {
            names.extend(ast.iter_functions().map(|f| f.name.to_string()));
        }
        names.sort();
        names.dedup();
        names
    }

    /// Converts an evaluation error of `src`.
    pub fn error(&self, file: &str, src: &str, e: &EvalAltResult, ast: Option<&rhai::AST>) -> ScriptError {
        let names = || self.callable_names(ast);
        let cx = error::Context {
            last_error: self.shared.last_error.borrow().clone(),
            names: &names,
            max_operations: self.limits.max_operations,
            max_time: self.limits.max_time,
            max_call_levels: self.limits.max_call_levels,
        };
        let mut out = error::from_eval(file, src, e, &cx);
        // An error binding a variable (eq. 17) points at the variable's definition.
        let binding = self.shared.binding.borrow().clone();
        if let (Some(name), Some(_)) = (binding, &out.error) {
            let (pos, width) = definition_of(src, &name);
            if !pos.is_none() {
                let notes = std::mem::take(&mut out.notes);
                let error = out.error.take();
                out = ScriptError::at(file, src, pos, width, out.message);
                out.notes = notes;
                out.error = error;
            }
        }
        out
    }

    /// Records every top-level variable of `scope` that holds a value in σ (naming those that
    /// still carry the hole), updating the scope with the bound values.
    pub fn sweep(&self, scope: &mut Scope, file: &str, src: &str) -> Result<(), ScriptError> {
        self.shared.holes.set(true);
        if let Err(e) = self.shared.bind_pending(scope) {
            let name = self.shared.binding.borrow().clone().unwrap_or_default();
            let (pos, width) = definition_of(src, &name);
            let mut out = ScriptError::at(file, src, pos, width, e.to_string());
            out.error = Some(e);
            return Err(out);
        }
        // Nothing carries the hole now: record the rest (nests, in scope order).
        for (name, _, value) in scope.iter() {
            if let (false, Some(v)) = (name.starts_with('_'), to_value(&value)) {
                self.shared.state.borrow_mut().vars.insert(Name::from(name), v);
            }
        }
        Ok(())
    }
}

/// The place of `let name` (or `name =`) in `src`, best effort, for errors met when a value
/// is bound at the end of a script.
fn definition_of(src: &str, name: &str) -> (Position, usize) {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = None;
    for (k, line) in src.lines().enumerate() {
        let t = line.trim_start();
        let rest = t.strip_prefix("let ").or_else(|| t.strip_prefix("const ")).unwrap_or(t).trim_start();
        if rest.starts_with(name) && !rest[name.len()..].starts_with(is_ident) {
            let col = line.len() - rest.len();
            found = Some((k + 1, line[..col].chars().count() + 1));
        }
    }
    match found.and_then(|(l, c)| Some((u16::try_from(l).ok()?, u16::try_from(c).ok()?))) {
        Some((l, c)) => (Position::new(l, c), name.chars().count()),
        None => (Position::NONE, 1),
    }
}

fn sandbox(engine: &mut Engine, limits: &Limits) {
    engine.set_optimization_level(OptimizationLevel::None);
    engine.set_max_operations(limits.max_operations);
    engine.set_max_call_levels(limits.max_call_levels);
    engine.set_max_expr_depths(limits.max_expr_depth, limits.max_fn_expr_depth);
    engine.set_max_string_size(limits.max_string_size);
    engine.set_max_array_size(limits.max_array_size);
    engine.set_max_map_size(limits.max_map_size);
    engine.set_max_variables(limits.max_variables);
    engine.set_max_functions(limits.max_functions);
    // No waiting outside the limits' sight.
    engine.register_fn("sleep", |_: i64| -> RhaiResult<()> {
        Err("sleep is not available in TeML scripts".into())
    });
    engine.register_fn("sleep", |_: f64| -> RhaiResult<()> {
        Err("sleep is not available in TeML scripts".into())
    });
    // No module is loaded from anywhere: `import` finds nothing.
    engine.set_max_modules(0);
    engine.set_module_resolver(rhai::module_resolvers::DummyModuleResolver::new());
}

// ---------------------------------------------------------------------------------------------
// Types and operators

fn affine(a: &Expr, b: &Expr) -> RhaiResult<IndexVal> {
    match (a.as_const(), b.as_const()) {
        (Some(k), _) => Ok(IndexVal(b.scale(k))),
        (_, Some(k)) => Ok(IndexVal(a.scale(k))),
        _ => {
            Err(format!("index expressions are affine: `({a})*({b})` is not (multiply by an integer)").into())
        }
    }
}

fn register_types(engine: &mut Engine) {
    engine.register_type_with_name::<TensorVal>("Tensor");
    engine.register_type_with_name::<NestVal>("Nest");
    engine.register_type_with_name::<IndexVal>("Index");
    // Printing: trees for values, the expression for indices.
    engine.register_fn("to_string", |t: &mut TensorVal| t.0.tree().trim_end().to_string());
    engine.register_fn("to_debug", |t: &mut TensorVal| t.0.tree().trim_end().to_string());
    engine.register_fn("to_string", |n: &mut NestVal| n.0.tree().trim_end().to_string());
    engine.register_fn("to_debug", |n: &mut NestVal| n.0.tree().trim_end().to_string());
    engine.register_fn("to_string", |i: &mut IndexVal| i.0.to_string());
    engine.register_fn("to_debug", |i: &mut IndexVal| i.0.to_string());
    // Structural equality.
    engine.register_fn("==", |a: TensorVal, b: TensorVal| a == b);
    engine.register_fn("!=", |a: TensorVal, b: TensorVal| a != b);
    engine.register_fn("==", |a: NestVal, b: NestVal| a == b);
    engine.register_fn("!=", |a: NestVal, b: NestVal| a != b);
    engine.register_fn("==", |a: IndexVal, b: IndexVal| a == b);
    engine.register_fn("!=", |a: IndexVal, b: IndexVal| a != b);
    engine.register_fn("==", |a: IndexVal, b: i64| a.0 == Expr::int(b));
    engine.register_fn("!=", |a: IndexVal, b: i64| a.0 != Expr::int(b));
    engine.register_fn("==", |a: i64, b: IndexVal| b.0 == Expr::int(a));
    engine.register_fn("!=", |a: i64, b: IndexVal| b.0 != Expr::int(a));
    // Affine arithmetic on indices.
    engine.register_fn("+", |a: IndexVal, b: IndexVal| index_dynamic(a.0.add(&b.0)));
    engine.register_fn("+", |a: IndexVal, b: i64| index_dynamic(a.0.add_int(b)));
    engine.register_fn("+", |a: i64, b: IndexVal| index_dynamic(b.0.add_int(a)));
    engine.register_fn("-", |a: IndexVal, b: IndexVal| index_dynamic(a.0.sub(&b.0)));
    engine.register_fn("-", |a: IndexVal, b: i64| index_dynamic(a.0.add_int(-b)));
    engine.register_fn("-", |a: i64, b: IndexVal| index_dynamic(Expr::int(a).sub(&b.0)));
    engine.register_fn("-", |a: IndexVal| index_dynamic(a.0.scale(-1)));
    engine.register_fn("*", |a: IndexVal, b: IndexVal| affine(&a.0, &b.0).map(|x| index_dynamic(x.0)));
    engine.register_fn("*", |a: IndexVal, b: i64| index_dynamic(a.0.scale(b)));
    engine.register_fn("*", |a: i64, b: IndexVal| index_dynamic(b.0.scale(a)));
}

// ---------------------------------------------------------------------------------------------
// Variables

/// Resolves variable reads (see the module documentation of [`crate::script`]):
///
/// - a variable of the scope holding a value is bound on reading (eq. 17), except inside the
///   standard library and for names starting with `_`;
/// - an undefined name at the top level that σ maps (e.g. defined by a `.teml` line in the
///   REPL) is σ's value;
/// - any other undefined name is an index expression: an iterator or a named constant.
#[allow(deprecated)] // `on_var` and `on_def_var` are marked volatile, not deprecated
fn resolve_variables(engine: &mut Engine, shared: &Rc<Shared>) {
    let sh = shared.clone();
    engine.on_var(move |name, _index, mut ctx| {
        let in_stdlib = ctx.iter_namespaces().any(|m| m.id() == Some(STDLIB_ID));
        let top = ctx.call_level() == 0 && !in_stdlib;
        if top {
            sh.bind_pending(ctx.scope_mut()).map_err(|e| sh.fail_binding(e))?;
        }
        if let Some(d) = ctx.scope().get(name) {
            if in_stdlib || name.starts_with('_') {
                return Ok(None);
            }
            let Some(v) = to_value(d) else { return Ok(None) };
            let bound = sh.bind(name, v.clone(), top).map_err(|e| sh.fail_binding(e))?;
            sh.remember(name, bound.as_ref().unwrap_or(&v));
            let Some(b) = bound else { return Ok(None) };
            return match ctx.scope_mut().get_mut(name) {
                Some(slot) => {
                    if slot.is_shared() {
                        // A variable a closure captured: keep it shared.
                        if let (Some(mut g), Value::Tensor(t)) = (slot.write_lock::<TensorVal>(), &b) {
                            *g = TensorVal(t.clone());
                        }
                    } else {
                        *slot = to_dynamic(b);
                    }
                    Ok(None)
                }
                // A constant: read the bound value (it is bound the same way on every read).
                None => Ok(Some(to_dynamic(b))),
            };
        }
        if top && let Some(v) = sh.state.borrow().get(name) {
            return Ok(Some(to_dynamic(v.clone())));
        }
        Ok(Some(Dynamic::from(IndexVal(Expr::var(name)))))
    });
    // Before each top-level `let`, the values of the statements before it are bound.
    let sh = shared.clone();
    engine.on_def_var(move |runtime, _info, mut ctx| {
        let in_stdlib = ctx.iter_namespaces().any(|m| m.id() == Some(STDLIB_ID));
        if runtime && ctx.call_level() == 0 && !in_stdlib {
            sh.bind_pending(ctx.scope_mut()).map_err(|e| sh.fail_binding(e))?;
        }
        Ok(true)
    });
}

// ---------------------------------------------------------------------------------------------
// Builtins

/// Converts the arguments of a builtin call.
fn args_of(builtin: &str, args: &[&mut Dynamic]) -> Result<Vec<ArgVal>, Error> {
    args.iter()
        .enumerate()
        .map(|(k, d)| {
            to_arg(d).map_err(|found| Error::WrongKind {
                builtin: builtin.into(),
                arg: Arg::new(k + 1, "argument"),
                expected: "a tensor expression, a loop nest, an index, a number, a string, a list or ()"
                    .into(),
                found,
            })
        })
        .collect()
}

/// An assignment whose target is still the hole cannot be an argument: the tensor it assigns
/// has no name to be read by (`let X = ...` names it).
fn unnamed_assignment(builtin: &str, argv: &[ArgVal]) -> Result<(), Error> {
    for (k, a) in argv.iter().enumerate() {
        if let ArgVal::Value(Value::Tensor(t)) = a
            && t.target().is_some_and(|x| x.op == Op::Hole)
        {
            return Err(Error::WrongKind {
                builtin: builtin.into(),
                arg: Arg::new(k + 1, "argument"),
                expected: "a named assignment: bind it to a variable first (`let X = ...;`)".into(),
                found: format!("the unnamed assignment `{t}`"),
            });
        }
    }
    Ok(())
}

fn call_builtin(
    sh: &Shared,
    name: &'static str,
    returns: Returns,
    args: &mut [&mut Dynamic],
) -> RhaiResult<Dynamic> {
    let mut argv = args_of(name, args).map_err(|e| sh.fail(e))?;
    unnamed_assignment(name, &argv).map_err(|e| sh.fail(e))?;
    match returns {
        Returns::Stmt => {
            let values: Vec<Value> = args.iter().filter_map(|d| to_value(d)).collect();
            let names = sh.arg_names(&values);
            if name == "init" {
                // init names its tensor: the real tensor the value denotes.
                if let Some(ArgVal::Value(Value::Tensor(t))) = argv.first() {
                    let id =
                        t.target().unwrap_or(t).id().cloned().or_else(|| names.first().cloned().flatten());
                    if let Some(id) = id {
                        argv[0] = ArgVal::Word(id);
                    }
                }
            }
            let before = sh.state.borrow().kernels.len();
            let mut s = ops::run_stmt(&sh.state.borrow(), name, &argv).map_err(|e| sh.fail(e))?;
            if name == "codegen"
                && s.kernels.len() == before + 1
                && let Some(req) = s.kernels.last_mut()
            {
                for (k, n) in names.into_iter().enumerate() {
                    if let (Some(n), Some(slot)) = (n, req.names.get_mut(k)) {
                        *slot = n;
                    }
                }
            }
            *sh.state.borrow_mut() = s;
            Ok(Dynamic::UNIT)
        }
        Returns::Tensor | Returns::Nest => {
            let v = ops::call(&sh.state.borrow(), name, &argv).map_err(|e| sh.fail(e))?;
            if matches!(&v, Value::Tensor(t) if t.has_hole()) {
                sh.holes.set(true);
            }
            if let (true, Value::Tensor(t)) = (name == "accumulator", &v) {
                sh.accumulators.borrow_mut().push(std::sync::Arc::as_ptr(t));
            }
            Ok(to_dynamic(v))
        }
    }
}

fn register_builtins(engine: &mut Engine, shared: &Rc<Shared>) {
    for b in ops::builtins() {
        let max = if b.name == "codegen" { MAX_CODEGEN } else { MAX_ARITY };
        for n in 0..=max {
            let sh = shared.clone();
            let (name, returns) = (b.name, b.returns);
            engine.register_raw_fn(
                name,
                vec![TypeId::of::<Dynamic>(); n],
                move |_ctx: NativeCallContext, args: &mut [&mut Dynamic]| {
                    call_builtin(&sh, name, returns, args)
                },
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// The host helpers: name, signature, meaning. Not TeML builtins: they inspect values so that
/// the standard library can be written as compositions of builtins.
pub(crate) const HELPERS: &[(&str, &str, &str)] = &[
    (
        "at",
        "at(\"C\", t)",
        "the @id: form (eq. 18): t with its hole filled by C; `let D = at(\"C\", add(...))`",
    ),
    ("rank", "rank(t)", "the rank of a tensor expression (of the assigned tensor for an assignment)"),
    ("shape", "shape(t)", "the extents of t: integers, or indices for named constants (`()` where unknown)"),
    ("depth", "depth(l)", "the number of loops on the single path from the root of l"),
    ("iterators", "iterators(l)", "the iterator names along that path, outermost first (strings)"),
    ("iter", "iter(\"name\")", "the index expression of an iterator or named constant given by name"),
    (
        "fresh_iters",
        "fresh_iters(n, avoid) | fresh_iters(prefix, n, avoid)",
        "the iterators i1..in (or <prefix>1..) that are neither named constants nor summed over in the tensors (or names) of avoid",
    ),
    (
        "free_iters",
        "free_iters(t)",
        "the free iterators t carries, in order of first appearance ([] for a declared tensor)",
    ),
    (
        "carries_iters",
        "carries_iters(t)",
        "true if t carries iterators (an operation, an indexed access, a scalar): its list is omitted with ()",
    ),
    (
        "with_iters",
        "with_iters(t, I)",
        "t indexed by I (a declared tensor), or with its free iterators renamed to I position by position (an operation; eq. 14-15 via ops::operand)",
    ),
    ("constant", "constant(\"N\")", "the value -D gave the named constant N, or ()"),
    (
        "constant_names",
        "constant_names(ts)",
        "the named constants of σ and of the shapes of the tensors ts (strings)",
    ),
    ("stmts", "stmts(l)", "the statements of a nest, in program order"),
    ("tree", "tree(x)", "the readable tree of a tensor expression or loop nest"),
    ("paper", "paper(x)", "the paper's notation ⟨(op, S, I), [...]⟩ of a tensor expression or loop nest"),
    ("infix", "infix(t)", "a statement or expression as C writes it: `E[i1][i2] = C[i1][i2] * D[i1][i2]`"),
    (
        "fail",
        "fail(builtin, pos, role, expected, found)",
        "stops with the error `builtin: argument pos (role): expected ..., found ...`",
    ),
    ("describe", "describe(x)", "a short description of any value, for error messages"),
    (
        "legal",
        "legal(l)",
        "true if the nest keeps every dependence of its statements (docs/legality.md), else the reason with a witness (a string)",
    ),
    (
        "legal_permutations",
        "legal_permutations(l) | legal_permutations(l, d)",
        "the legal orders of the outer d loops (at most 5; all of the single path by default), each a list of levels: [1, 3, 2] puts level 3 second",
    ),
    (
        "permute",
        "permute(l, order)",
        "the nest with its outer loops in `order` (levels), checked like interchange; () where a bound forbids the order",
    ),
    ("legal_fusions", "legal_fusions(l1, l2)", "the levels r at which fuse_outer(l1, l2, r) is legal"),
    (
        "param",
        "param(\"name\", choices)",
        "a tuning parameter: the choice `teml tune` picks for this candidate (the first choice under `teml run`); docs/tuning.md",
    ),
    (
        "history",
        "history(l)",
        "the builtin calls that made the nest, from its build, as .teml statements (strings)",
    ),
    (
        "time",
        "time(l) | time([l1, l2])",
        "compiles, verifies and times the nests as one kernel: a map #{median_s, min_s, spread, reps, gflops, verified, verification, error, threads, cflags}; a kernel that failed verification has no time (`median_s` is ()); docs/tuning.md",
    ),
];

/// A JSON object as a Rhai map (numbers, booleans, strings, `()` for null).
fn json_map(v: &serde_json::Value) -> rhai::Map {
    fn dynamic(v: &serde_json::Value) -> Dynamic {
        match v {
            serde_json::Value::Null => Dynamic::UNIT,
            serde_json::Value::Bool(b) => Dynamic::from(*b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Dynamic::from(i),
                None => Dynamic::from(n.as_f64().unwrap_or(f64::NAN)),
            },
            serde_json::Value::String(s) => Dynamic::from(s.clone()),
            serde_json::Value::Array(xs) => Dynamic::from(xs.iter().map(dynamic).collect::<Array>()),
            serde_json::Value::Object(_) => Dynamic::from(json_map(v)),
        }
    }
    match v {
        serde_json::Value::Object(m) => m.iter().map(|(k, x)| (k.as_str().into(), dynamic(x))).collect(),
        _ => rhai::Map::new(),
    }
}

fn tensor_of(d: &Dynamic, helper: &str) -> RhaiResult<TExpr> {
    match to_value(d) {
        Some(Value::Tensor(t)) => Ok(t),
        _ => Err(format!("{helper}: expected a tensor expression, found {}", describe(d)).into()),
    }
}

fn nest_of(d: &Dynamic, helper: &str) -> RhaiResult<Nest> {
    match to_value(d) {
        Some(Value::Nest(n)) => Ok(n),
        _ => Err(format!("{helper}: expected a loop nest, found {}", describe(d)).into()),
    }
}

/// The tensor an expression denotes as an operand: an assignment's real target.
fn operand_view(t: &TExpr) -> TExpr {
    if t.is_assign() { crate::ir::real_leaf(t.target().unwrap_or(t)) } else { t.clone() }
}

fn free_iters(state: &State, t: &TExpr) -> Vec<Name> {
    if t.is_assign() {
        return t
            .target()
            .and_then(|x| x.index_list())
            .map(|xs| xs.iter().filter_map(|x| x.as_var().cloned()).collect())
            .unwrap_or_default();
    }
    let consts = ops::infer::constants(state, &[t]);
    let bound: BTreeSet<Name> = t.bound_iters().into_iter().collect();
    ops::infer::iterators(t, &consts).into_iter().filter(|v| !bound.contains(v)).collect()
}

fn index_list(d: &Dynamic, helper: &str) -> RhaiResult<Vec<Expr>> {
    let Some(xs) = d.clone().try_cast::<Array>() else {
        return Err(format!("{helper}: expected a list of indices, found {}", describe(d)).into());
    };
    xs.iter()
        .map(|x| {
            if let Some(IndexVal(e)) = x.clone().try_cast::<IndexVal>() {
                Ok(e)
            } else if let Ok(i) = x.as_int() {
                Ok(Expr::int(i))
            } else {
                Err(format!("{helper}: expected indices in the list, found {}", describe(x)).into())
            }
        })
        .collect()
}

fn names_to_avoid(state: &State, avoid: &Dynamic) -> BTreeSet<Name> {
    let mut out: BTreeSet<Name> = state.consts.keys().cloned().collect();
    let items: Array = avoid.clone().try_cast::<Array>().unwrap_or_else(|| vec![avoid.clone()]);
    for x in &items {
        if let Some(Value::Tensor(t)) = to_value(x) {
            out.extend(ops::infer::constants(state, &[&t]));
            out.extend(t.bound_iters());
        } else if let Some(IndexVal(e)) = x.clone().try_cast::<IndexVal>() {
            out.extend(e.vars());
        } else if x.is_string() {
            out.insert(Name::from(x.to_string().as_str()));
        }
    }
    out
}

fn fresh_list(prefix: &str, n: i64, avoid: &BTreeSet<Name>) -> Array {
    let mut out = Array::new();
    let mut k = 1i64;
    while (out.len() as i64) < n {
        let name = format!("{prefix}{k}");
        if !avoid.contains(name.as_str()) {
            out.push(Dynamic::from(IndexVal(Expr::var(&name))));
        }
        k += 1;
    }
    out
}

fn register_helpers(engine: &mut Engine, shared: &Rc<Shared>) {
    let sh = shared.clone();
    engine.register_fn(
        "at",
        move |ctx: NativeCallContext, id: ImmutableString, t: Dynamic| -> RhaiResult<Dynamic> {
            let v = match to_value(&t) {
                Some(v @ Value::Tensor(_)) => v,
                _ => {
                    return Err(format!(
                        "at: argument 2: expected a tensor expression, found {}",
                        describe(&t)
                    )
                    .into());
                }
            };
            const TMP: &str = "\u{1}at";
            let s2 = ops::assign(&sh.state.borrow(), TMP, Some(id.as_str()), v).map_err(|e| sh.fail(e))?;
            let bound = s2.get(TMP).cloned();
            // `@C:` declares C when it is not declared yet (eq. 18); a native function called from
            // the top level runs at call level 1.
            if ctx.call_level() <= 1
                && let Some(decl) = s2.get(id.as_str())
            {
                sh.state.borrow_mut().vars.entry(Name::from(id.as_str())).or_insert_with(|| decl.clone());
            }
            Ok(bound.map(to_dynamic).unwrap_or(Dynamic::UNIT))
        },
    );
    engine.register_fn("rank", |t: Dynamic| -> RhaiResult<i64> {
        Ok(operand_view(&tensor_of(&t, "rank")?).shape.rank() as i64)
    });
    engine.register_fn("shape", |t: Dynamic| -> RhaiResult<Array> {
        let t = operand_view(&tensor_of(&t, "shape")?);
        Ok(t.shape
            .dims()
            .unwrap_or(&[])
            .iter()
            .map(|d| match d {
                Dim::Known(e) => index_dynamic(e.clone()),
                Dim::Unknown => Dynamic::UNIT,
            })
            .collect())
    });
    let sh = shared.clone();
    engine.register_fn("param", move |name: ImmutableString, choices: Array| -> RhaiResult<Dynamic> {
        if choices.is_empty() {
            return Err(format!(
                "param: argument 2: expected a non-empty list of choices for `{name}`, found []"
            )
            .into());
        }
        let text = |i: usize| choices[i].to_string();
        let i = sh
            .state
            .borrow_mut()
            .params
            .pick(name.as_str(), choices.len(), &text)
            .map_err(|e| format!("param: {e}"))?;
        Ok(choices[i].clone())
    });
    let sh = shared.clone();
    engine.register_fn("time", move |l: Dynamic| -> RhaiResult<rhai::Map> {
        let nests: Vec<Nest> = if l.is_array() {
            l.clone()
                .into_array()
                .unwrap_or_default()
                .iter()
                .map(|x| nest_of(x, "time"))
                .collect::<Result<_, _>>()?
        } else {
            vec![nest_of(&l, "time")?]
        };
        if nests.is_empty() {
            return Err("time: expected a loop nest or a list of loop nests, found []".into());
        }
        let Some(measure) = sh.env.measure.clone() else {
            return Err(
                "time: measurements run under `teml run`, `teml tune` and the REPL (not `teml check`)".into(),
            );
        };
        let named: Vec<(Name, Nest)> = sh
            .arg_names(&nests.iter().cloned().map(Value::Nest).collect::<Vec<_>>())
            .into_iter()
            .zip(nests)
            .enumerate()
            .map(|(k, (n, x))| (n.unwrap_or_else(|| Name::from(format!("nest{}", k + 1).as_str())), x))
            .collect();
        let start = std::time::Instant::now();
        let state = sh.state.borrow().clone();
        let v = measure(&state, &named);
        // Time spent measuring does not count against the script's time limit.
        if let Some(d) = sh.deadline.get() {
            sh.deadline.set(d.checked_add(start.elapsed()));
        }
        Ok(json_map(&v))
    });
    engine.register_fn("history", |l: Dynamic| -> RhaiResult<Array> {
        Ok(nest_of(&l, "history")?.history.lines().into_iter().map(Dynamic::from).collect())
    });
    let sh = shared.clone();
    engine.register_fn("legal", move |l: Dynamic| -> RhaiResult<Dynamic> {
        let n = nest_of(&l, "legal")?;
        match crate::ops::explore::legal(&sh.state.borrow(), &n) {
            Ok(_) => Ok(Dynamic::TRUE),
            Err(why) => Ok(Dynamic::from(why)),
        }
    });
    let sh = shared.clone();
    let perms = move |l: &Dynamic, d: Option<i64>| -> RhaiResult<Array> {
        let n = nest_of(l, "legal_permutations")?;
        let d = d.map_or(usize::MAX, |d| d.max(0) as usize);
        let ps = crate::ops::explore::permutations(&sh.state.borrow(), &n, d)
            .map_err(|e| format!("legal_permutations: {e}"))?;
        Ok(ps
            .into_iter()
            .map(|p| Dynamic::from(p.into_iter().map(|x| Dynamic::from(x as i64)).collect::<Array>()))
            .collect())
    };
    let p2 = perms.clone();
    engine.register_fn("legal_permutations", move |l: Dynamic| perms(&l, None));
    engine.register_fn("legal_permutations", move |l: Dynamic, d: i64| p2(&l, Some(d)));
    let sh = shared.clone();
    engine.register_fn("permute", move |l: Dynamic, order: Array| -> RhaiResult<Dynamic> {
        let n = nest_of(&l, "permute")?;
        let order: Vec<usize> = order
            .iter()
            .map(|x| x.as_int().map(|v| v.max(0) as usize))
            .collect::<Result<_, _>>()
            .map_err(|t| format!("permute: expected a list of levels, found an element of type {t}"))?;
        let mut sorted = order.clone();
        sorted.sort();
        if sorted != (1..=order.len()).collect::<Vec<_>>() || order.len() > n.path().len() {
            return Err(format!(
                "permute: expected a permutation of the levels 1..={}, found {order:?}",
                n.path().len()
            )
            .into());
        }
        let Some(p) = crate::ops::explore::permute(&n, &order) else { return Ok(Dynamic::UNIT) };
        let state = sh.state.borrow();
        if !state.unchecked {
            ops::registry::legal(&state, "permute", &p).map_err(|e| sh.fail(e))?;
        }
        Ok(to_dynamic(Value::Nest(p)))
    });
    let sh = shared.clone();
    engine.register_fn("legal_fusions", move |a: Dynamic, b: Dynamic| -> RhaiResult<Array> {
        let (a, b) = (nest_of(&a, "legal_fusions")?, nest_of(&b, "legal_fusions")?);
        let rs = crate::ops::explore::fusion_levels(&sh.state.borrow(), &a, &b)
            .map_err(|e| format!("legal_fusions: {e}"))?;
        Ok(rs.into_iter().map(|r| Dynamic::from(r as i64)).collect())
    });
    engine.register_fn("depth", |l: Dynamic| -> RhaiResult<i64> {
        Ok(nest_of(&l, "depth")?.path().len() as i64)
    });
    engine.register_fn("iterators", |l: Dynamic| -> RhaiResult<Array> {
        Ok(nest_of(&l, "iterators")?.path().iter().map(|x| Dynamic::from(x.iter.to_string())).collect())
    });
    engine.register_fn("iter", |s: ImmutableString| -> RhaiResult<IndexVal> {
        let ok = s.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_alphanumeric() || c == '_');
        if !ok {
            return Err(format!("iter: expected an identifier, found \"{s}\"").into());
        }
        Ok(IndexVal(Expr::var(&s)))
    });
    let sh = shared.clone();
    engine.register_fn("fresh_iters", move |n: i64, avoid: Dynamic| -> RhaiResult<Array> {
        if !(0..=64).contains(&n) {
            return Err(format!("fresh_iters: expected a count in 0..=64, found {n}").into());
        }
        Ok(fresh_list("i", n, &names_to_avoid(&sh.state.borrow(), &avoid)))
    });
    let sh = shared.clone();
    engine.register_fn(
        "fresh_iters",
        move |prefix: ImmutableString, n: i64, avoid: Dynamic| -> RhaiResult<Array> {
            if !(0..=64).contains(&n) {
                return Err(format!("fresh_iters: expected a count in 0..=64, found {n}").into());
            }
            Ok(fresh_list(&prefix, n, &names_to_avoid(&sh.state.borrow(), &avoid)))
        },
    );
    let sh = shared.clone();
    engine.register_fn("free_iters", move |t: Dynamic| -> RhaiResult<Array> {
        let t = tensor_of(&t, "free_iters")?;
        Ok(free_iters(&sh.state.borrow(), &t)
            .iter()
            .map(|v| Dynamic::from(IndexVal(Expr::var_name(v))))
            .collect())
    });
    engine.register_fn("carries_iters", |t: Dynamic| -> RhaiResult<bool> {
        let t = operand_view(&tensor_of(&t, "carries_iters")?);
        Ok(!matches!((&t.op, &t.iters), (Op::Id(_) | Op::Hole, Iters::Unset)))
    });
    let sh = shared.clone();
    engine.register_fn("with_iters", move |t: Dynamic, list: Dynamic| -> RhaiResult<Dynamic> {
        let t = tensor_of(&t, "with_iters")?;
        let xs = index_list(&list, "with_iters")?;
        let state = sh.state.borrow();
        let arg = Arg::new(2, "iterators");
        if t.children.is_empty() && matches!(t.iters, Iters::List(_)) {
            // An indexed access: substitute its free iterators position by position.
            let free = free_iters(&state, &t);
            if free.len() != xs.len() {
                return Err(sh.fail(Error::IteratorList {
                    builtin: "with_iters".into(),
                    arg,
                    expected: format!("{} iterators to rename the free iterators of `{t}`", free.len()),
                    found: xs.len().to_string(),
                }));
            }
            let sub = |v: &str| free.iter().position(|f| &**f == v).map(|k| xs[k].clone());
            return Ok(Dynamic::from(TensorVal(t.subst_iters(&sub))));
        }
        let r = ops::operand(&state, "with_iters", &arg, &t, Some(&xs)).map_err(|e| sh.fail(e))?;
        if r.has_hole() {
            sh.holes.set(true);
        }
        Ok(Dynamic::from(TensorVal(r)))
    });
    let sh = shared.clone();
    engine.register_fn("constant", move |name: ImmutableString| -> Dynamic {
        sh.state.borrow().constant(&name).map(Dynamic::from).unwrap_or(Dynamic::UNIT)
    });
    let sh = shared.clone();
    engine.register_fn("constant_names", move |ts: Dynamic| -> Array {
        let state = sh.state.borrow();
        let mut out: BTreeSet<Name> = state.consts.keys().cloned().collect();
        let items: Array = ts.clone().try_cast::<Array>().unwrap_or_else(|| vec![ts.clone()]);
        for x in &items {
            if let Some(Value::Tensor(t)) = to_value(x) {
                out.extend(ops::infer::constants(&state, &[&t]));
            }
        }
        out.iter().map(|n| Dynamic::from(n.to_string())).collect()
    });
    engine.register_fn("stmts", |l: Dynamic| -> RhaiResult<Array> {
        Ok(nest_of(&l, "stmts")?.stmts().into_iter().map(|s| Dynamic::from(TensorVal(s))).collect())
    });
    engine.register_fn("tree", |x: Dynamic| -> RhaiResult<String> {
        match to_value(&x) {
            Some(v) => Ok(v.tree().trim_end().to_string()),
            None => {
                Err(format!("tree: expected a tensor expression or a loop nest, found {}", describe(&x))
                    .into())
            }
        }
    });
    engine.register_fn("paper", |x: Dynamic| -> RhaiResult<String> {
        match to_value(&x) {
            Some(v) => Ok(v.paper()),
            None => {
                Err(format!("paper: expected a tensor expression or a loop nest, found {}", describe(&x))
                    .into())
            }
        }
    });
    engine
        .register_fn("infix", |t: Dynamic| -> RhaiResult<String> { Ok(tensor_of(&t, "infix")?.to_string()) });
    engine.register_fn("describe", |x: Dynamic| describe(&x));
    let sh = shared.clone();
    engine.register_fn(
        "fail",
        move |builtin: ImmutableString,
              pos: i64,
              role: ImmutableString,
              expected: ImmutableString,
              found: Dynamic|
              -> RhaiResult<Dynamic> {
            let found = if found.is_string() { found.to_string() } else { short(&found) };
            Err(sh.fail(Error::BadArgument {
                builtin: builtin.to_string(),
                arg: Arg::new(usize::try_from(pos).unwrap_or(0), &role),
                expected: expected.to_string(),
                found,
            }))
        },
    );
}
