//! Located diagnostics: syntax errors say what was expected and what was found, evaluation
//! errors point at the argument they name; every one with its file, line and column.

use teml::ir::State;
use teml::lang::{Located, eval, parse};

fn file(name: &str) -> String {
    let path = format!("{}/tests/lang/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn fails(src: &str) -> Located {
    match eval(src, "prog.teml", &State::new()) {
        Ok(_) => panic!("evaluated: {src}"),
        Err(e) => e,
    }
}

#[test]
fn display_like_rustc() {
    let e = fails("A = tensor([N1, N2])\n\nB = eq(Q, [i1, i2] -> [i2, i1])");
    assert_eq!(
        e.to_string(),
        "error: eq: argument 1 (tensor): unknown identifier `Q`
 --> prog.teml:3:8
  |
3 | B = eq(Q, [i1, i2] -> [i2, i1])
  |        ^"
    );
    assert_eq!((e.line, e.col), (3, 8));
    assert!(e.error.is_some());
    // Wider line numbers widen the gutter; tabs stay tabs under the line.
    let src = format!("{}\tB = eq(Q, [i] -> [i])", "\n".repeat(11));
    let e = fails(&src);
    assert_eq!(
        e.to_string(),
        "error: eq: argument 1 (tensor): unknown identifier `Q`
  --> prog.teml:12:9
   |
12 | \tB = eq(Q, [i] -> [i])
   | \t       ^"
    );
}

#[test]
fn parse_error_expected_and_found() {
    let e = parse("A = tensor([N, N])\nB = eq(A, [i1 i2] -> [i2, i1])", "prog.teml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "error: expected `,`, `]` or an operator, found `i2`
 --> prog.teml:2:15
  |
2 | B = eq(A, [i1 i2] -> [i2, i1])
  |               ^^"
    );
    assert_eq!((e.line, e.col, e.error.is_none()), (2, 15, true));
}

#[test]
fn parse_errors_name_the_tokens() {
    let cases: &[(&str, &str, usize, usize)] = &[
        ("B = eq(A, [i1, i2] -> [i2, i1]", "expected `,` or `)`, found end of input", 1, 31),
        ("A = B\n", "expected `(`, found end of line", 1, 6),
        ("= f(x)", "expected a statement, found `=`", 1, 1),
        ("A = f(x)\n  3", "expected a statement, found `3`", 2, 3),
        ("A = tensor([N, N]) B", "expected end of line, found `B`", 1, 20),
        ("B = @C add(A)", "expected `:`, found `add`", 1, 8),
        ("B = eq(A, ->)", "expected a value, found `)`", 1, 13),
        ("x = f(a,)", "expected a value, found `)`", 1, 9),
        ("x = f(i+)", "expected an index expression, found `)`", 1, 9),
        ("x = f(\"abc)", "expected `)` or a value, found an unterminated string", 1, 7),
        ("x = f(1.5.3)", "expected `,`, `)` or `->`, found `.`", 1, 10),
        ("A = 3.5", "a named constant takes an integer, found the number 3.5", 1, 5),
        (
            "x = f([i*j])",
            "expected an affine index expression (a product needs a constant factor), found `i*j`",
            1,
            8,
        ),
        ("x = f(99999999999999999999)", "integer out of range: 99999999999999999999 (at most 2^63-1)", 1, 7),
        ("x = f(1e999)", "number out of range: 1e999", 1, 7),
        ("x = f(9223372036854775807 + 1)", "integer overflow in the index expression", 1, 7),
    ];
    for (src, msg, line, col) in cases {
        let e = parse(src, "p").unwrap_err();
        assert_eq!((e.message.as_str(), e.line, e.col), (*msg, *line, *col), "{src}");
    }
    let deep = format!("x = f({}{})", "[".repeat(100), "]".repeat(100));
    let e = parse(&deep, "p").unwrap_err();
    assert_eq!((e.message.as_str(), e.col), ("brackets nested too deep: at most 64 levels", 70));
}

#[test]
fn unknown_identifier_in_the_paper_listing() {
    let e = eval(&file("unknown_dt.teml"), "unknown_dt.teml", &State::new()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "error: build: argument 1 (assignment): unknown identifier `Dt`
 --> unknown_dt.teml:4:11
  |
4 | l = build(Dt)     # <- an unknown identifier error here, with its line/col
  |           ^^"
    );
}

#[test]
fn shape_mismatch_points_at_the_iterator_lists() {
    let e = fails("A = tensor([4, 4])\nB = tensor([5, 4])\nC = vadd(A, B, [[i, j], [i, j]])");
    assert_eq!(
        e.to_string(),
        "error: vadd: argument 3 (iterators): shape mismatch: expected iterator `i` to index dimensions of one extent (4 in A[i][j]), found extent 5 in B[i][j]
 --> prog.teml:3:16
  |
3 | C = vadd(A, B, [[i, j], [i, j]])
  |                ^^^^^^^^^^^^^^^^"
    );
    // The binding's own errors point at the target, or at the `@id`.
    let e = fails("A = tensor([4, 4])\nB = tensor([4, 5])\nB = eq(A, [i, j] -> [j, i])");
    assert_eq!(
        e.message,
        "B =: argument 1 (result): shape mismatch: expected `B` [4, 5] as declared, found extent 4 in dimension 2 (the value's shape is [4, 4])"
    );
    assert_eq!((e.line, e.col), (3, 1));
    let e = fails("A = tensor([4, 4])\nB = tensor([4, 5])\nX = @B: eq(A, [i, j] -> [j, i])");
    assert_eq!((e.line, e.col, e.width), (3, 6, 1));
}

#[test]
fn level_out_of_range_points_at_the_level() {
    let prelude = "A = tensor([4, 4])\nB = eq(A, [i, j] -> [j, i])\nl = build(B)\n";
    let e = fails(&format!("{prelude}l2 = interchange(l, 1, 3)"));
    assert_eq!(
        e.to_string(),
        "error: interchange: argument 3 (level): level out of range: expected 1..=2, found 3
 --> prog.teml:4:24
  |
4 | l2 = interchange(l, 1, 3)
  |                        ^"
    );
    // In the list form, at the list.
    let e = fails(&format!("{prelude}l2 = interchange(l, [1, 3])"));
    assert_eq!((e.line, e.col, e.width), (4, 21, 6));
    let e = fails(&format!("{prelude}l2 = stripmine(l, 3, 2)"));
    assert_eq!(
        (e.message.as_str(), e.line, e.col),
        ("stripmine: argument 2 (level): level out of range: expected 1..=2, found 3", 4, 19)
    );
}

#[test]
fn other_evaluation_errors() {
    // Unknown builtins, with suggestions.
    let e = fails("l = stripmin(l, 1, 2)");
    assert_eq!(
        e.to_string(),
        "error: unknown builtin `stripmin`; did you mean `stripmine`?
 --> prog.teml:1:5
  |
1 | l = stripmin(l, 1, 2)
  |     ^^^^^^^^"
    );
    assert_eq!(fails("x = frobnicate()").message, "unknown builtin `frobnicate`");
    // Result iterators: at the right of the arrow.
    let e = fails("A = tensor([4, 4])\nB = eq(A, [i, j] -> [i+j])");
    assert_eq!(
        e.message,
        "eq: argument 3 (result iterators): expected at most one iterator per result position, found i+j: two \
         iterations would write one element"
    );
    assert_eq!((e.line, e.col), (2, 21));
    // Wrong number of arguments: at the first extra one.
    let e = fails("A = tensor([4, 4], [4], [5])");
    assert_eq!(
        (e.col, e.message.as_str()),
        (
            25,
            "tensor: argument 3 (arguments): expected 1 to 2 arguments: tensor([extents]) or tensor(type, [extents]), found 3 arguments"
        )
    );
    // A statement builtin bound to an id, and an expression builtin used as a statement.
    let e = fails("x = init(A, 1)");
    assert_eq!((e.col, e.width), (5, 4));
    let e = fails("build(x)");
    assert!(e.message.starts_with("build: argument 0 (use): expected a statement"), "{}", e.message);
    // Errors without an argument point at the statement.
    let e = fails(
        "A = tensor([4])\nB = tensor([5])\nX = eq(A, [i] -> [i])\nY = eq(B, [j] -> [j])\nl1 = build(X)\nl2 = build(Y)\n  l = fuse_outer(l1, l2, 1)",
    );
    assert_eq!((e.line, e.col, e.width), (7, 3, 1), "{e}");
    assert!(e.message.starts_with("fuse_outer: cannot fuse at level 1"), "{e}");
}

#[test]
fn integer_overflow_is_a_located_error() {
    let e = fails("N = 4611686018427387904\nA = tensor([N])");
    assert_eq!(
        e.message,
        "tensor: argument 1 (shape): expected extents of at most 2147483647 (the generated loops run over C int), found extent N in dimension 1 (= 4611686018427387904)"
    );
    assert_eq!((e.line, e.col), (2, 12));
    let e = fails(
        "A = tensor([8])\nB = eq(A, [i] -> [i])\nl = build(B)\nl1 = stripmine(l, 1, 4611686018427387904)",
    );
    assert_eq!(
        e.message,
        "stripmine: argument 3 (factor): expected a factor of at most 2147483647, found 4611686018427387904"
    );
    assert_eq!((e.line, e.col), (4, 22));
    // -D N=9223372036854775807 overrides the default and is refused where it is used.
    let s = State::new().with_const("N", i64::MAX);
    let e = eval("N = 8\nA = tensor([N, N+1])", "prog.teml", &s).unwrap_err();
    assert_eq!(
        e.message,
        "tensor: argument 1 (shape): expected extents of at most 2147483647 (the generated loops run over C int), found extent N in dimension 1 (= 9223372036854775807)"
    );
    assert_eq!((e.line, e.col), (2, 12));
    let s = State::new().with_const("N", i64::MAX - 1);
    let e = eval("A = tensor([N+2])", "prog.teml", &s).unwrap_err();
    assert_eq!(
        e.message,
        "tensor: argument 1 (shape): expected extents of at most 2147483647 (the generated loops run over C int), found extent N+2 in dimension 1 (an integer overflow)"
    );
    // index arithmetic in the source
    let e = fails("A = tensor([8])\nB = eq(A, [i+9223372036854775807+1] -> [i])");
    assert_eq!((e.message.as_str(), e.line, e.col), ("integer overflow in the index expression", 2, 12));
}

#[test]
fn empty_or_negative_inferred_extents_are_located_errors() {
    let e = fails("A = tensor([4])\nC = add(A, A, [[i], [i+5]] -> [i])");
    assert_eq!(
        e.message,
        "add: argument 3 (iterators): cannot infer the range of iterator `i`: A[i+5] is in bounds for no value of it (extent 4): expected a range of at least one value, found extent -1"
    );
    assert_eq!((e.line, e.col), (2, 15));
    let e = fails("A = tensor([4])\nC = add(A, A, [[i], [i+4]] -> [i])");
    assert!(e.message.ends_with("found extent 0"), "{}", e.message);
    // -D N=4 with tensor([N-10])
    let s = State::new().with_const("N", 4);
    let e = eval("A = tensor([N-10])", "prog.teml", &s).unwrap_err();
    assert_eq!(
        (e.message.as_str(), e.line, e.col),
        (
            "tensor: argument 1 (shape): expected positive extents, found extent N-10 in dimension 1 (= -6)",
            1,
            12
        )
    );
    // a constant bound after the declaration
    let e = fails("A = tensor([N-10])\nN = 4\nB = eq(A, [i] -> [i])\nl = build(B)");
    assert_eq!(
        (e.message.as_str(), e.line, e.col),
        (
            "build: argument 1 (assignment): expected tensors of positive extents, found extent N-10 (= -6) of B",
            4,
            11
        )
    );
}

#[test]
fn an_accumulator_bound_to_a_name_is_refused() {
    let e = fails(
        "H = 4\nZ = accumulator([H, H])\nP = tensor([H, H])\nO = add(Z, P, [[i, j], [i, j]] -> [i, j])",
    );
    assert_eq!(
        e.message,
        "accumulator: argument 0 (use): expected an accumulator as an operand of the assignment it accumulates for (Rhai: \
         `let C = add(accumulator([N, N]), P, [[i, j], ()], [i, j]);`), found `Z = accumulator(...)`, which would make `Z` \
         an ordinary tensor; in .teml, assign the contraction itself (`C = eq(P, -> [i1, i2])` with `P = vcontract(...)`) \
         to sum from zero"
    );
    assert_eq!((e.line, e.col, e.width), (2, 5, 11));
}

#[test]
fn an_accumulator_bound_to_a_name_is_refused_in_rhai_too() {
    let src =
        "let P = tensor([4, 4]);\nlet Z = accumulator([4, 4]);\nlet O = add(Z, P, [[i, j], [i, j]], [i, j]);";
    let e = teml::script::eval(src, "acc.rhai", &teml::ir::State::new()).unwrap_err().to_string();
    assert!(e.contains("found `Z = accumulator(...)`, which would make `Z` an ordinary tensor"), "{e}");
    assert!(e.contains("acc.rhai:2:5"), "{e}");
    // In place, as the operand of the assignment it accumulates for, it is the accumulator.
    let ok = "let A = tensor([4, 4]);\nlet B = tensor([4, 4]);\nlet P = vmul(A, B, [[i, k], [k, j]]);\n\
              let C = add(accumulator([4, 4]), P, [[i, j], ()], [i, j]);\nlet l = build(C);";
    teml::script::eval(ok, "ok.rhai", &teml::ir::State::new()).unwrap();
}
