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
/// winning; a line that is not a record is an error naming the file and line, except a last
/// line cut short (a writer killed mid-line: no newline at its end), which is skipped with a
/// note in the second value.
pub fn read(paths: &[&Path]) -> Result<(BTreeMap<String, Record>, Vec<String>), String> {
    let mut out = BTreeMap::new();
    let mut notes = Vec::new();
    for p in paths {
        let text = match std::fs::read_to_string(p) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot read the log {}: {e}", p.display())),
        };
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let r: Record = match serde_json::from_str(line) {
                Ok(r) => r,
                Err(_) if n + 1 == lines.len() && !text.ends_with('\n') => {
                    notes.push(format!(
                        "{}:{}: a last line cut short (its writer was stopped mid-line): skipped",
                        p.display(),
                        n + 1
                    ));
                    continue;
                }
                Err(e) => {
                    return Err(format!(
                        "{}:{}:1: expected a tuning record (one JSON object a line), found: {e}",
                        p.display(),
                        n + 1
                    ));
                }
            };
            out.entry(r.key.clone()).or_insert(r);
        }
    }
    Ok((out, notes))
}

/// Creates the folder `path` goes in, if it does not exist.
pub fn create_parent(path: &Path) -> Result<(), String> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
        }
        None => Ok(()),
    }
}

/// Creates the log at `path` (with its folders) if it does not exist.
pub fn touch(path: &Path) -> Result<(), String> {
    create_parent(path)?;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(|_| ())
        .map_err(|e| format!("cannot create the log {}: {e}", path.display()))
}

/// Appends a record to the log at `path` (created with its folders), flushed at once. A last
/// line cut short by a run that was killed mid-line (this log's one writer) is dropped first,
/// so that a resumed log stays readable.
pub fn append(path: &Path, r: &Record) -> Result<(), String> {
    let line = serde_json::to_string(r).map_err(|e| e.to_string())?;
    append_line(path, &line, true).map_err(|e| format!("cannot write the log {}: {e}", path.display()))
}

/// Appends `line` and a newline to the file at `path` (created with its folders) in one write,
/// so that concurrent writers interleave whole lines. A last line cut short by a killed writer
/// is dropped (`drop_cut`: the file has one writer) or ended (a shared file, whose readers skip
/// a line that does not parse).
pub fn append_line(path: &Path, line: &str, drop_cut: bool) -> Result<(), String> {
    use std::io::{Read, Seek, SeekFrom};
    create_parent(path)?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)
        .map_err(|e| e.to_string())?;
    let mut text = String::with_capacity(line.len() + 2);
    let len = f.metadata().map_err(|e| e.to_string())?.len();
    if len > 0 {
        let mut last = [0u8; 1];
        f.seek(SeekFrom::Start(len - 1)).and_then(|_| f.read_exact(&mut last)).map_err(|e| e.to_string())?;
        if last[0] != b'\n' {
            if drop_cut {
                let mut all = Vec::new();
                f.seek(SeekFrom::Start(0))
                    .and_then(|_| f.read_to_end(&mut all))
                    .map_err(|e| e.to_string())?;
                let keep = all.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
                f.set_len(keep as u64).map_err(|e| e.to_string())?;
            } else {
                text.push('\n');
            }
        }
    }
    text.push_str(line);
    text.push('\n');
    f.write_all(text.as_bytes()).and_then(|()| f.flush()).map_err(|e| e.to_string())
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
        let (logs, notes) = read(&[&p, &dir.path().join("missing.jsonl")]).unwrap();
        assert!(notes.is_empty());
        assert_eq!(logs.len(), 1);
        assert_eq!(logs["v=32"].median_s, Some(0.5));
        // A writer killed mid-line: the cut line is skipped with a note, and dropped by the next
        // append (the resumed log reads without a note).
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, format!("{text}{{\"key\": \"v=6")).unwrap();
        let (logs, notes) = read(&[&p]).unwrap();
        assert_eq!((logs.len(), notes.len()), (1, 1), "{notes:?}");
        assert!(notes[0].contains("log.jsonl:3: a last line cut short"), "{notes:?}");
        let seen = vec![Seen { name: "v".into(), index: 0, choices: 2, value: "16".into() }];
        append(&p, &Record::new(key(&seen), seen, Status::Illegal, None)).unwrap();
        let (logs, notes) = read(&[&p]).unwrap();
        assert_eq!((logs.len(), notes.len()), (2, 0), "{notes:?}");
        assert_eq!(std::fs::read_to_string(&p).unwrap().lines().count(), 3);
        std::fs::write(&p, "{not json\n").unwrap();
        assert!(read(&[&p]).unwrap_err().contains("log.jsonl:1:1: expected a tuning record"));
    }
}
