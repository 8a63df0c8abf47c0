//! Every command the README's quick start and the tutorial's lessons show runs as written,
//! with the real binary, in a fresh folder holding the repository's `examples/` and `scripts/`:
//! the lines of each ```sh block that start with `teml`, and each ```bash block's lines (the
//! calls of an exported kernel from C and Python). The README's install and `cargo` lines are
//! left out (the test runs inside `cargo test`). A lesson's commands run in order, in one
//! folder, so that each finds what the one before wrote (`tutorial-out/...`). Where a lesson
//! shows the output, the command must print its messages and verdicts as shown, and fail
//! exactly where it shows an `error:`.

use std::path::Path;
use std::process::Command;

/// One block of commands of a doc and the output the doc shows after it (the ```text block
/// that follows, if any).
struct Block {
    commands: Vec<String>,
    shown: Vec<String>,
}

/// The ```sh and ```bash blocks of `doc` with their shown output: of a ```sh block, the lines
/// that start with `teml`; of a ```bash block, every line but comments.
fn blocks(doc: &str) -> Vec<Block> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(doc)).unwrap();
    let mut out: Vec<Block> = Vec::new();
    let mut fence: Option<String> = None;
    let mut body: Vec<&str> = Vec::new();
    // Whether the last block closed was one of commands, with nothing but prose since.
    let mut after_commands = false;
    for line in text.lines() {
        match (&fence, line.trim_start().strip_prefix("```")) {
            (None, Some(kind)) => {
                fence = Some(kind.to_string());
                body.clear();
            }
            (Some(kind), Some(_)) => {
                match kind.as_str() {
                    "sh" | "bash" => {
                        let commands: Vec<String> = body
                            .iter()
                            .map(|l| l.trim())
                            .filter(|l| {
                                if kind == "sh" {
                                    l.starts_with("teml ")
                                } else {
                                    !l.is_empty() && !l.starts_with('#')
                                }
                            })
                            .map(String::from)
                            .collect();
                        after_commands = !commands.is_empty();
                        if after_commands {
                            out.push(Block { commands, shown: Vec::new() });
                        }
                    }
                    "text" if after_commands => {
                        out.last_mut().unwrap().shown = body.iter().map(|l| l.to_string()).collect();
                        after_commands = false;
                    }
                    _ => after_commands = false,
                }
                fence = None;
            }
            (Some(_), None) => body.push(line),
            (None, None) => {}
        }
    }
    out
}

/// The part of a shown line that must be printed as shown: a message (`error:`, `warning:`,
/// `note:`) up to an elision `...`; a kernel's verdict up to its evidence (`kernel mm (l) at
/// FILE:12:1: verified`); a check's summary. `None` for the rest (times, trees, C), which the
/// doc shows as an example.
fn must_print(shown: &str) -> Option<&str> {
    let l = shown.trim_end();
    if ["error:", "warning:", "note:"].iter().any(|p| l.starts_with(p)) || l.contains(": ok (") {
        return Some(l.split("...").next().unwrap().trim_end());
    }
    if l.starts_with("kernel ") {
        return Some(l.split(" (max").next().unwrap());
    }
    None
}

/// Runs `doc`'s commands in order in one fresh folder (at least `least` of them): each block
/// fails exactly where the output it shows has an `error:` line, and prints what that output's
/// messages and verdicts say.
fn run_doc(doc: &str, least: usize) {
    let blocks = blocks(doc);
    let count: usize = blocks.iter().map(|b| b.commands.len()).sum();
    assert!(count >= least, "{doc}: only {count} commands found");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    for sub in ["examples", "scripts", "stdlib", "bench"] {
        std::os::unix::fs::symlink(root.join(sub), dir.path().join(sub)).unwrap();
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_teml")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    for b in blocks {
        let fails = b.shown.iter().any(|l| l.starts_with("error:"));
        let mut printed = String::new();
        for (k, cmd) in b.commands.iter().enumerate() {
            let o = Command::new("bash")
                .args(["-c", cmd])
                .current_dir(dir.path())
                .env("PATH", &path)
                .env("TEML_CACHE_DIR", crate::common::kernel_cache())
                .env("TEML_HISTORY", dir.path().join("history"))
                .output()
                .unwrap();
            let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
            printed.push_str(&out);
            printed.push_str(&err);
            if fails && k + 1 == b.commands.len() {
                assert_eq!(
                    o.status.code(),
                    Some(1),
                    "{doc}: `{cmd}` should fail, as the doc shows:\n{out}{err}"
                );
            } else {
                assert!(o.status.success(), "{doc}: `{cmd}` failed ({}):\n{out}\n{err}", o.status);
            }
        }
        for want in b.shown.iter().filter_map(|l| must_print(l)) {
            assert!(
                printed.lines().any(|l| l.trim_end().starts_with(want)),
                "{doc}: `{}` does not print what the doc shows:\n  {want}\nit printed:\n{printed}",
                b.commands.join("; ")
            );
        }
    }
}

#[test]
fn the_readme_quick_start_runs_as_written() {
    run_doc("README.md", 5);
}

#[test]
fn lesson_01_runs_as_written() {
    run_doc("docs/tutorial/01-first-kernel.md", 4);
}

#[test]
fn lesson_02_runs_as_written() {
    run_doc("docs/tutorial/02-transformations-and-legality.md", 3);
}

#[test]
fn lesson_03_runs_as_written() {
    run_doc("docs/tutorial/03-rhai.md", 2);
}

#[test]
fn lesson_04_runs_as_written() {
    run_doc("docs/tutorial/04-repl.md", 2);
}

#[test]
fn lesson_05_runs_as_written() {
    run_doc("docs/tutorial/05-auto.md", 2);
}

#[test]
fn lesson_06_runs_as_written() {
    run_doc("docs/tutorial/06-tune.md", 4);
}

#[test]
fn lesson_07_runs_as_written() {
    run_doc("docs/tutorial/07-export.md", 4);
}

#[test]
fn lesson_08_runs_as_written() {
    run_doc("docs/tutorial/08-bench-and-slurm.md", 3);
}

/// The lessons' runnable files, at their `# test:` sizes, verify (the commands above run them
/// as the lessons write them).
#[test]
fn every_lesson_is_a_numbered_doc_with_its_commands() {
    let lessons: Vec<String> = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/tutorial"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.as_bytes().first().is_some_and(u8::is_ascii_digit))
        .collect();
    assert_eq!(lessons.len(), 8, "{lessons:?}: a new lesson needs its test above");
}
