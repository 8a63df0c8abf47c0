//! Loops below a branch (issue 21, item 3: every transformation applicable to a loop around a
//! sequence and to its body): `focus(l, "k")` counts levels from the loop of iterator k, so a
//! loop inside a sequence is distributed, interchanged, vectorized, tiled and run on threads
//! like any other; the result is checked on the whole nest (isl), verified through the real
//! binary in both syntaxes, and every bad address is refused with the loops it could name.

use crate::common::{program, refused, teml_bits};

/// correlation's triangle: `i [corr[i][i] = 1; j [zero; k [sum]; mirror]]`.
const TRIANGLE: &str = "M = 9\nN = 7\ndata = tensor([N, M])\ncorr = tensor([M, M])\n\
    r1 = @corr: eq(1.0, -> [i, i])\nr2 = @corr: eq(0.0, -> [i, j])\n\
    dk = vmul(data, data, [[k, i], [k, j]])\nr3 = @corr: add(corr, dk, [[i, j], ] -> [i, j])\n\
    r4 = @corr: eq(corr, [i, j] -> [j, i])\n\
    lr1 = build(r1, [[i]])\nlr2 = build(r2, [[i], [j]])\nlr3 = build(r3, [[i], [j], [k, 0, N-1]])\n\
    lr4 = build(r4, [[i], [j]])\nlrj = around(j, [i+1, M-1], lr2, lr3, lr4)\n\
    l = around(i, [0, M-2], lr1, lrj)\n";

#[test]
fn loops_in_a_sequence_are_distributed_interchanged_and_vectorized() {
    let d = tempfile::tempdir().unwrap();
    // .teml: the sums' k outside j, j vectorized, the rows in blocks of 4 on threads.
    let src = format!(
        "{TRIANGLE}codegen(l)\n\
         s = stripmine(l, 1, 4)\n\
         fs = focus(s, \"j\")\n\
         a = distribute(fs, 1)\n\
         b = distribute(a, 1)\n\
         fb = focus(b, \"i#3\")\n\
         c = interchange(fb, 2, 3)\n\
         c2 = interchange(c, 1, 2)\n\
         c3 = vectorize(c2, 3)\n\
         c4 = focus(c3)\n\
         p = parallelize(c4, 1)\n\
         codegen(p)\n"
    );
    let f = program(d.path(), "tri.teml", &src);
    let (ok, o) = teml_bits(d.path(), None, &["run", &f, "--threads", "2"]);
    assert!(ok && o.matches("verified").count() == 2, "{o}");
    // k now runs outside the block's rows, j innermost and vectorized
    assert!(o.contains("for io in") && o.contains("parallel"), "{o}");
    let k = o.find("for k in [0, N-1]").expect(&o);
    let i3 = o[k..].find("for i in").expect(&o);
    let j3 = o[k + i3..].find("for j in [i+1, M-1]  vectorize").expect(&o);
    assert!(j3 > 0, "{o}");
    // under -D the ranges follow, and the Rhai front-end says the same
    let (ok, o) = teml_bits(d.path(), None, &["run", &f, "-q", "-D", "M=3", "-D", "N=2"]);
    assert!(ok && o.matches("verified").count() == 2, "{o}");
    let rhai = "// program: tri.teml\n\
         let a = distribute(focus(l, \"j\"), 1);\n\
         print(depth(a));\n\
         print(iterators(focus(a, \"j#2\")));\n\
         let b = vectorize(interchange(focus(a, \"j#2\"), 1, 2), 2);\n\
         print(depth(b));\n\
         print(parallel_levels(b));\n\
         let p = permute(focus(b, \"k\"), [2, 1]);\n\
         print(tree(p));\n\
         codegen(parallelize(focus(b), 1));\n";
    program(d.path(), "tri.teml", TRIANGLE);
    let r = program(d.path(), "tri.rhai", rhai);
    let (ok, o) = teml_bits(d.path(), None, &["run", &r, "-q"]);
    assert!(ok && o.contains("verified"), "{o}");
    let lines: Vec<&str> = o.lines().collect();
    assert_eq!(lines[0], "1", "{o}"); // focused on i after the distribution
    assert_eq!(lines[1], "[\"j\", \"k\"]", "{o}");
    assert_eq!(lines[2], "2", "{o}"); // k, j below the focus
    // k only reduces, but into corr[i][j] with j inside it: code generation could not run it
    // on threads (one accumulated element per iteration), so only j is offered.
    assert_eq!(lines[3], "[2]", "{o}");
    assert!(o.contains("focus: for j in [i+1, M-1]"), "{o}");
}

#[test]
fn a_focused_transformation_is_checked_on_the_whole_nest() {
    let d = tempfile::tempdir().unwrap();
    // A time loop around a recurrence x[i] = x[i-1] + y[i] and a copy: reversing or
    // parallelizing the recurrence's loop, reached through focus, is refused with a witness;
    // the copy's loop may run on threads.
    let src = "N = 8\nx = tensor([N])\ny = tensor([N])\nz = tensor([N])\n\
               s = vadd(x, y, [[i-1], [i]])\nr = @x: eq(s, [i] -> [i])\nlr = build(r, [[i, 1, N-1]])\n\
               c = @z: add(z, x, [[i], [i]] -> [i])\nlc = build(c, [[i, 0, N-1]])\n\
               l = around(t, [0, 3], lr, lc)\n";
    let ok_src = format!("{src}f = focus(l, \"i#2\")\np = parallelize(f, 1)\ncodegen(p)\n");
    let f = program(d.path(), "ok.teml", &ok_src);
    let (ok, o) = teml_bits(d.path(), None, &["run", &f, "-q"]);
    assert!(ok && o.contains("verified"), "{o}");
    for (name, bad) in [
        ("rev.teml", "f = focus(l, \"i#1\")\nb = reverse(f, 1)\n"),
        ("par.teml", "f = focus(l, \"i#1\")\nb = parallelize(f, 1)\n"),
    ] {
        refused(d.path(), None, name, &format!("{src}{bad}"), &["illegal", &format!("{name}:12:")]);
    }
}

#[test]
fn bad_addresses_are_refused_with_the_loops_they_could_name() {
    let d = tempfile::tempdir().unwrap();
    let dist = format!("{TRIANGLE}fl = focus(l, \"j\")\na = distribute(fl, 1)\n");
    for (name, line, want) in [
        ("none.teml", "b = focus(l, \"q\")", vec!["found no loop `q`", "\"k\" (k in [0, N-1])"]),
        (
            "many.teml",
            "b = focus(a, \"j\")",
            vec!["`j` names 3 loops", "\"j#1\" to \"j#3\"", "many.teml:18:"],
        ),
        ("range.teml", "b = focus(a, \"j#4\")", vec!["`j#1` to `j#3`", "found `j#4`"]),
        ("single.teml", "b = focus(a, \"k#2\")", vec!["\"k\" (a single loop)"]),
        ("syntax.teml", "b = focus(a, \"j#x\")", vec!["\"k#2\" for the second loop"]),
        ("level.teml", "b = focus(a, 3)", vec!["a level 1..=1", "found 3"]),
        // a level below the focus's branch is still an error
        ("below.teml", "f = focus(a, \"i\")\nb = interchange(f, 1, 2)", vec!["lies below a branch"]),
        // fuse_outer takes whole nests
        (
            "fuse.teml",
            "f = focus(a, \"k\")\nb = fuse_outer(f, l, 1)",
            vec!["a nest focused on the loop k in"],
        ),
    ] {
        refused(d.path(), None, name, &format!("{dist}{line}\n"), &want);
    }
    // A loop the transformation makes may not take the iterator of a loop around the focus.
    let clash = "N = 6\nA = tensor([N])\nB = tensor([N])\na1 = @A: eq(1.0, -> [j])\nb1 = @B: eq(2.0, -> [j])\n\
                 l1 = build(a1)\nl2 = build(b1)\nl = around(jo, [0, 2], l1, l2)\n\
                 f = focus(l, \"j#1\")\ns = stripmine(f, 1, 2)\n";
    refused(d.path(), None, "clash.teml", clash, &["other than those of the loops around the focus (jo)"]);
}

#[test]
fn the_tree_shows_the_focus_and_a_saved_history_replays_it() {
    let d = tempfile::tempdir().unwrap();
    let src = format!(
        "{TRIANGLE}fl = focus(l, \"j\")\na = distribute(fl, 1)\nfk = focus(a, \"k\")\nb = vectorize(fk, 1)\ncodegen(b)\n"
    );
    let f = program(d.path(), "h.teml", &src);
    let (ok, o) = teml_bits(d.path(), None, &["run", &f, "-q", "--no-run", "--emit-c", "/dev/null"]);
    assert!(ok, "{o}");
    // the tuner's writer replays the chain, focus and all
    let rhai = "// program: h.teml\nlet x = param(\"v\", [1, 2]);\nlet b2 = vectorize(focus(a, \"j#2\"), 2);\n\
                codegen(b2, \"k\");\n";
    let r = program(d.path(), "h.rhai", rhai);
    let out = d.path().join("tune");
    let (ok, o) = teml_bits(
        d.path(),
        None,
        &["tune", &r, "--budget", "2", "--out", out.to_str().unwrap(), "-D", "M=5", "-D", "N=4"],
    );
    assert!(ok, "{o}");
    let best = std::fs::read_to_string(out.join("best.teml")).unwrap();
    assert!(best.contains("focus(") && best.contains("\"j#2\""), "{best}");
    let (ok, o) = teml_bits(d.path(), None, &["run", out.join("best.teml").to_str().unwrap(), "-q"]);
    assert!(ok && o.contains("verified"), "{o}");
}

#[test]
fn a_parallel_triangle_is_dealt_round_robin_and_a_tile_is_not() {
    let d = tempfile::tempdir().unwrap();
    let src = format!(
        "{TRIANGLE}p = parallelize(l, 1)\ncodegen(p)\n\
         B = tensor([M, N])\nc = @B: mul(B, 2.0, [[i, j], ] -> [i, j])\nlc = build(c)\nt = tile(lc, 4)\n\
         pt = parallelize(t, 1)\ncodegen(pt)\n"
    );
    let f = program(d.path(), "rr.teml", &src);
    let c = d.path().join("k.c");
    let (ok, o) = teml_bits(d.path(), None, &["run", &f, "-q", "--emit-c", c.to_str().unwrap()]);
    assert!(ok && o.matches("verified").count() == 2, "{o}");
    // two kernels: --emit-c writes one file each beside the path given
    let text: String = std::fs::read_dir(d.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "c"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert_eq!(text.matches("#pragma omp parallel for schedule(static, 1)").count(), 1, "{text}");
    assert_eq!(text.matches("#pragma omp parallel for\n").count(), 1, "{text}");
}
