//! Golden tests for generated C: the paper's Fig. 4-6 listings, and readable C for the
//! transformations. Refresh the files under tests/golden/ with
//! `TEML_BLESS=1 cargo test --release --test it codegen_golden::`.

use crate::common::*;
use teml::analysis::vector::Target;
use teml::codegen::{generate, generate_for};
use teml::ir::{Name, State};

fn golden(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("TEML_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected =
        std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("missing {path:?}: run with TEML_BLESS=1"));
    if expected != actual {
        let diff = unified_diff(&expected, actual, &format!("tests/golden/{name}"), "generated");
        panic!("{name} differs from the golden file (TEML_BLESS=1 to update):\n{diff}");
    }
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join("")
}

/// The C for `nests`, with 512-bit explicit vectors (AVX-512), whatever the host has.
fn c_for(s: &State, nests: &[&str]) -> String {
    c_for_bits(s, nests, 512)
}

fn c_for_bits(s: &State, nests: &[&str], vector_bits: u32) -> String {
    let ns: Vec<(Name, teml::ir::Nest)> = nests.iter().map(|n| (Name::from(*n), nest(s, n))).collect();
    generate_for(s, "teml_kernel", &ns, &Target { vector_bits }).unwrap_or_else(|e| panic!("{e}")).source
}

fn fig(n: u8) -> State {
    let s = State::new();
    let s = run(&s, "A", "tensor", vec![shape("N, N")]);
    let s = run(&s, "B", "tensor", vec![shape("N, N")]);
    let s = run(&s, "C", "tensor", vec![shape("N, N")]);
    match n {
        5 => {
            let s = teml::ops::exec(
                &s,
                "D",
                Some("C"),
                "add",
                &[id("A"), id("B"), list(vec![its("i1, i2"), its("i1, i2")]), its("i1, i2")],
            )
            .unwrap();
            run(&s, "l", "build", vec![id("D")])
        }
        _ => {
            let s = run(&s, "D", "vadd", vec![id("A"), id("B"), list(vec![its("i1, i2"), its("i1, i2")])]);
            let s =
                run(&s, "E", "mul", vec![id("C"), id("D"), list(vec![its("i1, i2"), none()]), its("i1, i2")]);
            run(&s, "l", "build", vec![id("E")])
        }
    }
}

#[test]
fn fig6_matches_the_paper() {
    let c = c_for(&fig(6), &["l"]);
    let paper = "for (int i1 = 0; i1 <= (N-1); i1++)
                   for (int i2 = 0; i2 <= (N-1); i2++)
                     E[i1][i2] = C[i1][i2] * (A[i1][i2] + B[i1][i2]);";
    assert!(squash(&c).contains(&squash(paper)), "{c}");
    golden("fig6.c", &c);
}

#[test]
fn fig5_matches_the_paper() {
    // The paper prints `C[i2][i1] = ...`, a typo: its own tree (and eq. 14) assign C[i1][i2].
    let c = c_for(&fig(5), &["l"]);
    let paper = "for (int i1 = 0; i1 <= (N-1); i1++)
                   for (int i2 = 0; i2 <= (N-1); i2++)
                     C[i1][i2] = A[i1][i2] + B[i1][i2];";
    assert!(squash(&c).contains(&squash(paper)), "{c}");
    golden("fig5.c", &c);
}

#[test]
fn fig4_is_a_two_loop_nest() {
    let s = State::new();
    let s = run(&s, "A", "tensor", vec![shape("N1, N2")]);
    let s = run(&s, "B", "eq", vec![id("A"), its("i1, i2"), its("i2, i1")]);
    let s = run(&s, "l", "build", vec![id("B")]);
    let c = c_for(&s, &["l"]);
    let paper = "for (int i1 = 0; i1 <= (N1-1); i1++)
                   for (int i2 = 0; i2 <= (N2-1); i2++)
                     B[i2][i1] = A[i1][i2];";
    assert!(squash(&c).contains(&squash(paper)), "{c}");
    assert!(c.contains("void teml_kernel(double (*restrict A)[N2], double (*restrict B)[N1])"), "{c}");
    golden("fig4.c", &c);
}

#[test]
fn transformed_matmul_is_readable() {
    let s = matmul(10, 6, 8).with_const("UNUSED", 1);
    let s = run(&s, "l1", "stripmine", vec![id("l"), int(1), int(4)]);
    let s = run(&s, "l2", "interchange", vec![id("l1"), int(2), int(3)]);
    let s = run(&s, "l3", "unroll", vec![id("l2"), int(4)]);
    let s = run(&s, "l4", "parallelize", vec![id("l3"), int(1)]);
    golden("matmul_transformed.c", &c_for(&s, &["l4"]));
}

#[test]
fn reduction_loops_get_private_accumulators() {
    let s = matmul(4, 6, 5);
    let s = run(&s, "p", "parallelize", vec![id("l"), int(3)]);
    let c = c_for(&s, &["p"]);
    assert!(c.contains("#pragma omp parallel for reduction(+: teml_acc0)"), "{c}");
    assert!(c.contains("teml_acc0 += A[i][k] * B[k][j];"), "{c}");
    assert!(c.contains("C[i][j] += teml_acc0;"), "{c}");
    let s = run(&s, "v", "vectorize", vec![id("l"), int(3)]);
    let c = c_for(&s, &["v"]);
    assert!(c.contains("#pragma omp simd reduction(+: teml_acc0)"), "{c}");
    golden("matmul_simd_k.c", &c);
    // the outer loops are independent: plain pragmas
    let s = run(&s, "q", "parallelize", vec![id("l"), int(1)]);
    let s = run(&s, "q", "vectorize", vec![id("q"), int(2)]);
    let c = c_for_bits(&s, &["q"], 0);
    assert!(c.contains("#pragma omp parallel for\n") && c.contains("#pragma omp simd\n"), "{c}");
    // `j` innermost, with vectors: its 5 lanes are one 4-lane vector and a scalar copy
    let s = run(&s, "w", "interchange", vec![id("l"), int(2), int(3)]);
    let s = run(&s, "w", "vectorize", vec![id("w"), int(3)]);
    let c = c_for(&s, &["w"]);
    assert!(c.contains("/* j in [0, 4]: lanes 4 + 1 */"), "{c}");
    assert!(c.contains("*(teml_d4 *)&C[i][0] += A[i][k] * *(teml_d4 *)&B[k][0];"), "{c}");
    assert!(c.contains("C[i][4] += A[i][k] * B[k][4];"), "{c}");
}

#[test]
fn unsafe_marks_are_refused() {
    // k outermost, j inside: the element C[i][j] varies inside k: no scalar accumulator fits.
    let s = matmul(4, 6, 5);
    let s = run(&s, "a", "interchange", vec![id("l"), int(1), int(3)]);
    let s = run(&s, "a", "parallelize", vec![id("a"), int(1)]);
    let ns = vec![(Name::from("a"), nest(&s, "a"))];
    let e = generate(&s, "k", &ns).unwrap_err().to_string();
    assert!(e.starts_with("codegen: cannot parallelize loop `k` ([0, 5]): loop `k` accumulates into C[i][j], which varies inside the loop"), "{e}");
    // In place, `X[i][j] = X[i][j] + X[i][0]`: X[i][0], written at j = 0, is read at every later
    // j, so loop `j` carries a dependence. (A shift, X[j+1] reading X[j], cannot be written in
    // place: the shifted read leaves fewer iterations than the declared extent of X.) Marking
    // `j` is refused at the mark, with the two iterations; loop `i` carries none: its mark is
    // accepted and generated.
    let s = run(&State::new(), "X", "tensor", vec![shape("4, 6")]);
    let args = [id("X"), id("X"), list(vec![its("i, j"), its("i, 0")]), its("i, j")];
    let s = teml::ops::exec(&s, "Y", Some("X"), "add", &args).unwrap_or_else(|e| panic!("{e}"));
    let s = run(&s, "l", "build", vec![id("Y")]);
    let marks = [("parallelize", "parallelized"), ("vectorize", "vectorized")];
    for (mark, marked) in marks {
        let e = fails(&s, "m", mark, vec![id("l"), int(2)]);
        assert_eq!(
            e,
            format!(
                "{mark}: illegal: X[0][0] is written by statement 1 (`X[i][j] = X[i][j] + X[i][0]`) at \
                 (i=0, j=0) and read by statement 1 (`X[i][j] = X[i][j] + X[i][0]`) at (i=0, j=1); loop `j` \
                 is {marked} and runs the two in different iterations"
            )
        );
    }
    let p = run(&s, "p", "parallelize", vec![id("l"), int(1)]);
    let c = c_for(&p, &["p"]);
    assert!(c.contains("#pragma omp parallel for\n"), "{c}");
    // Marked without the check (`--unchecked`), the code generator still refuses the pragma.
    let mut u = s;
    u.unchecked = true;
    for (mark, _) in marks {
        let u = run(&u, "m", mark, vec![id("l"), int(2)]);
        let ns = vec![(Name::from("m"), nest(&u, "m"))];
        let e = generate(&u, "k", &ns).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "codegen: cannot {mark} loop `j` ([0, 5]): loop `j` accumulates into X[i][j] and also reads \
                 `X` in the loop; expected iterations that write disjoint elements, or a reduction into one \
                 element"
            )
        );
    }
}

/// Unrolled copies accumulate into several elements fixed for the loop (`C[i][0]`,
/// `C[i][1]`): the refusal says so, not that they vary inside the loop.
#[test]
fn reductions_into_several_constant_elements_are_refused_truthfully() {
    let s = matmul(2, 4, 2);
    let s = run(&s, "a", "interchange", vec![id("l"), int(2), int(3)]);
    let s = run(&s, "a", "unroll", vec![id("a"), int(3)]);
    let s = run(&s, "a", "parallelize", vec![id("a"), int(2)]);
    let ns = vec![(Name::from("a"), nest(&s, "a"))];
    let e = generate(&s, "k", &ns).unwrap_err().to_string();
    assert_eq!(
        e,
        "codegen: cannot parallelize loop `k` ([0, 3]): loop `k` accumulates into 2 different elements \
         (C[i][0], C[i][1]): expected a reduction into one element; mark a loop whose iterator indexes `C`; \
         expected iterations that write disjoint elements, or a reduction into one element"
    );
}
