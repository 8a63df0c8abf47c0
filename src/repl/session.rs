//! The REPL's session model, testable without a terminal: every accepted input in a log that
//! can be evaluated again (with other named constants: `:def`, reduced-size verification),
//! undo and redo over snapshots, the commands (`:run`, `:time`, `:diff`, `:export`, ...), and
//! what a line prints. [`super`] is the terminal around it.

use crate::error::ProgramError;
use crate::ir::{Name, State, Value};
use crate::pipeline::{Flags, KernelRef, Pipeline, Program, RunOptions, Timing};
use crate::script::{Env, Limits, Session, Stdlib};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
mod commands;
mod files;

/// The REPL's commands, with their help lines.
pub const COMMANDS: &[(&str, &str)] = &[
    (":help", "this list"),
    (":teml", "switch to the paper's syntax (the default): `B = eq(A, [i1, i2] -> [i2, i1])`"),
    (":rhai", "switch to Rhai syntax: `let B = eq(A, [i1, i2], [i2, i1]);`"),
    (":tree ID", "print a value as an indented tree (tensor expression or loop nest)"),
    (
        ":lift ID",
        "the sequence of single contractions lift(ID) makes, its FLOPs before and after, and the cheapest orders (docs/algebra.md)",
    ),
    (":paper ID", "print a value in the paper's ⟨(op, S, I), [...]⟩ notation"),
    (":c ID", "print the C code generated for the loop nest ID"),
    (
        ":legal ID",
        "is the nest legal? (the dependences it keeps, or a witness of the one it breaks), its legal loop orders, and which of its loops are data-parallel or reductions",
    ),
    (
        ":auto ID",
        "the path `teml auto` picks for the nest ID without measuring, each decision with its reason (auto(ID) returns it as a nest)",
    ),
    (":history ID", "the builtin calls that made the nest ID, from its build, as .teml statements"),
    (":run ID", "compile the nest ID, run it and verify it against the untransformed program"),
    (":time ID", ":run, then time it and the untransformed build (speedup)"),
    (":state", "list every identifier and what it denotes"),
    (":def NAME=INT", "bind a named constant (like -D NAME=INT)"),
    (":threads N", "OpenMP threads for :run/:time"),
    (":cflags FLAGS", "C compiler flags for :run/:time (default -O3 -march=native -fopenmp)"),
    (":diff ID1 ID2", "what changed from one nest to the other: their trees and their C, as unified diffs"),
    (":undo", "take back the last change (a line, :load or :def); the session before it returns"),
    (":redo", "make again what :undo took back"),
    (
        ":load FILE -D N=V",
        "evaluate a .teml or .rhai file (with named constants), or load a state saved as .json",
    ),
    (":save FILE", "save the whole state as JSON"),
    (
        ":export FILE.teml",
        "write the session as a program in the paper's syntax (`teml run FILE.teml` replays it)",
    ),
    (
        ":export-kernel ID DIR",
        "verify the nest ID and export it as a C library with a header and a Python module (teml export)",
    ),
    (":quit", "leave (also Ctrl-D)"),
];

/// Syntax of the current input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The paper's syntax.
    Teml,
    /// Rhai.
    Rhai,
}

/// One accepted input of the session, kept so that the session can be evaluated again (with
/// other named constants: `:def`, reduced-size verification).
#[derive(Clone, Debug)]
enum Entry {
    /// A line in the paper's syntax.
    Teml(String),
    /// A line of Rhai.
    Rhai(String),
    /// `:load` of a program file.
    Load(PathBuf),
    /// `:load` of a saved state (JSON): fixed sizes, it cannot be evaluated again.
    Saved(Box<State>),
}

/// Evaluates one input on `state` (and the Rhai `session`, made when first needed).
fn apply(
    e: &Entry,
    state: &mut State,
    session: &mut Option<Session>,
    consts: &BTreeMap<Name, i64>,
    env: &Env,
) -> Result<(), ProgramError> {
    match e {
        Entry::Teml(src) => *state = crate::lang::eval_stmt(src, "<repl>", state, &Stdlib::get())?,
        Entry::Rhai(src) => {
            if session.is_none() {
                *session = Some(new_session(state, env)?);
            }
            let s = session.as_mut().ok_or("no session")?;
            s.set_state(state.clone());
            s.eval_line(src)?;
            *state = s.state().clone();
        }
        Entry::Load(path) => *state = crate::pipeline::eval_file_in(path, state, env)?,
        Entry::Saved(saved) => {
            if let Some((n, v)) = consts.iter().find(|(n, v)| saved.constant(n).is_some_and(|x| x != **v)) {
                return Err(ProgramError::plain(format!(
                    "the session was loaded from a saved state with {n}={}; it cannot be evaluated with {n}={v}",
                    saved.constant(n).unwrap_or_default()
                )));
            }
            let mut s = saved.clone();
            s.consts.extend(consts.iter().map(|(n, v)| (n.clone(), *v)));
            *state = *s;
        }
    }
    Ok(())
}

/// The state the session starts from, with the named constants `consts`.
fn initial(consts: &BTreeMap<Name, i64>, unchecked: bool) -> State {
    State::starting(consts.iter().map(|(n, v)| (&**n, *v)), unchecked)
}

/// Evaluates the session's inputs again from the named constants `consts`; returns the state
/// and the Rhai session the inputs made.
fn replay(
    log: &[Entry],
    consts: &BTreeMap<Name, i64>,
    unchecked: bool,
    env: &Env,
) -> Result<(State, Option<Session>), ProgramError> {
    let mut state = initial(consts, unchecked);
    let mut session: Option<Session> = None;
    for e in log {
        apply(e, &mut state, &mut session, consts, env)?;
    }
    Ok((state, session))
}

/// A Rhai session from `state` in the REPL's environment `env` (its measurer).
fn new_session(state: &State, env: &Env) -> Result<Session, ProgramError> {
    Ok(Session::with_env(state.clone(), &Limits::default(), env.clone())?)
}

/// What `:undo` goes back to: the session before one change, and the change.
#[derive(Clone)]
struct Snapshot {
    state: State,
    log: Vec<Entry>,
    defines: BTreeMap<Name, i64>,
    /// The input that changed it (`l2 = interchange(l, 1, 2)`, `:def N=64`).
    change: String,
}

/// The REPL.
pub struct Repl {
    state: State,
    session: Option<Session>,
    mode: Mode,
    /// How `:run`, `:time` and `time(l)` in Rhai lines run kernels (`:threads`, `:cflags`);
    /// shared with the measurer of `env`, which reads them when it is called.
    opts: Arc<RwLock<RunOptions>>,
    /// What Rhai lines reach: `time(l)` measures with `opts`.
    env: Env,
    /// Every accepted input, in order.
    log: Vec<Entry>,
    /// Named constants from `-D` and `:def`.
    defines: BTreeMap<Name, i64>,
    /// The session before each change, the latest last.
    undo: Vec<Snapshot>,
    /// What `:undo` took back, the latest last (emptied by any new change).
    redo: Vec<Snapshot>,
}

impl Repl {
    /// A session starting from `state`, in `mode`.
    pub fn new(state: State, mode: Mode) -> Repl {
        let defines = state.consts.clone();
        let opts = Arc::new(RwLock::new(RunOptions::default()));
        let env = crate::pipeline::script_env(opts.clone(), false);
        Repl {
            state,
            session: None,
            mode,
            opts,
            env,
            log: Vec::new(),
            defines,
            undo: Vec::new(),
            redo: Vec::new(),
        }
    }

    fn snapshot(&self, change: &str) -> Snapshot {
        Snapshot {
            state: self.state.clone(),
            log: self.log.clone(),
            defines: self.defines.clone(),
            change: change.to_string(),
        }
    }

    /// Remembers the session as it was before the change `change`, for `:undo`.
    fn changed(&mut self, before: Snapshot) {
        self.undo.push(before);
        self.redo.clear();
    }

    /// Goes back to `to`; returns what went back to it (for `:redo`). The Rhai session (its
    /// `let` variables) is made again by evaluating the inputs again.
    fn restore(&mut self, to: Snapshot) -> Snapshot {
        let now = Snapshot { change: to.change.clone(), ..self.snapshot("") };
        self.session = None;
        if to.log.iter().any(|e| matches!(e, Entry::Rhai(_)))
            && let Ok((_, session)) = replay(&to.log, &to.defines, to.state.unchecked, &self.env)
        {
            self.session = session;
        }
        self.state = to.state;
        self.log = to.log;
        self.defines = to.defines;
        now
    }

    /// The session as a program the pipeline can evaluate again at other sizes.
    fn program(&self) -> Program {
        let log = self.log.clone();
        let (unchecked, env) = (self.state.unchecked, self.env.clone());
        Program::new("<repl>", self.defines.clone(), move |consts| {
            replay(&log, consts, unchecked, &env).map(|(s, _)| s)
        })
    }

    /// The options kernels run with now.
    fn opts(&self) -> RunOptions {
        self.opts.read().map(|o| o.clone()).unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Changes the options kernels run with (`time(l)` in Rhai lines included).
    fn set_opts(&self, f: impl FnOnce(&mut RunOptions)) {
        let mut o = self.opts.write().unwrap_or_else(|p| p.into_inner());
        f(&mut o);
    }

    /// The current state.
    pub fn state(&self) -> &State {
        &self.state
    }

    fn session(&mut self) -> Result<&mut Session, String> {
        if self.session.is_none() {
            self.session = Some(new_session(&self.state, &self.env).map_err(|e| e.with_hint())?);
        }
        let s = self.session.as_mut().ok_or("no session")?;
        s.set_state(self.state.clone());
        Ok(s)
    }

    /// The prompt of the current syntax.
    pub fn prompt(&self) -> &'static str {
        match self.mode {
            Mode::Teml => "teml> ",
            Mode::Rhai => "rhai> ",
        }
    }

    /// Appends to `msg` the warnings the state has gained since `before` (one input's).
    fn warnings_since(&self, before: &State, msg: &mut String) {
        for w in self.state.warnings.0.iter().skip(before.warnings.0.len()) {
            if !msg.is_empty() {
                msg.push('\n');
            }
            msg.push_str(&format!("warning: {w}"));
        }
    }

    /// Handles one input (a command or code); returns what to print, or an error message.
    /// Never changes the state when it fails.
    pub fn handle(&mut self, input: &str) -> Result<String, String> {
        let line = input.trim();
        if line.is_empty() {
            return Ok(String::new());
        }
        if line.starts_with(':') {
            return self.command(line);
        }
        match self.mode {
            Mode::Teml => {
                let snap = self.snapshot(line);
                let s = crate::lang::eval_stmt(input, "<repl>", &self.state, &Stdlib::get())
                    .map_err(|e| ProgramError::from(e).with_hint())?;
                self.state = s;
                self.log.push(Entry::Teml(input.to_string()));
                let mut msg = self.echo(&snap.state);
                self.warnings_since(&snap.state, &mut msg);
                self.changed(snap);
                Ok(msg)
            }
            Mode::Rhai => {
                let snap = self.snapshot(line);
                let session = self.session()?;
                let out = session.eval_line(input).map_err(|e| ProgramError::from(e).with_hint())?;
                let new_state = session.state().clone();
                self.state = new_state;
                self.log.push(Entry::Rhai(input.to_string()));
                let mut msg = self.echo(&snap.state);
                self.warnings_since(&snap.state, &mut msg);
                self.changed(snap);
                if let Some(o) = out {
                    if !msg.is_empty() {
                        msg.push('\n');
                    }
                    msg.push_str(&o);
                }
                Ok(msg)
            }
        }
    }

    /// Prints what a line bound or changed.
    fn echo(&self, before: &State) -> String {
        let mut out = Vec::new();
        for (name, v) in &self.state.vars {
            if before.vars.get(name) != Some(v) {
                out.push(echo_value(name, v));
            }
        }
        if self.state.kernels.len() > before.kernels.len() {
            out.push(format!("kernel {} requested: :run or :time to build it", self.state.kernels.len()));
        }
        out.join("\n")
    }

    fn value(&self, id: &str) -> Result<&Value, String> {
        self.state.get(id).ok_or_else(|| {
            let names: Vec<String> = self.state.vars.keys().map(|k| k.to_string()).collect();
            let close = crate::lang::close_names(id, &names);
            if close.is_empty() {
                format!("unknown identifier `{id}`")
            } else {
                format!("unknown identifier `{id}`; did you mean {}?", close.join(", "))
            }
        })
    }

    /// Checks that `id` is a loop nest (with the REPL's "did you mean" for unknown names).
    fn request(&self, id: &str) -> Result<(), String> {
        self.value(id)?;
        KernelRef::Nest(Name::from(id)).request(&self.state).map(|_| ()).map_err(|e| e.to_string())
    }

    /// `:load FILE -D N=64` (and `teml repl FILE`, whose path may hold any character): binds
    /// the constants, then evaluates the file (a saved `.json` state is loaded as it is);
    /// nothing changes when it fails. `change` is what `:undo` calls it.
    pub fn load_file(
        &mut self,
        path: &Path,
        defines: &[(String, i64)],
        change: &str,
    ) -> Result<String, String> {
        {
            let path = path.to_path_buf();
            let snap = self.snapshot(change);
            let mut note = String::new();
            if !defines.is_empty() {
                note = format!("; {}", self.define(defines, ":load")?);
            }
            let s = match self.load(&path) {
                Ok(s) => s,
                Err(e) => {
                    // Nothing changes when the file does not load, the -D constants included.
                    self.restore(snap);
                    return Err(e);
                }
            };
            let saved = path.extension().and_then(|e| e.to_str()) == Some("json");
            self.log.push(if saved { Entry::Saved(Box::new(s.clone())) } else { Entry::Load(path.clone()) });
            self.state = s;
            self.changed(snap);
            Ok(format!("loaded {} ({} identifiers){note}", path.display(), self.state.vars.len()))
        }
    }

    /// Binds the named constants `pairs` and evaluates again everything built from them.
    fn define(&mut self, pairs: &[(String, i64)], cmd: &str) -> Result<String, String> {
        let mut defines = self.defines.clone();
        for (n, v) in pairs {
            defines.insert(Name::from(n.as_str()), *v);
        }
        let what = pairs.iter().map(|(n, v)| format!("{n} = {v}")).collect::<Vec<_>>().join(", ");
        let (state, session) = replay(&self.log, &defines, self.state.unchecked, &self.env).map_err(|e| {
            let old: Vec<String> = pairs
                .iter()
                .map(|(n, _)| {
                    format!(
                        "{n} stays {}",
                        self.state.constant(n).map_or("unbound".into(), |x| x.to_string())
                    )
                })
                .collect();
            let given = pairs.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join(" ");
            format!(
                "{cmd} {given}: the session cannot be evaluated again with it ({}):\n{}",
                old.join(", "),
                e.with_hint()
            )
        })?;
        let changed = self.state.vars.iter().filter(|(k, x)| state.vars.get(*k) != Some(x)).count();
        self.state = state;
        self.session = session;
        self.defines = defines;
        Ok(format!("{what} ({changed} value{} evaluated again)", if changed == 1 { "" } else { "s" }))
    }

    /// `:undo` (back one change) or `:redo` (forward one).
    fn travel(&mut self, forward: bool) -> Result<String, String> {
        let (from, verb) = if forward { (&mut self.redo, "redo") } else { (&mut self.undo, "undo") };
        let to = from.pop().ok_or_else(|| format!(":{verb}: nothing to {verb}"))?;
        let change = to.change.clone();
        let now = self.restore(to);
        if forward {
            self.undo.push(now)
        } else {
            self.redo.push(now)
        }
        Ok(format!("{} `{change}`{}", if forward { "redid" } else { "undid" }, self.listing_note()))
    }

    /// After `:undo`/`:redo`: what is bound now.
    fn listing_note(&self) -> String {
        let names: Vec<String> = self.state.vars.keys().map(|k| k.to_string()).collect();
        if names.is_empty() { "; nothing is bound".into() } else { format!("; bound: {}", names.join(" ")) }
    }

    fn state_listing(&self) -> String {
        let mut out = Vec::new();
        for (n, v) in &self.state.consts {
            out.push(format!("{n} = {v}  (named constant)"));
        }
        for (n, v) in &self.state.vars {
            let what = match v {
                Value::Nest(nest) => format!("a loop nest of depth {}", nest.path().len()),
                Value::Tensor(_) => v.kind(),
            };
            out.push(format!("{n}: {what}"));
        }
        if out.is_empty() { "(empty)".into() } else { out.join("\n") }
    }
}

/// `:load FILE -D N=64 -D M=8` (also `-DN=64`): the file and the named constants.
fn load_args(arg: &str) -> Result<(String, Vec<(String, i64)>), String> {
    // The first word, or a quoted path ("my dir/f.teml") that may hold spaces.
    let arg = arg.trim();
    let (file, rest) = match arg.chars().next() {
        Some(q @ ('"' | '\'')) => {
            let end =
                arg[1..].find(q).ok_or_else(|| format!(":load: expected a closing {q} after the file"))?;
            (&arg[1..1 + end], &arg[2 + end..])
        }
        _ => arg.split_once(char::is_whitespace).unwrap_or((arg, "")),
    };
    if file.is_empty() {
        return Err(":load: expected a file".into());
    }
    let file = file.to_string();
    let mut words = rest.split_whitespace();
    let mut defines = Vec::new();
    while let Some(w) = words.next() {
        let def = match w.strip_prefix("-D") {
            Some("") => words.next().ok_or(":load: expected NAME=INT after -D")?,
            Some(d) => d,
            None => return Err(format!(":load: expected -D NAME=INT after the file, found `{w}`")),
        };
        defines.push(crate::ir::parse_define(def).map_err(|e| format!(":load: -D {def}: {e}"))?);
    }
    Ok((file, defines))
}

/// The constant a line like `N = 512  # comment` gives a default to.
fn const_default(line: &str) -> Option<&str> {
    let code = line.split('#').next()?.trim();
    let (n, v) = code.split_once('=')?;
    let (n, v) = (n.trim(), v.trim());
    (crate::ir::is_c_ident(n) && v.parse::<f64>().is_ok()).then_some(n)
}

/// A unified diff from `a` (lines starting `-`) to `b` (`+`), with three lines of context;
/// empty when they are equal: what `:diff` prints, and a golden-file test on a mismatch.
pub fn unified_diff(a: &str, b: &str, name_a: &str, name_b: &str) -> String {
    if a == b {
        return String::new();
    }
    diffy::DiffOptions::new()
        .set_context_len(3)
        .set_original_filename(name_a.to_string())
        .set_modified_filename(name_b.to_string())
        .create_patch(a, b)
        .to_string()
}

/// One value, briefly: an assignment or expression infix, a declaration by its shape, a nest
/// as its tree (`:tree` shows a tensor expression's whole node tree).
fn echo_value(name: &str, v: &Value) -> String {
    match v {
        Value::Nest(n) => format!("{name} =\n{}", indent(&n.tree())),
        Value::Tensor(t) if t.is_assign() => format!("{name}: {t}"),
        Value::Tensor(t) if t.is_tensor_leaf() && t.iters == crate::ir::Iters::Bullet => {
            format!("{name}: scalar {}", t.dtype)
        }
        Value::Tensor(t) if t.is_tensor_leaf() => format!("{name}: tensor {} of {}", t.shape, t.dtype),
        Value::Tensor(t) => format!("{name}: {t}  (virtual, shape {})", t.shape),
    }
}

fn indent(s: &str) -> String {
    s.trim_end().lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
}

/// The help text.
pub fn help() -> String {
    let mut out = String::from("commands:\n");
    for (c, h) in COMMANDS {
        out.push_str(&format!("  {c:<18} {h}\n"));
    }
    out.push_str("builtins: ");
    out.push_str(&crate::ops::builtins().iter().map(|b| b.name).collect::<Vec<_>>().join(" "));
    out.push_str("\nstdlib: ");
    out.push_str(&crate::lang::Extensions::names(&Stdlib::get()).join(" "));
    out.push_str("\n(`teml builtins` prints the language reference)");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repl(lines: &[&str]) -> Repl {
        let mut r = Repl::new(State::new(), Mode::Teml);
        for l in lines {
            r.handle(l).unwrap_or_else(|e| panic!("{l}: {e}"));
        }
        r
    }

    #[test]
    fn load_takes_constants() {
        let (f, d) = load_args("f.teml -D N=4 -DM=2").unwrap();
        assert_eq!(f, "f.teml");
        assert_eq!(d, [("N".to_string(), 4), ("M".to_string(), 2)]);
        assert!(load_args("f.teml N=4").unwrap_err().contains("expected -D NAME=INT"));
        assert!(load_args("f.teml -D N=x").unwrap_err().contains("expected an integer"));
        // one identifier rule with `teml run -D` (ir::parse_define)
        assert!(load_args("f.teml -D 3=4").unwrap_err().contains("expected a constant name"));
        assert!(load_args("f.teml -D 9N=4").unwrap_err().contains("expected a constant name"));
        assert!(load_args("f.teml -D").unwrap_err().contains("after -D"));
        // a quoted path may hold spaces
        let (f, d) = load_args("\"my dir/f.teml\" -D N=4").unwrap();
        assert_eq!((f.as_str(), d), ("my dir/f.teml", vec![("N".to_string(), 4)]));
    }

    #[test]
    fn a_diff_is_unified_with_both_names_and_three_lines_of_context() {
        assert_eq!(unified_diff("a\nb\n", "a\nb\n", "l", "l2"), "");
        let a = "1\n2\n3\n4\n5\n6\n7\n8\n";
        let b = "1\n2\n3\n4\nfive\n6\n7\n8\n";
        let d = unified_diff(a, b, "l.c", "l2.c");
        assert_eq!(d, "--- l.c\n+++ l2.c\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
    }

    #[test]
    fn undo_and_redo_cover_lines_and_constants() {
        let mut r = repl(&["A = tensor([N])", "B = eq(A, [i] -> [i])", "l = build(B)"]);
        r.handle(":def N=8").unwrap();
        r.handle("l2 = stripmine(l, 1, 4)").unwrap();
        assert!(r.handle(":undo").unwrap().starts_with("undid `l2 = stripmine(l, 1, 4)`"));
        assert!(r.state().get("l2").is_none());
        assert!(r.handle(":undo").unwrap().starts_with("undid `:def N=8`"));
        assert_eq!(r.state().constant("N"), None);
        assert!(r.handle(":redo").unwrap().starts_with("redid `:def N=8`"));
        assert_eq!(r.state().constant("N"), Some(8));
        // a new change forgets what could be redone
        r.handle("l3 = stripmine(l, 1, 2)").unwrap();
        assert_eq!(r.handle(":redo").unwrap_err(), ":redo: nothing to redo");
        // a failing line is not a change
        assert!(r.handle("l4 = stripmine(l, 9, 2)").is_err());
        assert!(r.handle(":undo").unwrap().starts_with("undid `l3 = stripmine(l, 1, 2)`"));
    }

    #[test]
    fn run_verifies_at_a_reduced_size_when_the_full_one_is_too_large() {
        // 800^3 statement instances exceed the reference's default limit of 4e8; 50 is the largest
        // divisor of 800 up to 64.
        let mut r =
            repl(&[":def N=800", "A = tensor([N, N])", "B = tensor([N, N])", "C = contract(A, B, [2, 1])"]);
        r.handle("l = build(C)").unwrap();
        let out = r.handle(":run l").unwrap_or_else(|e| panic!("{e}"));
        assert!(out.contains("verified") && out.contains("reduced size (N=50)"), "{out}");
        assert!(out.contains("sampled elements"), "{out}");
    }

    /// `time(l)` in a Rhai line measures with the session's `:threads` and `:cflags` (it used
    /// to measure with the defaults, whatever the session said).
    #[test]
    fn time_in_rhai_lines_follows_threads_and_cflags() {
        let d = tempfile::tempdir().unwrap();
        let mut r = repl(&["A = tensor([16, 16])", "B = tensor([16, 16])", "C = contract(A, B, [2, 1])"]);
        r.set_opts(|o| o.cache_dir = Some(d.path().to_path_buf()));
        r.handle("l = build(C)").unwrap();
        r.handle(":threads 1").unwrap();
        r.handle(":rhai").unwrap();
        let m = r.handle("let m = time(l); `${m.verified} ${m.threads} ${m.cflags}`").unwrap();
        assert_eq!(m, "true 1 -O3 -march=native -fopenmp");
        // flags that make the kernel wrong: verification fails, and there is no time
        r.handle(":cflags -O2 -fopenmp -Ddouble=float").unwrap();
        r.handle(":threads 2").unwrap();
        let m = r.handle("let m = time(l); `${m.verified} ${m.threads} ${m.cflags} ${m.median_s}`").unwrap();
        assert_eq!(m, "false 2 -O2 -fopenmp -Ddouble=float ");
        // and so after an :undo, which makes the Rhai session again
        r.handle(":undo").unwrap();
        let m = r.handle("let m = time(l); `${m.verified} ${m.cflags}`").unwrap();
        assert_eq!(m, "false -O2 -fopenmp -Ddouble=float");
    }

    #[test]
    fn diff_shows_trees_and_c() {
        let mut r = repl(&["A = tensor([8, 8])", "B = eq(A, [i, j] -> [j, i])", "l = build(B)"]);
        r.handle("l2 = interchange(l, 1, 2)").unwrap();
        let d = r.handle(":diff l l2").unwrap();
        assert!(d.contains("--- l (tree)") && d.contains("+++ l2.c"), "{d}");
        assert!(d.contains("-for j in [0, 7]") && d.contains("+for i in [0, 7]"), "{d}");
        assert!(d.contains("-  for (int j = 0; j <= 7; j++)") && !d.contains("teml_l2"), "{d}");
        assert!(r.handle(":diff l l").unwrap().contains("are the same nest"));
        assert!(r.handle(":diff l").unwrap_err().contains("expected two loop nests"));
        assert!(r.handle(":diff l B").is_err());
    }

    #[test]
    fn export_writes_rhai_values_or_says_why_not() {
        let d = tempfile::tempdir().unwrap();
        let mut r = repl(&[":def N=6", "A = tensor([N, N])", ":rhai"]);
        r.handle("let B = tensor(float, [N]);").unwrap();
        r.handle("let C = eq(A, [i, j], [j, i]);").unwrap();
        r.handle("let l = build(C); codegen(l, \"t\");").unwrap();
        let f = d.path().join("s.teml");
        let e = r.handle(&format!(":export {}", f.display())).unwrap_err();
        assert!(e.contains("the tensor expression `C` was made in Rhai"), "{e}");
        assert!(!f.exists());
        // in the paper's syntax it exports
        let mut r = repl(&[":def N=6", "A = tensor([N, N])", "C = eq(A, [i, j] -> [j, i])", ":rhai"]);
        r.handle("let B = tensor(float, [N]);").unwrap();
        r.handle("let l = build(C); let l2 = stripmine(l, 1, 2); codegen(l2, \"t\");").unwrap();
        r.handle(&format!(":export {}", f.display())).unwrap();
        let text = std::fs::read_to_string(&f).unwrap();
        for line in [
            "N = 6",
            "B = tensor(float, [N])",
            "l = build(C)",
            "l2 = stripmine(l, 1, 2)",
            "codegen(l2, \"t\")",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        assert!(r.handle(":export s.txt").unwrap_err().contains("expected a FILE.teml"));
    }
}
