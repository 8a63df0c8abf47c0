//! `teml bench`: its arguments and the suite's run.

use super::*;

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
    /// path, the tuned path) or `precision` (mm and a convolution in float, bf16 and int8:
    /// untransformed and `teml auto`'s path, beside numpy's float, PyTorch's bf16 where it is
    /// installed, and a probe of each instruction the host has: float FMA, vdpbf16ps, vpdpbusd,
    /// AMX tiles).
    #[arg(long, value_name = "SUITE", default_value = "paper", value_parser = ["paper", "polybench", "precision"])]
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
    /// Each kernel's rows, one JSON line appended as the kernel finishes (an interrupted run
    /// leaves the finished ones behind; `--resume` reads them back).
    #[arg(long, value_name = "FILE", default_value = "bench-out/rows.jsonl")]
    pub rows: PathBuf,
    /// Rerun only the kernels whose rows the rows file does not hold yet (same suite, --quick
    /// and --threads); the table and the JSON show them all.
    #[arg(long)]
    pub resume: bool,
}

/// `teml bench`.
pub fn bench(a: &BenchArgs) -> i32 {
    let suite = crate::suite::Suite::named(&a.suite).unwrap_or_default();
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
        rows: Some(a.rows.clone()),
        resume: a.resume,
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
    // Said before it starts, and each kernel's rows as it finishes: on a terminal above a
    // spinner, off it as plain lines (standard error: standard output carries the table or
    // the JSON).
    use std::io::IsTerminal;
    let terminal = std::io::stderr().is_terminal();
    eprintln!("teml bench: {}", crate::suite::plan(&o));
    let bar = if terminal { indicatif::ProgressBar::new_spinner() } else { indicatif::ProgressBar::hidden() };
    bar.enable_steady_tick(Duration::from_millis(120));
    let report = crate::suite::run(
        &o,
        &mut |what| {
            if terminal {
                bar.set_message(what.to_string())
            } else if what.starts_with('[') {
                eprintln!("{what}");
            }
        },
        &mut |k, secs| {
            let line = crate::suite::finished_line(k, secs);
            if terminal { bar.println(line) } else { eprintln!("{line}") }
        },
    );
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
            "machine": report.machine, "instructions": report.instructions, "kernels": results,
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
