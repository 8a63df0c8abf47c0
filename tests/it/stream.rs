//! Streaming stores (`stream`): a vectorized loop stores its whole vectors of a result with
//! non-temporal stores after peeling to the vector's alignment. Verified through the real
//! binary at every vector width and without vectors, on threads, at sizes that leave a
//! remainder or a peeled prologue; the C as a user reads it; every refusal.

use crate::common::{program, refused, teml_bits};

/// A two-point stencil: B[i][j] = (A[i][j] + A[i][j+1]) / 2.
fn stencil(ty: &str) -> String {
    format!(
        "N = 21\nA = tensor({ty}[N, N])\nr0 = vadd(A, A, [[i, j], [i, j+1]])\n\
         B = div(r0, 2.0, [, ] -> [i, j])\nl = build(B)\n"
    )
}

#[test]
fn streamed_stores_verify_at_every_width_on_threads_and_odd_sizes() {
    let d = tempfile::tempdir().unwrap();
    for ty in ["", "float, "] {
        let src = format!(
            "{}p = parallelize(l, 1)\nv = vectorize(p, 2)\ns = stream(v, 2, B)\ncodegen(s)\n\
             v2 = vectorize(l, 2, 256)\ns2 = stream(v2, 2, B)\nt2 = stripmine(s2, 2, 16)\ncodegen(t2)\n\
             v3 = vectorize(l, 2, 128)\ns3 = stream(v3, 2, B)\ncodegen(s3)\n",
            stencil(ty)
        );
        let f = program(d.path(), "s.teml", &src);
        // without explicit vectors: the same paths at the target's width
        let g = program(d.path(), "g.teml", &src.replace(", 256)", ")").replace(", 128)", ")"));
        for (bits, f) in [("512", &f), ("0", &g)] {
            let (ok, out) = teml_bits(d.path(), Some(bits), &["run", f, "--threads", "2"]);
            assert!(ok && out.matches("verified").count() == 3, "{ty}{bits}: {out}");
            assert!(out.contains("for j in [0, N-2]  vectorize stream(B)"), "{out}");
        }
        // sizes below one vector (all peeled or remainder), one line, and a long row
        for n in ["N=2", "N=3", "N=9", "N=17", "N=130"] {
            let (ok, out) = teml_bits(d.path(), None, &["run", &f, "-q", "-D", n, "--threads", "2"]);
            assert!(ok && out.matches("verified").count() == 3, "{ty}{n}: {out}");
        }
    }
}

#[test]
fn streamed_stores_of_a_laid_out_or_in_place_result_verify() {
    let d = tempfile::tempdir().unwrap();
    // B's rows padded to 9 (never 64-byte aligned after the first): the peel differs per row
    let src = format!(
        "{}q = pad(l, B, 2, 9)\nv = vectorize(q, 2)\ns = stream(v, 2, B)\ncodegen(s)\n\
         X = tensor([N, N])\nY = mul(X, 3.0, [[i, j], ] -> [i, j])\nm = build(Y)\n\
         m1 = in_place(m, Y, X)\nm2 = vectorize(m1, 2)\nm3 = stream(m2, 2, Y)\ncodegen(m3)\n",
        stencil("")
    );
    let f = program(d.path(), "s.teml", &src);
    for bits in ["512", "0"] {
        let (ok, out) = teml_bits(d.path(), Some(bits), &["run", &f, "--threads", "2"]);
        assert!(ok && out.matches("verified").count() == 2, "{bits}: {out}");
    }
}

#[test]
fn the_c_peels_to_the_line_streams_whole_vectors_and_fences() {
    let d = tempfile::tempdir().unwrap();
    let src = format!(
        "{}p = parallelize(l, 1)\nv = vectorize(p, 2)\ns = stream(v, 2, B)\ncodegen(s)\n",
        stencil("")
    );
    let f = program(d.path(), "s.teml", &src);
    let emitted = d.path().join("k.c");
    let (ok, out) = teml_bits(
        d.path(),
        Some("512"),
        &["run", &f, "--no-run", "-q", "--emit-c", emitted.to_str().unwrap()],
    );
    assert!(ok, "{out}");
    let c = std::fs::read_to_string(&emitted).unwrap();
    for want in [
        "for (; j <= (N-2) && (uintptr_t)&B[i][j] % 64 != 0; j++)  /* until B[i][j] starts a 64-byte line */",
        "for (; j <= (N-9); j += 8)  /* `B` streamed: stored without reading its lines */",
        "teml_stream_teml_d8(&B[i][j], (*(teml_d8 *)&A[i][j] + *(teml_d8 *)&A[i][j+1]) / 2.0);",
        "_mm512_stream_pd((double *)p, (__m512d)v);",
        "teml_stream_fence();",
        "_mm_sfence();",
    ] {
        assert!(c.contains(want), "{want}:\n{c}");
    }
    crate::common::golden("stream_stencil.c", &c);
    // 256-bit lanes of floats: 32-byte lines, the AVX store
    let src = format!("{}v = vectorize(l, 2, 256)\ns = stream(v, 2, B)\ncodegen(s)\n", stencil("float, "));
    let f = program(d.path(), "f.teml", &src);
    let (ok, c) = teml_bits(d.path(), Some("512"), &["run", &f, "--no-run", "-q"]);
    assert!(ok, "{c}");
    assert!(c.contains("% 32 != 0") && c.contains("_mm256_stream_ps((float *)p, (__m256)v);"), "{c}");
    // blocks of 8 lanes after a strip-mine: unrolled lanes, plain stores, and the C says why
    let src = format!(
        "{}v = vectorize(l, 2, 256)\ns = stream(v, 2, B)\nt = stripmine(s, 2, 8)\ncodegen(t)\n",
        stencil("float, ")
    );
    let u = program(d.path(), "u.teml", &src);
    let (ok, c) = teml_bits(d.path(), Some("512"), &["run", &u, "--no-run", "-q", "-D", "N=17"]);
    assert!(
        ok && c.contains("/* `B` not streamed: j's few lanes are unrolled")
            && !c.contains("teml_stream_teml"),
        "{c}"
    );
    // without explicit vectors, plain stores
    let g = program(d.path(), "g.teml", &std::fs::read_to_string(&f).unwrap().replace(", 256)", ")"));
    let (ok, c) = teml_bits(d.path(), Some("0"), &["run", &g, "--no-run", "-q"]);
    assert!(ok && !c.contains("teml_stream"), "{c}");
}

#[test]
fn stores_that_cannot_stream_are_refused_with_the_reason() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| format!("{}{s}\n", stencil(""));
    let r = |name: &str, s: &str, want: &[&str]| refused(d.path(), None, name, &p(s), want);
    r(
        "plain.teml",
        "s = stream(l, 2, B)",
        &["stream: loop `j` is not vectorized: expected a vectorized loop", "plain.teml:"],
    );
    r(
        "outer.teml",
        "p = vectorize(l, 1)\ns = stream(p, 1, B)",
        &["loop `i` has the loop `j` inside: expected an innermost vectorized loop"],
    );
    r(
        "absent.teml",
        "v = vectorize(l, 2)\ns = stream(v, 2, A)",
        &["found no statement in loop `j` that writes `A`"],
    );
    r("level.teml", "v = vectorize(l, 2)\ns = stream(v, 3, B)", &["stream: argument 2 (level)"]);
    r("scalar.teml", "v = vectorize(l, 2)\ns = stream(v, 2, 2.0)", &["stream: argument 3"]);
    // lanes along a column: B[j][i] for the vectorized i
    r(
        "column.teml",
        "x = interchange(l, 1, 2)\nv = vectorize(x, 2)\ns = stream(v, 2, B)",
        &["whose lanes along `i` are not adjacent elements of a row"],
    );
    // a sum: its lines are read anyway
    let mm = "N = 8\nA = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\n";
    let f = program(
        d.path(),
        "mm.teml",
        &format!("{mm}x = interchange(l, 2, 3)\nv = vectorize(x, 3)\ns = stream(v, 3, C)\n"),
    );
    let (ok, out) = teml_bits(d.path(), None, &["check", &f]);
    assert!(!ok && out.contains("C[i1][i2] summed into (+=): its old values are read"), "{out}");
}
