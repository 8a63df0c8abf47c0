//! Automatic schedules: the rules that build a search space of paths from a nest itself
//! ([`space`]), from what they read off it ([`workload`]) and the machine (`runtime::machine`).
//! `teml tune FILE` on a program without `param` calls searches the generated space, `teml auto`
//! takes its first choices (the model's pick), `auto_space(l)` builds it inside a script.

mod chain;
pub mod code;
mod columns;
mod left;

mod pivots;
mod scalars;
pub mod space;
mod sweep;
mod walk;
pub mod workload;
mod writer;

pub use crate::runtime::machine::Machine;
pub use space::{Choice, Decision, Space, generate};
pub use workload::Workload;

use crate::ir::{KernelRequest, State};
use std::path::Path;

/// The name of the program directive a generated space starts with.
const DIRECTIVE: &str = "// program:";

/// The generated space of a program's kernel as a `.rhai` script over the program at
/// `program` (the path the script names, relative to where the script is written or absolute).
pub fn script(
    state: &State,
    req: &KernelRequest,
    m: &Machine,
    program: &Path,
) -> Result<(String, Space), String> {
    let nests = req.named();
    let space = generate(state, &nests, m)?;
    let mut text = format!("{DIRECTIVE} {}\n", program.display());
    text.push_str(&format!(
        "// The space `teml auto --emit-space` generated for kernel {} ({}), for this machine: {}.\n",
        req.names.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", "),
        consts_text(state),
        m.describe()
    ));
    text.push_str(
        "// Each parameter's choices are in the model's order: the first choices are `teml auto`'s path.\n",
    );
    text.push_str("// Search it with `teml tune <this file>`; edit it like any space (docs/tuning.md).\n");
    for f in &space.facts {
        text.push_str(&format!("// {f}\n"));
    }
    text.push('\n');
    // What the program and the command line declared results and temporaries (`--result`):
    // every point of the space keeps them.
    if !state.roles.is_empty() {
        text.push_str(
            "// the tensors declared results or temporaries (in the program or on the command line)\n",
        );
    }
    for (t, role) in &state.roles {
        text.push_str(&format!("{}\n", code::S::Call(code::call(role.builtin(), vec![code::value(t)]))));
    }
    text.push_str(&space.body);
    text.push_str(&codegen_line(&space.outputs, req.nests.len()));
    Ok((text, space))
}

/// The `codegen` statement of the space's outputs: a list of nests (`parts`, at most `max` of
/// them: the kernel's nests, fused or not) is unpacked, every one of them.
fn codegen_line(outputs: &[String], max: usize) -> String {
    use code::{E, S, call, int, local, text};
    let st = match outputs {
        [one] if one == "parts" => {
            let len = || local("parts").method("len", vec![]);
            let arms = (1..=max.max(1))
                .map(|n| {
                    let parts = (0..n).map(|k| local("parts").at(int(k))).collect();
                    (len().eq(int(n)), vec![S::Call(call("codegen", parts))])
                })
                .collect();
            let found = text(format!("expected at most {max} nests, found ")).plus(len());
            S::Chain(arms, vec![S::Throw(found)])
        }
        vars => S::Call(call("codegen", vars.iter().map(|x| local(x)).collect::<Vec<E>>())),
    };
    format!("{st}\n")
}

/// The tensors the statements of `nests` write.
pub fn written(nests: &[crate::ir::Nest]) -> std::collections::BTreeSet<crate::ir::Name> {
    nests
        .iter()
        .flat_map(|n| n.stmts())
        .filter_map(|s| crate::ir::lower::lower(&s).and_then(|l| l.target.id().cloned()))
        // A privatized tensor (no result: its copies are the kernel's own) is computed too.
        .chain(nests.iter().flat_map(|n| n.expanded.keys().cloned()))
        .collect()
}

fn consts_text(state: &State) -> String {
    let c: Vec<String> = state.consts.iter().map(|(n, v)| format!("{n}={v}")).collect();
    if c.is_empty() { "no named constants".into() } else { c.join(", ") }
}

/// The points `teml auto` tries, in order: every parameter at its first choice (the model's
/// pick), then each parameter in turn at each other choice (by their text).
pub fn neighbours(space: &Space) -> Vec<std::collections::BTreeMap<String, String>> {
    let mut out = vec![std::collections::BTreeMap::new()];
    for d in &space.decisions {
        for c in d.choices.iter().skip(1) {
            out.push([(d.name.clone(), c.text().to_string())].into_iter().collect());
        }
    }
    out
}

/// Evaluates a point given by its choices' text.
pub type Evaluate<'a, T> = dyn FnMut(&std::collections::BTreeMap<String, String>) -> Result<T, String> + 'a;

/// The most points [`first_legal`] evaluates.
pub const MAX_TRIES: usize = 64;

/// The first of [`neighbours`] that `eval` accepts: its value and the number of points tried,
/// or the reasons of the first refusals.
pub fn first_legal<T>(space: &Space, eval: &mut Evaluate<'_, T>) -> Result<(T, usize), Vec<String>> {
    let what = |values: &std::collections::BTreeMap<String, String>| {
        let what: Vec<String> = values.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if what.is_empty() { "the first choices".to_string() } else { what.join(", ") }
    };
    first_accepted(neighbours(space), what, eval)
}

/// The first of `points` (at most [`MAX_TRIES`] of them) that `eval` accepts: its value and the
/// number of points tried, or the reasons of the first three refusals, each point named by
/// `what`. The one walk of `teml auto`, `:auto`, `auto(l)` and a tune whose generated space
/// refuses its first point.
pub fn first_accepted<P, T>(
    points: impl IntoIterator<Item = P>,
    what: impl Fn(&P) -> String,
    eval: &mut dyn FnMut(&P) -> Result<T, String>,
) -> Result<(T, usize), Vec<String>> {
    let mut why = Vec::new();
    for (k, point) in points.into_iter().take(MAX_TRIES).enumerate() {
        match eval(&point) {
            Ok(v) => return Ok((v, k + 1)),
            Err(e) if why.len() < 3 => {
                why.push(format!("refused ({}): {}", what(&point), e.lines().next().unwrap_or("")))
            }
            Err(_) => {}
        }
    }
    Err(why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_takes_the_first_accepted_point_keeps_three_reasons_and_stops_at_its_limit() {
        let name = |p: &usize| format!("p={p}");
        let mut eval = |p: &usize| if *p == 5 { Ok(p * 10) } else { Err(format!("no {p}\ndetail")) };
        assert_eq!(first_accepted(0..10, name, &mut eval), Ok((50, 6)));
        let why = first_accepted(0..4, name, &mut |p| Err::<(), _>(format!("no {p}"))).unwrap_err();
        assert_eq!(why, ["refused (p=0): no 0", "refused (p=1): no 1", "refused (p=2): no 2"]);
        let mut tried = 0;
        let _ = first_accepted(0.., name, &mut |_| {
            tried += 1;
            Err::<(), _>(String::new())
        });
        assert_eq!(tried, MAX_TRIES);
    }
}
