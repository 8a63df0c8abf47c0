//! `teml bench --quick`: every Table 1 kernel and every path runs and verifies (a smoke run;
//! timings are never asserted).

use std::process::Command;

/// `teml <args>` from the repository root with the shared kernel cache: it succeeded, and its
/// standard output is the JSON report.
fn quick_json(args: &[&str]) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(args)
        .env("TEML_CACHE_DIR", crate::common::kernel_cache())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&out).unwrap()
}

#[test]
fn the_quick_bench_runs_and_verifies_every_variant() {
    let v = quick_json(&["bench", "--quick", "--json", "--threads", "2"]);
    assert_eq!(v["ok"], true);
    let kernels = v["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 10);
    let mut paths = 0;
    for k in kernels {
        let vs = k["variants"].as_array().unwrap();
        assert_eq!(vs[0]["variant"], "untransformed", "{k}");
        assert_eq!(vs[0]["threads"], 1, "the baseline is sequential C: {k}");
        for x in vs {
            assert_eq!(x["verified"], true, "{x}");
            assert!(x["median_s"].as_f64().is_some_and(|t| t > 0.0), "{x}");
        }
        paths += vs.len() - 1;
    }
    assert!(paths >= 11, "Table 2 and Sec. 5.3 paths: {paths}");
    // The machine was probed at the start and at the end; every kernel has its roofline bound.
    let m = v["machine"].as_array().unwrap();
    assert_eq!(m.len(), 2, "{v}");
    assert!(m.iter().all(|p| p["peak_gflops"].as_f64().is_some_and(|x| x > 0.0)));
    assert!(
        kernels
            .iter()
            .all(|k| k["bound_s"].as_f64().is_some_and(|b| b > 0.0) && k["bytes"].as_u64() > Some(0))
    );
}

#[test]
fn an_unknown_kernel_is_refused() {
    let o = Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(["bench", "--quick", "--kernel", "matmul"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("error: --kernel: expected one of mm, tmm, bmm,"), "{err}");
}

/// Every PolyBench kernel of the repository through `teml bench --suite polybench --quick`, in
/// three parts (every third kernel), so that the test harness runs them side by side.
fn quick_polybench_part(part: usize) {
    const PARTS: usize = 3;
    let mut names: Vec<String> =
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/polybench"))
            .unwrap()
            .filter_map(|e| {
                let p = e.unwrap().path();
                p.extension()
                    .is_some_and(|x| x == "teml")
                    .then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
            })
            .collect();
    names.sort();
    let mine: Vec<&String> = names.iter().skip(part).step_by(PARTS).collect();
    // Every kernel, the time-tiled stencils (jacobi-2d, heat-3d, seidel-2d) included.
    let mut args: Vec<&str> =
        vec!["bench", "--suite", "polybench", "--quick", "--json", "--threads", "2", "--no-anchors"];
    for n in &mine {
        args.extend(["--kernel", n.as_str()]);
    }
    let o = Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(&args)
        .env("TEML_CACHE_DIR", crate::common::kernel_cache())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let kernels = v["kernels"].as_array().unwrap();
    // Each kernel of this part, with its untransformed baseline first.
    assert_eq!(kernels.len(), mine.len(), "{out}");
    for k in kernels {
        let vs = k["variants"].as_array().unwrap();
        assert_eq!(vs[0]["variant"], "untransformed", "{k}");
        for x in vs {
            assert_eq!(x["verified"], true, "{}: {x}", k["kernel"]);
        }
    }
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn the_quick_polybench_suite_runs_and_verifies_every_variant_part_1() {
    quick_polybench_part(0);
}

#[test]
fn the_quick_polybench_suite_runs_and_verifies_every_variant_part_2() {
    quick_polybench_part(1);
}

#[test]
fn the_quick_polybench_suite_runs_and_verifies_every_variant_part_3() {
    quick_polybench_part(2);
}

#[test]
fn a_kernel_of_another_suite_is_refused() {
    let o = Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(["bench", "--suite", "polybench", "--quick", "--kernel", "mm"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("error: --kernel: expected one of 2mm, 3mm, adi,"), "{err}");
}

/// A bench says at the start what it will run and about how long, prints each kernel's rows
/// as it finishes (plain lines off a terminal), appends them to the rows file, leaves the
/// finished ones there when interrupted, and `--resume` reruns only the missing kernels.
#[test]
fn a_bench_reports_as_it_goes_keeps_its_rows_when_interrupted_and_resumes() {
    let d = tempfile::tempdir().unwrap();
    let rows = d.path().join("rows.jsonl");
    let bench_to = |rows: &std::path::Path, kernels: &[&str], extra: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_teml"));
        c.args(["bench", "--quick", "--threads", "2", "--no-anchors", "--json", "--rows"])
            .arg(rows)
            .args(extra)
            .env("TEML_CACHE_DIR", crate::common::kernel_cache())
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        for k in kernels {
            c.args(["--kernel", k]);
        }
        c
    };
    let bench = |kernels: &[&str], extra: &[&str]| bench_to(&rows, kernels, extra);
    let o = bench(&["mm", "tmm"], &[]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.starts_with("teml bench: 2 kernels to run, expected about "), "{err}");
    assert!(
        err.contains("[1/2] mm\n") && err.contains("\nmm: untransformed ") && err.contains("\ntmm: "),
        "{err}"
    );
    let lines = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default().lines().count();
    assert_eq!(lines(&rows), 2);
    // resumed with one more kernel: only that one runs; the JSON has all three
    let o = bench(&["mm", "tmm", "bmm"], &["--resume"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("1 kernel to run") && err.contains("2 kept from") && err.contains("mm, tmm"),
        "{err}"
    );
    assert!(err.contains("[3/3] bmm") && !err.contains("[1/3] mm"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> =
        v["kernels"].as_array().unwrap().iter().map(|k| k["kernel"].as_str().unwrap()).collect();
    assert_eq!(names, ["mm", "tmm", "bmm"]);
    assert_eq!(lines(&rows), 3);
    // interrupted after its first kernel: the finished rows stay, each a whole JSON line
    let rows2 = d.path().join("rows2.jsonl");
    let mut c = bench_to(&rows2, &["mm", "tmm", "bmm", "mttkrp"], &[]);
    let mut child =
        c.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    let start = std::time::Instant::now();
    while lines(&rows2) == 0 && start.elapsed().as_secs() < 120 && child.try_wait().unwrap().is_none() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: a signal to the child this test spawned and has not waited for yet.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let _ = child.wait();
    let text = std::fs::read_to_string(&rows2).unwrap();
    assert!(!text.is_empty());
    for l in text.lines() {
        let row: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        assert!(row["result"]["kernel"].is_string() && row["wall_s"].is_number(), "{l}");
    }
}

/// `teml bench --suite precision --quick`: mm and the convolution in float, bf16 and int8 each
/// run and verify (untransformed and `teml auto`'s path), numpy's float32 beside the float
/// kernels where numpy is installed; every instruction probe has a figure where the host's
/// flags list its instruction, and says what the host lacks where they do not (printed: which
/// ran here and which were skipped); each kernel is bounded by its types' probe, and the bf16
/// and int8 kernels are compared with the float ones.
#[test]
fn the_quick_precision_suite_runs_every_type_beside_the_instruction_probes() {
    let d = tempfile::tempdir().unwrap();
    let rows = d.path().join("rows.jsonl");
    let v = quick_json(&[
        "bench",
        "--suite",
        "precision",
        "--quick",
        "--json",
        "--threads",
        "2",
        "--rows",
        rows.to_str().unwrap(),
    ]);
    assert_eq!(v["ok"], true);
    let kernels = v["kernels"].as_array().unwrap();
    let names: Vec<&str> = kernels.iter().map(|k| k["kernel"].as_str().unwrap()).collect();
    assert_eq!(names, ["mm_float", "mm_bf16", "mm_int8", "conv_float", "conv_bf16", "conv_int8"]);
    let numpy = std::process::Command::new("python3")
        .args(["-c", "import numpy"])
        .status()
        .is_ok_and(|s| s.success());
    for k in kernels {
        let name = k["kernel"].as_str().unwrap();
        let vs = k["variants"].as_array().unwrap();
        let variants: Vec<&str> = vs.iter().map(|x| x["variant"].as_str().unwrap()).collect();
        assert_eq!(&variants[..2], ["untransformed", "auto"], "{k}");
        if name.ends_with("_float") && numpy {
            assert!(variants.contains(&"numpy"), "numpy beside {name}: {k}");
        }
        for x in vs {
            assert_eq!(x["verified"], true, "{x}");
            assert!(x["median_s"].as_f64().is_some_and(|t| t > 0.0), "{x}");
        }
        let notes: Vec<&str> = k["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
        if !name.ends_with("_float") {
            let family = name.split('_').next().unwrap();
            assert!(
                notes
                    .iter()
                    .any(|n| n.starts_with("auto: ") && n.contains(&format!("{family}_float's auto path"))),
                "{name}: {notes:?}"
            );
        }
        if name.ends_with("_int8") && !notes.iter().any(|n| n.starts_with("% roofline against")) {
            assert!(
                notes.iter().any(|n| n.starts_with("no roofline bound: this host ran no probe")),
                "{notes:?}"
            );
        } else {
            assert!(k["bound_s"].as_f64().is_some_and(|b| b > 0.0), "{name}: {notes:?}");
        }
    }
    let flags = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("flags"))
        .map(|l| l.split(':').nth(1).unwrap_or("").split_whitespace().map(String::from).collect::<Vec<_>>())
        .unwrap_or_default();
    let has = |f: &str| flags.iter().any(|x| x == f);
    let probes = v["instructions"].as_array().unwrap();
    let want: [(&str, &[&str]); 6] = [
        ("vfmadd231pd", &[]),
        ("vfmadd231ps", &[]),
        ("vdpbf16ps", &["avx512_bf16"]),
        ("vpdpbusd", &["avx512_vnni"]),
        ("tdpbf16ps", &["amx_tile", "amx_bf16"]),
        ("tdpbusd", &["amx_tile", "amx_int8"]),
    ];
    assert_eq!(probes.len(), want.len(), "{probes:?}");
    for (p, (instruction, needs)) in probes.iter().zip(want) {
        assert_eq!(p["instruction"], instruction, "{p}");
        let present = needs.iter().all(|f| has(f)) || (instruction == "vpdpbusd" && has("avx_vnni"));
        if present {
            assert!(p["gops"].as_f64().is_some_and(|g| g > 0.0), "the host has {instruction}: {p}");
            eprintln!("probe {instruction}: ran here, {} G/s", p["gops"]);
        } else {
            let why = p["absent"].as_str().unwrap();
            let lacking: Vec<&str> = needs.iter().copied().filter(|f| !has(f)).collect();
            assert!(
                why.starts_with("this host (") && why.ends_with(&format!("lacks {}", lacking.join(" and "))),
                "{p}"
            );
            assert!(p["gops"].is_null(), "{p}");
            eprintln!("probe {instruction}: SKIPPED on this host ({why})");
        }
    }
}
