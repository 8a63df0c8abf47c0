//! The `.teml` front-end: the paper's syntax (pest) and its evaluation through the builtin table.
//!
//! ```text
//! # Fig. 6
//! N = 250                                  # a default: -D N=100 overrides it
//! A = tensor([N, N])
//! B = tensor([N, N])
//! C = tensor([N, N])
//! D = vadd(A, B, [[i1, i2], [i1, i2]])
//! E = mul(C, D, [[i1, i2], ] -> [i1, i2])
//! l = build(E); l1 = stripmine(l, 2, 32)
//! codegen(l1)
//! ```
//!
//! - One statement per line (`;` also separates); `#` comments run to the end of the line.
//! - Statements: `id = call` (eq. 17), `id = @id2: call` (eq. 18), statement calls
//!   (`init(A, random)`, `codegen(l1, l2)`), and `N = 250`, which defines the named constant `N`
//!   (once per program: a second definition is an error) unless `-D N=...` already bound it.
//! - Arguments map to [`ArgVal`](crate::ops::ArgVal): an identifier to `Word`, an integer (or a constant
//!   expression) to `Int`, a number with `.` or an exponent to `Float`, `"..."` to `Str`,
//!   `[...]` to `List` (an element left out, as in `[[i1, i2], ]`, is `Omitted`; `[]` is the
//!   empty list), any other affine expression (`i+1`, `2*i`, `h+kh`, `N-1`, `-i+4`) to `Index`.
//!   The arrow `X -> Y` gives two arguments: `X` (or `Omitted`: `eq(D, -> [i1, i2])`) and `Y`.
//! - Errors are [`Located`]: the message, `file:line:col` and the line with a marker under the
//!   argument the error names.

mod ast;
mod diag;
mod eval;
mod parse;
mod write;

pub use ast::{Arg, CallExpr, Ident, Program, Span, Stmt, StmtKind};
pub use diag::Located;
pub use eval::{Extensions, NoExtensions, close_names, eval_one, eval_program};
pub use parse::MAX_DEPTH;
pub use write::{rhai_ref, rhai_string, statements_for};

use crate::ir::State;

/// Parses a program (`file` is the name diagnostics show).
pub fn parse(src: &str, file: &str) -> Result<Program, Located> {
    parse::parse(src, file)
}

/// Parses and evaluates a whole program from `state` with the builtins alone.
pub fn eval(src: &str, file: &str, state: &State) -> Result<State, Located> {
    eval_with(src, file, state, &NoExtensions)
}

/// Parses and evaluates a whole program from `state`; names not in the builtin table are
/// offered to `ext`. Pure: on error the caller still has `state`.
pub fn eval_with(src: &str, file: &str, state: &State, ext: &dyn Extensions) -> Result<State, Located> {
    let program = parse(src, file)?;
    eval_program(&program, state, ext)
}

/// Evaluates one line of input (a REPL's; it may hold several statements separated by `;`)
/// from `state`. On error nothing of the line takes effect: the caller keeps `state`.
pub fn eval_stmt(line: &str, file: &str, state: &State, ext: &dyn Extensions) -> Result<State, Located> {
    eval_with(line, file, state, ext)
}
