//! Results at affine positions (issue 21, item 2): a statement writes an interior
//! (`B[i+1][j+1]`), a slice (`E[0][j]`, `E[N-1][j]`) or reversed positions (`R[N-1-i]`) of a
//! declared tensor and leaves the rest as it was. Verified through the real binary in both
//! syntaxes, the untouched elements checked against the input, and every refusal.

use crate::common::{npy_args, program, refused, teml_bits};

/// Jacobi-2d's sweep: the interior of B from five points of A.
const JACOBI: &str = "N = 12\nA = tensor([N, N])\nB = tensor([N, N])\nr0 = vadd(A, A, [[i+1, j+1], [i+1, j]])\n\
    r1 = vadd(r0, A, [, [i+1, j+2]])\nr2 = vadd(r1, A, [, [i, j+1]])\nr3 = vadd(r2, A, [, [i+2, j+1]])\n\
    B2 = @B: mul(r3, 0.2, [, ] -> [i+1, j+1])\nl = build(B2)\n";

fn write(path: &std::path::Path, n: usize, f: impl Fn(usize) -> f64) -> Vec<f64> {
    let v: Vec<f64> = (0..n * n).map(f).collect();
    teml::runtime::write_npy_f64(path, &[n as u64, n as u64], &v).unwrap();
    v
}

#[test]
fn an_interior_sweep_writes_the_interior_and_keeps_the_boundary() {
    let d = tempfile::tempdir().unwrap();
    let n = 12;
    let (pa, pb, out) = (d.path().join("a.npy"), d.path().join("b.npy"), d.path().join("out.npy"));
    let a = write(&pa, n, |k| (k * 7 % 23) as f64 / 7.0);
    let b = write(&pb, n, |k| 100.0 + k as f64);
    let src = format!(
        "{JACOBI}codegen(l)\np = parallelize(l, 1)\nv = vectorize(p, 2)\ncodegen(v)\nt = tile(l, 4)\ncodegen(t)\n"
    );
    let f = program(d.path(), "jacobi.teml", &src);
    for bits in ["512", "0"] {
        let io = npy_args(&[("A", &pa), ("B", &pb)], &[("B", &out)]);
        let mut args = vec!["run", &f, "--threads", "2"];
        args.extend(io.iter().map(String::as_str));
        let (ok, o) = teml_bits(d.path(), Some(bits), &args);
        assert!(ok && o.matches("verified").count() == 3, "{bits}: {o}");
        assert!(o.contains("for i in [0, N-3]") && o.contains("B[i+1][j+1] = (A[i+1][j+1] +"), "{o}");
        let c = teml::runtime::read_npy(&out).unwrap().data.to_f64();
        for i in 0..n {
            for j in 0..n {
                let k = i * n + j;
                let want = if i == 0 || j == 0 || i == n - 1 || j == n - 1 {
                    b[k]
                } else {
                    (a[k] + a[k - 1] + a[k + 1] + a[k - n] + a[k + n]) * 0.2
                };
                assert!(
                    (c[k] - want).abs() <= 1e-12 * want.abs().max(1.0),
                    "{bits} [{i}][{j}]: {} vs {want}",
                    c[k]
                );
            }
        }
    }
    // under -D the ranges follow
    let (ok, o) = teml_bits(d.path(), None, &["run", &f, "-q", "-D", "N=3"]);
    assert!(ok && o.matches("verified").count() == 3, "{o}");
}

#[test]
fn slices_and_reversed_positions_verify_in_both_syntaxes() {
    let d = tempfile::tempdir().unwrap();
    let src = "N = 9\nA = tensor([N, N])\nE = tensor([N, N])\ne1 = @E: eq(A, [0, j] -> [0, j])\n\
               e2 = @E: mul(A, 2.0, [[N-1, j], ] -> [N-1, j])\nm = build(e1)\nm2 = build(e2)\ncodegen(m, m2)\n\
               x = tensor([N])\nR = tensor([N])\nr = @R: eq(x, [i] -> [N-1-i])\nq = build(r)\ncodegen(q)\n";
    let f = program(d.path(), "slices.teml", src);
    let (pa, pe, px, pr) =
        (d.path().join("a.npy"), d.path().join("e.npy"), d.path().join("x.npy"), d.path().join("r.npy"));
    let a = write(&pa, 9, |k| k as f64);
    let e = write(&pe, 9, |k| -(k as f64));
    let x: Vec<f64> = (0..9).map(|k| k as f64 * 1.5).collect();
    teml::runtime::write_npy_f64(&px, &[9], &x).unwrap();
    let io = npy_args(&[("A", &pa), ("E", &pe), ("x", &px)], &[("E", &pe), ("R", &pr)]);
    let mut args = vec!["run", &f];
    args.extend(io.iter().map(String::as_str));
    let (ok, o) = teml_bits(d.path(), None, &args);
    assert!(ok && o.matches("verified").count() == 2, "{o}");
    assert!(o.contains("E[0][j] = A[0][j]") && o.contains("R[N-i-1] = x[i]"), "{o}");
    let got = teml::runtime::read_npy(&pe).unwrap().data.to_f64();
    for k in 0..81 {
        let want = if k < 9 {
            a[k]
        } else if k >= 72 {
            2.0 * a[k]
        } else {
            e[k]
        };
        assert_eq!(got[k], want, "E[{k}]");
    }
    let r = teml::runtime::read_npy(&pr).unwrap().data.to_f64();
    assert_eq!(r, x.iter().rev().copied().collect::<Vec<_>>());
    // the same interior sweep in Rhai
    let rhai = "let A = tensor([10, 10]);\nlet B = tensor([10, 10]);\nlet r = vadd(A, A, [[i, j+1], [i+2, j+1]]);\n\
                let B2 = at(\"B\", mul(r, 0.5, [(), ()], [i+1, j+1]));\ncodegen(build(B2));\n";
    let g = program(d.path(), "sweep.rhai", rhai);
    let (ok, o) = teml_bits(d.path(), None, &["run", &g]);
    assert!(
        ok && o.contains("verified") && o.contains("B[i+1][j+1] = (A[i][j+1] + A[i+2][j+1]) * 0.5"),
        "{o}"
    );
}

#[test]
fn result_positions_that_could_collide_or_have_no_extent_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let decl = "N = 8\nA = tensor([N, N])\nB = tensor([N, N])\nv = tensor([N])\n";
    let r = |name: &str, s: &str, want: &[&str]| refused(d.path(), None, name, &format!("{decl}{s}\n"), want);
    r(
        "sum.teml",
        "w = @v: eq(A, [i, j] -> [i+j])",
        &[
            "expected at most one iterator per result position",
            "found i+j: two iterations would write one element",
        ],
    );
    r(
        "stride.teml",
        "w = @v: eq(v, [i] -> [2*i])",
        &["expected `i` with coefficient 1 or -1 in a result position", "every 2th element only"],
    );
    r(
        "undeclared.teml",
        "C = eq(A, [i, j] -> [i+1, j])",
        &["a result at affine positions writes part of a tensor, and `C` is not declared"],
    );
    r(
        "inplace.teml",
        "w = @B: eq(A, [i, j] -> [i+1, j])\nl = build(w)\nm = in_place(l, B, A)",
        &["expected a result the nest writes whole", "written at affine positions"],
    );
}
