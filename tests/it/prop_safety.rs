//! TeIL's safety property, checked by enumeration: random sequences of valid transformations on
//! random perfect nests keep every access within the extents of the tensor it indexes, at every
//! point of the iteration space; and they keep the multiset of statement instances.

use crate::common::*;
use proptest::prelude::*;
use teml::ir::{Dim, Expr, Nest, State};

/// A random kernel: (template, sizes).
fn kernel(template: u8, a: i64, b: i64, c: i64) -> State {
    match template % 4 {
        0 => matmul(a, b, c),
        1 => {
            // 2-D stencil: B[i][j] = A[i+2][j] + A[i][j+1]
            let s = State::new();
            let s = run(&s, "A", "tensor", vec![shape(&format!("{}, {}", a + 2, b + 1))]);
            let s = run(&s, "t", "vadd", vec![id("A"), id("A"), list(vec![its("i+2, j"), its("i, j+1")])]);
            let s = run(&s, "B", "eq", vec![id("t"), none(), its("i, j")]);
            run(&s, "l", "build", vec![id("B")])
        }
        2 => {
            // 3-D transposition with a scale: B[k][i][j] = A[i][j][k] * A[i][j][k]
            let s = State::new();
            let s = run(&s, "A", "tensor", vec![shape(&format!("{a}, {b}, {c}"))]);
            let s = run(
                &s,
                "B",
                "mul",
                vec![id("A"), id("A"), list(vec![its("i, j, k"), its("i, j, k")]), its("k, i, j")],
            );
            run(&s, "l", "build", vec![id("B")])
        }
        _ => {
            // 1-D convolution: O[h] = O[h] + I[h+kh] * W[kh]
            let s = State::new();
            let s = run(&s, "I", "tensor", vec![shape(&format!("{}", a + c - 1))]);
            let s = run(&s, "W", "tensor", vec![shape(&format!("{c}"))]);
            let s = run(&s, "O", "tensor", vec![shape(&format!("{a}"))]);
            let s = run(&s, "p", "vmul", vec![id("I"), id("W"), list(vec![its("h+kh"), its("kh")])]);
            let s = run(&s, "O", "add", vec![id("O"), id("p"), list(vec![its("h"), none()]), its("h")]);
            run(&s, "l", "build", vec![id("O")])
        }
    }
}

#[derive(Clone, Debug)]
enum Step {
    Stripmine(i64, i64),
    Interchange(i64, i64),
    Unroll(i64),
    FuseInner(i64),
    Parallelize(i64),
    Vectorize(i64),
    /// `split(l, r, at)`: at a constant, or (where `outer`) at the iterator of the loop
    /// around level r plus the constant.
    Split(i64, i64, bool),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1..6i64, 1..5i64).prop_map(|(r, v)| Step::Stripmine(r, v)),
        (1..6i64, 1..6i64).prop_map(|(a, b)| Step::Interchange(a, b)),
        (1..6i64).prop_map(Step::Unroll),
        (1..6i64).prop_map(Step::FuseInner),
        (1..6i64).prop_map(Step::Parallelize),
        (1..6i64).prop_map(Step::Vectorize),
        (1..6i64, -2..8i64, any::<bool>()).prop_map(|(r, c, o)| Step::Split(r, c, o)),
    ]
}

fn apply(s: &State, n: &Nest, st: &Step) -> teml::Result<Nest> {
    use teml::ops::*;
    match *st {
        Step::Stripmine(r, v) => stripmine(s, n, r, v),
        Step::Interchange(a, b) => interchange(n, a, b),
        Step::Unroll(r) => unroll(s, n, r),
        Step::FuseInner(r) => fuse_inner(n, r),
        Step::Parallelize(r) => parallelize(n, r),
        Step::Vectorize(r) => vectorize(n, r, 0),
        Step::Split(r, c, outer) => {
            let path = n.path();
            let at = match path.get((r - 2).max(0) as usize) {
                Some(l) if outer && r >= 2 => Expr::var_name(&l.iter).add_int(c),
                _ => Expr::int(c),
            };
            split(n, r, &at)
        }
    }
}

/// Every access of every statement instance lies within its tensor's extents.
fn check_safe(n: &Nest, s: &State) -> Result<usize, String> {
    let mut bad = None;
    let mut count = 0;
    n.for_each_instance(&|v| s.constant(v), &mut |stmt, env| {
        count += 1;
        let look = |v: &str| env.iter().rev().find(|(n, _)| &**n == v).map(|(_, x)| *x);
        for leaf in stmt.indexed_leaves() {
            let dims = leaf.shape.dims().unwrap_or(&[]);
            for (k, x) in leaf.index_list().unwrap_or(&[]).iter().enumerate() {
                let Some(Dim::Known(e)) = dims.get(k) else {
                    continue;
                };
                let extent = e.eval(&|v| s.constant(v)).unwrap();
                match x.eval(&look) {
                    Ok(i) if (0..extent).contains(&i) => {}
                    other => {
                        bad = Some(format!(
                            "{} at {env:?}: index {k} = {other:?}, extent {extent}",
                            leaf.access()
                        ))
                    }
                }
            }
        }
    })?;
    match bad {
        Some(b) => Err(b),
        None => Ok(count),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]
    #[test]
    fn transformations_keep_accesses_in_bounds(
        template in 0u8..4, a in 1i64..7, b in 1i64..6, c in 1i64..5,
        steps in proptest::collection::vec(step(), 0..7)
    ) {
        let s = kernel(template, a, b, c);
        let original = nest(&s, "l");
        let expected = instance_set(&original, &s);
        prop_assert_eq!(check_safe(&original, &s), Ok(expected.len()));
        let mut cur = original.clone();
        for st in &steps {
            // Invalid steps are refused with an error (never a panic) and leave `cur` as it is.
            if let Ok(next) = apply(&s, &cur, st) {
                cur = next;
            }
            prop_assert_eq!(check_safe(&cur, &s), Ok(expected.len()), "after {:?}:\n{}", st, cur.tree());
        }
        prop_assert_eq!(instance_set(&cur, &s), expected);
        prop_assert_eq!(nest(&s, "l"), original);
    }
}

#[test]
fn expr_eval_matches_printed_bounds() {
    // A sanity check of the enumeration helper itself.
    let e = Expr::min(&Expr::var("o").scale(4).add_int(3), &Expr::int(9));
    assert_eq!(e.eval(&|_| Some(2)), Ok(9));
}
