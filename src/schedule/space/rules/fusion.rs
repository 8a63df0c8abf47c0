//! Fusion and storage contraction, the rule of a kernel of several nests: every nest fused at
//! the deepest level legal for each consecutive pair, the temporaries one nest writes and a
//! later one reads stored per iteration of the fused loop (`store_at`: storage contraction), or
//! the longest run of three or more nests that share a level, or the first fusable pair at its
//! deepest level, or none. Its choices are the `fuse` parameter's, beside `each` (every nest by
//! its own rules), which [`super::super::several`] adds.

use super::*;
use crate::ir::Value;
use crate::ops::registry::ArgVal;

/// The temporaries of `temps` that `store_at` at level `r` takes, in order, on the fused nest
/// `f`: each applied after the ones before it through the registry, as the script's
/// `f = store_at(f, r, T)` (isl, with a witness), so that the space never offers a contraction
/// its script refuses.
pub(in crate::schedule::space) fn contractible(
    state: &State,
    mut f: Nest,
    r: usize,
    temps: Vec<Name>,
) -> Vec<Name> {
    temps
        .into_iter()
        .filter(|t| match apply(state, "f", &f, &[step_on("f", "store_at", vec![int(r), value(t)])], &[]) {
            Ok(g) => {
                f = g;
                true
            }
            Err(_) => false,
        })
        .collect()
}

/// One value of `several`'s `fuse` parameter: its tag, the steps that fuse (the fused nest in
/// `f`), whether they ask whether to contract the temporaries, the fused nest's innermost sums
/// that may go in lanes (address, reason), and the statements that set the parts.
pub(in crate::schedule::space) struct Arm {
    pub(in crate::schedule::space) tag: String,
    pub(in crate::schedule::space) fuse: Vec<S>,
    pub(in crate::schedule::space) contract: bool,
    pub(in crate::schedule::space) sums: Vec<(String, String)>,
    pub(in crate::schedule::space) parts: Vec<S>,
}

/// The `fuse` parameter's choices, their arms, and the level of the model's first fusion.
pub(in crate::schedule::space) type FusionArms = (Vec<Choice>, Vec<Arm>, Option<usize>);

/// The `fuse` parameter's arms of the kernel's nests (variables `vars`, workloads `works`):
/// Fusion: every nest at the deepest level legal for each consecutive pair (then the
/// temporaries one nest writes and a later one reads stored per iteration of that loop:
/// storage contraction), or the first fusable pair at its deepest level, or none.
/// Its choices, its arms, and the level of the model's first fusion choice.
pub(in crate::schedule::space) fn fusion_arms(
    state: &State,
    nests: &[(Name, Nest)],
    works: &[Option<Workload>],
    vars: &[String],
    m: &Machine,
) -> Result<FusionArms, String> {
    let mut choices = Vec::new();
    let mut arms: Vec<Arm> = Vec::new();
    // The level of the model's first fusion choice.
    let mut fused_at: Option<usize> = None;
    if nests.len() > 1 {
        let mut levels = Vec::new();
        for k in 0..nests.len() - 1 {
            levels.push(crate::ops::explore::fusion_levels(state, &nests[k].1, &nests[k + 1].1)?);
        }
        let common = levels[0].iter().copied().filter(|r| levels.iter().all(|l| l.contains(r))).max();
        // Without a level common to every pair, the longest run of three or more consecutive
        // nests that share one (helm's seven element loops at `e`, after `L`, which has none).
        let run = if common.is_some() { None } else { longest_run(&levels) };
        fused_at =
            common.or(run.map(|(_, _, r)| r)).or_else(|| levels.iter().find_map(|l| l.last().copied()));
        if let Some((s, t, r)) = common.map(|r| (0, nests.len() - 1, r)).or(run) {
            // Tensors written by one nest of the run and read by a later one of it, and by no
            // nest after it: candidates for store_at.
            let names = |w: &Option<Workload>, write: bool| -> Vec<Name> {
                w.iter()
                    .flat_map(|w| w.accesses.iter())
                    .filter(|a| a.write == write)
                    .map(|a| a.tensor.clone())
                    .collect()
            };
            let after: Vec<Name> = works[t + 1..].iter().flat_map(|w| names(w, false)).collect();
            let temps: Vec<Name> = (s..=t)
                .flat_map(|k| {
                    let later: Vec<Name> = works[k + 1..=t].iter().flat_map(|w| names(w, false)).collect();
                    names(&works[k], true).into_iter().filter(move |t| later.contains(t))
                })
                .filter(|x| !after.contains(x))
                .collect();
            // Only the temporaries the script's `store_at` accepts: each on the fused nest with
            // the ones before it, checked as the builtin checks it (a temporary read before the
            // kernel writes it, a row sum accumulated from zero set outside, keeps its tensor).
            let chain = vars[s + 1..=t]
                .iter()
                .fold(local(&vars[s]), |acc, x| call("fuse_outer", vec![acc, local(x), int(r)]));
            // The fused nest, made as the script makes it.
            let env: Vec<(&str, ArgVal)> = vars
                .iter()
                .zip(nests)
                .map(|(x, (_, n))| (x.as_str(), ArgVal::Value(Value::Nest(n.clone()))))
                .collect();
            let fused = nest_of(state, &env, &chain).ok();
            let temps = fused.clone().map_or_else(Vec::new, |f| contractible(state, f, r, temps));
            let mut fuse = vec![let_("f", chain)];
            let contracted = !temps.is_empty();
            for t in &temps {
                fuse.push(S::If(local("contract"), vec![step_on("f", "store_at", vec![int(r), value(t)])]));
            }
            // The fused nest's innermost sums into one element (gesummv's two dot products
            // per row, fused at `i`): scalar unless marked (gcc may not reorder a
            // floating-point sum), in lanes where each sums two vectors' terms or more, as the
            // rules of a single nest put them.
            let sums =
                fused.map_or_else(Vec::new, |f| fused_sums(state, &f, lanes_of(state, &nests[s].1, m)));
            let whole = s == 0 && t == nests.len() - 1;
            let kept: Vec<E> =
                (0..nests.len()).filter(|&k| k < s || k > t).map(|k| local(&vars[k])).collect();
            let mut parts: Vec<E> = kept[..s].to_vec();
            parts.push(local("f"));
            parts.extend(kept[s..].iter().cloned());
            let flags: Vec<E> = (0..parts.len()).map(|k| E::Bool(k == s)).collect();
            let parts = vec![set(local("parts"), E::List(parts)), set(local("fused"), E::List(flags))];
            let stored =
                if contracted { format!("; {}", contracted_reason(state, &temps)) } else { String::new() };
            let (tag, why) = if whole {
                (
                    format!("all@{r}"),
                    format!(
                        "every nest fused at level {r} (the deepest legal for each pair): each element used while in cache{stored}"
                    ),
                )
            } else {
                (
                    format!("{}-{}@{r}", s + 1, t + 1),
                    format!(
                        "{} to {} fused at level {r} (the deepest legal for each pair), the others apart: each element used while in cache{stored}",
                        nests[s].0, nests[t].0
                    ),
                )
            };
            choices.push(choice(E::Str(tag.clone()), why));
            arms.push(Arm { tag, fuse, contract: contracted, sums, parts });
        }
        if let Some((k, &r)) = levels.iter().enumerate().find_map(|(k, l)| l.last().map(|r| (k, r)))
            && (nests.len() > 2 || common != Some(r))
        {
            let (a, b) = (&vars[k], &vars[k + 1]);
            let rest: Vec<E> = vars
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != k + 1)
                .map(
                    |(i, x)| {
                        if i == k { call("fuse_outer", vec![local(a), local(b), int(r)]) } else { local(x) }
                    },
                )
                .collect();
            let tag = format!("{}+{}@{r}", k + 1, k + 2);
            choices.push(choice(
                E::Str(tag.clone()),
                format!(
                    "{} and {} fused at level {r} (their deepest legal), the others apart",
                    nests[k].0,
                    nests[k + 1].0
                ),
            ));
            let flags: Vec<E> = (0..rest.len()).map(|i| E::Bool(i == k)).collect();
            arms.push(Arm {
                tag,
                fuse: Vec::new(),
                contract: false,
                sums: Vec::new(),
                parts: vec![set(local("parts"), E::List(rest)), set(local("fused"), E::List(flags))],
            });
        }
        if !choices.is_empty() {
            choices.push(choice("\"none\"", "not fused"));
        }
    }
    Ok((choices, arms, fused_at))
}

/// What storage contraction keeps of `temps` and why each may lose its values: declared a
/// temporary, or (declared neither way) read by a later nest, with the line that keeps it.
pub(in crate::schedule::space) fn contracted_reason(state: &State, temps: &[Name]) -> String {
    let names = |ts: &[&Name]| ts.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ");
    let (declared, assumed): (Vec<&Name>, Vec<&Name>) =
        temps.iter().partition(|t| state.roles.get(*t) == Some(&crate::ir::Role::Temporary));
    let mut why = Vec::new();
    if !declared.is_empty() {
        why.push(format!("declared temporary: {}", names(&declared)));
    }
    if !assumed.is_empty() {
        let keep: Vec<String> = assumed.iter().map(|t| format!("`result({t})`")).collect();
        why.push(format!(
            "temporaries because a later nest reads them and the program declares neither way: {} (to keep one whole: {})",
            names(&assumed),
            keep.join(", ")
        ));
    }
    format!(
        "{} stored per iteration (storage contraction; {})",
        names(&temps.iter().collect::<Vec<_>>()),
        why.join("; ")
    )
}

/// The longest run of three or more consecutive nests (first and last index) whose pairs
/// share a fusion level, with the deepest such level; `levels[k]` is the pair k, k + 1's.
pub(in crate::schedule::space) fn longest_run(levels: &[Vec<usize>]) -> Option<(usize, usize, usize)> {
    let mut best: Option<(usize, usize, usize)> = None;
    for s in 0..levels.len() {
        let mut shared: Vec<usize> = levels[s].clone();
        for (t, level) in levels.iter().enumerate().skip(s) {
            shared.retain(|r| level.contains(r));
            let Some(&r) = shared.iter().max() else { break };
            // Pairs s..=t: nests s..=t + 1.
            if t > s && best.is_none_or(|(a, b, _)| t + 1 - s > b - a) {
                best = Some((s, t + 1, r));
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `fuse` choices of a program's nests `l1`, `l2`, ... on a pinned AVX-512 machine.
    fn choices(src: &str) -> Vec<String> {
        let s = crate::lang::eval_with(src, "t.teml", &State::new(), &crate::script::Stdlib::get()).unwrap();
        let nests: Vec<(Name, Nest)> = (1..)
            .map_while(|k| match s.get(&format!("l{k}")) {
                Some(crate::ir::Value::Nest(n)) => Some((Name::from(format!("l{k}").as_str()), n.clone())),
                _ => None,
            })
            .collect();
        let works: Vec<Option<Workload>> = nests.iter().map(|(_, n)| Workload::of(&s, n).ok()).collect();
        let vars: Vec<String> = (1..=nests.len()).map(|k| format!("p{k}")).collect();
        let (choices, arms, _) =
            fusion_arms(&s, &nests, &works, &vars, &super::super::tests::zen4()).unwrap();
        if !choices.is_empty() {
            assert_eq!(choices.len(), arms.len() + 1, "every choice but none has its arm");
        }
        choices.iter().map(|c| format!("{}: {}", c.value, c.reason)).collect()
    }

    #[test]
    fn a_temporary_read_only_by_the_next_nest_is_contracted_and_a_pair_without_a_common_loop_is_not_fused() {
        let src = "N = 256\nA = tensor([N])\nT = tensor([N])\nB = tensor([N])\n\
                   T = mul(A, A, [[i], [i]] -> [i])\nB = add(T, A, [[i], [i]] -> [i])\nl1 = build(T)\nl2 = build(B)\n";
        let c = choices(src);
        assert!(c[0].starts_with("\"all@1\": every nest fused at level 1"), "{c:?}");
        assert!(c[0].contains("T stored per iteration (storage contraction; temporaries because"), "{c:?}");
        assert!(c[0].contains("(to keep one whole: `result(T)`)"), "{c:?}");
        assert_eq!(c.last().map(String::as_str), Some("\"none\": not fused"));
        // Declared a result, T stays whole: fused, nothing contracted.
        let kept = choices(&format!("{src}result(T)\n"));
        assert!(kept[0].starts_with("\"all@1\"") && !kept[0].contains("stored per iteration"), "{kept:?}");
        let declared = choices(&format!("{src}temporary(T)\n"));
        assert!(declared[0].contains("declared temporary: T)"), "{declared:?}");
        // B reads T one element ahead: fused, it would read T[i+1] before it is written.
        let src = "N = 256\nA = tensor([N])\nT = tensor([N+1])\nB = tensor([N])\n\
                   T = mul(T, T, [[i], [i]] -> [i])\nB = add(T, A, [[i+1], [i]] -> [i])\nl1 = build(T)\nl2 = build(B)\n";
        assert!(choices(src).is_empty());
    }
}
