//! The rules of one nest of a kernel of several (or of a nest with sequences inside), tried
//! where the nest is left unfused (`fuse = "each"`): [`NEST`] is their one list. Each has its
//! detection (does it apply to this nest, given the kernel's other nests and what the rules
//! above it found, and why not) and its emission (its parameters and steps over the nest's
//! variable). Adding one: its detector and emitter (a file of `src/schedule/`), its impl
//! below, its row in [`NEST`], its tests.

use super::*;
use crate::schedule::{columns, left, sweep};

/// What a nest rule read off its nest.
pub(in crate::schedule::space) enum NestPlan {
    /// A sum down a column sunk into row updates (nussinov's: `columns.rs`).
    Sunk(columns::Sunk),
    /// Independent rows around recurrences, a block of rows in lanes (adi's: `sweep.rs`).
    Sweeps(sweep::Sweeps),
    /// A loop over columns each updating every later one, left-looking (gramschmidt's:
    /// `left.rs`).
    Left(left::Left),
}

/// What a nest rule's detection sees.
pub(in crate::schedule::space) struct NestCx<'a> {
    pub(in crate::schedule::space) state: &'a State,
    pub(in crate::schedule::space) nest: &'a Nest,
    /// The kernel's other nests.
    pub(in crate::schedule::space) others: &'a [&'a Nest],
    pub(in crate::schedule::space) m: &'a Machine,
    /// The nest is a perfect nest of one statement, scheduled by the single-nest rules.
    pub(in crate::schedule::space) own: bool,
    /// The nest stays whole: neither [`own`](Self::own), nor distributed into perfect nests, nor
    /// its inner sequences put in lanes.
    pub(in crate::schedule::space) whole: bool,
    /// The rules above this one that apply to the nest.
    pub(in crate::schedule::space) found: &'a [&'static str],
}

/// A rule of one nest of several.
pub(in crate::schedule::space) trait NestRule: Sync {
    /// Its name.
    fn name(&self) -> &'static str;
    /// Its plan where it applies; else why not.
    fn detect(&self, cx: &NestCx) -> Result<NestPlan, String>;
    /// Its parameters and steps over `var` (nest `j`; `alone`: the kernel's only nest, its
    /// parameters unprefixed).
    fn emit(&self, out: &mut Out, plan: &NestPlan, var: &str, j: usize, alone: bool);
    /// Its steps may leave the nest scheduled (`ruled[j] = true`): the generic steps after them
    /// (lanes, a distribution) are guarded by `!ruled[j]`.
    fn rules_the_nest(&self) -> bool {
        true
    }
}

/// The nest rules, in the order they are tried and their lines written.
pub(in crate::schedule::space) static NEST: &[&dyn NestRule] = &[&Sink, &Sweep, &LeftLooking];

/// Every rule of [`NEST`] on one nest: those that apply (rule and plan), in order.
pub(in crate::schedule::space) fn detect_nest(cx: &NestCx) -> Vec<(&'static dyn NestRule, NestPlan)> {
    let mut out: Vec<(&'static dyn NestRule, NestPlan)> = Vec::new();
    let mut names: Vec<&'static str> = Vec::new();
    for rule in NEST {
        let c = NestCx { found: &names, ..*cx };
        if let Ok(plan) = rule.detect(&c) {
            names.push(rule.name());
            out.push((*rule, plan));
        }
    }
    out
}

struct Sink;

impl NestRule for Sink {
    fn name(&self) -> &'static str {
        "sink"
    }

    fn detect(&self, cx: &NestCx) -> Result<NestPlan, String> {
        if !cx.whole {
            return Err("the nest is scheduled whole by other rules".into());
        }
        columns::sunk(cx.state, cx.nest)
            .map(NestPlan::Sunk)
            .ok_or_else(|| "no loop beside a sum that reads down a column, sinkable into it (isl)".into())
    }

    fn emit(&self, out: &mut Out, plan: &NestPlan, var: &str, j: usize, alone: bool) {
        if let NestPlan::Sunk(sk) = plan {
            columns::sink_rules(out, sk, var, j, alone);
        }
    }

    fn rules_the_nest(&self) -> bool {
        false
    }
}

struct Sweep;

impl NestRule for Sweep {
    fn name(&self) -> &'static str {
        "sweeps"
    }

    fn detect(&self, cx: &NestCx) -> Result<NestPlan, String> {
        if cx.own {
            return Err("a perfect nest of one statement: the single-nest rules".into());
        }
        sweep::sweeps(cx.state, cx.nest, cx.others, lanes_of(cx.state, cx.nest, cx.m))
            .map(NestPlan::Sweeps)
            .ok_or_else(|| {
                "no loop of independent rows (two vectors' lanes or more) around recurrences".into()
            })
    }

    fn emit(&self, out: &mut Out, plan: &NestPlan, var: &str, j: usize, alone: bool) {
        if let NestPlan::Sweeps(sw) = plan {
            sweep::sweep_rules(out, sw, var, j, alone);
        }
    }
}

struct LeftLooking;

impl NestRule for LeftLooking {
    fn name(&self) -> &'static str {
        "left_looking"
    }

    fn detect(&self, cx: &NestCx) -> Result<NestPlan, String> {
        if cx.own || !cx.found.is_empty() {
            return Err("another rule schedules the nest".into());
        }
        left::left(cx.state, cx.nest, left::BLOCK).map(NestPlan::Left).ok_or_else(|| {
            "no loop over columns each updating every later column, legal left-looking (isl)".into()
        })
    }

    fn emit(&self, out: &mut Out, plan: &NestPlan, var: &str, j: usize, alone: bool) {
        if let NestPlan::Left(lf) = plan {
            left::left_rules(out, lf, var, j, alone);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nest rules that apply to each nest of PolyBench's `kernel` at `sizes`, each nest
    /// left whole (not a perfect nest of one statement).
    fn applied(kernel: &str, sizes: &[(&str, i64)]) -> Vec<Vec<&'static str>> {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("examples/polybench/{kernel}.teml"));
        let mut consts = State::new();
        for (n, v) in sizes {
            consts.consts.insert(Name::from(*n), *v);
        }
        let state = crate::pipeline::eval_file(&file, &consts).unwrap();
        let nests = state.kernels[0].named();
        let m = Machine { vector_bits: 512, registers: 32, cores: 2, ..Machine::default() };
        (0..nests.len())
            .map(|j| {
                let others: Vec<&Nest> =
                    nests.iter().enumerate().filter(|(i, _)| *i != j).map(|(_, x)| &x.1).collect();
                let cx = NestCx {
                    state: &state,
                    nest: &nests[j].1,
                    others: &others,
                    m: &m,
                    own: false,
                    whole: true,
                    found: &[],
                };
                detect_nest(&cx).iter().map(|(r, _)| r.name()).collect()
            })
            .collect()
    }

    #[test]
    fn each_nest_rule_finds_the_kernel_it_was_written_for_and_no_other() {
        assert!(applied("nussinov", &[("N", 200)]).iter().any(|r| r.contains(&"sink")));
        assert!(applied("adi", &[("TSTEPS", 10), ("N", 200)]).iter().any(|r| r.contains(&"sweeps")));
        let gs = applied("gramschmidt", &[("M", 300), ("N", 200)]);
        assert!(gs.iter().any(|r| r == &["left_looking"]), "{gs:?}");
        // A matrix product has none of them.
        let gemm = applied("gemm", &[("NI", 100), ("NJ", 110), ("NK", 120)]);
        assert!(gemm.iter().all(Vec::is_empty), "{gemm:?}");
    }

    #[test]
    fn a_perfect_nest_and_a_nest_another_rule_took_are_refused_with_a_reason() {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/polybench/gemm.teml");
        let state = crate::pipeline::eval_file(&file, &State::new()).unwrap();
        let nests = state.kernels[0].named();
        let m = Machine::default();
        let cx = NestCx {
            state: &state,
            nest: &nests[0].1,
            others: &[],
            m: &m,
            own: true,
            whole: false,
            found: &["sweeps"],
        };
        for rule in NEST {
            let why = rule.detect(&cx).err().unwrap_or_else(|| panic!("{} applies", rule.name()));
            assert!(!why.is_empty());
        }
    }
}
