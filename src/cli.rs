//! The `teml` command line: `run`, `check`, `repl`, `builtins`.

use crate::ir::{Name, State};
use crate::pipeline::{self, Buffers, Flags, KernelRef, KernelReport, Pipeline, Program, RunOptions, Timing};
use clap::{Args, Parser, Subcommand};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// teml: the Tensor optimizations Meta-Language. Build tensor expressions and loop nests,
/// transform the nests, generate C, compile it, run it on real data, verify it against the
/// untransformed program and time it.
#[derive(Parser, Debug)]
#[command(name = "teml", version, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Evaluate a meta-program (.teml or .rhai), then compile, run and verify every kernel its
    /// `codegen` statements ask for, in order.
    Run(RunArgs),
    /// Evaluate and type-check a meta-program without compiling anything.
    Check(CheckArgs),
    /// An interactive session (both syntaxes; `:help` inside).
    Repl(ReplArgs),
    /// Print the language reference: every builtin with its signature, meaning and example.
    Builtins,
    /// Search a space of optimization paths (a program with `param(name, choices)`): every
    /// candidate checked for legality, verified and timed; the fastest written back as a
    /// replayable `.teml` script.
    Tune(Box<TuneArgs>),
    /// A schedule without measuring: the point of the space the rules generate from the
    /// program's kernel that the machine model prefers (or the tuning database's best record of
    /// this kernel on this machine), written as a `.teml` path with each decision's reason,
    /// then run verified and timed.
    Auto(Box<AutoArgs>),
    /// The Table 1 kernels through their paths (untransformed, Pluto's, the paper's, the best
    /// we have), each verified and timed in one run on this machine.
    Bench(BenchArgs),
    /// Take a verified kernel home: a C library with a header (shared and static), a pkg-config
    /// file and a Makefile, and a Python module for numpy, in one directory per run
    /// (docs/export.md).
    Export(ExportArgs),
}

/// `teml export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The program and its named constants.
    #[command(flatten)]
    pub program: ProgramArgs,
    /// Only this kernel (its `codegen` name; repeatable); every kernel of the program otherwise.
    #[arg(long = "kernel", value_name = "NAME")]
    pub kernels: Vec<String>,
    /// The directory to write (created if needed).
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    pub out: PathBuf,
    /// Compiler flags instead of teml's defaults (`-O3 -march=native -fopenmp`).
    #[arg(long)]
    pub cflags: Option<String>,
    /// Also write a Rust crate (DIR/rust/NAME) with a safe wrapper taking slices.
    #[arg(long)]
    pub rust: bool,
    /// The exported function's name (a C identifier), for a single kernel: e.g. `--name mm`
    /// for a tuned path whose kernel is called `p`.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
}

/// `teml export`.
pub fn export(a: &ExportArgs) -> i32 {
    let flags = match cflags(&a.cflags) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let o = crate::export::ExportOptions {
        program: a.program.file.clone(),
        defines: a.program.define.iter().map(|(n, v)| (Name::from(n.as_str()), *v)).collect(),
        params: a.program.params.iter().cloned().collect(),
        unchecked: a.program.unchecked,
        kernels: a.kernels.clone(),
        out: a.out.clone(),
        flags,
        rust: a.rust,
        name: a.name.clone(),
    };
    match crate::export::export(&o) {
        Ok(done) => {
            for e in done {
                let sizes = crate::export::describe(&e.sizes);
                println!("{}: verified, exported to {} ({sizes})", e.name, a.out.display());
                for f in &e.files {
                    println!("  {}", f.display());
                }
            }
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

/// `teml bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The small sizes of the files' `# test:` lines and one timed run: a smoke run that checks
    /// that every variant runs and verifies.
    #[arg(long)]
    pub quick: bool,
    /// Print one JSON report instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Threads of the transformed variants (the untransformed baseline runs on one).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Only this kernel (repeatable), e.g. `--kernel mttkrp`.
    #[arg(long = "kernel", value_name = "NAME")]
    pub kernels: Vec<String>,
    /// Which kernels: `paper` (Table 1: untransformed, Polly, Pluto's, the paper's, the best
    /// and the tuned paths, and the lifted one where a kernel has it) or `polybench` (the 30
    /// PolyBench/C 4.2.1 kernels at scaled LARGE sizes: untransformed, Polly, the Pluto-like
    /// path, the tuned path).
    #[arg(long, value_name = "SUITE", default_value = "paper", value_parser = ["paper", "polybench"])]
    pub suite: String,
    /// The repository holding `examples/` and `scripts/` (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub root: PathBuf,
    /// Skip the anchors (LLVM Polly, numpy) even where they are installed.
    #[arg(long)]
    pub no_anchors: bool,
    /// Run at the files' own default sizes instead of the bench sizes.
    #[arg(long)]
    pub file_sizes: bool,
    /// Also draw the speedups as a grouped bar chart (SVG), in the style of the paper's Fig. 11.
    #[arg(long, value_name = "PATH")]
    pub svg: Option<PathBuf>,
    /// Re-tune the tuned row on this machine first (machines differ: AVX2 on some, AVX-512 on
    /// others): each kernel's space in scripts/tune/ (the generated space where it has none),
    /// searched with the learned model for --tune-budget seconds; the winner replaces the
    /// shipped path in the row, and every candidate goes to the tuning database.
    #[arg(long)]
    pub tune: bool,
    /// Seconds of re-tuning a kernel with --tune.
    #[arg(long, value_name = "SECS", default_value_t = 300.0, requires = "tune")]
    pub tune_budget: f64,
    /// With --tune: re-tune on Slurm, one array task per kernel (`--cpus-per-task` from
    /// --threads), then the bench as a job that depends on the array (afterany), on one node,
    /// with the winners in the tuned row; everything under --slurm-dir.
    #[arg(long, requires = "tune")]
    pub slurm: bool,
    /// Where the Slurm scripts and each kernel's search go (a filesystem the nodes share).
    #[arg(long, value_name = "DIR", default_value = "tune-out/bench", requires = "slurm")]
    pub slurm_dir: PathBuf,
    /// An sbatch option for both jobs (repeatable), e.g. `--slurm-opt=--partition=short`.
    #[arg(long, value_name = "OPT", allow_hyphen_values = true, requires = "slurm")]
    pub slurm_opt: Vec<String>,
    /// With --slurm: write the job scripts, submit nothing.
    #[arg(long, requires = "slurm")]
    pub dry_run: bool,
    /// The tuned row from a re-tune on Slurm: each kernel's DIR/kernels/K/best.teml (the
    /// bench job's own option; a kernel whose task left none keeps its shipped path, with a
    /// note), the tasks' tuning-database records merged into the database.
    #[arg(long, value_name = "DIR", conflicts_with = "tune")]
    pub tuned_from: Option<PathBuf>,
}

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
}

/// `teml auto`.
pub fn auto(a: &AutoArgs) -> i32 {
    let defines: BTreeMap<Name, i64> =
        a.program.define.iter().map(|(n, v)| (Name::from(n.as_str()), *v)).collect();
    if let Some(to) = &a.emit_space {
        return match crate::tuner::auto::generate(&a.program.file, &defines, a.program.unchecked, to) {
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
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = a.threads.unwrap_or(cores).max(1);
    let stem = a.program.file.file_stem().and_then(|s| s.to_str()).unwrap_or("program").to_string();
    let o = crate::tuner::auto::AutoOptions {
        program: a.program.file.clone(),
        defines,
        unchecked: a.program.unchecked,
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
    if a.no_run {
        return 0;
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
    run(&args)
}

fn parse_shard(s: &str) -> Result<(usize, usize), String> {
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
fn cflags(given: &Option<String>) -> Result<Flags, i32> {
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
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
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
fn tune_slurm(a: &TuneArgs, o: &crate::tuner::TuneOptions, n: usize) -> i32 {
    let prepared = crate::tuner::prepare(o).and_then(|(o, note)| {
        if let Some(note) = note {
            eprintln!("note: {note}");
        }
        crate::tuner::slurm::plan(&o, n, &a.slurm_opt)
    });
    let mut job = match prepared {
        Ok(j) => j,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    if let Some(dir) = &a.export {
        job.merge.extend(["--export".into(), crate::tuner::slurm::absolute(dir).display().to_string()]);
        if let Some(name) = &a.export_name {
            job.merge.extend(["--export-name".into(), name.clone()]);
        }
    }
    slurm_submit(&job, a.dry_run, &o.out)
}

/// Writes (and unless `dry_run`, submits) a Slurm job, and says what went where.
fn slurm_submit(job: &crate::cluster::Job, dry_run: bool, results: &Path) -> i32 {
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
    let bar = indicatif::ProgressBar::new(o.budget as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    let result = crate::tuner::tune(&o, &mut |p| {
        bar.set_position(p.done as u64);
        let best = p.best.map_or(String::new(), |(t, k)| format!(" · best {:.3} ms ({k})", t * 1e3));
        bar.set_message(format!("{} rejected{best} · {}", p.rejected, p.phase));
    });
    bar.finish_and_clear();
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        print!("{}", crate::tuner::summary(&report));
    }
    if report.best.is_none() {
        // A shard that only measures declares no winner: that is its job.
        return i32::from(!o.measure_only);
    }
    if let Some(dir) = &a.export {
        let e = crate::export::ExportOptions {
            program: o.out.join("best.teml"),
            defines: o.defines.clone(),
            params: BTreeMap::new(),
            unchecked: o.unchecked,
            kernels: Vec::new(),
            out: dir.clone(),
            flags: o.run.flags.clone(),
            rust: false,
            name: a.export_name.clone(),
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
            }
            Err(err) => {
                eprintln!("error: --export: {err}");
                return 1;
            }
        }
    }
    0
}

/// Named constants and the program file.
#[derive(Args, Debug, Clone)]
pub struct ProgramArgs {
    /// The meta-program: a `.teml` file (the paper's syntax) or a `.rhai` script.
    pub file: PathBuf,
    /// Bind a named constant, e.g. `-D N=250` (overrides the file's own `N = ...`).
    #[arg(short = 'D', value_name = "NAME=INT", value_parser = parse_const)]
    pub define: Vec<(String, i64)>,
    /// Do not check transformations against the dependences: an illegal path then reaches
    /// verification, which reports the mismatch.
    #[arg(long)]
    pub unchecked: bool,
    /// Fix a tuning parameter of a search space (repeatable), e.g. `--param 'order=[1, 3, 2]'`:
    /// `param("order", choices)` takes the choice that prints as the value (under `run`, the
    /// others take their first choice; under `tune`, the search runs over the others).
    #[arg(long = "param", value_name = "NAME=VALUE", value_parser = parse_param)]
    pub params: Vec<(String, String)>,
    /// Treat warnings (a statement that probably does not mean what it says) as errors.
    #[arg(long)]
    pub deny_warnings: bool,
}

impl ProgramArgs {
    /// The tuning parameters `--param` fixes.
    pub fn params(&self) -> crate::ir::Params {
        crate::ir::Params { values: self.params.iter().cloned().collect(), ..Default::default() }
    }
}

/// Prints what the evaluation warned about (standard error); with `--deny-warnings` the
/// warnings are errors: false when the command must stop.
fn report_warnings(s: &State, deny: bool) -> bool {
    for w in &s.warnings.0 {
        if deny {
            eprintln!("error: {w} (--deny-warnings)");
        } else {
            eprintln!("warning: {w}");
        }
    }
    !deny || s.warnings.0.is_empty()
}

/// `teml run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The program and its named constants.
    #[command(flatten)]
    pub program: ProgramArgs,
    /// Input tensor from a .npy file (repeatable), e.g. `-i A=a.npy`.
    #[arg(short = 'i', value_name = "NAME=PATH", value_parser = parse_path_pair)]
    pub input: Vec<(String, PathBuf)>,
    /// Save a tensor after the run as .npy (repeatable), e.g. `-o C=c.npy`.
    #[arg(short = 'o', value_name = "NAME=PATH", value_parser = parse_path_pair)]
    pub output: Vec<(String, PathBuf)>,
    /// Write the generated C here (with several kernels, `PATH` gets `.1`, `.2`, ... before the extension).
    #[arg(long, value_name = "PATH")]
    pub emit_c: Option<PathBuf>,
    /// Time every kernel and the untransformed build of its statements, and report the speedup.
    #[arg(long)]
    pub time: bool,
    /// Threads for OpenMP loops (OMP_NUM_THREADS of the kernels).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// C compiler flags replacing the defaults `-O3 -march=native -fopenmp`.
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub cflags: Option<String>,
    /// Print one JSON report (with a `kernels` list) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Only generate C (to --emit-c, or standard output); compile and run nothing.
    #[arg(long)]
    pub no_run: bool,
    /// Seed of the generator that fills tensors without other data.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Seconds a kernel run (verification, warm-up and timing) may take before it is stopped.
    #[arg(long, default_value_t = 120.0)]
    pub timeout: f64,
    /// Minimum total timed seconds per kernel (with --time).
    #[arg(long, default_value_t = 0.2)]
    pub min_time: f64,
    /// Most statement instances the reference interpreter runs per kernel; above it, the kernel
    /// is verified on the same program with smaller named constants (and the report says so).
    #[arg(long, value_name = "N", default_value_t = 400_000_000)]
    pub max_reference: u64,
    /// Do not print the nests of each kernel before its report.
    #[arg(short, long)]
    pub quiet: bool,
}

/// `teml check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The program and its named constants.
    #[command(flatten)]
    pub program: ProgramArgs,
}

/// `teml repl`.
#[derive(Args, Debug)]
pub struct ReplArgs {
    /// Start in Rhai syntax instead of the paper's (switch with `:rhai` / `:teml`).
    #[arg(long)]
    pub rhai: bool,
    /// Bind a named constant, e.g. `-D N=64`.
    #[arg(short = 'D', value_name = "NAME=INT", value_parser = parse_const)]
    pub define: Vec<(String, i64)>,
    /// Do not check transformations against the dependences (see `teml run --unchecked`).
    #[arg(long)]
    pub unchecked: bool,
    /// A program to load first.
    pub file: Option<PathBuf>,
}

fn parse_const(s: &str) -> Result<(String, i64), String> {
    crate::ir::parse_define(s)
}

fn parse_param(s: &str) -> Result<(String, String), String> {
    let (n, v) = s.split_once('=').ok_or_else(|| format!("expected NAME=VALUE, found `{s}`"))?;
    if n.trim().is_empty() {
        return Err(format!("expected a parameter name before `=`, found `{s}`"));
    }
    Ok((n.trim().to_string(), v.trim().to_string()))
}

fn parse_path_pair(s: &str) -> Result<(String, PathBuf), String> {
    let (n, p) = s.split_once('=').ok_or_else(|| format!("expected NAME=PATH, found `{s}`"))?;
    if n.is_empty() {
        return Err(format!("expected a tensor name before `=`, found `{s}`"));
    }
    Ok((n.to_string(), PathBuf::from(p)))
}

/// `teml check`: 0 if the program evaluates.
pub fn check(a: &CheckArgs) -> i32 {
    let defines = a.program.define.iter().map(|(n, v)| (n.as_str(), *v));
    let state = State { params: a.program.params(), ..State::starting(defines, a.program.unchecked) };
    match pipeline::eval_file(&a.program.file, &state) {
        Ok(s) => {
            if !report_warnings(&s, a.program.deny_warnings) {
                return 1;
            }
            let kernels = s.kernels.len();
            println!(
                "{}: ok ({} identifiers, {kernels} kernel{})",
                a.program.file.display(),
                s.vars.len(),
                if kernels == 1 { "" } else { "s" }
            );
            let mut unbound = std::collections::BTreeSet::new();
            for req in &s.kernels {
                let named: Vec<_> = req.names.iter().cloned().zip(req.nests.iter().cloned()).collect();
                unbound.extend(crate::analysis::kernel::unbound_constants(&s, &named));
            }
            if !unbound.is_empty() {
                let list: Vec<String> = unbound.iter().map(|c| format!("-D {c}=INT")).collect();
                println!(
                    "note: to run, give the named constants the program leaves unbound: {}",
                    list.join(" ")
                );
            }
            0
        }
        Err(e) => {
            eprintln!("{}", e.with_hint());
            1
        }
    }
}

fn emit_path(base: &Path, k: usize, n: usize) -> PathBuf {
    if n == 1 {
        return base.to_path_buf();
    }
    let stem = base.file_stem().and_then(|s| s.to_str()).unwrap_or("kernel");
    let ext = base.extension().and_then(|s| s.to_str()).unwrap_or("c");
    base.with_file_name(format!("{stem}.{}.{ext}", k + 1))
}

/// `teml run`.
pub fn run(a: &RunArgs) -> i32 {
    let flags = match cflags(&a.cflags) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let opts = RunOptions {
        flags,
        threads: a.threads,
        timing: a.time.then_some(Timing { min_time_s: a.min_time, ..Timing::default() }),
        timeout: Duration::from_secs_f64(a.timeout.max(0.001)),
        inputs: a.input.iter().map(|(n, p)| (Name::from(n.as_str()), p.clone())).collect::<BTreeMap<_, _>>(),
        seed: a.seed,
        max_reference_instances: a.max_reference,
        keep: a.output.iter().map(|(n, _)| Name::from(n.as_str())).collect(),
        ..RunOptions::default()
    };
    let defines = a.program.define.iter().map(|(n, v)| (Name::from(n.as_str()), *v)).collect();
    let env = pipeline::script_env_with(
        RunOptions { timing: Some(Timing { min_time_s: a.min_time, ..Timing::default() }), ..opts.clone() },
        a.json,
    );
    let program =
        Program::with_params(&a.program.file, defines, a.program.unchecked, a.program.params(), env);
    let pipe = match Pipeline::new(program, opts) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{}", e.with_hint());
            return 1;
        }
    };
    let state = pipe.state();
    if !report_warnings(state, a.program.deny_warnings) {
        return 1;
    }
    if state.kernels.is_empty() {
        eprintln!("{}: the program has no codegen statement: nothing to run", a.program.file.display());
        return if a.no_run { 0 } else { 1 };
    }
    let n = state.kernels.len();
    if a.no_run {
        for k in 0..n {
            match pipe.generate(&KernelRef::Codegen(k)) {
                Ok(c) => match &a.emit_c {
                    Some(p) => {
                        if let Err(e) = std::fs::write(emit_path(p, k, n), &c.source) {
                            eprintln!("error: cannot write {}: {e}", p.display());
                            return 1;
                        }
                    }
                    None => print!("{}", c.source),
                },
                Err(e) => {
                    eprintln!("error: {e}");
                    return 1;
                }
            }
        }
        return 0;
    }
    let mut reports: Vec<KernelReport> = Vec::new();
    // `-o`: each tensor as the last kernel that uses it left it.
    let mut last: Buffers = Buffers::new();
    let mut write_error: Option<String> = None;
    let (json, quiet) = (a.json, a.quiet);
    let outcome = pipe.run_all(
        &mut |_, req| {
            if !json && !quiet {
                for (name, nest) in req.names.iter().zip(&req.nests) {
                    println!("{name} =\n{}", nest.tree().trim_end());
                }
            }
        },
        &mut |k, run| {
            let r = run.report;
            if let Some(p) = &a.emit_c
                && let Ok(src) = std::fs::read_to_string(&r.c_path)
                && let Err(e) = std::fs::write(emit_path(p, k, n), src)
            {
                write_error.get_or_insert(format!("cannot write {}: {e}", p.display()));
            }
            if !json {
                println!("{}", r.summary());
            }
            reports.push(r);
            last.extend(run.outputs);
        },
    );
    let mut failure = match (outcome.err(), write_error) {
        (Some(e), Some(w)) => Some(format!("{e}; {w}")),
        (e, w) => e.map(|e| e.to_string()).or(w),
    };
    if failure.is_none() {
        for (name, path) in &a.output {
            if let Err(e) = pipeline::save_npy(&last, name, path) {
                failure = Some(e.to_string());
            }
        }
    }
    if a.json {
        // How the times were taken: the compiler and its exact arguments, the threads, the host.
        let tools = pipeline::toolchain(pipe.options());
        let report = serde_json::json!({
            "file": a.program.file.display().to_string(),
            "ok": failure.is_none(),
            "error": failure,
            "compiler": tools.as_ref().map(|t| t.0.clone()),
            "flags": tools.as_ref().map(|t| t.1.clone()),
            "threads": a.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
            "machine": crate::runtime::machine::Machine::host().host_line(),
            "kernels": reports,
        });
        println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    }
    match failure {
        None => 0,
        Some(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

/// `teml bench`.
pub fn bench(a: &BenchArgs) -> i32 {
    let suite =
        if a.suite == "polybench" { crate::suite::Suite::PolyBench } else { crate::suite::Suite::Paper };
    for k in &a.kernels {
        if !suite.kernels().contains(&k.as_str()) {
            eprintln!(
                "error: --kernel: expected one of {} (suite {}), found `{k}`",
                suite.kernels().join(", "),
                a.suite
            );
            return 1;
        }
    }
    if !a.root.join("examples").is_dir() {
        eprintln!(
            "error: --root {}: expected the teml repository (with examples/ and scripts/), found no examples/",
            a.root.display()
        );
        return 1;
    }
    let o = crate::suite::BenchOptions {
        root: a.root.clone(),
        quick: a.quick,
        threads: a.threads.max(1),
        kernels: a.kernels.clone(),
        suite,
        run: RunOptions::default(),
        no_anchors: a.no_anchors,
        file_sizes: a.file_sizes,
        tune: a.tune.then_some(a.tune_budget),
        db: if a.tune || a.tuned_from.is_some() { Some(crate::tuner::db::default_path()) } else { None },
        tuned_from: a.tuned_from.clone(),
    };
    if a.slurm {
        // The bench job: the same bench, its tuned row from the array's winners.
        let mut args = vec![
            "bench".to_string(),
            "--threads".into(),
            a.threads.to_string(),
            "--suite".into(),
            a.suite.clone(),
        ];
        for k in &a.kernels {
            args.extend(["--kernel".into(), k.clone()]);
        }
        for (flag, on) in [
            ("--quick", a.quick),
            ("--no-anchors", a.no_anchors),
            ("--file-sizes", a.file_sizes),
            ("--json", a.json),
        ] {
            if on {
                args.push(flag.into());
            }
        }
        if let Some(p) = &a.svg {
            args.extend(["--svg".into(), crate::tuner::slurm::absolute(p).display().to_string()]);
        }
        return match crate::suite::slurm_job(&o, &a.slurm_dir, args, &a.slurm_opt) {
            Ok(job) => slurm_submit(&job, a.dry_run, &job.dir.join("merge.out")),
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        };
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.enable_steady_tick(Duration::from_millis(120));
    let report = crate::suite::run(&o, &mut |what| bar.set_message(what.to_string()));
    bar.finish_and_clear();
    let results = &report.kernels;
    let ok = results.iter().all(|k| k.variants.iter().all(|v| v.verified && v.error.is_none()));
    if let Some(p) = &a.svg
        && let Err(e) = crate::suite::chart::svg(&report, p)
    {
        eprintln!("error: cannot write {}: {e}", p.display());
        return 1;
    }
    if a.json {
        let json = serde_json::json!({
            "quick": a.quick, "threads": a.threads, "ok": ok, "host": report.host,
            "machine": report.machine, "kernels": results,
        });
        println!("{}", serde_json::to_string_pretty(&json).unwrap_or_default());
    } else {
        print!("{}", crate::suite::table(&report));
        for k in results {
            for n in &k.notes {
                println!("{}: {n}", k.kernel);
            }
        }
    }
    if ok {
        0
    } else {
        eprintln!("error: some variants did not run or did not verify (see the table)");
        1
    }
}

/// `teml builtins`: the language reference, generated from the builtin table.
pub fn reference() -> String {
    let mut out =
        String::from("# TeML language reference\n\nGenerated from the builtin table (`teml builtins`).\n\n");
    out.push_str("| builtin | signature | paper | meaning | example |\n|---|---|---|---|---|\n");
    for b in crate::ops::builtins() {
        let checked = if b.checked { " The result is checked for legality (docs/legality.md)." } else { "" };
        out.push_str(&format!(
            "| `{}` | `{}` | {} | {}{checked} | `{}` |\n",
            b.name, b.signature, b.equation, b.summary, b.example
        ));
    }
    out.push_str(&crate::script::Stdlib::reference());
    out.push_str(WORKS_CITED);
    out
}

/// The works the reference names, in full.
const WORKS_CITED: &str = "
## Works cited

- *Sec. N, eq. N, Fig. N*: Susungi, Rink, Cohen, Castrillon, Tadonki, \"Meta-programming for
  Cross-Domain Tensor Optimizations\", GPCE 2018 (the TeML paper).
- *TeIL*: Rink, Castrillon, \"TeIL: A Type-Safe Imperative Tensor Intermediate Language\", ARRAY
  2019 (in-bounds accesses, equational rewrites, lifting nested contractions).
- *Rink 2018*: Rink, \"Modeling of languages for tensor manipulation\", report, TU Dresden, 2018
  (padding of tensor storage, proven equivalent: Sec. 4).
- *Ullrich 2018*: Ullrich, \"Detection and exploitation of data-parallelism in assignments of
  multi-dimensional tensors\", bachelor thesis, TU Dresden, 2018 (compatible statements: when
  `x = e` can be computed in place; data-parallel loops).
- *Sinkarovs and Scholz 2013*: \"Semantics-Preserving Data Layout Transformations for Improved
  Vectorisation\", FHPC 2013 (layout types: an axis regrouped into vectors of width V).
- *Feautrier 1988*: \"Array expansion\", ICS 1988 (privatization: a copy per iteration).
";

#[cfg(test)]
mod tests {
    use super::*;

    /// `teml tune ARGS` parsed into the search's options.
    fn options(args: &[&str]) -> crate::tuner::TuneOptions {
        let cli = Cli::try_parse_from(std::iter::once("teml").chain(args.iter().copied())).unwrap();
        let Command::Tune(a) = cli.command else { panic!("not tune") };
        tune_options(&a).unwrap_or_else(|code| panic!("exit {code}"))
    }

    #[test]
    fn the_slurm_scripts_command_lines_parse_back_to_the_same_search() {
        let o = options(&[
            "tune",
            "s.rhai",
            "-D",
            "N=64",
            "--param",
            "mr=4",
            "--strategy",
            "model",
            "--seed",
            "7",
            "--budget",
            "33",
            "--time-budget",
            "12.5",
            "--shard",
            "2/5",
            "--log",
            "x/log.jsonl",
            "--merge",
            "y.jsonl",
            "--out",
            "x",
            "--jobs",
            "3",
            "--threads",
            "2",
            "--leaders",
            "4",
            "--rounds",
            "5",
            "--min-time",
            "0.25",
            "--timeout",
            "9",
            "--compile-timeout",
            "8",
            "--max-reference",
            "1000",
            "--no-anchors",
            "--cc",
            "/usr/bin/gcc-12",
            "--cflags",
            "-O2 -march=native '-DX=a b'",
            "--db",
            "d.jsonl",
            "--db-append",
            "e.jsonl",
            "--measure-only",
            "--unchecked",
            "--generated",
        ]);
        let argv = o.argv();
        let back = options(&argv.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(format!("{back:?}"), format!("{o:?}"), "{argv:?}");
        // And without a database, collecting.
        let o = options(&["tune", "s.rhai", "--no-db", "--collect", "4", "--json"]);
        let back = options(&o.argv().iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(format!("{back:?}"), format!("{o:?}"));
    }
}
