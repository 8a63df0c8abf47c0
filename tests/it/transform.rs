//! The loop transformations of eq. 20-25: their patterns, edge cases, and that they keep the
//! statement instances a nest executes.

use crate::common::*;
use teml::ir::State;

fn tree(s: &State, n: &str) -> String {
    nest(s, n).tree()
}

#[test]
fn build_orders_target_iterators_first_then_reductions() {
    let s = matmul(4, 3, 5);
    assert_eq!(
        tree(&s, "l"),
        "for i in [0, 3]\n  for j in [0, 4]\n    for k in [0, 2]\n      C[i][j] = C[i][j] + A[i][k] * B[k][j]\n"
    );
}

#[test]
fn stripmine_divisible_extent_has_no_min() {
    let s = matmul(8, 3, 5);
    let s = run(&s, "l1", "stripmine", vec![id("l"), int(1), int(4)]);
    assert_eq!(
        tree(&s, "l1"),
        "for io in [0, 1]\n  for i in [4*io, 4*io+3]\n    for j in [0, 4]\n      for k in [0, 2]\n        C[i][j] = C[i][j] + A[i][k] * B[k][j]\n"
    );
    assert_eq!(instances(&nest(&s, "l1"), &s), instances(&nest(&s, "l"), &s));
}

#[test]
fn stripmine_remainder_uses_min() {
    let s = matmul(10, 3, 5);
    let s = run(&s, "l1", "stripmine", vec![id("l"), int(1), int(4)]);
    assert!(
        tree(&s, "l1").starts_with("for io in [0, 2]\n  for i in [4*io, min(4*io+3, 9)]\n"),
        "{}",
        tree(&s, "l1")
    );
    // 10 = 4 + 4 + 2 iterations of i: the same instances, in the same order.
    assert_eq!(instances(&nest(&s, "l1"), &s), instances(&nest(&s, "l"), &s));
}

#[test]
fn stripmine_innermost_and_depth_one() {
    let s = State::new();
    let s = run(&s, "A", "tensor", vec![shape("7")]);
    let s = run(&s, "B", "eq", vec![id("A"), its("i"), its("i")]);
    let s = run(&s, "l", "build", vec![id("B")]);
    let s = run(&s, "l1", "stripmine", vec![id("l"), int(1), int(3)]);
    assert_eq!(tree(&s, "l1"), "for io in [0, 2]\n  for i in [3*io, min(3*io+2, 6)]\n    B[i] = A[i]\n");
    assert_eq!(instances(&nest(&s, "l1"), &s), instances(&nest(&s, "l"), &s));
    let s = matmul(4, 6, 5);
    let s = run(&s, "l1", "stripmine", vec![id("l"), int(3), int(2)]);
    assert!(
        tree(&s, "l1").contains("for ko in [0, 2]\n      for k in [2*ko, 2*ko+1]\n"),
        "{}",
        tree(&s, "l1")
    );
    // stripmining a strip-mined inner loop again
    let s = run(&s, "l2", "stripmine", vec![id("l1"), int(4), int(2)]);
    assert_eq!(instances(&nest(&s, "l2"), &s), instances(&nest(&s, "l"), &s));
    let s = run(&s, "l3", "stripmine", vec![id("l"), int(3), int(4)]);
    let s = run(&s, "l4", "stripmine", vec![id("l3"), int(4), int(3)]);
    assert_eq!(instances(&nest(&s, "l4"), &s), instances(&nest(&s, "l"), &s));
}

#[test]
fn interchange_both_forms_and_instances() {
    let s = matmul(4, 3, 5);
    let s = run(&s, "a", "interchange", vec![id("l"), int(2), int(3)]);
    let s = run(&s, "b", "interchange", vec![id("l"), list(vec![int(2), int(3)])]);
    assert_eq!(nest(&s, "a"), nest(&s, "b"));
    assert!(tree(&s, "a").starts_with("for i in [0, 3]\n  for k in [0, 2]\n    for j in [0, 4]\n"));
    assert_eq!(instance_set(&nest(&s, "a"), &s), instance_set(&nest(&s, "l"), &s));
    // non-adjacent levels, reversed argument order
    let s = run(&s, "c", "interchange", vec![id("l"), int(3), int(1)]);
    assert!(tree(&s, "c").starts_with("for k in [0, 2]\n  for j in [0, 4]\n    for i in [0, 3]\n"));
    let s = run(&s, "d", "interchange", vec![id("l"), int(2), int(2)]);
    assert_eq!(nest(&s, "d"), nest(&s, "l"));
}

#[test]
fn interchange_refuses_dependent_bounds() {
    let s = matmul(8, 3, 5);
    let s = run(&s, "l1", "stripmine", vec![id("l"), int(1), int(4)]);
    // Adjacent loops whose bounds depend on one another are scanned in the other order
    // (Fourier-Motzkin): i outside, its block loop inside with the one block holding i.
    let s = run(&s, "x", "interchange", vec![id("l1"), int(1), int(2)]);
    assert!(
        tree(&s, "x").starts_with("for i in [0, 7]\n  for io in [floor((i)/4), floor((i)/4)]\n"),
        "{}",
        tree(&s, "x")
    );
    assert_eq!(instances(&nest(&s, "x"), &s), instances(&nest(&s, "l"), &s));
    // moving j past the strip-mined i is fine (tiling)
    let s = run(&s, "l2", "interchange", vec![id("l1"), int(2), int(3)]);
    assert!(tree(&s, "l2").starts_with("for io in [0, 1]\n  for j in [0, 4]\n    for i in [4*io, 4*io+3]\n"));
    // but moving io to the innermost level past i is not
    let e = fails(&s, "x", "interchange", vec![id("l1"), int(1), int(3)]);
    assert!(e.contains("depend on `io`"), "{e}");
}

#[test]
fn unroll_inner_level_substitutes_constants() {
    let s = matmul(2, 3, 2);
    let s = run(&s, "u", "unroll", vec![id("l"), int(3)]);
    assert_eq!(
        tree(&s, "u"),
        "for i in [0, 1]\n  for j in [0, 1]\n    C[i][j] = C[i][j] + A[i][0] * B[0][j]\n    C[i][j] = C[i][j] + A[i][1] * B[1][j]\n    C[i][j] = C[i][j] + A[i][2] * B[2][j]\n"
    );
    assert_eq!(instances(&nest(&s, "u"), &s), instances(&nest(&s, "l"), &s));
}

#[test]
fn unroll_level_one_gives_a_top_level_sequence() {
    let s = State::new();
    let s = run(&s, "A", "tensor", vec![shape("3, 2")]);
    let s = run(&s, "B", "eq", vec![id("A"), its("i, j"), its("i, j")]);
    let s = run(&s, "l", "build", vec![id("B")]);
    let s = run(&s, "u", "unroll", vec![id("l"), int(1)]);
    let u = nest(&s, "u");
    assert!(u.is_seq() && u.items.len() == 3);
    assert_eq!(
        tree(&s, "u"),
        "seq\n  for j in [0, 1]\n    B[0][j] = A[0][j]\n  for j in [0, 1]\n    B[1][j] = A[1][j]\n  for j in [0, 1]\n    B[2][j] = A[2][j]\n"
    );
    assert!(u.paper().starts_with("⟨•, [⟨j, ["));
    // unroll the depth-1 nest fully: a sequence of statements
    let e = fails(&s, "x", "unroll", vec![id("u"), int(1)]);
    assert!(e.contains("below a branch"), "{e}");
}

#[test]
fn unroll_with_bounds_depending_on_an_outer_iterator() {
    let s = matmul(8, 3, 5);
    let s = run(&s, "l1", "stripmine", vec![id("l"), int(1), int(4)]);
    let s = run(&s, "u", "unroll", vec![id("l1"), int(2)]);
    let t = tree(&s, "u");
    assert!(t.starts_with("for io in [0, 1]\n  for j in [0, 4]\n"), "{t}");
    assert!(t.contains("C[4*io+3][j] = C[4*io+3][j] + A[4*io+3][k] * B[k][j]"), "{t}");
    assert_eq!(instance_set(&nest(&s, "u"), &s), instance_set(&nest(&s, "l"), &s));
    // with a partial last block: four copies, the last three guarded by the block's end, and
    // still every instance exactly once
    let s = matmul(10, 3, 5);
    let s = run(&s, "l1", "stripmine", vec![id("l"), int(1), int(4)]);
    let s = run(&s, "u", "unroll", vec![id("l1"), int(2)]);
    let t = tree(&s, "u");
    assert!(t.contains("C[4*io][j] = C[4*io][j] + A[4*io][k] * B[k][j]\n"), "{t}");
    assert!(t.contains("C[4*io+3][j] = C[4*io+3][j] + A[4*io+3][k] * B[k][j]  when -4*io+6 >= 0\n"), "{t}");
    assert_eq!(instance_set(&nest(&s, "u"), &s), instance_set(&nest(&s, "l"), &s));
    // a loop whose trip count is neither constant nor a block's: refused with a reason
    let s = run(&State::new(), "A", "tensor", vec![shape("N, 4")]);
    let s = run(&s, "B", "eq", vec![id("A"), its("i, j"), its("i, j")]);
    let s = run(&s, "l", "build", vec![id("B")]);
    let e = fails(&s, "x", "unroll", vec![id("l"), int(1)]);
    assert!(e.contains("no constant trip count"), "{e}");
}

#[test]
fn fuse_outer_runs_both_bodies() {
    let s = State::new();
    let s = run(&s, "A", "tensor", vec![shape("4, 3")]);
    let s = run(&s, "B", "eq", vec![id("A"), its("i, j"), its("i, j")]);
    let s = run(&s, "C", "mul", vec![id("A"), id("A"), list(vec![its("p, q"), its("p, q")]), its("p, q")]);
    let s = run(&s, "l1", "build", vec![id("B")]);
    let s = run(&s, "l2", "build", vec![id("C")]);
    let s = run(&s, "f1", "fuse_outer", vec![id("l1"), id("l2"), int(1)]);
    assert_eq!(
        tree(&s, "f1"),
        "for i in [0, 3]\n  for j in [0, 2]\n    B[i][j] = A[i][j]\n  for q in [0, 2]\n    C[i][q] = A[i][q] * A[i][q]\n"
    );
    let s = run(&s, "f2", "fuse_outer", vec![id("l1"), id("l2"), int(2)]);
    assert_eq!(
        tree(&s, "f2"),
        "for i in [0, 3]\n  for j in [0, 2]\n    B[i][j] = A[i][j]\n    C[i][j] = A[i][j] * A[i][j]\n"
    );
    // then fuse_inner on the result of level-1 fusion gives the same as level-2 fusion
    let s = run(&s, "f3", "fuse_inner", vec![id("f1"), int(2)]);
    assert_eq!(nest(&s, "f3"), nest(&s, "f2"));
}

#[test]
fn fuse_inner_at_level_one_of_a_sequence() {
    let s = State::new();
    let s = run(&s, "A", "tensor", vec![shape("2, 3")]);
    let s = run(&s, "B", "eq", vec![id("A"), its("i, j"), its("i, j")]);
    let s = run(&s, "l", "build", vec![id("B")]);
    let s = run(&s, "u", "unroll", vec![id("l"), int(1)]);
    let s = run(&s, "f", "fuse_inner", vec![id("u"), int(1)]);
    assert_eq!(tree(&s, "f"), "for j in [0, 2]\n  B[0][j] = A[0][j]\n  B[1][j] = A[1][j]\n");
}

#[test]
fn fusion_errors_when_loops_differ() {
    let s = State::new();
    let s = run(&s, "A", "tensor", vec![shape("4, 3")]);
    let s = run(&s, "D", "tensor", vec![shape("5, 3")]);
    let s = run(&s, "B", "eq", vec![id("A"), its("i, j"), its("i, j")]);
    let s = run(&s, "E", "eq", vec![id("D"), its("i, j"), its("i, j")]);
    let s = run(&s, "l1", "build", vec![id("B")]);
    let s = run(&s, "l2", "build", vec![id("E")]);
    let e = fails(&s, "x", "fuse_outer", vec![id("l1"), id("l2"), int(1)]);
    assert_eq!(
        e,
        "fuse_outer: cannot fuse at level 1: expected loop i in [0, 3] (as in the first nest), found loop i in [0, 4] in the second nest"
    );
    // level 2 also compares level 1
    let e = fails(&s, "x", "fuse_outer", vec![id("l1"), id("l2"), int(2)]);
    assert!(e.contains("level 1"), "{e}");
}

#[test]
fn annotations_are_marks() {
    let s = matmul(4, 3, 5);
    let s = run(&s, "p", "parallelize", vec![id("l"), int(1)]);
    let s = run(&s, "v", "vectorize", vec![id("p"), int(3)]);
    assert_eq!(
        tree(&s, "v"),
        "for i in [0, 3]  parallel\n  for j in [0, 4]\n    for k in [0, 2]  vectorize\n      C[i][j] = C[i][j] + A[i][k] * B[k][j]\n"
    );
    // marks move with their loops
    let s = run(&s, "w", "interchange", vec![id("v"), int(1), int(3)]);
    assert!(
        tree(&s, "w")
            .starts_with("for k in [0, 2]  vectorize\n  for j in [0, 4]\n    for i in [0, 3]  parallel\n")
    );
    // and survive a strip-mine on the inner (original) loop
    let s = run(&s, "x", "stripmine", vec![id("p"), int(1), int(2)]);
    assert!(tree(&s, "x").starts_with("for io in [0, 1]\n  for i in [2*io, 2*io+1]  parallel\n"));
}

#[test]
fn branches_are_independent() {
    // One nest, two transformation paths: the original and both branches keep their structure.
    let s = matmul(8, 4, 8);
    let before = nest(&s, "l");
    let s = run(&s, "a1", "interchange", vec![id("l"), int(2), int(3)]);
    let s = run(&s, "a2", "parallelize", vec![id("a1"), int(1)]);
    let s = run(&s, "b1", "stripmine", vec![id("l"), int(1), int(4)]);
    let s = run(&s, "b2", "unroll", vec![id("b1"), int(4)]);
    assert_eq!(nest(&s, "l"), before);
    assert_eq!(
        nest(&s, "a1").tree(),
        "for i in [0, 7]\n  for k in [0, 3]\n    for j in [0, 7]\n      C[i][j] = C[i][j] + A[i][k] * B[k][j]\n"
    );
    assert!(nest(&s, "a2").tree().starts_with("for i in [0, 7]  parallel\n  for k in [0, 3]\n"));
    assert!(nest(&s, "b1").tree().starts_with("for io in [0, 1]\n  for i in [4*io, 4*io+3]\n"));
    assert_eq!(nest(&s, "b2").stmts().len(), 4);
    assert_eq!(nest(&s, "l").stmts().len(), 1);
    for v in ["a1", "a2", "b1", "b2"] {
        assert_eq!(instance_set(&nest(&s, v), &s), instance_set(&before, &s), "{v}");
    }
}

#[test]
fn tiling_by_hand_matches_fig10_shape() {
    // eq. 27-29 written out for d = 3: stripmine levels 1, 3, 5, then interchanges.
    let s = matmul(8, 8, 8);
    let mut s = s;
    for (k, lvl) in [1, 3, 5].iter().enumerate() {
        let src = if k == 0 { "l".to_string() } else { format!("s{k}") };
        s = run(&s, &format!("s{}", k + 1), "stripmine", vec![id(&src), int(*lvl), int(4)]);
    }
    // [io, i, jo, j, ko, k] -> [io, jo, ko, i, j, k]
    let steps = [(2, 3), (4, 5), (3, 4)];
    let mut cur = "s3".to_string();
    for (n, (a, b)) in steps.iter().enumerate() {
        let next = format!("t{n}");
        s = run(&s, &next, "interchange", vec![id(&cur), int(*a), int(*b)]);
        cur = next;
    }
    let iters: Vec<String> = nest(&s, &cur).path().iter().map(|l| l.iter.to_string()).collect();
    assert_eq!(iters, ["io", "jo", "ko", "i", "j", "k"]);
    assert_eq!(instance_set(&nest(&s, &cur), &s), instance_set(&nest(&s, "l"), &s));
}

#[test]
fn interchange_levels_as_list_must_be_two() {
    let s = matmul(2, 2, 2);
    let e = fails(&s, "x", "interchange", vec![id("l"), list(vec![int(1), int(2), int(3)])]);
    assert!(e.contains("two levels"), "{e}");
}

#[test]
fn stripmine_uses_bound_constants_for_the_remainder() {
    let s = State::new().with_const("N", 8);
    let s = run(&s, "A", "tensor", vec![shape("N")]);
    let s = run(&s, "B", "eq", vec![id("A"), its("i"), its("i")]);
    let s = run(&s, "l", "build", vec![id("B")]);
    let s = run(&s, "a", "stripmine", vec![id("l"), int(1), int(4)]);
    assert_eq!(tree(&s, "a"), "for io in [0, floor((N-1)/4)]\n  for i in [4*io, 4*io+3]\n    B[i] = A[i]\n");
    let s = run(&s, "b", "stripmine", vec![id("l"), int(1), int(3)]);
    assert_eq!(
        tree(&s, "b"),
        "for io in [0, floor((N-1)/3)]\n  for i in [3*io, min(3*io+2, N-1)]\n    B[i] = A[i]\n"
    );
    // so a partial unroll works with -D sizes
    let s = run(&s, "c", "unroll", vec![id("a"), int(2)]);
    assert_eq!(nest(&s, "c").stmts().len(), 4);
}
