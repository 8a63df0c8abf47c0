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
