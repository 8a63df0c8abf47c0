//! How a generated space is written: the script's lines, each parameter's `param` call with
//! one comment line per choice and its reason, and the decisions that makes (the model's order:
//! the first choice is `teml auto`'s). Every rule writes through [`Out`], in typed statements
//! ([`super::code`]): comments and parameters aside, no line is written as text.

use super::code::{E, S, line};
use std::fmt::Write;

/// One choice of a parameter and why the model ranks it where it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// The choice as Rhai writes it (`8`, `"collapse"`, `[1, 3, 2]`).
    pub value: String,
    /// Why (for the first choice: why the model picks it).
    pub reason: String,
}

/// A parameter of the generated space, its choices in the model's order.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// Its name.
    pub name: String,
    /// The choices, the model's pick first.
    pub choices: Vec<Choice>,
}

impl Choice {
    /// The choice as `param` reports it (a string without its quotes).
    pub fn text(&self) -> &str {
        self.value.trim_matches('"')
    }
}

/// Writes the body line by line, with the parameters' comments.
#[derive(Default)]
pub(super) struct Out {
    pub(super) text: String,
    pub(super) indent: usize,
    pub(super) decisions: Vec<Decision>,
    /// Put before every parameter's name (the rules of one contraction of a lifted product).
    pub(super) prefix: String,
}

impl Out {
    fn line(&mut self, s: &str) {
        let _ = writeln!(self.text, "{}{s}", "    ".repeat(self.indent));
    }

    /// `// text`.
    pub(super) fn comment(&mut self, text: &str) {
        self.line(&format!("// {text}"));
    }

    /// The statements on one line.
    pub(super) fn stmts(&mut self, stmts: &[S]) {
        self.line(&line(stmts));
    }

    /// One statement on its line.
    pub(super) fn stmt(&mut self, st: S) {
        self.stmts(&[st]);
    }

    /// `if c {`, the lines after it inside.
    pub(super) fn begin_if(&mut self, c: E) {
        self.line(&format!("if {c} {{"));
        self.indent += 1;
    }

    /// `} else if c {`.
    pub(super) fn else_if(&mut self, c: E) {
        self.indent = self.indent.saturating_sub(1);
        self.line(&format!("}} else if {c} {{"));
        self.indent += 1;
    }

    /// `if c {` for the first of a chain of arms (`k == 0`), `} else if c {` for the others.
    pub(super) fn arm(&mut self, k: usize, c: E) {
        if k == 0 { self.begin_if(c) } else { self.else_if(c) }
    }

    /// `} else {`.
    pub(super) fn else_(&mut self) {
        self.indent = self.indent.saturating_sub(1);
        self.line("} else {");
        self.indent += 1;
    }

    /// `} else if c { body }`: the chain closed by a last arm on one line.
    pub(super) fn end_else_if(&mut self, c: E, body: &[S]) {
        self.indent = self.indent.saturating_sub(1);
        self.line(&format!("}} else {}", S::If(c, body.to_vec())));
    }

    /// `for x in e {`, the lines after it inside.
    pub(super) fn begin_for(&mut self, x: &str, e: E) {
        self.line(&format!("for {x} in {e} {{"));
        self.indent += 1;
    }

    /// `}`: the end of the innermost block.
    pub(super) fn end(&mut self) {
        self.indent = self.indent.saturating_sub(1);
        self.line("}");
    }

    /// `let var = param("name", [choices]);` with one comment line per choice.
    pub(super) fn param(&mut self, var: &str, name: &str, what: &str, choices: Vec<Choice>) {
        let mut seen: Vec<Choice> = Vec::new();
        for c in choices {
            if !seen.iter().any(|s| s.value == c.value) {
                seen.push(c);
            }
        }
        let name = format!("{}{name}", self.prefix);
        self.line(&format!("// {name}: {what}"));
        for c in &seen {
            self.line(&format!("//   {}: {}", c.value, c.reason));
        }
        let list = seen.iter().map(|c| E::Literal(c.value.clone())).collect();
        self.stmt(S::Let(
            var.into(),
            super::code::call("param", vec![super::code::text(&name), E::List(list)]),
        ));
        self.decisions.push(Decision { name, choices: seen });
    }
}

/// A choice and its reason.
pub(super) fn choice(value: impl ToString, reason: impl Into<String>) -> Choice {
    Choice { value: value.to_string(), reason: reason.into() }
}
