//! Storage contraction (`store_at(l, r, T)`, and code generation's own after fusion): a
//! temporary stored per iteration of a loop in a local array instead of the whole tensor,
//! verified through the real binary (serial, on threads, under `-D`), the C as a user reads it,
//! `-o` keeping a tensor whole, and every refusal with its reason or witness.

use crate::common::{program, refused, teml_bits};

fn teml(dir: &std::path::Path, args: &[&str]) -> (bool, String) {
    teml_bits(dir, None, args)
}

/// interp (three contractions per element) with its element loops fused: `f2`.
const INTERP: &str = "E = 12\nN = 5\nA = tensor([N, N])\nu = tensor([E, N, N, N])\n\
    t = einsum(\"ad,edbc->eabc\", [A, u])\nw = einsum(\"bd,eadc->eabc\", [A, t])\n\
    v = einsum(\"cd,eabd->eabc\", [A, w])\nl1 = build(t)\nl2 = build(w)\nl3 = build(v)\n\
    f1 = fuse_outer(l1, l2, 1)\nf2 = fuse_outer(f1, l3, 1)\n";

#[test]
fn temporaries_stored_per_element_verify_serial_threaded_and_under_d() {
    let d = tempfile::tempdir().unwrap();
    let src = format!(
        "{INTERP}s1 = store_at(f2, 1, t)\ns2 = store_at(s1, 1, w)\np = parallelize(s2, 1)\ncodegen(s2)\ncodegen(p)\n"
    );
    let f = program(d.path(), "interp.teml", &src);
    let (ok, out) = teml(d.path(), &["run", &f, "--threads", "2"]);
    assert!(ok && out.matches("verified").count() == 2, "{out}");
    assert!(out.contains("for e in [0, E-1]  store_at(t, w)"), "{out}");
    for define in ["N=3", "E=1"] {
        let (ok, out) = teml(d.path(), &["run", &f, "-q", "-D", define]);
        assert!(ok && out.matches("verified").count() == 2, "{define}: {out}");
    }
    // the C: two local arrays per element, neither tensor a parameter
    let (ok, c) = teml(d.path(), &["run", &f, "--no-run", "-q"]);
    assert!(ok, "{c}");
    assert!(c.contains("double teml_t_local[N][N][N] __attribute__((aligned(64)));  /* `t` stored per iteration of `e`: the 1 x N x N x N block from t[e][0][0][0] */"), "{c}");
    assert!(c.contains("teml_w_local[a][b][c] += A[b][d] * teml_t_local[a][d][c];"), "{c}");
    assert!(c.contains("void teml_s2(double (*restrict A)[N], double (*restrict u)[N][N][N], double (*restrict v)[N][N][N])"), "{c}");
    // the whole kernel, as a user reads it (TEML_BLESS=1 to update)
    let emitted = d.path().join("k.c");
    let (ok, out) = teml(d.path(), &["run", &f, "--no-run", "-q", "--emit-c", emitted.to_str().unwrap()]);
    assert!(ok, "{out}");
    let actual = std::fs::read_to_string(d.path().join("k.1.c")).unwrap();
    crate::common::golden("interp_store_at.c", &actual);
}

#[test]
fn code_generation_contracts_fused_temporaries_unless_saved() {
    let d = tempfile::tempdir().unwrap();
    let f = program(d.path(), "fused.teml", &format!("{INTERP}codegen(f2)\n"));
    let (ok, c) = teml(d.path(), &["run", &f, "--no-run", "-q"]);
    assert!(ok, "{c}");
    assert!(
        c.contains("double teml_t_local[N][N][N] __attribute__((aligned(64)));  /* `t` stored per iteration of `e` (by code generation"),
        "{c}"
    );
    assert!(c.contains("teml_w_local[N][N][N]") && !c.contains("(*restrict t)"), "{c}");
    // unfused, every tensor stays whole: `t` is written by one nest and read by another
    let g = program(d.path(), "unfused.teml", &format!("{INTERP}codegen(l1, l2, l3)\n"));
    let (ok, c) = teml(d.path(), &["run", &g, "--no-run", "-q"]);
    assert!(ok && !c.contains("_local") && c.contains("(*restrict t)"), "{c}");
    // `-o t` keeps `t` whole (and saves what the fused kernel computed); `w` is still local
    let (ok, c) = teml(d.path(), &["run", &f, "--no-run", "-q", "-o", "t=t.npy"]);
    assert!(ok && !c.contains("teml_t_local") && c.contains("teml_w_local"), "{c}");
    let tf = d.path().join("t.npy");
    let (ok, out) = teml(d.path(), &["run", &f, "-q", "-o", &format!("t={}", tf.display())]);
    assert!(ok && out.contains("verified"), "{out}");
    let (ok, out) = teml(d.path(), &["run", &g, "-q", "-o", &format!("t={}.2", tf.display())]);
    assert!(ok && out.contains("verified"), "{out}");
    let a = std::fs::read(&tf).unwrap();
    let b = std::fs::read(format!("{}.2", tf.display())).unwrap();
    assert_eq!(a.len(), b.len());
    // a tensor the program itself stores per iteration cannot be saved
    let h = program(d.path(), "kept.teml", &format!("{INTERP}s = store_at(f2, 1, t)\ncodegen(s)\n"));
    let (ok, out) = teml(d.path(), &["run", &h, "-q", "-o", &format!("t={}", tf.display())]);
    assert!(!ok && out.contains("`t` is stored per iteration of a loop (store_at)"), "{out}");
}

#[test]
fn store_at_refusals_say_why() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| format!("{INTERP}{s}\n");
    // an access outside the loop: the temporaries of an unfused nest
    let src = format!("{INTERP}g = fuse_outer(l1, l2, 1)\ns = store_at(g, 1, t)\ncodegen(s, l3)\n");
    let f = program(d.path(), "ok.teml", &src);
    let (ok, out) = teml(d.path(), &["run", &f, "-q"]);
    assert!(ok && out.contains("verified"), "{out}");
    refused(
        d.path(),
        None,
        "other_nest.teml",
        &format!("{INTERP}g = fuse_outer(l1, l2, 1)\ns = store_at(g, 1, t)\ncodegen(s, l2)\n"),
        &["`t` is stored per iteration of loop `e` in `s`, but `l2` of the same kernel accesses it too"],
    );
    refused(
        d.path(),
        None,
        "result.teml",
        &p("s = store_at(f2, 1, v)"),
        &["no statement reads `v`: it is a result"],
    );
    refused(
        d.path(),
        None,
        "input.teml",
        &p("s = store_at(f2, 1, u)"),
        &["no statement in the loop writes `u`"],
    );
    refused(d.path(), None, "level.teml", &p("s = store_at(f2, 2, t)"), &["level 2 lies below a branch"]);
    // a block larger than a thread's stack: 1 x 64 x 64 x 64 doubles is 2 MiB
    refused(
        d.path(),
        None,
        "big.teml",
        &format!("{}s = store_at(f2, 1, t)\n", INTERP.replace("N = 5", "N = 64")),
        &["(2048 KiB): expected at most 1024 KiB"],
    );
    // a vectorized loop runs its iterations together
    refused(
        d.path(),
        None,
        "lanes.teml",
        &p("x = vectorize(f2, 1)\ns = store_at(x, 1, t)"),
        &["the loop is vectorized"],
    );
}

#[test]
fn a_read_of_another_iteration_is_refused_with_a_witness() {
    // Inside one element's iteration, `w` reads `t` before the loop that writes it runs: isl
    // finds the read whose value comes from elsewhere.
    let d = tempfile::tempdir().unwrap();
    let f = program(d.path(), "t.teml", &format!("{INTERP}s = store_at(f2, 1, t)\n"));
    let s = teml::pipeline::eval_file(std::path::Path::new(&f), &teml::ir::State::new()).unwrap();
    let n = crate::common::nest(&s, "s");
    let teml::ir::LNode::Loop(e) = &n.items()[0] else { panic!() };
    let mut body = e.body.clone();
    body.swap(0, 1);
    let swapped = n.with_items(vec![teml::ir::LNode::Loop(e.with_body(body))]);
    let teml::ir::LNode::Loop(e2) = &swapped.items()[0] else { panic!() };
    let why = teml::analysis::legality::stays_local(&s, &swapped, e2, &"t".into()).unwrap().unwrap_err();
    assert!(why.message.contains("is read by statement 2"), "{}", why.message);
    assert!(
        why.message.contains("in an iteration of loop `e` that does not write it first"),
        "{}",
        why.message
    );
    // the same nest in its order stays local
    let e = match &n.items()[0] {
        teml::ir::LNode::Loop(e) => e.clone(),
        _ => panic!(),
    };
    assert!(teml::analysis::legality::stays_local(&s, &n, &e, &"t".into()).unwrap().is_ok());
}

/// Two sweeps over the rows `i` inside a loop `s` (adi's shape, smaller): each row's forward
/// recurrence writes `T` before anything reads it, in both sweeps; `Y` and `X` are results.
const SWEEPS: &str = "N = 40\nM = 24\nS = 3\nX = tensor([N, M])\nT = tensor([N, M])\nY = tensor([N, M])\n\
a0 = @T: eq(X, [i, 0] -> [i, 0])\nm1 = vmul(0.5, T, [, [i, j-1]])\na1 = @T: add(m1, X, [, [i, j]] -> [i, j])\n\
a2 = @Y: mul(T, 2.0, [[i, j], ] -> [i, j])\nb0 = @T: eq(Y, [i, 0] -> [i, 0])\n\
m2 = vmul(0.25, T, [, [i, j-1]])\nb1 = @T: add(m2, Y, [, [i, j]] -> [i, j])\n\
b2 = @X: add(T, Y, [[i, j], [i, j]] -> [i, j])\nla0 = build(a0, [[i]])\nla1 = build(a1, [[i], [j, 1, M-1]])\n\
la2 = build(a2, [[i], [j, 0, M-1]])\nr1 = around(i, [0, N-1], la0, la1, la2)\nlb0 = build(b0, [[i]])\n\
lb1 = build(b1, [[i], [j, 1, M-1]])\nlb2 = build(b2, [[i], [j, 0, M-1]])\nr2 = around(i, [0, N-1], lb0, lb1, lb2)\n\
l = around(s, [1, S], r1, r2)\n";

#[test]
fn a_tensor_stored_per_iteration_of_one_loop_stays_whole_outside_it() {
    // Only the first sweep's rows store `T` per row; the second sweep writes and reads the
    // whole `T`, reading only what its own row wrote (isl), so neither sees the other's values.
    let d = tempfile::tempdir().unwrap();
    let src = format!("{SWEEPS}f = focus(l, \"i#1\")\ng = store_at(f, 1, T)\nh = focus(g)\ncodegen(h)\n");
    let f = program(d.path(), "one.teml", &src);
    let (ok, out) = teml(d.path(), &["run", &f, "--threads", "2"]);
    assert!(ok && out.contains("verified") && out.contains("compared X, Y within"), "{out}");
    let (ok, c) = teml(d.path(), &["run", &f, "--no-run", "-q"]);
    assert!(ok, "{c}");
    // The row's buffer (its one row left out), and `T` still a parameter for the second sweep.
    assert!(c.contains("double teml_T_local[M] __attribute__((aligned(64)));"), "{c}");
    assert!(
        c.contains("double (*restrict T)[M]") && c.contains("T[i][j] = 0.25 * T[i][j-1] + Y[i][j];"),
        "{c}"
    );
    // Both sweeps, each with a buffer: `T` is no parameter.
    let src = format!(
        "{SWEEPS}f = focus(l, \"i#2\")\ng = store_at(f, 1, T)\nh = focus(g)\nk = focus(h, \"i#1\")\nm = store_at(k, 1, T)\nn = focus(m)\ncodegen(n)\n"
    );
    let f = program(d.path(), "both.teml", &src);
    let (ok, out) = teml(d.path(), &["run", &f, "--threads", "2"]);
    assert!(ok && out.contains("verified") && out.contains("compared X, Y within"), "{out}");
    let (ok, c) = teml(d.path(), &["run", &f, "--no-run", "-q"]);
    assert!(ok && c.matches("double teml_T_local[M]").count() == 2 && !c.contains("(*restrict T)"), "{c}");
}

#[test]
fn a_read_outside_the_loop_of_a_value_written_inside_is_refused() {
    // The second sweep first reads the last value the first sweep's row left in `T`: a buffer
    // per row of the first sweep would not keep it.
    let d = tempfile::tempdir().unwrap();
    let src = SWEEPS
        .replace("lb0 = build(b0, [[i]])\n", "c0 = @Y: add(Y, T, [[i, 0], [i, M-1]] -> [i, 0])\nlc0 = build(c0, [[i]])\nlb0 = build(b0, [[i]])\n")
        .replace("around(i, [0, N-1], lb0,", "around(i, [0, N-1], lc0, lb0,");
    refused(
        d.path(),
        None,
        "escape.teml",
        &format!("{src}f = focus(l, \"i#1\")\ng = store_at(f, 1, T)\n"),
        &[
            "T[0][23] is read by statement",
            "(outside it: of the outermost loop around the read that is not around `i`) that does not write it first",
        ],
    );
    // Stored in both, the second sweep's buffer would not hold it either.
    refused(
        d.path(),
        None,
        "escape2.teml",
        &format!("{src}f = focus(l, \"i#2\")\ng = store_at(f, 1, T)\n"),
        &["is read by statement", "that does not write it first"],
    );
    // The order: a permutation of the block's dimensions.
    refused(
        d.path(),
        None,
        "order.teml",
        &format!("{SWEEPS}f = focus(l, \"i#1\")\ng = store_at(f, 1, T, [1, 1])\n"),
        &["argument 4 (order): expected a permutation of 1..2", "found [1, 1]"],
    );
}

#[test]
fn a_block_of_rows_stores_its_rows_transposed_for_the_lanes() {
    // `teml auto` on the two sweeps: blocks of rows in lanes, `T` stored per block in both
    // sweeps, transposed (`store_at(.., [2, 1])`), so that the block's rows are adjacent: the
    // lanes read and write the buffer as explicit vectors. `X` and `Y` compared, `T` not.
    let d = tempfile::tempdir().unwrap();
    let f = program(d.path(), "sweeps.teml", &format!("{SWEEPS}codegen(l)\n"));
    let a = d.path().join("a");
    let (ok, out) = teml(d.path(), &["auto", &f, "--out", a.to_str().unwrap(), "--no-db"]);
    assert!(ok && out.contains(": verified") && out.contains("compared X, Y within"), "{out}");
    let auto = a.join("auto.teml");
    let path = std::fs::read_to_string(&auto).unwrap();
    assert!(path.contains("#   transpose = block: T stored per block of rows, transposed"), "{path}");
    assert_eq!(path.matches(", \"T\", [2, 1])").count(), 2, "{path}");
    let (ok, c) = teml(d.path(), &["run", auto.to_str().unwrap(), "--no-run", "-q"]);
    assert!(ok && c.matches("double teml_T_local[M][").count() == 2, "{c}");
    assert!(c.contains("*)&teml_T_local[j][i-") && c.contains("*)&teml_T_local[j-1][i-"), "{c}");
    assert!(!c.contains("compiler-vectorized: T"), "{c}");
}

/// `result(T)` keeps a tensor whole: `store_at` and `privatize` refuse it at their line (both
/// front-ends), code generation does not contract it, `-o T` saves it; `temporary(T)` after
/// `result(T)` is refused; a contracted tensor's `-o` names the line that keeps it.
#[test]
fn a_declared_result_is_never_contracted_and_o_names_the_line_that_keeps_one() {
    let d = tempfile::tempdir().unwrap();
    let f = program(d.path(), "r.teml", &format!("{INTERP}result(t)\ns = store_at(f2, 1, t)\ncodegen(s)\n"));
    let (ok, out) = teml(d.path(), &["run", &f]);
    assert!(!ok && out.contains("r.teml:14:21") && out.contains("store_at"), "{out}");
    assert!(out.contains("`t`, declared a result (`result(t)`)"), "{out}");
    let rhai = "let A = tensor([N, N]);\nlet u = tensor([E, N, N, N]);\n\
        let t = einsum(\"ad,edbc->eabc\", [A, u]);\nlet w = einsum(\"bd,eadc->eabc\", [A, t]);\n\
        let f = fuse_outer(build(t), build(w), 1);\nresult(t);\nlet s = store_at(f, 1, t);\n";
    let g = program(d.path(), "r.rhai", rhai);
    let (ok, out) = teml(d.path(), &["check", &g, "-D", "N=4", "-D", "E=3"]);
    assert!(!ok && out.contains("r.rhai:7:") && out.contains("declared a result"), "{out}");
    // code generation's own contraction leaves it whole; `w` is still local
    let h = program(d.path(), "k.teml", &format!("{INTERP}result(t)\ncodegen(f2)\n"));
    let (ok, c) = teml(d.path(), &["run", &h, "--no-run", "-q"]);
    assert!(ok && !c.contains("teml_t_local") && c.contains("teml_w_local"), "{c}");
    let saved = format!("t={}", d.path().join("t.npy").display());
    let (ok, out) = teml(d.path(), &["run", &h, "-q", "-o", &saved]);
    assert!(ok && out.contains("verified"), "{out}");
    // the same from the command line
    let k = program(d.path(), "c.teml", &format!("{INTERP}codegen(f2)\n"));
    let (ok, c) = teml(d.path(), &["run", &k, "--no-run", "-q", "--result", "t"]);
    assert!(ok && !c.contains("teml_t_local") && c.contains("teml_w_local"), "{c}");
    // the last declaration wins; the command line's wins over the program's
    let e =
        program(d.path(), "e.teml", &format!("{INTERP}result(t)\ntemporary(w, t)\nx = store_at(f2, 1, t)\n"));
    let (ok, out) = teml(d.path(), &["check", &e]);
    assert!(ok, "{out}");
    let (ok, out) = teml(d.path(), &["check", &e, "--result", "t"]);
    assert!(!ok && out.contains("e.teml:15:") && out.contains("declared a result"), "{out}");
    let (ok, out) = teml(d.path(), &["check", &k, "--result", "t", "--temporary", "t"]);
    assert!(!ok && out.contains("found `t` in both"), "{out}");
    let (ok, out) = teml(d.path(), &["check", &k, "--result", "tt"]);
    assert!(
        !ok && out.contains("--result tt: expected a tensor of")
            && out.contains("its tensors: A, t, u, v, w"),
        "{out}"
    );
    // a tensor the path stores per iteration: -o names the line that keeps it
    let s = program(d.path(), "s.teml", &format!("{INTERP}s = store_at(f2, 1, t)\ncodegen(s)\n"));
    let (ok, out) = teml(d.path(), &["run", &s, "-q", "-o", &saved]);
    assert!(!ok && out.contains("`result(t)` in the program, or --result t"), "{out}");
}

/// `teml auto` says which tensors it treated as temporaries and the line that keeps each; a
/// result declared in the program or with `--result` stays whole, the replay (`auto.teml`, which
/// holds the command line's declaration) saves it with `-o`.
#[test]
fn auto_keeps_declared_results_whole_and_names_the_temporaries_it_contracts() {
    let d = tempfile::tempdir().unwrap();
    let f = program(d.path(), "i.teml", &format!("{INTERP}codegen(l1, l2, l3)\n"));
    let out_dir = d.path().join("a");
    let (ok, out) =
        teml(d.path(), &["auto", &f, "--threads", "1", "--no-db", "--out", out_dir.to_str().unwrap()]);
    assert!(ok, "{out}");
    assert!(out.contains("t, w stored per iteration") && out.contains("`result(t)`, `result(w)`"), "{out}");
    let (ok, out) = teml(
        d.path(),
        &["auto", &f, "--threads", "1", "--no-db", "--out", out_dir.to_str().unwrap(), "--result", "t"],
    );
    assert!(ok && out.contains("verified"), "{out}");
    assert!(out.contains("; w stored per iteration") && !out.contains("t, w stored"), "{out}");
    let path = out_dir.join("auto.teml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\nresult(t)\n") && !text.contains("store_at(l5, 1, t)"), "{text}");
    let npy = d.path().join("t.npy");
    let (ok, out) =
        teml(d.path(), &["run", path.to_str().unwrap(), "-q", "-o", &format!("t={}", npy.display())]);
    assert!(ok && out.contains("verified") && npy.exists(), "{out}");
    // declared a temporary in the program: the reason says so
    let g = program(d.path(), "j.teml", &format!("{INTERP}temporary(t, w)\ncodegen(l1, l2, l3)\n"));
    let (ok, out) =
        teml(d.path(), &["auto", &g, "--threads", "1", "--no-db", "--out", out_dir.to_str().unwrap()]);
    assert!(ok && out.contains("declared temporary: t, w"), "{out}");
}
