//! Layouts and padding (`permute_layout`, `regroup`, `pad`; seeds 004 and 001): a tensor
//! stored in another layout for a kernel, converted at entry and back at exit, verified through
//! the real binary (serial, on threads, with explicit vectors and without), `-o` saving the
//! declared shape, the C as a user reads it, and every refusal with expected and found.

use crate::common::{program, refused, teml_bits};

const MM: &str = "N = 10\nA = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\n";

#[test]
fn laid_out_tensors_verify_and_keep_their_shape_outside() {
    let d = tempfile::tempdir().unwrap();
    let src = format!(
        "{MM}l1 = permute_layout(l, B, [2, 1])\nl2 = pad(l1, A, 2, 8, 8)\nl3 = regroup(l2, C, 2, 4, 1)\n\
         l4 = parallelize(l3, 1)\nl5 = vectorize(l4, 3)\ncodegen(l5)\n\
         m1 = regroup(l, B, 2, 5)\nm2 = permute_layout(m1, B, [3, 1, 2])\ncodegen(m2)\n"
    );
    let f = program(d.path(), "mm.teml", &src);
    for bits in ["512", "0"] {
        let (ok, out) = teml_bits(d.path(), Some(bits), &["run", &f, "--threads", "2"]);
        assert!(ok && out.matches("verified").count() == 2, "{bits}: {out}");
        assert!(
            out.contains("layout C: regroup(2, 4)") && out.contains("layout B: regroup(2, 5) [3, 1, 2]"),
            "{out}"
        );
    }
    let (ok, out) = teml_bits(d.path(), None, &["run", &f, "-q", "-D", "N=5"]);
    assert!(ok && out.matches("verified").count() == 2, "{out}");
    // -o saves C in its declared shape: the same bytes as the kernel without layouts
    let plain = program(d.path(), "plain.teml", &format!("{MM}codegen(l)\n"));
    let (a, b) = (d.path().join("a.npy"), d.path().join("b.npy"));
    let one = format!("{MM}l3 = regroup(l, C, 2, 4, 1)\nl4 = pad(l3, A, 2, 8, 8)\ncodegen(l4)\n");
    let g = program(d.path(), "one.teml", &one);
    let (ok, out) = teml_bits(d.path(), None, &["run", &g, "-q", "-o", &format!("C={}", a.display())]);
    assert!(ok, "{out}");
    let (ok, out) = teml_bits(d.path(), None, &["run", &plain, "-q", "-o", &format!("C={}", b.display())]);
    assert!(ok, "{out}");
    let (x, y) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    assert_eq!(x.len(), y.len());
    // the C: buffers converted at entry and back at exit (TEML_BLESS=1 to update the golden file)
    let emitted = d.path().join("k.c");
    let (ok, out) = teml_bits(
        d.path(),
        Some("512"),
        &["run", &g, "--no-run", "-q", "--emit-c", emitted.to_str().unwrap()],
    );
    assert!(ok, "{out}");
    let actual = std::fs::read_to_string(&emitted).unwrap();
    assert!(
        actual.contains(
            "/* `C` laid out regroup(2, 4) for this kernel: converted at entry and back at exit */"
        )
    );
    assert!(actual.contains("double (*restrict teml_A_layout)[8*teml_floordiv(N+7, 8)+8] = teml_buffer("));
    crate::common::golden("mm_layouts.c", &actual);
}

#[test]
fn layouts_that_do_not_fit_are_refused_at_their_line() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| format!("{MM}{s}\n");
    let r = |name: &str, s: &str, want: &[&str]| refused(d.path(), None, name, &p(s), want);
    r(
        "divide.teml",
        "x = regroup(l, C, 2, 4)",
        &[
            "regroup: argument 4 (width): expected a width that divides dimension 2 of `C` (extent 10)",
            "found 4",
        ],
    );
    r("dim.teml", "x = regroup(l, C, 3, 2)", &["expected a dimension of `C`, from 1 to 2", "found 3"]);
    r("order.teml", "x = permute_layout(l, B, [1, 1])", &["expected a permutation of 1..2", "found [1, 1]"]);
    r("order3.teml", "x = regroup(l, B, 1, 5)\ny = permute_layout(x, B, [2, 1])", &["a permutation of 1..3"]);
    r("multiple.teml", "x = pad(l, A, 2, 100)", &["expected a multiple from 1 to 64", "found 100"]);
    r("absent.teml", "D = tensor([N])\nx = pad(l, D, 1, 8)", &["expected a tensor the nest accesses"]);
    r(
        "late.teml",
        "x = permute_layout(l, B, [2, 1])\ny = regroup(x, B, 1, 5)",
        &["already has the layout [2, 1]: expected regroup first"],
    );
    r("padfirst.teml", "x = pad(l, B, 2, 8)\ny = permute_layout(x, B, [2, 1])", &["already padded"]);
    // one layout per tensor in a kernel, and none for a tensor stored per iteration
    r(
        "two.teml",
        "x = pad(l, A, 2, 8)\ny = pad(l, A, 2, 4)\ncodegen(x, y)",
        &["`A` has two layouts in the kernel: expected one layout per tensor"],
    );
}

/// A tensor whose dimensions are only reordered (`permute_layout`) has explicit vector lanes
/// where its buffer is contiguous, not where its declared rows are: `A[i][j]` stored as `[j][i]`
/// is a vector load along i. `y[j] = sum_i A[i][j] * x[i]` with i innermost runs in lanes of
/// partial sums (`rfactor`), verified with and without vectors; along j (a stride in the
/// buffer) the loop keeps its pragma, with the reason.
#[test]
fn lanes_follow_the_buffer_of_a_tensor_in_another_order() {
    let d = tempfile::tempdir().unwrap();
    let base = "N = 13\nA = tensor([N, N])\nx = tensor([N])\ny = einsum(\"ij,i->j\", [A, x])\n\
                l = build(y)\nl1 = permute_layout(l, A, [2, 1])\n";
    let f = program(d.path(), "mv.teml", &format!("{base}l2 = rfactor(l1, 2, 8, y)\ncodegen(l2)\n"));
    let c = d.path().join("mv.c");
    for bits in ["256", "0"] {
        let (ok, out) = teml_bits(d.path(), Some(bits), &["run", &f, "-q", "--emit-c", c.to_str().unwrap()]);
        assert!(ok && out.contains("verified"), "{bits}: {out}");
    }
    let (ok, out) = teml_bits(d.path(), Some("256"), &["run", &f, "-q", "--emit-c", c.to_str().unwrap()]);
    assert!(ok, "{out}");
    let src = std::fs::read_to_string(&c).unwrap();
    assert!(src.contains("*(teml_d4 *)&teml_A_layout[j][8*io]"), "{src}");
    // in the declared order, the same rfactor is refused: A[i][j] is not contiguous in i
    let plain = base.replace("l1 = permute_layout(l, A, [2, 1])\n", "l1 = focus(l)\n");
    let src = format!("{plain}l2 = rfactor(l1, 2, 8, y)\ncodegen(l2)\n");
    refused(d.path(), Some("256"), "mv2.teml", &src, &["mv2.teml:7", "A[i][j] is not contiguous in `i`"]);
    // lanes along j stride through the buffer: the pragma stays, with the reason
    let h = program(
        d.path(),
        "mv3.teml",
        &format!("{}l2 = interchange(l1, 1, 2)\nl3 = vectorize(l2, 2)\ncodegen(l3)\n", base),
    );
    let (ok, out) = teml_bits(d.path(), Some("256"), &["run", &h, "-q", "--emit-c", c.to_str().unwrap()]);
    assert!(ok && out.contains("verified"), "{out}");
    let src = std::fs::read_to_string(&c).unwrap();
    assert!(src.contains("compiler-vectorized:"), "{src}");
}
