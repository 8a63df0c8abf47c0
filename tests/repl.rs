//! The REPL through a pseudo-terminal: declare tensors, build, transform, look at the C, time
//! it, make mistakes, and keep working.

use rexpect::session::{PtySession, spawn_command};
use std::process::Command;

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

#[test]
fn a_session_survives_its_errors() -> R {
    let d = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_teml"));
    cmd.arg("repl")
        .env("TEML_HISTORY", d.path().join("history.txt"))
        .env("TEML_CACHE_DIR", d.path().join("cache"))
        .env("OMP_NUM_THREADS", "2");
    let mut p = spawn_command(cmd, Some(30_000))?;
    let t = "teml> ";
    p.exp_string(t)?;
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
