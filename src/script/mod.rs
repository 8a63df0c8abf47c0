//! The Rhai front-end: meta-programs as `.rhai` scripts, with loops, branches and functions
//! around the same builtin table the `.teml` front-end uses, and the standard library
//! (`stdlib/*.rhai`) loaded at start-up.
//!
//! ```rhai
//! // Fig. 6, and two strip-mined variants
//! let A = tensor([N, N]);            // N: a named constant (-D N=250)
//! let B = tensor([N, N]);
//! let C = tensor([N, N]);
//! let D = vadd(A, B, [[i1, i2], [i1, i2]]);
//! let E = mul(C, D, [[i1, i2], ()], [i1, i2]);
//! let l = build(E);
//! for v in [16, 32] {
//!     let lv = stripmine(l, 2, v);
//!     codegen(lv);
//! }
//! ```
//!
//! # Values
//!
//! Tensor expressions (`Tensor`), loop nests (`Nest`) and affine index expressions (`Index`)
//! are Rhai values: printable (`print(l)` shows the readable tree), comparable with `==`
//! (structurally) and immutable (every builtin returns a new value, so one nest branches into
//! any number of variants).
//!
//! - **Iterators.** A name the script does not define is an index: `[i, j+1]`, `h+kh`, `2*i`
//!   work, with `+`, `-` and `*` by integers overloaded on indices. So is a named constant:
//!   `tensor([N, N])` has the symbolic extents `-D N=...` binds, while `const N = 64;` (or a
//!   number) gives literal extents. `iter("k")` makes an index from a string. A name the
//!   script defines is its variable, so do not reuse an iterator's name for a variable.
//! - **Arguments.** The arrow of the paper's syntax is one more argument and an omitted
//!   iterator list is `()`: `eq(A, [i1, i2], [i2, i1])`, `mul(C, D, [[i1, i2], ()], [i1, i2])`.
//!   Every builtin of [`crate::ops::builtins`] is a function of 0 to 6 arguments (`codegen` up
//!   to 16); the statements `init` and `codegen` update σ and return `()`.
//!
//! # Naming (eq. 17-18)
//!
//! A builtin returns its value with the hole □ unfilled. The hole is filled when the value is
//! first *read through a variable*: `let A = tensor([N, N]);` then `eq(A, ...)` reads `A`, which
//! binds it as `P_stmt[A = ...]` does (through [`crate::ops::assign`]: the hole becomes `A`, a
//! declared shape is checked, an undeclared result is declared). The bound value replaces the
//! variable's. So `let B = eq(A, [i1, i2], [i2, i1]);` makes `B` the assigned tensor exactly
//! as `B = eq(A, ...)` does in `.teml`. `at("C", e)` is the `@C:` form (eq. 18).
//!
//! - At the top level of a script, every value read through a variable is also recorded in σ
//!   under the variable's name, and at the end every top-level variable holding a value is
//!   (values never read included), so the final σ maps every name.
//! - Inside functions the script defines, reading a variable names what it holds, but σ is
//!   not changed: a function returns values, and the caller's variable records them.
//! - Inside standard-library functions nothing is named: values pass through with their hole,
//!   and the variable the caller binds the result to names it. Variables whose name starts with
//!   `_` never name what they hold, anywhere. (So a script function meant to return an unnamed
//!   value, as the library's do, returns the expression itself or holds it in a `_` variable;
//!   its parameters name what they are given unnamed: pass named values.)
//! - A value never read through a variable keeps its hole: an unnamed `tensor(...)` used
//!   directly as an operand is the tensor being defined, as `accumulator` is; an unnamed
//!   assignment as an argument is an error (`let X = ...` first).
//! - `codegen(l1, l2)` records the names of the variables its nests were read from.
//! - An undefined name at the top level that σ maps (a value defined by a `.teml` line in the
//!   REPL, see [`Session::set_state`]) is σ's value.
//!
//! # Sandbox
//!
//! Scripts run under [`Limits`]: operations (a runaway `loop {}` ends with an error), call and
//! expression depth, string, array and map sizes, variables and functions. `import` finds no
//! module, and there is no file access: `init(A, "a.npy")` only records the path.

mod error;
mod helpers;
mod host;
mod library;
mod shared;
mod stdlib;
mod values;

pub use error::{STDLIB_ID, ScriptError};
pub use library::{FILES as STDLIB_FILES, StdlibFn};
pub use stdlib::Stdlib;
pub use values::{IndexVal, NestVal, TensorVal};

use crate::ir::State;
use host::{Host, Output};

/// Measures the nests of one kernel for the `time(l)` helper: compiles, verifies and times
/// them, and answers with a JSON object (`median_s`, `min_s`, `spread`, `reps`, `gflops`,
/// `verified`, `verification`, `error`). The shells that run kernels give one in [`Env`].
pub type MeasureFn = dyn Fn(&State, &[(crate::ir::Name, crate::ir::Nest)]) -> serde_json::Value + Send + Sync;

/// What a script reaches outside σ: the measurer behind `time(l)`, and where `print` goes.
/// The shell that runs the script gives it (`teml run` and `teml tune` with their options,
/// the REPL with its current `:threads` and `:cflags`); nothing of it is process-wide.
#[derive(Clone, Default)]
pub struct Env {
    /// What `time(l)` calls; without one, `time(l)` is an error (`teml check`).
    pub measure: Option<std::sync::Arc<MeasureFn>>,
    /// `print` goes to standard error (under `--json`, standard output carries only the
    /// report).
    pub print_to_stderr: bool,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env")
            .field("measure", &self.measure.as_ref().map(|_| "<measurer>"))
            .field("print_to_stderr", &self.print_to_stderr)
            .finish()
    }
}

use rhai::{AST, Dynamic, Scope};
use std::sync::mpsc;
use std::time::Duration;

/// The sandbox limits of a script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Operations before the script is stopped (a runaway loop).
    pub max_operations: u64,
    /// Wall-clock time before the script is stopped (an operation on a huge value can be
    /// slow while counting as one).
    pub max_time: Duration,
    /// Nesting of function calls.
    pub max_call_levels: usize,
    /// Nesting of expressions at the top level.
    pub max_expr_depth: usize,
    /// Nesting of expressions inside functions.
    pub max_fn_expr_depth: usize,
    /// Length of a string.
    pub max_string_size: usize,
    /// Elements of an array (nested arrays included).
    pub max_array_size: usize,
    /// Size of an object map.
    pub max_map_size: usize,
    /// Variables in scope.
    pub max_variables: usize,
    /// Functions a script defines.
    pub max_functions: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_operations: 50_000_000,
            max_time: Duration::from_secs(300),
            max_call_levels: 48,
            max_expr_depth: 64,
            max_fn_expr_depth: 48,
            max_string_size: 1 << 20,
            max_array_size: 50_000,
            max_map_size: 10_000,
            max_variables: 10_000,
            max_functions: 1_000,
        }
    }
}

/// The stack of the thread scripts run on: Rhai recurses over nested values, and the limits
/// above bound that recursion, not the stack of the caller's thread.
const SCRIPT_STACK: usize = 512 << 20;

/// Runs `f` on a thread with [`SCRIPT_STACK`] of stack.
fn on_script_thread<T: Send>(
    file: &str,
    f: impl FnOnce() -> Result<T, ScriptError> + Send,
) -> Result<T, ScriptError> {
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("teml-script".into())
            .stack_size(SCRIPT_STACK)
            .spawn_scoped(scope, f)
            .map_err(|e| ScriptError::plain(file, format!("cannot start the script thread: {e}")))?;
        handle.join().unwrap_or_else(|_| {
            Err(ScriptError::plain(file, "internal error: the script thread panicked".into()))
        })
    })
}

/// Runs the meta-program `src` (`file` names it in errors) from `state` (which holds the `-D`
/// named constants) and returns the final state: σ with every named value, the `init`s and the
/// `codegen` requests.
pub fn eval(src: &str, file: &str, state: &State) -> Result<State, ScriptError> {
    eval_with(src, file, state, &Limits::default())
}

/// [`eval`] under other limits.
pub fn eval_with(src: &str, file: &str, state: &State, limits: &Limits) -> Result<State, ScriptError> {
    eval_in(src, file, state, limits, &Env::default())
}

/// [`eval`] under `limits`, in the environment `env` (the measurer of `time(l)`).
pub fn eval_in(
    src: &str,
    file: &str,
    state: &State,
    limits: &Limits,
    env: &Env,
) -> Result<State, ScriptError> {
    on_script_thread(file, || {
        let host = Host::new(state.clone(), limits, Output::Std, env.clone())?;
        let ast = compile(&host, src, file)?;
        let mut scope = Scope::new();
        host.start_clock();
        host.engine
            .run_ast_with_scope(&mut scope, &ast)
            .map_err(|e| host.error(file, src, &e, Some(&ast)))?;
        host.sweep(&mut scope, file, src)?;
        Ok(host.state())
    })
}

fn compile(host: &Host, src: &str, file: &str) -> Result<AST, ScriptError> {
    let mut ast = host.engine.compile(src).map_err(|e| error::from_parse(file, src, &e))?;
    ast.set_source(if file == STDLIB_ID { "script" } else { file });
    Ok(ast)
}

/// A REPL session: the Rhai scope, the functions defined so far and σ persist from line to
/// line. The engine lives on a thread of its own (see [`Limits`]); the session talks to it.
///
/// ```
/// use teml::script::Session;
/// let mut s = Session::new(teml::ir::State::new()).unwrap();
/// s.eval_line("let A = tensor([4, 4]);").unwrap();
/// assert!(s.eval_line("let B = eq(A, [i, j], [j, k]);").is_err()); // k has no range
/// let out = s.eval_line("let B = eq(A, [i, j], [j, i]); infix(B)").unwrap();
/// assert_eq!(out.as_deref(), Some("B[j][i] = A[i][j]"));
/// assert!(s.state().get("B").is_some());
/// ```
pub struct Session {
    jobs: Option<mpsc::Sender<Job>>,
    worker: Option<std::thread::JoinHandle<()>>,
    state: State,
}

/// Work for the session's thread.
type Job = Box<dyn FnOnce(&mut Worker) + Send>;

/// What the session's thread owns.
struct Worker {
    host: Host,
    scope: Scope<'static>,
    functions: AST,
    state: State,
    file: String,
}

impl Session {
    /// A session starting from `state`, under the default [`Limits`], with no measurer.
    pub fn new(state: State) -> Result<Session, ScriptError> {
        Session::with_limits(state, &Limits::default())
    }

    /// A session starting from `state` under `limits`, with no measurer.
    pub fn with_limits(state: State, limits: &Limits) -> Result<Session, ScriptError> {
        Session::with_env(state, limits, Env::default())
    }

    /// A session starting from `state` under `limits`, in the environment `env` (the REPL's
    /// measurer).
    pub fn with_env(state: State, limits: &Limits, env: Env) -> Result<Session, ScriptError> {
        let (jobs, inbox) = mpsc::channel::<Job>();
        let (ready, started) = mpsc::channel::<Result<(), ScriptError>>();
        let (st, lim) = (state.clone(), limits.clone());
        let worker = std::thread::Builder::new()
            .name("teml-session".into())
            .stack_size(SCRIPT_STACK)
            .spawn(move || {
                let host = match Host::new(st.clone(), &lim, Output::Capture, env) {
                    Ok(h) => h,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                let _ = ready.send(Ok(()));
                let mut w = Worker {
                    host,
                    scope: Scope::new(),
                    functions: AST::empty(),
                    state: st,
                    file: "<repl>".into(),
                };
                while let Ok(job) = inbox.recv() {
                    job(&mut w);
                }
            })
            .map_err(|e| ScriptError::plain("<repl>", format!("cannot start the session thread: {e}")))?;
        match started.recv() {
            Ok(Ok(())) => Ok(Session { jobs: Some(jobs), worker: Some(worker), state }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ScriptError::plain("<repl>", "internal error: the session thread stopped".into())),
        }
    }

    /// Runs `f` on the session's thread.
    fn on_worker<T: Send + 'static>(&self, f: impl FnOnce(&mut Worker) -> T + Send + 'static) -> Option<T> {
        let (reply, answer) = mpsc::channel();
        let job: Job = Box::new(move |w| {
            let _ = reply.send(f(w));
        });
        self.jobs.as_ref()?.send(job).ok()?;
        answer.recv().ok()
    }

    /// Evaluates one line (any number of statements and function definitions). Returns what
    /// it printed and the value of its last expression, if not `()`. On error nothing of the
    /// line takes effect: the previous σ and scope stay.
    pub fn eval_line(&mut self, src: &str) -> Result<Option<String>, ScriptError> {
        let src = src.to_string();
        let answer = self.on_worker(move |w| {
            let r = w.eval_line(&src);
            (r, w.state.clone())
        });
        match answer {
            Some((r, state)) => {
                self.state = state;
                r
            }
            None => Err(ScriptError::plain("<repl>", "internal error: the session thread stopped".into())),
        }
    }

    /// σ after the last line.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// Replaces σ (e.g. after the REPL evaluated a `.teml` line). Script variables that σ now
    /// maps to another value take σ's value.
    pub fn set_state(&mut self, state: State) {
        let st = state.clone();
        self.on_worker(move |w| w.set_state(st));
        self.state = state;
    }

    /// The names a line can call: builtins, library functions, helpers and the functions
    /// defined so far (for completion).
    pub fn names(&self) -> Vec<String> {
        self.on_worker(|w| w.host.callable_names(Some(&w.functions))).unwrap_or_default()
    }

    /// The variables of the scope (for completion).
    pub fn variables(&self) -> Vec<String> {
        self.on_worker(|w| w.scope.iter().map(|(n, _, _)| n.to_string()).collect()).unwrap_or_default()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.jobs = None; // the worker's loop ends
        if let Some(h) = self.worker.take() {
            let _ = h.join();
        }
    }
}

impl Worker {
    fn eval_line(&mut self, src: &str) -> Result<Option<String>, ScriptError> {
        let line_ast = compile(&self.host, src, &self.file)?;
        let ast = self.functions.merge(&line_ast);
        let saved_scope = self.scope.clone();
        self.host.shared.output.borrow_mut().clear();
        *self.host.shared.last_error.borrow_mut() = None;
        *self.host.shared.binding.borrow_mut() = None;
        self.host.start_clock();
        let result = self.host.engine.eval_ast_with_scope::<Dynamic>(&mut self.scope, &ast);
        let result = match result {
            Ok(v) => self.host.sweep(&mut self.scope, &self.file, src).map(|()| v),
            Err(e) => Err(self.host.error(&self.file, src, &e, Some(&ast))),
        };
        match result {
            Ok(v) => {
                self.functions = ast.clone_functions_only();
                self.state = self.host.state();
                let mut out = std::mem::take(&mut *self.host.shared.output.borrow_mut());
                if !v.is_unit() {
                    out.push_str(&display(&v, 0));
                }
                let out = out.trim_end_matches('\n').to_string();
                Ok((!out.is_empty()).then_some(out))
            }
            Err(e) => {
                self.scope = saved_scope;
                self.host.set_state(self.state.clone());
                Err(e)
            }
        }
    }

    fn set_state(&mut self, state: State) {
        let names: Vec<String> = self.scope.iter().map(|(n, _, _)| n.to_string()).collect();
        for name in names {
            let Some(new) = state.get(&name) else { continue };
            let cur = self.scope.get(&name).and_then(values::to_value);
            if cur.as_ref() != Some(new)
                && cur.is_some()
                && let Some(slot) = self.scope.get_mut(&name)
            {
                *slot = values::to_dynamic(new.clone());
            }
        }
        self.host.set_state(state.clone());
        self.state = state;
    }
}

/// How the REPL shows a value: trees for tensors and nests, expressions for indices.
fn display(d: &Dynamic, depth: usize) -> String {
    if depth > 16 {
        return "[...]".into();
    }
    let d = d.flatten_clone();
    if let Some(v) = values::to_value(&d) {
        return v.tree().trim_end().to_string();
    }
    if let Some(IndexVal(e)) = d.clone().try_cast::<IndexVal>() {
        return e.to_string();
    }
    if let Some(xs) = d.clone().try_cast::<rhai::Array>() {
        let items: Vec<String> = xs
            .iter()
            .map(|x| {
                let s = display(x, depth + 1);
                if s.contains('\n') { format!("\n{s}\n") } else { s }
            })
            .collect();
        return format!("[{}]", items.join(", "));
    }
    if d.is_string() {
        return d.to_string();
    }
    d.to_string()
}
