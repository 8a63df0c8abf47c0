//! The reference interpreter computes what the statements mean.

use crate::common::*;
use teml::interp::{Buffers, buffers_for, run as interp};
use teml::ir::{Nest, State};

fn data(s: &State, nests: &[Nest]) -> Buffers {
    let mut k = 0.0;
    buffers_for(s, nests, &mut |_, _, dims| {
        let n: usize = dims.iter().product();
        (0..n)
            .map(|_| {
                k += 1.0;
                (k * 0.37f64).sin()
            })
            .collect()
    })
    .unwrap()
}

#[test]
fn matmul_accumulates_onto_c() {
    let s = matmul(3, 4, 2);
    let l = nest(&s, "l");
    let mut b = data(&s, std::slice::from_ref(&l));
    let (a, bb, c0) = (b["A"].data.clone(), b["B"].data.clone(), b["C"].data.clone());
    let n = interp(&s, &[l], &mut b).unwrap();
    assert_eq!(n, 3 * 4 * 2);
    for i in 0..3 {
        for j in 0..2 {
            let want = c0[i * 2 + j] + (0..4).map(|k| a[i * 4 + k] * bb[k * 2 + j]).sum::<f64>();
            assert!((b["C"].data[i * 2 + j] - want).abs() < 1e-12);
        }
    }
}

#[test]
fn contraction_result_is_the_sum_alone() {
    // A = vcontract(B, D): A is zeroed first, whatever it held.
    let s = State::new();
    let s = run(&s, "B", "tensor", vec![shape("2, 3")]);
    let s = run(&s, "D", "tensor", vec![shape("3, 2")]);
    let s = run(&s, "t", "vcontract", vec![id("B"), id("D"), list(vec![int(2), int(1)])]);
    let s = run(&s, "A", "eq", vec![id("t"), none(), its("i1, i2")]);
    let s = run(&s, "l", "build", vec![id("A")]);
    let l = nest(&s, "l");
    let mut b = data(&s, std::slice::from_ref(&l));
    let (bb, d) = (b["B"].data.clone(), b["D"].data.clone());
    interp(&s, &[l], &mut b).unwrap();
    for i in 0..2 {
        for j in 0..2 {
            let want: f64 = (0..3).map(|k| bb[i * 3 + k] * d[k * 2 + j]).sum();
            assert!((b["A"].data[i * 2 + j] - want).abs() < 1e-12);
        }
    }
}

#[test]
fn transformations_compute_the_same_values() {
    let s = matmul(9, 5, 7);
    let s = run(&s, "a", "stripmine", vec![id("l"), int(1), int(4)]);
    let s = run(&s, "b", "interchange", vec![id("a"), int(2), int(3)]);
    let s = run(&s, "c", "unroll", vec![id("b"), int(4)]);
    let s = run(&s, "d", "unroll", vec![id("l"), int(1)]);
    let s = run(&s, "e", "fuse_inner", vec![id("d"), int(1)]);
    let reference = {
        let l = nest(&s, "l");
        let mut b = data(&s, std::slice::from_ref(&l));
        interp(&s, &[l], &mut b).unwrap();
        b
    };
    for v in ["a", "b", "c", "d", "e"] {
        let n = nest(&s, v);
        let mut b = data(&s, std::slice::from_ref(&n));
        interp(&s, &[n], &mut b).unwrap();
        for (x, y) in b["C"].data.iter().zip(&reference["C"].data) {
            assert!((x - y).abs() < 1e-12, "{v}");
        }
    }
}
