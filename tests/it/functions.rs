//! Scalar functions in tensor expressions (`sqrt`, `exp`, `log`, `abs`, `pow`, `min`, `max`;
//! issue 21, PolyBench's math): both syntaxes, verified through the real binary at every
//! vector width and on threads, each output checked against the same function computed here
//! from the same input (`-i`), the C as a user reads it, and refusals.

use crate::common::{npy_args, program, refused, teml_bits};

/// `C[i][j] = log(exp(min(pow(max(sqrt(abs(A[i][j])), B[i][j]), 2.0), 1.0)))`, in .teml.
const ALL: &str = "N = 13\nA = tensor(TY[N, N])\nB = tensor(TY[N, N])\ns0 = vabs(A, [i, j])\ns1 = vsqrt(s0)\n\
    s2 = vmax(s1, B, [, [i, j]])\ns3 = vpow(s2, 2.0, [, ])\nm = vmin(s3, 1.0, [, ])\ns4 = vexp(m)\n\
    C = log(s4, -> [i, j])\nl = build(C)\n";

fn expected(a: f64, b: f64) -> f64 {
    a.abs().sqrt().max(b).powf(2.0).min(1.0).exp().ln()
}

#[test]
fn functions_verify_and_compute_what_libm_computes() {
    let d = tempfile::tempdir().unwrap();
    let n = 13usize;
    // negative and positive values, so abs, max and min all choose both ways
    let a: Vec<f64> = (0..n * n).map(|k| ((k * 37 % 101) as f64 - 50.0) / 40.0).collect();
    let b: Vec<f64> = (0..n * n).map(|k| ((k * 53 % 97) as f64 - 30.0) / 60.0).collect();
    let (pa, pb) = (d.path().join("a.npy"), d.path().join("b.npy"));
    for (ty, tol) in [("", 1e-12), ("float, ", 1e-5)] {
        if ty.is_empty() {
            teml::runtime::write_npy_f64(&pa, &[n as u64, n as u64], &a).unwrap();
            teml::runtime::write_npy_f64(&pb, &[n as u64, n as u64], &b).unwrap();
        } else {
            let f = |v: &[f64]| v.iter().map(|x| *x as f32).collect::<Vec<_>>();
            teml::runtime::write_npy_f32(&pa, &[n as u64, n as u64], &f(&a)).unwrap();
            teml::runtime::write_npy_f32(&pb, &[n as u64, n as u64], &f(&b)).unwrap();
        }
        let src = format!(
            "{}v = vectorize(l, 2)\np = parallelize(v, 1)\ncodegen(p)\nu = unroll_by(l, 2, 4)\ncodegen(u)\n",
            ALL.replace("TY", ty)
        );
        let f = program(d.path(), "fn.teml", &src);
        for bits in ["512", "0"] {
            let out_path = d.path().join(format!("c{bits}.npy"));
            let io = npy_args(&[("A", &pa), ("B", &pb)], &[("C", &out_path)]);
            let mut args = vec!["run", &f, "--threads", "2"];
            args.extend(io.iter().map(String::as_str));
            let (ok, out) = teml_bits(d.path(), Some(bits), &args);
            assert!(ok && out.matches("verified").count() == 2, "{ty}{bits}: {out}");
            let c = teml::runtime::read_npy(&out_path).unwrap().data.to_f64();
            for k in 0..n * n {
                let want = expected(a[k], b[k]);
                assert!(
                    (c[k] - want).abs() <= tol * want.abs().max(1.0),
                    "{ty}{bits} [{k}]: {} vs {want}",
                    c[k]
                );
            }
        }
    }
}

#[test]
fn functions_print_as_c_math_and_keep_the_pragma_in_vector_loops() {
    let d = tempfile::tempdir().unwrap();
    let src = format!("{}v = vectorize(l, 2)\ncodegen(v)\n", ALL.replace("TY", ""));
    let f = program(d.path(), "fn.teml", &src);
    let (ok, c) = teml_bits(d.path(), Some("512"), &["run", &f, "--no-run", "-q"]);
    assert!(ok, "{c}");
    assert!(c.contains("#include <math.h>"), "{c}");
    assert!(
        c.contains("C[i][j] = log(exp(fmin(pow(fmax(sqrt(fabs(A[i][j])), B[i][j]), 2.0), 1.0)));"),
        "{c}"
    );
    assert!(
        c.contains("#pragma omp simd  /* compiler-vectorized: `log` has no explicit vector form */"),
        "{c}"
    );
    let (ok, c) = teml_bits(
        d.path(),
        Some("512"),
        &[
            "run",
            &program(
                d.path(),
                "f.teml",
                &format!("{}v = vectorize(l, 2)\ncodegen(v)\n", ALL.replace("TY", "float, ")),
            ),
            "--no-run",
            "-q",
        ],
    );
    assert!(
        ok && c.contains("logf(expf(fminf(powf(fmaxf(sqrtf(fabsf(A[i][j])), B[i][j]), 2.0), 1.0)))"),
        "{c}"
    );
    // the tree and the paper's notation name the function
    let (ok, out) = teml_bits(d.path(), None, &["run", &f, "-q", "--no-run"]);
    assert!(ok, "{out}");
    let (ok, out) = teml_bits(d.path(), None, &["run", &f]);
    assert!(
        ok && out.contains("C[i][j] = log(exp(min(pow(max(sqrt(abs(A[i][j])), B[i][j]), 2.0), 1.0)))"),
        "{out}"
    );
}

#[test]
fn functions_work_in_rhai_beside_rhais_own_math() {
    let d = tempfile::tempdir().unwrap();
    let src = "let A = tensor([7, 7]);\nlet x = sqrt(2.0) + max(3, 4) + abs(-3);\nif x < 8.4 || x > 8.5 { throw `rhai math: ${x}`; }\n\
               let C = pow(A, 3.0, [[i, j], ()], [i, j]);\nlet D = max(C, A, [[i, j], [i, j]], [i, j]);\n\
               let E = sqrt(vabs(D, [i, j]), (), [i, j]);\ncodegen(build(C), build(D), build(E));\n";
    let f = program(d.path(), "fn.rhai", src);
    let (ok, out) = teml_bits(d.path(), None, &["run", &f]);
    assert!(ok && out.contains("verified") && out.contains("E[i][j] = sqrt(abs(D[i][j]))"), "{out}");
}

#[test]
fn a_sum_inside_a_function_is_refused_and_arities_are_checked() {
    let d = tempfile::tempdir().unwrap();
    let mm = "N = 6\nA = tensor([N, N])\nB = tensor([N, N])\nP = vcontract(A, B, [2, 1])\n";
    refused(
        d.path(),
        None,
        "sum.teml",
        &format!("{mm}C = sqrt(P, -> [i, j])\n"),
        &["is an operand of sqrt, where the sum does not distribute", "sum.teml:5"],
    );
    refused(
        d.path(),
        None,
        "arity.teml",
        &format!("{mm}C = vsqrt(A, B, [i, j])\n"),
        &["vsqrt: argument 3 (arguments): expected 1 to 2 arguments: vsqrt(t, I0), found 3"],
    );
    refused(
        d.path(),
        None,
        "arity2.teml",
        &format!("{mm}C = pow(A, [i, j] -> [i, j])\n"),
        &["pow: argument 3 (arguments): expected 4 arguments: pow(t0, t1, [I0, I1] -> I2), found 3"],
    );
}

#[test]
fn max_min_and_sub_reductions_run_in_private_accumulators_and_verify() {
    // `m[i] = max(m[i], A[i][k])` over k: vectorized and on threads, with OpenMP's max, min and
    // + reductions (a `sub` accumulates what it subtracts, then subtracts it once).
    let d = tempfile::tempdir().unwrap();
    for (f, clause, after) in [
        ("max", "reduction(max: teml_acc0)", "m[i] = teml_acc0;"),
        ("min", "reduction(min: teml_acc0)", "m[i] = teml_acc0;"),
        ("sub", "reduction(+: teml_acc0)", "m[i] -= teml_acc0;"),
    ] {
        let src = format!(
            "N = 37\nA = tensor([N, N])\nm = tensor([N])\ns = @m: {f}(m, A, [[i], [i, k]] -> [i])\nl = build(s)\n\
             v = vectorize(l, 2)\ncodegen(v)\np = parallelize(l, 2)\ncodegen(p)\n"
        );
        let file = program(d.path(), &format!("{f}.teml"), &src);
        let (ok, out) = teml_bits(d.path(), None, &["run", &file, "-q"]);
        assert!(ok && out.matches("verified").count() == 2, "{f}: {out}");
        let (ok, c) = teml_bits(d.path(), None, &["run", &file, "--no-run"]);
        assert!(ok && c.contains(clause) && c.contains(after), "{f}: {c}");
    }
}
