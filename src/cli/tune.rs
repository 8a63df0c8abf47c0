//! `teml tune` and `teml auto`: their arguments, the tuner's options read from them, and a
//! search submitted to Slurm as a job array.

use super::*;

/// `teml tune`.
#[derive(Args, Debug)]
pub struct TuneArgs {
    /// The space (a `.rhai` script with `param(...)` choices, usually with a
    /// `// program: PATH.teml` line) and its named constants.
    #[command(flatten)]
    pub program: ProgramArgs,
    /// exhaustive, random, evolutionary or model (random points ranked by a cost model learned
    /// as the search goes; docs/tuning.md: at budgets of 20-40 candidates, random search found
    /// better points than the evolutionary one on mttkrp's space).
    #[arg(long, default_value = "random")]
    pub strategy: String,
    /// Seed of the strategy (the search is deterministic given it).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The most candidates (those taken from the log included).
    #[arg(long, default_value_t = 64)]
    pub budget: usize,
    /// The most seconds of searching (the leaders' re-measurement comes after).
    #[arg(long, value_name = "SECS")]
    pub time_budget: Option<f64>,
    /// Measure only the candidates of shard K of N (0 <= K < N), e.g. `--shard 3/16` in a Slurm
    /// job array; merge the logs with --merge.
    #[arg(long, value_name = "K/N", value_parser = parse_shard)]
    pub shard: Option<(usize, usize)>,
    /// The log to append to and resume from (default: OUT/log.jsonl).
    #[arg(long, value_name = "PATH")]
    pub log: Option<PathBuf>,
    /// More logs to resume from (repeatable): other shards' logs.
    #[arg(long, value_name = "PATH")]
    pub merge: Vec<PathBuf>,
    /// Where the best path (best.teml), its C, the chart and the report go (default:
    /// tune-out/<space name>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Also export the winner (best.teml at the tuned sizes) to this directory, as `teml
    /// export` does: a C library with a header and a Python module.
    #[arg(long, value_name = "DIR")]
    pub export: Option<PathBuf>,
    /// With --export: the exported function's name (a C identifier) where the winner has a
    /// single kernel, e.g. `--export-name mm` for a kernel called `p`.
    #[arg(long, value_name = "NAME", requires = "export")]
    pub export_name: Option<String>,
    /// Compilers running at once (default: the cores).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Threads for OpenMP loops (OMP_NUM_THREADS of the kernels; default: the cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Candidates re-measured, interleaved, at the end.
    #[arg(long, default_value_t = 3)]
    pub leaders: usize,
    /// Rounds of that re-measurement.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Minimum timed seconds per candidate.
    #[arg(long, default_value_t = 0.1)]
    pub min_time: f64,
    /// Seconds a candidate's run may take before it is stopped (and logged as a time-out).
    #[arg(long, default_value_t = 30.0)]
    pub timeout: f64,
    /// Seconds a candidate's compile may take before the compiler is stopped (and the candidate
    /// logged as not compiling).
    #[arg(long, default_value_t = 60.0)]
    pub compile_timeout: f64,
    /// Most statement instances the reference interpreter runs per candidate (above it, the
    /// candidate is verified at a reduced size, then sampled at full size).
    #[arg(long, value_name = "N", default_value_t = 2_000_000)]
    pub max_reference: u64,
    /// Do not time LLVM Polly beside the leaders.
    #[arg(long)]
    pub no_anchors: bool,
    /// The C compiler for the candidates (default: the system's `cc`).
    #[arg(long, value_name = "PATH")]
    pub cc: Option<PathBuf>,
    /// C compiler flags replacing the defaults `-O3 -march=native -fopenmp`.
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub cflags: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// The tuning database to seed the search from and record every measured candidate in
    /// (default: $TEML_TUNING_DB, else ~/.cache/teml/tuning.jsonl).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Neither read nor write the tuning database.
    #[arg(long, conflicts_with = "db")]
    pub no_db: bool,
    /// Record measured candidates in this file instead of the database itself (a shard's own
    /// file, which `--collect` merges into the database).
    #[arg(long, value_name = "PATH", conflicts_with = "no_db")]
    pub db_append: Option<PathBuf>,
    /// Run the search on Slurm as an array of N tasks, one shard each (`--cpus-per-task` from
    /// --threads), and a merge job that depends on it (afterany): scripts, logs and results under
    /// --out, which must be on a filesystem the nodes share (docs/tuning.md).
    #[arg(long, value_name = "N", conflicts_with_all = ["shard", "collect", "measure_only"])]
    pub slurm: Option<usize>,
    /// An sbatch option for both jobs (repeatable), e.g. `--slurm-opt=--partition=short`,
    /// `--slurm-opt=--time=1:00:00`, `--slurm-opt=--exclusive`.
    #[arg(long, value_name = "OPT", allow_hyphen_values = true, requires = "slurm")]
    pub slurm_opt: Vec<String>,
    /// With --slurm: write the job scripts, submit nothing.
    #[arg(long, requires = "slurm")]
    pub dry_run: bool,
    /// Measure nothing: collect the logs of the N shards under --out that `--slurm N` laid out
    /// (naming any shard that left no log or did not finish), re-measure the leaders
    /// interleaved on this machine, verify and write the winner (the merge job's command).
    #[arg(long, value_name = "N", conflicts_with = "shard")]
    pub collect: Option<usize>,
    /// Measure and log the candidates, then stop: no re-measurement of the leaders, no winner
    /// (an array task's command; `--collect` declares the winner).
    #[arg(long)]
    pub measure_only: bool,
    /// The space was generated by the rules (set by --slurm's scripts).
    #[arg(long, hide = true)]
    pub generated: bool,
}

/// `teml auto`.
#[derive(Args, Debug)]
pub struct AutoArgs {
    /// The program (a `.teml` file) and its named constants.
    #[command(flatten)]
    pub program: ProgramArgs,
    /// Where space.rhai and auto.teml go (default: auto-out/<program name>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Only write the generated space to PATH (a `.rhai` script to read, edit and tune).
    #[arg(long, value_name = "PATH")]
    pub emit_space: Option<PathBuf>,
    /// Write the path, but compile and run nothing.
    #[arg(long)]
    pub no_run: bool,
    /// Threads for OpenMP loops (default: the cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// The tuning database (default: $TEML_TUNING_DB, else ~/.cache/teml/tuning.jsonl).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Do not read the tuning database (the model's pick even where a record exists).
    #[arg(long, conflicts_with = "db")]
    pub no_db: bool,
    /// Print the choice as JSON (and the run's report as `teml run --json` does).
    #[arg(long)]
    pub json: bool,
    /// Export the path's kernel to this directory once it has run verified, at the sizes it was
    /// chosen at (a C library and a Python module: docs/export.md).
    #[arg(long, value_name = "DIR")]
    pub export: Option<PathBuf>,
    /// The exported function's name (a C identifier), e.g. `--export-name mm`.
    #[arg(long, value_name = "NAME", requires = "export")]
    pub export_name: Option<String>,
}

/// `teml auto`.
pub fn auto(a: &AutoArgs) -> i32 {
    let defines: BTreeMap<Name, i64> =
        a.program.define.iter().map(|(n, v)| (Name::from(n.as_str()), *v)).collect();
    let roles = match a.program.roles() {
        Ok(r) => r,
        Err(code) => return code,
    };
    if let Some(to) = &a.emit_space {
        return match crate::tuner::auto::generate(&a.program.file, &defines, a.program.unchecked, &roles, to)
        {
            Ok(g) => {
                println!(
                    "{}: the generated space ({} parameters)",
                    g.path.display(),
                    g.space.decisions.len()
                );
                0
            }
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        };
    }
    let cores = crate::runtime::machine::Machine::host().cores;
    let threads = a.threads.unwrap_or(cores).max(1);
    let stem = a.program.file.file_stem().and_then(|s| s.to_str()).unwrap_or("program").to_string();
    let o = crate::tuner::auto::AutoOptions {
        program: a.program.file.clone(),
        defines,
        unchecked: a.program.unchecked,
        roles,
        out: a.out.clone().unwrap_or_else(|| PathBuf::from("auto-out").join(&stem)),
        db: if a.no_db { None } else { Some(a.db.clone().unwrap_or_else(crate::tuner::db::default_path)) },
        threads,
    };
    let report = match crate::tuner::auto::auto(&o) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    if a.json {
        eprintln!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        print!("{}", crate::tuner::auto::summary(&report));
    }
    let export = |code: i32| match &a.export {
        Some(dir) if code == 0 => {
            export_to(&report.path, &o.defines, o.unchecked, &Flags::default(), dir, a.export_name.clone())
        }
        _ => code,
    };
    if a.no_run {
        return export(0);
    }
    let args = RunArgs {
        program: ProgramArgs { file: report.path.clone(), ..a.program.clone() },
        input: Vec::new(),
        output: Vec::new(),
        emit_c: None,
        time: true,
        threads: Some(threads),
        cflags: None,
        json: a.json,
        no_run: false,
        seed: 42,
        timeout: 120.0,
        min_time: 0.2,
        max_reference: 400_000_000,
        quiet: true,
    };
    export(run(&args))
}

pub(super) fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let (k, n) = s.split_once('/').ok_or_else(|| format!("expected K/N, found `{s}`"))?;
    let (k, n): (usize, usize) = match (k.trim().parse(), n.trim().parse()) {
        (Ok(k), Ok(n)) => (k, n),
        _ => return Err(format!("expected two integers K/N, found `{s}`")),
    };
    if n == 0 || k >= n {
        return Err(format!("expected 0 <= K < N, found `{s}`"));
    }
    Ok((k, n))
}

/// The flags `--cflags` gives (the defaults without it); else the exit status after the error.
pub(super) fn cflags(given: &Option<String>) -> Result<Flags, i32> {
    match given {
        Some(f) => Flags::parse(f, "--cflags").map_err(|e| {
            eprintln!("error: {e}");
            1
        }),
        None => Ok(Flags::default()),
    }
}

/// The search that `teml tune`'s arguments ask for; else the exit status after the error.
pub fn tune_options(a: &TuneArgs) -> Result<crate::tuner::TuneOptions, i32> {
    let strategy = match a.strategy.parse::<crate::tuner::strategy::Strategy>() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: --strategy: {e}");
            return Err(1);
        }
    };
    let flags = cflags(&a.cflags)?;
    let cores = crate::runtime::machine::Machine::host().cores;
    let stem = a.program.file.file_stem().and_then(|s| s.to_str()).unwrap_or("space").to_string();
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from("tune-out").join(&stem));
    if a.collect == Some(0) {
        eprintln!("error: --collect: expected at least 1 shard, found 0");
        return Err(1);
    }
    Ok(crate::tuner::TuneOptions {
        space: a.program.file.clone(),
        defines: a.program.define.iter().map(|(n, v)| (Name::from(n.as_str()), *v)).collect(),
        fixed: a.program.params.iter().cloned().collect(),
        strategy,
        seed: a.seed,
        budget: a.budget,
        time_budget: a.time_budget.map(|s| Duration::from_secs_f64(s.max(0.0))),
        shard: a.shard,
        log: a.log.clone().unwrap_or_else(|| out.join("log.jsonl")),
        merge: a.merge.clone(),
        out,
        jobs: a.jobs.unwrap_or(cores).max(1),
        leaders: a.leaders,
        rounds: a.rounds,
        anchors: !a.no_anchors,
        unchecked: a.program.unchecked,
        roles: a.program.roles()?,
        json: a.json,
        run: RunOptions {
            flags,
            compiler: a.cc.clone(),
            threads: Some(a.threads.unwrap_or(cores).max(1)),
            timing: Some(Timing { warmup: 1, min_time_s: a.min_time.max(0.0), min_reps: 3, max_reps: 50 }),
            timeout: Duration::from_secs_f64(a.timeout.max(0.001)),
            max_reference_instances: a.max_reference,
            time_untransformed: false,
            compile_timeout: Duration::from_secs_f64(a.compile_timeout.max(0.001)),
            ..RunOptions::default()
        },
        db: if a.no_db { None } else { Some(a.db.clone().unwrap_or_else(crate::tuner::db::default_path)) },
        generated: a.generated,
        measure_only: a.measure_only,
        collect: a.collect,
        db_append: a.db_append.clone(),
    })
}

/// `teml tune --slurm N`: the array and merge jobs written (and submitted unless --dry-run).
pub(super) fn tune_slurm(a: &TuneArgs, o: &crate::tuner::TuneOptions, n: usize) -> i32 {
    let prepared = crate::tuner::prepare(o).and_then(|(o, note)| {
        if let Some(note) = note {
            eprintln!("note: {note}");
        }
        crate::tuner::slurm::plan(&o, n, &a.slurm_opt, a.export.as_deref(), a.export_name.clone())
    });
    let job = match prepared {
        Ok(j) => j,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    slurm_submit(&job, a.dry_run, &o.out)
}

/// Writes (and unless `dry_run`, submits) a Slurm job, and says what went where.
pub(super) fn slurm_submit(job: &crate::cluster::Job, dry_run: bool, results: &Path) -> i32 {
    if dry_run {
        return match job.write() {
            Ok(s) => {
                println!(
                    "wrote {} ({} array tasks) and {} (nothing submitted: --dry-run)
submit: A=$(sbatch --parsable {}) && sbatch --dependency=afterany:${{A%%;*}} {}",
                    s.array.display(),
                    s.tasks,
                    s.merge.display(),
                    s.array.display(),
                    s.merge.display()
                );
                0
            }
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        };
    }
    match job.submit() {
        Ok(s) => {
            println!(
                "submitted array job {} ({} tasks: {}) and merge job {} (afterany:{})
progress:
{}
results: {} once job {} has ended (its output: {})",
                s.array_id,
                s.scripts.tasks,
                s.scripts.array.display(),
                s.merge_id,
                s.array_id,
                s.progress(),
                results.display(),
                s.merge_id,
                job.dir.join("merge.out").display()
            );
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

/// `teml tune`.
pub fn tune(a: &TuneArgs) -> i32 {
    let o = match tune_options(a) {
        Ok(o) => o,
        Err(code) => return code,
    };
    if let Some(n) = a.slurm {
        return tune_slurm(a, &o, n);
    }
    search(&o, a.export.as_deref(), a.export_name.clone())
}

/// `teml job FILE`: the search whose options a submitting command wrote (a Slurm array
/// task's, or its merge job's).
pub fn job(a: &JobArgs) -> i32 {
    match crate::tuner::slurm::read_job(&a.file) {
        Ok(j) => search(&j.options, j.export.as_deref(), j.export_name),
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

/// Runs the search of `o` with its progress bar, prints the report, and exports the winner to
/// `export` where asked.
fn search(o: &crate::tuner::TuneOptions, export: Option<&Path>, export_name: Option<String>) -> i32 {
    // Said at the start; off a terminal each measured candidate's count and the best so far as
    // a plain line (the log keeps every candidate: the same command resumes from it).
    use std::io::IsTerminal;
    let terminal = std::io::stderr().is_terminal();
    let limit =
        o.time_budget.map_or(String::new(), |d| format!(", at most {:.0} s of search", d.as_secs_f64()));
    eprintln!(
        "teml tune: up to {} candidates{limit}, then the leaders re-measured; each candidate goes to {} as it is measured (the same command resumes from it)",
        o.budget,
        o.log.display()
    );
    let bar = if terminal {
        indicatif::ProgressBar::new(o.budget as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut said = (usize::MAX, String::new());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    let result = crate::tuner::tune(o, &mut |p| {
        bar.set_position(p.done as u64);
        let best = p.best.map_or(String::new(), |(t, k)| format!(" · best {:.3} ms ({k})", t * 1e3));
        bar.set_message(format!("{} rejected{best} · {}", p.rejected, p.phase));
        if !terminal && (said.0 != p.done || said.1 != p.phase) {
            eprintln!("[{}/{}] {} rejected{best} · {}", p.done, p.budget, p.rejected, p.phase);
            said = (p.done, p.phase.to_string());
        }
    });
    bar.finish_and_clear();
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    if o.json {
        println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        print!("{}", crate::tuner::summary(&report));
    }
    if report.best.is_none() {
        // A shard that only measures declares no winner: that is its job.
        return i32::from(!o.measure_only);
    }
    match export {
        Some(dir) => {
            export_to(&o.out.join("best.teml"), &o.defines, o.unchecked, &o.run.flags, dir, export_name)
        }
        None => 0,
    }
}

/// `--export DIR` of `teml tune` and `teml auto`: the written path's kernel (`program`, at the
/// sizes it was chosen at) exported to `dir`; the exit status.
fn export_to(
    program: &Path,
    defines: &BTreeMap<Name, i64>,
    unchecked: bool,
    flags: &Flags,
    dir: &Path,
    name: Option<String>,
) -> i32 {
    let e = crate::export::ExportOptions {
        program: program.to_path_buf(),
        defines: defines.clone(),
        params: BTreeMap::new(),
        unchecked,
        // auto.teml and best.teml hold the declarations (their `result(...)` lines).
        roles: Default::default(),
        kernels: Vec::new(),
        out: dir.to_path_buf(),
        flags: flags.clone(),
        rust: false,
        name,
    };
    match crate::export::export(&e) {
        Ok(done) => {
            for x in done {
                eprintln!(
                    "{}: exported to {} ({})",
                    x.name,
                    dir.display(),
                    crate::export::describe(&x.sizes)
                );
            }
            0
        }
        Err(err) => {
            eprintln!("error: --export: {err}");
            1
        }
    }
}
