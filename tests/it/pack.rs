//! `pack(l, r, T)`: the block of an operand that a loop band reads, copied into a contiguous
//! buffer before the band and read from there, verified at sizes with and without tails, and
//! refused where the band writes the operand.

use crate::common::program;

fn teml(dir: &std::path::Path, args: &[&str]) -> (bool, String) {
    crate::common::teml_bits(dir, Some("512"), args)
}

const MM: &str = "A = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\n";

#[test]
fn a_packed_panel_verifies_with_and_without_tails() {
    let d = tempfile::tempdir().unwrap();
    // the BLIS schedule of scripts/best/mm.teml, with B's 12 x 32 block packed for the rows
    let decl = program(d.path(), "decl.teml", &format!("N = 40\n{MM}"));
    let f = program(
        d.path(),
        "p.rhai",
        &format!(
            "// program: {decl}\nlet p = register_tile(l, C, 4, 16, 12, 2);\np = parallelize(p, 3);\n\
             p = pack(p, 3, B);\np = pack(p, 4, \"A\");\ncodegen(p);\n"
        ),
    );
    for n in ["40", "32", "13"] {
        // 4 rows do not divide 13: the last block's rows run under a test
        let (ok, out) = teml(d.path(), &["run", &f, "-D", &format!("N={n}"), "--threads", "2", "-q"]);
        assert!(ok && out.contains("verified"), "N={n}: {out}");
    }
    let (ok, out) = teml(d.path(), &["run", &f]);
    assert!(ok && out.contains("for i1o in [0, floor((N-1)/4)]  parallel pack(B)\n"), "{out}");
    assert!(out.contains("for i2o in [2*i2oo, min(2*i2oo+1, floor((N-1)/16))]  pack(A)\n"), "{out}");
    let (ok, c) = teml(d.path(), &["run", &f, "--no-run"]);
    assert!(ok, "{c}");
    assert!(
        c.contains(
            "teml_C0 += teml_A_pack[0][k1-12*k1o] * *(teml_d8 *)&teml_B_pack[k1-12*k1o][16*i2o-32*i2oo];"
        ),
        "{c}"
    );
    assert!(c.contains("/* `B` packed for loop `i1o`: the 12 x 32 block from B[12*k1o][32*i2oo] */"), "{c}");
    assert!(c.contains("double (*restrict teml_B_pack)[32] = malloc(sizeof(double[12][32]));"), "{c}");
    assert!(
        c.contains("memcpy(&teml_B_pack[teml_p0][0], &B[(12*k1o) + teml_p0][32*i2oo], sizeof(double) * teml_min(32, N-32*i2oo));"),
        "{c}"
    );
    // inside the band, B is read from the buffer: offsets from the block's first element
    assert!(c.contains("*(teml_d8 *)&teml_B_pack[k1-12*k1o][16*i2o-32*i2oo]"), "{c}");
    assert!(c.contains("free(teml_B_pack);"), "{c}");
    // the copy runs before the parallel loop: one shared panel
    let copy = c.find("memcpy(&teml_B_pack").unwrap();
    let par = c.find("#pragma omp parallel for").unwrap();
    assert!(copy < par, "{c}");
}

#[test]
fn what_cannot_be_packed_is_refused_with_the_reason() {
    let d = tempfile::tempdir().unwrap();
    let refused =
        |name: &str, src: &str, want: &[&str]| crate::common::refused(d.path(), Some("512"), name, src, want);
    refused(
        "written.teml",
        &format!("N = 8\n{MM}p = pack(l, 2, C)\n"),
        &["pack: cannot pack `C` for loop `i2`", "writes it inside the loop", ":6:"],
    );
    refused(
        "absent.teml",
        &format!("N = 8\n{MM}X = tensor([N])\np = pack(l, 2, X)\n"),
        &["does not read `X`"],
    );
    refused(
        "twice.teml",
        &format!("N = 8\n{MM}p = pack(l, 1, B)\nq = pack(p, 2, B)\n"),
        &["already packed for the enclosing loop `i1`"],
    );
    refused("level.teml", &format!("N = 8\n{MM}p = pack(l, 5, B)\n"), &["level out of range"]);
    // layouts: an order that is no permutation of the block's dimensions, a padding out of range,
    // and a reordering that would break the lanes of a vectorized loop
    refused(
        "order.teml",
        &format!("N = 8\n{MM}p = pack(l, 1, B, [1, 1])\n"),
        &["a permutation of 1..2", "found [1, 1]"],
    );
    refused("rank.teml", &format!("N = 8\n{MM}p = pack(l, 1, B, [3, 2, 1])\n"), &["a permutation of 1..2"]);
    refused(
        "zero.teml",
        &format!("N = 8\n{MM}p = pack(l, 1, B, [2, 1], 0)\n"),
        &["a padding multiple from 1 to 64", "found 0"],
    );
    refused("pad.teml", &format!("N = 8\n{MM}p = pack(l, 1, B, [1, 2], 65)\n"), &["found 65"]);
    refused(
        "lanes.teml",
        &format!("N = 8\n{MM}v = vectorize(l, 2)\np = pack(v, 1, B, [2, 1])\n"),
        &["the vectorized loop `i2` reads B[k1][i2] along its last dimension", "an order that ends with 2"],
    );
}

#[test]
fn a_transposed_or_padded_panel_verifies_in_both_front_ends() {
    // BLIS's panels: the rows' block of A stored transposed (Ap[k][i]: the rows a register tile
    // reads for one k are adjacent), B's block with its rows padded
    let d = tempfile::tempdir().unwrap();
    let decl = program(d.path(), "decl.teml", &format!("N = 40\n{MM}"));
    let teml_src = format!(
        "N = 40\n{MM}p = register_tile(l, C, 4, 16, 12, 2)\np1 = pack(p, 3, B, [1, 2], 24)\n\
         p2 = pack(p1, 4, A, [2, 1])\ncodegen(p2)\n"
    );
    let t = program(d.path(), "panels.teml", &teml_src);
    let r = program(
        d.path(),
        "panels.rhai",
        &format!(
            "// program: {decl}\nlet p = register_tile(l, C, 4, 16, 12, 2);\np = parallelize(p, 3);\n\
             p = pack(p, 3, B, [1, 2], 24);\np = pack(p, 4, \"A\", [2, 1]);\ncodegen(p);\n"
        ),
    );
    for f in [&t, &r] {
        for n in ["40", "13", "3"] {
            for bits in ["512", "0"] {
                let (ok, out) = crate::common::teml_bits(
                    d.path(),
                    Some(bits),
                    &["run", f, "-D", &format!("N={n}"), "--threads", "2"],
                );
                assert!(ok && out.contains("verified"), "{f}, N={n}, {bits} bits: {out}");
                assert!(out.contains("pack(B pad 24)") && out.contains("pack(A [2, 1])"), "{out}");
            }
        }
    }
    let (ok, c) = teml(d.path(), &["run", &t, "--no-run"]);
    assert!(ok, "{c}");
    for want in [
        "double (*restrict teml_B_pack)[48] = malloc(sizeof(double[12][48]));",
        "memcpy(&teml_B_pack[teml_p0][0], &B[(12*k1o) + teml_p0][32*i2oo], sizeof(double) * teml_min(32, N-32*i2oo));",
        "/* `A` packed for loop `i2o`: the 4 x 12 block from A[4*i1o][12*k1o], laid out [2, 1] */",
        "double (*restrict teml_A_pack)[4] = malloc(sizeof(double[12][4]));",
        "teml_A_pack[teml_p0][teml_p1] = A[(4*i1o) + teml_p1][(12*k1o) + teml_p0];",
        "teml_C6 += teml_A_pack[k1-12*k1o][3] * *(teml_d8 *)&teml_B_pack[k1-12*k1o][16*i2o-32*i2oo];",
    ] {
        assert!(c.contains(want), "{want}: {c}");
    }
}

#[test]
fn a_whole_operand_packed_once_verifies() {
    // pack at the outermost loop: the whole of B (a transposed read stays a plain copy)
    let d = tempfile::tempdir().unwrap();
    let f = program(
        d.path(),
        "p.teml",
        &format!("N = 11\n{MM}p = pack(l, 1, B)\nq = parallelize(p, 1)\ncodegen(q)\n"),
    );
    let (ok, out) = teml(d.path(), &["run", &f, "--threads", "2"]);
    assert!(ok && out.contains("verified") && out.contains("parallel pack(B)"), "{out}");
}

/// Found by the fuzzer: a packed inner loop of a collapsed band put its copy between the
/// collapsed loops (C that does not compile); refused at `codegen` with the reason.
#[test]
fn a_packed_loop_inside_a_collapsed_band_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let src = "A1 = tensor([2])\nA2 = tensor([9, 8])\nW3 = outerproduct(A1, A2)\nl4 = build(W3)\n\
               l10 = pack(l4, 2, A1)\nl11 = collapse(l10, 1, 2)\ncodegen(l11)\n";
    crate::common::refused(
        d.path(),
        Some("512"),
        "band.teml",
        src,
        &[
            "codegen: cannot collapse the 2 loops",
            "is marked parallel pack(A1)",
            "between the collapsed loops",
        ],
    );
}

/// A band that holds a strip-mined loop of blocks (`jo in [0, floor((N-1)/8)]`): the box of B it
/// reads is its affine hull, reaching past B's last column by less than a block, and the copy
/// stops at the edge (issue 23: the loop of blocks' `floor` bound was refused as not affine).
#[test]
fn a_band_over_blocks_packs_their_hull() {
    let d = tempfile::tempdir().unwrap();
    let f = program(
        d.path(),
        "p.teml",
        &format!("N = 13\n{MM}s = stripmine(l, 2, 8)\np = pack(s, 2, B)\ncodegen(p)\n"),
    );
    for n in ["13", "16", "1"] {
        let (ok, out) = teml(d.path(), &["run", &f, "-D", &format!("N={n}"), "-q"]);
        assert!(ok && out.contains("verified"), "N={n}: {out}");
    }
    let (ok, c) = teml(d.path(), &["run", &f, "--no-run"]);
    assert!(ok, "{c}");
    assert!(c.contains("/* `B` packed for loop `i2o`: the N x N+7 block from B[0][0] */"), "{c}");
}

/// Found by the fuzzer: a block whose box reaches outside the tensor where the loops' real
/// range does not (the box counts a strip-mined block's full range) copies only what lies
/// inside. A backward loop, unrolled and strip-mined, packs `A4[-3..2]` of a 3-element tensor
/// (the copy read before it: a crash); an unrolled tail's guarded copy lies past `A7`'s end
/// (a negative `memcpy` length: heap corruption, caught as a compiler defect and rebuilt with
/// clang).
#[test]
fn a_block_reaching_outside_its_tensor_copies_only_what_lies_inside() {
    let d = tempfile::tempdir().unwrap();
    let before = program(
        d.path(),
        "before.teml",
        "A4 = tensor([3])\nW5 = outerproduct(A4, A4)\nl7 = build(W5, [[i1, 2, 0, -1]])\n\
         l8 = unroll_by(l7, 1, 3)\nl9 = stripmine(l8, 1, 2)\nl11 = pack(l9, 1, A4)\ncodegen(l7, l11)\n",
    );
    let (ok, c) = teml(d.path(), &["run", &before, "--no-run"]);
    assert!(ok && c.contains("/* `A4` packed for loop `i1oo`: the 6 block from A4[-3] */"), "{c}");
    assert!(
        c.contains(
            "{ int teml_s = teml_max(0, 3), teml_n = teml_min(6, 6) - teml_s; if (teml_n > 0) \
             memcpy(&teml_A4_pack[teml_s], &A4[-3 + teml_s], sizeof(double) * teml_n); }"
        ),
        "{c}"
    );
    let past = program(
        d.path(),
        "past.teml",
        "A7 = tensor([6, 7, 11])\nA8 = tensor([6])\nt = vmul(A7, 0.5, [[i, j+1, k+2], ])\n\
         X9 = add(t, A8, [, [i]] -> [i, k, j])\nl = build(X9)\nl1 = pack(l, 3, A7)\n\
         l2 = unroll_by(l1, 2, 4)\ncodegen(l2)\n",
    );
    let (ok, c) = teml(d.path(), &["run", &past, "--no-run"]);
    // The whole blocks' copies (k up to 7) stay plain; the tail's (k = 8 and past) are guarded.
    assert!(ok && c.contains("sizeof(double) * teml_min(1, -4*ko+9));"), "{c}");
    assert!(c.contains("teml_n = teml_min(1, -4*ko+6) - teml_s; if (teml_n > 0) memcpy("), "{c}");
    for f in [&before, &past] {
        let (ok, out) = teml(d.path(), &["run", f, "-q"]);
        assert!(ok && out.contains("verified") && !out.contains("crashed"), "{f}: {out}");
    }
}
