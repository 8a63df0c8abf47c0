//! The trees of the paper's Fig. 4, 5 and 6, node by node, and the loop trees `build` gives.

use crate::common::*;
use teml::ir::{AssignMode, Dim, Expr, Iters, Op, Shape, State};

#[test]
fn fig4_transposition_with_eq() {
    let s = State::new();
    let s = run(&s, "A", "tensor", vec![shape("N1, N2")]);
    assert_eq!(texpr(&s, "A").paper(), "⟨(A, [N1, N2], ε), []⟩");
    let s = run(&s, "B", "eq", vec![id("A"), its("i1, i2"), its("i2, i1")]);
    let b = texpr(&s, "B");
    assert_eq!(b.paper(), "⟨(=, •, •), [⟨(B, [N2, N1], [i2, i1]), []⟩, ⟨(A, [N1, N2], [i1, i2]), []⟩]⟩");
    // σ2(A) is unchanged: A still has no iterator list.
    assert_eq!(texpr(&s, "A").iters, Iters::Unset);
    // Node by node.
    assert_eq!(b.op, Op::Assign(AssignMode::Plain));
    assert_eq!((b.shape.clone(), b.iters.clone()), (Shape::Bullet, Iters::Bullet));
    let x = &b.children[0];
    assert_eq!(x.op, Op::Id("B".into()));
    assert_eq!(x.shape, Shape::Dims(vec![Dim::Known(Expr::var("N2")), Dim::Known(Expr::var("N1"))]));
    assert_eq!(x.iters, Iters::List(vec![Expr::var("i2"), Expr::var("i1")]));
    let s = run(&s, "l", "build", vec![id("B")]);
    let l = nest(&s, "l");
    assert_eq!(l.paper(), format!("⟨i1, [⟨i2, [{}]⟩]⟩", b.paper()));
    assert_eq!(l.tree(), "for i1 in [0, N1-1]\n  for i2 in [0, N2-1]\n    B[i2][i1] = A[i1][i2]\n");
}

#[test]
fn fig5_at_id_form() {
    let s = State::new();
    let s = run(&s, "A", "tensor", vec![shape("N, N")]);
    let s = run(&s, "B", "tensor", vec![shape("N, N")]);
    let s = run(&s, "C", "tensor", vec![shape("N, N")]);
    let s = teml::ops::exec(
        &s,
        "D",
        Some("C"),
        "add",
        &[id("A"), id("B"), list(vec![its("i1, i2"), its("i1, i2")]), its("i1, i2")],
    )
    .unwrap();
    let d = texpr(&s, "D");
    assert_eq!(
        d.paper(),
        "⟨(=, •, •), [⟨(C, [N, N], [i1, i2]), []⟩, ⟨(+, [N, N], •), [⟨(A, [N, N], [i1, i2]), []⟩, ⟨(B, [N, N], [i1, i2]), []⟩]⟩]⟩"
    );
    // σ4 keeps A, B, C as declared, and maps D (not C) to the assignment.
    for t in ["A", "B", "C"] {
        assert_eq!(texpr(&s, t).paper(), format!("⟨({t}, [N, N], ε), []⟩"));
    }
    let s = run(&s, "l", "build", vec![id("D")]);
    let l = nest(&s, "l");
    assert_eq!(l.paper(), format!("⟨i1, [⟨i2, [{}]⟩]⟩", d.paper()));
    assert_eq!(l.tree(), "for i1 in [0, N-1]\n  for i2 in [0, N-1]\n    C[i1][i2] = A[i1][i2] + B[i1][i2]\n");
}

#[test]
fn fig6_virtual_operand_with_omitted_list() {
    let s = State::new();
    let s = run(&s, "A", "tensor", vec![shape("N, N")]);
    let s = run(&s, "B", "tensor", vec![shape("N, N")]);
    let s = run(&s, "C", "tensor", vec![shape("N, N")]);
    let s = run(&s, "D", "vadd", vec![id("A"), id("B"), list(vec![its("i1, i2"), its("i1, i2")])]);
    let d = texpr(&s, "D");
    assert_eq!(d.paper(), "⟨(+, [N, N], •), [⟨(A, [N, N], [i1, i2]), []⟩, ⟨(B, [N, N], [i1, i2]), []⟩]⟩");
    let s = run(&s, "E", "mul", vec![id("C"), id("D"), list(vec![its("i1, i2"), none()]), its("i1, i2")]);
    let e = texpr(&s, "E");
    assert_eq!(
        e.paper(),
        format!(
            "⟨(=, •, •), [⟨(E, [N, N], [i1, i2]), []⟩, ⟨(*, [N, N], •), [⟨(C, [N, N], [i1, i2]), []⟩, {}]⟩]⟩",
            d.paper()
        )
    );
    assert_eq!(e.to_string(), "E[i1][i2] = C[i1][i2] * (A[i1][i2] + B[i1][i2])");
    let s = run(&s, "l", "build", vec![id("E")]);
    assert_eq!(nest(&s, "l").paper(), format!("⟨i1, [⟨i2, [{}]⟩]⟩", e.paper()));
    assert_eq!(
        nest(&s, "l").tree(),
        "for i1 in [0, N-1]\n  for i2 in [0, N-1]\n    E[i1][i2] = C[i1][i2] * (A[i1][i2] + B[i1][i2])\n"
    );
}

#[test]
fn scalar_and_literal_operands() {
    let s = State::new();
    let s = run(&s, "alpha", "scalar", vec![]);
    assert_eq!(texpr(&s, "alpha").paper(), "⟨(alpha, [], •), []⟩");
    let s = run(&s, "A", "tensor", vec![shape("8")]);
    let s = run(&s, "B", "mul", vec![id("alpha"), id("A"), list(vec![none(), its("i")]), its("i")]);
    assert_eq!(texpr(&s, "B").to_string(), "B[i] = alpha * A[i]");
    let s = run(&s, "C", "div", vec![id("A"), ArgVal::Float(3.0), list(vec![its("i"), none()]), its("i")]);
    assert_eq!(texpr(&s, "C").to_string(), "C[i] = A[i] / 3.0");
    let s = run(&s, "l", "build", vec![id("C")]);
    assert_eq!(nest(&s, "l").tree(), "for i in [0, 7]\n  C[i] = A[i] / 3.0\n");
}

use teml::ops::ArgVal;

#[test]
fn float_tensors_and_named_constants() {
    let s = State::new().with_const("N", 250);
    let s = run(&s, "A", "tensor", vec![id("float"), shape("N, 4")]);
    let a = texpr(&s, "A");
    assert_eq!(a.dtype, teml::ir::DType::Float);
    assert_eq!(a.shape.to_string(), "[N, 4]");
    let s = run(&s, "B", "tensor", vec![id("double"), shape("N, 4")]);
    assert_eq!(texpr(&s, "B").dtype, teml::ir::DType::Double);
}
