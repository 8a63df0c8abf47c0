//! What "verified" means: every kernel starts from the same initial inputs and is compared with
//! its own untransformed statements; accumulators are zeroed where the transformed nest needs
//! them; inputs given for the full size verify at a reduced size; the REPL's `:def` evaluates
//! again what depends on the constant.

use crate::common::in_own_process;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn teml(args: &[&str], _dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(args)
        .env("TEML_CACHE_DIR", crate::common::kernel_cache())
        .env("OMP_NUM_THREADS", "2")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("teml runs")
}

fn json(o: &Output) -> serde_json::Value {
    let out = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{}", String::from_utf8_lossy(&o.stderr)))
}

fn program(name: &str) -> String {
    format!("tests/programs/{name}")
}

fn verified(v: &serde_json::Value) -> Vec<bool> {
    v["kernels"].as_array().unwrap().iter().map(|k| k["verified"] == true).collect()
}

#[test]
fn codegens_are_independent_variants() {
    // Kernel 1 computes B and C; kernel 2 fuses the two nests illegally. Chained, kernel 2
    // would start from kernel 1's B and be "verified"; independent, it is caught.
    let d = tempfile::tempdir().unwrap();
    // `--unchecked`: the legality check would refuse the fusion at its line.
    let o = teml(
        &["run", &program("chained_codegen_illegal_fusion.teml"), "-D", "N=6", "--json", "--unchecked"],
        d.path(),
    );
    assert!(!o.status.success());
    let v = json(&o);
    assert_eq!(verified(&v), vec![true, false], "{v}");
    assert_eq!(v["error"], "kernel 2 does not match the reference: not reported as a speedup");
    assert!(v["kernels"][1]["worst"].as_str().unwrap().starts_with("C["), "{v}");
}

#[test]
fn later_kernels_do_not_see_earlier_outputs() {
    // The same in-place statement twice: each kernel starts from the initial A, so both
    // compute 2*A (chained, the second would compute 4*A and still "verify").
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("twice.teml");
    std::fs::write(
        &src,
        "A = tensor([5])\nA = add(A, A, [[i], [i]] -> [i])\nl = build(A)\ncodegen(l)\ncodegen(l)\n",
    )
    .unwrap();
    let out = d.path().join("a.npy");
    let o = teml(&["run", src.to_str().unwrap(), "--json", "-o", &format!("A={}", out.display())], d.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(verified(&json(&o)), vec![true, true]);
    let a = teml::runtime::npy::read_npy(&out).unwrap().data.to_f64();
    let want: Vec<f64> =
        teml::pipeline::random_data(42, "A", 5, teml::ir::DType::Double).iter().map(|x| 2.0 * x).collect();
    assert_eq!(a, want, "-o saves A as the last kernel that uses it left it, from the initial data");
}

#[test]
fn a_contraction_fused_with_a_reader_of_its_old_values_verifies() {
    let d = tempfile::tempdir().unwrap();
    let o = teml(&["run", &program("fused_contraction_reads_old.teml"), "-D", "N=9", "--json"], d.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(verified(&json(&o)), vec![true, true, true]);
}

#[test]
fn a_contraction_fused_with_itself_sums_once() {
    let d = tempfile::tempdir().unwrap();
    let o = teml(&["run", &program("self_fused_contraction.teml"), "-D", "N=7", "--json"], d.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(verified(&json(&o)), vec![true, true]);
}

#[test]
fn the_accumulator_is_zeroed_next_to_its_updates() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("mm.teml");
    std::fs::write(
        &src,
        "A = tensor([8, 8])\nB = tensor([8, 8])\nC = contract(A, B, [2, 1])\nl = build(C)\n\
         l2 = interchange(l, 2, 3)\ncodegen(l)\ncodegen(l2)\n",
    )
    .unwrap();
    let o = teml(&["run", src.to_str().unwrap(), "--no-run"], d.path());
    let c = String::from_utf8_lossy(&o.stdout);
    assert!(!c.contains("memset"), "{c}");
    // i1, i2, k1: zeroed just before the k1 loop
    assert!(
        c.contains(
            "    for (int i2 = 0; i2 <= 7; i2++)\n    {\n      C[i1][i2] = 0.0;\n      for (int k1 = 0; k1 <= 7; k1++)"
        ),
        "{c}"
    );
    // i1, k1, i2: a row zeroed before the k1 loop
    assert!(
        c.contains(
            "  {\n    for (int i2 = 0; i2 <= 7; i2++)\n      C[i1][i2] = 0.0;\n    for (int k1 = 0; k1 <= 7; k1++)"
        ),
        "{c}"
    );
}

fn write_npy(dir: &Path, name: &str, n: usize) -> PathBuf {
    let p = dir.join(name);
    let data: Vec<f64> = (0..n * n).map(|k| 1.0 + (k % 7) as f64 / 8.0).collect();
    teml::runtime::npy::write_npy_f64(&p, &[n as u64, n as u64], &data).unwrap();
    p
}

#[test]
fn inputs_for_the_full_size_verify_at_a_reduced_size() {
    let d = tempfile::tempdir().unwrap();
    let a = write_npy(d.path(), "a24.npy", 24);
    let o = teml(
        &[
            "run",
            "examples/mm.teml",
            "-D",
            "N=24",
            "--max-reference",
            "1000",
            "-i",
            &format!("A={}", a.display()),
            "--json",
        ],
        d.path(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    let how = v["kernels"][0]["verification"].as_str().unwrap();
    assert!(how.starts_with("reduced size (N=8)"), "{how}");
}

#[test]
fn an_input_no_kernel_uses_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let a = write_npy(d.path(), "a.npy", 8);
    let o = teml(&["run", "examples/mm.teml", "-D", "N=8", "-i", &format!("Z={}", a.display())], d.path());
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(
            "error: -i Z: expected a tensor some kernel uses (C, A, B), found `Z`, which no kernel uses"
        ),
        "{err}"
    );
}

#[test]
fn def_evaluates_again_what_depends_on_the_constant() {
    use teml::repl::{Mode, Repl};
    // The REPL runs kernels with the default options (the cache is `$TEML_CACHE_DIR`) and
    // installs the process-wide measurer: in a process of its own, with the variable set there,
    // no other test sees either.
    let d = tempfile::tempdir().unwrap();
    let cache = d.path().join("cache");
    let envs = [("TEML_CACHE_DIR", cache.as_os_str())];
    in_own_process("verification::def_evaluates_again_what_depends_on_the_constant", &envs, || {
        let mut r = Repl::new(teml::ir::State::new().with_const("N", 8), Mode::Teml);
        for line in
            ["A = tensor([N])", "B = add(A, A, [[i], [i]] -> [i])", "l = build(B)", "s = stripmine(l, 1, 4)"]
        {
            r.handle(line).unwrap();
        }
        // With N = 8 the blocks divide the extent: no `min` in the inner bound.
        assert!(r.handle(":tree s").unwrap().contains("for i in [4*io, 4*io+3]"));
        let msg = r.handle(":def N=10").unwrap();
        assert!(msg.starts_with("N = 10 ("), "{msg}");
        let tree = r.handle(":tree s").unwrap();
        assert!(tree.contains("min(4*io+3, N-1)"), "{tree}");
        let out = r.handle(":run s").unwrap();
        assert!(out.contains("verified"), "{out}");
        // A redefinition the session cannot take is refused, and nothing is lost.
        let e = r.handle(":def N=-3").unwrap_err();
        assert!(
            e.starts_with(":def N=-3: the session cannot be evaluated again with it (N stays 10)"),
            "{e}"
        );
        assert!(r.handle(":tree s").unwrap().contains("min(4*io+3, N-1)"));
    });
}

/// The verification record of a kernel in `--json`.
fn evidence(v: &serde_json::Value, k: usize) -> &serde_json::Value {
    &v["kernels"][k]["evidence"]
}

/// The reduced-size program chooses another `codegen` than the full-size one (issue 40's
/// reproduction): the reduced-size run would verify the untiled kernel while the tiled one is
/// timed, so it is not used; the full-size binary is checked by the expression oracle instead.
#[test]
fn a_reduced_size_that_builds_another_path_is_not_used() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("t.rhai");
    std::fs::write(
        &f,
        "let A = tensor([N, N]); let B = tensor([N, N]);\nlet C = contract(A, B, [2, 1]);\nlet l = build(C);\n\
         if constant(\"N\") > 100 { codegen(tile(l, 32)) } else { codegen(l) }\n\
         codegen(tile(l, constant(\"N\") / 10));\n",
    )
    .unwrap();
    let o =
        teml(&["run", f.to_str().unwrap(), "-D", "N=300", "--max-reference", "100000", "--json"], d.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    for k in 0..2 {
        let e = evidence(&v, k);
        assert_eq!(e["reference"]["at"], "refused", "{v}");
        assert_eq!(e["reference"]["size"], "N=30", "{v}");
        assert_eq!(e["full_size"]["by"], "oracle", "{v}");
        assert_eq!(v["kernels"][k]["verified"], true, "{v}");
    }
    // The reason names what differs: the kernel chosen, or the step's argument.
    let why0 = evidence(&v, 0)["reference"]["why"].as_str().unwrap();
    assert!(why0.contains("at full size") && why0.contains("at the reduced size"), "{why0}");
    let why1 = evidence(&v, 1)["reference"]["why"].as_str().unwrap();
    assert!(why1.contains("tile(l1, 30)") && why1.contains("tile(l1, 3)"), "{why1}");
    let how = v["kernels"][1]["verification"].as_str().unwrap();
    assert!(how.starts_with("reduced size (N=30) not used: "), "{how}");
}

/// A kernel over ranges given to `build` (trmm), too large for the reference interpreter: the
/// expression oracle cannot evaluate it, so its full-size binary is compared in full with the
/// untransformed program compiled on its own (issue 40's reproduction: it used to count as
/// verified with its full-size binary unchecked).
#[test]
fn a_full_size_binary_the_oracle_cannot_check_is_compared_with_the_untransformed_build() {
    let d = tempfile::tempdir().unwrap();
    let o = teml(&["run", "examples/polybench/trmm.teml", "--max-reference", "100000", "--json"], d.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    let e = evidence(&v, 0);
    assert_eq!(e["reference"]["at"], "reduced", "{v}");
    assert_eq!(e["full_size"]["by"], "untransformed", "{v}");
    assert_eq!(e["full_size"]["flags"], "-O1", "{v}");
    assert!(e["artifact"]["so_path"].as_str().is_some_and(|p| p.ends_with(".so")), "{v}");
    assert_eq!(e["artifact"]["source_hash"].as_str().map(str::len), Some(16), "{v}");
    assert_eq!(e["artifact"]["inputs_hash"].as_str().map(str::len), Some(16), "{v}");
    let how = v["kernels"][0]["verification"].as_str().unwrap();
    assert!(how.contains("full-size kernel checked in full against the untransformed program"), "{how}");
    // At full size in the interpreter, the record says so.
    let o = teml(&["run", "examples/polybench/trmm.teml", "-D", "M=12", "-D", "N=14", "--json"], d.path());
    let v = json(&o);
    assert_eq!(evidence(&v, 0)["reference"]["at"], "full_size", "{v}");
    assert_eq!(evidence(&v, 0)["full_size"]["by"], "interpreter", "{v}");
}

/// Flags that would move a kernel's extents under its buffers are refused before it runs.
#[test]
fn cflags_that_redefine_an_extent_are_refused() {
    let d = tempfile::tempdir().unwrap();
    for flags in ["-O2 -DN=4", "-O2 -D N=4", "-O2 -UN"] {
        let o = teml(&["run", "examples/mm.teml", "-D", "N=8", "--cflags", flags], d.path());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{flags}: {err}");
        assert!(
            err.contains("would redefine the kernel's extent `N`") && err.contains("-D N=..."),
            "{flags}: {err}"
        );
    }
    // Other defines are the user's business.
    let o = teml(&["run", "examples/mm.teml", "-D", "N=8", "--cflags", "-O2 -DUNUSED=1"], d.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A lifted program whose expression as written is too costly to check at full size (the
/// tensor network's five-operand product, 8.8e12 flops) is verified as a chain: the rewrite
/// against the expression as written at a reduced size, the full-size binary in full against the
/// rewritten program built on its own. A full-size binary that computes something else is caught
/// by that check: here a compiler that flips a sign of the kernel's last contraction at `-O3`
/// (the reduced-size check passes, its binary is another one).
#[test]
fn a_lifted_program_too_costly_as_written_is_verified_as_a_chain() {
    let o = teml(&tensor_network_args(), Path::new("."));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    let e = evidence(&v, 0);
    assert_eq!(v["kernels"][0]["verified"], true, "{v}");
    assert_eq!(e["reference"]["at"], "reduced", "{v}");
    assert_eq!(e["full_size"]["by"], "rewritten", "{v}");
    assert_eq!(e["full_size"]["flags"], "-O1", "{v}");
    assert!(e["full_size"]["why"].as_str().unwrap().contains("too costly to run as a check"), "{v}");
    let how = v["kernels"][0]["verification"].as_str().unwrap();
    assert!(how.contains("verified as a chain"), "{how}");
}

/// ... and a wrong full-size binary of it is caught (a test of its own, so that the two runs go
/// side by side).
#[test]
fn a_lifted_program_verified_as_a_chain_catches_a_wrong_binary() {
    let d = tempfile::tempdir().unwrap();
    let cc = crate::common::editing_cc(d.path(), "R_3\\[", "s/+= t\\[/-= t[/", true);
    let o = Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(tensor_network_args())
        .env("TEML_CACHE_DIR", d.path().join("cache"))
        .env("CC", &cc)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let v = json(&o);
    let how = v["kernels"][0]["verification"].as_str().unwrap();
    // The `-O3` binary disagreed with the rewritten program: it is not the one reported.
    assert!(how.contains("compiler defect") && how.contains("computed R["), "{how}");
    assert!(!how.contains("with `-O3") || how.contains("instead"), "{how}");
}

/// examples/tensor_network.teml at O=18, W=36: still far past what a check may cost as written
/// (8.8e11 flops), and reduced to O=6, W=12 for the interpreter (the shipped sizes reduce to
/// O=8, W=16: 10x the interpretation, 80 s of these tests on 2 cores).
fn tensor_network_args() -> Vec<&'static str> {
    vec!["run", "examples/tensor_network.teml", "--threads", "2", "--json", "-D", "O=18", "-D", "W=36"]
}
