//! The interactive session: both syntaxes, history, completion, multi-line input, and commands
//! to inspect, compile, verify and time what the session built. An error never ends the
//! session; the state before the failing line is kept.

use crate::ir::{Name, State, Value};
use crate::pipeline::{Flags, KernelRef, Pipeline, Program, RunOptions, Timing};
use crate::script::{Session, Stdlib};
use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Editor, Helper};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// The REPL's commands, with their help lines.
pub const COMMANDS: &[(&str, &str)] = &[
    (":help", "this list"),
    (":teml", "switch to the paper's syntax (the default): `B = eq(A, [i1, i2] -> [i2, i1])`"),
    (":rhai", "switch to Rhai syntax: `let B = eq(A, [i1, i2], [i2, i1]);`"),
    (":tree ID", "print a value as an indented tree (tensor expression or loop nest)"),
    (":paper ID", "print a value in the paper's ⟨(op, S, I), [...]⟩ notation"),
    (":c ID", "print the C code generated for the loop nest ID"),
    (":legal ID", "is the nest legal? (the dependences it keeps, or a witness of the one it breaks)"),
    (":history ID", "the builtin calls that made the nest ID, from its build, as .teml statements"),
    (":run ID", "compile the nest ID, run it and verify it against the untransformed program"),
    (":time ID", ":run, then time it and the untransformed build (speedup)"),
    (":state", "list every identifier and what it denotes"),
    (":def NAME=INT", "bind a named constant (like -D NAME=INT)"),
    (":threads N", "OpenMP threads for :run/:time"),
    (":cflags FLAGS", "C compiler flags for :run/:time (default -O3 -march=native -fopenmp)"),
    (":load FILE", "evaluate a .teml or .rhai file, or load a state saved as .json"),
    (":save FILE", "save the whole state as JSON"),
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

struct TemlHelper {
    state: Rc<RefCell<Vec<String>>>,
}

impl Completer for TemlHelper {
    type Candidate = Pair;

    fn complete(&self, line: &str, pos: usize, _ctx: &Context<'_>) -> rustyline::Result<(usize, Vec<Pair>)> {
        let start =
            line[..pos].rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).map_or(0, |k| k + 1);
        let word = &line[start..pos];
        if word.is_empty() {
            return Ok((start, Vec::new()));
        }
        let mut names: Vec<String> = Vec::new();
        if word.starts_with(':') {
            names.extend(COMMANDS.iter().map(|(c, _)| c.split(' ').next().unwrap_or(c).to_string()));
        } else {
            names.extend(crate::ops::builtins().iter().map(|b| b.name.to_string()));
            names.extend(crate::lang::Extensions::names(&Stdlib::get()));
            names.extend(self.state.borrow().iter().cloned());
        }
        names.sort();
        names.dedup();
        let c = names
            .into_iter()
            .filter(|n| n.starts_with(word))
            .map(|n| Pair { display: n.clone(), replacement: n })
            .collect();
        Ok((start, c))
    }
}

impl Hinter for TemlHelper {
    type Hint = String;
}

impl Highlighter for TemlHelper {}

impl Validator for TemlHelper {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        Ok(if is_complete(ctx.input()) {
            ValidationResult::Valid(None)
        } else {
            ValidationResult::Incomplete
        })
    }
}

impl Helper for TemlHelper {}

/// True when brackets are balanced outside strings and comments (otherwise the input goes on
/// on the next line).
pub fn is_complete(src: &str) -> bool {
    let mut depth: i64 = 0;
    let mut in_str = false;
    let mut chars = src.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => in_str = !in_str,
            '\\' if in_str => {
                chars.next();
            }
            '#' if !in_str => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
            }
            '/' if !in_str && chars.peek() == Some(&'/') => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
            }
            '(' | '[' | '{' if !in_str => depth += 1,
            ')' | ']' | '}' if !in_str => depth -= 1,
            _ => {}
        }
    }
    depth <= 0 && !in_str
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
    Saved(State),
}

/// Evaluates the session's inputs again from the named constants `consts`; returns the state
/// and the Rhai session the inputs made.
fn replay(
    log: &[Entry],
    consts: &BTreeMap<Name, i64>,
    unchecked: bool,
) -> Result<(State, Option<Session>), String> {
    let base = State { unchecked, ..State::new() };
    let mut state = consts.iter().fold(base, |s, (n, v)| s.with_const(n, *v));
    let mut session: Option<Session> = None;
    for e in log {
        match e {
            Entry::Teml(src) => {
                state = crate::lang::eval_stmt(src, "<repl>", &state, &Stdlib::get())
                    .map_err(|e| e.to_string())?
            }
            Entry::Rhai(src) => {
                if session.is_none() {
                    session = Some(Session::new(state.clone()).map_err(|e| e.to_string())?);
                }
                let s = session.as_mut().ok_or("no session")?;
                s.set_state(state.clone());
                s.eval_line(src).map_err(|e| e.to_string())?;
                state = s.state().clone();
            }
            Entry::Load(path) => state = crate::pipeline::eval_file(path, &state)?,
            Entry::Saved(saved) => {
                if let Some((n, v)) = consts.iter().find(|(n, v)| saved.constant(n).is_some_and(|x| x != **v))
                {
                    return Err(format!(
                        "the session was loaded from a saved state with {n}={}; it cannot be evaluated with {n}={v}",
                        saved.constant(n).unwrap_or_default()
                    ));
                }
                let mut s = saved.clone();
                s.consts.extend(consts.iter().map(|(n, v)| (n.clone(), *v)));
                state = s;
            }
        }
    }
    Ok((state, session))
}

/// The REPL.
pub struct Repl {
    state: State,
    session: Option<Session>,
    mode: Mode,
    opts: RunOptions,
    names: Rc<RefCell<Vec<String>>>,
    /// Every accepted input, in order.
    log: Vec<Entry>,
    /// Named constants from `-D` and `:def`.
    defines: BTreeMap<Name, i64>,
}

impl Repl {
    /// A session starting from `state`, in `mode`.
    pub fn new(state: State, mode: Mode) -> Repl {
        let defines = state.consts.clone();
        crate::pipeline::install_measurer(RunOptions {
            timing: Some(Timing::default()),
            ..RunOptions::default()
        });
        Repl {
            state,
            session: None,
            mode,
            opts: RunOptions::default(),
            names: Rc::new(RefCell::new(Vec::new())),
            log: Vec::new(),
            defines,
        }
    }

    /// The session as a program the pipeline can evaluate again at other sizes.
    fn program(&self) -> Program {
        let log = self.log.clone();
        let unchecked = self.state.unchecked;
        Program::new("<repl>", self.defines.clone(), move |consts| {
            replay(&log, consts, unchecked).map(|(s, _)| s)
        })
    }

    /// The current state.
    pub fn state(&self) -> &State {
        &self.state
    }

    fn session(&mut self) -> Result<&mut Session, String> {
        if self.session.is_none() {
            self.session = Some(Session::new(self.state.clone()).map_err(|e| e.to_string())?);
        }
        let s = self.session.as_mut().ok_or("no session")?;
        s.set_state(self.state.clone());
        Ok(s)
    }

    fn prompt(&self) -> &'static str {
        match self.mode {
            Mode::Teml => "teml> ",
            Mode::Rhai => "rhai> ",
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
                let before = self.state.clone();
                let s = crate::lang::eval_stmt(input, "<repl>", &self.state, &Stdlib::get())
                    .map_err(|e| e.to_string())?;
                self.state = s;
                self.log.push(Entry::Teml(input.to_string()));
                Ok(self.echo(&before))
            }
            Mode::Rhai => {
                let before = self.state.clone();
                let session = self.session()?;
                let out = session.eval_line(input).map_err(|e| e.to_string())?;
                let new_state = session.state().clone();
                self.state = new_state;
                self.log.push(Entry::Rhai(input.to_string()));
                let mut msg = self.echo(&before);
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

    fn command(&mut self, line: &str) -> Result<String, String> {
        let (cmd, arg) = line.split_once(char::is_whitespace).map_or((line, ""), |(c, a)| (c, a.trim()));
        let need = |what: &str| if arg.is_empty() { Err(format!("{cmd}: expected {what}")) } else { Ok(arg) };
        match cmd {
            ":help" | ":h" | ":?" => Ok(help()),
            ":teml" => {
                self.mode = Mode::Teml;
                Ok("paper syntax".into())
            }
            ":rhai" => {
                self.mode = Mode::Rhai;
                self.session()?;
                Ok("Rhai syntax".into())
            }
            ":tree" => Ok(self.value(need("an identifier")?)?.tree().trim_end().to_string()),
            ":paper" => Ok(self.value(need("an identifier")?)?.paper()),
            ":c" => {
                let id = need("a loop nest")?;
                self.request(id)?;
                let pipe = Pipeline::with_state(self.program(), self.state.clone(), self.opts.clone());
                pipe.generate(&KernelRef::Nest(Name::from(id)), 0)
                    .map(|k| k.source)
                    .map_err(|e| e.to_string())
            }
            ":history" => {
                let id = need("a loop nest")?;
                match self.state.get(id) {
                    Some(Value::Nest(n)) => Ok(n.history.lines().join("\n")),
                    Some(v) => Err(format!("`{id}` is {}: expected a loop nest", v.kind())),
                    None => Err(format!("unknown identifier `{id}`")),
                }
            }
            ":legal" => {
                let id = need("a loop nest")?;
                self.request(id)?;
                let Some(Value::Nest(n)) = self.state.get(id) else {
                    return Err(format!("`{id}` is not a loop nest"));
                };
                let v = crate::ops::explore::legal(&self.state, n)?;
                let perms = crate::ops::explore::permutations(&self.state, n, 4)?;
                let list: Vec<String> = perms.iter().map(|p| format!("{p:?}")).collect();
                Ok(format!(
                    "{id}: {}\nlegal orders of its outer loops: {}",
                    crate::ops::explore::describe(&v),
                    list.join(" ")
                ))
            }
            ":run" | ":time" => {
                let id = need("a loop nest")?;
                self.request(id)?;
                let mut opts = self.opts.clone();
                if cmd == ":time" {
                    opts.timing = Some(Timing::default());
                }
                let pipe = Pipeline::with_state(self.program(), self.state.clone(), opts);
                let r = pipe.run(&KernelRef::Nest(Name::from(id)), 0).map_err(|e| e.to_string())?.report;
                if r.verified { Ok(r.summary()) } else { Err(r.summary()) }
            }
            ":state" => Ok(self.state_listing()),
            ":def" => {
                let (n, v) = need("NAME=INT")?.split_once('=').ok_or(":def: expected NAME=INT")?;
                let v: i64 =
                    v.trim().parse().map_err(|_| format!(":def: expected an integer, found `{v}`"))?;
                let n = n.trim();
                // Everything built from the constant is evaluated again with the new value.
                let mut defines = self.defines.clone();
                defines.insert(Name::from(n), v);
                let (state, session) = replay(&self.log, &defines, self.state.unchecked).map_err(|e| {
                    let old = self.state.constant(n).map_or("unbound".to_string(), |x| x.to_string());
                    format!(
                        ":def {n}={v}: the session cannot be evaluated again with it ({n} stays {old}):\n{e}"
                    )
                })?;
                let changed = self.state.vars.iter().filter(|(k, x)| state.vars.get(*k) != Some(x)).count();
                self.state = state;
                self.session = session;
                self.defines = defines;
                Ok(format!(
                    "{n} = {v} ({changed} value{} evaluated again)",
                    if changed == 1 { "" } else { "s" }
                ))
            }
            ":threads" => {
                let n: usize = need("a number")?
                    .parse()
                    .map_err(|_| format!(":threads: expected a number, found `{arg}`"))?;
                self.opts.threads = Some(n);
                Ok(format!("{n} threads"))
            }
            ":cflags" => {
                self.opts.flags = Flags::parse(need("flags")?, ":cflags").map_err(|e| e.to_string())?;
                Ok(format!("flags: {}", self.opts.flags.opt.join(" ")))
            }
            ":load" => {
                let path = PathBuf::from(need("a file")?);
                let s = self.load(&path)?;
                let saved = path.extension().and_then(|e| e.to_str()) == Some("json");
                self.log.push(if saved { Entry::Saved(s.clone()) } else { Entry::Load(path.clone()) });
                self.state = s;
                Ok(format!("loaded {} ({} identifiers)", path.display(), self.state.vars.len()))
            }
            ":save" => {
                let path = need("a file")?;
                std::fs::write(path, self.state.to_json())
                    .map_err(|e| format!(":save: cannot write {path}: {e}"))?;
                Ok(format!("saved {path}"))
            }
            other => Err(format!(
                "unknown command `{other}`: expected one of {}",
                COMMANDS.iter().map(|(c, _)| c.split(' ').next().unwrap_or(c)).collect::<Vec<_>>().join(" ")
            )),
        }
    }

    fn load(&self, path: &Path) -> Result<State, String> {
        if path.extension().and_then(|e| e.to_str()) == Some("json") {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!(":load: cannot read {}: {e}", path.display()))?;
            return State::from_json(&text)
                .map_err(|e| format!(":load: {}: not a saved state: {e}", path.display()));
        }
        crate::pipeline::eval_file(path, &self.state)
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

    /// Runs the interactive loop on the terminal.
    pub fn run(mut self) -> i32 {
        let helper = TemlHelper { state: self.names.clone() };
        let mut rl: Editor<TemlHelper, rustyline::history::DefaultHistory> = match Editor::new() {
            Ok(e) => e,
            Err(e) => {
                eprintln!("error: cannot start the line editor: {e}");
                return 1;
            }
        };
        rl.set_helper(Some(helper));
        let history = history_path();
        if let Some(h) = &history {
            let _ = rl.load_history(h);
        }
        println!("teml {} — :help for commands, Ctrl-D to leave", env!("CARGO_PKG_VERSION"));
        loop {
            *self.names.borrow_mut() = self.state.vars.keys().map(|k| k.to_string()).collect();
            match rl.readline(self.prompt()) {
                Ok(line) => {
                    let _ = rl.add_history_entry(line.as_str());
                    if matches!(line.trim(), ":quit" | ":q" | ":exit") {
                        break;
                    }
                    match self.handle(&line) {
                        Ok(out) if out.is_empty() => {}
                        Ok(out) => println!("{out}"),
                        Err(e) => {
                            eprintln!("{}", if e.starts_with("error") { e } else { format!("error: {e}") })
                        }
                    }
                }
                Err(ReadlineError::Interrupted) => continue,
                Err(ReadlineError::Eof) => break,
                Err(e) => {
                    eprintln!("error: {e}");
                    break;
                }
            }
        }
        if let Some(h) = &history {
            if let Some(dir) = h.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = rl.save_history(h);
        }
        0
    }
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
        out.push_str(&format!("  {c:<15} {h}\n"));
    }
    out.push_str("builtins: ");
    out.push_str(&crate::ops::builtins().iter().map(|b| b.name).collect::<Vec<_>>().join(" "));
    out.push_str("\nstdlib: ");
    out.push_str(&crate::lang::Extensions::names(&Stdlib::get()).join(" "));
    out.push_str("\n(`teml builtins` prints the language reference)");
    out
}

/// Where history is kept: `$TEML_HISTORY`, else the user's data directory.
fn history_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TEML_HISTORY") {
        return Some(PathBuf::from(p));
    }
    dirs::data_local_dir().map(|d| d.join("teml").join("history.txt"))
}
