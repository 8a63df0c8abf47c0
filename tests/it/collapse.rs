//! `collapse(l, r, n)`: a band of perfectly nested parallel loops run as one iteration space
//! (OpenMP `collapse(n)`), checked like every mark, realised as one pragma, verified.

use crate::common::program;

fn teml(dir: &std::path::Path, args: &[&str]) -> (bool, String) {
    crate::common::teml_bits(dir, None, args)
}

const MM: &str = "N = 12\nA = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\n";

#[test]
fn a_collapsed_band_is_one_pragma_and_verifies() {
    let d = tempfile::tempdir().unwrap();
    // A short outer loop (4 iterations for 2 threads and more): the case collapse is for.
    let f = program(
        d.path(),
        "copy.teml",
        "N = 40\nA = tensor([4, N])\nB = eq(A, [i, j] -> [i, j])\nl = build(B)\nlc = collapse(l, 1, 2)\ncodegen(lc)\n",
    );
    let (ok, out) = teml(d.path(), &["run", &f, "--threads", "2"]);
    assert!(ok && out.contains("verified"), "{out}");
    assert!(out.contains("for i in [0, 3]  parallel collapse(2)\n  for j in [0, N-1]  parallel\n"), "{out}");
    let (ok, c) = teml(d.path(), &["run", &f, "--no-run"]);
    assert!(ok, "{c}");
    assert!(
        c.contains(
            "#pragma omp parallel for collapse(2)\n  for (int i = 0; i <= 3; i++)\n    for (int j = 0;"
        ),
        "{c}"
    );
    assert_eq!(c.matches("#pragma").count(), 1, "{c}");
    // A matrix product: the accumulator is zeroed inside the band, which stays perfect.
    let f = program(d.path(), "mm.teml", &format!("{MM}lc = collapse(l, 1, 2)\ncodegen(lc)\n"));
    let (ok, out) = teml(d.path(), &["run", &f, "--threads", "2", "--time", "--min-time", "0.01"]);
    assert!(ok && out.contains("verified") && out.contains("speedup"), "{out}");
}

#[test]
fn what_cannot_be_collapsed_is_refused_with_the_reason() {
    let d = tempfile::tempdir().unwrap();
    let refused =
        |name: &str, src: &str, want: &[&str]| crate::common::refused(d.path(), None, name, src, want);
    // Bounds that depend on the band's outer iterator: not a rectangular band.
    refused(
        "tri.teml",
        &format!("{MM}t = stripmine(l, 2, 4)\nc = collapse(t, 2, 2)\n"),
        &["collapse: the bounds of loop `i2`", "depend on `i2o`: expected a rectangular band", "tri.teml:7:"],
    );
    // More loops than the nest has.
    refused(
        "count.teml",
        &format!("{MM}c = collapse(l, 2, 3)\n"),
        &["argument 3 (count): expected 2..=2", "found 3"],
    );
    refused("one.teml", &format!("{MM}c = collapse(l, 1, 1)\n"), &["argument 3 (count)", "found 1"]);
    // A vectorized loop in the band.
    refused(
        "simd.teml",
        &format!("{MM}v = vectorize(l, 2)\nc = collapse(v, 1, 2)\n"),
        &["loop `i2` is vectorized"],
    );
    // A reduction loop in the band: its zeroing sits between the loops (codegen's refusal).
    refused(
        "red.teml",
        &format!("{MM}c = collapse(l, 2, 2)\ncodegen(c)\n"),
        &["codegen: cannot collapse the 2 loops from `i2`", "perfectly nested"],
    );
    // A dependence carried inside the band: isl refuses it, with a witness.
    refused(
        "dep.teml",
        "X = tensor([4, 6])\nY = @X: add(X, X, [[i, j], [i, 0]] -> [i, j])\nl = build(Y)\nc = collapse(l, 1, 2)\n",
        &["collapse: illegal:", "loop `j` is parallelized"],
    );
}
