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

    /// A transformation that would change the meaning of the nest or cannot be expressed.
    #[error("{builtin}: {reason}")]
    Illegal { builtin: String, reason: String },
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
            Error::FuseMismatch { .. } | Error::Illegal { .. } => None,
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
            | Error::Illegal { builtin, .. } => builtin,
        }
    }
}
