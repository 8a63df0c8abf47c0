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

pub mod chart;
pub mod log;
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

/// What to search and how.
#[derive(Clone, Debug)]
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
    /// Under `--json`: a script's `print` goes to standard error.
    pub json: bool,
    /// Threads, flags, timing of candidates, time limit of a run, reference limit.
    pub run: RunOptions,
}

impl TuneOptions {
    /// The space evaluated with `params` and the named constants it is given; `time(l)` in it
    /// measures with the candidates' options.
    fn program(&self, params: Params) -> Program {
        let env = pipeline::script_env_with(self.run.clone(), self.json);
        Program::with_params(&self.space, self.defines.clone(), self.unchecked, params, env)
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
    let report = Arc::new(Mutex::new(Vec::new()));
    let params =
        Params { pinned, seed, values: o.fixed.clone(), report: Some(report.clone()), ..Params::default() };
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
fn untransformed_program(o: &TuneOptions) -> Program {
    let (space, first) = (o.space.clone(), o.program(Params::default()));
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
    let mut t = Tuning::start(o, progress)?;
    while t.records.len() < o.budget && !t.time_up() {
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
}

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
        let mut paths: Vec<&Path> = vec![o.log.as_path()];
        paths.extend(o.merge.iter().map(|p| p.as_path()));
        let logged = log::read(&paths)?;
        let report = TuneReport {
            space: o.space.display().to_string(),
            strategy: o.strategy,
            seed: o.seed,
            shard: o.shard.map(|(k, n)| format!("{k}/{n}")),
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
            notes: Vec::new(),
        };
        progress(&Progress {
            phase: "evaluating the space",
            done: 0,
            budget: o.budget,
            rejected: 0,
            best: None,
        });
        let (first, _, _) = evaluate(o, BTreeMap::new(), None);
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
        };
        // The untransformed build first: its time limits every candidate's run from the first on.
        t.progress(progress, "timing the untransformed build");
        // Built from the state just evaluated (the space is not evaluated again).
        let baseline = untransformed_state(&o.space, first).map_err(|e| e.to_string()).and_then(|s| {
            let opts = RunOptions { timing: None, ..o.run.clone() };
            let (p, v) = verify(Pipeline::with_state(untransformed_program(o), s, opts))?;
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

    /// How long one run of a candidate may take: [`LIMIT_FACTOR`] times the reference (the
    /// untransformed build's time, or the best so far when faster), at least [`LIMIT_FLOOR_S`],
    /// at most `--timeout`.
    fn limit(&self) -> Duration {
        self.reference_s().map_or(self.o.run.timeout, |r| {
            self.o.run.timeout.min(Duration::from_secs_f64((LIMIT_FACTOR * r).max(LIMIT_FLOOR_S)))
        })
    }

    /// The time candidates are held to: the best so far, or the untransformed build's when it is
    /// faster (or there is no best yet).
    fn reference_s(&self) -> Option<f64> {
        [self.report.baseline_s, self.best.as_ref().map(|b| b.0)].into_iter().flatten().reduce(f64::min)
    }

    fn time_up(&self) -> bool {
        self.o.time_budget.is_some_and(|b| self.t0.elapsed() >= b)
    }

    fn progress(&self, progress: &mut dyn FnMut(&Progress), phase: &str) {
        progress(&Progress {
            phase,
            done: self.records.len(),
            budget: self.o.budget,
            rejected: self.report.rejected.values().sum(),
            best: self.best.as_ref().map(|(t, k)| (*t, k.as_str())),
        });
    }

    /// Records a candidate that is done: appended to the log when this run measured it
    /// (`fresh`), counted, and the best so far updated.
    fn finish(&mut self, mut r: Record, fresh: bool) -> Result<(), String> {
        if fresh {
            r.at_s = self.t0.elapsed().as_secs_f64();
            r.shard = self.report.shard.clone();
            log::append(&self.o.log, &r)?;
            self.report.measured += 1;
        } else {
            self.report.resumed += 1;
        }
        if r.status != Status::Ok {
            *self.report.rejected.entry(status_name(r.status)).or_default() += 1;
        } else if let Some(m) = r.median_s
            && self.best.as_ref().is_none_or(|(b, _)| m < *b)
        {
            self.best = Some((m, r.key.clone()));
        }
        self.records.push(r);
        let best = self.best.as_ref().map(|b| b.0);
        self.report.trace.push((self.records.len(), self.t0.elapsed().as_secs_f64(), best));
        Ok(())
    }

    /// Step 1: a batch of new candidates, each evaluated (and so checked for legality); those
    /// the logs know, and those refused, are done at once. Also says whether the strategy ran
    /// out of new candidates.
    fn propose(&mut self) -> Result<(Vec<Candidate>, bool), String> {
        let o = self.o;
        let batch_size = (2 * o.jobs).max(2);
        let mut batch: Vec<Candidate> = Vec::new();
        while batch.len() < batch_size && self.records.len() + batch.len() < o.budget && !self.time_up() {
            let Some(p) = self.search.propose() else { return Ok((batch, true)) };
            let (res, seen, eval_s) = evaluate(o, p.pinned, p.seed);
            self.report.eval_s += eval_s;
            self.search.evaluated(&seen);
            let key = log::key(&seen);
            if let Some((k, n)) = o.shard
                && crate::ir::params::hash(&key) % n as u64 != k as u64
            {
                continue;
            }
            if self.done.contains(&key) || batch.iter().any(|b| b.0 == key) {
                self.repeats += 1;
                if self.repeats > MAX_REPEATS {
                    return Ok((batch, true));
                }
                continue;
            }
            self.repeats = 0;
            self.done.insert(key.clone());
            if let Some(r) = self.logged.remove(&key) {
                self.search.measured(&r.params, r.median_s.filter(|_| r.status == Status::Ok));
                self.finish(r, false)?;
                continue;
            }
            match res {
                Err(e) => {
                    let status = if e.is_refusal() { Status::Illegal } else { Status::Error };
                    let mut r = Record::new(key, seen.clone(), status, Some(e.to_string()));
                    r.eval_s = eval_s;
                    self.search.measured(&seen, None);
                    self.finish(r, true)?;
                }
                Ok(state) if state.kernels.is_empty() => {
                    let r = Record::new(key, seen.clone(), Status::Error, Some(no_kernel(&o.space)));
                    self.search.measured(&seen, None);
                    self.finish(r, true)?;
                }
                Ok(state) => batch.push((key, seen, state, eval_s)),
            }
        }
        Ok((batch, false))
    }

    /// Step 2: the batch's kernels generated and compiled in parallel (`jobs` compilers; the
    /// cache keeps every kernel compiled once).
    fn compile(&self, batch: &[Candidate]) -> Vec<Built> {
        let o = self.o;
        let kernels: Vec<Result<CKernel, RunError>> = batch
            .iter()
            .map(|(_, seen, state, _)| {
                Pipeline::with_state(candidate_program(o, seen), state.clone(), o.run.clone())
                    .generate(&KernelRef::Codegen(0))
            })
            .collect();
        let slots: Vec<Mutex<Option<Compiled>>> = kernels.iter().map(|_| Mutex::new(None)).collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..o.jobs.max(1) {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let Some(k) = kernels.get(i) else { break };
                        if let Ok(k) = k {
                            let r = pipeline::compile_kernel(k, &o.run).map_err(|e| e.to_string());
                            if let Ok(mut slot) = slots[i].lock() {
                                *slot = Some(r);
                            }
                        }
                    }
                });
            }
        });
        kernels.into_iter().zip(slots.into_iter().map(|m| m.into_inner().ok().flatten())).collect()
    }

    /// Step 3: each candidate verified and timed, one at a time ([`Pipeline::run`]); false when
    /// the time budget ran out.
    fn measure(
        &mut self,
        batch: Vec<Candidate>,
        built: Vec<Built>,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<bool, String> {
        for ((key, seen, state, eval_s), (kernel, comp)) in batch.into_iter().zip(built) {
            if self.time_up() {
                return Ok(false);
            }
            self.progress(progress, &format!("measuring {key}"));
            let mut r = Record::new(key, seen.clone(), Status::Ok, None);
            r.eval_s = eval_s;
            if let Err(e) = kernel {
                r.status = classify(&e);
                r.reason = Some(e.to_string());
            } else if let Some(Err(e)) = comp {
                r.status = Status::Compile;
                r.reason = Some(e);
            } else {
                if let Some(Ok((cached, secs))) = comp {
                    r.compile_s = if cached { 0.0 } else { secs };
                    self.report.compile_s += r.compile_s;
                }
                let start = Instant::now();
                self.verify_and_time(&mut r, &seen, state);
                r.run_s = start.elapsed().as_secs_f64();
                self.report.run_s += r.run_s;
            }
            self.search.measured(&r.params, r.median_s.filter(|_| r.status == Status::Ok));
            self.finish(r, true)?;
        }
        Ok(true)
    }

    /// Verifies one candidate with one timed run; times it further unless it is far slower
    /// than the best so far (its one run is then its time).
    fn verify_and_time(&self, r: &mut Record, seen: &[Seen], state: State) {
        let o = self.o;
        // The limit is per run; a worker job runs the kernel several times: the screening job
        // twice (the timed run, then the checked one).
        let per_run = self.limit();
        let screen =
            RunOptions { timing: Some(ONCE), timeout: o.run.timeout.min(2 * per_run), ..o.run.clone() };
        let mut pipe = Pipeline::with_state(candidate_program(o, seen), state, screen);
        match pipe.run(&KernelRef::Codegen(0)) {
            Ok(KernelRun { verified: Some(evidence), report: run, .. }) => {
                r.verification = Some(run.verification.clone());
                r.evidence = serde_json::to_value(&run.evidence).ok();
                let first = run.time;
                // Far slower than the reference (the best so far, or the untransformed build
                // before there is one): its one run is its time.
                let slow = match (first, self.reference_s()) {
                    (Some(t), Some(b)) => t.median_s > SCREEN * b,
                    _ => false,
                };
                // The timed job: a warm-up, the timed repetitions (at least `min_reps`, and
                // `min_time_s`), then the checked run.
                let job = |timing: Timing| {
                    let runs = timing.warmup + timing.min_reps + 1;
                    o.run.timeout.min(per_run * runs + Duration::from_secs_f64(timing.min_time_s.max(0.0)))
                };
                let t = match (slow, o.run.timing) {
                    (false, Some(timing)) => match pipe.set_timeout(job(timing)).time(&evidence, timing) {
                        Ok(t) => Some(t),
                        Err(e) => {
                            r.status = classify(&e);
                            r.reason = Some(e.to_string());
                            None
                        }
                    },
                    _ => first,
                };
                if slow {
                    r.verification = r
                        .verification
                        .take()
                        .map(|v| format!("{v}; timed once: more than {SCREEN}x the reference time"));
                }
                r.median_s = t.map(|t| t.median_s);
                r.min_s = t.map(|t| t.min_s);
                r.spread = t.map(|t| t.spread());
                r.reps = t.map_or(0, |t| t.reps);
                r.gflops = t.map(|t| run.flops as f64 / t.median_s / 1e9);
                if r.median_s.is_none() && r.status == Status::Ok {
                    r.status = Status::Error;
                    r.reason = Some("verified but not timed".into());
                }
            }
            Ok(run) => {
                r.status = Status::Mismatch;
                r.evidence = serde_json::to_value(&run.report.evidence).ok();
                r.reason = Some(match run.report.worst {
                    Some(w) => format!("does not match the reference ({}): {w}", run.report.verification),
                    None => format!("not verified: {}", run.report.verification),
                });
            }
            Err(e) => {
                r.status = classify(&e);
                r.reason = Some(e.to_string());
            }
        }
    }

    /// Step 4: the leaders verified again, then timed in interleaved rounds with the
    /// untransformed build and Polly; the winner written out.
    fn final_round(mut self) -> Result<TuneReport, String> {
        let o = self.o;
        let mut ok: Vec<&Record> =
            self.records.iter().filter(|r| r.status == Status::Ok && r.median_s.is_some()).collect();
        ok.sort_by(|a, b| a.median_s.partial_cmp(&b.median_s).unwrap_or(std::cmp::Ordering::Equal));
        let leaders: Vec<(String, Vec<Seen>)> =
            ok.iter().take(o.leaders.max(1)).map(|r| (r.key.clone(), r.params.clone())).collect();
        let contenders = self.contenders(&leaders);
        let round_timing =
            o.run.timing.map(|t| Timing { warmup: 1, min_reps: t.min_reps.min(3), ..t }).unwrap_or_default();
        let variants: Vec<(&Pipeline, &[Verified])> =
            contenders.iter().map(|(_, (p, v))| (p, std::slice::from_ref(v))).collect();
        let timed = pipeline::time_interleaved(&variants, round_timing, o.rounds);
        for ((name, _), t) in contenders.iter().zip(timed) {
            match t {
                Ok(t) => self.report.final_round.push(Contender {
                    name: name.clone(),
                    median_s: t.stats.median_s,
                    spread: t.stats.spread(),
                    rounds_s: t.rounds_s,
                }),
                Err(e) => self.report.notes.push(format!("{name}: {e}")),
            }
        }
        let report = &self.report;
        let anchor = |n: &str| report.final_round.iter().find(|c| c.name == n).map(|c| c.median_s);
        let (base, polly) = (anchor("untransformed"), anchor("polly"));
        let mut cands: Vec<&Contender> =
            report.final_round.iter().filter(|c| c.name != "untransformed" && c.name != "polly").collect();
        cands.sort_by(|a, b| a.median_s.partial_cmp(&b.median_s).unwrap_or(std::cmp::Ordering::Equal));
        if let Some(w) = cands.first() {
            let lead = cands.get(1).map(|r| (r.median_s - w.median_s) / w.median_s);
            let params = self
                .records
                .iter()
                .find(|r| r.key == w.name)
                .map(|r| r.params.iter().map(|s| (s.name.clone(), s.value.clone())).collect())
                .unwrap_or_default();
            let mut b = Best {
                key: w.name.clone(),
                params,
                median_s: w.median_s,
                spread: w.spread,
                lead,
                lead_exceeds_spread: lead.map(|l| l > w.spread),
                speedup: base.map(|t| t / w.median_s),
                vs_polly: polly.map(|t| t / w.median_s),
                replay: None,
                replay_error: None,
                c: None,
            };
            if let Some((_, (pipe, _))) = contenders.iter().find(|(n, _)| *n == w.name) {
                write_best(o, pipe, &mut b, &self.report)?;
            }
            self.report.best = Some(b);
        }
        let mut report = self.report;
        report.wall_s = self.t0.elapsed().as_secs_f64();
        std::fs::create_dir_all(&o.out).map_err(|e| format!("cannot create {}: {e}", o.out.display()))?;
        let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(o.out.join("report.json"), json)
            .map_err(|e| format!("cannot write the report: {e}"))?;
        if let Err(e) = chart::svg(&report, &o.out.join("tuning.svg")) {
            report.notes.push(format!("cannot draw the chart: {e}"));
        }
        Ok(report)
    }

    /// The contenders of the final round, each evaluated once and verified once (its pipeline
    /// then times it): the leaders, the untransformed build, and Polly where installed.
    fn contenders(&mut self, leaders: &[(String, Vec<Seen>)]) -> Vec<(String, (Pipeline, Verified))> {
        let o = self.o;
        let notes = &mut self.report.notes;
        let mut out = Vec::new();
        for (key, params) in leaders {
            match verified(candidate_program(o, params), o.run.clone()) {
                Ok(p) => out.push((key.clone(), p)),
                Err(e) => notes.push(format!("leader {key}: {e}")),
            }
        }
        if out.is_empty() {
            return out;
        }
        // Verified before the search (its failure is noted then).
        if let Some((p, v, _)) = self.baseline.take() {
            out.push(("untransformed".into(), (p, v)));
        }
        if o.anchors {
            match crate::runtime::compiler::polly() {
                Ok(cc) => {
                    let popts = RunOptions {
                        compiler: Some(cc),
                        flags: crate::runtime::compiler::polly_flags(),
                        ..o.run.clone()
                    };
                    match verified(untransformed_program(o), popts) {
                        Ok(p) => out.push(("polly".into(), p)),
                        Err(e) => notes.push(format!("polly: {e}")),
                    }
                }
                Err(why) => notes.push(format!(
                    "LLVM Polly not available ({why}); install it with `{}`",
                    crate::runtime::compiler::POLLY_INSTALL
                )),
            }
        }
        out
    }
}

/// Writes the winner's C and its path as a replayable `.teml` script into `o.out`.
fn write_best(o: &TuneOptions, pipe: &Pipeline, b: &mut Best, report: &TuneReport) -> Result<(), String> {
    std::fs::create_dir_all(&o.out).map_err(|e| format!("cannot create {}: {e}", o.out.display()))?;
    let c = pipe.generate(&KernelRef::Codegen(0)).map_err(|e| e.to_string())?;
    let c_path = o.out.join("best.c");
    std::fs::write(&c_path, &c.source).map_err(|e| format!("cannot write {}: {e}", c_path.display()))?;
    b.c = Some(c_path);
    // The sizes, and the choices the search did not range over (every candidate took them).
    let setting: Vec<String> = o
        .defines
        .iter()
        .map(|(n, v)| format!("-D {n}={v}"))
        .chain(o.fixed.iter().map(|(n, v)| format!("--param {n}={v}")))
        .collect();
    let setting = if setting.is_empty() { String::new() } else { format!(", {}", setting.join(" ")) };
    let header = format!(
        "# Tuned by `teml tune {}` ({} search, seed {}, {} candidates, {} threads{}): {}.\n\
         # Median {:.3} ms over {} interleaved rounds (spread {:.0}%){}{}.\n",
        o.space.display(),
        o.strategy,
        o.seed,
        report.candidates,
        o.run.threads.map_or("default".into(), |t| t.to_string()),
        setting,
        b.key,
        b.median_s * 1e3,
        o.rounds.max(1),
        b.spread * 100.0,
        b.speedup.map_or(String::new(), |s| format!("; {s:.2}x the untransformed build")),
        b.vs_polly.map_or(String::new(), |s| format!(", {s:.2}x LLVM Polly")),
    );
    match replay(&o.space, pipe.state(), &header) {
        Ok(text) => {
            let p = o.out.join("best.teml");
            std::fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
            b.replay = Some(p);
        }
        Err(e) => b.replay_error = Some(e),
    }
    Ok(())
}

/// The replayable script of a candidate: the space's `.teml` program without its `codegen`
/// statements, then the path that made the kernel's nests (their history), then `codegen`.
pub fn replay(space: &Path, state: &State, header: &str) -> Result<String, String> {
    let src = std::fs::read_to_string(space).map_err(|e| format!("cannot read {}: {e}", space.display()))?;
    let program = match space.extension().and_then(|e| e.to_str()) {
        Some("rhai") => pipeline::program_of(space, &src)?.ok_or_else(|| {
            format!(
                "{} names no `{} PATH` (.teml) for its tensors: replay the best path with `teml run {} --param NAME=VALUE ...`",
                space.display(),
                pipeline::PROGRAM_DIRECTIVE,
                space.display()
            )
        })?,
        _ => space.to_path_buf(),
    };
    let text =
        std::fs::read_to_string(&program).map_err(|e| format!("cannot read {}: {e}", program.display()))?;
    let req = state.kernels.first().ok_or_else(|| no_kernel(space))?;
    // The program's own names stay as they are; the path's names avoid them.
    let consts = State { consts: state.consts.clone(), ..State::new() };
    let own = pipeline::eval_file(&program, &consts).map_err(|e| e.to_string())?;
    let taken: BTreeSet<Name> = own.vars.keys().chain(own.consts.keys()).cloned().collect();
    let mut w = Writer::new(&taken);
    let mut names = Vec::new();
    for (name, n) in req.names.iter().zip(&req.nests) {
        names.push(w.name_as(&n.history, name).ok_or_else(|| {
            "the best kernel's nests were not all made by builtins from a build: no history to replay"
                .to_string()
        })?);
    }
    let mut out = String::from(header);
    out.push_str(&format!(
        "# Kernel: {} (its codegen statements left out). Replay: teml run <this file> --time\n\n",
        normalize(&program).display()
    ));
    for line in text.lines() {
        if line.trim_start().starts_with("codegen(") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.push_str("\n# The tuned path\n");
    for l in &w.lines {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str(&format!("codegen({})\n", names.join(", ")));
    Ok(out)
}

/// The report in words: the search's cost, the final round, the winner and where it went.
pub fn summary(r: &TuneReport) -> String {
    let mut s = format!(
        "{}: {} search (seed {}{}): {} candidates ({} measured, {} from the log), {} rejected{} in {:.1} s \
         (evaluating {:.1} s, compiling {:.1} s, verifying and timing {:.1} s){}\n",
        r.space,
        r.strategy,
        r.seed,
        r.shard.as_ref().map_or(String::new(), |s| format!(", shard {s}")),
        r.candidates,
        r.measured,
        r.resumed,
        r.rejected.values().sum::<usize>(),
        if r.rejected.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                r.rejected.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", ")
            )
        },
        r.wall_s,
        r.eval_s,
        r.compile_s,
        r.run_s,
        if r.exhausted { "; the space is exhausted" } else { "" }
    );
    if let Some(b) = r.baseline_s {
        s.push_str(&format!(
            "untransformed build: {:.3} ms (one run, before the first candidate); a candidate's run may take \
             {LIMIT_FACTOR}x that or the best so far (at least {LIMIT_FLOOR_S} s)\n",
            b * 1e3
        ));
    }
    if !r.final_round.is_empty() {
        s.push_str("final round (interleaved):\n");
        for c in &r.final_round {
            s.push_str(&format!(
                "  {:>10.3} ms  spread {:>4.0}%  {}\n",
                c.median_s * 1e3,
                c.spread * 100.0,
                c.name
            ));
        }
    }
    match &r.best {
        Some(b) => {
            s.push_str(&format!("best: {} at {:.3} ms", b.key, b.median_s * 1e3));
            if let Some(x) = b.speedup {
                s.push_str(&format!(", {x:.2}x the untransformed build"));
            }
            if let Some(x) = b.vs_polly {
                s.push_str(&format!(", {x:.2}x LLVM Polly"));
            }
            match (b.lead, b.lead_exceeds_spread) {
                (Some(l), Some(true)) => {
                    s.push_str(&format!("; leads the runner-up by {:.0}%, more than its spread", l * 100.0))
                }
                (Some(l), _) => s.push_str(&format!(
                    "; leads the runner-up by {:.0}%, within its spread of {:.0}% (a tie on this machine)",
                    l * 100.0,
                    b.spread * 100.0
                )),
                _ => {}
            }
            s.push('\n');
            match (&b.replay, &b.replay_error) {
                (Some(p), _) => s.push_str(&format!("replay: teml run {} --time\n", p.display())),
                (None, Some(e)) => s.push_str(&format!("no replay script: {e}\n")),
                _ => {}
            }
            if let Some(c) = &b.c {
                s.push_str(&format!("C: {}\n", c.display()));
            }
        }
        None => s.push_str("no candidate verified\n"),
    }
    for n in &r.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    s
}
