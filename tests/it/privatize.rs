//! Scalar and array expansion (`privatize`, issue 21, symm): a scalar that every iteration of a
//! loop sets before it reads it (PolyBench's `temp2`) gets one copy per iteration, so the loop
//! is no longer pinned by its reuse: symm's column updates then run k outside j, rows at stride
//! 1 in vector lanes, verified. A value carried from one iteration to the next is refused with
//! a witness, and a random path over the expanded nest either is refused or computes what the
//! program computes.

use crate::common::{nest, program, proptest_cases, refused, small_integers, teml_bits};
use proptest::prelude::*;
use teml::interp::run as interp;
use teml::ir::State;

/// symm (examples/polybench/symm.teml), without its codegen.
fn symm(m: i64, n: i64) -> String {
    format!(
        "M = {m}\nN = {n}\nalpha = scalar()\nbeta = scalar()\nC = tensor([M, N])\nA = tensor([M, M])\n\
         B = tensor([M, N])\ntemp2 = scalar()\n\
         s1 = @temp2: add(0.0, 0.0, [, ] -> [])\n\
         p0 = vmul(alpha, B, [, [i, j]])\np1 = vmul(p0, A, [, [i, k]])\n\
         s2 = @C: add(C, p1, [[k, j], ] -> [k, j])\n\
         q0 = vmul(B, A, [[k, j], [i, k]])\ns3 = @temp2: add(temp2, q0, [, ] -> [])\n\
         r0 = vmul(beta, C, [, [i, j]])\nr1 = vmul(alpha, B, [, [i, j]])\nr2 = vmul(r1, A, [, [i, i]])\n\
         r3 = vadd(r0, r2, [, ])\nr4 = vmul(alpha, temp2, [, ])\ns4 = @C: add(r3, r4, [, ] -> [i, j])\n\
         l1 = build(s1)\nl2 = build(s2, [[i], [j], [k]])\nl3 = build(s3, [[i], [j], [k]])\n\
         lk = around(k, [0, i-1], l2, l3)\nl4 = build(s4, [[i], [j]])\n\
         lj = around(j, [0, N-1], l1, lk, l4)\nl = around(i, [0, M-1], lj)\n"
    )
}

/// The path of scripts/polybench/tune/symm.rhai: temp2 per j, the j loop distributed, k
/// outside j, j in two parallel blocks of vector lanes.
const PATH: &str = "p1 = privatize(l, 2, temp2)\np2 = distribute(p1, 2)\nf = focus(p2, \"j#2\")\n\
                    x = interchange(f, 1, 2)\nfk = focus(x, \"k\")\ns = stripmine(fk, 2, 8)\n\
                    y = interchange(s, 1, 2)\nz = parallelize(y, 1)\nv = vectorize(z, 3)\nr = focus(v)\n";

#[test]
fn symm_runs_its_column_updates_in_vector_lanes_after_privatize_verified_in_both_syntaxes() {
    let d = tempfile::tempdir().unwrap();
    // N = 21: the lanes end in a scalar remainder, the blocks in a partial one.
    let src = format!("{}{PATH}codegen(r, \"symm\")\n", symm(13, 21));
    let f = program(d.path(), "s.teml", &src);
    let c = d.path().join("s.c");
    let (ok, o) = teml_bits(d.path(), Some("256"), &["run", &f, "--emit-c", c.to_str().unwrap()]);
    assert!(ok && o.contains("verified"), "{o}");
    assert!(o.contains("temp2_j[j] = temp2_j[j] + B[k][j] * A[i][k]"), "{o}");
    assert!(o.contains("for jo in [0, floor((N-1)/8)]  parallel\n    for k in [0, i-1]\n"), "{o}");
    let c = std::fs::read_to_string(&c).unwrap();
    assert!(c.contains("a copy per iteration of a loop (privatize), held by the kernel"), "{c}");
    assert!(c.contains("double *restrict temp2_j = teml_buffer(sizeof(double[N]));"), "{c}");
    assert!(c.contains("*(teml_d4 *)&temp2_j[j] += *(teml_d4 *)&B[k][j] * A[i][k];"), "{c}");
    // temp2's copies are the kernel's own; temp2 is no parameter, and -o cannot keep it.
    assert!(!c.contains("double *restrict temp2,") && !c.contains("double *restrict temp2)"), "{c}");
    let out = d.path().join("t.npy");
    let keep = format!("temp2={}", out.display());
    let (ok, o) = teml_bits(d.path(), None, &["run", &f, "-o", &keep]);
    assert!(!ok && o.contains("privatize") && o.contains("-o"), "{o}");
    // The same path from Rhai: the tuning space's point.
    program(d.path(), "symm.teml", &symm(9, 13));
    let rhai = "// program: symm.teml\n\
                let p = distribute(privatize(l, 2, \"temp2\"), 2);\n\
                p = interchange(focus(p, \"j#2\"), 1, 2);\n\
                p = vectorize(focus(p, \"j#2\"), 1);\ncodegen(focus(p));\n";
    let r = program(d.path(), "s.rhai", rhai);
    let (ok, o) = teml_bits(d.path(), None, &["run", &r]);
    assert!(ok && o.contains("verified"), "{o}");
}

#[test]
fn a_shared_scalar_pins_its_loop_until_privatized() {
    let d = tempfile::tempdir().unwrap();
    // Without privatize, temp2's reuse across j forbids k outside j: isl says where.
    let src = format!("{}p2 = distribute(l, 2)\ncodegen(p2)\n", symm(7, 5));
    refused(
        d.path(),
        None,
        "s.teml",
        &src,
        &["s.teml:28", "distribute", "temp2 is read by statement 4", "overwritten by statement 3"],
    );
}

#[test]
fn privatize_refuses_what_would_change_the_values_at_the_line() {
    let d = tempfile::tempdir().unwrap();
    // A running sum: each iteration reads what the one before left in `s`.
    let scan = "N = 9\nx = tensor([N])\ny = tensor([N])\ns = scalar()\n\
                a = @s: add(s, x, [, [j]] -> [])\nb = @y: add(s, s, [, ] -> [j])\n\
                la = build(a, [[j]])\nlb = build(b, [[j]])\nl = around(j, [0, N-1], la, lb)\n";
    refused(
        d.path(),
        None,
        "scan.teml",
        &format!("{scan}p = privatize(l, 1, s)\ncodegen(p)\n"),
        &["scan.teml:10", "privatize", "s is read by statement 1", "(j=0)", "does not write it first"],
    );
    // A result: nothing reads y.
    refused(
        d.path(),
        None,
        "scan.teml",
        &format!("{scan}p = privatize(l, 1, y)\ncodegen(p)\n"),
        &["scan.teml:10", "no statement reads `y`", "result"],
    );
    // Every access inside the loop: the zeroing of `s` is outside j (addressed by its focus).
    let twice = "N = 9\nx = tensor([N])\ny = tensor([N])\ns = scalar()\nz = @s: add(0.0, 0.0, [, ] -> [])\n\
                 a = @s: add(s, x, [, [j]] -> [])\nb = @y: add(s, s, [, ] -> [j])\nlz = build(z)\n\
                 la = build(a, [[j]])\nlb = build(b, [[j]])\nlj = around(j, [0, N-1], la, lb)\n\
                 l = around(t, [0, 2], lz, lj)\nf = focus(l, \"j\")\np = privatize(f, 1, s)\ncodegen(p)\n";
    refused(d.path(), None, "t.teml", twice, &["t.teml:14", "accesses `s` outside loop `j`"]);
    let base = symm(7, 5);
    let cases: &[(&str, &[&str])] = &[
        // k's bounds use i: a copy per k would be at k - 0 up to a bound that moves.
        ("f = focus(l, \"k\")\np = privatize(f, 1, temp2)\n", &["s.teml:29", "named constants", "`i`"]),
        // An operand the loop only reads.
        ("p = privatize(l, 2, A)\n", &["s.teml:28", "no statement in loop `j` writes `A`"]),
        ("p = privatize(l, 2, X)\n", &["s.teml:28", "X"]),
        ("p = privatize(l, 4, temp2)\n", &["s.teml:28", "level"]),
        (
            "p = privatize(l, 2, temp2)\nq = privatize(p, 1, temp2)\n",
            &["s.teml:29", "already has a copy", "temp2_j"],
        ),
    ];
    for (steps, want) in cases {
        refused(d.path(), None, "s.teml", &format!("{base}{steps}codegen(p)\n"), want);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: proptest_cases(24), .. ProptestConfig::default() })]
    /// temp2 privatized along i or j (or not), then a random sequence of steps: each is refused
    /// or the nest computes exactly what the program does (C and everything else but temp2,
    /// which the expanded nest does not keep); privatized along j, the whole of PATH is
    /// accepted.
    #[test]
    fn privatized_paths_compute_what_the_program_does(
        along in 0usize..3,
        steps in proptest::collection::vec(0usize..5, 0..4),
        m in 2i64..7,
        n in 1i64..9,
    ) {
        let src = symm(m, n);
        let s = teml::lang::eval(&src, "s.teml", &State::new()).expect("the program");
        let mut path = String::new();
        let mut cur = "l".to_string();
        if along > 0 {
            path.push_str(&format!("p0 = privatize(l, {along}, temp2)\n"));
            cur = "p0".into();
        }
        for (k, st) in steps.iter().enumerate() {
            let step = match st {
                0 => format!("distribute({cur}, 2)"),
                1 => format!("interchange(focus({cur}, \"j#2\"), 1, 2)"),
                2 => format!("unroll_by({cur}, 1, 2)"),
                3 => format!("stripmine({cur}, 2, 3)"),
                _ => format!("privatize({cur}, 1, temp2)"),
            };
            path.push_str(&format!("q{k} = {step}\n"));
            cur = format!("q{k}");
        }
        path.push_str(&format!("r = {cur}\n"));
        let accepted = teml::lang::eval(&path, "p.teml", &s);
        let Ok(t) = accepted else { return Ok(()) };
        let (l, r) = (nest(&s, "l"), nest(&t, "r"));
        let mut want = small_integers(&s, &l);
        let mut got = want.clone();
        interp(&s, &[l], &mut want).unwrap();
        interp(&t, std::slice::from_ref(&r), &mut got).unwrap();
        for name in ["C", "A", "B", "alpha", "beta"] {
            prop_assert_eq!(&want[name].data, &got[name].data, "{}\n{}", name, path);
        }
        if !r.expanded.contains_key("temp2") {
            prop_assert_eq!(&want["temp2"].data, &got["temp2"].data, "{}", path);
        }
    }

    /// PATH is accepted at every size.
    #[test]
    fn the_symm_path_is_always_accepted(m in 1i64..9, n in 1i64..12) {
        let s = teml::lang::eval(&symm(m, n), "s.teml", &State::new()).expect("the program");
        let t = teml::lang::eval(PATH, "p.teml", &s);
        prop_assert!(t.is_ok(), "{:?}", t.err().map(|e| e.to_string()));
    }
}

#[test]
fn deriche_privatizes_its_running_scalars_in_every_pass_verified() {
    let d = tempfile::tempdir().unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    // ym1 runs through the rows (l1) and the columns (l4): each pass gets copies of its own
    // (ym1_i per row, ym1_j per column). W = 9, H = 7: a partial block of rows; the columns
    // in one block of lanes with a remainder.
    let space = format!("{root}/scripts/polybench/tune/deriche.rhai");
    let (ok, o) = teml_bits(
        d.path(),
        Some("256"),
        &["run", &space, "-D", "W=9", "-D", "H=7", "--param", "passes=privatized"],
    );
    assert!(ok && o.contains("verified"), "{o}");
    for copies in ["ym1_i[4*io]", "ym1_j[j]", "yp1_i[4*io+3]", "yp1_j[j]"] {
        assert!(o.contains(copies), "{copies}: {o}");
    }
    // Privatized in one pass but read as it is in another of the same kernel: refused.
    let de = std::fs::read_to_string(format!("{root}/examples/polybench/deriche.teml")).unwrap();
    let one = de.replace("codegen(lk, la5, la1, la6, la2, la7, la3, la8, la4, lb1, lb2, lc2, lc1, l1, l2, l3, l4,",
        "p4 = privatize(l4, 1, ym1)\ncodegen(lk, la5, la1, la6, la2, la7, la3, la8, la4, lb1, lb2, lc2, lc1, l1, l2, l3, p4,");
    assert_ne!(one, de);
    let f = program(d.path(), "de.teml", &one);
    let (ok, o) = teml_bits(d.path(), None, &["run", &f]);
    assert!(
        !ok && o.contains("`ym1` has a copy per iteration of loop `j` in `p4`") && o.contains("`l1`"),
        "{o}"
    );
}
