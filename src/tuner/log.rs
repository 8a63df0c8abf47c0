//! The tuning log: one JSON object per line per candidate, appended as soon as the candidate
//! is done, so that a stopped search loses nothing and a second run resumes without measuring
//! again. Logs of shards (`--shard K/N`) merge by reading them together.

use crate::ir::Seen;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// What became of a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Verified and timed.
    Ok,
    /// A transformation was refused by the legality check (before any compile).
    Illegal,
    /// The program failed otherwise (a bad argument, no kernel).
    Error,
    /// The C compiler rejected the kernel.
    Compile,
    /// The kernel crashed.
    Crash,
    /// The kernel ran past the time limit.
    Timeout,
    /// The kernel's outputs differ from the reference.
    Mismatch,
}

/// One candidate.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    /// The choices, `name=value` joined by `; `: the candidate's identity.
    pub key: String,
    /// Every parameter the candidate's evaluation asked for.
    pub params: Vec<Seen>,
    /// What became of it.
    pub status: Status,
    /// Why it was rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Median of the timed repetitions, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_s: Option<f64>,
    /// Fastest repetition, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_s: Option<f64>,
    /// (max - min) / median of the repetitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<f64>,
    /// Timed repetitions.
    #[serde(default)]
    pub reps: usize,
    /// GFLOP/s at the median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gflops: Option<f64>,
    /// How it was verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<String>,
    /// The verification record ([`crate::pipeline::Evidence`]): what checked it, at which size,
    /// and what checked the full-size binary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<serde_json::Value>,
    /// Seconds evaluating the space (transformations and their legality checks).
    #[serde(default)]
    pub eval_s: f64,
    /// Seconds compiling (0 when the kernel was in the cache).
    #[serde(default)]
    pub compile_s: f64,
    /// Seconds verifying and timing.
    #[serde(default)]
    pub run_s: f64,
    /// Seconds since the search started when the candidate was done.
    #[serde(default)]
    pub at_s: f64,
    /// The shard that measured it (`K/N`), if sharded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
}

impl Record {
    /// A candidate with its choices and fate, nothing measured yet.
    pub fn new(key: String, params: Vec<Seen>, status: Status, reason: Option<String>) -> Record {
        Record {
            key,
            params,
            status,
            reason,
            median_s: None,
            min_s: None,
            spread: None,
            reps: 0,
            gflops: None,
            verification: None,
            evidence: None,
            eval_s: 0.0,
            compile_s: 0.0,
            run_s: 0.0,
            at_s: 0.0,
            shard: None,
        }
    }
}

/// The identity of a candidate: its choices.
pub fn key(seen: &[Seen]) -> String {
    seen.iter().map(|s| format!("{}={}", s.name, s.value)).collect::<Vec<_>>().join("; ")
}

/// Reads the records of `paths` (missing files are empty logs), the first record of each key
/// winning; a line that is not a record is an error naming the file and line.
pub fn read(paths: &[&Path]) -> Result<BTreeMap<String, Record>, String> {
    let mut out = BTreeMap::new();
    for p in paths {
        let text = match std::fs::read_to_string(p) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot read the log {}: {e}", p.display())),
        };
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let r: Record = serde_json::from_str(line).map_err(|e| {
                format!(
                    "{}:{}:1: expected a tuning record (one JSON object a line), found: {e}",
                    p.display(),
                    n + 1
                )
            })?;
            out.entry(r.key.clone()).or_insert(r);
        }
    }
    Ok(out)
}

/// Appends a record to the log at `path` (created with its folders), flushed at once.
pub fn append(path: &Path, r: &Record) -> Result<(), String> {
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("cannot open the log {}: {e}", path.display()))?;
    let line = serde_json::to_string(r).map_err(|e| e.to_string())?;
    writeln!(f, "{line}")
        .and_then(|()| f.flush())
        .map_err(|e| format!("cannot write the log {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_the_first_of_a_key_wins() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/log.jsonl");
        let seen = vec![Seen { name: "v".into(), index: 1, choices: 2, value: "32".into() }];
        let mut r = Record::new(key(&seen), seen, Status::Ok, None);
        r.median_s = Some(0.5);
        r.min_s = Some(0.4);
        r.spread = Some(0.1);
        r.reps = 3;
        append(&p, &r).unwrap();
        r.median_s = Some(9.0);
        append(&p, &r).unwrap();
        let logs = read(&[&p, &dir.path().join("missing.jsonl")]).unwrap();
        assert_eq!(logs.len(), 1);
        assert_eq!(logs["v=32"].median_s, Some(0.5));
        std::fs::write(&p, "{not json\n").unwrap();
        assert!(read(&[&p]).unwrap_err().contains("log.jsonl:1:1: expected a tuning record"));
    }
}
