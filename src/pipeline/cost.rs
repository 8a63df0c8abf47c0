//! What a kernel costs: its untransformed nests, the statement instances the reference runs,
//! its floating-point operations.
use super::options::RunError;
use crate::ir::{KernelRequest, LNode, Name, Nest, State, lower};

/// Past this many floating-point operations, the untransformed build of a kernel with a
/// rewrite is not timed (it would run for minutes).
pub const UNTIMED_FLOPS: u64 = 200_000_000_000;

/// Up to this many interpreted statement instances, each compared element gets its own rounding
/// bound (two more interpreter runs: docs/verification.md); past it, the relative tolerance.
pub const ROUNDING_BOUND_INSTANCES: u64 = 100_000_000;

/// The untransformed program behind a request: each origin assignment built anew, in order;
/// where `lift` rewrote an assignment ([`Nest::rewrites`]), the assignment as the program
/// wrote it instead of the sequence (the sequence's temporaries are not part of it). This is
/// what verification runs and what the speedup is measured against.
pub fn untransformed(state: &State, req: &KernelRequest) -> Result<Vec<Nest>, RunError> {
    let mut out = Vec::new();
    for n in &req.nests {
        if n.rewrites.is_empty() {
            out.push(crate::ir::Nest::new(crate::ops::program(state, n)?, n.origin.clone()));
            continue;
        }
        let mut origin = Vec::new();
        for o in &n.origin {
            let target = o.target().and_then(|x| x.id());
            if n.rewrites.iter().any(|r| target.is_some_and(|t| r.temps.contains(t))) {
                continue;
            }
            match n.rewrites.iter().find(|r| target == Some(&r.result)) {
                Some(r) => origin.push(r.original.clone()),
                None => origin.push(o.clone()),
            }
        }
        out.push(crate::ops::sequence(state, &origin)?);
    }
    Ok(out)
}

/// The programs of a request's nests as they compute (a lifted assignment as its sequence):
/// the operations a kernel performs, for its GFLOP/s.
pub(super) fn performed(state: &State, req: &KernelRequest) -> Result<Vec<Nest>, RunError> {
    let mut out = Vec::new();
    for n in &req.nests {
        out.push(crate::ir::Nest::new(crate::ops::program(state, n)?, n.origin.clone()));
    }
    Ok(out)
}

/// The temporaries of the rewrites in a request, and the buffers of copies per iteration
/// (`privatize`): written by the kernel, computed by no statement of the program as written,
/// never compared.
pub(super) fn temporaries(req: &KernelRequest) -> Vec<Name> {
    req.nests
        .iter()
        .flat_map(|n| n.temps().cloned().chain(n.expanded.values().map(|x| x.buffer.clone())))
        .collect()
}

/// Sum over every statement instance of `weight(statement)`, trip counts evaluated with the
/// named constants; saturating (a count too large to represent is too large to interpret). A
/// loop whose iterator bounds a loop inside it (a triangle, `k in [0, i-1]`) is counted value
/// by value, up to [`ENUMERATED`] values in all; past that, its body is counted at its middle
/// iteration, which is exact where the inner trip counts are affine in it.
pub(super) fn weigh(state: &State, nests: &[Nest], weight: &dyn Fn(&crate::ir::TExpr) -> u64) -> u64 {
    struct Weigh<'a> {
        state: &'a State,
        weight: &'a dyn Fn(&crate::ir::TExpr) -> u64,
        /// Loop values still to enumerate.
        budget: u64,
        /// The values of the loops around, innermost last.
        env: Vec<(Name, i64)>,
        /// Each statement's weight, by its node.
        seen: std::collections::HashMap<*const crate::ir::TNode, u64>,
        /// Whether a loop's iterator bounds a loop inside it, by the loop.
        bounds: std::collections::HashMap<*const crate::ir::Loop, bool>,
    }
    fn bounds_use(x: &LNode, it: &str) -> bool {
        match x {
            LNode::Stmt(_) => false,
            LNode::Loop(l) => l.bounds_mention(it) || l.body.iter().any(|c| bounds_use(c, it)),
        }
    }
    fn body(w: &mut Weigh<'_>, l: &crate::ir::Loop) -> u64 {
        l.body.iter().fold(0u64, |acc, c| acc.saturating_add(go(w, c)))
    }
    fn go(w: &mut Weigh<'_>, x: &LNode) -> u64 {
        let l = match x {
            LNode::Stmt(s) => {
                let weight = w.weight;
                return *w.seen.entry(std::sync::Arc::as_ptr(s)).or_insert_with(|| weight(s));
            }
            LNode::Loop(l) => l,
        };
        let val = |e: &crate::ir::Expr, w: &Weigh<'_>| {
            e.eval(&|v| {
                w.env.iter().rev().find(|(n, _)| &**n == v).map(|(_, x)| *x).or_else(|| w.state.constant(v))
            })
        };
        let (Ok(lb), Ok(ub)) = (val(&l.lb, w), val(&l.ub, w)) else { return 0 };
        if ub < lb {
            return 0;
        }
        let n = (ub - lb).saturating_add(1) as u64;
        let bounds_inner = *w
            .bounds
            .entry(std::sync::Arc::as_ptr(l))
            .or_insert_with(|| l.body.iter().any(|c| bounds_use(c, &l.iter)));
        if bounds_inner && w.budget >= n {
            w.budget -= n;
            let mut sum = 0u64;
            let mut v = lb;
            while v <= ub {
                w.env.push((l.iter.clone(), v));
                sum = sum.saturating_add(body(w, l));
                w.env.pop();
                v = v.saturating_add(1);
            }
            return sum;
        }
        w.env.push((l.iter.clone(), lb + (ub - lb) / 2));
        let one = body(w, l);
        w.env.pop();
        n.saturating_mul(one)
    }
    let mut w = Weigh {
        state,
        weight,
        budget: ENUMERATED,
        env: Vec::new(),
        seen: Default::default(),
        bounds: Default::default(),
    };
    nests.iter().flat_map(|n| n.items()).fold(0u64, |acc, x| acc.saturating_add(go(&mut w, x)))
}

/// How many loop values [`weigh`] enumerates at most (microseconds of work each).
pub(super) const ENUMERATED: u64 = 1 << 21;

/// Floating-point operations of one run of the untransformed program.
pub fn flop_count(state: &State, nests: &[Nest]) -> u64 {
    weigh(state, nests, &|s| lower(s).map_or(0, |l| crate::ir::lower::flops(&l)))
}

/// Statement instances of the untransformed program (the reference interpreter's work).
pub fn reference_cost(state: &State, req: &KernelRequest) -> Result<u64, RunError> {
    Ok(weigh(state, &untransformed(state, req)?, &|_| 1))
}
