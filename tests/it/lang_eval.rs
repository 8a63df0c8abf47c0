//! Evaluating `.teml` programs: the paper's figures give the same trees as the core does,
//! named-constant defaults, statements, extensions, purity.

use teml::error::Result;
use teml::ir::{Init, State, Value};
use teml::lang::{Extensions, eval, eval_stmt, eval_with};
use teml::ops::ArgVal;

fn ok(src: &str, s: &State) -> State {
    match eval(src, "t.teml", s) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

fn get<'a>(s: &'a State, id: &str) -> &'a Value {
    s.get(id).unwrap_or_else(|| panic!("`{id}` unbound"))
}

fn texpr(s: &State, id: &str) -> String {
    match get(s, id) {
        Value::Tensor(t) => t.to_string(),
        Value::Nest(_) => panic!("`{id}` is a nest"),
    }
}

fn file(name: &str) -> String {
    let path = format!("{}/tests/lang/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn fig4_transposition() {
    let s = ok("A = tensor([N1, N2])\nB = eq(A, [i1, i2] -> [i2, i1])\nl = build(B)", &State::new());
    let b = get(&s, "B").paper();
    assert_eq!(b, "⟨(=, •, •), [⟨(B, [N2, N1], [i2, i1]), []⟩, ⟨(A, [N1, N2], [i1, i2]), []⟩]⟩");
    assert_eq!(get(&s, "A").paper(), "⟨(A, [N1, N2], ε), []⟩");
    assert_eq!(get(&s, "l").paper(), format!("⟨i1, [⟨i2, [{b}]⟩]⟩"));
    assert_eq!(
        get(&s, "l").tree(),
        "for i1 in [0, N1-1]\n  for i2 in [0, N2-1]\n    B[i2][i1] = A[i1][i2]\n"
    );
}

#[test]
fn fig5_at_form() {
    let s = ok(&file("fig5.teml"), &State::new());
    let d = get(&s, "D").paper();
    assert_eq!(
        d,
        "⟨(=, •, •), [⟨(C, [N, N], [i1, i2]), []⟩, ⟨(+, [N, N], •), [⟨(A, [N, N], [i1, i2]), []⟩, ⟨(B, [N, N], [i1, i2]), []⟩]⟩]⟩"
    );
    for t in ["A", "B", "C"] {
        assert_eq!(get(&s, t).paper(), format!("⟨({t}, [N, N], ε), []⟩"));
    }
    let s = ok("l = build(D)", &s);
    assert_eq!(
        get(&s, "l").tree(),
        "for i1 in [0, N-1]\n  for i2 in [0, N-1]\n    C[i1][i2] = A[i1][i2] + B[i1][i2]\n"
    );
}

#[test]
fn fig6_virtual_operand_with_omitted_list() {
    let s = ok(&file("fig6.teml"), &State::new());
    let d = get(&s, "D").paper();
    assert_eq!(d, "⟨(+, [N, N], •), [⟨(A, [N, N], [i1, i2]), []⟩, ⟨(B, [N, N], [i1, i2]), []⟩]⟩");
    let e = get(&s, "E").paper();
    assert_eq!(
        e,
        format!(
            "⟨(=, •, •), [⟨(E, [N, N], [i1, i2]), []⟩, ⟨(*, [N, N], •), [⟨(C, [N, N], [i1, i2]), []⟩, {d}]⟩]⟩"
        )
    );
    assert_eq!(get(&s, "l").paper(), format!("⟨i1, [⟨i2, [{e}]⟩]⟩"));
    assert_eq!(
        get(&s, "l").tree(),
        "for i1 in [0, N-1]\n  for i2 in [0, N-1]\n    E[i1][i2] = C[i1][i2] * (A[i1][i2] + B[i1][i2])\n"
    );
}

#[test]
fn same_values_as_the_core() {
    // Word arguments (the parser) and Index arguments (the core tests) give one value.
    let s = ok(&file("fig6.teml"), &State::new());
    let c = State::new();
    let shape = || ArgVal::List(vec![ArgVal::Word("N".into()), ArgVal::Word("N".into())]);
    let c = teml::ops::exec(&c, "A", None, "tensor", &[shape()]).unwrap();
    let c = teml::ops::exec(&c, "B", None, "tensor", &[shape()]).unwrap();
    let c = teml::ops::exec(&c, "C", None, "tensor", &[shape()]).unwrap();
    let its = || ArgVal::List(vec![ArgVal::Index("i1".into()), ArgVal::Index("i2".into())]);
    let c = teml::ops::exec(
        &c,
        "D",
        None,
        "vadd",
        &[ArgVal::Word("A".into()), ArgVal::Word("B".into()), ArgVal::List(vec![its(), its()])],
    )
    .unwrap();
    let c = teml::ops::exec(
        &c,
        "E",
        None,
        "mul",
        &[
            ArgVal::Word("C".into()),
            ArgVal::Word("D".into()),
            ArgVal::List(vec![its(), ArgVal::Omitted]),
            its(),
        ],
    )
    .unwrap();
    let c = teml::ops::exec(&c, "l", None, "build", &[ArgVal::Word("E".into())]).unwrap();
    assert_eq!(s, c);
}

#[test]
fn transformation_lines_init_and_codegen() {
    let s = ok(&file("transforms.teml"), &State::new());
    assert_eq!(s.constant("N"), Some(250));
    assert_eq!(
        get(&s, "l1").tree(),
        "for i1 in [0, N-1]\n  for i2o in [0, floor((N-1)/32)]\n    for i2 in [32*i2o, min(32*i2o+31, N-1)]\n      for i3 in [0, N-1]\n        B[i3][i2][i1] = A[i1][i2][i3]\n"
    );
    assert_eq!(
        get(&s, "l2").tree(),
        "for i1 in [0, N-1]\n  for i3 in [0, N-1]\n    for i2 in [0, N-1]\n      B[i3][i2][i1] = A[i1][i2][i3]\n"
    );
    assert!(get(&s, "l3").tree().starts_with("for i3 in [0, N-1]\n  for i1 in"), "{}", get(&s, "l3").tree());
    assert_eq!(s.inits.get("A"), Some(&Init::Random));
    assert_eq!(s.inits.get("B"), Some(&Init::Value(0.0)));
    assert_eq!(s.kernels.len(), 1);
    let names: Vec<&str> = s.kernels[0].names.iter().map(|n| &**n).collect();
    assert_eq!(names, vec!["l1", "l2"]);
    let s = ok("init(A, 1.5)\ninit(B, \"b.npy\")", &s);
    assert_eq!(s.inits.get("A"), Some(&Init::Value(1.5)));
    assert_eq!(s.inits.get("B"), Some(&Init::Npy("b.npy".into())));
}

#[test]
fn constant_default_and_command_line_override() {
    let src = "N = 250\nA = tensor([N, 4])";
    let s = ok(src, &State::new());
    assert_eq!(s.constant("N"), Some(250));
    // `-D N=100` puts N in the state first: the file's default does not override it.
    let s = ok(src, &State::new().with_const("N", 100));
    assert_eq!(s.constant("N"), Some(100));
    assert_eq!(get(&s, "A").paper(), "⟨(A, [N, 4], ε), []⟩");
    // A second definition of the same name is an error, with or without -D.
    for s in [State::new(), State::new().with_const("N", 100)] {
        let e = eval("N = 8\nA = tensor([N])\nN = 10", "t.teml", &s).unwrap_err();
        let old = s.constant("N").unwrap_or(8);
        assert_eq!(
            e.message,
            format!(
                "named constant `N` is already defined (N = {old}): expected one definition per constant (-D N=INT overrides it), found a second"
            )
        );
        assert_eq!((e.line, e.col, e.width), (3, 1, 1));
    }
}

#[test]
fn stencil_with_affine_indices() {
    let s = ok(
        "A = tensor([10])\nB = tensor([8])\nt = vadd(A, A, [[i], [i+1]])\nt2 = vadd(t, A, [, [i+2]])\nB = eq(t2, -> [i])\nl = build(B)",
        &State::new(),
    );
    assert_eq!(get(&s, "l").tree(), "for i in [0, 7]\n  B[i] = A[i] + A[i+1] + A[i+2]\n");
}

#[test]
fn scalar_literals_and_floats() {
    let s = ok(
        "alpha = scalar()\nA = tensor(float, [8])\nB = mul(alpha, A, [, [i]] -> [i])\nC = div(A, 3.0, [[i], ] -> [i])",
        &State::new(),
    );
    assert_eq!(texpr(&s, "B"), "B[i] = alpha * A[i]");
    assert_eq!(texpr(&s, "C"), "C[i] = A[i] / 3.0");
}

#[test]
fn eval_is_pure_and_statement_at_a_time() {
    let s0 = ok("A = tensor([4, 4])", &State::new());
    let s1 = eval_stmt("B = eq(A, [i, j] -> [j, i])", "<repl>", &s0, &teml::lang::NoExtensions).unwrap();
    assert!(s0.get("B").is_none());
    assert!(s1.get("B").is_some());
    // A failing line changes nothing: the first statement of the line is not kept either.
    let e = eval_stmt(
        "C = eq(A, [i, j] -> [i, j]); D = eq(Q, [i] -> [i])",
        "<repl>",
        &s1,
        &teml::lang::NoExtensions,
    )
    .unwrap_err();
    assert_eq!((e.file.as_str(), e.line, e.col), ("<repl>", 1, 37));
    assert!(s1.get("C").is_none());
}

/// A stand-in for a library written in another front-end.
struct Lib;

impl Extensions for Lib {
    fn call(&self, state: &State, name: &str, args: &[ArgVal]) -> Option<Result<Value>> {
        match name {
            // transpose2(t): eq(t, [a, b] -> [b, a])
            "transpose2" => Some(teml::ops::call(
                state,
                "eq",
                &[
                    args.first().cloned().unwrap_or(ArgVal::Omitted),
                    ArgVal::List(vec![ArgVal::Word("a".into()), ArgVal::Word("b".into())]),
                    ArgVal::List(vec![ArgVal::Word("b".into()), ArgVal::Word("a".into())]),
                ],
            )),
            _ => None,
        }
    }

    fn names(&self) -> Vec<String> {
        vec!["transpose2".into(), "contract".into()]
    }
}

#[test]
fn extensions_are_offered_unknown_names() {
    let s = eval_with("A = tensor([3, 5])\nT = transpose2(A)\nl = build(T)", "t.teml", &State::new(), &Lib)
        .unwrap();
    assert_eq!(get(&s, "l").tree(), "for b in [0, 4]\n  for a in [0, 2]\n    T[b][a] = A[a][b]\n");
    // An extension's error from a core builtin points at the call's name.
    let e = eval_with("T = transpose2(Q)", "t.teml", &State::new(), &Lib).unwrap_err();
    assert_eq!(e.message, "eq: argument 1 (tensor): unknown identifier `Q`");
    assert_eq!((e.line, e.col, e.width), (1, 5, 10));
    // Suggestions include the extensions' names.
    let e = eval_with("x = contrac(A)", "t.teml", &State::new(), &Lib).unwrap_err();
    assert_eq!(e.message, "unknown builtin `contrac`; did you mean `contract` or `vcontract`?");
    let e = eval_with("contract(A)", "t.teml", &State::new(), &Lib).unwrap_err();
    assert_eq!(
        e.message,
        "`contract` returns a value, which a statement would drop: bind it with `id = contract(...)`"
    );
}

/// `X = @X: e` with X undeclared is `X = e`: it declares X with the inferred shape (as the
/// `.rhai` form `let X = at("X", e)` does).
#[test]
fn at_form_naming_the_undeclared_target_itself() {
    let src = "A = tensor([4])\nX = @X: add(A, A, [[i], [i]] -> [i])\nl = build(X)\ncodegen(l)";
    let s = ok(src, &State::new());
    assert_eq!(texpr(&s, "X"), "X[i] = A[i] + A[i]");
    assert_eq!(s.real_tensor("X").map(|t| t.shape.to_string()), Some("[4]".into()));
    let r = teml::script::eval(
        "let A = tensor([4]);\nlet X = at(\"X\", add(A, A, [[i], [i]], [i]));\nlet l = build(X);\ncodegen(l);",
        "t.rhai",
        &State::new(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(texpr(&r, "X"), "X[i] = A[i] + A[i]");
    assert_eq!(r.kernels[0].nests, s.kernels[0].nests);
    // D = @C: e with C undeclared still declares C
    let s = ok("A = tensor([4])\nD = @C: add(A, A, [[i], [i]] -> [i])", &State::new());
    assert_eq!(texpr(&s, "D"), "C[i] = A[i] + A[i]");
    assert!(s.real_tensor("C").is_some());
}
