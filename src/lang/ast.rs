//! The syntax tree of a `.teml` program: statements whose arguments are already the
//! [`ArgVal`]s the builtins take, each with the place it was written.

use crate::ops::ArgVal;

/// A byte range `start..end` of the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

impl Span {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.end.saturating_sub(self.start)
    }

    /// True when the span covers nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An identifier and where it was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    /// The name.
    pub name: String,
    /// Where.
    pub span: Span,
}

/// One argument of a call. The arrow `X -> Y` gives two arguments, `X` (or
/// [`ArgVal::Omitted`], spanning the arrow) and `Y`.
#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    /// The argument as the builtins take it.
    pub value: ArgVal,
    /// Where it was written.
    pub span: Span,
}

/// A call `name(args)`.
#[derive(Clone, Debug, PartialEq)]
pub struct CallExpr {
    /// The builtin's name.
    pub name: Ident,
    /// The arguments, arrows flattened.
    pub args: Vec<Arg>,
    /// The whole call, name to `)`.
    pub span: Span,
}

impl CallExpr {
    /// The arguments as the builtins take them.
    pub fn arg_vals(&self) -> Vec<ArgVal> {
        self.args.iter().map(|a| a.value.clone()).collect()
    }
}

/// What a statement does.
#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// `id = call` (eq. 17) or `id = @at: call` (eq. 18).
    Assign {
        /// The identifier bound.
        target: Ident,
        /// The tensor named in generated code, when it differs (`@at:`).
        at: Option<Ident>,
        /// The builtin call.
        call: CallExpr,
    },
    /// `N = 250`: the default of a named constant (kept when `N` is already bound).
    Const {
        /// The constant.
        name: Ident,
        /// Its default value.
        value: i64,
    },
    /// A statement call: `init(...)`, `codegen(...)`.
    Call(CallExpr),
}

/// One statement.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// What it does.
    pub kind: StmtKind,
    /// Where it was written.
    pub span: Span,
}

impl Stmt {
    /// The identifier (or named constant) the statement binds, if any: what a REPL shows.
    pub fn defines(&self) -> Option<&str> {
        match &self.kind {
            StmtKind::Assign { target, .. } => Some(&target.name),
            StmtKind::Const { name, .. } => Some(&name.name),
            StmtKind::Call(_) => None,
        }
    }

    /// The call of the statement, if any.
    pub fn call(&self) -> Option<&CallExpr> {
        match &self.kind {
            StmtKind::Assign { call, .. } | StmtKind::Call(call) => Some(call),
            StmtKind::Const { .. } => None,
        }
    }
}

/// A parsed program, with its source (for diagnostics).
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// The file name diagnostics show.
    pub file: String,
    /// The source text.
    pub src: String,
    /// The statements, in order.
    pub stmts: Vec<Stmt>,
}
