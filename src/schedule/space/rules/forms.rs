//! The forms of a perfect nest of one statement: rules that rewrite the nest before the
//! sketches of [`super::SINGLE`] schedule it, each a parameter whose one arm keeps the nest as
//! it is for the rules after it (a pivot split, a product lifted into contractions). [`FORMS`]
//! is their one list; each that applies wraps the ones after it, and the sketches innermost.
//! Adding one: its file, its row in [`FORMS`] and its [`FormPlan`] variant, its tests.

use super::*;

/// What a form read off the nest.
pub(in crate::schedule::space) enum FormPlan {
    /// Loops carried only through a pivot, split there (floyd-warshall's: `pivots.rs`).
    Pivots(crate::schedule::pivots::Pivots),
    /// A product of three or more operands and its cheapest contraction orders.
    Lift(super::lift_orders::LiftPlan),
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
pub(in crate::schedule::space) static FORMS: &[&dyn FormRule] =
    &[&super::pivot::Pivot, &super::lift_orders::LiftOrders];

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
