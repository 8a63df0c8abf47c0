//! Code sinking, index-set splitting and commuting `max` updates (issue 21, nussinov): `sink`
//! moves the statements beside a loop into it at one iteration, `split` peels that iteration
//! off again, and legality lets the `max` (or `min`) updates of one element by different
//! statements run in any order, so nussinov's splits run k outside j, a row at a time, in vector
//! lanes (`fmax` lane by lane). Everything else keeps its order: the same path with `+` updates
//! is refused with a witness, and a random mix of updates either is refused or computes what
//! the program computes.

use crate::common::{nest, program, proptest_cases, refused, small_integers, teml_bits};
use proptest::prelude::*;
use teml::interp::run as interp;
use teml::ir::State;

/// nussinov (examples/polybench/nussinov.teml) with the update of the three neighbours and of
/// the splits given (`max`, `min` or `add`), without its codegen.
fn nussinov(n: i64, head: [&str; 3], splits: &str) -> String {
    format!(
        "N = {n}\nseq = tensor([N])\ntable = tensor([N, N])\n\
         p1 = @table: max(table, table, [[i, i+1], [i, i]] -> [i, i+1])\n\
         p2 = @table: max(table, table, [[i, i+1], [i+1, i+1]] -> [i, i+1])\n\
         p3 = @table: max(table, table, [[i, i+1], [i+1, i]] -> [i, i+1])\n\
         s1 = @table: {h1}(table, table, [[i, j], [i, j-1]] -> [i, j])\n\
         s2 = @table: {h2}(table, table, [[i, j], [i+1, j]] -> [i, j])\n\
         b = vadd(seq, seq, [[i], [j]])\npair = veq(b, 3.0, [, ])\n\
         matched = vselect(pair, 1.0, 0.0, [, , ])\nw = vadd(table, matched, [[i+1, j-1], ])\n\
         s3 = @table: {h3}(table, w, [[i, j], ] -> [i, j])\n\
         split = vadd(table, table, [[i, k], [k+1, j]])\n\
         s4 = @table: {splits}(table, split, [[i, j], ] -> [i, j])\n\
         lp1 = build(p1, [[i]])\nlp2 = build(p2, [[i]])\nlp3 = build(p3, [[i]])\n\
         l1 = build(s1, [[i], [j]])\nl2 = build(s2, [[i], [j]])\nl3 = build(s3, [[i], [j]])\n\
         l4 = build(s4, [[i], [j], [k, i+1, j-1]])\n\
         lj = around(j, [i+2, N-1], l1, l2, l3, l4)\n\
         l = around(i, [N-2, 0, -1], lp1, lp2, lp3, lj)\n",
        h1 = head[0],
        h2 = head[1],
        h3 = head[2],
    )
}

/// The interchanged path of scripts/polybench/tuned/nussinov.teml, the neighbours sunk `at`.
fn interchanged(at: &str) -> String {
    format!(
        "fj = focus(l, \"j\")\ns = sink(fj, 1{at})\nx = interchange(s, 1, 2)\nfk = focus(x, \"k\")\n\
         p = split(fk, 2, k+2)\nf2 = focus(p, \"j#2\")\nv = vectorize(f2, 1)\nr = focus(v)\n"
    )
}

#[test]
fn nussinov_runs_its_splits_by_rows_in_vector_lanes_verified_in_both_syntaxes() {
    let d = tempfile::tempdir().unwrap();
    // N = 37: the rows' vectors end in a scalar remainder.
    let src = format!(
        "{}{}codegen(r, \"nussinov\")\n",
        nussinov(37, ["max"; 3], "max"),
        interchanged(", \"last\"")
    );
    let f = program(d.path(), "n.teml", &src);
    let c = d.path().join("n.c");
    let (ok, o) = teml_bits(d.path(), Some("256"), &["run", &f, "--emit-c", c.to_str().unwrap()]);
    assert!(ok && o.contains("verified (max rel error 0.00e0"), "{o}");
    // k outside j; the iteration j = k+1 peeled with the neighbours, unguarded; the rest of the
    // row in lanes.
    assert!(o.contains("for k in [N-i-1, N-2]\n    for j in [k+1, k+1]\n"), "{o}");
    assert!(o.contains("for j in [k+2, N-1]  vectorize\n"), "{o}");
    assert!(!o.contains("if "), "the guards are gone:\n{o}");
    let c = std::fs::read_to_string(&c).unwrap();
    assert!(c.contains("teml_fmax_teml_d4(*(teml_d4 *)&table[N-i-2][j], "), "{c}");
    assert!(c.contains("(b != b)"), "fmax keeps C's NaN rule:\n{c}");
    // The same path from Rhai: the tuned space's point.
    let rhai = format!(
        "{}\nlet s = sink(focus(l, \"j\"), 1, \"last\");\ns = interchange(s, 1, 2);\n\
         s = split(focus(s, \"k\"), 2, iter(\"k\") + 2);\ncodegen(focus(vectorize(focus(s, \"j#2\"), 1)));\n",
        "// program: n.teml"
    );
    program(d.path(), "n.teml", &nussinov(21, ["max"; 3], "max"));
    let r = program(d.path(), "n.rhai", &rhai);
    let (ok, o) = teml_bits(d.path(), None, &["run", &r]);
    assert!(ok && o.contains("verified"), "{o}");
}

#[test]
fn updates_that_do_not_commute_keep_their_order() {
    let d = tempfile::tempdir().unwrap();
    // `+` updates: sinking the neighbours after the splits reorders sums (refused), and so does
    // a `min` beside a `max`.
    for (head, splits) in [(["add"; 3], "add"), (["max", "min", "max"], "max")] {
        let src = format!("{}{}codegen(r)\n", nussinov(9, head, splits), interchanged(", \"last\""));
        refused(d.path(), None, "n.teml", &src, &["n.teml:26", "sink"]);
    }
    // Sunk in order (at the first iteration of the splits), the neighbours of (i, j) would run
    // before the entry left of them is final once k is outside j: interchange says which.
    let src = format!("{}{}codegen(r)\n", nussinov(9, ["max"; 3], "max"), interchanged(""));
    refused(d.path(), None, "n.teml", &src, &["n.teml:27", "interchange", "table"]);
}

#[test]
fn sink_and_split_refuse_bad_arguments_at_the_line() {
    let d = tempfile::tempdir().unwrap();
    let base = nussinov(9, ["max"; 3], "max");
    let cases: &[(&str, &[&str])] = &[
        // i's body: the neighbours beside j (one loop): fine; two inner loops are not.
        ("s = sink(l, 1, \"middle\")\n", &["n.teml:25", "\"first\" or \"last\"", "middle"]),
        ("fk = focus(l, \"k\")\ns = sink(fk, 1)\n", &["n.teml:26", "statements beside", "0 loops"]),
        ("fj = focus(l, \"j\")\ns = split(fj, 1, j+1)\n", &["n.teml:26", "affine expression", "j+1"]),
        ("fj = focus(l, \"j\")\ns = split(fj, 3, 2)\n", &["n.teml:26", "level"]),
        ("fj = focus(l, \"j\")\ns = split(fj, 1, \"x\")\n", &["n.teml:26", "split"]),
    ];
    for (steps, want) in cases {
        let src = format!("{base}{steps}codegen(s)\n");
        refused(d.path(), None, "n.teml", &src, want);
    }
    // Two loops beside each other: nothing to sink into.
    let two = "N = 5\nA = tensor([N, N])\nB = tensor([N, N])\na = @A: eq(1.0, -> [i, j])\n\
               b = @B: eq(2.0, -> [i, j])\nla = build(a, [[i], [j, 0, N-1]])\nlb = build(b, [[i], [j, 0, N-1]])\n\
               x = around(i, [0, N-1], la, lb)\ns = sink(x, 1)\ncodegen(s)\n";
    refused(
        d.path(),
        None,
        "two.teml",
        two,
        &["two.teml:9", "exactly one loop", "2 loops", "sink(l, 1, \"first\", \"j\")"],
    );
    // ... unless the inner loop is named, and then it must be one loop directly inside.
    let named = two.replace("s = sink(x, 1)", "s = sink(x, 1, \"first\", \"k\")");
    refused(
        d.path(),
        None,
        "two.teml",
        &named,
        &["two.teml:9", "argument 4 (into)", "exactly one loop", "`j`, `j`", "\"k\" (0 such loops)"],
    );
    let both = two.replace("s = sink(x, 1)", "s = sink(x, 1, \"first\", \"j\")");
    refused(d.path(), None, "two.teml", &both, &["two.teml:9", "argument 4 (into)", "\"j\" (2 such loops)"]);
    // A loop moved beside `j` that binds `j` itself would take the guard that places it.
    let capture = "N = 5\nA = tensor([N, N])\nC = tensor([N, N, N])\na = @A: eq(1.0, -> [i, j])\n\
                   c = @C: eq(3.0, -> [i, k, j])\nla = build(a, [[i], [j, 0, N-1]])\n\
                   lc = build(c, [[i], [k, 0, N-1], [j, 0, N-1]])\nx = around(i, [0, N-1], lc, la)\n\
                   s = sink(x, 1, \"first\", \"j\")\ncodegen(s)\n";
    refused(
        d.path(),
        None,
        "cap.teml",
        capture,
        &["cap.teml:9", "do not bind `j`", "a loop over `j` beside"],
    );
    // The splits' loop is empty at j = i+1: sinking the neighbours there is refused.
    let empty = base.replace("lj = around(j, [i+2, N-1]", "lj = around(j, [i+1, N-1]");
    let src = format!("{empty}fj = focus(l, \"j\")\ns = sink(fj, 1)\ncodegen(s)\n");
    refused(d.path(), None, "n.teml", &src, &["n.teml:26", "runs at least once", "can be empty"]);
}

#[test]
fn split_anywhere_keeps_every_instance_in_order() {
    let d = tempfile::tempdir().unwrap();
    // A triangle, split at a constant inside, before and past its range, and at the outer
    // iterator: each verified (the parts clipped to the range, empty parts gone).
    let tri = "N = 11\nA = tensor([N, N])\nB = tensor([N, N])\n\
               s = @B: add(B, A, [[i, j], [j, i]] -> [i, j])\nl = build(s, [[i, 0, N-1], [j, 0, i]])\n";
    for at in ["3", "-4", "40", "i", "i+1", "N-2"] {
        let src = format!("{tri}p = split(l, 2, {at})\ncodegen(p)\n");
        let f = program(d.path(), "t.teml", &src);
        let (ok, o) = teml_bits(d.path(), None, &["run", &f]);
        assert!(ok && o.contains("verified"), "split at {at}:\n{o}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: proptest_cases(24), .. ProptestConfig::default() })]
    /// Any mix of updates, sunk anywhere: each step is refused with an error or the nest
    /// computes exactly what the program does; with every update a `max` (or every one a
    /// `min`) sunk last, the whole path is accepted.
    #[test]
    fn sunk_and_interchanged_nests_compute_what_the_program_does(
        ops in proptest::collection::vec(0usize..3, 4),
        at in 0usize..3,
        n in 4i64..9,
    ) {
        let names = ["max", "min", "add"];
        let op = |k: usize| names[ops[k]];
        let src = nussinov(n, [op(0), op(1), op(2)], op(3));
        let s = teml::lang::eval(&src, "n.teml", &State::new()).expect("the program");
        let at_arg = ["", ", \"first\"", ", \"last\""][at];
        let steps = interchanged(at_arg);
        let accepted = teml::lang::eval(&steps, "p.teml", &s);
        let same = ops.iter().all(|o| *o == ops[0]) && ops[0] < 2;
        if same && at == 2 {
            prop_assert!(accepted.is_ok(), "{:?}", accepted.err().map(|e| e.to_string()));
        }
        let Ok(t) = accepted else { return Ok(()) };
        let (l, r) = (nest(&s, "l"), nest(&t, "r"));
        let mut want = small_integers(&s, &l);
        let mut got = want.clone();
        interp(&s, &[l], &mut want).unwrap();
        interp(&t, &[r], &mut got).unwrap();
        prop_assert_eq!(&want["table"].data, &got["table"].data, "{} {}", src, steps);
    }
}

#[test]
fn floyd_warshall_split_at_k_runs_in_lanes_and_threads_verified() {
    let d = tempfile::tempdir().unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    // As written, row k and column k change during step k: j is not vectorizable.
    let fw = std::fs::read_to_string(format!("{root}/examples/polybench/floyd-warshall.teml")).unwrap();
    let plain = fw.replace("codegen(l)", "v = vectorize(l, 3)\ncodegen(v)");
    refused(d.path(), None, "fw.teml", &plain, &["vectorize", "path", "loop `j`"]);
    // Split at k and k+1, the parts off the diagonal run in lanes and on threads (N = 13: the
    // lanes end in remainders).
    let space = format!("{root}/scripts/polybench/tune/floyd-warshall.rhai");
    let (ok, o) = teml_bits(
        d.path(),
        Some("256"),
        &["run", &space, "-D", "N=13", "--param", "order=split", "--threads", "2"],
    );
    assert!(ok && o.contains("verified (max rel error 0.00e0"), "{o}");
    assert!(o.contains("  for i in [0, k-1]  parallel\n    for j in [0, k-1]  vectorize\n"), "{o}");
    assert!(o.contains("  for i in [k+1, N-1]  parallel\n"), "{o}");
    assert_eq!(o.matches("vectorize").count(), 4, "{o}");
}

/// gramschmidt's left-looking order (scripts/polybench/tune/gramschmidt.rhai, `order=left`):
/// the column steps of k (a sum over i, a square root, a column of Q: two loops and two
/// statements) sunk into the loop over later columns j at its first iteration, j cut into
/// blocks moved outside k, A and Q stored by columns so that the sum over i runs in lanes of
/// partial sums and the update in lanes of i. Verified at sizes whose blocks end in remainders
/// (N <= M: columns past M would be rounding noise, examples/polybench/gramschmidt.teml), on
/// threads, with the C's vector loads read from the column-major buffers.
#[test]
fn gramschmidt_left_looking_sinks_its_column_steps_into_blocks_of_columns_verified() {
    let d = tempfile::tempdir().unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let space = format!("{root}/scripts/polybench/tune/gramschmidt.rhai");
    let c = d.path().join("gs.c");
    for (m, n, block) in [("70", "45", "32"), ("13", "7", "64")] {
        let (ok, o) = teml_bits(
            d.path(),
            Some("256"),
            &[
                "run",
                &space,
                "-D",
                &format!("M={m}"),
                "-D",
                &format!("N={n}"),
                "--param",
                "order=left",
                "--param",
                &format!("block={block}"),
                "--threads",
                "2",
                "--emit-c",
                c.to_str().unwrap(),
            ],
        );
        assert!(ok && o.contains("verified"), "{o}");
        assert!(
            o.contains("  for jo in [0, floor((N-1)/") && o.contains("    for k in [0, min(N-2, "),
            "{o}"
        );
        assert!(o.contains("  parallel\n        R[k][j] = 0.0 + 0.0\n        for io in [0, floor((M-1)/8)]  registers(R)\n"), "{o}");
        let src = std::fs::read_to_string(&c).unwrap();
        // the sum's lanes and the update's, along the columns of the column-major buffers
        assert!(
            src.contains("*(teml_d4 *)&teml_Q_layout[k][") && src.contains("*(teml_d4 *)&teml_A_layout[j]["),
            "{src}"
        );
        assert!(src.contains("#pragma omp parallel for"), "{src}");
    }
}

/// covariance's register block (scripts/polybench/tune/covariance.rhai, `order =
/// register_block`): its square tiles split at the diagonal; in the tiles past it `split`
/// drops the bounds the part implies (`j in [max(48*jo, i), ..]` is `[48*jo, ..]`, `i`'s `min`
/// goes), so the loops no longer depend on each other, move to jo, ko, io and take a 4 x 12
/// register block of cov. Verified on threads at sizes whose tiles and blocks end in
/// remainders.
#[test]
fn covariance_tiles_past_the_diagonal_take_a_register_block_verified() {
    let d = tempfile::tempdir().unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let space = format!("{root}/scripts/polybench/tune/covariance.rhai");
    let (ok, o) =
        teml_bits(d.path(), Some("256"), &["run", &space, "-D", "M=101", "-D", "N=60", "--threads", "2"]);
    assert!(ok && o.contains("verified"), "{o}");
    assert!(o.contains("          for j in [i, min(48*jo+47, M-1)]\n"), "{o}");
    assert!(
        o.contains("  for jo in [1, floor((M-1)/48)]\n    for ko in [0, floor((N-1)/128)]\n      for io in [0, jo-1]  parallel\n"),
        "{o}"
    );
    assert!(o.contains("  registers(cov)\n") && o.contains("cov[48*io+4*io2+3][j] += "), "{o}");
}

/// mvt's fused point (scripts/polybench/tune/mvt.rhai, `fused=true`): x2's product,
/// interchanged, runs `j, i` where x1's runs `i, j`; `fuse_outer` renames its outer `j` to `i`,
/// and first its inner `i` (bound there) to a fresh `i2`, so one pass over A gives each row's
/// t1[i] and its share of t2. Verified in lanes.
#[test]
fn fuse_outer_renames_a_swapped_inner_iterator_and_mvt_runs_in_one_pass() {
    let d = tempfile::tempdir().unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let space = format!("{root}/scripts/polybench/tune/mvt.rhai");
    let (ok, o) = teml_bits(d.path(), Some("256"), &["run", &space, "-D", "N=13", "--param", "fused=true"]);
    assert!(ok && o.contains("verified"), "{o}");
    assert!(o.contains("  for i2 in [0, N-1]  vectorize\n    t2[i2] += A[i][i2] * y2[i]\n"), "{o}");
    assert!(o.contains("  for jo in [0, floor((N-1)/8)]  registers(t1)\n"), "{o}");
}
