//! The REPL through a pseudo-terminal: declare tensors, build, transform, look at the C, time
//! it, make mistakes, and keep working.

use rexpect::session::{PtySession, spawn_command};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

type R = Result<(), rexpect::error::Error>;

/// Sends a line, waits for `expect` in its output, then for the next prompt (the line editor
/// drops input typed before it is ready). rexpect reads bytes as Latin-1: expectations are ASCII.
fn step(p: &mut PtySession, line: &str, expect: &str, prompt: &str) -> R {
    p.send_line(line)?;
    if !expect.is_empty() {
        p.exp_string(expect)?;
    }
    p.exp_string(prompt)?;
    Ok(())
}

fn repl(d: &tempfile::TempDir) -> Result<PtySession, rexpect::error::Error> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_teml"));
    cmd.arg("repl")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("TEML_HISTORY", d.path().join("history.txt"))
        .env("TEML_CACHE_DIR", d.path().join("cache"))
        .env("OMP_NUM_THREADS", "2");
    let mut p = spawn_command(cmd, Some(60_000))?;
    p.exp_string("teml> ")?;
    Ok(p)
}

#[test]
fn a_session_survives_its_errors() -> R {
    let d = tempfile::tempdir().unwrap();
    let mut p = repl(&d)?;
    let t = "teml> ";
    step(&mut p, "A = tensor([32, 32])", "A: tensor [32, 32] of double", t)?;
    step(&mut p, "B = tensor([32, 32])", "B: tensor [32, 32] of double", t)?;
    step(&mut p, "C = add(A, B, [[i, j], [i, j]] -> [i, j])", "C: C[i][j] = A[i][j] + B[i][j]", t)?;
    step(&mut p, "l = build(C)", "for i in [0, 31]", t)?;
    step(&mut p, "l2 = interchange(l, 1, 2)", "for j in [0, 31]", t)?;
    // multi-line input: an open bracket continues on the next line
    p.send_line("l3 = parallelize(l2,")?;
    step(&mut p, "  1)", "parallel", t)?;
    step(&mut p, ":c l3", "for (int j = 0; j <= 31; j++)", t)?;
    step(&mut p, ":history l3", "l3 = parallelize(l2, 1)", t)?;
    p.send_line(":time l3")?;
    p.exp_string("verified")?;
    p.exp_string("speedup")?;
    p.exp_string(t)?;
    // mistakes: unknown identifier, bad level, unknown command, parse error
    step(&mut p, "X = eq(Q, [i] -> [i])", "unknown identifier `Q`", t)?;
    step(&mut p, "l4 = stripmine(l3, 7, 4)", "level out of range", t)?;
    step(&mut p, ":frobnicate", "unknown command", t)?;
    step(&mut p, "B = eq(A, [i j] -> [j, i])", "<repl>:1:", t)?;
    // ... and the state is intact
    step(&mut p, ":tree l3", "for j in [0, 31]  parallel", t)?;
    step(&mut p, ":state", "l3: a loop nest of depth 2", t)?;
    // the other syntax shares the state
    step(&mut p, ":rhai", "Rhai syntax", "rhai> ")?;
    step(&mut p, "let l5 = stripmine(l3, 2, 8);", "", "rhai> ")?;
    step(&mut p, ":teml", "paper syntax", t)?;
    step(&mut p, ":tree l5", "for io in [0, 3]", t)?;
    let saved = d.path().join("s.json");
    step(&mut p, &format!(":save {}", saved.display()), "saved", t)?;
    p.send_line(":quit")?;
    p.exp_eof()?;
    let s = teml::ir::State::from_json(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert!(s.get("l5").is_some() && s.get("C").is_some());
    assert!(
        std::fs::read_to_string(d.path().join("history.txt")).unwrap().contains("l2 = interchange(l, 1, 2)")
    );
    Ok(())
}

/// The pid of the worker process running the timed kernel of the REPL started by [`repl`] with
/// `d`, once it has started; panics after `limit`. The REPL prints nothing before a kernel
/// runs, so the test looks for the process (Linux `/proc`): `teml __worker JOB` whose
/// environment holds this REPL's `TEML_CACHE_DIR` (the other tests run REPLs and workers of
/// their own) and whose job has timing: `:time` of a large kernel first verifies it at a
/// reduced size, in a short untimed run, and the timed run comes after.
fn timed_worker(d: &tempfile::TempDir, limit: Duration) -> u32 {
    let env = format!("TEML_CACHE_DIR={}", d.path().join("cache").display());
    let start = Instant::now();
    loop {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
            // Any of these reads fails once the process has gone: skip it.
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            if args.get(1) != Some(&teml::runtime::WORKER_ARG.as_bytes()) {
                continue;
            }
            let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
            if !environ.split(|b| *b == 0).any(|v| v == env.as_bytes()) {
                continue;
            }
            let job = args.get(2).and_then(|a| std::fs::read(Path::new(std::ffi::OsStr::from_bytes(a))).ok());
            let job: Option<serde_json::Value> = job.and_then(|j| serde_json::from_slice(&j).ok());
            if job.is_some_and(|j| j["timing"].is_object()) {
                return pid;
            }
        }
        assert!(start.elapsed() < limit, "no timed kernel of the REPL ran within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Ctrl-C during a long `:time` stops the kernel (its worker), not the session: the bindings
/// survive and the next command runs.
#[test]
fn ctrl_c_stops_the_kernel_and_the_session_goes_on() -> R {
    let d = tempfile::tempdir().unwrap();
    let mut p = repl(&d)?;
    let t = "teml> ";
    step(&mut p, "N = 2000", "", t)?;
    step(&mut p, "A = tensor([N, N])", "A: tensor", t)?;
    step(&mut p, "B = tensor([N, N])", "B: tensor", t)?;
    step(&mut p, "C = contract(A, B, [2, 1])", "C:", t)?;
    step(&mut p, "l = build(C)", "for", t)?;
    p.send_line(":time l")?;
    // Ctrl-C once the kernel runs (untransformed, 2000^3 multiply-adds, at least four timed
    // runs: many seconds), not while it compiles or is verified at the reduced size.
    let worker = timed_worker(&d, Duration::from_secs(120));
    p.send_control('c')?;
    p.exp_string("interrupted (Ctrl-C): the kernel was stopped")?;
    p.exp_string(t)?;
    assert!(!Path::new(&format!("/proc/{worker}")).exists(), "the worker {worker} still runs");
    step(&mut p, ":state", "l: a loop nest of depth 3", t)?;
    // the session still compiles and runs kernels
    step(&mut p, "D = tensor([64])", "D: tensor", t)?;
    step(&mut p, "E = eq(D, [i] -> [i])", "E:", t)?;
    step(&mut p, "m = build(E)", "for", t)?;
    step(&mut p, ":run m", "verified", t)?;
    p.send_line(":quit")?;
    p.exp_eof()?;
    Ok(())
}

/// Lines typed while a kernel runs are kept and run after it.
#[test]
fn lines_typed_while_a_kernel_runs_are_kept() -> R {
    let d = tempfile::tempdir().unwrap();
    let mut p = repl(&d)?;
    let t = "teml> ";
    step(&mut p, "A = tensor([256, 256])", "A: tensor", t)?;
    step(&mut p, "B = eq(A, [i, j] -> [j, i])", "B:", t)?;
    step(&mut p, "l = build(B)", "for", t)?;
    p.send_line(":time l")?;
    p.send_line("X = tensor([7])")?;
    p.send_line("Y = tensor([9])")?;
    p.exp_string("speedup")?;
    p.exp_string("X: tensor [7] of double")?;
    p.exp_string("Y: tensor [9] of double")?;
    p.exp_string(t)?;
    step(&mut p, ":state", "Y: the tensor `Y` [9]", t)?;
    p.send_line(":quit")?;
    p.exp_eof()?;
    Ok(())
}

/// `:load FILE -D`, `:diff`, `:undo`/`:redo`, and `:export` whose file `teml run` replays to
/// the same C.
#[test]
fn load_with_constants_diff_undo_redo_and_export() -> R {
    let d = tempfile::tempdir().unwrap();
    let mut p = repl(&d)?;
    let t = "teml> ";
    step(&mut p, ":load examples/mm.teml -D N=16", "loaded examples/mm.teml", t)?;
    step(&mut p, ":state", "N = 16", t)?;
    step(&mut p, "l2 = interchange(l, 2, 3)", "for", t)?;
    p.send_line(":diff l l2")?;
    p.exp_string("--- l (tree)")?;
    p.exp_string("+++ l2 (tree)")?;
    p.exp_string("--- l.c")?;
    p.exp_string("+++ l2.c")?;
    p.exp_string("@@")?;
    p.exp_string(t)?;
    step(&mut p, "l3 = parallelize(l2, 1)", "parallel", t)?;
    step(&mut p, ":undo", "undid `l3 = parallelize(l2, 1)`", t)?;
    step(&mut p, ":tree l3", "unknown identifier `l3`", t)?;
    step(&mut p, ":undo", "undid `l2 = interchange(l, 2, 3)`", t)?;
    step(&mut p, ":redo", "redid `l2 = interchange(l, 2, 3)`", t)?;
    step(&mut p, ":redo", "redid `l3 = parallelize(l2, 1)`", t)?;
    step(&mut p, ":redo", "nothing to redo", t)?;
    step(&mut p, ":tree l3", "parallel", t)?;
    // a Rhai line is exported from its value (the nest's history)
    step(&mut p, ":rhai", "Rhai syntax", "rhai> ")?;
    step(&mut p, "let l4 = stripmine(l3, 3, 4);", "", "rhai> ")?;
    step(&mut p, ":teml", "paper syntax", t)?;
    step(&mut p, "codegen(l4)", "kernel", t)?;
    let out = d.path().join("session.teml");
    step(&mut p, &format!(":export {}", out.display()), "exported", t)?;
    // the nest as a library: verified first, then its header and libraries
    let lib = d.path().join("lib");
    step(&mut p, &format!(":export-kernel l4 {}", lib.display()), "l4: verified, exported", t)?;
    step(&mut p, ":export-kernel l4", "expected a loop nest and a directory", t)?;
    p.send_line(":c l4")?;
    let shown = p.exp_string(t)?.replace('\r', "");
    p.send_line(":quit")?;
    p.exp_eof()?;

    let run = Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(["run", "--no-run"])
        .arg(&out)
        .env("TEML_CACHE_DIR", d.path().join("cache"))
        .output()
        .unwrap();
    let exported = std::fs::read_to_string(&out).unwrap();
    assert!(run.status.success(), "{exported}\n{}", String::from_utf8_lossy(&run.stderr));
    let h = std::fs::read_to_string(d.path().join("lib/l4.h")).unwrap();
    assert!(
        h.contains("int l4(") && h.contains("l4 = stripmine(") && h.contains("a teml REPL session"),
        "{h}"
    );
    assert!(d.path().join("lib/libl4.so").is_file() && d.path().join("lib/l4.py").is_file());
    let c = String::from_utf8_lossy(&run.stdout).to_string();
    assert!(exported.contains("N = 16") && exported.contains("l4 = stripmine(l3, 3, 4)"), "{exported}");
    let body = |s: &str| {
        s.lines().filter(|l| !l.trim().is_empty()).map(str::trim_end).collect::<Vec<_>>().join("\n")
    };
    // the C alone: from its first line to its last brace (the terminal's escapes around it cut)
    let shown = &shown[shown.find("/* Generated").expect("C from :c l4")..=shown.rfind('}').unwrap()];
    assert!(body(&c).contains(&body(shown)), "REPL :c l4\n{shown}\n--- teml run --no-run\n{c}");
    Ok(())
}

/// The transformations of where data lives (`in_place`, `pad`, `store_at`) in the REPL: the
/// tree and the C compared by `:diff`, a refusal with its witness that keeps the session.
#[test]
fn diff_shows_where_data_lives() -> R {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("add.teml");
    std::fs::write(
        &f,
        "N = 16\nx = tensor([N, N])\nM = tensor([N, N])\ny = add(x, M, [[i, j], [i, j]] -> [i, j])\nl = build(y)\n\
         z = eq(x, [i, j] -> [j, i])\nk = build(z)\n",
    )
    .unwrap();
    let mut p = repl(&d)?;
    let t = "teml> ";
    step(&mut p, &format!(":load {}", f.display()), "loaded", t)?;
    step(&mut p, "l1 = in_place(l, y, x)", "in place: y is stored over x", t)?;
    p.send_line(":diff l l1")?;
    p.exp_string("+in place: y is stored over x")?;
    p.exp_string("+/* in place: `x` holds x at entry and y at exit */")?;
    p.exp_string(t)?;
    step(&mut p, "l2 = pad(l1, M, 2, 8)", "layout M: pad", t)?;
    p.send_line(":diff l1 l2")?;
    p.exp_string("+layout M: pad")?;
    p.exp_string("teml_M_layout")?;
    p.exp_string(t)?;
    step(&mut p, "k1 = in_place(k, z, x)", "would overwrite a value still to be read", t)?;
    step(&mut p, ":tree l2", "in place: y is stored over x", t)?;
    p.send_line(":quit")?;
    p.exp_eof()?;
    Ok(())
}

/// The REPL warns about a forgotten sum at the line that makes it, and keeps the statement.
#[test]
fn the_repl_warns_about_a_forgotten_sum() {
    let mut r = teml::repl::Repl::new(teml::ir::State::new().with_const("N", 4), teml::repl::Mode::Teml);
    for line in ["X = tensor([N, N])", "W = tensor([N, N])"] {
        r.handle(line).unwrap();
    }
    let msg = r.handle("Y = mul(X, W, [[i, k], [k, j]] -> [i, j])").unwrap();
    assert!(msg.contains("warning: <repl>:1:5: `k` is neither in the result nor summed"), "{msg}");
    assert!(r.handle(":tree Y").is_ok());
    let msg = r.handle("C = contract(X, W, [2, 1])").unwrap();
    assert!(!msg.contains("warning"), "{msg}");
}

/// `result(T)` and `temporary(T)` in the REPL, in both syntaxes: a declared result refuses
/// `store_at` at its line, and the session goes on.
#[test]
fn results_and_temporaries_are_declared_in_the_repl() -> R {
    let d = tempfile::tempdir().unwrap();
    let mut p = repl(&d)?;
    let t = "teml> ";
    step(&mut p, "A = tensor([4, 4])", "A: tensor", t)?;
    step(&mut p, "u = tensor([3, 4])", "u: tensor", t)?;
    step(&mut p, "s = einsum(\"ad,ed->ea\", [A, u])", "s: ", t)?;
    step(&mut p, "w = einsum(\"ad,ed->ea\", [A, s])", "w: ", t)?;
    step(&mut p, "l1 = build(s)", "for e in", t)?;
    step(&mut p, "l2 = build(w)", "for e in", t)?;
    step(&mut p, "f = fuse_outer(l1, l2, 1)", "for e in", t)?;
    step(&mut p, "result(s)", "", t)?;
    step(&mut p, "g = store_at(f, 1, s)", "declared a result", t)?;
    step(&mut p, ":rhai", "Rhai syntax", "rhai> ")?;
    step(&mut p, "temporary(s);", "", "rhai> ")?;
    step(&mut p, "let g = store_at(f, 1, s);", "store_at(s)", "rhai> ")?;
    step(&mut p, ":teml", "paper syntax", t)?;
    step(&mut p, ":tree g", "store_at(s)", t)?;
    p.send_line(":quit")?;
    p.exp_eof()?;
    Ok(())
}
