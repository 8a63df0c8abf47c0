//! A tiny statement runner for tests of the core (no parser needed).
#![allow(dead_code)]

use std::ffi::OsStr;
use std::process::Command;
use teml::ir::{Expr, Nest, State, TExpr, Value};
use teml::ops::{ArgVal, exec};

/// An identifier argument.
pub fn id(s: &str) -> ArgVal {
    ArgVal::Word(s.into())
}

/// An integer argument.
pub fn int(i: i64) -> ArgVal {
    ArgVal::Int(i)
}

/// A list argument.
pub fn list(xs: Vec<ArgVal>) -> ArgVal {
    ArgVal::List(xs)
}

/// An iterator list from a string of comma-separated affine indices, e.g. "i1, i2+1".
pub fn its(s: &str) -> ArgVal {
    if s.trim().is_empty() {
        return ArgVal::List(vec![]);
    }
    ArgVal::List(s.split(',').map(|x| ArgVal::Index(parse_affine(x.trim()))).collect())
}

/// Omitted argument (ε).
pub fn none() -> ArgVal {
    ArgVal::Omitted
}

/// Parses `2*i+kh-1` style affine expressions (test helper only).
pub fn parse_affine(s: &str) -> Expr {
    let mut e = Expr::int(0);
    let s = s.replace(' ', "").replace('-', "+-");
    for term in s.split('+').filter(|t| !t.is_empty()) {
        let (neg, t) = match term.strip_prefix('-') {
            Some(t) => (true, t),
            None => (false, term),
        };
        let (coef, var) = match t.split_once('*') {
            Some((c, v)) => (c.parse::<i64>().unwrap(), Some(v)),
            None => match t.parse::<i64>() {
                Ok(c) => (c, None),
                Err(_) => (1, Some(t)),
            },
        };
        let coef = if neg { -coef } else { coef };
        e = match var {
            Some(v) => e.add(&Expr::var(v).scale(coef)),
            None => e.add_int(coef),
        };
    }
    e
}

/// Runs `id = builtin(args)`, panicking with the error message on failure.
pub fn run(s: &State, lhs: &str, builtin: &str, args: Vec<ArgVal>) -> State {
    exec(s, lhs, None, builtin, &args).unwrap_or_else(|e| panic!("{lhs} = {builtin}(..): {e}"))
}

/// Runs `id = builtin(args)` and returns the error message.
pub fn fails(s: &State, lhs: &str, builtin: &str, args: Vec<ArgVal>) -> String {
    match exec(s, lhs, None, builtin, &args) {
        Ok(_) => panic!("{lhs} = {builtin}(..) should fail"),
        Err(e) => e.to_string(),
    }
}

/// σ(id) as a tensor expression.
pub fn texpr(s: &State, name: &str) -> TExpr {
    match s.get(name) {
        Some(Value::Tensor(t)) => t.clone(),
        other => panic!("{name} is not a tensor expression: {other:?}"),
    }
}

/// σ(id) as a loop nest.
pub fn nest(s: &State, name: &str) -> Nest {
    match s.get(name) {
        Some(Value::Nest(n)) => n.clone(),
        other => panic!("{name} is not a loop nest: {other:?}"),
    }
}

/// A shape list argument from extents like "N, 250".
pub fn shape(s: &str) -> ArgVal {
    ArgVal::List(
        s.split(',')
            .map(|x| {
                let x = x.trim();
                match x.parse::<i64>() {
                    Ok(i) => ArgVal::Int(i),
                    Err(_) => ArgVal::Index(parse_affine(x)),
                }
            })
            .collect(),
    )
}

/// The statement instances a nest executes, each printed with concrete indices, in order.
pub fn instances(n: &Nest, s: &State) -> Vec<String> {
    let mut out = Vec::new();
    n.for_each_instance(&|v| s.constant(v), &mut |stmt, env| {
        let concrete =
            stmt.subst_iters(&|v| env.iter().rev().find(|(n, _)| &**n == v).map(|(_, x)| Expr::int(*x)));
        out.push(concrete.to_string());
    })
    .expect("nest runs");
    out
}

/// The same instances, sorted (the multiset a reordering must preserve).
pub fn instance_set(n: &Nest, s: &State) -> Vec<String> {
    let mut v = instances(n, s);
    v.sort();
    v
}

/// mm: C[i][j] = C[i][j] + A[i][k] * B[k][j] with extents (ni, nk, nj), built as `l`.
pub fn matmul(ni: i64, nk: i64, nj: i64) -> State {
    let s = State::new();
    let s = run(&s, "A", "tensor", vec![shape(&format!("{ni}, {nk}"))]);
    let s = run(&s, "B", "tensor", vec![shape(&format!("{nk}, {nj}"))]);
    let s = run(&s, "C", "tensor", vec![shape(&format!("{ni}, {nj}"))]);
    let s = run(&s, "P", "vmul", vec![id("A"), id("B"), list(vec![its("i, k"), its("k, j")])]);
    let s = run(&s, "C", "add", vec![id("C"), id("P"), list(vec![its("i, j"), none()]), its("i, j")]);
    run(&s, "l", "build", vec![id("C")])
}

/// Compiles, runs and verifies every kernel the state's `codegen` statements ask for.
pub fn verify_kernels(s: &State) {
    assert!(!s.kernels.is_empty());
    for (k, req) in s.kernels.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let opts = teml::pipeline::RunOptions {
            worker: Some(env!("CARGO_BIN_EXE_teml").into()),
            cache_dir: Some(dir.path().to_path_buf()),
            threads: Some(2),
            ..teml::pipeline::RunOptions::default()
        };
        let r =
            teml::pipeline::run_request(s, req, k, &opts).unwrap_or_else(|e| panic!("{:?}: {e}", req.names));
        assert!(r.verified, "{:?}: {}", req.names, r.summary());
    }
}

/// A unified diff from `expected` to `actual` (lines starting `-` are expected, `+` actual),
/// with three lines of context: what a golden-file mismatch prints (the REPL's `:diff`).
pub use teml::repl::unified_diff;

/// Set in a process [`in_own_process`] starts: the test it runs there.
const OWN_PROCESS: &str = "TEML_IT_OWN_PROCESS";

/// Runs `body`, the test `name` (its path in this binary, `module::test`), in a process of its
/// own: this test binary again, running that test only, with `envs` added to its environment.
/// The integration tests are one binary, whose tests run side by side in one process; a test
/// that reads or sets what is process-wide (the compiler-invocation counter, an environment
/// variable, the measurer `time(l)` calls) runs alone this way. Panics, with what the test
/// printed, unless that process ran the test and it passed.
pub fn in_own_process(name: &str, envs: &[(&str, &OsStr)], body: impl FnOnce()) {
    if std::env::var_os(OWN_PROCESS).is_some_and(|v| v == name) {
        body();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let o = Command::new(exe)
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(OWN_PROCESS, name)
        .envs(envs.iter().copied())
        .output()
        .expect("the test binary runs again");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let all = format!("{stdout}{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{name}, in a process of its own:\n{all}");
    assert!(
        stdout.contains("test result: ok. 1 passed;"),
        "{name} did not run in a process of its own:\n{all}"
    );
}

/// The kernel cache the tests share (never the user's): its key covers the C source, the flags
/// and the compiler, so a kernel one test compiled is loaded, not compiled again, by the next.
/// Tests about the cache itself, or that count what was compiled, keep their own.
pub fn kernel_cache() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("teml-kernel-cache")
}

/// Runs the `teml` binary with `args`, with the shared kernel cache ([`kernel_cache`]); `dir` is
/// the test's own folder (its files, and its own tuning database).
pub fn teml_in(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(args)
        .env("TEML_CACHE_DIR", kernel_cache())
        .env("TEML_TUNING_DB", dir.join("tuning-db.jsonl"))
        .output()
        .unwrap()
}

/// Runs the binary (the shared kernel cache) with `vector_bits` as `TEML_VECTOR_BITS`
/// (`None`: the host's): whether it succeeded, and what it printed (stdout, then stderr).
pub fn teml_bits(dir: &std::path::Path, vector_bits: Option<&str>, args: &[&str]) -> (bool, String) {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_teml"));
    c.args(args).env("TEML_CACHE_DIR", kernel_cache()).env("TEML_TUNING_DB", dir.join("tuning-db.jsonl"));
    if let Some(bits) = vector_bits {
        c.env("TEML_VECTOR_BITS", bits);
    }
    let o = c.output().unwrap();
    (
        o.status.success(),
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)),
    )
}

/// `-i NAME=PATH` for each of `inputs`, then `-o NAME=PATH` for each of `outputs`.
pub fn npy_args(inputs: &[(&str, &std::path::Path)], outputs: &[(&str, &std::path::Path)]) -> Vec<String> {
    let flag = |f: &str, (n, p): &(&str, &std::path::Path)| [f.to_string(), format!("{n}={}", p.display())];
    inputs.iter().flat_map(|x| flag("-i", x)).chain(outputs.iter().flat_map(|x| flag("-o", x))).collect()
}

/// Writes the program `src` to `dir/name` and returns its path.
pub fn program(dir: &std::path::Path, name: &str, src: &str) -> String {
    let f = dir.join(name);
    std::fs::write(&f, src).unwrap();
    f.to_str().unwrap().to_string()
}

/// `teml check` refuses the program `src` (written to `dir/name`), and says each of `want`.
pub fn refused(dir: &std::path::Path, vector_bits: Option<&str>, name: &str, src: &str, want: &[&str]) {
    let f = program(dir, name, src);
    let (ok, out) = teml_bits(dir, vector_bits, &["check", &f]);
    assert!(!ok, "{out}");
    for w in want {
        assert!(out.contains(w), "{w}: {out}");
    }
}

/// Compares `actual` with the golden file `tests/golden/<name>` (`TEML_BLESS=1` writes it
/// instead), failing with a unified diff.
pub fn golden(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("TEML_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == actual,
        "tests/golden/{name} differs (TEML_BLESS=1 to update):\n{}",
        unified_diff(&expected, actual, "golden", "generated")
    );
}

/// Data for `nest`'s tensors: small integers (from -6 to 6), so that sums are exact and any
/// reordering of them shows when two runs are compared.
pub fn small_integers(s: &State, nest: &Nest) -> teml::interp::Buffers {
    let mut k = 0u64;
    teml::interp::buffers_for(s, std::slice::from_ref(nest), &mut |_, _, dims| {
        let n: usize = dims.iter().product();
        (0..n)
            .map(|_| {
                k += 1;
                ((k * 7919) % 13) as f64 - 6.0
            })
            .collect()
    })
    .unwrap()
}

/// The number of cases of a property test: `default` (sized for CI's two cores), or
/// `PROPTEST_CASES` where set (a longer campaign: `PROPTEST_CASES=500 cargo test ...`).
pub fn proptest_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(default)
}

/// A C compiler at `dir/cc` that compiles, instead of any source that contains `grep`, that
/// source edited by the `sed` expression `sed` (at `-O3` only, with `only_o3`), and anything
/// else as gcc does: a wrong binary that verification must catch.
pub fn editing_cc(dir: &std::path::Path, grep: &str, sed: &str, only_o3: bool) -> std::path::PathBuf {
    let cc = dir.join("cc");
    let o3 = if only_o3 { "case \" $* \" in *\" -O3 \"*) ;; *) exec gcc \"$@\";; esac\n" } else { "" };
    std::fs::write(
        &cc,
        format!(
            "#!/bin/sh\nsrc=\nfor a in \"$@\"; do case \"$a\" in *.c) src=\"$a\";; esac; done\n{o3}\
             if [ -n \"$src\" ] && grep -q '{grep}' \"$src\"; then\n\
               sed '{sed}' \"$src\" > \"$src.wrong.c\"\n\
               args=; for a in \"$@\"; do case \"$a\" in *.c) args=\"$args $src.wrong.c\";; *) args=\"$args $a\";; esac; done\n\
               exec gcc $args\n\
             fi\n\
             exec gcc \"$@\"\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cc, std::fs::Permissions::from_mode(0o755)).unwrap();
    cc
}

/// Runs teml with `args` and `envs` (the kernel cache shared, the machine and lanes the
/// host's unless `envs` pins them): whether it succeeded, and its output.
pub fn teml_env(dir: &std::path::Path, envs: &[(&str, &str)], args: &[&str]) -> (bool, String) {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_teml"));
    c.args(args).env("TEML_CACHE_DIR", kernel_cache()).env("TEML_TUNING_DB", dir.join("tuning-db.jsonl"));
    c.env_remove("TEML_MACHINE").env_remove("TEML_VECTOR_BITS").env_remove("TEML_AMX_MODEL");
    for (k, v) in envs {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    (
        o.status.success(),
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)),
    )
}

/// Whether /proc/cpuinfo's flags list `flag`.
pub fn host_has(flag: &str) -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|l| l.split_whitespace().any(|f| f == flag))
}
