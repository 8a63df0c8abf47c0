//! The value types: index expressions, tensor-expression trees, loop trees and the state.
//! This layer knows nothing of parsing, C or scripting.

pub mod dtype;
pub mod expr;
pub mod history;
pub mod loops;
pub mod lower;
pub mod marks;
pub mod params;
pub mod rewrite;
pub mod state;
pub mod texpr;

pub use expr::{Atom, EvalError, Expr, Name, Overflow, is_c_ident, name, parse_define};
pub use history::{History, StepArg, Writer};
pub use loops::{Expansion, LNode, Layout, Loop, LoopAddr, Nest};
pub use lower::{Lowered, Update, lower};
pub use marks::Mark;
pub use marks::{Annotations, PackLayout};
pub use params::{Params, Seen};
pub use rewrite::Rewrite;
pub use state::{Init, KernelRequest, Role, Roles, State, Value, Warnings};
pub use texpr::{
    AssignMode, Before, DType, Dim, Domain, Func, Instance, Iters, Op, Range, Shape, TExpr, TNode, real_leaf,
};
