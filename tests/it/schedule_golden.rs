//! Golden spaces and paths: `teml auto --no-run` on every kernel `teml bench` runs (the paper's
//! ten and PolyBench's thirty at the bench's sizes, the held-out kernels at their own), planned
//! for pinned machines (`TEML_MACHINE`), compared with `tests/golden/schedule/`. A change to the
//! scheduler that changes a generated space or an auto path shows here as a diff; rewrite the
//! files with `TEML_BLESS=1 cargo test --profile ci --test it schedule_golden::` and read the
//! diff before committing it.

use crate::common::golden;
use std::path::Path;
use std::process::Command;

/// The machines the golden files are planned for: a 2-core AVX-512 machine (Zen 4 or 5, a Xeon)
/// and a 2-core AVX2 one (Zen 3: 16 vector registers).
const AVX512: &str = "512-bit vectors, 32 vector registers, 2 cores, L1 48 KiB, L2 1024 KiB, L3 32768 KiB";
const AVX2: &str = "256-bit vectors, 16 vector registers, 2 cores, L1 32 KiB, L2 512 KiB, L3 32768 KiB";

/// `teml auto --no-run` on `rel` (under the repository) with `sizes`, for `machine`: the path
/// and the space, with the one host-dependent line (the host's description) replaced.
fn auto_files(rel: &str, sizes: &[(&str, i64)], machine: &str) -> (String, String) {
    let d = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    let name = src.file_name().unwrap().to_str().unwrap().to_string();
    std::fs::copy(&src, d.path().join(&name)).unwrap();
    let mut args = vec!["auto".to_string(), name.clone()];
    for (k, v) in sizes {
        args.extend(["-D".to_string(), format!("{k}={v}")]);
    }
    args.extend(["--no-run", "--no-db", "--out", "out"].map(String::from));
    let o = Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(&args)
        .current_dir(d.path())
        .env("TEML_MACHINE", machine)
        .env_remove("TEML_VECTOR_BITS")
        .env("TEML_TUNING_DB", d.path().join("db.jsonl"))
        .output()
        .unwrap();
    let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "teml {}: {out}", args.join(" "));
    let host = teml::runtime::machine::Machine::host().host_line();
    let read =
        |f: &str| std::fs::read_to_string(d.path().join("out").join(f)).unwrap().replace(&host, "<host>");
    (read("auto.teml"), read("space.rhai"))
}

/// Checks the golden files of `kernels` (each a file under `dir` and its sizes) for `machine`,
/// named `<prefix><kernel>.auto.teml` and `.space.rhai`; every kernel is checked before the
/// first difference fails the test.
fn check(dir: &str, kernels: &[(&str, Vec<(&str, i64)>)], machine: &str, prefix: &str) {
    let mut failed = Vec::new();
    for (k, sizes) in kernels {
        let (path, space) = auto_files(&format!("{dir}/{k}.teml"), sizes, machine);
        for (suffix, text) in [("auto.teml", path), ("space.rhai", space)] {
            let name = format!("schedule/{prefix}{k}.{suffix}");
            if let Err(e) = std::panic::catch_unwind(|| golden(&name, &text)) {
                failed.push(e.downcast_ref::<String>().cloned().unwrap_or_else(|| name.clone()));
            }
        }
    }
    assert!(failed.is_empty(), "{} golden files differ:\n{}", failed.len(), failed.join("\n"));
}

fn sized(
    table: &'static [(&'static str, &'static [(&'static str, i64)])],
) -> Vec<(&'static str, Vec<(&'static str, i64)>)> {
    table.iter().map(|(k, s)| (*k, s.to_vec())).collect()
}

#[test]
fn the_paper_kernels_spaces_and_paths_are_as_blessed() {
    let kernels = sized(teml::suite::SIZES);
    assert_eq!(kernels.len(), teml::suite::KERNELS.len());
    check("examples", &kernels, AVX512, "");
    check("examples", &kernels, AVX2, "avx2/");
}

#[test]
fn the_polybench_kernels_spaces_and_paths_are_as_blessed() {
    let kernels = sized(teml::suite::POLYBENCH_SIZES);
    assert_eq!(kernels.len(), teml::suite::POLYBENCH.len());
    check("examples/polybench", &kernels, AVX512, "polybench/");
}

#[test]
fn the_held_out_kernels_spaces_and_paths_are_as_blessed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/heldout");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".teml").map(String::from))
        .collect();
    names.sort();
    assert!(names.len() >= 20, "{names:?}");
    let kernels: Vec<(&str, Vec<(&str, i64)>)> = names.iter().map(|k| (k.as_str(), Vec::new())).collect();
    check("bench/heldout", &kernels, AVX512, "heldout/");
}
