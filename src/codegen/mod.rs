//! C code generation: loop nests to one readable C99 translation unit.
//!
//! Arrays are passed as pointers to arrays (`double (*restrict A)[N]`) and indexed naturally
//! (`A[i][j]`); named constants are `#define`d; names are kept, except that a C keyword gets a
//! suffix (`do_`) and so does a tensor named like an iterator (`i_`); unrolled statements are
//! laid out one per line. Marks become OpenMP pragmas. Whether a mark is legal is decided
//! before code generation, by isl: the builtin registry refuses, after every transformation
//! (`parallelize` and `vectorize` included), a nest with a marked loop that carries a
//! dependence other than a reduction ([`crate::ops::registry::legality_gate`],
//! [`crate::analysis::legality`]; skipped under `--unchecked`). How a legal mark is realized is
//! asked of [`crate::analysis::kernel::realise`], the same question a `codegen` statement asks
//! to validate its request: its pragma as it is (iterations that carry no dependence, or write
//! disjoint elements), private accumulators with a `reduction(+: ...)` clause (a reduction into
//! elements fixed for the loop, [`crate::analysis::reduction`]), or a refusal with the reason.
//! Two passes: the kernel's plan (`plan.rs`: storage contraction, the buffers the kernel holds,
//! layouts, parameters and C names) and each loop's plan (`loop_plan.rs`: where it splits, its
//! panels, lanes, register band, how its marks are realized), then the printer, which follows
//! them (`print.rs` walks a nest; one file per concern). Accumulators that a contraction
//! introduces are zeroed at the first update of each element, in the transformed order
//! ([`crate::analysis::zeroing`]).
//!
//! The translation unit exports the kernel (`void <name>(...)`) and `void teml_entry(void
//! **args)`, which calls it with the buffers in parameter order.

mod amx;
mod band;
mod buffers;
mod dot;
mod expr;
mod lanes;
mod loop_plan;
mod names;
mod pack;
mod plan;
mod prelude;
mod print;
mod split;

use band::*;
use buffers::*;
use dot::*;
use expr::*;
use lanes::*;
use loop_plan::*;
use names::*;
use pack::*;
use plan::*;
use prelude::*;
use print::*;
use split::*;

use crate::analysis::kernel;
use crate::analysis::reduction::Plan;
use crate::analysis::storage;
use crate::analysis::vector::{self, Lanes, Target};
use crate::analysis::zeroing::{self, PlacedNode, Zero};
use crate::error::{Error, Result};
use crate::ir::marks::{self, Mark, Scope};
use crate::ir::{
    Atom, DType, Expr, Func, Iters, Loop, Lowered, Name, Nest, Op, State, TNode, Update, is_c_ident, lower,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::rc::Rc;
use std::sync::Arc;

/// Name of the generic entry point every generated translation unit exports.
pub const ENTRY: &str = "teml_entry";

/// A kernel parameter: one real tensor (or scalar).
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Identifier (the teml name: the runtime finds the tensor's data by it).
    pub name: Name,
    /// The spelling in the generated C (the teml name unless that is a C keyword or clashes
    /// with another name of the kernel: then it gets a suffix, as `do_`).
    pub c_name: String,
    /// Element type.
    pub dtype: DType,
    /// Extents (empty for a scalar).
    pub dims: Vec<Expr>,
    /// Written by some statement.
    pub written: bool,
    /// The buffer holds this tensor's data at entry (a result stored over its operand by
    /// `in_place`: `name` is the result, `holds` the operand the statements read and write).
    pub holds: Option<Name>,
    /// The kernel writes every element before reading any: what the buffer holds at entry does
    /// not matter (timed runs need not restore it).
    pub fresh: bool,
}

impl Param {
    /// The tensor the statements access through this parameter (the operand, for a result
    /// stored over it).
    pub fn accessed(&self) -> &Name {
        self.holds.as_ref().unwrap_or(&self.name)
    }

    /// Number of elements, with the named constants `state` binds.
    pub fn len(&self, state: &State) -> std::result::Result<usize, Name> {
        let mut n: usize = 1;
        for d in &self.dims {
            n = n.saturating_mul(usize::try_from(d.eval(&|v| state.constant(v))?).unwrap_or(0));
        }
        Ok(n)
    }

    /// The extents as integers.
    pub fn extents(&self, state: &State) -> std::result::Result<Vec<usize>, Name> {
        self.dims.iter().map(|d| d.eval(&|v| state.constant(v)).map(|x| x.max(0) as usize)).collect()
    }

    /// True for a rank-0 tensor.
    pub fn is_scalar(&self) -> bool {
        self.dims.is_empty()
    }
}

/// A generated kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct CKernel {
    /// The C source.
    pub source: String,
    /// The kernel function's name.
    pub name: String,
    /// Parameters, in order (also the order of `teml_entry`'s `args`).
    pub params: Vec<Param>,
    /// Named constants the source uses.
    pub consts: Vec<Name>,
    /// Their spellings in the C source (`consts[k]` is `const_c_names[k]`).
    pub const_c_names: Vec<String>,
    /// The C type each parameter is cast to from `void *` (`double (*)[N]`), in order.
    pub casts: Vec<String>,
}

/// Generates one kernel running `nests` in order, for the host's vectors ([`Target::native`]).
pub fn generate(state: &State, name: &str, nests: &[(Name, Nest)]) -> Result<CKernel> {
    generate_for(state, name, nests, &Target::native())
}

/// Generates one kernel running `nests` in order, for the host's vectors, keeping the tensors
/// of `keep` whole (`-o` saves them): no temporary among them is stored per iteration.
pub fn generate_keeping(
    state: &State,
    name: &str,
    nests: &[(Name, Nest)],
    keep: &BTreeSet<Name>,
) -> Result<CKernel> {
    generate_with(state, name, nests, &Target::native(), keep)
}

/// Generates one kernel running `nests` in order, with explicit vectors of `target`'s width.
pub fn generate_for(state: &State, name: &str, nests: &[(Name, Nest)], target: &Target) -> Result<CKernel> {
    generate_with(state, name, nests, target, &BTreeSet::new())
}

fn generate_with(
    state: &State,
    name: &str,
    nests: &[(Name, Nest)],
    target: &Target,
    keep: &BTreeSet<Name>,
) -> Result<CKernel> {
    let plan = plan::plan_kernel(state, name, nests, keep)?;
    print::kernel(state, name, &plan, target)
}
