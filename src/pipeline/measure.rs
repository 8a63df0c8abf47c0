//! Measuring verified kernels: side by side in interleaved rounds ([`time_interleaved`], the
//! one way `teml bench` and `teml tune` compare variants), and `time(l)` inside scripts
//! ([`script_env`]).

use super::options::{RunError, RunOptions};
use super::program::Program;
use super::run::{KernelRef, Pipeline, Verified};
use crate::ir::{KernelRequest, Name, Nest, State};
use crate::runtime::{TimeStats, Timing};
use crate::script::Env;
use std::collections::BTreeMap;

/// A variant timed in interleaved rounds: each round's time (the sum of its kernels' medians
/// in that round) and their statistics (median and spread over the rounds).
#[derive(Clone, Debug, PartialEq)]
pub struct Rounds {
    /// Each round's time, seconds, in order.
    pub rounds_s: Vec<f64>,
    /// Their statistics.
    pub stats: TimeStats,
}

/// Times verified variants in `rounds` interleaved rounds (the one way `teml bench` and `teml
/// tune` compare variants on a shared, noisy machine): each round times every variant once, all
/// its kernels in order, each with `per_round`. A variant is its pipeline and the evidence that
/// each of its kernels verified. A variant whose timing fails is dropped at its first failure,
/// with the error; the others go on.
pub fn time_interleaved(
    variants: &[(&Pipeline, &[Verified])],
    per_round: Timing,
    rounds: usize,
) -> Vec<Result<Rounds, RunError>> {
    let mut times: Vec<Result<Vec<f64>, RunError>> = variants.iter().map(|_| Ok(Vec::new())).collect();
    for _ in 0..rounds.max(1) {
        for ((pipe, kernels), slot) in variants.iter().zip(times.iter_mut()) {
            let Ok(ts) = slot else { continue };
            match kernels.iter().try_fold(0.0, |acc, v| Ok(acc + pipe.time(v, per_round)?.median_s)) {
                Ok(x) => ts.push(x),
                Err(e) => *slot = Err(e),
            }
        }
    }
    times
        .into_iter()
        .map(|t| t.map(|rounds_s| Rounds { stats: TimeStats::from(rounds_s.as_slice()), rounds_s }))
        .collect()
}

/// `time(l)` in scripts: the nests compiled, verified and timed as one kernel, as a JSON
/// object. A kernel inside a running script cannot be evaluated again at a reduced size, so its
/// reference must fit `opts.max_reference_instances` (else the object carries the error).
pub fn measure(state: &State, nests: &[(Name, Nest)], opts: &RunOptions) -> serde_json::Value {
    let req = KernelRequest {
        names: nests.iter().map(|(n, _)| n.clone()).collect(),
        nests: nests.iter().map(|(_, x)| x.clone()).collect(),
        at: None,
        label: None,
    };
    let st = State { kernels: vec![req], ..state.clone() };
    let program = Program::new("<time(l)>", BTreeMap::new(), |_| {
        Err("time(l): a kernel measured inside a script is verified at full size only; give smaller -D constants or a larger --max-reference".into())
    });
    let opts = RunOptions { timing: Some(opts.timing.unwrap_or_default()), ..opts.clone() };
    // How it was measured, whatever the outcome.
    let (threads, cflags) = (opts.threads, opts.flags.opt.join(" "));
    let pipe = Pipeline::with_state(program, st, opts);
    // A kernel that failed verification has no time (`check_at_size` drops it): `()` in the script.
    match pipe.run(&KernelRef::Codegen(0)) {
        Ok(run) => {
            let r = &run.report;
            serde_json::json!({
                "verified": r.verified,
                "verification": r.verification,
                "evidence": serde_json::to_value(&r.evidence).unwrap_or_default(),
                "median_s": r.time.map(|t| t.median_s),
                "min_s": r.time.map(|t| t.min_s),
                "spread": r.time.map(|t| t.spread()),
                "reps": r.time.map_or(0, |t| t.reps),
                "gflops": r.gflops,
                "error": if r.verified { None } else { r.worst.clone() },
                "threads": threads,
                "cflags": cflags,
            })
        }
        Err(e) => serde_json::json!({
            "verified": false, "median_s": null, "min_s": null, "spread": null, "reps": 0,
            "gflops": null, "verification": null, "error": e.to_string(),
            "threads": threads, "cflags": cflags,
        }),
    }
}

/// The environment scripts run in: `time(l)` measures with the options `opts` holds when it
/// is called (so the REPL's `:threads` and `:cflags` apply to it), timing with their timing or
/// the default one; `print` goes to standard error with `print_to_stderr`.
pub fn script_env(opts: std::sync::Arc<std::sync::RwLock<RunOptions>>, print_to_stderr: bool) -> Env {
    let measure = move |s: &State, n: &[(Name, Nest)]| {
        let o = opts.read().map(|o| o.clone()).unwrap_or_else(|p| p.into_inner().clone());
        measure(s, n, &o)
    };
    Env { measure: Some(std::sync::Arc::new(measure)), print_to_stderr }
}

/// [`script_env`] with fixed options (`teml run`, `teml tune`).
pub fn script_env_with(opts: RunOptions, print_to_stderr: bool) -> Env {
    script_env(std::sync::Arc::new(std::sync::RwLock::new(opts)), print_to_stderr)
}
