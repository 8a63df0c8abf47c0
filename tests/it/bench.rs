//! `teml bench --quick`: every Table 1 kernel and every path runs and verifies (a smoke run;
//! timings are never asserted).

use std::process::Command;

#[test]
fn the_quick_bench_runs_and_verifies_every_variant() {
    let o = Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(["bench", "--quick", "--json", "--threads", "2"])
        .env("TEML_CACHE_DIR", crate::common::kernel_cache())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
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
