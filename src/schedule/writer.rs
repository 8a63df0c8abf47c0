//! How a generated space is written: the script's lines, each parameter's `param` call with
//! one comment line per choice and its reason, and the decisions that makes (the model's order:
//! the first choice is `teml auto`'s). Every rule writes through [`Out`].

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
    pub(super) fn line(&mut self, s: &str) {
        let _ = writeln!(self.text, "{}{s}", "    ".repeat(self.indent));
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
        let list: Vec<&str> = seen.iter().map(|c| c.value.as_str()).collect();
        self.line(&format!("let {var} = param(\"{name}\", [{}]);", list.join(", ")));
        self.decisions.push(Decision { name, choices: seen });
    }
}

/// A choice and its reason.
pub(super) fn choice(value: impl ToString, reason: impl Into<String>) -> Choice {
    Choice { value: value.to_string(), reason: reason.into() }
}
