//! Every malformed program is an error value naming the builtin, the argument, what was
//! expected and what was found; never a panic. One test (at least) per error class.

use crate::common::*;
use teml::ir::State;

fn base() -> State {
    let s = State::new();
    let s = run(&s, "A", "tensor", vec![shape("4, 3")]);
    let s = run(&s, "B", "tensor", vec![shape("3, 5")]);
    let s = run(&s, "s", "scalar", vec![]);
    let s = run(&s, "T", "eq", vec![id("A"), its("i, j"), its("j, i")]);
    run(&s, "l", "build", vec![id("T")])
}

#[test]
fn unknown_identifier() {
    let e = fails(&base(), "x", "eq", vec![id("Q"), its("i"), its("i")]);
    assert_eq!(e, "eq: argument 1 (tensor): unknown identifier `Q`");
    let e = fails(&base(), "x", "build", vec![id("nothing")]);
    assert_eq!(e, "build: argument 1 (assignment): unknown identifier `nothing`");
    let e = teml::ops::call(&base(), "frobnicate", &[]).unwrap_err().to_string();
    assert!(e.contains("unknown identifier `frobnicate`"), "{e}");
}

#[test]
fn wrong_kind_loop_for_tensor_and_back() {
    let e = fails(&base(), "x", "vadd", vec![id("l"), id("A"), list(vec![none(), its("i, j")])]);
    assert_eq!(e, "vadd: argument 1 (operand): expected a tensor expression, found a loop nest");
    let e = fails(&base(), "x", "stripmine", vec![id("A"), int(1), int(2)]);
    assert_eq!(
        e,
        "stripmine: argument 1 (nest): expected a loop nest (build a tensor expression first), found the tensor `A` [4, 3]"
    );
    let e = fails(&base(), "x", "build", vec![id("A")]);
    assert_eq!(
        e,
        "build: argument 1 (assignment): expected an assignment ⟨(=, •, •), [x, y]⟩ (eq. 19), found the tensor `A` [4, 3]"
    );
    let e = fails(&base(), "x", "unroll", vec![id("l"), id("A")]);
    assert!(e.starts_with("unroll: argument 2 (level): expected an integer, found `A`"), "{e}");
    let e = fails(&base(), "x", "tensor", vec![id("int"), shape("3")]);
    assert_eq!(
        e,
        "tensor: argument 1 (element type): expected an element type: double, float, bf16, f16, i32, i8, u8, found `int`"
    );
}

#[test]
fn iterator_list_rules_of_eq14_and_eq15() {
    let s = base();
    // A declared tensor needs a list (I' = ε requires I ≠ ε).
    let e = fails(&s, "x", "vadd", vec![id("A"), id("A"), list(vec![none(), its("i, j")])]);
    assert_eq!(
        e,
        "vadd: argument 1 (operand): expected an iterator list for `A` (it has none: I' = ε, eq. 14-15), found no list"
    );
    // The list's length is the rank.
    let e = fails(&s, "x", "eq", vec![id("A"), its("i"), its("i")]);
    assert_eq!(e, "eq: argument 1 (tensor): expected 2 indices for `A` [4, 3] (its rank), found 1 (i)");
    // A scalar takes no list.
    let e = fails(&s, "x", "vmul", vec![id("s"), id("A"), list(vec![its("i"), its("i, j")])]);
    assert_eq!(
        e,
        "vmul: argument 1 (operand): expected no iterator list for the scalar `s` (•, eq. 12), found [i]"
    );
    // A result iterator may come back (a diagonal, issue 21): the tensor must be declared.
    let e = fails(&s, "x", "eq", vec![id("A"), its("i, j"), its("i, i")]);
    assert_eq!(
        e,
        "x =: argument 1 (result): cannot infer the range of iterator `i`: it comes back in the result list (a diagonal writes part of a tensor), and `x` is not declared: declare it with tensor([...])"
    );
    // Affine positions write part of a declared tensor (issue 21); two iterators in one would
    // make two iterations write one element.
    let e = fails(&s, "x", "eq", vec![id("A"), its("i, j"), its("i+1, j")]);
    assert_eq!(
        e,
        "x =: argument 1 (result): cannot infer the range of iterator `i+1`: a result at affine positions \
         writes part of a tensor, and `x` is not declared: declare it with tensor([...])"
    );
    let e = fails(&s, "x", "eq", vec![id("A"), its("i, j"), its("i+j")]);
    assert_eq!(
        e,
        "eq: argument 3 (result iterators): expected at most one iterator per result position, found i+j: two \
         iterations would write one element"
    );
    // vop's list pair must be a pair
    let e = fails(&s, "x", "vadd", vec![id("A"), id("A"), its("i, j")]);
    assert!(e.contains("expected a pair of iterator lists [I0, I1]"), "{e}");
}

#[test]
fn shape_and_extent_mismatch() {
    let s = base();
    // Declared C must match the inferred shape.
    let s2 = run(&s, "C", "tensor", vec![shape("4, 4")]);
    let e = fails(&s2, "C", "eq", vec![id("A"), its("i, j"), its("i, j")]);
    assert_eq!(
        e,
        "C =: argument 1 (result): shape mismatch: expected `C` [4, 4] as declared, found extent 3 in dimension 2 (the value's shape is [4, 3])"
    );
    // An iterator indexing dimensions of different extents.
    let e = fails(&s, "x", "vmul", vec![id("A"), id("B"), list(vec![its("i, k"), its("i, j")])]);
    assert_eq!(
        e,
        "vmul: argument 3 (iterators): shape mismatch: expected iterator `i` to index dimensions of one extent (4 in A[i][k]), found extent 3 in B[i][j]"
    );
    // Contracting dimensions of different extents.
    let e = fails(&s, "x", "vcontract", vec![id("A"), id("B"), list(vec![int(1), int(1)])]);
    assert_eq!(
        e,
        "vcontract: argument 3 (dimension pairs): shape mismatch: expected dimension 1 of operand 1 and dimension 1 of operand 2 of one extent, found 4 and 3"
    );
    // Symbolic extents that cannot be compared.
    let s3 = run(&State::new(), "P", "tensor", vec![shape("N")]);
    let s3 = run(&s3, "Q", "tensor", vec![shape("M")]);
    let e = fails(&s3, "x", "vadd", vec![id("P"), id("Q"), list(vec![its("i"), its("i")])]);
    assert!(e.contains("cannot be compared with N until the named constants are bound"), "{e}");
    // ...but can once they are bound.
    let s4 = s3.with_const("N", 8).with_const("M", 8);
    run(&s4, "x", "vadd", vec![id("P"), id("Q"), list(vec![its("i"), its("i")])]);
}

#[test]
fn access_out_of_bounds_over_inferred_ranges() {
    let s = State::new();
    let s = run(&s, "A", "tensor", vec![shape("N")]);
    let s = run(&s, "B", "tensor", vec![shape("N")]);
    let s = run(&s, "t", "vadd", vec![id("A"), id("A"), list(vec![its("i"), its("i+1")])]);
    let s = run(&s, "t2", "vadd", vec![id("t"), id("A"), list(vec![none(), its("i+2")])]);
    assert_eq!(texpr(&s, "t2").shape.to_string(), "[N-2]");
    // B is as long as A: B[i] = A[i] + A[i+1] + A[i+2] writes part of B; over all of B it
    // would read past A's end, which build refuses, naming the access; over the range the
    // value allows, it builds.
    let sb = run(&s, "B", "eq", vec![id("t2"), none(), its("i")]);
    let e = fails(&sb, "l", "build", vec![id("B")]);
    assert_eq!(
        e,
        "build: argument 1 (assignment): access A[i+1] is out of bounds: expected indices in 0..N-1 (extent N), found indices in 1..N"
    );
    run(
        &sb,
        "l",
        "build",
        vec![
            id("B"),
            list(vec![list(vec![
                id("i"),
                int(0),
                teml::ops::ArgVal::Index(teml::ir::Expr::var("N").add_int(-3)),
            ])]),
        ],
    );
    // An output too long for a convolution is caught by build's bounds check, naming the access.
    let s5 = run(&State::new(), "I", "tensor", vec![shape("10")]);
    let s5 = run(&s5, "W", "tensor", vec![shape("3")]);
    let s5 = run(&s5, "O", "tensor", vec![shape("10")]);
    let s5 = run(&s5, "p", "vmul", vec![id("I"), id("W"), list(vec![its("h+kh"), its("kh")])]);
    let s5 = run(&s5, "O", "add", vec![id("O"), id("p"), list(vec![its("h"), none()]), its("h")]);
    let e = fails(&s5, "l", "build", vec![id("O")]);
    assert_eq!(
        e,
        "build: argument 1 (assignment): access I[h+kh] is out of bounds: expected indices in 0..9 (extent 10), found indices in 0..11"
    );
    // Two shorter, it is fine; undeclared, the shape is inferred as N-2.
    let s2 = run(&s, "C", "tensor", vec![shape("N-2")]);
    let s2 = run(&s2, "C", "eq", vec![id("t2"), none(), its("i")]);
    run(&s2, "l", "build", vec![id("C")]);
    let s3 = run(&s, "D", "eq", vec![id("t2"), none(), its("i")]);
    let s3 = run(&s3, "D", "eq", vec![id("t2"), none(), its("i")]);
    assert_eq!(texpr(&s3, "D").children[0].shape.to_string(), "[N-2]");
    // A negative offset leaves the range at i = 0.
    let s = run(&State::new(), "A", "tensor", vec![shape("8")]);
    let s = run(&s, "B", "tensor", vec![shape("8")]);
    let s = run(&s, "B", "eq", vec![id("A"), its("i-1"), its("i")]);
    let e = fails(&s, "l", "build", vec![id("B")]);
    assert!(e.contains("access A[i-1] is out of bounds") && e.contains("found indices in -1..6"), "{e}");
}

#[test]
fn range_that_cannot_be_inferred() {
    let s = State::new();
    let s = run(&s, "I", "tensor", vec![shape("10")]);
    let s = run(&s, "W", "tensor", vec![shape("3")]);
    // O[h] = I[h+kh] * W[kh]: h is only inside h+kh, and O is undeclared.
    let s2 = run(&s, "p", "vmul", vec![id("I"), id("W"), list(vec![its("h+kh"), its("kh")])]);
    assert_eq!(texpr(&s2, "p").shape.to_string(), "[?, 3]");
    let e = fails(&s2, "O", "eq", vec![id("p"), none(), its("h, kh")]);
    assert!(e.starts_with("O =: argument 1 (result): cannot infer the range of iterator `h`: no access of the value determines it"), "{e}");
    // A reduction iterator that only appears with another iterator.
    let s3 = run(&s2, "O", "tensor", vec![shape("8")]);
    let s3 = run(&s3, "x", "vmul", vec![id("I"), id("W"), list(vec![its("h+kh"), its("0")])]);
    let s3 = run(&s3, "O", "eq", vec![id("x"), none(), its("h")]);
    let e = fails(&s3, "l", "build", vec![id("O")]);
    assert!(e.starts_with("build: argument 1 (assignment): cannot infer the range of iterator `kh`"), "{e}");
    // Declared, with kh plain in W: fine, and bounds are checked (8 + 3 - 1 = 10).
    let s4 = run(&s2, "O", "tensor", vec![shape("8")]);
    let s4 = run(&s4, "O", "add", vec![id("O"), id("p"), list(vec![its("h"), none()]), its("h")]);
    let l = teml::ops::build(&s4, &texpr(&s4, "O")).unwrap();
    assert_eq!(l.tree(), "for h in [0, 7]\n  for kh in [0, 2]\n    O[h] = O[h] + I[h+kh] * W[kh]\n");
}

#[test]
fn level_out_of_range() {
    let s = base();
    let e = fails(&s, "x", "stripmine", vec![id("l"), int(3), int(2)]);
    assert_eq!(e, "stripmine: argument 2 (level): level out of range: expected 1..=2, found 3");
    let e = fails(&s, "x", "interchange", vec![id("l"), int(0), int(1)]);
    assert_eq!(e, "interchange: argument 2 (level): level out of range: expected 1..=2, found 0");
    let e = fails(&s, "x", "unroll", vec![id("l"), int(-1)]);
    assert!(e.contains("level out of range"), "{e}");
    let e = fails(&s, "x", "fuse_inner", vec![id("l"), int(4)]);
    assert!(e.contains("level out of range: expected 1..=2, found 3"), "{e}");
    let e = fails(&s, "x", "stripmine", vec![id("l"), int(1), int(0)]);
    assert_eq!(e, "stripmine: argument 3 (factor): expected a factor of 1 or more, found 0");
}

#[test]
fn transformation_below_a_branch() {
    let s = State::new();
    let s = run(&s, "A", "tensor", vec![shape("4, 3")]);
    let s = run(&s, "B", "eq", vec![id("A"), its("i, j"), its("i, j")]);
    let s = run(&s, "C", "eq", vec![id("A"), its("i, j"), its("i, j")]);
    let s = run(&s, "l1", "build", vec![id("B")]);
    let s = run(&s, "l2", "build", vec![id("C")]);
    let s = run(&s, "f", "fuse_outer", vec![id("l1"), id("l2"), int(1)]);
    let e = fails(&s, "x", "stripmine", vec![id("f"), int(2), int(2)]);
    assert_eq!(
        e,
        "stripmine: argument 2 (level): level 2 lies below a branch: expected a single loop at level 2, found 2 siblings: loop j in [0, 2]; loop j in [0, 2]"
    );
    // level 1 above the branch is fine
    run(&s, "x", "stripmine", vec![id("f"), int(1), int(2)]);
}

#[test]
fn misplaced_contraction_is_refused() {
    let s = base();
    let s = run(&s, "P", "vcontract", vec![id("A"), id("B"), list(vec![int(2), int(1)])]);
    let s = run(&s, "C", "tensor", vec![shape("4, 5")]);
    let e = fails(&s, "D", "add", vec![id("C"), id("P"), list(vec![its("i1, i2"), none()]), its("i1, i2")])
        .replace("distributes", "distribute");
    assert!(
        e.starts_with(
            "D =: the contraction `sum[k1](A[i1][k1] * B[k1][i2])` (a sum over k1) is an operand of +"
        ),
        "{e}"
    );
    let s2 = run(&s, "Q", "tensor", vec![shape("4, 5")]);
    let s3 = run(&s2, "V", "vadd", vec![id("Q"), id("P"), list(vec![its("i1, i2"), none()])]);
    let e = fails(&s3, "W", "eq", vec![id("V"), none(), its("i1, i2")]);
    assert!(e.starts_with("W =: the contraction"), "{e}");
    // onto the target itself it accumulates
    run(&s, "C", "add", vec![id("C"), id("P"), list(vec![its("i1, i2"), none()]), its("i1, i2")]);
}

#[test]
fn parallel_inside_a_vectorized_loop_is_refused() {
    let s = matmul(4, 6, 5);
    let s = run(&s, "v", "vectorize", vec![id("l"), int(1)]);
    let e = fails(&s, "x", "parallelize", vec![id("v"), int(2)]);
    assert_eq!(
        e,
        "parallelize: loop `j` is parallelized inside loop `i`, which is vectorized: OpenMP allows no \
         `parallel for` inside `simd`; expected the parallel loop outside the vectorized one"
    );
    let s = run(&s, "p", "parallelize", vec![id("l"), int(3)]);
    let e = fails(&s, "x", "vectorize", vec![id("p"), int(1)]);
    assert_eq!(
        e,
        "vectorize: loop `k` is parallelized inside loop `i`, which is vectorized: OpenMP allows no \
         `parallel for` inside `simd`; expected the parallel loop outside the vectorized one"
    );
    // Marks that interchange moves are refused when C is generated.
    let s = run(&s, "q", "parallelize", vec![id("l"), int(1)]);
    let s = run(&s, "q", "vectorize", vec![id("q"), int(2)]);
    let s = run(&s, "q", "interchange", vec![id("q"), int(1), int(2)]);
    let ns = vec![(teml::ir::Name::from("q"), nest(&s, "q"))];
    let e = teml::codegen::generate(&s, "k", &ns).unwrap_err().to_string();
    assert_eq!(
        e,
        "codegen: loop `i` is parallelized inside loop `j`, which is vectorized: OpenMP allows no \
         `parallel for` inside `simd`; expected the parallel loop outside the vectorized one"
    );
}

#[test]
fn nothing_to_fuse_and_no_levels_at_all() {
    let s = base();
    let e = fails(&s, "x", "fuse_inner", vec![id("l"), int(1)]);
    assert_eq!(
        e,
        "fuse_inner: cannot fuse at level 1: expected two or more sibling loops to fuse, found one loop (j in [0, 2]): nothing to fuse"
    );
    let e = fails(&s, "x", "fuse_inner", vec![id("l"), int(2)]);
    assert_eq!(
        e,
        "fuse_inner: cannot fuse at level 2: expected two or more sibling loops to fuse, found one loop (i in [0, 3]): nothing to fuse"
    );
    // unrolling the only loop leaves a sequence of statements: no level at all
    let s = run(&State::new(), "A", "tensor", vec![shape("3")]);
    let s = run(&s, "B", "eq", vec![id("A"), its("i"), its("i")]);
    let s = run(&s, "l", "build", vec![id("B")]);
    let s = run(&s, "u", "unroll", vec![id("l"), int(1)]);
    let e = fails(&s, "x", "stripmine", vec![id("u"), int(1), int(2)]);
    assert_eq!(
        e,
        "stripmine: argument 2 (level): level out of range: expected a nest with loops, found 1 in a nest with no loops (a statement sequence)"
    );
}
