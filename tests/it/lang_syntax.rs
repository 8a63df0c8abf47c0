//! The `.teml` syntax: statements, argument forms, and what each becomes as an `ArgVal`.

use teml::ir::Expr;
use teml::lang::{Program, StmtKind, parse};
use teml::ops::ArgVal;

fn w(s: &str) -> ArgVal {
    ArgVal::Word(s.into())
}

fn l(xs: Vec<ArgVal>) -> ArgVal {
    ArgVal::List(xs)
}

fn prog(src: &str) -> Program {
    match parse(src, "t.teml") {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

/// The call of the only statement: (target, at, name, args).
fn one(src: &str) -> (Option<String>, Option<String>, String, Vec<ArgVal>) {
    let p = prog(src);
    assert_eq!(p.stmts.len(), 1, "{src}");
    match &p.stmts[0].kind {
        StmtKind::Assign { target, at, call } => (
            Some(target.name.clone()),
            at.as_ref().map(|a| a.name.clone()),
            call.name.name.clone(),
            call.arg_vals(),
        ),
        StmtKind::Call(call) => (None, None, call.name.name.clone(), call.arg_vals()),
        StmtKind::Const { .. } => panic!("a constant"),
    }
}

#[test]
fn arrow_gives_two_arguments() {
    let (t, at, name, args) = one("B = eq(A, [i1, i2] -> [i2, i1])");
    assert_eq!((t.as_deref(), at, name.as_str()), (Some("B"), None, "eq"));
    assert_eq!(args, vec![w("A"), l(vec![w("i1"), w("i2")]), l(vec![w("i2"), w("i1")])]);

    let (_, _, _, args) = one("E = mul(C, D, [[i1, i2], ] -> [i1, i2])");
    assert_eq!(
        args,
        vec![w("C"), w("D"), l(vec![l(vec![w("i1"), w("i2")]), ArgVal::Omitted]), l(vec![w("i1"), w("i2")])]
    );
}

#[test]
fn arrow_with_omitted_left_side() {
    let (_, _, _, args) = one("F = eq(D, -> [i1, i2])");
    assert_eq!(args, vec![w("D"), ArgVal::Omitted, l(vec![w("i1"), w("i2")])]);
    let (_, _, _, args) = one("F = eq(D,->[i])");
    assert_eq!(args, vec![w("D"), ArgVal::Omitted, l(vec![w("i")])]);
}

#[test]
fn omitted_list_elements_and_empty_lists() {
    let (_, _, _, args) = one("x = vmul(s, A, [, [k, j]])");
    assert_eq!(args[2], l(vec![ArgVal::Omitted, l(vec![w("k"), w("j")])]));
    let (_, _, _, args) = one("x = f([], [ ], [,], [a, , b])");
    assert_eq!(
        args,
        vec![
            l(vec![]),
            l(vec![]),
            l(vec![ArgVal::Omitted, ArgVal::Omitted]),
            l(vec![w("a"), ArgVal::Omitted, w("b")])
        ]
    );
}

#[test]
fn at_form_and_empty_arguments() {
    let (t, at, name, args) = one("D = @C: add(A, B, [[i1, i2], [i1, i2]] -> [i1, i2])");
    assert_eq!((t.as_deref(), at.as_deref(), name.as_str(), args.len()), (Some("D"), Some("C"), "add", 4));
    let (t, at, name, args) = one("D=@C:add(A,B,[[i],[i]]->[i])");
    assert_eq!((t.as_deref(), at.as_deref(), name.as_str(), args.len()), (Some("D"), Some("C"), "add", 4));
    let (_, _, name, args) = one("alpha = scalar()");
    assert_eq!((name.as_str(), args), ("scalar", vec![]));
}

#[test]
fn literals() {
    let (_, _, name, args) = one("x = f(3, -4, 3.0, 1e-3, -2.5E2, \"a.npy\", \"q\\\"x\", double, random)");
    assert_eq!(name, "f");
    assert_eq!(
        args,
        vec![
            ArgVal::Int(3),
            ArgVal::Int(-4),
            ArgVal::Float(3.0),
            ArgVal::Float(1e-3),
            ArgVal::Float(-250.0),
            ArgVal::Str("a.npy".into()),
            ArgVal::Str("q\"x".into()),
            w("double"),
            w("random"),
        ]
    );
}

#[test]
fn affine_index_expressions() {
    let (_, _, _, args) = one("x = f([i1+2, 2*i, h+kh, i-1, N-1, -i+4, i*3, 2*(i+1), i - i, 2*3, (j)])");
    let ArgVal::List(xs) = &args[0] else { panic!("{args:?}") };
    let v = Expr::var;
    assert_eq!(
        xs,
        &vec![
            ArgVal::Index(v("i1").add_int(2)),
            ArgVal::Index(v("i").scale(2)),
            ArgVal::Index(v("h").add(&v("kh"))),
            ArgVal::Index(v("i").add_int(-1)),
            ArgVal::Index(v("N").add_int(-1)),
            ArgVal::Index(v("i").scale(-1).add_int(4)),
            ArgVal::Index(v("i").scale(3)),
            ArgVal::Index(v("i").scale(2).add_int(2)),
            ArgVal::Int(0),
            ArgVal::Int(6),
            w("j"),
        ]
    );
    assert_eq!(xs[5].describe(), "the index expression -i+4");
}

#[test]
fn statements_comments_blank_lines_and_separators() {
    let src = "\n# a comment\n\n  A = tensor([N])   # trailing comment\n\n;; B = tensor([N]); init(A, 0)\r\n\tN = 250\n# end";
    let p = prog(src);
    let kinds: Vec<String> = p
        .stmts
        .iter()
        .map(|s| match &s.kind {
            StmtKind::Assign { target, call, .. } => format!("{} = {}", target.name, call.name.name),
            StmtKind::Call(c) => c.name.name.clone(),
            StmtKind::Const { name, value } => format!("{} := {value}", name.name),
        })
        .collect();
    assert_eq!(kinds, vec!["A = tensor", "B = tensor", "init", "N := 250"]);
    assert_eq!(p.stmts[0].defines(), Some("A"));
    assert_eq!(p.stmts[2].defines(), None);
    assert!(prog("").stmts.is_empty());
    assert!(prog("# only a comment").stmts.is_empty());
    assert!(prog("\n\n;\n").stmts.is_empty());
}

#[test]
fn transformation_and_statement_lines() {
    let (_, _, name, args) = one("l1 = stripmine(l, 2, 32)");
    assert_eq!((name.as_str(), args), ("stripmine", vec![w("l"), ArgVal::Int(2), ArgVal::Int(32)]));
    let (_, _, _, args) = one("l2 = interchange(l1, [2, 3])");
    assert_eq!(args, vec![w("l1"), l(vec![ArgVal::Int(2), ArgVal::Int(3)])]);
    let (_, _, _, args) = one("l3 = interchange(l2, 1, 2)");
    assert_eq!(args.len(), 3);
    let (t, _, name, args) = one("codegen(l1, l2)");
    assert_eq!((t, name.as_str(), args), (None, "codegen", vec![w("l1"), w("l2")]));
    let (_, _, _, args) = one("init(A, 1.5)");
    assert_eq!(args[1], ArgVal::Float(1.5));
}

#[test]
fn named_constant_statement() {
    let p = prog("N = 250");
    assert!(matches!(&p.stmts[0].kind, StmtKind::Const { name, value: 250 } if name.name == "N"));
    let p = prog("M=-3");
    assert!(matches!(&p.stmts[0].kind, StmtKind::Const { value: -3, .. }));
}

#[test]
fn spans_point_at_the_arguments() {
    let src = "B = eq(A, [i1, i2] -> [i2, i1])";
    let p = prog(src);
    let Some(call) = p.stmts[0].call() else { panic!() };
    let texts: Vec<&str> = call.args.iter().map(|a| &src[a.span.start..a.span.end]).collect();
    assert_eq!(texts, vec!["A", "[i1, i2]", "[i2, i1]"]);
    let src = "F = eq(D, -> [i])";
    let p = prog(src);
    let Some(call) = p.stmts[0].call() else { panic!() };
    let texts: Vec<&str> = call.args.iter().map(|a| &src[a.span.start..a.span.end]).collect();
    assert_eq!(texts, vec!["D", "->", "[i]"]);
}

#[test]
fn a_call_may_span_lines_inside_its_brackets() {
    let src = "A = tensor([4,\n           4])   # declared\nB = eq(A, [i, j]   # reads A\n       -> [j, i])\nC = eq(Q, [i] -> [i])\n";
    let e = teml::lang::eval(src, "m.teml", &teml::ir::State::new()).unwrap_err();
    // the error is on the right line although the calls above took two lines each
    assert!(e.to_string().contains("m.teml:5:8"), "{e}");
    let ok = teml::lang::eval(&src.replace("C = eq(Q, [i] -> [i])\n", ""), "m.teml", &teml::ir::State::new())
        .unwrap();
    assert!(ok.get("B").is_some());
}
