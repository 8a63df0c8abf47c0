//! The errors a meta-program can meet. One variant per failure condition; every message names
//! the builtin, the argument, what was expected and what was found. Front-ends add the place
//! (`file:line:col`) by wrapping an [`Error`] in a located report.

use serde::{Deserialize, Serialize};

/// Result of every builtin.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Which argument of a builtin: its 1-based position and what it is for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arg {
    /// 1-based position.
    pub pos: usize,
    /// What the argument is for ("level", "factor", "iterators", ...).
    pub role: String,
}

impl Arg {
    /// Argument `pos` with role `role`.
    pub fn new(pos: usize, role: &str) -> Arg {
        Arg { pos, role: role.to_string() }
    }
}

impl std::fmt::Display for Arg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "argument {} ({})", self.pos, self.role)
    }
}

/// A malformed meta-program, an illegal transformation or a bad argument.
#[allow(missing_docs)] // fields: builtin, argument, expected, found
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum Error {
    /// An identifier that the state does not map.
    #[error("{builtin}: {arg}: unknown identifier `{name}`")]
    UnknownIdentifier { builtin: String, arg: Arg, name: String },

    /// A loop nest where a tensor expression is expected, or the reverse, or an assignment
    /// where `build` needs one and finds something else.
    #[error("{builtin}: {arg}: expected {expected}, found {found}")]
    WrongKind { builtin: String, arg: Arg, expected: String, found: String },

    /// An argument of the right kind with an unacceptable value (a factor of 0, ...).
    #[error("{builtin}: {arg}: expected {expected}, found {found}")]
    BadArgument { builtin: String, arg: Arg, expected: String, found: String },

    /// The iterator-list rules of eq. 14 and 15: a list given where the operand already has
    /// one (or is a scalar), omitted where it has none, or of the wrong length.
    #[error("{builtin}: {arg}: expected {expected}, found {found}")]
    IteratorList { builtin: String, arg: Arg, expected: String, found: String },

    /// Shapes or extents that must agree and do not.
    #[error("{builtin}: {arg}: shape mismatch: expected {expected}, found {found}")]
    ShapeMismatch { builtin: String, arg: Arg, expected: String, found: String },

    /// An access that leaves the extents of its tensor over the inferred ranges.
    #[error(
        "{builtin}: {arg}: access {access} is out of bounds: expected indices in 0..{max_index} \
         (extent {extent}), found {found}"
    )]
    OutOfBounds {
        builtin: String,
        arg: Arg,
        access: String,
        extent: String,
        max_index: String,
        found: String,
    },

    /// An iterator whose range cannot be determined from the accesses.
    #[error("{builtin}: {arg}: cannot infer the range of iterator `{iterator}`: {reason}")]
    RangeInference { builtin: String, arg: Arg, iterator: String, reason: String },

    /// A loop level that the nest does not have.
    #[error("{builtin}: {arg}: level out of range: {}", level_range(*depth, *level))]
    LevelOutOfRange { builtin: String, arg: Arg, level: i64, depth: usize },

    /// Fusion of nests (or loops) whose loops differ.
    #[error("{builtin}: cannot fuse at level {level}: expected {expected}, found {found}")]
    FuseMismatch { builtin: String, level: usize, expected: String, found: String },

    /// A transformation whose level lies below a branch of a non-perfect nest.
    #[error(
        "{builtin}: {arg}: level {level} lies below a branch: expected a single loop at level \
         {at}, found {found}"
    )]
    BelowBranch { builtin: String, arg: Arg, level: usize, at: usize, found: String },

    /// A transformation that would change the meaning of the nest: isl finds a dependence it
    /// reverses (the reason is `illegal: ` and the witness, docs/legality.md), or the nest's
    /// structure forbids it (a loop moved past one its bounds depend on, a parallel loop inside
    /// a vectorized one). The path is at fault, not the program: the tuner logs it as illegal.
    #[error("{builtin}: {reason}")]
    Illegal { builtin: String, reason: String },

    /// A mark (`parallelize`, `vectorize`, `collapse`) that code generation cannot realise as
    /// correct C (a parallel loop accumulating into an element that varies inside it).
    #[error("{builtin}: {reason}")]
    Unrealizable { builtin: String, reason: String },

    /// A program teml cannot turn into loops or C as it is written (a contraction where its sum
    /// does not distribute over the nest, a tensor used with two shapes in one kernel): the
    /// program, not the path, must change.
    #[error("{builtin}: {reason}")]
    Inexpressible { builtin: String, reason: String },

    /// A limit of the generated code or of teml: an integer outside C `int` (loop bounds,
    /// indices, extents, named constants), a tensor larger than the address space, a trip
    /// count over `unroll`'s [`crate::ops::transform::MAX_UNROLL`].
    #[error("{builtin}: {reason}")]
    Limit { builtin: String, reason: String },

    /// Something this machine lacks: isl cannot be loaded, so legality cannot be decided. Not
    /// a verdict on the program: install what is missing, or run with `--unchecked`.
    #[error("{builtin}: {reason}")]
    Environment { builtin: String, reason: String },

    /// A bug in teml, not in the program (the standard library failing to load or to run, an
    /// invariant that does not hold): please report it.
    #[error("{builtin}: internal error: {reason}")]
    Internal { builtin: String, reason: String },
}

/// "expected 1..=3, found 4", or, for a nest without loops, that there is no level at all.
fn level_range(depth: usize, level: i64) -> String {
    if depth == 0 {
        format!("expected a nest with loops, found {level} in a nest with no loops (a statement sequence)")
    } else {
        format!("expected 1..={depth}, found {level}")
    }
}

impl Error {
    /// An argument of the right kind with an unacceptable value: `builtin: argument pos (role):
    /// expected ..., found ...` ([`Error::BadArgument`]).
    pub fn bad_argument(
        builtin: impl Into<String>,
        arg: Arg,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) -> Error {
        Error::BadArgument { builtin: builtin.into(), arg, expected: expected.into(), found: found.into() }
    }

    /// The argument the error names, for the variants that name one.
    pub fn arg(&self) -> Option<&Arg> {
        match self {
            Error::UnknownIdentifier { arg, .. }
            | Error::WrongKind { arg, .. }
            | Error::BadArgument { arg, .. }
            | Error::IteratorList { arg, .. }
            | Error::ShapeMismatch { arg, .. }
            | Error::OutOfBounds { arg, .. }
            | Error::RangeInference { arg, .. }
            | Error::LevelOutOfRange { arg, .. }
            | Error::BelowBranch { arg, .. } => Some(arg),
            Error::FuseMismatch { .. }
            | Error::Illegal { .. }
            | Error::Unrealizable { .. }
            | Error::Inexpressible { .. }
            | Error::Limit { .. }
            | Error::Environment { .. }
            | Error::Internal { .. } => None,
        }
    }

    /// The builtin the error comes from.
    pub fn builtin(&self) -> &str {
        match self {
            Error::UnknownIdentifier { builtin, .. }
            | Error::WrongKind { builtin, .. }
            | Error::BadArgument { builtin, .. }
            | Error::IteratorList { builtin, .. }
            | Error::ShapeMismatch { builtin, .. }
            | Error::OutOfBounds { builtin, .. }
            | Error::RangeInference { builtin, .. }
            | Error::LevelOutOfRange { builtin, .. }
            | Error::FuseMismatch { builtin, .. }
            | Error::BelowBranch { builtin, .. }
            | Error::Illegal { builtin, .. }
            | Error::Unrealizable { builtin, .. }
            | Error::Inexpressible { builtin, .. }
            | Error::Limit { builtin, .. }
            | Error::Environment { builtin, .. }
            | Error::Internal { builtin, .. } => builtin,
        }
    }

    /// A refusal of the path, not of the program: an illegal transformation or a mark code
    /// generation cannot realise (a tuner's `illegal` candidate).
    pub fn is_refusal(&self) -> bool {
        matches!(self, Error::Illegal { .. } | Error::Unrealizable { .. })
    }

    /// What the user can do about an error that is not the program's fault.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            Error::Environment { .. } => Some(
                "install isl (Debian: `apt-get install libisl23`, which gcc usually brings), or run with \
                 --unchecked to skip the legality check (verification still compares every kernel)",
            ),
            Error::Internal { .. } => Some("this is a bug in teml: please report it with the program"),
            _ => None,
        }
    }
}

/// A meta-program that did not evaluate: the located message the front-end rendered
/// (`file:line:col`, the line, the caret, notes), and the core error when a builtin raised one,
/// kept typed so that callers (the tuner, the REPL) match on it instead of on the text.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ProgramError {
    /// The whole message, as the user sees it.
    pub message: String,
    /// The core error behind it (`None`: a syntax error, a missing file, a script's own error).
    pub error: Option<Error>,
}

impl ProgramError {
    /// A failure with no core error behind it (an unreadable file, a syntax error).
    pub fn plain(message: impl Into<String>) -> ProgramError {
        ProgramError { message: message.into(), error: None }
    }

    /// An illegal transformation or an unrealizable mark ([`Error::is_refusal`]).
    pub fn is_refusal(&self) -> bool {
        self.error.as_ref().is_some_and(Error::is_refusal)
    }

    /// The message as the user reads it (`teml run`, `teml check`, the REPL): the located
    /// message, and what to do when the machine (isl missing) or teml is at fault
    /// ([`Error::hint`]).
    pub fn with_hint(&self) -> String {
        match self.error.as_ref().and_then(Error::hint) {
            Some(h) => format!("{}\n  = help: {h}", self.message),
            None => self.message.clone(),
        }
    }
}

impl From<String> for ProgramError {
    fn from(message: String) -> Self {
        ProgramError::plain(message)
    }
}

impl From<&str> for ProgramError {
    fn from(message: &str) -> Self {
        ProgramError::plain(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tuner and the REPL match on these: only an illegal path or an unrealizable mark is
    /// a refusal; a missing isl or a bug is not the path's fault and says what to do.
    #[test]
    fn each_condition_has_its_variant() {
        let e = |f: fn(String, String) -> Error| f("b".into(), "why".into());
        let illegal = e(|builtin, reason| Error::Illegal { builtin, reason });
        let unreal = e(|builtin, reason| Error::Unrealizable { builtin, reason });
        let limit = e(|builtin, reason| Error::Limit { builtin, reason });
        let env = e(|builtin, reason| Error::Environment { builtin, reason });
        let internal = e(|builtin, reason| Error::Internal { builtin, reason });
        let program = e(|builtin, reason| Error::Inexpressible { builtin, reason });
        assert!(illegal.is_refusal() && unreal.is_refusal());
        assert!(!limit.is_refusal() && !env.is_refusal() && !internal.is_refusal() && !program.is_refusal());
        assert!(env.hint().is_some_and(|h| h.contains("--unchecked")));
        assert_eq!(internal.to_string(), "b: internal error: why");
        let p = ProgramError { message: "error: b: why".into(), error: Some(env) };
        assert!(!p.is_refusal() && p.with_hint().contains("= help: install isl"));
        assert!(ProgramError { message: String::new(), error: Some(unreal) }.is_refusal());
    }
}
