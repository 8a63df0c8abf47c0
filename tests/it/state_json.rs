//! Printing and saving: both kinds of trees print readably, and any value and the whole
//! state round-trip through serde_json exactly.

use crate::common::*;
use teml::ir::{State, Value};

fn program() -> State {
    let s = State::new().with_const("N", 6);
    let s = run(&s, "B", "tensor", vec![id("double"), shape("N, N, N")]);
    let s = run(&s, "C", "tensor", vec![id("float"), shape("N, N")]);
    let s = run(&s, "D", "tensor", vec![shape("N, N")]);
    let s = run(&s, "tmp", "vcontract", vec![id("B"), id("D"), list(vec![int(3), int(1)])]);
    let s = run(&s, "A", "eq", vec![id("tmp"), none(), its("i1, i2, i3")]);
    let s = run(&s, "l", "build", vec![id("A")]);
    let s = run(&s, "l1", "stripmine", vec![id("l"), int(2), int(4)]);
    run(&s, "l2", "parallelize", vec![id("l1"), int(1)])
}

#[test]
fn vcontract_builds_the_reduction_into_the_nest() {
    let s = program();
    let a = texpr(&s, "A");
    assert_eq!(a.to_string(), "A[i1][i2][i3] += sum[k1](B[i1][i2][k1] * D[k1][i3])");
    assert_eq!(texpr(&s, "tmp").shape.to_string(), "[N, N, N]");
    assert_eq!(
        nest(&s, "l").tree(),
        "for i1 in [0, N-1]\n  for i2 in [0, N-1]\n    for i3 in [0, N-1]\n      for k1 in [0, N-1]\n        A[i1][i2][i3] += sum[k1](B[i1][i2][k1] * D[k1][i3])\n"
    );
}

#[test]
fn tensor_tree_printer_is_indented() {
    let s = program();
    assert_eq!(
        texpr(&s, "A").tree(),
        "(=, •, •)  accumulator: zeroed at its first update\n\
         ├─ (A, [N, N, N], [i1, i2, i3])\n\
         └─ (Σ[k1], [N, N, N], •)\n   \
            ├─ (B, [N, N, N], [i1, i2, k1])\n   \
            └─ (D, [N, N], [k1, i3])\n"
    );
    assert_eq!(texpr(&s, "C").tree(), "(C, [N, N], ε) float\n");
}

#[test]
fn state_round_trips_through_json() {
    let s = program();
    let json = s.to_json();
    let back = State::from_json(&json).expect("reload");
    assert_eq!(back, s);
    // and every value on its own
    for (name, v) in &s.vars {
        let j = serde_json::to_string(v).unwrap();
        let w: Value = serde_json::from_str(&j).unwrap();
        assert_eq!(&w, v, "{name}");
    }
    // a reloaded state goes on working
    let back = run(&back, "l3", "interchange", vec![id("l2"), int(3), int(4)]);
    assert!(nest(&back, "l3").tree().contains("parallel"));
    assert!(State::from_json("{\"vars\": 3}").is_err());
}
