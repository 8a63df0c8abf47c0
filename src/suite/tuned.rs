//! Tuned variants: a kernel's space searched again for this machine (`--tune`), locally or
//! as a Slurm job array, and the folder its best path is read from.

use super::*;

/// The search that re-tunes kernel `k` at `defines` for at most `secs` seconds into `out`:
/// the kernel's space in `scripts/tune/` where the paper suite has one, else the space the
/// rules generate, with the learned model.
pub(super) fn retune_options(
    o: &BenchOptions,
    k: &str,
    base: &Path,
    defines: &BTreeMap<Name, i64>,
    secs: f64,
    out: &Path,
) -> crate::tuner::TuneOptions {
    let space = o.root.join("scripts/tune").join(format!("{k}.rhai"));
    let space = if o.suite == Suite::Paper && space.exists() { space } else { base.to_path_buf() };
    let cores = crate::runtime::machine::Machine::host().cores;
    crate::tuner::TuneOptions {
        space,
        defines: defines.clone(),
        roles: Default::default(),
        fixed: BTreeMap::new(),
        strategy: crate::tuner::strategy::Strategy::Model,
        seed: 1,
        budget: 10_000,
        time_budget: Some(std::time::Duration::from_secs_f64(secs.max(1.0))),
        shard: None,
        log: out.join("log.jsonl"),
        merge: Vec::new(),
        out: out.to_path_buf(),
        jobs: cores,
        leaders: 3,
        rounds: 3,
        anchors: false,
        unchecked: false,
        json: true,
        run: RunOptions {
            threads: Some(o.threads),
            timing: Some(Timing { warmup: 1, min_time_s: 0.1, min_reps: 3, max_reps: 50 }),
            time_untransformed: false,
            ..o.run.clone()
        },
        db: o.db.clone(),
        generated: false,
        measure_only: false,
        collect: None,
        db_append: None,
    }
}

/// Runs a re-tune: the winner's path, or why not.
pub(super) fn retune(t: &crate::tuner::TuneOptions) -> Result<PathBuf, String> {
    let r = crate::tuner::tune(t, &mut |_| {})?;
    r.best.and_then(|b| b.replay).ok_or_else(|| "the search found no verified winner".to_string())
}

/// A kernel's folder of a re-tune on Slurm (`teml bench --tune --slurm`).
pub fn tuned_dir(dir: &Path, k: &str) -> PathBuf {
    dir.join("kernels").join(k)
}

/// `teml bench --tune --slurm`: one array task per kernel re-tuning it (for `o.tune` seconds,
/// in its own folder under `dir`, its tuning-database records in its own file); the merge
/// job's command (`bench_args`, then `--tuned-from DIR`) runs the bench on one node with the
/// winners in the tuned row.
pub fn slurm_job(
    o: &BenchOptions,
    dir: &Path,
    bench_args: Vec<String>,
    options: &[String],
) -> Result<crate::cluster::Job, String> {
    let secs = o.tune.ok_or("--slurm: expected --tune (the array re-tunes the kernels)")?;
    let dir = crate::tuner::slurm::absolute(dir);
    let root = crate::tuner::slurm::absolute(&o.root);
    let o = BenchOptions { root, db: o.db.as_deref().map(crate::tuner::slurm::absolute), ..o.clone() };
    let (mut tasks, mut files) = (Vec::new(), Vec::new());
    let mut names = Vec::new();
    for k in selected(&o) {
        let (base, defines) = setup(&o, k);
        let out = tuned_dir(&dir, k);
        let t = crate::tuner::TuneOptions {
            jobs: o.threads,
            db_append: o.db.as_ref().map(|_| out.join("tuning.jsonl")),
            json: false,
            ..retune_options(&o, k, &base, &defines, secs, &out)
        };
        let (file, args) = crate::tuner::slurm::job_task(
            &dir.join("slurm"),
            &format!("task-{}", tasks.len()),
            crate::tuner::slurm::TuneJob::of(&t),
        )?;
        files.push(file);
        tasks.push(args);
        names.push(k);
    }
    let mut merge = bench_args;
    merge.extend([
        "--root".into(),
        o.root.display().to_string(),
        "--tuned-from".into(),
        dir.display().to_string(),
    ]);
    Ok(crate::cluster::Job {
        name: format!("teml-bench-{}", o.suite.name()),
        what: format!(
            "teml bench --tune on Slurm: one array task per kernel ({}), each re-tuning it for {secs:.0} s, then the bench on one node",
            names.join(", ")
        ),
        dir: dir.join("slurm"),
        chdir: crate::tuner::slurm::absolute(Path::new(".")),
        teml: std::env::current_exe().map_err(|e| format!("cannot find the teml binary: {e}"))?,
        tasks,
        merge,
        files,
        cpus: o.threads,
        options: options.to_vec(),
    })
}
