//! Shape and range inference, and the bounds check that makes every built nest safe (the
//! TeIL property: no well-formed program generates an out-of-bounds access).
//!
//! An iterator's range starts at 0 (eq. 19). Its extent comes from the dimensions it indexes
//! on its own ("plain" occurrences such as `A[i]`), which must agree; failing that, from
//! single-iterator affine occurrences (`A[i+2]` bounds `i` by `extent-3`). Every access is
//! then checked against its tensor's extents over the box of ranges.

use crate::error::{Arg, Error, Result};
use crate::ir::{Dim, EvalError, Expr, Name, Overflow, State, TNode};
use std::collections::BTreeSet;

/// Named constants: those the state binds and those any shape in `trees` mentions.
pub fn constants(state: &State, trees: &[&TNode]) -> BTreeSet<Name> {
    let mut out: BTreeSet<Name> = state.consts.keys().cloned().collect();
    for t in trees {
        t.visit(&mut |n| {
            if let Some(ds) = n.shape.dims() {
                for d in ds {
                    if let Dim::Known(e) = d {
                        out.extend(e.vars());
                    }
                }
            }
        });
    }
    out
}

/// The iterators of a tree: index variables that are not named constants, in order of first
/// appearance.
pub fn iterators(t: &TNode, consts: &BTreeSet<Name>) -> Vec<Name> {
    t.index_vars().into_iter().filter(|v| !consts.contains(v)).collect()
}

/// Decides `e >= 0`: `Some(true)` proven, `Some(false)` refuted, `None` undecidable.
/// Named constants are extents, so each is at least 1.
pub fn nonneg(e: &Expr, state: &State) -> Option<bool> {
    if let Some(c) = e.as_const() {
        return Some(c >= 0);
    }
    match e.checked_eval(&|x| state.constant(x)) {
        Ok(v) => return Some(v >= 0),
        Err(EvalError::Overflow) => return None,
        Err(EvalError::Unbound(_)) => {}
    }
    let terms = e.affine_terms()?;
    let least = terms.iter().try_fold(e.constant(), |acc, (_, c)| acc.checked_add(*c));
    if terms.iter().all(|(_, c)| *c > 0) && least.is_some_and(|v| v >= 0) {
        return Some(true);
    }
    None
}

/// Decides `a == b` (constant difference or evaluation with the bound constants).
pub fn same_extent(a: &Expr, b: &Expr, state: &State) -> Option<bool> {
    let d = a.checked_sub(b).ok()?;
    if let Some(c) = d.as_const() {
        return Some(c == 0);
    }
    d.checked_eval(&|x| state.constant(x)).ok().map(|v| v == 0)
}

/// One dimension of one access: `tensor[.., index, ..]` with the dimension's extent.
struct Occ<'a> {
    leaf: &'a TNode,
    index: &'a Expr,
    extent: Option<&'a Expr>,
}

fn occurrences<'a>(trees: &[&'a TNode]) -> Vec<Occ<'a>> {
    let mut out = Vec::new();
    for t in trees {
        for leaf in t.indexed_leaves() {
            let dims = leaf.shape.dims().unwrap_or(&[]);
            for (k, x) in leaf.index_list().unwrap_or(&[]).iter().enumerate() {
                let extent = match dims.get(k) {
                    Some(Dim::Known(e)) => Some(e),
                    _ => None,
                };
                out.push(Occ { leaf, index: x, extent });
            }
        }
    }
    out
}

/// The extent of iterator `v` inferred from the accesses in `trees`, or `None` if no access
/// determines it. Plain occurrences must agree (a shape mismatch otherwise).
pub fn extent_of(
    v: &Name,
    trees: &[&TNode],
    state: &State,
    builtin: &str,
    arg: &Arg,
) -> Result<Option<Expr>> {
    let occs = occurrences(trees);
    let mut plain: Option<(&Expr, &TNode)> = None;
    for o in &occs {
        if o.index.as_var() != Some(v) {
            continue;
        }
        let Some(e) = o.extent else { continue };
        match plain {
            None => plain = Some((e, o.leaf)),
            Some((e0, l0)) => {
                let found = match same_extent(e0, e, state) {
                    Some(true) => continue,
                    Some(false) => format!("extent {e} in {}", o.leaf.access()),
                    None => format!(
                        "extent {e} in {}, which cannot be compared with {e0} until the named constants are bound (-D NAME=INT)",
                        o.leaf.access()
                    ),
                };
                return Err(Error::ShapeMismatch {
                    builtin: builtin.into(),
                    arg: arg.clone(),
                    expected: format!(
                        "iterator `{v}` to index dimensions of one extent ({e0} in {})",
                        l0.access()
                    ),
                    found,
                });
            }
        }
    }
    // Single-iterator affine occurrences c*v + d within [0, E-1] narrow the range further
    // (a stencil A[i] + A[i+2] leaves i two short of A's extent).
    let mut best: Option<Expr> = plain.map(|(e, _)| e.clone());
    for o in &occs {
        let Some(e) = o.extent else { continue };
        let c = o.index.coeff(v);
        if c == 0 || !o.index.is_affine() || o.index.as_var().is_some() {
            continue;
        }
        let overflow = |_| overflow(builtin, arg, o.leaf);
        let rest =
            o.index.checked_sub(&Expr::var_name(v).checked_scale(c).map_err(overflow)?).map_err(overflow)?;
        if rest.vars().iter().any(|x| !is_const(x, state, trees)) {
            continue; // depends on another iterator too (e.g. h+kh)
        }
        // An access below 0 at v = 0 (such as A[i-1]) bounds nothing: build reports it.
        if nonneg(&rest, state) == Some(false) && c > 0 {
            continue;
        }
        let cand = if c > 0 {
            // c*v + rest <= E-1  =>  v <= floor((E-1-rest)/c)
            e.checked_add_int(-1).and_then(|x| x.checked_sub(&rest)).map(|x| x.floordiv(c))
        } else {
            // c*v + rest >= 0  =>  v <= floor(rest/|c|)
            c.checked_neg().ok_or(Overflow).map(|n| rest.floordiv(n))
        };
        let cand = cand.and_then(|x| x.checked_add_int(1)).map_err(overflow)?;
        if nonneg(&cand.checked_add_int(-1).map_err(overflow)?, state) == Some(false) {
            return Err(Error::RangeInference {
                builtin: builtin.into(),
                arg: arg.clone(),
                iterator: v.to_string(),
                reason: format!(
                    "{} is in bounds for no value of it (extent {e}): expected a range of at least \
                     one value, found extent {}",
                    o.leaf.access(),
                    eval_note(&cand, state)
                ),
            });
        }
        best = Some(match best {
            None => cand,
            Some(b) => Expr::min(&b, &cand),
        });
    }
    Ok(best)
}

/// `e`, with its value where the named constants give one: `N-11 (= -7)`.
pub fn eval_note(e: &Expr, state: &State) -> String {
    match (e.as_const(), e.checked_eval(&|x| state.constant(x))) {
        (None, Ok(v)) => format!("{e} (= {v})"),
        _ => e.to_string(),
    }
}

/// Index arithmetic on `leaf` that leaves the 64-bit range.
pub fn overflow(builtin: &str, arg: &Arg, leaf: &TNode) -> Error {
    Error::bad_argument(
        builtin,
        arg.clone(),
        format!("indices and extents of at most {}", crate::ir::expr::INT_MAX),
        format!("an integer overflow computing the range of {}", leaf.access()),
    )
}

fn is_const(x: &Name, state: &State, trees: &[&TNode]) -> bool {
    constants(state, trees).contains(x)
}

/// Checks every access of `trees` against its tensor's extents, for iterators ranging over
/// `[0, ub]` as `ranges` gives them.
pub fn check_bounds(
    trees: &[&TNode],
    ranges: &[(Name, Expr)],
    state: &State,
    builtin: &str,
    arg: &Arg,
) -> Result<()> {
    for o in occurrences(trees) {
        let Some(extent) = o.extent else { continue };
        let Some(terms) = o.index.affine_terms() else {
            continue;
        };
        // min and max of the index over the box [0, ub_v].
        let ovf = |_| overflow(builtin, arg, o.leaf);
        let mut lo = Expr::int(o.index.constant());
        let mut hi = Expr::int(o.index.constant());
        for (v, c) in &terms {
            match ranges.iter().find(|(n, _)| n == v) {
                Some((_, ub)) => {
                    let t = ub.checked_scale(*c).map_err(ovf)?;
                    if *c > 0 {
                        hi = hi.checked_add(&t).map_err(ovf)?;
                    } else {
                        lo = lo.checked_add(&t).map_err(ovf)?;
                    }
                }
                None => {
                    // a named constant
                    let t = Expr::var_name(v).checked_scale(*c).map_err(ovf)?;
                    lo = lo.checked_add(&t).map_err(ovf)?;
                    hi = hi.checked_add(&t).map_err(ovf)?;
                }
            }
        }
        let max_index = extent.checked_add_int(-1).map_err(ovf)?;
        let ok_lo = nonneg(&lo, state);
        let ok_hi = nonneg(&max_index.checked_sub(&hi).map_err(ovf)?, state);
        if ok_lo == Some(true) && ok_hi == Some(true) {
            continue;
        }
        let undecided = ok_lo.is_none() || ok_hi.is_none();
        let found = if undecided {
            format!(
                "indices in {lo}..{hi}, which cannot be compared with the extent until the named constants are bound (-D NAME=INT)"
            )
        } else {
            format!("indices in {lo}..{hi}")
        };
        return Err(Error::OutOfBounds {
            builtin: builtin.into(),
            arg: arg.clone(),
            access: o.leaf.access(),
            extent: extent.to_string(),
            max_index: max_index.to_string(),
            found,
        });
    }
    Ok(())
}
