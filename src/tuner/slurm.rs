//! `teml tune --slurm N`: a search as a Slurm array of N shards and a merge job.
//!
//! Layout under the search's `--out` folder (on a filesystem the nodes share):
//!
//! - `slurm/array.sbatch`, `slurm/merge.sbatch`: the jobs; `slurm/job.json`: their ids;
//!   `slurm/task-K.json`, `slurm/merge.json`: each command's options ([`JobFile`], run by
//!   `teml job FILE`), written by the submitting command with serde, never re-typed as flags;
//!   `slurm/task-K.out`, `slurm/merge.out`: what Slurm caught of their output.
//! - `shards/K/`: shard K's own log (`log.jsonl`), report (`report.json`, written when the shard
//!   ends) and tuning-database records (`tuning.jsonl`). Each task writes only its own folder:
//!   nothing is written concurrently to one file.
//! - `log.jsonl`, `best.teml`, `best.c`, `report.json`, `tuning.svg`: the merge job's (`teml
//!   tune --collect N`): every shard's log read (a last line cut short by a killed task is
//!   skipped with a note), a shard that left no log or no report named by number, the leaders
//!   verified again and re-measured interleaved on the merging node, the winner written, and
//!   the shards' database records merged into the tuning database.

use super::TuneOptions;
use super::db;
use super::log::Record;
use std::path::{Path, PathBuf};

/// What `teml job FILE` runs: what the submitting command wrote, as JSON
/// (`{"tune": {"options": {...}, "export": ...}}`: [`TuneOptions`] field by field).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum JobFile {
    /// A search (a shard of one, or the merge of its shards).
    Tune(Box<TuneJob>),
}

/// A search as a job runs it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuneJob {
    /// Its options.
    pub options: TuneOptions,
    /// Where the winner is exported (`teml tune --export DIR`).
    #[serde(default)]
    pub export: Option<PathBuf>,
    /// The exported function's name (`--export-name`).
    #[serde(default)]
    pub export_name: Option<String>,
}

impl TuneJob {
    /// A search that exports nothing.
    pub fn of(o: &TuneOptions) -> TuneJob {
        TuneJob { options: o.clone(), export: None, export_name: None }
    }
}

/// The command of a job that runs `job`: its options file `dir/name.json` (path and text) and
/// the teml arguments that run it.
pub fn job_task(dir: &Path, name: &str, job: TuneJob) -> Result<((PathBuf, String), Vec<String>), String> {
    let path = dir.join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(&JobFile::Tune(Box::new(job)))
        .map_err(|e| format!("cannot write the options of {}: {e}", path.display()))?;
    let args = vec!["job".to_string(), path.display().to_string()];
    Ok(((path, text + "\n"), args))
}

/// The search of the job file at `path`; a malformed one is refused at its line and column.
pub fn read_job(path: &Path) -> Result<TuneJob, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    match serde_json::from_str::<JobFile>(&text) {
        Ok(JobFile::Tune(o)) => Ok(*o),
        Err(e) => Err(format!(
            "{}:{}:{}: expected the options `teml tune --slurm` writes (`{{\"tune\": {{...}}}}`), found {e}",
            path.display(),
            e.line(),
            e.column()
        )),
    }
}

/// Shard `k`'s folder.
pub fn shard_dir(out: &Path, k: usize) -> PathBuf {
    out.join("shards").join(k.to_string())
}

/// The folder of the scripts.
pub fn slurm_dir(out: &Path) -> PathBuf {
    out.join("slurm")
}

/// An absolute path (relative ones are taken from the current folder), so that the commands
/// run the same on any node.
pub fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The jobs of a search of `o` (already [`super::prepare`]d) in `n` shards: shard K measures
/// the candidates whose key hashes to K (a share `budget / n` of the budget), logs them in its
/// own folder and stops; the merge job collects them.
/// The merge job exports the winner to `export` (made absolute), named `export_name`.
pub fn plan(
    o: &TuneOptions,
    n: usize,
    options: &[String],
    export: Option<&Path>,
    export_name: Option<String>,
) -> Result<crate::cluster::Job, String> {
    if n == 0 {
        return Err("--slurm: expected at least 1 array task, found 0".into());
    }
    if o.shard.is_some() || o.collect.is_some() || o.measure_only {
        return Err("--slurm: expected a whole search, found --shard, --collect or --measure-only (the scripts add them)".into());
    }
    let out = absolute(&o.out);
    let base = TuneOptions {
        space: absolute(&o.space),
        out: out.clone(),
        merge: o.merge.iter().map(|p| absolute(p)).collect(),
        db: o.db.as_deref().map(absolute),
        run: crate::pipeline::RunOptions {
            compiler: o.run.compiler.as_deref().map(absolute),
            ..o.run.clone()
        },
        json: false,
        ..o.clone()
    };
    let threads = o.run.threads.unwrap_or(1).max(1);
    let scripts = slurm_dir(&out);
    let (mut files, mut tasks) = (Vec::new(), Vec::new());
    for k in 0..n {
        let dir = shard_dir(&out, k);
        let shard = TuneOptions {
            shard: Some((k, n)),
            budget: o.budget.div_ceil(n),
            log: dir.join("log.jsonl"),
            db_append: base.db.as_ref().map(|_| dir.join("tuning.jsonl")),
            out: dir,
            jobs: threads,
            measure_only: true,
            ..base.clone()
        };
        let (file, args) = job_task(&scripts, &format!("task-{k}"), TuneJob::of(&shard))?;
        files.push(file);
        tasks.push(args);
    }
    let collect = TuneOptions { collect: Some(n), log: out.join("log.jsonl"), jobs: threads, ..base.clone() };
    let export = export.map(absolute);
    let (file, merge) = job_task(&scripts, "merge", TuneJob { options: collect, export, export_name })?;
    files.push(file);
    let stem = o.space.file_stem().and_then(|s| s.to_str()).unwrap_or("space").to_string();
    Ok(crate::cluster::Job {
        name: format!("teml-tune-{stem}"),
        what: format!(
            "teml tune {} on Slurm: {n} array tasks, one shard of the search each, then the merge",
            o.space.display()
        ),
        dir: slurm_dir(&out),
        chdir: absolute(Path::new(".")),
        teml: std::env::current_exe().map_err(|e| format!("cannot find the teml binary: {e}"))?,
        tasks,
        merge,
        files,
        cpus: threads,
        options: options.to_vec(),
    })
}

/// The logs of `n` shards under `o.out`, and notes on the shards that left no log (never ran)
/// or no report (stopped before their end); the shards' tuning-database records are merged
/// into `o.db`.
pub fn collect(o: &TuneOptions, n: usize) -> (Vec<PathBuf>, Vec<String>) {
    let mut notes = Vec::new();
    let mut logs = Vec::new();
    let rerun = format!("sbatch --array=K {}", slurm_dir(&o.out).join("array.sbatch").display());
    let (mut missing, mut stopped) = (Vec::new(), Vec::new());
    for k in 0..n {
        let dir = shard_dir(&o.out, k);
        let log = dir.join("log.jsonl");
        if !log.exists() {
            missing.push(k.to_string());
        } else if !dir.join("report.json").exists() {
            stopped.push(k.to_string());
        }
        logs.push(log);
    }
    if !missing.is_empty() {
        notes.push(format!(
            "shard{} {} of {n} left no log (never ran, or stopped before its first candidate): {} not searched; rerun with `{rerun}` and collect again",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            if missing.len() == 1 { "its share was" } else { "their shares were" },
        ));
    }
    if !stopped.is_empty() {
        notes.push(format!(
            "shard{} {} of {n} did not finish (no report: cancelled, preempted, failed or out of time): what {} logged is merged; rerun with `{rerun}` to resume {}",
            if stopped.len() == 1 { "" } else { "s" },
            stopped.join(", "),
            if stopped.len() == 1 { "it" } else { "they" },
            if stopped.len() == 1 { "it" } else { "them" },
        ));
    }
    if let Some(into) = &o.db {
        let from: Vec<PathBuf> = (0..n).map(|k| shard_dir(&o.out, k).join("tuning.jsonl")).collect();
        notes.extend(db::merge(into, &from));
    }
    (logs, notes)
}

/// Writes `records` as the log at `path` (replacing it): the merged log of the shards, which a
/// later run of the same search resumes from.
pub fn write_log(path: &Path, records: &[Record]) -> Result<(), String> {
    super::log::create_parent(path)?;
    let mut text = String::new();
    for r in records {
        text.push_str(&serde_json::to_string(r).map_err(|e| e.to_string())?);
        text.push('\n');
    }
    std::fs::write(path, text).map_err(|e| format!("cannot write the log {}: {e}", path.display()))
}
