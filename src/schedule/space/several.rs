//! Kernels of several nests (or nests with several statements at a level): fusion and storage
//! contraction, then the multi-nest rules (sweeps, left-looking, sink), then each part's
//! parallel and lane loops.

use super::rules::fusion::{Arm, fusion_arms};
use super::rules::nest::{NEST, NestCx, NestPlan, NestRule, detect_nest};
use super::*;

/// The `fuse` parameter and each of its arms: the fused parts, or each nest by the rules of a
/// single nest (its sketch, a distribution into perfect nests, sunk statements, sweeps,
/// left-looking blocks, lanes for a nest with sequences inside).
#[allow(clippy::too_many_arguments)]
pub(super) fn fusion_choices(
    out: &mut Out,
    vars: &[String],
    m: &Machine,
    alone: bool,
    choices: Vec<Choice>,
    arms: &[Arm],
    own: &[Option<&Workload>],
    plans: &[Option<Distribution>],
    lanes: &[Lanes],
    ruled: &[Vec<(&'static dyn NestRule, NestPlan)>],
) {
    if choices.is_empty() {
        return;
    }
    out.param("fuse", "fuse", "which nests are fused, at which level", choices);
    for (k, Arm { tag, fuse, contract, sums, parts }) in arms.iter().enumerate() {
        out.arm(k, local("fuse").eq(text(tag)));
        if tag == "each" {
            // Rule by rule (the order of `NEST`), nest by nest.
            for rule in NEST {
                for (j, found) in ruled.iter().enumerate() {
                    for (r, plan) in found.iter().filter(|(r, _)| r.name() == rule.name()) {
                        r.emit(out, plan, &vars[j], j, alone);
                    }
                }
            }
            for (j, Lanes { inner, unroll, threads }) in lanes.iter().enumerate() {
                if inner.is_empty() && threads.is_empty() {
                    continue;
                }
                out.comment(&format!("nest {}: sequences inside, kept whole", j + 1));
                out.prefix = if alone { String::new() } else { format!("n{}_", j + 1) };
                let names: Vec<String> = inner.iter().map(|(a, why, _)| format!("{a} ({why})")).collect();
                if inner.is_empty() {
                    out.stmt(let_("lanes", E::Bool(true)));
                } else {
                    out.param(
                        "lanes",
                        "lanes",
                        "the innermost loops in vector lanes",
                        vec![
                            choice("true", format!("in lanes: {}", names.join(", "))),
                            choice("false", "no vectors"),
                        ],
                    );
                }
                if !threads.is_empty() {
                    out.param(
                        "threads",
                        "threads",
                        "the outermost data-parallel loops of a nest with sequences, on threads",
                        vec![
                            choice(
                                "true",
                                format!(
                                    "{} on threads: the outermost data-parallel loops (isl) of the nest's sequences (at the top, or inside loops that carry dependences)",
                                    threads.join(", ")
                                ),
                            ),
                            choice("false", "one thread"),
                        ],
                    );
                }
                if !unroll.is_empty() {
                    out.param(
                        "unroll",
                        "unroll",
                        "the loops around a laned loop and a statement beside it that carry a dependence, unrolled",
                        vec![
                            choice(
                                2,
                                format!(
                                    "{} by 2: its iterations run in order, two at a time the compiler overlaps their independent work",
                                    unroll.join(", ")
                                ),
                            ),
                            choice(0, "not unrolled"),
                        ],
                    );
                }
                out.prefix.clear();
                if ruled[j].iter().any(|(r, _)| r.rules_the_nest()) {
                    out.begin_if(local("lanes").and(local("ruled").at(int(j)).negated()));
                } else {
                    out.begin_if(local("lanes"));
                }
                out.stmt(let_("p", local(&vars[j])));
                for (a, _, _) in inner {
                    out.stmts(&at(a, vec![step("vectorize", vec![int(1)])]));
                }
                if !threads.is_empty() {
                    out.begin_if(local("threads"));
                    for a in threads {
                        out.stmts(&at(a, vec![step("parallelize", vec![int(1)])]));
                    }
                    out.stmt(set(local("ruled").at(int(j)), E::Bool(true)));
                    out.end();
                }
                // The last loop first: unrolling it leaves the earlier ones' addresses.
                for a in unroll.iter().rev() {
                    let steps = at(
                        a,
                        vec![step("stripmine", vec![int(1), local("unroll")]), step("unroll", vec![int(2)])],
                    );
                    out.stmt(S::If(local("unroll").gt(int(0)), steps));
                }
                out.stmt(set(local("parts").at(int(j)), local("p")));
                out.stmt(set(local("laned").at(int(j)), E::Bool(true)));
                out.end();
            }
            for (j, plan) in plans.iter().enumerate() {
                let Some(plan) = plan else { continue };
                let guarded = ruled[j].iter().any(|(r, _)| r.rules_the_nest());
                if guarded {
                    out.begin_if(local("ruled").at(int(j)).negated());
                }
                out.comment(&format!(
                    "nest {}: distributed into {} perfect nests, each by its own rules",
                    j + 1,
                    plan.parts.len()
                ));
                out.stmt(let_("p", local(&vars[j])));
                for a in &plan.addresses {
                    out.stmts(&at(a, vec![step("distribute", vec![int(1)])]));
                }
                // The last part first: transforming it leaves the earlier ones' addresses.
                for (i, Part { address, work: w, .. }) in plan.parts.iter().enumerate().rev() {
                    out.comment(&format!("part {}: {}", i + 1, w.statements.join("; ")));
                    out.stmt(step("focus", vec![text(address)]));
                    out.prefix =
                        if alone { format!("d{}_", i + 1) } else { format!("n{}d{}_", j + 1, i + 1) };
                    single(out, w, m);
                    out.prefix.clear();
                }
                out.stmt(step("focus", vec![]));
                out.stmt(set(local("parts").at(int(j)), local("p")));
                out.stmt(set(local("ruled").at(int(j)), E::Bool(true)));
                if guarded {
                    out.end();
                }
            }
            for (j, w) in own.iter().enumerate() {
                let Some(w) = w else { continue };
                out.comment(&format!("nest {}: {}", j + 1, w.statements.join("; ")));
                out.stmt(let_("p", local(&vars[j])));
                out.prefix = format!("n{}_", j + 1);
                single(out, w, m);
                out.prefix.clear();
                out.stmt(set(local("parts").at(int(j)), local("p")));
                out.stmt(set(local("ruled").at(int(j)), E::Bool(true)));
            }
        }
        if *contract {
            out.param(
                "contract",
                "contract",
                "the temporaries of the fused nests stored per iteration of the fused loop",
                vec![
                    choice("true", "a block per iteration, in cache, instead of the whole tensor"),
                    choice("false", "the whole tensors"),
                ],
            );
        }
        if !sums.is_empty() {
            let names: Vec<String> = sums.iter().map(|(a, why)| format!("{a} ({why})")).collect();
            out.param(
                "sums",
                "sums",
                "the fused nest's innermost sums into one element in vector lanes",
                vec![
                    choice("true", format!("in lanes (vectors of partial sums): {}", names.join(", "))),
                    choice("false", "left to the compiler (scalar)"),
                ],
            );
        }
        for st in fuse {
            out.stmt(st.clone());
        }
        if !sums.is_empty() {
            out.begin_if(local("sums"));
            for (a, _) in sums {
                out.stmts(&at_on("f", a, vec![step_on("f", "vectorize", vec![int(1)])]));
            }
            out.end();
        }
        for st in parts {
            out.stmt(st.clone());
        }
    }
    out.end();
}

/// Kernels of several nests (or nests with sequences): fusion where legal, then threads and
/// lanes per nest. Returns the output variables.
pub(super) fn several(
    out: &mut Out,
    state: &State,
    nests: &[(Name, Nest)],
    m: &Machine,
) -> Result<Vec<String>, String> {
    let mut vars = Vec::new();
    let alone = nests.len() == 1;
    // Scalars that pin a loop privatized first (scalars.rs): the rules below read the nests
    // as the privatized ones.
    let mut owned: Vec<(Name, Nest)> = Vec::new();
    for (k, (name, nest)) in nests.iter().enumerate() {
        let v = if alone { "p".to_string() } else { format!("p{}", k + 1) };
        out.stmt(let_(&v, value(name)));
        let simple = nest.items.len() == 1 && nest.items[0].as_loop().is_some_and(|l| one_path(l));
        match if simple { None } else { crate::schedule::scalars::privatized(state, nest) } {
            Some((n, lines)) => {
                out.comment(
                    "a scalar that pins a loop, one copy per iteration (privatize): the loop is free",
                );
                out.stmt(let_("p", local(&v)));
                for l in lines {
                    out.stmts(&l);
                }
                out.stmt(set(local(&v), local("p")));
                owned.push((name.clone(), n));
            }
            None => owned.push((name.clone(), nest.clone())),
        }
        vars.push(v);
    }
    let nests = owned.as_slice();
    // Each nest's workload, read once (isl's verdicts included): what it writes and reads for
    // storage contraction, and the single-nest rules for `each`.
    let works: Vec<Option<Workload>> =
        if alone { vec![None] } else { nests.iter().map(|(_, n)| Workload::of(state, n).ok()).collect() };
    // Fusion: every nest at the deepest level legal for each consecutive pair (then the
    // temporaries one nest writes and a later one reads stored per iteration of that loop:
    // storage contraction), or the first fusable pair at its deepest level, or none.
    let (mut choices, mut arms, fused_at) = fusion_arms(state, nests, &works, &vars, m)?;
    // Unfused, each perfect nest of one statement by the rules of a single nest (a matrix
    // product's register tile, a register block, an order): first where one of them is a
    // matrix product with a long reduction (gemm's, 2mm's), whose register tile fusion would
    // forbid.
    let own: Vec<Option<&Workload>> = works
        .iter()
        .map(|w| w.as_ref().filter(|w| w.perfect && w.n_stmts == 1 && !w.loops.is_empty()))
        .collect();
    // A nest with a sequence inside, distributed into perfect nests where that is legal, each
    // then by the rules of a single nest (what Polly and Pluto do with a fused kernel).
    let plans: Vec<Option<Distribution>> = nests
        .iter()
        .zip(&own)
        .map(|((_, n), w)| if w.is_some() { None } else { distribution(state, n) })
        .collect();
    // A nest with sequences that stays whole: its innermost loops in lanes where they can be.
    let lanes: Vec<Lanes> = nests
        .iter()
        .enumerate()
        .map(|(j, (_, n))| {
            let whole =
                own[j].is_none() && plans[j].is_none() && works[j].as_ref().is_none_or(|w| !w.perfect);
            if whole {
                inner_lanes(state, n)
            } else {
                Lanes { inner: Vec::new(), unroll: Vec::new(), threads: Vec::new() }
            }
        })
        .collect();
    // The rules of one nest (rules/nest.rs: a sum down a column sunk into row updates, sweeps
    // of independent rows around recurrences, left-looking blocks of columns), each nest's in
    // the order of `NEST`.
    let ruled: Vec<Vec<(&'static dyn NestRule, NestPlan)>> = nests
        .iter()
        .enumerate()
        .map(|(j, (_, n))| {
            let others: Vec<&Nest> =
                nests.iter().enumerate().filter(|(i, _)| *i != j).map(|(_, x)| &x.1).collect();
            let whole = own[j].is_none() && plans[j].is_none() && lanes[j].inner.is_empty();
            let cx = NestCx { state, nest: n, others: &others, m, own: own[j].is_some(), whole, found: &[] };
            detect_nest(&cx)
        })
        .collect();
    let applied = |name: &str| ruled.iter().filter(|r| r.iter().any(|(rule, _)| rule.name() == name)).count();
    let products = own
        .iter()
        .flatten()
        .filter(|w| w.writes().next().and_then(|t| matmul_like(w, t)).is_some_and(|t| t.k_extent >= 64))
        .count();
    // A nest with most of the kernel's work whose loops want another order (covariance's sum
    // over the samples, innermost as written, walks a column): fusion keeps the order it was
    // written in, its own rules do not.
    // Each perfect piece of work (a nest, or a part of a distributed one): its name, its
    // statement instances, the loop a better legal order puts innermost where fusion as the
    // model's first choice (or as written, for the parts) would keep the written order.
    let pieces: Vec<(String, f64, Option<Name>)> = (0..nests.len())
        .flat_map(|j| {
            let name = nests[j].0.to_string();
            let mut v = Vec::new();
            if let Some(plan) = &plans[j] {
                v.extend(plan.parts.iter().map(|p| {
                    let inner = p.reorder.as_ref().map(|r| r.inner.clone());
                    (format!("{name} ({})", p.address), p.work.mean_instances(), inner)
                }));
            } else if let Some(w) = &works[j] {
                let better = own[j]
                    .and_then(|w| wants_reorder(state, &nests[j].1, w))
                    .filter(|r| fused_at.is_some_and(|at| r.crosses(at)));
                v.push((name, w.mean_instances(), better.map(|r| r.inner)));
            }
            v
        })
        .collect();
    let total: f64 = pieces.iter().map(|p| p.1).sum();
    let reordered: Vec<String> = pieces
        .iter()
        .filter(|p| p.1 >= 0.25 * total)
        .filter_map(|(name, _, inner)| {
            Some(format!("{name}'s loops reordered, {} innermost", inner.as_ref()?))
        })
        .collect();
    let split: Vec<String> = plans
        .iter()
        .enumerate()
        .filter_map(|(j, p)| {
            p.as_ref().map(|p| format!("{} distributed into {} nests", nests[j].0, p.parts.len()))
        })
        .collect();
    let swept = applied("sweeps");
    if own.iter().any(Option::is_some)
        || !split.is_empty()
        || lanes.iter().any(|l| !l.inner.is_empty() || !l.threads.is_empty())
        || ruled.iter().any(|r| !r.is_empty())
    {
        let each = choice(
            text("each"),
            format!(
                "not fused: each nest by its own rules{}{}",
                split.iter().map(|s| format!("; {s}")).collect::<String>(),
                if products > 0 {
                    format!(
                        " ({products} matrix product{} with a register tile)",
                        if products == 1 { "" } else { "s" }
                    )
                } else if !reordered.is_empty() {
                    format!(" ({}: fusion would keep the written order)", reordered.join("; "))
                } else if swept > 0 {
                    format!(
                        " ({swept} nest{} of recurrences over independent rows, a block of rows in lanes: fused, each core would wait on one row's chain at a time)",
                        if swept == 1 { "" } else { "s" }
                    )
                } else {
                    String::new()
                }
            ),
        );
        // Recurrences are bound by their chains' latency, not by the memory fusion saves
        // (deriche at 4096 x 2160: 77 ms fused, 23-28 ms with its passes' rows in lanes; Zen 5).
        let at = if products > 0 || !reordered.is_empty() || swept > 0 {
            0
        } else {
            choices.len().saturating_sub(1).min(choices.len())
        };
        if choices.is_empty() {
            choices.push(choice("\"none\"", "not fused"));
        }
        choices.insert(at, each);
        let arm = Arm {
            tag: "each".into(),
            fuse: Vec::new(),
            contract: false,
            sums: Vec::new(),
            parts: Vec::new(),
        };
        arms.insert(at, arm);
    }
    let flags = || E::List(vec![E::Bool(false); vars.len()]);
    out.stmt(let_("parts", E::List(vars.iter().map(|x| local(x)).collect())));
    // A fused part's depth is its shared loops': its inner loops are left to the compiler (but
    // for the sums above, where `sums` marks them); a nest scheduled by its own rules is left
    // as they made it.
    out.stmt(let_("fused", flags()));
    out.stmt(let_("ruled", flags()));
    // Inner loops of a whole nest put in lanes (the generic lanes then leave it alone).
    out.stmt(let_("laned", flags()));
    fusion_choices(out, &vars, m, alone, choices, &arms, &own, &plans, &lanes, &ruled);
    out.param(
        "parallel",
        "parallel",
        "each nest's outermost parallel loop on threads",
        vec![
            choice("true", "each nest's outermost parallel loop (isl) on threads"),
            choice("false", "one thread"),
        ],
    );
    out.param(
        "vectorize",
        "vectorize",
        "each nest's innermost loop in lanes",
        vec![
            choice("true", "the innermost loop in lanes where it is data-parallel"),
            choice("false", "no vectors"),
        ],
    );
    // Each part: its outermost parallel loop on threads, its innermost in lanes where it is
    // data-parallel, unless fused or ruled above.
    let flag = |f: &str| local(f).at(local("k"));
    let depth = || call("depth", vec![local("q")]);
    out.begin_for("k", int(0).to(local("parts").method("len", vec![])));
    out.stmt(let_("q", local("parts").at(local("k"))));
    out.stmt(let_("par", call("parallel_levels", vec![local("q")])));
    let threads =
        local("parallel").and(flag("ruled").negated()).and(local("par").method("len", vec![]).gt(int(0)));
    out.stmt(S::If(threads, vec![step_on("q", "parallelize", vec![local("par").at(int(0))])]));
    let lanes = local("vectorize")
        .and(flag("fused").negated())
        .and(flag("ruled").negated())
        .and(flag("laned").negated())
        .and(depth().gt(int(0)))
        .and(call("data_parallel_levels", vec![local("q")]).method("contains", vec![depth()]));
    out.stmt(S::If(lanes, vec![step_on("q", "vectorize", vec![depth()])]));
    out.stmt(set(local("parts").at(local("k")), local("q")));
    out.end();
    if alone {
        out.stmt(set(local("p"), local("parts").at(int(0))));
        Ok(vec!["p".to_string()])
    } else {
        Ok(vec!["parts".to_string()])
    }
}

/// Doubles (or floats) in one of the machine's vectors, for `nest`'s arithmetic.
pub(super) fn lanes_of(state: &State, nest: &Nest, m: &Machine) -> usize {
    m.lanes(Workload::shape(state, nest).map(|w| w.dtype()).unwrap_or(crate::ir::DType::Double))
}
