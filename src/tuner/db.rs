//! The tuning database: every verified, timed candidate with its workload (the kernel's
//! statements and extents), the machine (its CPU and the threads), the space and choices that
//! made it, its path and its time. One JSON object per line, appended as candidates finish, so
//! a team shares one file and merges files by concatenating them (`cat a.jsonl b.jsonl`): a
//! line that does not parse (a truncated last line, another version's format) is reported and
//! skipped, never trusted.
//!
//! `teml auto` replays the best record of the same workload on the same machine at once;
//! `teml tune` measures it first, and seeds its search with the records of the same statements
//! at other sizes (their choices, where they are among this size's choices).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The format's version: records of another are reported and ignored.
pub const VERSION: u32 = 1;

/// The `space` of records made by generated spaces (their choices replay in any generated
/// space of the same workload).
pub const GENERATED: &str = "generated";

/// One measured candidate.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    /// [`VERSION`].
    pub version: u32,
    /// The workload: statements and extents.
    pub workload: String,
    /// The statements alone.
    pub statements: String,
    /// The machine and threads ([`machine_key`]).
    pub machine: String,
    /// The machine in words.
    pub host: String,
    /// [`GENERATED`], or the space's file name.
    pub space: String,
    /// The choices, by their text.
    pub params: BTreeMap<String, String>,
    /// The path (the builtin calls that made the kernel's nests).
    pub path: Vec<String>,
    /// Verified median, seconds.
    pub median_s: f64,
    /// Seconds since the epoch when it was measured.
    pub when: u64,
    /// The cost model's features of the candidate ([`super::model::features`]).
    #[serde(default)]
    pub features: Vec<f32>,
    /// The program as written, which beat every point of a generated space's search beyond the
    /// spreads (no choices, no path): `teml auto` then hands back the program itself.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub as_written: bool,
    /// What the time depends on beyond the workload and the machine ([`fingerprint`]): the
    /// space (the rules' output, or a hand-written space), the C compiler and its flags. Empty
    /// in records made before fingerprints: they match none.
    #[serde(default)]
    pub fingerprint: String,
}

/// The database's default file: `$TEML_TUNING_DB`, else `teml/tuning.jsonl` in the user's cache
/// folder.
pub fn default_path() -> PathBuf {
    if let Ok(p) = std::env::var("TEML_TUNING_DB")
        && !p.trim().is_empty()
    {
        return PathBuf::from(p);
    }
    dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join("teml").join("tuning.jsonl")
}

/// The machine a time belongs to: the CPU (architecture, model, flags) and the threads, and
/// the machine the rules planned for where `TEML_MACHINE` pins one (its generated spaces hold
/// other choices than the host's).
pub fn machine_key(threads: usize) -> String {
    let mut cpu = crate::runtime::machine::Machine::host().cpu_key();
    if std::env::var_os(crate::runtime::machine::MACHINE_VAR).is_some()
        && let Ok(m) = crate::runtime::machine::Machine::this()
    {
        cpu.push_str(&format!(" | planned for {}", m.describe()));
    }
    format!("{:016x}/{threads}t", crate::ir::params::hash(&cpu))
}

/// The fingerprint of a record: a hash of the space its choices are points of (its text, the
/// `// program:` line left out: it depends only on where the space was written; a generated
/// space's text is what the rules made of this workload on this machine), the C compiler (its
/// path and version) and its arguments. `teml auto` replays only a record whose fingerprint is
/// this run's: after a change of the rules, the space, the compiler or the flags, a record is
/// ignored with a note (`teml tune` measures it again).
pub fn fingerprint(space: &str, toolchain: &(String, String)) -> String {
    let space: String = space
        .lines()
        .filter(|l| !l.starts_with(crate::pipeline::PROGRAM_DIRECTIVE))
        .flat_map(|l| [l, "\n"])
        .collect();
    let text = format!("{space}\u{0}{}\u{0}{}", toolchain.0, toolchain.1);
    format!("{:016x}", crate::ir::params::hash(&text))
}

/// The records of a file.
#[derive(Clone, Debug, Default)]
pub struct Db {
    /// Its records, in order.
    pub entries: Vec<Entry>,
    /// Lines skipped, and why.
    pub notes: Vec<String>,
}

impl Db {
    /// Reads `path` (an absent file is an empty database); lines that do not parse, or are of
    /// another version, are skipped with a note.
    pub fn open(path: &Path) -> Db {
        let mut db = Db::default();
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return db,
            Err(e) => {
                db.notes.push(format!("tuning database {}: cannot read it ({e}): ignored", path.display()));
                return db;
            }
        };
        let mut bad = Vec::new();
        let mut other = 0;
        for (k, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<serde_json::Value>(line) {
                Ok(v) if v.get("version").and_then(|x| x.as_u64()) != Some(VERSION as u64) => other += 1,
                Ok(v) => match serde_json::from_value::<Entry>(v) {
                    Ok(e) if e.median_s.is_finite() && e.median_s > 0.0 => db.entries.push(e),
                    _ => bad.push(k + 1),
                },
                Err(_) => bad.push(k + 1),
            }
        }
        if !bad.is_empty() {
            let lines: Vec<String> = bad.iter().take(5).map(|l| l.to_string()).collect();
            db.notes.push(format!(
                "tuning database {}: {} line{} that do not parse (line {}{}): skipped",
                path.display(),
                bad.len(),
                if bad.len() == 1 { "" } else { "s" },
                lines.join(", "),
                if bad.len() > 5 { ", ..." } else { "" }
            ));
        }
        if other > 0 {
            db.notes.push(format!(
                "tuning database {}: {other} record{} of another version (not {VERSION}): ignored",
                path.display(),
                if other == 1 { "" } else { "s" }
            ));
        }
        db
    }

    /// The fastest record of `workload` on `machine` from `space`.
    pub fn best(&self, workload: &str, machine: &str, space: &str) -> Option<&Entry> {
        self.entries
            .iter()
            .filter(|e| e.workload == workload && e.machine == machine && e.space == space)
            .min_by(|a, b| a.median_s.total_cmp(&b.median_s))
    }

    /// The fastest record of `workload` on `machine` from `space` made under `fingerprint`, and
    /// how many records of them were made under another (stale: other rules, space, compiler
    /// or flags).
    pub fn best_current(
        &self,
        workload: &str,
        machine: &str,
        space: &str,
        fingerprint: &str,
    ) -> (Option<&Entry>, usize) {
        let of = |e: &&Entry| e.workload == workload && e.machine == machine && e.space == space;
        let stale = self.entries.iter().filter(of).filter(|e| e.fingerprint != fingerprint).count();
        let best = self
            .entries
            .iter()
            .filter(of)
            .filter(|e| e.fingerprint == fingerprint)
            .min_by(|a, b| a.median_s.total_cmp(&b.median_s));
        (best, stale)
    }

    /// Seeds for a search of `workload`: the best record of each other size of the same
    /// statements on `machine` from `space`, fastest (relative to its own size) first; then
    /// the best of this workload itself first of all.
    pub fn seeds(&self, workload: &str, statements: &str, machine: &str, space: &str) -> Vec<&Entry> {
        let mut best: BTreeMap<&str, &Entry> = BTreeMap::new();
        for e in self
            .entries
            .iter()
            // The program as written has no choices to seed a search with.
            .filter(|e| {
                e.statements == statements && e.machine == machine && e.space == space && !e.as_written
            })
        {
            let slot = best.entry(e.workload.as_str()).or_insert(e);
            if e.median_s < slot.median_s {
                *slot = e;
            }
        }
        let mut out: Vec<&Entry> = best.values().copied().collect();
        out.sort_by_key(|e| e.workload != workload);
        out
    }
}

/// Appends a record as one line (one write, so that concurrent writers on one file interleave
/// whole lines; a line cut short by a killed writer is ended first, and skipped by readers).
pub fn append(path: &Path, e: &Entry) -> Result<(), String> {
    let line = serde_json::to_string(e).map_err(|err| err.to_string())?;
    super::log::append_line(path, &line, false)
        .map_err(|err| format!("cannot append to the tuning database {}: {err}", path.display()))
}

/// Merges the records of the files `from` (shards' own files; absent ones are empty) into the
/// database `into`, each record once: a record already in `into` (the same line) is not added
/// again, so collecting twice adds nothing. Returns notes: lines skipped, records added.
pub fn merge(into: &Path, from: &[PathBuf]) -> Vec<String> {
    let target = Db::open(into);
    let mut notes = target.notes;
    let mut known: std::collections::BTreeSet<String> =
        target.entries.iter().filter_map(|e| serde_json::to_string(e).ok()).collect();
    let mut added = 0;
    for f in from {
        let d = Db::open(f);
        notes.extend(d.notes);
        for e in d.entries {
            let Ok(line) = serde_json::to_string(&e) else { continue };
            if known.insert(line) {
                match append(into, &e) {
                    Ok(()) => added += 1,
                    Err(err) => {
                        notes.push(err);
                        return notes;
                    }
                }
            }
        }
    }
    if added > 0 {
        notes.push(format!(
            "tuning database {}: {added} record{} of the shards merged",
            into.display(),
            if added == 1 { "" } else { "s" }
        ));
    }
    notes
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(workload: &str, t: f64) -> Entry {
        Entry {
            version: VERSION,
            workload: workload.into(),
            statements: "C += A * B".into(),
            machine: "m/2t".into(),
            host: "h".into(),
            space: GENERATED.into(),
            params: [("mr".to_string(), "4".to_string())].into_iter().collect(),
            path: vec![],
            median_s: t,
            when: 0,
            features: vec![],
            as_written: false,
            fingerprint: "f1".into(),
        }
    }

    #[test]
    fn a_record_made_under_another_fingerprint_is_never_the_current_best() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("db.jsonl");
        append(&p, &Entry { fingerprint: "old".into(), ..entry("w1", 1.0) }).unwrap();
        append(&p, &entry("w1", 2.0)).unwrap();
        // a record written before fingerprints: none in its line
        let mut line = serde_json::to_value(entry("w1", 0.5)).unwrap();
        line.as_object_mut().unwrap().remove("fingerprint");
        std::fs::write(&p, format!("{}{line}\n", std::fs::read_to_string(&p).unwrap())).unwrap();
        let d = Db::open(&p);
        assert!(d.notes.is_empty(), "{:?}", d.notes);
        let (best, stale) = d.best_current("w1", "m/2t", GENERATED, "f1");
        assert_eq!((best.map(|e| e.median_s), stale), (Some(2.0), 2));
        let (best, stale) = d.best_current("w1", "m/2t", GENERATED, "new");
        assert_eq!((best.map(|e| e.median_s), stale), (None, 3));
        // the fingerprint follows the space's text (not its program line), the compiler, the flags
        let cc = ("gcc 12".to_string(), "-O3 -march=native".to_string());
        let f = fingerprint("// program: a/x.teml\nlet p = l;\n", &cc);
        assert_eq!(f, fingerprint("// program: ../b/x.teml\nlet p = l;\n", &cc));
        assert_ne!(f, fingerprint("// program: a/x.teml\nlet p = tile(l, 8);\n", &cc));
        assert_ne!(f, fingerprint("// program: a/x.teml\nlet p = l;\n", &("clang 16".into(), cc.1.clone())));
        assert_ne!(f, fingerprint("// program: a/x.teml\nlet p = l;\n", &(cc.0.clone(), "-O2".into())));
    }

    #[test]
    fn the_program_as_written_can_be_the_best_record_but_seeds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("db.jsonl");
        append(&p, &entry("w1", 2.0)).unwrap();
        append(&p, &Entry { as_written: true, params: BTreeMap::new(), ..entry("w1", 1.0) }).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        // Only the record that is one says so: older readers see the same lines as before.
        assert_eq!(text.matches("as_written").count(), 1, "{text}");
        let d = Db::open(&p);
        assert!(d.notes.is_empty(), "{:?}", d.notes);
        assert!(d.best("w1", "m/2t", GENERATED).is_some_and(|e| e.as_written && e.median_s == 1.0));
        let seeds = d.seeds("w1", "C += A * B", "m/2t", GENERATED);
        assert_eq!(seeds.len(), 1);
        assert!(!seeds[0].as_written && seeds[0].median_s == 2.0);
    }

    #[test]
    fn corrupt_and_foreign_lines_are_reported_and_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("db.jsonl");
        append(&p, &entry("w1", 2.0)).unwrap();
        append(&p, &entry("w1", 1.0)).unwrap();
        append(&p, &entry("w2", 0.5)).unwrap();
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str("{\"version\": 99, \"x\": 1}\n{\"version\": 1, \"workl");
        std::fs::write(&p, text).unwrap();
        let db = Db::open(&p);
        assert_eq!(db.entries.len(), 3);
        assert_eq!(db.notes.len(), 2, "{:?}", db.notes);
        assert_eq!(db.best("w1", "m/2t", GENERATED).unwrap().median_s, 1.0);
        assert!(db.best("w1", "other/2t", GENERATED).is_none());
        let seeds = db.seeds("w2", "C += A * B", "m/2t", GENERATED);
        assert_eq!(seeds.iter().map(|e| e.workload.as_str()).collect::<Vec<_>>(), ["w2", "w1"]);
    }

    #[test]
    fn shards_merge_each_record_once() {
        let dir = tempfile::tempdir().unwrap();
        let (team, a, b) =
            (dir.path().join("team.jsonl"), dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
        append(&team, &entry("w1", 2.0)).unwrap();
        append(&a, &entry("w1", 2.0)).unwrap();
        append(&a, &entry("w1", 1.0)).unwrap();
        append(&b, &entry("w2", 3.0)).unwrap();
        // A task killed mid-line.
        std::fs::write(&b, format!("{}{{\"version\": 1, \"wor", std::fs::read_to_string(&b).unwrap()))
            .unwrap();
        let notes = merge(&team, &[a.clone(), b.clone(), dir.path().join("never-ran.jsonl")]);
        assert!(notes.iter().any(|n| n.contains("2 records of the shards merged")), "{notes:?}");
        assert!(notes.iter().any(|n| n.contains("b.jsonl: 1 line")), "{notes:?}");
        assert_eq!(Db::open(&team).entries.len(), 3);
        let again = merge(&team, &[a, b]);
        assert!(!again.iter().any(|n| n.contains("merged")), "{again:?}");
        assert_eq!(Db::open(&team).entries.len(), 3);
    }
}
