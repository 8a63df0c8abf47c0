//! The rules as data: each sketch of a single nest is a [`Rule`] with its detection (does it
//! apply to this workload on this machine, and why not) and its emission (its parameters and
//! steps), one file each under `rules/`; [`SINGLE`] is the one list [`super::single`] walks.
//! Adding a sketch: its file, its row in [`SINGLE`], its tests. The forms of a single nest
//! (rewrites the sketches then schedule: a pivot split, a product lifted into contractions) are
//! [`FormRule`]s listed in [`FORMS`] the same way; each that applies wraps the ones after it,
//! and the sketches innermost. Adding one: its file, its row in [`FORMS`] and its [`FormPlan`]
//! variant, its tests.

use super::*;

pub(super) mod fusion;
mod gathered_block;
mod lane_block;
mod lift_orders;
mod loops;
pub(super) mod nest;
mod pivot;
mod register_block;
mod register_tile;
mod time_tiles;
mod triangle;

/// What a rule read off the workload, for its emission (and for the rules after it).
pub(super) enum Plan {
    /// A matrix product's inner three loops ([`matmul_like`]).
    Tile(Tile),
    /// A product over a triangle ([`triangle_like`]): the register tile of its tiles.
    Triangle(Tile),
    /// A register block ([`block_plan`], [`gathered_plan`]).
    Block(Block),
    /// A block of lanes without rows ([`lane_plan`]).
    Lanes(LaneBlock),
    /// Nothing to keep: the rule needs the workload alone.
    Workload,
}

/// Where a rule's choice goes among those of the rules before it (the model's order).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Place {
    /// After them.
    Last,
    /// Ahead of them all.
    First,
    /// Just ahead of the named rule's choice.
    Before(&'static str),
}

/// A rule that applies: its plan, why the model offers it, where its choice goes.
pub(super) struct Found {
    pub(super) rule: &'static dyn Rule,
    pub(super) plan: Plan,
    pub(super) reason: String,
    pub(super) place: Place,
}

/// What a rule's detection sees: the workload, the machine, the tensor the nest writes, and
/// what the rules before it in [`SINGLE`] found.
pub(super) struct Cx<'a> {
    pub(super) w: &'a Workload,
    pub(super) m: &'a Machine,
    pub(super) target: Option<&'a Access>,
    pub(super) found: &'a [Found],
}

impl Cx<'_> {
    /// The plan of the rule named `name`, where it applies.
    pub(super) fn plan(&self, name: &str) -> Option<&Plan> {
        self.found.iter().find(|f| f.rule.name() == name).map(|f| &f.plan)
    }

    /// The written tensor, or why a rule of one result does not apply.
    pub(super) fn target(&self) -> Result<&Access, String> {
        self.target.ok_or_else(|| "the nest writes no tensor".to_string())
    }
}

/// A sketch of the schedule of one perfect nest of one statement.
pub(super) trait Rule: Sync {
    /// Its name: the value of the `sketch` parameter that takes it.
    fn name(&self) -> &'static str;
    /// Whether it applies, with its plan and reason; else why not (a fact of the space).
    fn detect(&'static self, cx: &Cx) -> Result<Found, String>;
    /// Its parameters and steps over `p`, from its plan.
    fn emit(&self, out: &mut Out, w: &Workload, m: &Machine, plan: &Plan);
}

/// The single-nest sketches, in the order their choices are listed (before [`Place`] moves
/// one): each rule's detection sees what the rules above it found.
pub(super) static SINGLE: &[&dyn Rule] = &[
    &register_tile::RegisterTile,
    &triangle::Triangle,
    &register_block::RegisterBlock,
    &lane_block::LaneBlock,
    &gathered_block::GatheredBlock,
    &time_tiles::TimeTiles,
    &loops::Loops,
];

/// Every rule of [`SINGLE`] on `w`: those that apply, in the model's order, and why each of
/// the others does not (`name: why`).
pub(super) fn detect(w: &Workload, m: &Machine) -> (Vec<Found>, Vec<String>) {
    let target = w.writes().next();
    let mut found: Vec<Found> = Vec::new();
    let mut not = Vec::new();
    for rule in SINGLE {
        let cx = Cx { w, m, target, found: &found };
        match rule.detect(&cx) {
            Ok(f) => found.push(f),
            Err(why) => not.push(format!("{}: {why}", rule.name())),
        }
    }
    let mut ordered: Vec<Found> = Vec::new();
    for f in found {
        let at = match f.place {
            Place::Last => ordered.len(),
            Place::First => 0,
            Place::Before(name) => ordered.iter().position(|o| o.rule.name() == name).unwrap_or(0),
        };
        ordered.insert(at, f);
    }
    (ordered, not)
}

/// A found rule with its choice's reason.
pub(super) fn found(rule: &'static dyn Rule, plan: Plan, reason: String, place: Place) -> Found {
    Found { rule, plan, reason, place }
}

// The forms of a perfect nest of one statement.

/// What a form read off the nest.
pub(in crate::schedule::space) enum FormPlan {
    /// Loops carried only through a pivot, split there (floyd-warshall's: `pivots.rs`).
    Pivots(crate::schedule::pivots::Pivots),
    /// A product of three or more operands and its cheapest contraction orders.
    Lift(lift_orders::LiftPlan),
}

/// A form of a perfect nest of one statement.
pub(in crate::schedule::space) trait FormRule: Sync {
    /// Its name.
    fn name(&self) -> &'static str;
    /// Its plan where it applies to the nest (and its workload `w`); else why not.
    fn detect(&self, state: &State, nest: &Nest, w: &Workload) -> Result<FormPlan, String>;
    /// Its parameter and arms over `p`; `rest` writes the rules after it (the nest as it is).
    fn emit(&self, out: &mut Out, plan: &FormPlan, w: &Workload, m: &Machine, rest: &mut dyn FnMut(&mut Out));
}

/// The forms, outermost first.
pub(in crate::schedule::space) static FORMS: &[&dyn FormRule] = &[&pivot::Pivot, &lift_orders::LiftOrders];

/// The forms that apply to the nest, in [`FORMS`]'s order, and why each other one does not
/// (`name: why`).
pub(in crate::schedule::space) fn detect_forms(
    state: &State,
    nest: &Nest,
    w: &Workload,
) -> (Vec<(&'static dyn FormRule, FormPlan)>, Vec<String>) {
    let mut found = Vec::new();
    let mut not = Vec::new();
    for rule in FORMS {
        match rule.detect(state, nest, w) {
            Ok(plan) => found.push((*rule, plan)),
            Err(why) => not.push(format!("{}: {why}", rule.name())),
        }
    }
    (found, not)
}

/// The forms `found`, each around the ones after it, the sketches of a single nest innermost.
pub(in crate::schedule::space) fn emit_forms(
    out: &mut Out,
    found: &[(&'static dyn FormRule, FormPlan)],
    w: &Workload,
    m: &Machine,
) {
    match found.split_first() {
        None => single(out, w, m),
        Some(((rule, plan), rest)) => rule.emit(out, plan, w, m, &mut |out| emit_forms(out, rest, w, m)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::State;

    /// The workload of a `.teml` program's nest `l`.
    pub(super) fn workload(src: &str) -> Workload {
        workload_state(src).2
    }

    /// A `.teml` program's state, its nest `l` and the nest's workload.
    pub(super) fn workload_state(src: &str) -> (State, Nest, Workload) {
        let s = crate::lang::eval_with(src, "t.teml", &State::new(), &crate::script::Stdlib::get()).unwrap();
        let Some(crate::ir::Value::Nest(n)) = s.get("l") else { panic!("no nest l") };
        let n = n.clone();
        let w = Workload::of(&s, &n).unwrap();
        (s, n, w)
    }

    pub(super) fn zen4() -> Machine {
        Machine {
            vector_bits: 512,
            registers: 32,
            cores: 2,
            caches: [48 << 10, 1 << 20, 32 << 20],
            ..Machine::default()
        }
    }

    /// The names of the rules that apply, in order, and the reasons of those that do not.
    pub(super) fn rules(src: &str) -> (Vec<&'static str>, Vec<String>) {
        let (found, not) = detect(&workload(src), &zen4());
        (found.iter().map(|f| f.rule.name()).collect(), not)
    }

    #[test]
    fn every_rule_has_its_own_name_and_loops_apply_to_any_nest() {
        let mut names: Vec<&str> = SINGLE.iter().map(|r| r.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), SINGLE.len());
        let (found, _) =
            rules("A = tensor([7])\nB = tensor([7])\nB = add(A, A, [[i], [i]] -> [i])\nl = build(B)\n");
        assert_eq!(found.last(), Some(&"loops"));
    }
}
