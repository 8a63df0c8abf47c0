//! The interactive session: both syntaxes, history, completion, multi-line input, and commands
//! to inspect, compile, verify and time what the session built. An error never ends the
//! session; the state before the failing line is kept.
//!
//! - `session.rs`: the session model ([`Repl`]: the log, undo/redo, the commands), testable
//!   without a terminal;
//! - here: the terminal (rustyline: completion, multi-line input, history, Ctrl-C).

mod session;

pub use session::{COMMANDS, Mode, Repl, help, unified_diff};

use crate::script::Stdlib;
use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Editor, Helper};
use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;

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

impl Repl {
    /// Runs the interactive loop on the terminal.
    pub fn run(mut self) -> i32 {
        let names: Rc<RefCell<Vec<String>>> = Rc::new(RefCell::new(Vec::new()));
        let helper = TemlHelper { state: names.clone() };
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
        // Ctrl-C while a command runs stops its compile or kernel, never the session.
        if let Err(e) = crate::runtime::interrupt::catch() {
            eprintln!("warning: Ctrl-C will end the session (cannot catch SIGINT: {e})");
        }
        println!("teml {} — :help for commands, Ctrl-D to leave", env!("CARGO_PKG_VERSION"));
        loop {
            *names.borrow_mut() = self.state().vars.keys().map(|k| k.to_string()).collect();
            match rl.readline(self.prompt()) {
                Ok(line) => {
                    let _ = rl.add_history_entry(line.as_str());
                    if matches!(line.trim(), ":quit" | ":q" | ":exit") {
                        break;
                    }
                    crate::runtime::interrupt::clear();
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

/// Where history is kept: `$TEML_HISTORY`, else the user's data directory.
fn history_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TEML_HISTORY") {
        return Some(PathBuf::from(p));
    }
    dirs::data_local_dir().map(|d| d.join("teml").join("history.txt"))
}
