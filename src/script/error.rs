//! Script errors with their place: `file:line:col`, the source line with a caret under the call
//! or argument at fault, and the message (a TeML builtin's message kept word for word).

use crate::error::Error;
use crate::lang::{Located, close_names};
use rhai::{EvalAltResult, ParseError, Position};
use std::fmt;

/// Where the standard library's functions come from (the id of its module, and the `source`
/// Rhai reports for errors raised inside it).
pub const STDLIB_ID: &str = "teml:stdlib";

/// A failed script: the message, and where it points.
///
/// Its `Display` is
///
/// ```text
/// error: stripmine: argument 3 (factor): expected a factor of 1 or more, found 0
///  --> prog.rhai:4:25
///   |
/// 4 | let l1 = stripmine(l, 1, 0);
///   |                          ^
/// ```
///
/// followed by `= note:` lines naming the functions the error passed through (e.g. `in tile
/// (stdlib)`).
#[derive(Clone, Debug, PartialEq)]
pub struct ScriptError {
    /// The file name given to [`eval`](super::eval) (`<repl>`, `prog.rhai`, ...).
    pub file: String,
    /// 1-based line; 0 when the error has no place (a limit met outside any statement).
    pub line: usize,
    /// 1-based column, in characters (0 when `line` is 0).
    pub col: usize,
    /// The text of the line (empty when `line` is 0).
    pub line_text: String,
    /// How many characters the caret underlines.
    pub width: usize,
    /// What went wrong.
    pub message: String,
    /// The functions the error passed through, innermost first (`in tile (stdlib)`).
    pub notes: Vec<String>,
    /// The TeML error, when a builtin raised it.
    pub error: Option<Error>,
}

impl ScriptError {
    /// An error pointing at `pos` of `src`.
    pub(crate) fn at(file: &str, src: &str, pos: Position, width: usize, message: String) -> ScriptError {
        let (line, col) = match (pos.line(), pos.position()) {
            (Some(l), Some(c)) => (l, c),
            (Some(l), None) => (l, 1),
            _ => (0, 0),
        };
        let line_text =
            if line > 0 { src.lines().nth(line - 1).unwrap_or("").to_string() } else { String::new() };
        let line = if line > 0 && line > src.lines().count().max(1) { 0 } else { line };
        ScriptError {
            file: file.to_string(),
            line,
            col,
            line_text: line_text.trim_end_matches('\r').to_string(),
            width: width.max(1),
            message,
            notes: Vec::new(),
            error: None,
        }
    }

    /// An error with no place in the source.
    pub(crate) fn plain(file: &str, message: String) -> ScriptError {
        ScriptError::at(file, "", Position::NONE, 1, message)
    }

    /// The same error as a [`Located`] diagnostic (for front-ends that print those).
    pub fn to_located(&self) -> Located {
        Located {
            file: self.file.clone(),
            line: self.line,
            col: self.col,
            line_text: self.line_text.clone(),
            message: self.message.clone(),
            width: self.width,
            error: self.error.clone(),
        }
    }
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            writeln!(f, "error: {}", self.message)?;
            write!(f, " --> {}", self.file)?;
        } else {
            write!(f, "{}", self.to_located())?;
        }
        let pad = " ".repeat(if self.line == 0 { 1 } else { self.line.to_string().len() + 1 });
        for n in &self.notes {
            write!(f, "\n{pad}= note: {n}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScriptError {}

/// A syntax error.
pub(crate) fn from_parse(file: &str, src: &str, e: &ParseError) -> ScriptError {
    ScriptError::at(file, src, e.position(), 1, format!("syntax error: {}", e.err_type()))
}

/// What the host knows beyond the Rhai error: the TeML error a builtin raised last, the
/// names that exist (for suggestions) and the operation limit (for its message).
pub(crate) struct Context<'a> {
    pub last_error: Option<Error>,
    pub names: &'a dyn Fn() -> Vec<String>,
    pub max_operations: u64,
    pub max_time: std::time::Duration,
    pub max_call_levels: usize,
}

/// Converts a Rhai evaluation error: the message of the innermost error, placed at the
/// innermost position that lies in the user's source (errors inside standard-library functions
/// point at the call of the library function).
pub(crate) fn from_eval(file: &str, src: &str, e: &EvalAltResult, cx: &Context<'_>) -> ScriptError {
    let mut notes = Vec::new();
    let mut pos = e.position();
    let mut cur = e;
    let mut in_user_file = true;
    while let EvalAltResult::ErrorInFunctionCall(name, source, inner, call_pos) = cur {
        if in_user_file {
            pos = *call_pos;
        }
        if source == STDLIB_ID {
            // A composite's body (`made_tile2`, behind `tile`: `recorded`) is not a name users call.
            if !name.starts_with("made_") {
                notes.push(format!("in `{name}` (stdlib)"));
            }
            in_user_file = false;
        } else {
            match (call_pos.line(), in_user_file) {
                (Some(l), true) => notes.push(format!("in `{name}`, called at line {l}")),
                _ => notes.push(format!("in `{name}`")),
            }
        }
        cur = inner;
    }
    if in_user_file && !cur.position().is_none() {
        pos = cur.position();
    }
    notes.reverse();
    let (message, error) = message_of(cur, cx);
    let mut width = ident_width(src, pos);
    // An error a builtin raised about one of its arguments: point at that argument.
    if let (true, Some(err)) = (in_user_file, &error)
        && let Some((p, w)) = argument_place(src, pos, err)
    {
        pos = p;
        width = w;
    }
    let mut out = ScriptError::at(file, src, pos, width, message);
    out.notes = notes;
    out.error = error;
    out
}

/// The message of an innermost error, and the TeML error behind it.
fn message_of(e: &EvalAltResult, cx: &Context<'_>) -> (String, Option<Error>) {
    match e {
        EvalAltResult::ErrorRuntime(d, _) => {
            let msg = if d.is_string() { d.clone().into_string().unwrap_or_default() } else { d.to_string() };
            let err = cx.last_error.clone().filter(|x| x.to_string() == msg);
            (msg, err)
        }
        EvalAltResult::ErrorFunctionNotFound(sig, _) => {
            let name = sig.split(['(', ' ']).next().unwrap_or(sig).to_string();
            let close = close_names(&name, &(cx.names)());
            let mut msg = format!("unknown builtin or function `{name}` (called as `{sig}`)");
            if close.contains(&name) {
                msg = match signature_of(&name) {
                    Some(expected) => format!("`{name}`: expected {expected}, found `{sig}`"),
                    None => format!("`{name}` cannot be called with these arguments (`{sig}`)"),
                };
            } else if !close.is_empty() {
                let quoted: Vec<String> = close.iter().map(|n| format!("`{n}`")).collect();
                msg.push_str(&format!("; did you mean {}?", quoted.join(" or ")));
            }
            (msg, None)
        }
        EvalAltResult::ErrorTooManyOperations(_) => (
            format!("the script ran past its limit of {} operations (an endless loop?)", cx.max_operations),
            None,
        ),
        EvalAltResult::ErrorTerminated(why, _) if why.to_string().starts_with("interrupted") => {
            ("interrupted (Ctrl-C)".to_string(), None)
        }
        EvalAltResult::ErrorTerminated(_, _) => {
            (format!("the script ran past its time limit of {} s", cx.max_time.as_secs_f64()), None)
        }
        EvalAltResult::ErrorStackOverflow(_) => (
            format!("function calls nested deeper than {} levels (endless recursion?)", cx.max_call_levels),
            None,
        ),
        other => {
            let text = other.to_string();
            let pos = other.position();
            let suffix = format!(" ({pos})");
            let text =
                if pos.is_none() { text.as_str() } else { text.strip_suffix(&suffix).unwrap_or(&text) };
            (text.to_string(), None)
        }
    }
}

/// How a builtin, library function or helper is called.
fn signature_of(name: &str) -> Option<String> {
    if let Some(b) = crate::ops::lookup(name) {
        return Some(b.signature.to_string());
    }
    if let Some(f) = super::library::functions().iter().find(|f| f.name == name) {
        return Some(f.signatures.join(" or "));
    }
    super::library::HELPERS.iter().find(|h| h.0 == name).map(|h| h.1.to_string())
}

/// The byte offset of a 1-based line and character column.
fn offset(src: &str, pos: Position) -> Option<usize> {
    let (line, col) = (pos.line()?, pos.position().unwrap_or(1));
    let start = if line == 1 { 0 } else { src.match_indices('\n').nth(line - 2).map(|(i, _)| i + 1)? };
    let rest = &src[start..];
    let mut chars = rest.char_indices();
    let mut at = rest.len();
    for k in 1..=col {
        match chars.next() {
            Some((i, _)) if k == col => at = i,
            Some(_) => {}
            None => break,
        }
    }
    Some(start + at)
}

/// The width of the identifier at `pos` (at least 1).
fn ident_width(src: &str, pos: Position) -> usize {
    offset(src, pos)
        .map(|o| src[o..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').count())
        .unwrap_or(1)
        .max(1)
}

/// The place of the argument a builtin's error names, when `pos` points at the call: scans
/// the call's parentheses, splitting at top-level commas.
fn argument_place(src: &str, pos: Position, err: &Error) -> Option<(Position, usize)> {
    let arg = err.arg()?;
    let start = offset(src, pos)?;
    let name: String = src[start..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    if name != err.builtin() || arg.pos == 0 {
        return None;
    }
    let open = start + name.len();
    let rest = &src[open..];
    if !rest.starts_with('(') {
        return None;
    }
    // Spans (byte offsets) of the arguments.
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut arg_start = open + 1;
    let mut in_str = false;
    let mut escaped = false;
    for (i, c) in rest.char_indices() {
        let at = open + i;
        if in_str {
            match (c, escaped) {
                ('\\', false) => escaped = true,
                ('"', false) => in_str = false,
                _ => escaped = false,
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    spans.push((arg_start, at));
                    break;
                }
            }
            ',' if depth == 1 => {
                spans.push((arg_start, at));
                arg_start = at + 1;
            }
            _ => {}
        }
    }
    let k = if arg.role.starts_with("result iterators") { spans.len() } else { arg.pos };
    let (s, e) = *spans.get(k.checked_sub(1)?)?;
    let text = &src[s..e];
    let lead = text.len() - text.trim_start().len();
    let s = s + lead;
    let width = src[s..e].trim_end().chars().count();
    // Back to line and column.
    let line = src[..s].matches('\n').count() + 1;
    let line_start = src[..s].rfind('\n').map_or(0, |i| i + 1);
    let col = src[line_start..s].chars().count() + 1;
    let first_line_width = src[s..].lines().next().map_or(1, |l| l.chars().count()).min(width);
    let line = u16::try_from(line).ok()?;
    let col = u16::try_from(col).ok()?;
    Some((Position::new(line, col), first_line_width.max(1)))
}

impl From<ScriptError> for crate::error::ProgramError {
    fn from(e: ScriptError) -> Self {
        crate::error::ProgramError { message: e.to_string(), error: e.error }
    }
}
