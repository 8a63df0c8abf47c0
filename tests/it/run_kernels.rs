//! End to end: every core transformation, compiled with the system C compiler, run in a
//! worker process on real data and compared with the reference interpreter.

use crate::common::*;
use teml::ir::{KernelRequest, Name, State};
use teml::pipeline::{RunOptions, run_request};
use teml::runtime::Timing;

fn opts(dir: &std::path::Path) -> RunOptions {
    RunOptions {
        worker: Some(env!("CARGO_BIN_EXE_teml").into()),
        cache_dir: Some(dir.to_path_buf()),
        threads: Some(2),
        ..RunOptions::default()
    }
}

fn request(s: &State, names: &[&str]) -> KernelRequest {
    KernelRequest {
        names: names.iter().map(|n| Name::from(*n)).collect(),
        nests: names.iter().map(|n| nest(s, n)).collect(),
        ..Default::default()
    }
}

fn verify(s: &State, names: &[&str]) -> teml::pipeline::KernelReport {
    let dir = tempfile::tempdir().unwrap();
    let r =
        run_request(s, &request(s, names), 0, &opts(dir.path())).unwrap_or_else(|e| panic!("{names:?}: {e}"));
    assert!(r.verified, "{names:?}: {}", r.summary());
    r
}

#[test]
fn every_core_transformation_verifies() {
    let s = matmul(13, 7, 9);
    let s = run(&s, "sm", "stripmine", vec![id("l"), int(1), int(4)]);
    let s = run(&s, "ic", "interchange", vec![id("l"), int(2), int(3)]);
    let s = run(&s, "ur", "unroll", vec![id("l"), int(3)]);
    let s = run(&s, "u1", "unroll", vec![id("l"), int(1)]);
    let s = run(&s, "fi", "fuse_inner", vec![id("u1"), int(1)]);
    let s = run(&s, "pa", "parallelize", vec![id("sm"), int(1)]);
    let s = run(&s, "ve", "vectorize", vec![id("ic"), int(3)]);
    for v in ["l", "sm", "ic", "ur", "u1", "fi", "pa", "ve"] {
        verify(&s, &[v]);
    }
}

#[test]
fn parallel_and_simd_reduction_loops_verify() {
    let s = matmul(6, 300, 5);
    let s = run(&s, "pk", "parallelize", vec![id("l"), int(3)]);
    let s = run(&s, "vk", "vectorize", vec![id("l"), int(3)]);
    let s = run(&s, "both", "vectorize", vec![id("pk"), int(3)]);
    for v in ["pk", "vk", "both"] {
        verify(&s, &[v]);
    }
}

#[test]
fn fuse_outer_and_contraction_accumulators_verify() {
    // A = B x D (a contraction: zeroed first), then E = A * A, fused at level 2.
    let s = State::new();
    let s = run(&s, "B", "tensor", vec![shape("6, 5")]);
    let s = run(&s, "D", "tensor", vec![shape("5, 7")]);
    let s = run(&s, "t", "vcontract", vec![id("B"), id("D"), list(vec![int(2), int(1)])]);
    let s = run(&s, "A", "eq", vec![id("t"), none(), its("i1, i2")]);
    let s = run(&s, "C", "tensor", vec![shape("6, 7")]);
    let s =
        run(&s, "C", "mul", vec![id("C"), id("C"), list(vec![its("i1, i2"), its("i1, i2")]), its("i1, i2")]);
    let s = run(&s, "la", "build", vec![id("A")]);
    let s = run(&s, "lc", "build", vec![id("C")]);
    let s = run(&s, "f", "fuse_outer", vec![id("la"), id("lc"), int(2)]);
    verify(&s, &["f"]);
    verify(&s, &["la", "lc"]);
    // The contraction reordered (k outermost): zeroed before the k loop, as a nest over i1, i2.
    let s = run(&s, "r", "interchange", vec![id("la"), int(1), int(3)]);
    verify(&s, &["r"]);
}

#[test]
fn an_illegal_fusion_is_caught_by_verification() {
    // B[i] = A[i], then C[i] = B[7-i]: fused, C[0] reads B[7] before it is written. The
    // legality check would refuse it; unchecked, verification catches it.
    let s = State { unchecked: true, ..State::new() };
    let s = run(&s, "A", "tensor", vec![shape("8")]);
    let s = run(&s, "B", "eq", vec![id("A"), its("i"), its("i")]);
    let s = run(&s, "C", "eq", vec![id("B"), its("-i+7"), its("i")]);
    let s = run(&s, "l1", "build", vec![id("B")]);
    let s = run(&s, "l2", "build", vec![id("C")]);
    let s = run(&s, "f", "fuse_outer", vec![id("l1"), id("l2"), int(1)]);
    assert_eq!(nest(&s, "f").tree(), "for i in [0, 7]\n  B[i] = A[i]\n  C[i] = B[-i+7]\n");
    let dir = tempfile::tempdir().unwrap();
    let r = run_request(&s, &request(&s, &["f"]), 0, &opts(dir.path())).unwrap();
    assert!(!r.verified && r.speedup.is_none() && r.gflops.is_none(), "{}", r.summary());
    assert!(r.worst.as_deref().unwrap_or("").starts_with("C[0]: kernel"), "{}", r.summary());
    // unfused, the same statements verify
    verify(&s, &["l1", "l2"]);
}

#[test]
fn timing_reports_speedup_against_the_untransformed_build() {
    let s = matmul(24, 24, 24);
    let s = run(&s, "p", "parallelize", vec![id("l"), int(1)]);
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.timing = Some(Timing { warmup: 1, min_time_s: 0.01, min_reps: 3, max_reps: 50 });
    let r = run_request(&s, &request(&s, &["p"]), 0, &o).unwrap();
    assert!(r.verified);
    let t = r.time.unwrap();
    assert!(t.reps >= 3 && t.min_s <= t.median_s && t.median_s <= t.max_s);
    assert_eq!(r.flops, 2 * 24 * 24 * 24);
    assert!(r.gflops.unwrap() > 0.0 && r.speedup.unwrap() > 0.0 && r.baseline.is_some());
}

#[test]
fn same_variant_twice_compiles_once() {
    let s = matmul(5, 4, 3);
    let dir = tempfile::tempdir().unwrap();
    let o = opts(dir.path());
    let a = run_request(&s, &request(&s, &["l"]), 0, &o).unwrap();
    let b = run_request(&s, &request(&s, &["l"]), 0, &o).unwrap();
    assert!(!a.cached && b.cached);
}
