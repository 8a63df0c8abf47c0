//! `registers(l, r, T)` (scalar replacement, register tiles) and explicit vector code: the
//! accumulator tile of a matrix product held in vector registers across the reduction loop,
//! verified at every vector width (512, 256 bits, and the scalar fallback), the C as a user
//! reads it, and every refusal with its reason.

use crate::common::program;

fn teml(dir: &std::path::Path, bits: &str, args: &[&str]) -> (bool, String) {
    crate::common::teml_bits(dir, Some(bits), args)
}

/// A 4 x 16 register tile of C across k: i by 4 (unrolled and jammed), j by 16 (the lanes).
fn tile(n: i64) -> String {
    format!(
        "N = {n}\nA = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\n\
         l1 = stripmine(l, 1, 4)\nl2 = stripmine(l1, 3, 16)\nl3 = interchange(l2, 2, 3)\n\
         l4 = interchange(l3, 3, 5)\nl5 = interchange(l4, 4, 5)\nl6 = unroll(l5, 4)\nl7 = fuse_inner(l6, 4)\n\
         l8 = vectorize(l7, 4)\nl9 = registers(l8, 3, C)\nl10 = parallelize(l9, 1)\n"
    )
}

#[test]
fn a_register_tile_verifies_at_every_vector_width() {
    let d = tempfile::tempdir().unwrap();
    let f = program(d.path(), "mm.teml", &format!("{}codegen(l10)\n", tile(32)));
    for bits in ["512", "256", "128", "0"] {
        let (ok, out) = teml(d.path(), bits, &["run", &f, "--threads", "2", "-q"]);
        assert!(ok && out.contains("verified"), "{bits} bits: {out}");
    }
    let (ok, out) = teml(d.path(), "512", &["run", &f, "--no-run"]);
    assert!(ok, "{out}");
    // eight 8-lane accumulators, loaded before k, stored after; no C access inside the k loop
    assert!(out.contains("{ /* C in registers across `k1` */"), "{out}");
    assert!(out.contains("teml_d8 teml_C7 = *(teml_d8 *)&C[4*i1o+3][16*i2o+8];"), "{out}");
    // each row's two blocks together (row 0's broadcast used at once, not kept live across the
    // other rows: with 16 registers, a 6 x 2 tile block by block spilled accumulators)
    assert!(
        out.contains(
            "teml_C0 += A[4*i1o][k1] * *(teml_d8 *)&B[k1][16*i2o];\n          teml_C1 += A[4*i1o][k1] * *(teml_d8 *)&B[k1][16*i2o+8];"
        ),
        "{out}"
    );
    assert!(out.contains("*(teml_d8 *)&C[4*i1o+3][16*i2o+8] = teml_C7;"), "{out}");
    let k_loop = &out[out.find("for (int k1").unwrap()..];
    let k_loop = &k_loop[..k_loop.find("*(teml_d8 *)&C[").unwrap()];
    assert!(!k_loop.contains("&C[") && !k_loop.contains("if ("), "{k_loop}");
    // the zeroing runs before the band, as loops of its own
    assert!(out.contains("C[4*i1o+3][i2] = 0.0;"), "{out}");
    // the whole kernel, as a user reads it (TEML_BLESS=1 to update)
    let c = d.path().join("tile.c");
    let (ok, out2) = teml(d.path(), "512", &["run", &f, "--no-run", "-q", "--emit-c", c.to_str().unwrap()]);
    assert!(ok, "{out2}");
    let actual = std::fs::read_to_string(&c).unwrap();
    crate::common::golden("mm_register_tile.c", &actual);
    // without vectors: 64 scalar registers
    let (ok, out) = teml(d.path(), "0", &["run", &f, "--no-run"]);
    assert!(ok && out.contains("double teml_C63 = C[4*i1o+3][16*i2o+15];"), "{out}");
}

#[test]
fn a_scalar_accumulator_across_k_verifies() {
    // The untransformed product: C[i][j] in one register across k (classic scalar replacement).
    let d = tempfile::tempdir().unwrap();
    let src = "N = 9\nA = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\n\
               r = registers(l, 3, C)\ncodegen(r)\n";
    let f = program(d.path(), "mm.teml", src);
    let (ok, out) = teml(d.path(), "512", &["run", &f]);
    assert!(ok && out.contains("verified") && out.contains("for k1 in [0, N-1]  registers(C)"), "{out}");
    let (ok, c) = teml(d.path(), "512", &["run", &f, "--no-run"]);
    assert!(
        ok && c.contains("double teml_C0 = C[i1][i2];") && c.contains("teml_C0 += A[i1][k1] * B[k1][i2];"),
        "{c}"
    );
}

#[test]
fn what_registers_cannot_keep_is_refused_with_the_reason() {
    let d = tempfile::tempdir().unwrap();
    let mm = "N = 16\nA = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\n";
    let refused =
        |name: &str, src: &str, want: &[&str]| crate::common::refused(d.path(), Some("512"), name, src, want);
    refused(
        "varies.teml",
        &format!("{mm}r = registers(l, 2, C)\n"),
        &["registers: cannot keep `C` in registers across loop `i2`", "C[i1][i2] varies with `i2`", ":6:"],
    );
    refused(
        "absent.teml",
        &format!("{mm}X = tensor([N])\nr = registers(l, 3, X)\n"),
        &["does not access `X`"],
    );
    refused(
        "threads.teml",
        &format!("{mm}p = parallelize(l, 2)\nr = registers(p, 1, C)\n"),
        &["runs on threads"],
    );
    refused(
        "marked.teml",
        &format!("{mm}p = vectorize(l, 3)\nr = registers(p, 3, C)\n"),
        &["the loop is marked vectorize"],
    );
    refused("level.teml", &format!("{mm}r = registers(l, 4, C)\n"), &["level out of range"]);
    refused("kind.teml", &format!("{mm}r = registers(l, 3, l)\n"), &["argument 3 (tensor)"]);
    // lanes without a constant trip count: strip-mine first
    refused(
        "lanes.teml",
        &format!("{mm}a = interchange(l, 2, 3)\nv = vectorize(a, 3)\nr = registers(v, 2, C)\n"),
        &["has no constant trip count", "strip-mine it"],
    );
    // a mark moved by interchange is checked where it lands, at the codegen statement
    refused(
        "moved.teml",
        &format!("{mm}r = registers(l, 3, C)\nm = interchange(r, 2, 3)\ncodegen(m)\n"),
        &["codegen: cannot keep `C` in registers across loop `k1`", "varies with `i2`"],
    );
}

#[test]
fn the_rhai_front_end_takes_the_tensor_or_its_name() {
    let d = tempfile::tempdir().unwrap();
    let src = "let N = 8;\nlet A = tensor([N, N]);\nlet B = tensor([N, N]);\nlet C = contract(A, B, [2, 1]);\n\
               let l = build(C);\nlet r1 = registers(l, 3, C);\nlet r2 = registers(l, 3, \"C\");\n\
               if tree(r1) != tree(r2) { throw \"differ\"; }\ncodegen(r2);\n";
    let f = program(d.path(), "mm.rhai", src);
    let (ok, out) = teml(d.path(), "512", &["run", &f]);
    assert!(ok && out.contains("verified"), "{out}");
}

#[test]
fn explicit_vectors_keep_a_remainder_and_stay_right_for_any_size() {
    // j over all of N = 13: 8-lane steps, then a scalar remainder; an outer-product update.
    let d = tempfile::tempdir().unwrap();
    let src = "N = 13\nA = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\n\
               a = interchange(l, 2, 3)\nv = vectorize(a, 3)\ncodegen(v)\n";
    let f = program(d.path(), "mm.teml", src);
    for bits in ["512", "256", "0"] {
        let (ok, out) = teml(d.path(), bits, &["run", &f, "-q"]);
        assert!(ok && out.contains("verified"), "{bits}: {out}");
    }
    let (ok, c) = teml(d.path(), "512", &["run", &f, "--no-run"]);
    assert!(ok && c.contains("for (; i2 <= (N-8); i2 += 8)") && c.contains("/* the remainder */"), "{c}");
    // a strided access keeps the pragma, with the reason beside it
    let src = "N = 13\nA = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\n\
               v = vectorize(l, 2)\ncodegen(v)\n";
    let f = program(d.path(), "strided.teml", src);
    let (ok, c) = teml(d.path(), "512", &["run", &f, "--no-run"]);
    assert!(
        ok && c.contains("#pragma omp simd  /* compiler-vectorized: loop `i2` has a loop inside */"),
        "{c}"
    );
}

#[test]
fn register_tile_is_one_call_and_keeps_outer_loops() {
    let d = tempfile::tempdir().unwrap();
    // a matrix product: the BLIS loops, verified, and the same C as the written-out path
    let decl = program(
        d.path(),
        "decl.teml",
        "N = 32\nA = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\n",
    );
    let f = program(
        d.path(),
        "rt.rhai",
        &format!(
            "// program: {decl}\nlet p = register_tile(l, C, 8, 16, 24, 2);\np = parallelize(p, 3);\ncodegen(p);\n"
        ),
    );
    let (ok, out) = teml(d.path(), "512", &["run", &f, "--threads", "2"]);
    assert!(ok && out.contains("verified"), "{out}");
    assert!(out.contains("for k1 in [24*k1o, min(24*k1o+23, N-1)]  registers(C)"), "{out}");
    // a batched product (loops b, i, j, k): the batch loop stays outermost; K = 26 is no
    // multiple of the k block, the last block is shorter
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bmm.teml");
    let f = program(
        d.path(),
        "bmm.rhai",
        &format!(
            "// program: {}\nlet p = register_tile(l, C, 8, 24, 8, 3);\np = parallelize(p, 1);\ncodegen(p);\n",
            example.display()
        ),
    );
    let (ok, out) = teml(d.path(), "512", &["run", &f, "-D", "BATCH=3", "--threads", "2"]);
    assert!(ok && out.contains("verified"), "{out}");
    assert!(out.starts_with("p =\nfor b in [0, BATCH-1]  parallel\n"), "{out}");
    // a register block that does not divide the rows: the row blocks split in two, the full
    // ones keep their registers, the last runs its rows under a test
    let f = program(
        d.path(),
        "tail.rhai",
        &format!("// program: {decl}\nlet p = register_tile(l, C, 5, 16, 24, 2);\ncodegen(p);\n"),
    );
    for n in ["13", "40", "4"] {
        let (ok, out) = teml(d.path(), "512", &["run", &f, "-D", &format!("N={n}")]);
        assert!(ok && out.contains("verified"), "N={n}: {out}");
    }
    let (ok, c) = teml(d.path(), "512", &["run", &f, "-D", "N=13", "-D", "BATCH=2", "--no-run"]);
    assert!(ok, "{c}");
    assert!(c.contains("/* `i1o` in two parts: up to teml_floordiv(N-5, 5), where every unrolled copy runs; then the rest */"), "{c}");
    assert!(c.contains("/* the last, partial block of rows: no registers */"), "{c}");
    assert!(c.contains("if (N-5*i1o-5 >= 0)"), "{c}");
}

#[test]
fn a_tile_that_divides_the_full_size_is_verified_at_a_size_it_still_divides() {
    // The 6 register rows divide 240 but not 64 or 32: the reduced size is 60, the largest
    // divisor of 240 up to 64, which they divide (it used to be 64, where `unroll` refused).
    let d = tempfile::tempdir().unwrap();
    let decl = program(
        d.path(),
        "decl.teml",
        "N = 240\nA = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\n",
    );
    let f = program(
        d.path(),
        "rt.rhai",
        &format!(
            "// program: {decl}\nlet p = register_tile(l, C, 6, 24, 64, 4);\np = parallelize(p, 3);\ncodegen(p);\n"
        ),
    );
    let (ok, out) = teml(d.path(), "512", &["run", &f, "--max-reference", "1000000", "-q"]);
    assert!(ok && out.contains("verified") && out.contains("reduced size (N=60)"), "{out}");
}

#[test]
fn a_partial_last_block_of_lanes_runs_without_registers() {
    // N = 40: columns in blocks of 16 leave a last block of 8; rows by 4 divide.
    let d = tempfile::tempdir().unwrap();
    let f = program(d.path(), "mm.teml", &format!("{}codegen(l10)\n", tile(40)));
    for bits in ["512", "256", "0"] {
        let (ok, out) = teml(d.path(), bits, &["run", &f, "--threads", "2", "-q"]);
        assert!(ok && out.contains("verified"), "{bits} bits: {out}");
    }
    let (ok, c) = teml(d.path(), "512", &["run", &f, "--no-run"]);
    assert!(ok, "{c}");
    assert!(c.contains("if ((16*i2o+15) <= (N-1))  /* full blocks of lanes */"), "{c}");
    assert!(c.contains("else  /* the last, partial block: no registers */"), "{c}");
    assert!(c.contains("teml_C7 += A[4*i1o+3][k1] * *(teml_d8 *)&B[k1][16*i2o+8];"), "{c}");
    assert!(c.contains("for (; i2 <= teml_min(16*i2o+15, N-1); i2++)  /* the remainder */"), "{c}");
}

#[test]
fn register_block_keeps_a_block_across_every_reduction_loop() {
    // mttkrp, A[i][j] += B[i][k][l] * D[l][j] * C[k][j]: rows of i by 2, j in 8 lanes (13 is no
    // multiple: a tail), A's block in registers across both k and l
    let d = tempfile::tempdir().unwrap();
    let decl = program(
        d.path(),
        "decl.teml",
        "N = 12\nB = tensor([N, N, N])\nC = tensor([N, N])\nD = tensor([N, N])\n\
         A = einsum(\"ikl,lj,kj->ij\", [B, D, C])\nl = build(A)\n",
    );
    let f = program(
        d.path(),
        "rb.rhai",
        &format!(
            "// program: {decl}\nlet p = register_block(l, A, 1, 2, 2, 8);\np = parallelize(p, 1);\ncodegen(p);\n"
        ),
    );
    for n in ["12", "13"] {
        // 2 rows do not divide 13: the last row block runs its second row under a test
        let (ok, out) = teml(d.path(), "512", &["run", &f, "-D", &format!("N={n}"), "--threads", "2"]);
        assert!(ok && out.contains("verified"), "N={n}: {out}");
        assert!(out.contains("    for k in [0, N-1]  registers(A)\n      for l in [0, N-1]\n"), "{out}");
    }
    // the columns' level must be another loop of the nest
    let f = program(
        d.path(),
        "bad.rhai",
        &format!("// program: {decl}\nlet p = register_block(l, A, 2, 2, 2, 8);\n"),
    );
    let (ok, out) = teml(d.path(), "512", &["check", &f]);
    assert!(!ok && out.contains("register_block") && out.contains("other than the rows' level 2"), "{out}");
}

#[test]
fn a_read_only_operand_is_loaded_once_and_never_stored() {
    // loops i, k, j: A[i][k] does not move with j, so it is loaded before the j loop (a hoisted
    // loop-invariant load, as gconv's weights), and never written back
    let d = tempfile::tempdir().unwrap();
    let src = "N = 10\nA = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\n\
               a = interchange(l, 2, 3)\nr = registers(a, 3, A)\ncodegen(r)\n";
    let f = program(d.path(), "mm.teml", src);
    let (ok, out) = teml(d.path(), "512", &["run", &f]);
    assert!(ok && out.contains("verified") && out.contains("for i2 in [0, N-1]  registers(A)"), "{out}");
    let (ok, c) = teml(d.path(), "512", &["run", &f, "--no-run"]);
    assert!(ok && c.contains("double teml_A0 = A[i1][k1];"), "{c}");
    assert!(c.contains("C[i1][i2] += teml_A0 * B[k1][i2];") && !c.contains("= teml_A0;"), "{c}");
}

/// The second gcc 12 `-O3 -march=native` miscompile pattern of issue 19: two guarded zeroings
/// `if (k1 == 0) O[..] = 0.0;` in one `omp simd` body, which unroll-and-jam of a contraction
/// used to print. The zeroings now leave the vectorized loop (they move past accesses to the
/// other row), so neither the pragma form nor explicit vectors has a guard in the hot loop,
/// and both verify at the default flags.
#[test]
fn guarded_zeroings_no_longer_reach_a_simd_body() {
    let d = tempfile::tempdir().unwrap();
    let src = "X = tensor([8, 6])\nY = tensor([6, 16])\nO = contract(X, Y, [2, 1])\nl = build(O)\n\
               a = interchange(l, 2, 3)\nu = unroll_and_jam(a, 1, 2)\nv = vectorize(u, 3)\ncodegen(v)\n";
    let f = program(d.path(), "pattern2.teml", src);
    for bits in ["0", "256", "512"] {
        let (ok, out) = teml(d.path(), bits, &["run", &f, "--time", "--min-time", "0.01"]);
        assert!(ok && out.contains("verified") && out.contains("time:"), "{bits} bits: {out}");
        let (ok, c) = teml(d.path(), bits, &["run", &f, "--no-run"]);
        assert!(ok && !c.contains("if ("), "{bits} bits: {c}");
    }
    let (_, c) = teml(d.path(), "0", &["run", &f, "--no-run"]);
    assert!(
        c.contains(
            "      O[2*i1o+1][i2] = 0.0;\n    for (int k1 = 0; k1 <= 5; k1++)\n      #pragma omp simd\n"
        ),
        "{c}"
    );
}

#[test]
fn rows_that_do_not_divide_the_extent_verify_at_every_vector_width() {
    // 6 rows into 13 and 29, and an unroll-and-jam of 4 into 13 without registers: the copies
    // past the end are guarded, tested only in the last block of rows
    let d = tempfile::tempdir().unwrap();
    let decl = program(
        d.path(),
        "decl.teml",
        "N = 13\nA = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\n",
    );
    let f = program(
        d.path(),
        "rows.rhai",
        &format!(
            "// program: {decl}\nlet p = register_tile(l, C, 6, 8, 5, 2);\np = parallelize(p, 3);\ncodegen(p);\n\
             let q = unroll_and_jam(l, 1, 4);\nq = interchange(q, 2, 3);\nq = vectorize(q, 3);\ncodegen(q);\n"
        ),
    );
    for (bits, ns) in
        [("512", &["13", "29", "6"][..]), ("256", &["13"]), ("128", &["13"]), ("0", &["13", "29"])]
    {
        for n in ns {
            let (ok, out) =
                teml(d.path(), bits, &["run", &f, "-D", &format!("N={n}"), "--threads", "2", "-q"]);
            assert!(ok && out.matches("verified").count() == 2, "{bits} bits, N={n}: {out}");
        }
    }
    // the hot loop of the unroll-and-jam tests nothing: its guards are tested in the last block
    let (ok, c) = teml(d.path(), "512", &["run", &f, "--no-run"]);
    assert!(ok, "{c}");
    let main = c.split("then the rest */").nth(2).unwrap_or_default();
    let (first, rest) = main.split_once("for (int i1o = teml_max(").unwrap_or_default();
    assert!(!first.contains("if (") && rest.contains("if (N-4*i1o-4 >= 0)"), "{c}");
}

#[test]
fn rfactor_keeps_one_partial_sum_per_lane_across_the_block_loop() {
    // y = A x: k strip-mined by 16, its lanes vectorized, y[i] kept as 16 partial sums (two
    // vectors of 8 at 512 bits) across the block loop, added up once; 13 and 1000 are no
    // multiple of 16: the last block runs one lane at a time
    let d = tempfile::tempdir().unwrap();
    let decl = program(
        d.path(),
        "decl.teml",
        "N = 6\nK = 1000\nA = tensor([N, K])\nx = tensor([K])\ny = contract(A, x, [2, 1])\nl = build(y)\n\
         M = 5\nS = tensor([N, M])\nB = tensor([M, K])\nO = einsum(\"ij,ik,jk->ij\", [S, A, B])\nl2 = build(O)\n",
    );
    let f = program(
        d.path(),
        "rf.rhai",
        &format!(
            "// program: {decl}\nlet r = rfactor(l, 2, 16, y);\nr = parallelize(r, 1);\ncodegen(r);\n\
             let s = rfactor(l2, 3, 8, O);\ncodegen(s);\n"
        ),
    );
    for (bits, ks) in [("512", &["1000", "13", "16", "5"][..]), ("256", &["13"]), ("0", &["1000", "13"])] {
        for k in ks {
            let (ok, out) =
                teml(d.path(), bits, &["run", &f, "-D", &format!("K={k}"), "--threads", "2", "-q"]);
            assert!(ok && out.matches("verified").count() == 2, "{bits} bits, K={k}: {out}");
        }
    }
    let (ok, c) = teml(d.path(), "512", &["run", &f, "--no-run"]);
    assert!(ok, "{c}");
    for want in [
        "teml_d8 teml_y0 = (teml_d8){y[i1]};",
        "teml_d8 teml_y1 = (teml_d8){0};",
        "teml_y1 += *(teml_d8 *)&A[i1][16*k1o+8] * *(teml_d8 *)&x[16*k1o+8];",
        "else  /* the last, partial block: one lane at a time */",
        "teml_y0[0] += A[i1][k1] * x[k1];",
        "y[i1] = teml_hsum_teml_d8(teml_y0) + teml_hsum_teml_d8(teml_y1);  /* the lanes' partial sums */",
    ] {
        assert!(c.contains(want), "{want}: {c}");
    }
    // a loop inside the lanes: refused, naming it
    crate::common::refused(
        d.path(),
        Some("512"),
        "inner.teml",
        "N = 6\nK = 32\nA = tensor([N, K])\nx = tensor([K])\ny = contract(A, x, [2, 1])\nl = build(y)\n\
         l1 = interchange(l, 1, 2)\nr = rfactor(l1, 1, 16, y)\n",
        &["cannot keep `y` in registers across loop `k1o`", "has a loop inside"],
    );
}

#[test]
fn vectorize_takes_a_narrower_width_and_refuses_one_the_target_lacks() {
    // at 512 bits, vectorize(l, r, 256) prints AVX2-wide lanes (teml_d4), verified; 1024 and 96
    // are refused at the line, and 256 where the target has 128 bits only
    let d = tempfile::tempdir().unwrap();
    let src = "N = 40\nA = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\n\
               p = register_tile(l, C, 4, 16, 12, 2)\nq = vectorize(p, 6, 256)\ncodegen(q)\n";
    let f = program(d.path(), "w.teml", src);
    let (ok, out) = teml(d.path(), "512", &["run", &f, "-D", "N=13"]);
    assert!(ok && out.contains("verified") && out.contains("vectorize(256)"), "{out}");
    let (ok, c) = teml(d.path(), "512", &["run", &f, "--no-run"]);
    assert!(ok && c.contains("teml_d4 teml_C0") && !c.contains("teml_d8"), "{c}");
    for (bits, w, want) in [
        ("512", "1024", "a vector width this target has: 128, 256, 512"),
        ("512", "96", "found 96"),
        ("128", "256", "a vector width this target has: 128"),
    ] {
        crate::common::refused(
            d.path(),
            Some(bits),
            &format!("w{w}.teml"),
            &format!(
                "N = 8\nA = tensor([N])\nB = tensor([N])\nB = add(A, A, [[i], [i]], [i])\nl = build(B)\nv = vectorize(l, 1, {w})\n"
            ),
            &["vectorize: argument 3 (bits)", want, ":6:"],
        );
    }
}

#[test]
fn lanes_along_a_strided_dimension_are_gathered_around_the_band() {
    // O[n][k][y][x]: the channels k (12, not a multiple of the 8 lanes) are 25 elements apart;
    // rows x (5), after the lanes' level; F stored k-last so its lanes are one vector load.
    let d = tempfile::tempdir().unwrap();
    let decl = "NB = 2\nK = 12\nC = 3\nH = 5\nR = 3\nI = tensor([NB, C, H+R-1, H+R-1])\n\
                F = tensor([K, C, R, R])\nO = tensor([NB, K, H, H])\ninit(O, 0)\n\
                P = vmul(I, F, [[n, c, y+r, x+s], [k, c, r, s]])\nO = add(O, P, [[n, k, y, x], ] -> [n, k, y, x])\n\
                l = build(O)\n";
    let f = program(
        d.path(),
        "conv.teml",
        &format!(
            "{decl}p = permute_layout(l, F, [2, 3, 4, 1])\np = register_block(p, O, 4, 2, 3, 8)\n\
             p = parallelize(p, 1)\ncodegen(p)\n"
        ),
    );
    for bits in ["512", "256", "0"] {
        let (ok, out) = teml(d.path(), bits, &["run", &f, "--threads", "2", "-q"]);
        assert!(ok && out.contains("verified"), "{bits} bits: {out}");
    }
    let (ok, out) = teml(d.path(), "512", &["run", &f, "--no-run"]);
    assert!(ok, "{out}");
    // each vector of O gathered lane by lane before the reductions, stored lane by lane after
    assert!(out.contains("/* O in registers across `c` */"), "{out}");
    assert!(
        out.contains("teml_d8 teml_O0 = (teml_d8){O[n][8*ko][y][3*xo], O[n][8*ko+1][y][3*xo], "),
        "{out}"
    );
    assert!(out.contains("O[n][8*ko+7][y][3*xo] = teml_O0[7];"), "{out}");
    // inside: F's lanes one vector load, I one broadcast a row
    assert!(
        out.contains("teml_O0 += I[n][c][r+y][s+3*xo] * *(teml_d8 *)&teml_F_layout[c][r][s][8*ko];"),
        "{out}"
    );
    // a strided access a band does not keep is still refused as lanes
    let g = program(
        d.path(),
        "bad.teml",
        &format!(
            "{decl}p = stripmine(l, 2, 4)\np = interchange(p, 3, 4)\np = interchange(p, 4, 5)\np = interchange(p, 5, 6)\np = interchange(p, 6, 7)\np = interchange(p, 7, 8)\np = vectorize(p, 8)\ncodegen(p)\n"
        ),
    );
    let (ok, out) = teml(d.path(), "512", &["run", &g, "--no-run"]);
    assert!(ok && out.contains("compiler-vectorized: O[n][k][y][x] is not contiguous in `k`"), "{out}");
    // X[0][j] (lanes along its rows) and X[j][0] (lanes gathered down its column) share X[0][0]:
    // two registers for one element would be stale, so the band refuses them
    let h = program(
        d.path(),
        "overlap.teml",
        "X = tensor([8, 8])\nA = tensor([4, 8])\nP = vmul(X, A, [[j, 0], [k, j]])\n\
         Y = @X: add(X, P, [[0, j], ] -> [0, j])\nl = build(Y)\np = interchange(l, 1, 2)\np = vectorize(p, 2)\n\
         p = registers(p, 1, X)\ncodegen(p)\n",
    );
    let (ok, out) = teml(d.path(), "512", &["run", &h, "--no-run"]);
    assert!(!ok && out.contains("may be the same element"), "{out}");
}

/// A register tile or block of one row (`mr = 1`): one copy of the row, nothing to jam, the
/// row's lanes still kept in registers; it used to be refused by the `fuse_inner` inside.
#[test]
fn a_register_tile_and_a_register_block_of_one_row_verify() {
    let d = tempfile::tempdir().unwrap();
    let f = program(
        d.path(),
        "one_row.teml",
        "M = 5\nN = 52\nK = 66\nA = tensor([M, K])\nB = tensor([K, N])\nC = contract(A, B, [2, 1])\n\
         l = build(C)\np = register_tile(l, C, 1, 16, 32, 2)\nq = parallelize(p, 3)\ncodegen(q)\n\
         r = register_block(l, C, 1, 2, 1, 16)\ncodegen(r)\n",
    );
    for bits in ["512", "256"] {
        let (ok, out) = teml(d.path(), bits, &["run", &f, "--threads", "2", "-q"]);
        assert!(ok && out.matches(": verified").count() == 2, "{bits} bits: {out}");
    }
    let (ok, out) = teml(d.path(), "256", &["run", &f, "--no-run"]);
    assert!(ok && out.contains("{ /* C in registers across `k1` */"), "{out}");
}
