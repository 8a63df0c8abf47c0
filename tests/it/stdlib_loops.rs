//! The loop transformations of the standard library (Sec. 4.1) against their definitions in
//! the paper: each equals its written-out composition of core builtins, keeps the statement
//! instances of the nest it transforms, and (compiled and run) computes what the untransformed
//! program computes.

use crate::common::{instance_set, instances, verify_kernels};
use teml::ir::{Nest, State, Value};
use teml::script::{Stdlib, eval};

fn ok(src: &str, s: &State) -> State {
    eval(src, "t.rhai", s).unwrap_or_else(|e| panic!("{e}"))
}

fn nest(s: &State, id: &str) -> Nest {
    match s.get(id) {
        Some(Value::Nest(n)) => n.clone(),
        other => panic!("`{id}` is not a nest: {other:?}"),
    }
}

fn order(n: &Nest) -> Vec<String> {
    n.path().iter().map(|l| l.iter.to_string()).collect()
}

/// A perfect nest of depth `d` over `A[i1]...[id]` with extents `ext`, as `l`.
fn perfect(ext: &[i64]) -> String {
    let dims: Vec<String> = ext.iter().map(|e| e.to_string()).collect();
    let its: Vec<String> = (1..=ext.len()).map(|k| format!("i{k}")).collect();
    format!(
        "let A = tensor([{d}]);\nlet B = tensor([{d}]);\nlet B = add(B, A, [[{i}], [{i}]], [{i}]);\nlet l = build(B);\n",
        d = dims.join(", "),
        i = its.join(", ")
    )
}

/// mm with extents (ni, nk, nj): C[i][j] += A[i][k] * B[k][j], built as `l`.
fn matmul(ni: i64, nk: i64, nj: i64) -> String {
    format!(
        "let A = tensor([{ni}, {nk}]);\nlet B = tensor([{nk}, {nj}]);\nlet C = tensor([{ni}, {nj}]);\n\
         let P = vmul(A, B, [[i, k], [k, j]]);\nlet C = add(C, P, [[i, j], ()], [i, j]);\nlet l = build(C);\n"
    )
}

#[test]
fn stripmine_n_is_its_expansion_eq_27() {
    let s = ok(
        &format!(
            "{}let x = stripmine_n(l, 3, 4);\nlet y = stripmine(stripmine(stripmine(l, 1, 4), 3, 4), 5, 4);\n\
             if x != y {{ throw \"differ\"; }}\nlet two = stripmine_n(l, 2, 4);\nlet zero = stripmine_n(l, 0, 4);",
            perfect(&[8, 6, 5])
        ),
        &State::new(),
    );
    assert_eq!(order(&nest(&s, "x")), ["i1o", "i1", "i2o", "i2", "i3o", "i3"]);
    assert_eq!(order(&nest(&s, "two")), ["i1o", "i1", "i2o", "i2", "i3"]);
    assert_eq!(nest(&s, "zero"), nest(&s, "l"));
    assert_eq!(instance_set(&nest(&s, "x"), &s), instance_set(&nest(&s, "l"), &s));
    // A depth d nest becomes d + n deep; more levels than loops is an error of stripmine_n.
    let e =
        eval(&format!("{}stripmine_n(l, 4, 2)", perfect(&[4, 4, 4])), "t.rhai", &State::new()).unwrap_err();
    assert!(
        e.message.starts_with("stripmine_n: argument 2 (levels): expected a number of loops in 0..=3"),
        "{e}"
    );
}

#[test]
fn interchange_n_is_its_expansion_eq_28() {
    let s = ok(
        &format!(
            "{}let x = interchange_n(l, 1, 3);\nlet y = interchange(interchange(interchange(l, 1, 2), 2, 3), 3, 4);\n\
             if x != y {{ throw \"differ\"; }}\nlet z = interchange_n(l, 2, 0);",
            perfect(&[2, 3, 4, 5])
        ),
        &State::new(),
    );
    assert_eq!(order(&nest(&s, "x")), ["i2", "i3", "i4", "i1"]);
    assert_eq!(nest(&s, "z"), nest(&s, "l"));
    assert_eq!(instance_set(&nest(&s, "x"), &s), instance_set(&nest(&s, "l"), &s));
    let e =
        eval(&format!("{}interchange_n(l, 2, 3)", perfect(&[2, 3, 4])), "t.rhai", &State::new()).unwrap_err();
    assert!(e.message.starts_with("interchange_n: argument 3 (count): expected a count in 0..=1"), "{e}");
    // Each step is the core's: past a loop its bounds depend on, the two are scanned in the
    // other order (Fourier-Motzkin).
    ok(&format!("{}let x = interchange_n(stripmine(l, 1, 2), 1, 2);", perfect(&[4, 4])), &State::new());
}

#[test]
fn tile_gives_the_loop_order_of_fig_10() {
    let s = ok(&format!("{}let lt = tile(l, 4);", perfect(&[8, 8, 8])), &State::new());
    let lt = nest(&s, "lt");
    assert_eq!(order(&lt), ["i1o", "i2o", "i3o", "i1", "i2", "i3"]);
    assert_eq!(
        lt.tree(),
        "for i1o in [0, 1]\n  for i2o in [0, 1]\n    for i3o in [0, 1]\n      for i1 in [4*i1o, 4*i1o+3]\n        \
         for i2 in [4*i2o, 4*i2o+3]\n          for i3 in [4*i3o, 4*i3o+3]\n            \
         B[i1][i2][i3] = B[i1][i2][i3] + A[i1][i2][i3]\n"
    );
    assert_eq!(instance_set(&lt, &s), instance_set(&nest(&s, "l"), &s));
    // Block by block: the instances of the first tile come first.
    assert_eq!(
        instances(&lt, &s)[..2],
        ["B[0][0][0] = B[0][0][0] + A[0][0][0]", "B[0][0][1] = B[0][0][1] + A[0][0][1]"]
    );
    assert_eq!(instances(&lt, &s)[4], "B[0][1][0] = B[0][1][0] + A[0][1][0]");
}

#[test]
fn tile_is_eq_29_written_out() {
    // d = 3: l0 = stripmine_n(l, 3, v); l1 = interchange_n(l0, 2, 2d-2); l2 = interchange_n(l1, 3, 2d-3);
    // l' = interchange_n(l2, d+1, d-1).
    let s = ok(
        &format!(
            "{}let l0 = stripmine_n(l, 3, 4);\nlet l1 = interchange_n(l0, 2, 4);\nlet l2 = interchange_n(l1, 3, 3);\n\
             let l3 = interchange_n(l2, 4, 2);\nlet lt = tile(l, 4);",
            perfect(&[9, 7, 5])
        ),
        &State::new(),
    );
    assert_eq!(nest(&s, "lt"), nest(&s, "l3"));
    assert_eq!(order(&nest(&s, "l1")), ["i1o", "i2o", "i2", "i3o", "i3", "i1"]);
    assert_eq!(order(&nest(&s, "l2")), ["i1o", "i2o", "i3o", "i3", "i1", "i2"]);
    // Every depth: the block loops first, in order, then the loops within blocks.
    for d in 1..=5usize {
        let ext: Vec<i64> = (0..d).map(|k| 3 + k as i64).collect();
        let s = ok(&format!("{}let lt = tile(l, 2);", perfect(&ext)), &State::new());
        let want: Vec<String> =
            (1..=d).map(|k| format!("i{k}o")).chain((1..=d).map(|k| format!("i{k}"))).collect();
        assert_eq!(order(&nest(&s, "lt")), want, "depth {d}");
        assert_eq!(instance_set(&nest(&s, "lt"), &s), instance_set(&nest(&s, "l"), &s), "depth {d}");
    }
}

#[test]
fn tile_with_one_size_per_level_and_outer_levels_only() {
    let s = ok(
        &format!(
            "{}let a = tile(l, [2, 3, 4]);\nlet b = tile(l, 3, 2);\nlet c = tile(l, [3, 3]);\nlet d = tile(l, 32);",
            perfect(&[5, 7, 9])
        ),
        &State::new(),
    );
    let l = nest(&s, "l");
    let a = nest(&s, "a");
    assert_eq!(order(&a), ["i1o", "i2o", "i3o", "i1", "i2", "i3"]);
    let bounds: Vec<String> = a.path().iter().map(|x| x.range()).collect();
    assert_eq!(
        bounds,
        [
            "[0, 2]",
            "[0, 2]",
            "[0, 2]",
            "[2*i1o, min(2*i1o+1, 4)]",
            "[3*i2o, min(3*i2o+2, 6)]",
            "[4*i3o, min(4*i3o+3, 8)]"
        ]
    );
    assert_eq!(order(&nest(&s, "b")), ["i1o", "i2o", "i1", "i2", "i3"]);
    assert_eq!(nest(&s, "b"), nest(&s, "c"));
    for v in ["a", "b", "d"] {
        assert_eq!(instance_set(&nest(&s, v), &s), instance_set(&l, &s), "{v}");
    }
    let e =
        eval(&format!("{}tile(l, [2, 2, 2, 2])", perfect(&[4, 4, 4])), "t.rhai", &State::new()).unwrap_err();
    assert!(
        e.message.starts_with("tile: argument 2 (tile sizes): expected one size per loop, 1 to 3 sizes"),
        "{e}"
    );
}

#[test]
fn unroll_by_is_stripmine_then_unroll() {
    let s = ok(
        &format!(
            "{}let u = unroll_by(l, 3, 2);\nif u != unroll(stripmine(l, 3, 2), 4) {{ throw \"differ\"; }}",
            matmul(3, 4, 5)
        ),
        &State::new(),
    );
    let u = nest(&s, "u");
    assert_eq!(
        u.tree(),
        "for i in [0, 2]\n  for j in [0, 4]\n    for ko in [0, 1]\n      C[i][j] = C[i][j] + A[i][2*ko] * B[2*ko][j]\n      \
         C[i][j] = C[i][j] + A[i][2*ko+1] * B[2*ko+1][j]\n"
    );
    assert_eq!(instances(&u, &s), instances(&nest(&s, "l"), &s));
    // A factor that does not divide the trip count: the copies past the last block's end are
    // guarded, and every instance still runs once.
    let s = ok(&format!("{}let u = unroll_by(l, 3, 3);", matmul(3, 4, 5)), &State::new());
    let u = nest(&s, "u");
    assert!(
        u.tree().contains("C[i][j] = C[i][j] + A[i][3*ko+1] * B[3*ko+1][j]  when -3*ko+2 >= 0\n"),
        "{}",
        u.tree()
    );
    assert_eq!(instance_set(&u, &s), instance_set(&nest(&s, "l"), &s));
}

#[test]
fn unroll_and_jam_unrolls_an_outer_loop_and_fuses_the_copies() {
    let s = ok(
        &format!("{}let u = unroll_and_jam(l, 1, 2);\nlet w = unroll_and_jam(l, 2, 5);", matmul(4, 3, 5)),
        &State::new(),
    );
    let u = nest(&s, "u");
    assert_eq!(
        u.tree(),
        "for io in [0, 1]\n  for j in [0, 4]\n    for k in [0, 2]\n      C[2*io][j] = C[2*io][j] + A[2*io][k] * B[k][j]\n      \
         C[2*io+1][j] = C[2*io+1][j] + A[2*io+1][k] * B[k][j]\n"
    );
    assert_eq!(instance_set(&u, &s), instance_set(&nest(&s, "l"), &s));
    let w = nest(&s, "w");
    assert_eq!(order(&w), ["i", "jo", "k"]);
    assert_eq!(w.stmts().len(), 5);
    assert_eq!(instance_set(&w, &s), instance_set(&nest(&s, "l"), &s));
    // The innermost loop: unroll_and_jam is unroll_by.
    let s = ok(
        &format!("{}let a = unroll_and_jam(l, 3, 3);\nlet b = unroll_by(l, 3, 3);", matmul(2, 6, 2)),
        &State::new(),
    );
    assert_eq!(nest(&s, "a"), nest(&s, "b"));
    // It is stripmine, unroll, then fuse_inner at each level below.
    let s = ok(
        &format!(
            "{}let a = unroll_and_jam(l, 1, 2);\nlet b = fuse_inner(fuse_inner(unroll(stripmine(l, 1, 2), 2), 2), 3);",
            matmul(4, 3, 5)
        ),
        &State::new(),
    );
    assert_eq!(nest(&s, "a"), nest(&s, "b"));
}

#[test]
fn teml_programs_call_the_library() {
    let src = "A = tensor([6, 6])\nB = tensor([6, 6])\nB = add(B, A, [[i1, i2], [i1, i2]] -> [i1, i2])\nl = build(B)\n\
               lt = tile(l, 4)\nl2 = stripmine_n(l, 2, 3)\nl3 = interchange_n(l2, 2, 2)\nlu = unroll_and_jam(l, 1, 2)\ncodegen(lt)";
    let s =
        teml::lang::eval_with(src, "t.teml", &State::new(), &Stdlib::get()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(order(&nest(&s, "lt")), ["i1o", "i2o", "i1", "i2"]);
    assert_eq!(order(&nest(&s, "l3")), ["i1o", "i2o", "i2", "i1"]);
    assert_eq!(instance_set(&nest(&s, "lu"), &s), instance_set(&nest(&s, "l"), &s));
    assert_eq!(s.kernels[0].names[0].to_string(), "lt");
    // Errors inside the library keep the core's message and point at the call.
    let e =
        teml::lang::eval_with(&format!("{src}\nbad = tile(l, 0)"), "t.teml", &State::new(), &Stdlib::get())
            .unwrap_err();
    assert_eq!(e.message, "stripmine: argument 3 (factor): expected a factor of 1 or more, found 0");
    assert_eq!((e.line, e.col), (10, 7), "{e}");
    let e = teml::lang::eval_with(&format!("{src}\nbad = tile(l)"), "t.teml", &State::new(), &Stdlib::get())
        .unwrap_err();
    assert!(
        e.message.starts_with("tile: argument 1 (arguments): expected tile(l, v) or tile(l, v, d)"),
        "{e}"
    );
}

// ---------------------------------------------------------------------------------------------
// Compiled, run and verified against the untransformed program.

#[test]
fn tiled_unrolled_and_jammed_matmuls_verify() {
    let src = format!(
        "{}let lt = tile(l, 4);\nlet lt2 = tile(l, [3, 2, 5]);\nlet lt3 = tile(parallelize(l, 1), 4, 2);\n\
         let lu = unroll_by(l, 3, 3);\nlet lj = unroll_and_jam(l, 1, 2);\nlet lj2 = unroll_and_jam(unroll_and_jam(l, 2, 3), 1, 2);\n\
         for v in [lt, lt2, lt3, lu, lj, lj2] {{ codegen(v); }}",
        matmul(10, 9, 6)
    );
    verify_kernels(&ok(&src, &State::new()));
}

#[test]
fn levels_of_a_nest_without_loops_are_refused_plainly() {
    let r = teml::script::eval(
        "let A = tensor([4]);\nlet B = eq(A, [i], [i]);\nlet l = build(B);\nlet u = unroll(l, 1);\nlet x = unroll_by(u, 1, 2);",
        "t.rhai",
        &teml::ir::State::new(),
    );
    let e = r.unwrap_err().message;
    assert_eq!(
        e,
        "unroll_by: argument 2 (level): expected a level of a nest with loops (this nest has no loops), found 1"
    );
    // unroll-and-jam by 1 has one copy and nothing to jam
    teml::script::eval(
        "let A = tensor([4, 4]);\nlet B = eq(A, [i, j], [i, j]);\nlet l = build(B);\nlet x = unroll_and_jam(l, 1, 1);",
        "t.rhai",
        &teml::ir::State::new(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}
