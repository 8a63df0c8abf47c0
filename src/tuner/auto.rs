//! Automatic schedules at the command line: the generated space of a program (`teml tune FILE`
//! on a program without `param`, `teml auto --emit-space`), and `teml auto`: the space's point
//! the machine model prefers, written as a `.teml` path with each decision's reason, in well
//! under a second and without measuring anything.

use super::db::{self, Db};
use crate::ir::{Name, Params, State};
use crate::pipeline::{self, Program};
use crate::schedule::{self, Machine, Space, Workload};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A program's generated space, written as a script.
#[derive(Clone, Debug)]
pub struct Generated {
    /// The script.
    pub path: PathBuf,
    /// Its text, as written there.
    pub text: String,
    /// What the rules decided and why.
    pub space: Space,
    /// The kernel's workload (its first nest) and the database's keys.
    pub workload: Option<Workload>,
    /// The key of the whole kernel in the tuning database.
    pub key: String,
    /// Its key without the sizes.
    pub statements: String,
    /// The tensors the kernel writes (every path of the space must write them all).
    pub writes: std::collections::BTreeSet<Name>,
}

/// `p` relative to the folder `from` (both made absolute first), for a script's directive.
pub fn relative(from: &Path, p: &Path) -> PathBuf {
    let abs = |x: &Path| std::path::absolute(x).unwrap_or_else(|_| x.to_path_buf());
    let (from, to) = (super::normalize(&abs(from)), super::normalize(&abs(p)));
    let a: Vec<_> = from.components().collect();
    let b: Vec<_> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if common == 0 {
        return to;
    }
    let mut out = PathBuf::new();
    for _ in common..a.len() {
        out.push("..");
    }
    for c in &b[common..] {
        out.push(c);
    }
    out
}

/// Evaluates `program` (a `.teml` file) at `defines`: its state, with at least one kernel.
pub fn program_state(
    program: &Path,
    defines: &BTreeMap<Name, i64>,
    unchecked: bool,
    roles: &crate::ir::Roles,
) -> Result<State, String> {
    let env = crate::script::Env::default();
    let state =
        Program::declaring(program, defines.clone(), unchecked, Default::default(), env, roles.clone())
            .eval()
            .map_err(|e| e.to_string())?;
    if state.kernels.is_empty() {
        return Err(format!(
            "{}: expected a program with a codegen statement (the kernel to schedule), found none",
            program.display()
        ));
    }
    Ok(state)
}

/// The database keys of a program's first kernel: (workload with sizes, statements alone).
pub fn keys(state: &State) -> Result<(String, String, Option<Workload>), String> {
    let req = state.kernels.first().ok_or("no kernel")?;
    let nests = pipeline::untransformed(state, req).map_err(|e| e.to_string())?;
    let mut keys = Vec::new();
    let mut shape_free = Vec::new();
    let mut first = None;
    for n in &nests {
        let w = Workload::shape(state, n)?;
        keys.push(w.key());
        shape_free.push(w.shape_free_key());
        first.get_or_insert(w);
    }
    Ok((keys.join(" || "), shape_free.join(" || "), first))
}

/// Generates the space of `program`'s first kernel and writes it to `to`.
pub fn generate(
    program: &Path,
    defines: &BTreeMap<Name, i64>,
    unchecked: bool,
    roles: &crate::ir::Roles,
    to: &Path,
) -> Result<Generated, String> {
    let state = program_state(program, defines, unchecked, roles)?;
    let req = &state.kernels[0];
    let dir = to.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let (text, space) = schedule::script(&state, req, &Machine::this()?, &relative(dir, program))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    std::fs::write(to, &text).map_err(|e| format!("cannot write {}: {e}", to.display()))?;
    let (key, statements, workload) = keys(&state)?;
    let writes = schedule::written(&req.nests);
    Ok(Generated { path: to.to_path_buf(), text, space, workload, key, statements, writes })
}

/// What `teml auto` is asked.
#[derive(Clone, Debug)]
pub struct AutoOptions {
    /// The program (`.teml`).
    pub program: PathBuf,
    /// Named constants.
    pub defines: BTreeMap<Name, i64>,
    /// `--unchecked`.
    pub unchecked: bool,
    /// The tensors `--result` and `--temporary` declared.
    pub roles: crate::ir::Roles,
    /// Where space.rhai and auto.teml go.
    pub out: PathBuf,
    /// The tuning database (None: not read).
    pub db: Option<PathBuf>,
    /// The threads the path will run on (the database's records are per thread count).
    pub threads: usize,
}

/// One decision of the chosen path.
#[derive(Clone, Debug, Serialize)]
pub struct Decided {
    /// The parameter.
    pub name: String,
    /// Its value.
    pub value: String,
    /// Why.
    pub reason: String,
}

/// What `teml auto` chose.
#[derive(Clone, Debug, Serialize)]
pub struct AutoReport {
    /// The generated space.
    pub space: PathBuf,
    /// The path, a `.teml` file.
    pub path: PathBuf,
    /// Where the choice came from: `model`, `database` or `untransformed`.
    pub source: String,
    /// The decisions, with reasons.
    pub decisions: Vec<Decided>,
    /// Points of the space evaluated before one was legal.
    pub tried: usize,
    /// Seconds the choice took.
    pub seconds: f64,
    /// Notes: why a preferred point was refused, a database problem.
    pub notes: Vec<String>,
}

/// `teml auto`: the model's point of the generated space (or the database's best record of this
/// workload on this machine), written as `OUT/auto.teml`.
pub fn auto(o: &AutoOptions) -> Result<AutoReport, String> {
    let t0 = Instant::now();
    let space_path = o.out.join("space.rhai");
    let g = generate(&o.program, &o.defines, o.unchecked, &o.roles, &space_path)?;
    let mut notes = Vec::new();
    // A point is evaluated without the gate each step runs, and its kernel's nests are then
    // checked once, whole: the same verdict (legality depends only on the final nest and the
    // original statements), without an isl analysis per step of the path.
    let eval = |values: BTreeMap<String, String>| -> Result<State, String> {
        let params = Params { values, ..Params::default() };
        let env = pipeline::script_env_with(pipeline::RunOptions::default(), false);
        let s = Program::declaring(&g.path, o.defines.clone(), true, params, env, o.roles.clone())
            .eval()
            .map_err(|e| e.to_string())?;
        if !o.unchecked {
            legal_at_end(&s)?;
        }
        Ok(s)
    };
    let mut tried = 0;
    let mut chosen: Option<(State, String)> = None;
    // The database's best record may be the program as written (it beat every point searched).
    let mut as_written: Option<f64> = None;
    // The learned model, where the database holds records of these statements (at any size) on
    // this machine: it ranks the points the analytic model's walk would try.
    let mut learned: Option<super::model::Model> = None;
    // The database first: the best record of this workload on this machine.
    if let Some(path) = &o.db {
        let d = Db::open(path);
        notes.extend(d.notes.iter().cloned());
        let toolchain = pipeline::toolchain(&pipeline::RunOptions::default()).unwrap_or_default();
        let now = db::fingerprint(&g.text, &toolchain);
        // Every record of these statements on this machine but this workload's stale ones.
        let machine = db::machine_key(o.threads);
        let samples: Vec<(Vec<f32>, f64)> = d
            .entries
            .iter()
            .filter(|e| e.statements == g.statements && e.machine == machine && !e.as_written)
            .filter(|e| e.workload != g.key || e.fingerprint == now)
            .filter(|e| e.features.len() == super::model::FEATURES)
            .map(|e| (e.features.clone(), e.median_s))
            .collect();
        learned = super::model::Model::train(&samples);
        let (best, stale) = d.best_current(&g.key, &db::machine_key(o.threads), db::GENERATED, &now);
        if stale > 0 {
            notes.push(format!(
                "tuning database {}: {stale} record{} of this kernel on this machine made with other rules, \
                 another space, compiler or flags: ignored (`teml tune` measures again)",
                path.display(),
                if stale == 1 { "" } else { "s" }
            ));
        }
        if let Some(best) = best {
            tried += 1;
            if best.as_written {
                as_written = Some(best.median_s);
            } else {
                match eval(best.params.clone()) {
                    Ok(s) if !s.kernels.is_empty() => {
                        chosen =
                            Some((s, format!("database ({:.3} ms measured, verified)", best.median_s * 1e3)))
                    }
                    Ok(_) => {}
                    Err(e) => notes.push(format!("the database's best record does not replay here: {e}")),
                }
            }
        }
    }
    if chosen.is_none() && as_written.is_none() {
        let mut ev = |values: &BTreeMap<String, String>| match eval(values.clone()) {
            Ok(s) if !s.kernels.is_empty() => {
                // Every tensor the program's kernel writes, the path's kernel writes too (a path
                // that left a nest out would verify on the rest).
                let missing: Vec<String> = g
                    .writes
                    .difference(&schedule::written(&s.kernels[0].nests))
                    .map(|n| n.to_string())
                    .collect();
                if !missing.is_empty() {
                    return Err(format!("the path's kernel does not compute {}", missing.join(", ")));
                }
                // A point code generation cannot realize (a rule that read a layout the path
                // changed, e.g. lanes over a transposed pack) is refused here, never written.
                crate::codegen::generate(&s, "teml_auto_probe", &s.kernels[0].named())
                    .map_err(|e| format!("codegen: {e}"))?;
                Ok(s)
            }
            Ok(_) => Err("no kernel".to_string()),
            Err(e) => Err(e),
        };
        match &learned {
            None => match schedule::first_legal(&g.space, &mut ev) {
                Ok((s, k)) => {
                    tried += k;
                    chosen = Some((
                        s,
                        format!(
                            "analytic model ({})",
                            super::model::CostModel::describe(&super::model::Analytic)
                        ),
                    ));
                }
                Err(why) => {
                    tried += schedule::neighbours(&g.space).len().min(schedule::MAX_TRIES);
                    notes.extend(why);
                }
            },
            Some(m) => match by_learned_model(&g.space, m, &mut ev) {
                Ok((s, k, rank)) => {
                    tried += k;
                    chosen = Some((
                        s,
                        format!(
                            "learned model ({}; the analytic model's point ranked {rank})",
                            super::model::CostModel::describe(m)
                        ),
                    ));
                }
                Err((k, why)) => {
                    tried += k;
                    notes.extend(why);
                }
            },
        }
    }
    let path = o.out.join("auto.teml");
    let setting: Vec<String> = o.defines.iter().map(|(n, v)| format!(" -D {n}={v}")).collect();
    let machine = crate::runtime::machine::Machine::host().host_line();
    let Some((state, source)) = chosen else {
        // No point of the space is legal here: the program as written, with the reason.
        let text = std::fs::read_to_string(&o.program)
            .map_err(|e| format!("cannot read {}: {e}", o.program.display()))?;
        let header = match as_written {
            Some(t) => format!(
                "# `teml auto {}{}` replays the tuning database's best record of this kernel on this machine:\n\
                 # the program as written, which beat every point of its generated space ({}) in a search\n\
                 # ({:.3} ms, verified).\n\n",
                o.program.display(),
                setting.concat(),
                space_path.display(),
                t * 1e3
            ),
            None => {
                let why =
                    notes.first().cloned().unwrap_or_else(|| "the rules found nothing to schedule".into());
                format!(
                    "# `teml auto {}{}` found no legal point in its generated space ({}): the program as written.\n# Why: {why}\n\n",
                    o.program.display(),
                    setting.concat(),
                    space_path.display()
                )
            }
        };
        std::fs::write(&path, format!("{header}{}", super::report::at_sizes(&text, &o.defines)))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        return Ok(AutoReport {
            space: space_path,
            path,
            source: if as_written.is_some() { "database" } else { "untransformed" }.into(),
            decisions: Vec::new(),
            tried,
            seconds: t0.elapsed().as_secs_f64(),
            notes,
        });
    };
    let decisions: Vec<Decided> = state
        .params
        .seen
        .iter()
        .map(|s| Decided {
            name: s.name.clone(),
            value: s.value.clone(),
            reason: g.space.reason(s).to_string(),
        })
        .collect();
    let mut header = format!(
        "# Chosen by `teml auto {}{}` from the {source}, without measuring, for this machine:\n#   {machine}; {}.\n",
        o.program.display(),
        setting.concat(),
        Machine::this()?.describe()
    );
    header.push_str(&format!(
        "# The generated space: {} (teml tune searches it). Each decision and its reason:\n",
        space_path.display()
    ));
    for d in &decisions {
        header.push_str(&format!("#   {} = {}: {}\n", d.name, d.value, d.reason));
    }
    let text = super::replay(&space_path, &state, &header)?;
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(AutoReport {
        space: space_path,
        path,
        source,
        decisions,
        tried,
        seconds: t0.elapsed().as_secs_f64(),
        notes,
    })
}

/// The most points the learned model ranks (the first of the analytic model's walk that are
/// accepted): each costs an evaluation, none a compile.
const LEARNED_POINTS: usize = 16;

/// The point of the analytic model's walk ([`schedule::neighbours`]) that `m` predicts fastest,
/// among the first [`LEARNED_POINTS`] that `ev` accepts: the state, the points evaluated and
/// where the analytic model's own pick ranked (1: the learned model agrees); or the points
/// evaluated and the first refusals.
fn by_learned_model(
    space: &Space,
    m: &super::model::Model,
    ev: &mut schedule::Evaluate<'_, State>,
) -> Result<(State, usize, usize), (usize, Vec<String>)> {
    use super::model::{Candidate, Features, ranked};
    let mut accepted: Vec<(usize, State, Features)> = Vec::new();
    let mut why = Vec::new();
    let mut tried = 0;
    for (order, values) in schedule::neighbours(space).into_iter().take(schedule::MAX_TRIES).enumerate() {
        tried += 1;
        match ev(&values) {
            Ok(s) => {
                let f = Features::of(&s);
                accepted.push((order, s, f));
                if accepted.len() >= LEARNED_POINTS {
                    break;
                }
            }
            Err(e) if why.len() < 3 => why.push(format!("refused: {}", e.lines().next().unwrap_or(""))),
            Err(_) => {}
        }
    }
    let cands: Vec<Candidate> =
        accepted.iter().map(|(order, _, features)| Candidate { order: *order, features }).collect();
    let idx = ranked(m, &cands);
    let Some(&best) = idx.first() else { return Err((tried, why)) };
    let rank = idx.iter().position(|&i| i == 0).map_or(0, |p| p + 1);
    let (_, s, _) = accepted.swap_remove(best);
    Ok((s, tried, rank))
}

/// Every nest of every kernel of `s` legal at the program's sizes (what the gate of each
/// transformation would have refused, with its witness).
fn legal_at_end(s: &State) -> Result<(), String> {
    for k in &s.kernels {
        for n in &k.nests {
            if let Err(e) = crate::analysis::legality::decide_at_sizes(s, n)? {
                return Err(format!("illegal: {}", e.message));
            }
        }
    }
    Ok(())
}

/// The report in words.
pub fn summary(r: &AutoReport) -> String {
    let mut s = format!(
        "teml auto: {} ({} point{} tried, {:.2} s)\n",
        r.source,
        r.tried,
        if r.tried == 1 { "" } else { "s" },
        r.seconds
    );
    for d in &r.decisions {
        s.push_str(&format!("  {} = {}: {}\n", d.name, d.value, d.reason));
    }
    for n in &r.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    s.push_str(&format!("path: {}\nspace: {}\n", r.path.display(), r.space.display()));
    s
}

/// The REPL's `:auto l`: the path `teml auto` picks for the nest `name` of the session, each
/// decision with its reason, and the path's steps.
pub fn explain(state: &State, name: &str, nest: &crate::ir::Nest) -> Result<String, String> {
    let space = schedule::generate(state, &[(Name::from(name), nest.clone())], &Machine::this()?)?;
    let src = format!("{}codegen(p);\n", space.body);
    let start = State { kernels: Vec::new(), params: Params::default(), ..state.clone() };
    let mut eval = |values: &BTreeMap<String, String>| {
        let s = State { params: Params { values: values.clone(), ..Params::default() }, ..start.clone() };
        match crate::script::eval(&src, ":auto", &s) {
            Ok(s) if !s.kernels.is_empty() => Ok(s),
            Ok(_) => Err("no kernel".to_string()),
            Err(e) => Err(e.to_string()),
        }
    };
    let (s, tried) = schedule::first_legal(&space, &mut eval)
        .map_err(|why| format!(":auto: no point of the generated space is legal here: {}", why.join("; ")))?;
    let mut out =
        format!("{name}: teml auto's path ({tried} point{} tried)\n", if tried == 1 { "" } else { "s" });
    for seen in &s.params.seen {
        out.push_str(&format!("  {} = {}: {}\n", seen.name, seen.value, space.reason(seen)));
    }
    out.push_str("path:\n");
    for n in &s.kernels[0].nests {
        for l in n.history.lines() {
            out.push_str(&format!("  {l}\n"));
        }
    }
    out.push_str(&format!(
        "(`auto({name})` returns it as a nest to continue from; `auto_space({name})` is the space to tune)"
    ));
    Ok(out)
}
