//! How a loop nest was made: the chain of builtin calls from its `build` (what `:history`
//! shows and what a tuner writes back as a replayable `.teml` path). History never takes part
//! in equality: two nests with the same loops are the same nest, however they were made.

use super::expr::Name;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;

/// One builtin call that produced a nest.
#[derive(Debug)]
pub struct Step {
    /// The builtin, as written in programs (`stripmine`).
    pub builtin: String,
    /// Its arguments, in order.
    pub args: Vec<StepArg>,
}

/// An argument of a [`Step`].
#[derive(Clone, Debug)]
pub enum StepArg {
    /// A nest, with its own history.
    Nest(History),
    /// Anything else, as `.teml` source text (`2`, `[2, 1]`, `C`).
    Text(String),
}

/// The history of a nest: the step that made it, if known (nests made by hand in Rust, or
/// loaded from a saved state, have none).
#[derive(Clone, Debug, Default)]
pub struct History(pub Option<Arc<Step>>);

impl PartialEq for History {
    fn eq(&self, _: &History) -> bool {
        true
    }
}

impl History {
    /// The history of a nest made by `builtin(args)`.
    pub fn step(builtin: &str, args: Vec<StepArg>) -> History {
        History(Some(Arc::new(Step { builtin: builtin.to_string(), args })))
    }

    /// True when the nest's making is known all the way back to its `build`s.
    pub fn is_complete(&self) -> bool {
        match &self.0 {
            None => false,
            Some(s) => s.args.iter().all(|a| match a {
                StepArg::Nest(h) => h.is_complete(),
                StepArg::Text(_) => true,
            }),
        }
    }

    /// The chain of calls, one per line, innermost first: `build(C)`, `stripmine(_, 1, 32)`...
    pub fn lines(&self) -> Vec<String> {
        let none = BTreeSet::new();
        let mut w = Writer::new(&none);
        match w.name_of(self) {
            Some(_) => w.lines,
            None => vec!["(made outside any builtin: no history)".into()],
        }
    }
}

/// Writes histories as `.teml` statements, naming every intermediate nest once.
pub struct Writer<'a> {
    taken: &'a BTreeSet<Name>,
    names: BTreeMap<*const Step, String>,
    next: usize,
    /// The statements written so far.
    pub lines: Vec<String>,
}

impl<'a> Writer<'a> {
    /// A writer whose names avoid `taken` (the program's own identifiers).
    pub fn new(taken: &'a BTreeSet<Name>) -> Writer<'a> {
        Writer { taken, names: BTreeMap::new(), next: 0, lines: Vec::new() }
    }

    fn fresh(&mut self) -> String {
        loop {
            self.next += 1;
            let n = format!("l{}", self.next);
            if !self.taken.contains(n.as_str()) && !self.names.values().any(|x| *x == n) {
                return n;
            }
        }
    }

    /// Knows the nest `h` as `name` already (bound by statements written elsewhere): later
    /// statements refer to it by that name instead of writing its steps again.
    pub fn bind(&mut self, h: &History, name: &str) {
        if let Some(step) = &h.0 {
            self.names.insert(Arc::as_ptr(step), name.to_string());
        }
    }

    /// [`Writer::name_of`], naming the nest itself `preferred` when that name is free.
    pub fn name_as(&mut self, h: &History, preferred: &str) -> Option<String> {
        let step = h.0.as_ref()?;
        if self.names.contains_key(&Arc::as_ptr(step))
            || self.taken.contains(preferred)
            || self.names.values().any(|x| x == preferred)
        {
            return self.name_of(h);
        }
        let mut args = Vec::new();
        for a in &step.args {
            args.push(match a {
                StepArg::Nest(inner) => self.name_of(inner)?,
                StepArg::Text(t) => t.clone(),
            });
        }
        self.lines.push(format!("{preferred} = {}({})", step.builtin, args.join(", ")));
        self.names.insert(Arc::as_ptr(step), preferred.to_string());
        Some(preferred.to_string())
    }

    /// Writes the statements that make `h` (those not written yet) and returns the name of
    /// the nest; `None` when some step is unknown.
    pub fn name_of(&mut self, h: &History) -> Option<String> {
        let step = h.0.as_ref()?;
        let key = Arc::as_ptr(step);
        if let Some(n) = self.names.get(&key) {
            return Some(n.clone());
        }
        let mut args = Vec::new();
        for a in &step.args {
            args.push(match a {
                StepArg::Nest(inner) => self.name_of(inner)?,
                StepArg::Text(t) => t.clone(),
            });
        }
        let name = self.fresh();
        let mut line = String::new();
        let _ = write!(line, "{name} = {}({})", step.builtin, args.join(", "));
        self.lines.push(line);
        self.names.insert(key, name.clone());
        Some(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_steps_are_written_once() {
        let b = History::step("build", vec![StepArg::Text("C".into())]);
        let s = History::step("stripmine", vec![StepArg::Nest(b.clone()), StepArg::Text("1".into())]);
        let f = History::step(
            "fuse_outer",
            vec![StepArg::Nest(s.clone()), StepArg::Nest(s), StepArg::Text("1".into())],
        );
        let taken: BTreeSet<Name> = [Name::from("l1")].into_iter().collect();
        let mut w = Writer::new(&taken);
        assert_eq!(w.name_of(&f).as_deref(), Some("l4"));
        assert_eq!(w.lines, vec!["l2 = build(C)", "l3 = stripmine(l2, 1)", "l4 = fuse_outer(l3, l3, 1)"]);
        assert!(f.is_complete());
        assert!(!History::default().is_complete());
    }
}
