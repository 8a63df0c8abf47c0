//! Every example kernel (Table 1) and every optimization path (Table 2, Sec. 5.3) runs with the
//! real binary and verifies, at the small sizes its `# test:` line gives.

use std::path::{Path, PathBuf};
use std::process::Command;

fn files(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut out: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("teml" | "rhai")))
        .collect();
    out.sort();
    out
}

fn test_args(path: &Path) -> Vec<String> {
    let src = std::fs::read_to_string(path).unwrap();
    let line = src
        .lines()
        .find_map(|l| l.strip_prefix("# test:").or_else(|| l.strip_prefix("// test:")))
        .unwrap_or_else(|| panic!("{}: no `# test:` line with small sizes", path.display()));
    line.split_whitespace().map(String::from).collect()
}

fn run_all(dir: &str, timed: bool) -> usize {
    let list = files(dir);
    assert!(!list.is_empty(), "no programs in {dir}");
    for f in &list {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_teml"));
        cmd.arg("run")
            .arg(f)
            .args(test_args(f))
            .args(["--json", "--threads", "2"])
            .env("TEML_CACHE_DIR", crate::common::kernel_cache());
        if timed {
            cmd.args(["--time", "--min-time", "0.002"]);
        }
        let o = cmd.output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{}: {err}\n{out}", f.display());
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{}: {e}: {out}", f.display()));
        let kernels = v["kernels"].as_array().unwrap();
        assert!(!kernels.is_empty(), "{}", f.display());
        for k in kernels {
            assert_eq!(k["verified"], true, "{}: {k}", f.display());
            if timed {
                assert!(k["speedup"].as_f64().is_some_and(|s| s > 0.0), "{}: {k}", f.display());
            }
        }
    }
    list.len()
}

#[test]
fn table1_kernels_run_and_verify() {
    assert!(run_all("examples", false) >= 10);
}

#[test]
fn paper_figures_run_and_verify() {
    run_all("examples/paper", false);
}

#[test]
fn pluto_paths_run_verify_and_report_speedups() {
    assert_eq!(run_all("scripts/pluto", true), 8);
}

#[test]
fn sec53_paths_run_verify_and_report_speedups() {
    assert_eq!(run_all("scripts/paper", true), 4);
}

#[test]
fn best_paths_run_and_verify() {
    assert_eq!(run_all("scripts/best", true), 11);
}

#[test]
fn tuning_spaces_run_and_verify_at_their_first_choices() {
    assert_eq!(run_all("scripts/tune", false), 11);
}

#[test]
fn tuned_paths_replay_verify_and_report_speedups() {
    assert_eq!(run_all("scripts/tuned", true), 11);
}

/// The `teml run ...` commands an example's header gives (in backticks, or alone on a comment
/// line before a parenthesized note).
fn header_commands(path: &Path) -> Vec<Vec<String>> {
    let src = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    for line in src.lines().take_while(|l| l.starts_with('#') || l.starts_with("//")) {
        let mut rest = line;
        while let Some(at) = rest.find("teml run ") {
            let cmd = &rest[at..];
            let end = if rest[..at].ends_with('`') {
                cmd.find('`').unwrap_or(cmd.len())
            } else {
                cmd.find('(').unwrap_or(cmd.len())
            };
            out.push(cmd[..end].split_whitespace().skip(1).map(String::from).collect());
            rest = &cmd[end..];
        }
    }
    out
}

/// The header's commands, as written, at the file's `# test:` sizes (each `-D` of the test line
/// replaces the command's own for that constant): what they do is checked, not how long the
/// full size takes.
#[test]
fn header_commands_of_the_examples_work_as_written() {
    let mut ran = 0;
    for f in files("examples").iter().chain(&files("examples/paper")) {
        for written in header_commands(f) {
            let small = test_args(f);
            let name = |def: &str| def.split('=').next().unwrap_or("").to_string();
            let tested: Vec<String> = small.chunks(2).filter(|p| p[0] == "-D").map(|p| name(&p[1])).collect();
            let mut args: Vec<String> = Vec::new();
            let mut k = 0;
            while k < written.len() {
                if written[k] == "-D" && written.get(k + 1).is_some_and(|d| tested.contains(&name(d))) {
                    k += 2;
                    continue;
                }
                args.push(written[k].clone());
                k += 1;
            }
            let o = Command::new(env!("CARGO_BIN_EXE_teml"))
                .args(&args)
                .args(&small)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .env("TEML_CACHE_DIR", crate::common::kernel_cache())
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "{}: `teml {}` failed:\n{err}", f.display(), args.join(" "));
            ran += 1;
        }
    }
    assert!(ran >= 3, "only {ran} header commands found");
}

#[test]
fn tutorial_files_run_and_verify() {
    assert_eq!(run_all("examples/tutorial", false), 5);
}
