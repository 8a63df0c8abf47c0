//! `teml tune`: searches a space of optimization paths, verifies every candidate, keeps the
//! fastest and writes it back as a replayable `.teml` script.
//!
//! A space is a program whose choices are `param(name, choices)` calls (define-by-run, see
//! [`crate::ir::params`]): a `.rhai` script, usually over the kernel of a `.teml` program that
//! its `// program: PATH` line names. Candidates go through the one pipeline:
//!
//! 1. **Evaluate** the space with the strategy's choices. The legality check of every
//!    transformation runs here: an illegal candidate is logged and never compiled.
//! 2. **Compile** a batch of candidates in parallel (`jobs` compilers; the cache keeps every
//!    kernel compiled once).
//! 3. **Verify and time** them one at a time ([`Pipeline::run`]: the reference at full size, or
//!    at a reduced size and then sampled elements of the timed binary against the expression
//!    oracle). A candidate that fails to compile, crashes, times out or mismatches is logged with
//!    its reason and never chosen.
//! 4. **Re-measure the leaders**, interleaved with the untransformed build (and LLVM Polly where
//!    installed), in rounds; the winner is the lowest median, and the report says whether its
//!    lead exceeds the spread.
//!
//! Every candidate is appended to a JSON-lines log as it is done; a second run (or the logs of
//! other shards, `--merge`) resumes from it without measuring anything again.

pub mod auto;
pub mod chart;
pub mod db;
pub mod log;
pub mod model;
pub mod slurm;
pub mod strategy;

use crate::codegen::CKernel;
use crate::error::ProgramError;
use crate::ir::{KernelRequest, Name, Params, Seen, State, history::Writer};
use crate::pipeline::{
    self, KernelRef, KernelRun, Pipeline, Program, RunError, RunOptions, Timing, Verified,
};
use crate::runtime::RuntimeError;
use log::{Record, Status};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use strategy::{Search, Strategy};
mod measure;
mod records;
mod report;
mod search;
use report::write_report;
pub use report::{replay, summary};

/// Consecutive proposals that only repeat known candidates before the space counts as
/// exhausted (random and evolutionary search of a small space).
const MAX_REPEATS: usize = 100;

/// A candidate's run may take this many times the reference time (the untransformed build's,
/// measured before the first candidate, or the best so far when faster), and at least
/// [`LIMIT_FLOOR_S`]: a bad loop order is a time-out after a few times the baseline, not minutes
/// of measuring.
const LIMIT_FACTOR: f64 = 20.0;

/// The least time a candidate's run is given (the timed repetitions of a tiny kernel need it).
const LIMIT_FLOOR_S: f64 = 5.0;

/// A candidate whose first run takes more than this many times the best median so far is not
/// timed further: its one run is its time (it cannot win; the time saved goes to other
/// candidates).
const SCREEN: f64 = 3.0;

/// What to search and how; `teml tune --slurm` writes it as JSON for each array task, which
/// `teml job FILE` reads back.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuneOptions {
    /// The space: a `.rhai` (or `.teml`) program with `param(...)` choices.
    pub space: PathBuf,
    /// Named constants (`-D`).
    pub defines: BTreeMap<Name, i64>,
    /// Choices fixed by their text (`--param name=value`): every candidate takes them, and the
    /// search runs over the other parameters.
    pub fixed: BTreeMap<String, String>,
    /// The strategy.
    pub strategy: Strategy,
    /// Its seed.
    pub seed: u64,
    /// The most candidates (logged ones included).
    pub budget: usize,
    /// The most wall time for the search (the leaders' re-measurement comes after).
    pub time_budget: Option<Duration>,
    /// This run's share of the candidates, `(k, n)`: those whose key hashes to `k` modulo `n`.
    pub shard: Option<(usize, usize)>,
    /// The log this run appends to (and resumes from).
    pub log: PathBuf,
    /// More logs to resume from (other shards).
    pub merge: Vec<PathBuf>,
    /// Where the best path, its C, the chart and the report go.
    pub out: PathBuf,
    /// Compilers running at once.
    pub jobs: usize,
    /// Candidates re-measured at the end.
    pub leaders: usize,
    /// Interleaved rounds of the re-measurement.
    pub rounds: usize,
    /// Time LLVM Polly on the untransformed C beside the leaders, where installed.
    pub anchors: bool,
    /// Do not check transformations against the dependences (illegal candidates then reach
    /// verification, which rejects them as mismatches).
    pub unchecked: bool,
    /// The tensors `--result` and `--temporary` declared.
    #[serde(default)]
    pub roles: crate::ir::Roles,
    /// Under `--json`: a script's `print` goes to standard error.
    pub json: bool,
    /// Threads, flags, timing of candidates, time limit of a run, reference limit.
    pub run: RunOptions,
    /// The tuning database: read for seeds and the model, appended with every measured
    /// candidate (`None`: neither).
    pub db: Option<PathBuf>,
    /// The space was generated by the rules (`teml tune` on a program without `param`).
    pub generated: bool,
    /// Measure and log this run's candidates, then stop: the leaders' re-measurement and the
    /// winner are left to a run that collects the logs (a shard of a Slurm array).
    pub measure_only: bool,
    /// Collect the logs of this many shards laid out under `out` as `teml tune --slurm` lays
    /// them out ([`slurm::shard_dir`]), measure nothing new, and declare the winner.
    pub collect: Option<usize>,
    /// Where measured candidates are recorded for the tuning database when not in `db` itself
    /// (a shard's own file, merged into `db` by the collecting run).
    pub db_append: Option<PathBuf>,
}

impl TuneOptions {
    /// The space evaluated with `params` and the named constants it is given; `time(l)` in it
    /// measures with the candidates' options.
    fn program(&self, params: Params) -> Program {
        let env = pipeline::script_env_with(self.run.clone(), self.json);
        Program::declaring(&self.space, self.defines.clone(), self.unchecked, params, env, self.roles.clone())
    }
}

/// The options to search with: `o` itself, or, for a program that asks for no `param`, the
/// space the rules generate from its kernel (written to `OUT/space.rhai`) and a note saying so.
pub fn prepare(o: &TuneOptions) -> Result<(TuneOptions, Option<String>), String> {
    if !o.generated
        && o.space.extension().and_then(|e| e.to_str()) == Some("teml")
        && let (Ok(_), seen, _) = evaluate(o, BTreeMap::new(), None)
        && seen.is_empty()
    {
        let g = auto::generate(&o.space, &o.defines, o.unchecked, &o.roles, &o.out.join("space.rhai"))?;
        let note = format!(
            "{} asks for no param: searched the space the rules generated from its kernel, {} (edit it and tune it like any space)",
            o.space.display(),
            g.path.display()
        );
        return Ok((TuneOptions { space: g.path, generated: true, ..o.clone() }, Some(note)));
    }
    Ok((o.clone(), None))
}

/// Why a script's space has a single point: it asks for no `param` (a note for the report).
fn single_point(o: &TuneOptions) -> Option<String> {
    if o.generated || o.space.extension().and_then(|e| e.to_str()) == Some("teml") {
        return None;
    }
    match evaluate(o, BTreeMap::new(), None) {
        (Ok(_), seen, _) if seen.is_empty() => Some(format!(
            "{} asks for no param: its space is one point, the script as written, so there was nothing to search \
             (add `param(\"name\", [choices])` where a choice is open, or give teml tune a .teml program to search \
             the space the rules generate from its kernel)",
            o.space.display()
        )),
        _ => None,
    }
}

/// A contender of the final, interleaved re-measurement.
#[derive(Clone, Debug, Serialize)]
pub struct Contender {
    /// A candidate's key, `untransformed` or `polly`.
    pub name: String,
    /// Median of the rounds' medians, seconds.
    pub median_s: f64,
    /// (slowest - fastest round) / median.
    pub spread: f64,
    /// Each round's median, seconds.
    pub rounds_s: Vec<f64>,
}

/// The winner.
#[derive(Clone, Debug, Serialize)]
pub struct Best {
    /// Its key.
    pub key: String,
    /// Its choices, by name.
    pub params: BTreeMap<String, String>,
    /// Median over the rounds, seconds.
    pub median_s: f64,
    /// Its spread over the rounds.
    pub spread: f64,
    /// (runner-up - winner) / winner, when there is a runner-up.
    pub lead: Option<f64>,
    /// The lead is larger than the winner's spread.
    pub lead_exceeds_spread: Option<bool>,
    /// Untransformed median over the winner's.
    pub speedup: Option<f64>,
    /// Polly's median over the winner's.
    pub vs_polly: Option<f64>,
    /// The replayable `.teml` script, when the space names its program.
    pub replay: Option<PathBuf>,
    /// Why there is no replay script.
    pub replay_error: Option<String>,
    /// The winner's C.
    pub c: Option<PathBuf>,
}

/// A search's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct TuneReport {
    /// The space.
    pub space: String,
    /// Strategy and seed.
    pub strategy: Strategy,
    /// Its seed.
    pub seed: u64,
    /// `k/n` when sharded.
    pub shard: Option<String>,
    /// The run only measured (`measure_only`): no final round, no winner.
    pub measured_only: bool,
    /// Threads of the kernels.
    pub threads: Option<usize>,
    /// The untransformed build's time (one verified run, measured before the first candidate),
    /// seconds: candidates' runs are limited from it.
    pub baseline_s: Option<f64>,
    /// Candidates considered (logged ones included).
    pub candidates: usize,
    /// Candidates measured by this run.
    pub measured: usize,
    /// Candidates taken from the logs.
    pub resumed: usize,
    /// Rejected candidates by reason.
    pub rejected: BTreeMap<String, usize>,
    /// The strategy ran out of new candidates before the budget.
    pub exhausted: bool,
    /// Seconds of the whole run.
    pub wall_s: f64,
    /// Seconds evaluating the space, compiling, and verifying and timing (this run).
    pub eval_s: f64,
    /// Seconds compiling.
    pub compile_s: f64,
    /// Seconds verifying and timing.
    pub run_s: f64,
    /// The interleaved re-measurement: leaders, untransformed, Polly.
    pub final_round: Vec<Contender>,
    /// The winner.
    pub best: Option<Best>,
    /// After each candidate: (candidates so far, seconds since the start, best median so far).
    pub trace: Vec<(usize, f64, Option<f64>)>,
    /// Things the user should know (Polly missing, a leader that failed re-verification).
    pub notes: Vec<String>,
}

/// A candidate's compile: whether it was cached and its seconds, or the compiler's message.
type Compiled = Result<(bool, f64), String>;

/// What the progress bar shows.
pub struct Progress<'a> {
    /// What is happening.
    pub phase: &'a str,
    /// Candidates done.
    pub done: usize,
    /// The budget.
    pub budget: usize,
    /// Candidates rejected.
    pub rejected: usize,
    /// The best time so far and its key.
    pub best: Option<(f64, &'a str)>,
}

/// Evaluates the space with the given choices: the state (or why not), what it asked, seconds.
fn evaluate(
    o: &TuneOptions,
    pinned: BTreeMap<String, usize>,
    seed: Option<u64>,
) -> (Result<State, ProgramError>, Vec<Seen>, f64) {
    evaluate_values(o, pinned, seed, BTreeMap::new())
}

/// [`evaluate`] with choices fixed by their text too (a seed from the tuning database).
fn evaluate_values(
    o: &TuneOptions,
    pinned: BTreeMap<String, usize>,
    seed: Option<u64>,
    values: BTreeMap<String, String>,
) -> (Result<State, ProgramError>, Vec<Seen>, f64) {
    let report = Arc::new(Mutex::new(Vec::new()));
    let mut values = values;
    values.extend(o.fixed.clone());
    let params = Params { pinned, seed, values, report: Some(report.clone()), ..Params::default() };
    let start = Instant::now();
    let r = o.program(params).eval();
    let seen = report.lock().map(|s| s.clone()).unwrap_or_default();
    (r, seen, start.elapsed().as_secs_f64())
}

/// The program of one candidate, its choices fixed by their text (so that a reduced-size
/// evaluation takes the same choices).
fn candidate_program(o: &TuneOptions, seen: &[Seen]) -> Program {
    let values = seen.iter().map(|s| (s.name.clone(), s.value.clone())).collect();
    o.program(Params { values, ..Params::default() })
}

/// The untransformed build of the space's kernel (at its first choices).
fn untransformed_program(o: &TuneOptions, start: &BTreeMap<String, String>) -> Program {
    let (space, first) = (o.space.clone(), o.program(Params { values: start.clone(), ..Params::default() }));
    Program::new("untransformed", o.defines.clone(), move |consts| {
        untransformed_state(&space, first.eval_with(consts)?)
    })
}

/// The space's state `s` (at its first choices) with its kernel replaced by the untransformed
/// build of the same statements.
fn untransformed_state(space: &Path, s: State) -> Result<State, ProgramError> {
    let req = s.kernels.first().ok_or_else(|| no_kernel(space))?;
    let nests = pipeline::untransformed(&s, req).map_err(|e| e.to_string())?;
    let names = (1..=nests.len()).map(|k| Name::from(format!("untransformed{k}").as_str())).collect();
    Ok(State { kernels: vec![KernelRequest { names, nests, at: None, label: None }], ..s })
}

fn no_kernel(space: &Path) -> String {
    format!("{}: expected the space to make a kernel (end it with codegen(...)), found none", space.display())
}

fn classify(e: &RunError) -> Status {
    match e {
        RunError::Runtime(RuntimeError::Compile { .. }) => Status::Compile,
        RunError::Runtime(RuntimeError::Crashed { .. }) => Status::Crash,
        RunError::Runtime(RuntimeError::TimedOut { .. }) => Status::Timeout,
        e if e.is_refusal() => Status::Illegal,
        _ => Status::Error,
    }
}

/// `a/b/../c` as `a/c` (without touching the file system).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir
                if out
                    .components()
                    .next_back()
                    .is_some_and(|l| matches!(l, std::path::Component::Normal(_))) =>
            {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

fn status_name(s: Status) -> String {
    serde_json::to_value(s).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// The search: candidates until the budget, the leaders re-measured, the winner written out.
pub fn tune(o: &TuneOptions, progress: &mut dyn FnMut(&Progress)) -> Result<TuneReport, String> {
    if o.budget == 0 {
        return Err("--budget: expected at least 1 candidate, found 0".into());
    }
    if let (generated, Some(note)) = prepare(o)? {
        let mut r = tune(&generated, progress)?;
        r.notes.insert(0, note);
        return Ok(r);
    }
    let single = if o.collect.is_none() { single_point(o) } else { None };
    let mut t = Tuning::start(o, progress)?;
    if let Some(n) = single {
        t.report.notes.insert(0, n);
    }
    if o.collect.is_some() {
        t.adopt_logged()?;
    }
    while o.collect.is_none() && t.records.len() < o.budget && !t.time_up() {
        let (batch, exhausted) = t.propose()?;
        t.progress(progress, "compiling");
        let kernels = t.compile(&batch);
        if !t.measure(batch, kernels, progress)? {
            break;
        }
        if exhausted {
            t.report.exhausted = true;
            break;
        }
    }
    t.report.candidates = t.records.len();
    if o.measure_only {
        return t.measured_only();
    }
    t.progress(progress, "re-measuring the leaders");
    t.final_round()
}

/// A candidate that evaluated to a kernel: its key, its choices, its state, and the seconds
/// its evaluation took.
type Candidate = (String, Vec<Seen>, State, f64);

/// A candidate's kernel (or why code generation refused it) and its compile.
type Built = (Result<CKernel, RunError>, Option<Compiled>);

/// One search in progress: what its four steps share.
struct Tuning<'a> {
    o: &'a TuneOptions,
    t0: Instant,
    /// Candidates of the logs, by key, not met again yet.
    logged: BTreeMap<String, Record>,
    report: TuneReport,
    search: Search,
    /// Every candidate considered, in order.
    records: Vec<Record>,
    /// Their keys.
    done: BTreeSet<String>,
    /// Proposals in a row that repeated a known candidate.
    repeats: usize,
    /// The best median so far, and its key.
    best: Option<(f64, String)>,
    /// The untransformed build, verified, and its time (one run): the reference of the run
    /// limit, and a contender of the final round.
    baseline: Option<(Pipeline, Verified, f64)>,
    /// The workload's keys in the tuning database (with sizes, statements alone).
    keys: Option<(String, String)>,
    /// Choices to measure first: the tuning database's records of this workload and of the
    /// same statements at other sizes.
    seeds: std::collections::VecDeque<BTreeMap<String, String>>,
    /// What the cost model learns from: (features, seconds) of measured candidates.
    samples: Vec<(Vec<f32>, f64)>,
    /// Features of the candidates being measured, by key.
    features: BTreeMap<String, Vec<f32>>,
    /// The choices (by text) of the point the untransformed build is taken from: none (the
    /// first choices), or a generated space's first legal point where its first was refused.
    start: BTreeMap<String, String>,
    /// The fingerprint of this search's database records ([`db::fingerprint`]), made once.
    fingerprint: String,
}

/// Candidates the model strategy evaluates per candidate it compiles.
const POOL: usize = 4;

/// One run, no warm-up: a screening measurement.
const ONCE: Timing = Timing { warmup: 0, min_time_s: 0.0, min_reps: 1, max_reps: 1 };

/// A program evaluated once and verified once: its pipeline (which then times it) and the
/// evidence.
fn verified(program: Program, opts: RunOptions) -> Result<(Pipeline, Verified), String> {
    verify(Pipeline::new(program, RunOptions { timing: None, ..opts }).map_err(|e| e.to_string())?)
}

/// Verifies the pipeline's kernel: the pipeline and the evidence.
fn verify(p: Pipeline) -> Result<(Pipeline, Verified), String> {
    match p.run(&KernelRef::Codegen(0)) {
        Ok(KernelRun { verified: Some(v), .. }) => Ok((p, v)),
        Ok(run) => Err(format!("failed verification: {}", run.report.worst.unwrap_or_default())),
        Err(e) => Err(format!("failed verification: {e}")),
    }
}

impl<'a> Tuning<'a> {
    /// Reads the logs and evaluates the space at its first choices: its errors are the user's
    /// to fix, not rejected candidates.
    fn start(o: &'a TuneOptions, progress: &mut dyn FnMut(&Progress)) -> Result<Tuning<'a>, String> {
        let t0 = Instant::now();
        // Collecting, the shards' logs (the merged log is written afresh); else this run's log.
        let (shard_logs, mut notes) = match o.collect {
            Some(n) => slurm::collect(o, n),
            None => (vec![o.log.clone()], Vec::new()),
        };
        let mut paths: Vec<&Path> = shard_logs.iter().map(|p| p.as_path()).collect();
        paths.extend(o.merge.iter().map(|p| p.as_path()));
        let (logged, cut) = log::read(&paths)?;
        notes.extend(cut);
        let report = TuneReport {
            space: o.space.display().to_string(),
            strategy: o.strategy,
            seed: o.seed,
            shard: o.shard.map(|(k, n)| format!("{k}/{n}")),
            measured_only: o.measure_only,
            threads: o.run.threads,
            baseline_s: None,
            candidates: 0,
            measured: 0,
            resumed: 0,
            rejected: BTreeMap::new(),
            exhausted: false,
            wall_s: 0.0,
            eval_s: 0.0,
            compile_s: 0.0,
            run_s: 0.0,
            final_round: Vec::new(),
            best: None,
            trace: Vec::new(),
            notes,
        };
        progress(&Progress {
            phase: "evaluating the space",
            done: 0,
            budget: o.budget,
            rejected: 0,
            best: None,
        });
        if o.measure_only {
            // A shard's log exists once it ran, even when none of the candidates is its share.
            log::touch(&o.log)?;
        }
        let (mut first, seen, _) = evaluate(o, BTreeMap::new(), None);
        // The point the untransformed build is taken from (its choices by text, to replay at
        // a reduced size): the first choices, unless refused.
        let mut start: BTreeMap<String, String> = BTreeMap::new();
        if first.is_err() && o.generated {
            // A generated space whose first point its own checks refuse (a temporary stored
            // per iteration whose first value comes from before the kernel): the search starts
            // from the first legal point one choice away, as `teml auto` does; the refused
            // point is the rules' to fix, not the user's.
            let points = seen.iter().flat_map(|s| {
                (0..s.choices).filter(move |&i| i != s.index).map(move |i| (s.name.clone(), i))
            });
            let what = |(name, i): &(String, usize)| format!("{name} at its choice {}", i + 1);
            let mut eval = |(name, i): &(String, usize)| {
                let (st, took, _) = evaluate(o, BTreeMap::from([(name.clone(), *i)]), None);
                st.map(|s| (s, took)).map_err(|e| e.to_string())
            };
            if let Ok(((s, took), _)) = crate::schedule::first_accepted(points, what, &mut eval) {
                first = Ok(s);
                start = took.into_iter().map(|x| (x.name, x.value)).collect();
            }
        }
        let first = first.map_err(|e| e.to_string())?;
        if first.kernels.is_empty() {
            return Err(no_kernel(&o.space));
        }
        let mut t = Tuning {
            o,
            t0,
            logged,
            report,
            search: Search::new(o.strategy, o.seed),
            records: Vec::new(),
            done: BTreeSet::new(),
            repeats: 0,
            best: None,
            baseline: None,
            keys: None,
            seeds: Default::default(),
            samples: Vec::new(),
            features: BTreeMap::new(),
            start,
            fingerprint: db::fingerprint(
                &std::fs::read_to_string(&o.space).unwrap_or_default(),
                &crate::pipeline::toolchain(&o.run).unwrap_or_default(),
            ),
        };
        t.read_db(&first);
        // The untransformed build first: its time limits every candidate's run from the first on.
        t.progress(progress, "timing the untransformed build");
        // Built from the state just evaluated (the space is not evaluated again).
        let baseline = untransformed_state(&o.space, first).map_err(|e| e.to_string()).and_then(|s| {
            let opts = RunOptions { timing: None, ..o.run.clone() };
            let (p, v) = verify(Pipeline::with_state(untransformed_program(o, &t.start), s, opts))?;
            let t = p.time(&v, ONCE).map_err(|e| e.to_string())?;
            Ok((p, v, t.median_s))
        });
        match baseline {
            Ok(b) => {
                t.report.baseline_s = Some(b.2);
                t.baseline = Some(b);
            }
            Err(e) => t.report.notes.push(format!("untransformed: {e}")),
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::report::{at_sizes, beats, replay_as_written};
    use super::*;

    fn c(name: &str, median_ms: f64, spread: f64) -> Contender {
        Contender { name: name.into(), median_s: median_ms * 1e-3, spread, rounds_s: Vec::new() }
    }

    #[test]
    fn the_untransformed_build_wins_only_beyond_both_spreads() {
        // Well beyond both spreads: the program as written wins.
        assert!(beats(&c("untransformed", 6.19, 0.03), &c("p", 8.52, 0.09)));
        // Within a spread: a tie, the candidate keeps the win.
        assert!(!beats(&c("untransformed", 8.0, 0.10), &c("p", 8.52, 0.02)));
        assert!(!beats(&c("untransformed", 8.0, 0.02), &c("p", 8.52, 0.10)));
        assert!(!beats(&c("untransformed", 9.0, 0.0), &c("p", 8.52, 0.0)));
    }

    #[test]
    fn the_program_as_written_replays_the_untransformed_build_and_a_path_of_its_own_does_not() {
        let dir = std::env::temp_dir().join(format!("teml-as-written-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let head =
            "N = 8\nA = tensor([N, N])\nx = tensor([N])\ny = einsum(\"ij,j->i\", [A, x])\nl = build(y)\n";
        let plain = dir.join("plain.teml");
        std::fs::write(&plain, format!("{head}codegen(l)\n")).unwrap();
        let text = replay_as_written(&plain, &State::new(), "# header\n").unwrap();
        assert!(text.starts_with("# header\n"), "{text}");
        assert!(text.contains("as written") && text.ends_with("codegen(l)\n"), "{text}");
        let moved = dir.join("moved.teml");
        std::fs::write(&moved, format!("{head}m = interchange(l, 1, 2)\ncodegen(m)\n")).unwrap();
        let e = replay_as_written(&moved, &State::new(), "").unwrap_err();
        assert!(e.contains("transforms its kernel itself"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_replay_holds_the_sizes_it_was_chosen_at() {
        let consts: BTreeMap<Name, i64> =
            [(Name::from("N"), 1200), (Name::from("M"), 8)].into_iter().collect();
        let text = "# mm\nN = 512\nM = 8\nK = 3   # a window\nA = tensor([N, N])\n  N = 7\n";
        assert_eq!(
            at_sizes(text, &consts),
            "# mm\nN = 1200  # chosen at N=1200; the program's default: 512\nM = 8\nK = 3   # a window\n\
             A = tensor([N, N])\n  N = 7\n"
        );
        let consts: BTreeMap<Name, i64> = [(Name::from("K"), 5)].into_iter().collect();
        assert_eq!(
            at_sizes("K = 3   # a window\n", &consts),
            "K = 5  # chosen at K=5; the program's default: 3 (a window)\n"
        );
    }
}
