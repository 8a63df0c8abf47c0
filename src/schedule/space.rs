//! The rules: a search space of paths built from a nest itself, written as a Rhai script of
//! teml's builtins whose choices are `param(name, choices)` calls (docs/tuning.md, "Generated
//! spaces"). Each list of choices is ordered by the machine model: its first choice is the one
//! the model prefers, with its reason, so the space at its first choices is `teml auto`'s path.
//!
//! The sketches, as MetaSchedule's rules and Ansor's sketches build them:
//! - **register_tile** (BLIS): the inner three loops are rows, columns contiguous in the result
//!   and a long reduction: an mr x nr block of the result in vector registers across kc
//!   iterations of the reduction, column blocks of nc, operands packed or not.
//! - **register_block**: a data-parallel loop contiguous in the result in vector lanes (nr), a
//!   row loop unrolled and jammed (mr; the row whose operands are reused or broadcast, not
//!   loaded as vectors per row), the block kept in registers across the loops after it (the
//!   reductions), small reduction windows (a convolution's 3x3) unrolled, the outer
//!   data-parallel loops on threads (collapsed when the outermost is short for the cores).
//! - **gathered_block**: the same block with its lanes along a data-parallel loop the result is
//!   not contiguous in (gconv's channels `o`, 49 apart), its vectors gathered and stored lane by
//!   lane around the reductions, operands stored with that loop's dimension last
//!   (`permute_layout`); first where the result's contiguous loop fills vectors badly.
//! - **loops**: a legal order of the outer loops (the loop with the smallest strides
//!   innermost first), square tiles where the inner loops' data exceed the L2, the outermost
//!   parallel loop on threads, the innermost in lanes where data-parallel or a reduction into
//!   one element, streaming stores for
//!   a result written once that exceeds the caches.
//! - kernels of several nests, or nests with several statements at a level: every nest fused at
//!   the deepest level legal for each pair with the temporaries stored per iteration (storage
//!   contraction), or the first fusable pair, or none; then each part's outermost parallel loop
//!   on threads and, unfused, its innermost in lanes.
//! - **lift** (TeIL Sec. 5): a product of three or more tensors summed over some iterators
//!   (an einsum of several operands) as written, or as a sequence of single contractions in
//!   one of its cheapest orders (`contraction_orders`), each contraction then scheduled by the
//!   rules above (through `focus`), or two contractions fused block by block ([`super::chain`]:
//!   the temporary a register block at a time). Lifted first when it saves at least half the
//!   operations, or at least 1.3x where an order's contractions fuse.
//! - **loops** first where a block has nothing to keep or share (coars, blur: no reduction,
//!   every access varying along every loop), untiled where no reuse reaches past the L2.
//!
//! Every point is a legal path by construction or refused by the legality check of the
//! builtin that makes it, before anything is compiled.

pub(super) use super::code::{
    E, S, apply, at, at_on, call, int, ints, let_, local, nest_of, set, step, step_on, text, value,
};
use super::walk::{Located, extent, loops_in_order};
use super::workload::{Access, LoopInfo, Workload};
pub use super::writer::{Choice, Decision};
pub(super) use super::writer::{Out, choice};
use crate::ir::{Name, Nest, State};
use crate::ops::explore::Parallelism;
use crate::runtime::machine::Machine;

mod block;
mod lift;
mod loops;
mod rules;
mod several;
mod tile;
mod time_tile;

use block::*;
use lift::*;
use loops::*;
use several::*;
use tile::*;
use time_tile::*;

/// A generated space.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Space {
    /// Rhai statements over the program's variables that leave the path in `p` (one nest) or in
    /// the variables `p1, p2, ...` (`outputs`).
    pub body: String,
    /// The variables holding the kernel's nests at the end of `body`.
    pub outputs: Vec<String>,
    /// The parameters, each with its choices and reasons.
    pub decisions: Vec<Decision>,
    /// What the rules read off the nests (comment lines).
    pub facts: Vec<String>,
}

impl Space {
    /// The reason the model gives for the choice a run took (`seen`). Sketches may each
    /// declare a parameter of the same name (`rows`, `parallel`): the one with as many choices,
    /// among them the value taken.
    pub fn reason(&self, seen: &crate::ir::Seen) -> &str {
        let value = seen.value.as_str();
        fn reason<'a>(d: &'a Decision, value: &str) -> Option<&'a str> {
            d.choices.iter().find(|c| c.text() == value).map(|c| c.reason.as_str())
        }
        let named = || self.decisions.iter().filter(move |d| d.name == seen.name);
        named()
            .filter(|d| d.choices.len() == seen.choices)
            .find_map(|d| reason(d, value))
            .or_else(|| named().find_map(|d| reason(d, value)))
            .unwrap_or("")
    }
}

/// The generated space of the kernel made of `nests` (name, nest) in `state`.
pub fn generate(state: &State, nests: &[(Name, Nest)], m: &Machine) -> Result<Space, String> {
    let mut out = Out::default();
    let mut facts = Vec::new();
    let outputs = match nests {
        [] => return Err("expected a kernel with at least one nest, found none".into()),
        [(name, nest)] => {
            let w = Workload::of(state, nest)?;
            facts.extend(describe(&w));
            if w.perfect && w.n_stmts == 1 && !w.loops.is_empty() {
                out.stmt(let_("p", value(name)));
                // The forms (a pivot split, a lifted product), each around the ones after it,
                // the sketches innermost.
                let (forms, _) = rules::detect_forms(state, nest, &w);
                for (_, plan) in &forms {
                    if let rules::FormPlan::Lift(plan) = plan {
                        facts.push(plan.fact.clone());
                    }
                }
                rules::emit_forms(&mut out, &forms, &w, m);
            } else {
                facts.push(format!(
                    "{name} is not a perfect nest of one statement ({} statements): its outer loop on threads, its inner loops in lanes",
                    w.n_stmts
                ));
                several(&mut out, state, &[(name.clone(), nest.clone())], m)?;
            }
            vec!["p".to_string()]
        }
        many => {
            for (name, nest) in many {
                if let Ok(w) = Workload::of(state, nest) {
                    facts.push(format!("{name}: {}", w.describe_loops()));
                }
            }
            several(&mut out, state, many, m)?
        }
    };
    Ok(Space { body: out.text, outputs, decisions: out.decisions, facts })
}

/// Comment lines on a workload: its loops and each access's contiguous loop.
fn describe(w: &Workload) -> Vec<String> {
    let mut facts = vec![format!("loops: {}", w.describe_loops())];
    for a in &w.accesses {
        let inner: Vec<String> =
            w.loops.iter().filter(|l| a.contiguous_in(&l.iter)).map(|l| l.iter.to_string()).collect();
        facts.push(format!(
            "{} {}: {}",
            if a.write { "writes" } else { "reads" },
            a.text(),
            if inner.is_empty() {
                "contiguous in no loop".to_string()
            } else {
                format!("contiguous in {}", inner.join(", "))
            }
        ));
    }
    facts
}

/// The rules for a perfect nest of one statement, transforming `p` (the nest, or one
/// contraction of a lifted product in focus): the sketches of [`rules::SINGLE`] that apply,
/// in the model's order, each rule that does not with its reason (a comment line).
fn single(out: &mut Out, w: &Workload, m: &Machine) {
    let (found, not) = rules::detect(w, m);
    for why in &not {
        out.comment(&format!("not offered: {why}"));
    }
    let sketches: Vec<Choice> =
        found.iter().map(|f| choice(format!("\"{}\"", f.rule.name()), f.reason.clone())).collect();
    out.param("sketch", "sketch", "the kind of schedule", sketches);
    for (k, f) in found.iter().enumerate() {
        out.arm(k, local("sketch").eq(text(f.rule.name())));
        f.rule.emit(out, w, m, &f.plan);
    }
    out.end();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(rows: i64, lanes: i64) -> Block {
        Block {
            target: "O".into(),
            lane_level: 5,
            lane_iter: "w".into(),
            lane_extent: lanes,
            rows: vec![(3, "o".into(), rows, String::new())],
            windows: Vec::new(),
            dtype: crate::ir::DType::Double,
            layouts: Vec::new(),
            gather: None,
        }
    }

    fn first_mr(rows: i64, lanes: i64, m: &Machine) -> usize {
        let mut out = Out::default();
        block_sizes(&mut out, &block(rows, lanes), m)
    }

    #[test]
    fn a_block_takes_every_row_whose_accumulators_fit_the_registers() {
        let zen4 = Machine {
            vector_bits: 512,
            registers: 32,
            cores: 2,
            caches: [32 << 10, 1 << 20, 32 << 20],
            ..Machine::default()
        };
        // 28 lanes are 4 vectors: 8 rows are 32 accumulators, every register; 6 + 2 would leave
        // a quarter of the rows without registers.
        assert_eq!(first_mr(8, 28, &zen4), 8);
        // 9 rows do not fit: the most that leave an operand and a broadcast beside them.
        assert_eq!(first_mr(9, 28, &zen4), 6);
        // 16 lanes are 2 vectors: 8 rows fit (16 accumulators).
        assert_eq!(first_mr(8, 16, &zen4), 8);
        let avx2 = Machine { vector_bits: 256, registers: 16, ..zen4 };
        // 16 registers: 8 lanes are 2 vectors of 4, and 8 rows of 2 accumulators leave none for
        // the operand and a broadcast; 12 lanes are 3 vectors: 8 rows at 1 vector a row fit.
        for lanes in [8, 12] {
            let mut out = Out::default();
            assert_eq!(block_sizes(&mut out, &block(8, lanes), &avx2), 8);
            assert!(out.text.contains("let nr = param(\"nr\", [4, "), "{}", out.text);
        }
        // 7 rows of 2 vectors still do not fit (14 + 2 + 1 > 16): one vector a row.
        assert_eq!(first_mr(7, 8, &avx2), 7);
        // 4 rows of 2 vectors fit (8 + 2 + 1): the width stays.
        let mut out = Out::default();
        assert_eq!(block_sizes(&mut out, &block(4, 8), &avx2), 4);
        assert!(out.text.contains("let nr = param(\"nr\", [8, "), "{}", out.text);
    }

    #[test]
    fn a_long_row_takes_the_whole_vectors_that_divide_it_with_the_most_multiply_adds_a_load() {
        // AVX-512 doubles: 8 lanes, 32 registers.
        let (lanes, regs) = (8, 32);
        // bmm's 72-wide rows: 3 vectors (x 8 rows: 24 multiply-adds for 11 loads), not 1 vector
        // (8 for 9); 2 and 4 vectors leave a last block of 8 lanes without registers.
        assert_eq!(first_nr(72, lanes, regs), 24);
        // 64: 4 vectors x 6 rows (24 for 10 loads) ahead of 2 x 8 (16 for 10).
        assert_eq!(first_nr(64, lanes, regs), 32);
        // mttkrp's 200 is 25 vectors: only 1 divides it.
        assert_eq!(first_nr(200, lanes, regs), 8);
        // Up to 4 vectors: all of them, no loop left.
        assert_eq!(first_nr(28, lanes, regs), 28);
        // None divides: two vectors.
        assert_eq!(first_nr(100, lanes, regs), 16);
        // AVX2 doubles: 4 lanes, 16 registers: 3 vectors x 4 rows (12 for 7) beat 2 x 6 (12 for
        // 8) and 4 x 2 (8 for 6).
        assert_eq!(first_nr(72, 4, 16), 12);
        assert_eq!(first_nr(48, 4, 16), 12);
        assert_eq!(first_nr(200, 4, 16), 8);
    }
}
