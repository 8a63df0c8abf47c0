//! The `teml` command line: `run`, `check`, `repl`, `builtins`.

use crate::ir::{Name, State};
use crate::pipeline::{self, Buffers, Flags, KernelRef, KernelReport, Pipeline, Program, RunOptions, Timing};
use clap::{Args, Parser, Subcommand};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
mod bench;
mod reference;
mod tune;
pub use bench::*;
pub use reference::{ENVIRONMENT, cli_reference};
pub use tune::*;

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
    /// Print this command-line reference (docs/cli.md): every command, its arguments and the
    /// environment variables teml reads.
    CliReference,
    /// Search a space of optimization paths (a program with `param(name, choices)`): every
    /// candidate checked for legality, verified and timed; the fastest written back as a
    /// replayable `.teml` script.
    Tune(Box<TuneArgs>),
    /// A schedule without measuring: the point of the space the rules generate from the
    /// program's kernel that the machine model prefers (or the tuning database's best record of
    /// this kernel on this machine), written as a `.teml` path with each decision's reason,
    /// then run verified and timed.
    Auto(Box<AutoArgs>),
    /// Run the search whose options a file holds: what each task of `teml tune --slurm` and
    /// `teml bench --tune --slurm` runs (`DIR/slurm/task-K.json`, `merge.json`: written by the
    /// submitting command; read them to see what a task does).
    Job(JobArgs),
    /// The Table 1 kernels through their paths (untransformed, Pluto's, the paper's, the best
    /// we have), each verified and timed in one run on this machine.
    Bench(BenchArgs),
    /// Take a verified kernel home: a C library with a header (shared and static), a pkg-config
    /// file and a Makefile, and a Python module for numpy, in one directory per run
    /// (docs/export.md).
    Export(ExportArgs),
}

/// `teml job`.
#[derive(Args, Debug)]
pub struct JobArgs {
    /// The options file (JSON, `{"tune": {...}}`).
    pub file: PathBuf,
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
        roles: match a.program.roles() {
            Ok(r) => r,
            Err(code) => return code,
        },
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
    /// Declare tensors results (repeatable, or a comma list: `--result tmp,C`), as
    /// `result(tmp)` in the program does: kept whole after the kernel, never stored per
    /// iteration or privatized by the program's path, `teml auto` or a generated space.
    #[arg(long = "result", value_name = "T", value_delimiter = ',')]
    pub results: Vec<String>,
    /// Declare tensors temporaries (repeatable, or a comma list), as `temporary(p, q)` does:
    /// their values after the kernel are not wanted, so they may be stored per iteration.
    #[arg(long = "temporary", value_name = "T", value_delimiter = ',')]
    pub temporaries: Vec<String>,
}

impl ProgramArgs {
    /// The roles `--result` and `--temporary` declare; a name declared both ways is an error,
    /// printed, and the command's exit status.
    pub fn roles(&self) -> Result<crate::ir::Roles, i32> {
        let mut roles = crate::ir::Roles::new();
        for (names, role) in
            [(&self.results, crate::ir::Role::Result), (&self.temporaries, crate::ir::Role::Temporary)]
        {
            for t in names {
                if roles.insert(Name::from(t.as_str()), role).is_some_and(|r| r != role) {
                    eprintln!(
                        "error: --result and --temporary: expected each tensor in one of them, found `{t}` in both"
                    );
                    return Err(2);
                }
            }
        }
        Ok(roles)
    }

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
    let roles = match a.program.roles() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let consts: BTreeMap<Name, i64> = defines.map(|(n, v)| (Name::from(n), v)).collect();
    let program = Program::declaring(
        &a.program.file,
        consts,
        a.program.unchecked,
        a.program.params(),
        crate::script::Env::default(),
        roles,
    );
    match program.eval() {
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
                let named = req.named();
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
    let roles = match a.program.roles() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let program =
        Program::declaring(&a.program.file, defines, a.program.unchecked, a.program.params(), env, roles);
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
    if let Some(note) = space_note(&a.program.file, &state.params.seen, &a.program.params) {
        eprintln!("{note}");
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
            "threads": a.threads.unwrap_or_else(|| crate::runtime::machine::Machine::host().cores),
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

/// Under `teml run`, a program with `param` calls is a search space run at one point: which
/// point, and how to search it (`None` for a program without parameters).
fn space_note(file: &Path, seen: &[crate::ir::Seen], fixed: &[(String, String)]) -> Option<String> {
    if seen.is_empty() {
        return None;
    }
    let picks: Vec<String> = seen.iter().map(|s| format!("{}={}", s.name, s.value)).collect();
    let how = if fixed.is_empty() {
        "each at its first choice"
    } else {
        "at --param's choices, the others at their first"
    };
    Some(format!(
        "note: {} is a search space ({} parameter{}): this run takes one point, {how}: {}; \
         `teml tune {}` searches it, `--param NAME=VALUE` picks another point",
        file.display(),
        seen.len(),
        if seen.len() == 1 { "" } else { "s" },
        picks.join(", "),
        file.display()
    ))
}

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
    fn a_job_file_reads_back_as_the_same_search() {
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
        let dir = tempfile::tempdir().unwrap();
        let round_trip = |o: &crate::tuner::TuneOptions| {
            let job = crate::tuner::slurm::TuneJob::of(o);
            let ((path, text), args) = crate::tuner::slurm::job_task(dir.path(), "task-0", job).unwrap();
            assert_eq!(args, ["job".to_string(), path.display().to_string()]);
            std::fs::write(&path, text).unwrap();
            let back = crate::tuner::slurm::read_job(&path).unwrap().options;
            assert_eq!(format!("{back:?}"), format!("{o:?}"));
        };
        round_trip(&o);
        // And without a database, collecting.
        round_trip(&options(&["tune", "s.rhai", "--no-db", "--collect", "4", "--json"]));
        // A malformed file is refused at its line and column, an unknown field by its name.
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{\"tune\": {\n  \"space\": 3\n}}").unwrap();
        let e = crate::tuner::slurm::read_job(&bad).unwrap_err();
        assert!(e.starts_with(&format!("{}:2:", bad.display())), "{e}");
        std::fs::write(&bad, "{\"tune\": {\"spaces\": \"a\"}}").unwrap();
        let e = crate::tuner::slurm::read_job(&bad).unwrap_err();
        assert!(e.contains("unknown field `spaces`"), "{e}");
    }
}
