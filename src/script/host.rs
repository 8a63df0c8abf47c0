//! The Rhai engine: the builtin table registered for arities 0..=6, the value types and their
//! operators, variable resolution (iterators, σ, naming by eq. 17), the host helpers the
//! standard library is written with (`helpers.rs`), and the sandbox limits.

use super::Limits;
use super::error::{self, STDLIB_ID, ScriptError};
pub(crate) use super::shared::Shared;
use super::values::{IndexVal, NestVal, TensorVal, index_dynamic, to_arg, to_dynamic, to_value};
use crate::error::{Arg, Error};
use crate::ir::{Expr, Name, Op, State, Value};
use crate::ops::{self, ArgVal, Returns};
use rhai::{Dynamic, Engine, EvalAltResult, NativeCallContext, OptimizationLevel, Position, Scope};

/// A compiled module, shared.
type SharedModule = rhai::Shared<rhai::Module>;
use std::any::TypeId;
use std::cell::RefCell;
use std::rc::Rc;

/// The most arguments a builtin is registered for (`codegen` takes more).
pub(crate) const MAX_ARITY: usize = 6;

/// The most nests one `codegen` or `around` call is registered for (PolyBench's deriche
/// passes 19 to one kernel).
const MAX_NESTS: usize = 32;

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

/// Where `print` and `debug` go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Output {
    /// Standard output (`print`) and standard error (`debug`).
    Std,
    /// Collected, for the REPL to show.
    Capture,
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
    let src = super::library::source();
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
        super::helpers::register(&mut engine, &shared);
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
        names.extend(super::library::function_names());
        names.extend(super::library::HELPERS.iter().map(|h| h.0.to_string()));
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
        // The warnings of the values bound, at their variables' definitions.
        for (name, w) in self.shared.warned.take() {
            let (pos, _) = definition_of(src, &name);
            let at = match (pos.line(), pos.position()) {
                (Some(l), Some(c)) => format!("{file}:{l}:{c}"),
                _ => file.to_string(),
            };
            self.shared.state.borrow_mut().warnings.0.push(format!("{at}: {w}"));
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
                sh.accumulators.borrow_mut().push(t.clone());
            }
            Ok(to_dynamic(v))
        }
    }
}

fn register_builtins(engine: &mut Engine, shared: &Rc<Shared>) {
    for b in ops::builtins() {
        let max = if matches!(b.name, "codegen" | "around") { MAX_NESTS } else { MAX_ARITY };
        for n in 0..=max {
            // Rhai matches `Dynamic` parameters among the first 16 arguments only
            // (`MAX_DYNAMIC_PARAMETERS`): further arguments are typed, nests, and the last one
            // a nest or (codegen's name) a string.
            let mut variants = vec![vec![TypeId::of::<Dynamic>(); n.min(16)]];
            if n > 16 {
                let nests = |k: usize| vec![TypeId::of::<NestVal>(); k];
                let named = [nests(n - 17), vec![TypeId::of::<rhai::ImmutableString>()]].concat();
                variants = vec![
                    [variants[0].clone(), nests(n - 16)].concat(),
                    [variants[0].clone(), named].concat(),
                ];
            }
            for types in variants {
                let sh = shared.clone();
                let (name, returns) = (b.name, b.returns);
                engine.register_raw_fn(
                    name,
                    types,
                    move |_ctx: NativeCallContext, args: &mut [&mut Dynamic]| {
                        call_builtin(&sh, name, returns, args)
                    },
                );
            }
        }
    }
}
