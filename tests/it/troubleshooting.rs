//! docs/troubleshooting.md shows each failure's message as the program prints it: for a sample
//! of failures, the real binary's output has a line that matches the page's template (its
//! `{placeholders}` standing for any text).

use std::path::Path;
use std::process::Command;

/// The message templates of the page: the lines of each ```text block after a **Message.**.
fn templates() -> Vec<String> {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/troubleshooting.md"))
        .unwrap();
    let mut out = Vec::new();
    let mut rest = doc.as_str();
    while let Some(at) = rest.find("**Message.**") {
        rest = &rest[at..];
        let Some(open) = rest.find("```text\n") else { break };
        let body = &rest[open + 8..];
        let end = body.find("```").unwrap();
        out.extend(body[..end].lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()));
        rest = &body[end..];
    }
    out
}

/// Whether `line` is `template` with each `{...}` replaced by some text.
fn matches(template: &str, line: &str) -> bool {
    let mut pieces = Vec::new();
    let mut t = template;
    while let Some(open) = t.find('{') {
        pieces.push(&t[..open]);
        t = t[open..].find('}').map_or("", |close| &t[open + close + 1..]);
    }
    pieces.push(t);
    let mut at = match line.find(pieces[0]) {
        Some(i) => i + pieces[0].len(),
        None => return false,
    };
    for p in &pieces[1..] {
        match line[at..].find(p) {
            Some(i) => at += i + p.len(),
            None => return false,
        }
    }
    true
}

/// Runs `teml args` (in `dir`, or the repository) and checks that each template starting with
/// one of `wanted` is printed.
fn prints(dir: Option<&Path>, args: &[&str], wanted: &[&str]) {
    let o = Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(args)
        .current_dir(dir.unwrap_or(Path::new(env!("CARGO_MANIFEST_DIR"))))
        .env("TEML_CACHE_DIR", crate::common::kernel_cache())
        .output()
        .unwrap();
    let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let all = templates();
    for w in wanted {
        let t = all
            .iter()
            .find(|t| t.starts_with(w))
            .unwrap_or_else(|| panic!("no template `{w}...` in the page"));
        assert!(
            out.lines().any(|l| matches(t, l)),
            "`teml {}` prints no line of the page's\n  {t}\n{out}",
            args.join(" ")
        );
    }
}

#[test]
fn the_pages_messages_are_the_ones_the_program_prints() {
    assert!(templates().len() >= 10);
    // a wrong result reaches verification (--unchecked)
    prints(
        None,
        &[
            "run",
            "examples/tutorial/errors/02-illegal-interchange.teml",
            "-D",
            "N=8",
            "--unchecked",
            "--threads",
            "1",
        ],
        &["kernel {name}: MISMATCH", "first mismatch:", "error: kernel {k} does not match"],
    );
    // a refused transformation, with its witness
    prints(
        None,
        &["check", "examples/tutorial/errors/02-illegal-interchange.teml", "-D", "N=8"],
        &["error: {builtin}: illegal:"],
    );
    // argument errors
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("lvl.teml"),
        "A = tensor([8, 8])\nB = eq(A, [i, j] -> [i, j])\nl = build(B)\nm = stripmine(l, 7, 4)\n",
    )
    .unwrap();
    prints(
        Some(d.path()),
        &["check", "lvl.teml"],
        &["error: {builtin}: argument {pos} ({role}): level out of range"],
    );
    std::fs::write(d.path().join("id.teml"), "A = tensor([8])\nB = eq(Q, [i] -> [i])\n").unwrap();
    prints(
        Some(d.path()),
        &["check", "id.teml"],
        &["error: {builtin}: argument {pos} ({role}): unknown identifier"],
    );
    // -o of a tensor stored per iteration
    std::fs::write(
        d.path().join("s.teml"),
        "E = 4\nN = 3\nA = tensor([N, N])\nu = tensor([E, N, N, N])\n\
         t = einsum(\"ad,edbc->eabc\", [A, u])\nw = einsum(\"bd,eadc->eabc\", [A, t])\n\
         l1 = build(t)\nl2 = build(w)\nf = fuse_outer(l1, l2, 1)\ns = store_at(f, 1, t)\ncodegen(s)\n",
    )
    .unwrap();
    prints(Some(d.path()), &["run", "s.teml", "-q", "-o", "t=t.npy"], &["`{t}` is stored per iteration"]);
    // a space of one point
    std::fs::write(
        d.path().join("one.rhai"),
        "let A = tensor([8]);\nlet B = eq(A, [i], [i]);\ncodegen(build(B));\n",
    )
    .unwrap();
    prints(
        Some(d.path()),
        &["tune", "one.rhai", "--budget", "1", "--threads", "1", "--no-db", "--out", "o"],
        &["note: {space} asks for no param"],
    );
}
