//! Comparing a kernel's outputs with the reference: tolerances by element type, scaled by the
//! data's magnitude, and the full-size spot check against the expression oracle at sampled
//! elements.

use super::data::splitmix;
use super::options::RunError;
use crate::codegen::CKernel;
use crate::interp::Buffers;
use crate::ir::{DType, State};

/// Differences between a kernel's output and the reference.
#[derive(Clone, Debug, Default)]
pub struct Comparison {
    /// Largest absolute difference.
    pub max_abs: f64,
    /// Largest relative difference.
    pub max_rel: f64,
    /// The worst element, when outside tolerance.
    pub worst: Option<String>,
}

/// Relative tolerance of a comparison: reassociated sums (vectorized, unrolled, tiled, fused
/// multiply-add) differ from the reference in the last bits.
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::Double => 1e-9,
        DType::Float => 1e-3,
    }
}

/// Compares `got` with `want` element-wise: |got - want| <= tol * max(|want|, 1e-3 * max|want|).
pub fn compare(
    name: &str,
    dims: &[usize],
    got: impl IntoIterator<Item = impl std::borrow::Borrow<f64>>,
    want: &[f64],
    tol: f64,
    acc: &mut Comparison,
) {
    compare_within(name, dims, got, want, tol, 0.0, acc)
}

/// [`compare`] where values computed from data of magnitude `magnitude` (the largest initial
/// value of the kernel's tensors) may also differ by `tol * magnitude`: with fused
/// multiply-add, `a/b*b - a` leaves rounding residue (1e-33) where the reference has an exact
/// 0, and no relative measure can tell that from an error.
pub fn compare_within(
    name: &str,
    dims: &[usize],
    got: impl IntoIterator<Item = impl std::borrow::Borrow<f64>>,
    want: &[f64],
    tol: f64,
    magnitude: f64,
    acc: &mut Comparison,
) {
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(f64::MIN_POSITIVE);
    let floor = (1e-3 * scale).max(magnitude);
    for (k, (g, w)) in got.into_iter().zip(want).enumerate() {
        let g = *g.borrow();
        let same_nan = g.is_nan() && w.is_nan();
        let abs = if same_nan { 0.0 } else { (g - w).abs() };
        let rel = abs / w.abs().max(floor);
        let bad = !same_nan && (rel > tol || abs.is_nan());
        acc.max_abs = acc.max_abs.max(if abs.is_nan() { f64::INFINITY } else { abs });
        acc.max_rel = acc.max_rel.max(if rel.is_nan() { f64::INFINITY } else { rel });
        if bad && acc.worst.is_none() {
            let mut idx = Vec::with_capacity(dims.len());
            let mut r = k;
            for d in dims.iter().rev() {
                idx.push(r % d.max(&1));
                r /= d.max(&1);
            }
            idx.reverse();
            let at: String = idx.iter().map(|i| format!("[{i}]")).collect();
            acc.worst = Some(format!("{name}{at}: kernel {g}, reference {w}"));
        }
    }
}

/// The largest absolute initial value of the tensors in `store` (finite ones).
pub fn magnitude(store: &Buffers) -> f64 {
    store.values().flat_map(|t| t.data.iter()).filter(|x| x.is_finite()).fold(0.0f64, |m, x| m.max(x.abs()))
}

/// Elements of each written tensor the full-size spot check samples.
pub const SPOT_SAMPLES: usize = 24;

/// Leaf reads the expression oracle may spend on one kernel's spot check.
pub const SPOT_BUDGET: u64 = 50_000_000;

/// What the spot check compared: elements over all written tensors, and why it stopped short
/// of checking every one of them, if it did.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Spot {
    /// Elements compared, over all written tensors.
    pub checked: usize,
    /// Why some written tensor has no compared element (the oracle refused the program, or
    /// its budget was spent first); `None` when every written tensor was sampled.
    pub short: Option<String>,
}

/// Checks the full-size kernel's outputs at sampled elements (the first, the last, and seeded
/// random ones) against the expression oracle computing those elements from the same initial
/// data, so that the binary that is timed is a binary that was checked. Says what was checked.
#[allow(clippy::too_many_arguments)]
pub(super) fn spot_check(
    state: &State,
    stmts: &[crate::ir::TExpr],
    kernel: &CKernel,
    initial: &Buffers,
    outputs: &Buffers,
    (tol, magnitude): (f64, &dyn Fn(&crate::ir::Name) -> f64),
    skip: &[crate::ir::Name],
    cmp: &mut Comparison,
) -> Result<Spot, RunError> {
    let mut spot = crate::oracle::Spot::new(state, stmts, initial, SPOT_BUDGET);
    let mut out = Spot::default();
    let mut seed = 0x5EED_u64;
    'tensors: for p in kernel.params.iter().filter(|p| p.written && !skip.contains(&p.name)) {
        let Some(got) = outputs.get(&p.name) else { continue };
        let n = got.data.len();
        if n == 0 {
            continue;
        }
        let mut picks: Vec<usize> = vec![0, n - 1];
        picks.extend((0..SPOT_SAMPLES.saturating_sub(2)).map(|_| (splitmix(&mut seed) % n as u64) as usize));
        picks.sort_unstable();
        picks.dedup();
        let mut pairs = Vec::new();
        for &k in &picks {
            let idx = unravel(k, &got.dims);
            match spot.element(&p.name, &idx) {
                Ok(w) => pairs.push((k, got.data[k], w)),
                Err(crate::oracle::OracleError::Budget(b)) => {
                    compare_sampled(&p.name, &got.dims, &pairs, tol, magnitude(&p.name), cmp);
                    out.checked += pairs.len();
                    out.short = Some(format!("the expression oracle's budget of {b} reads was spent"));
                    break 'tensors;
                }
                Err(crate::oracle::OracleError::Unsupported(why)) => {
                    out.short = Some(format!("the expression oracle {why}"));
                    break 'tensors;
                }
                Err(e) => return Err(RunError::Data(format!("spot check of {}: {e}", p.name))),
            }
        }
        compare_sampled(&p.name, &got.dims, &pairs, tol, magnitude(&p.name), cmp);
        out.checked += pairs.len();
    }
    Ok(out)
}

fn unravel(mut k: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for (d, n) in dims.iter().enumerate().rev() {
        idx[d] = k % n.max(&1);
        k /= n.max(&1);
    }
    idx
}

/// [`compare`] on sampled elements `(linear index, kernel, reference)`, scaled by the largest
/// sampled reference value.
fn compare_sampled(
    name: &str,
    dims: &[usize],
    pairs: &[(usize, f64, f64)],
    tol: f64,
    magnitude: f64,
    acc: &mut Comparison,
) {
    let scale = pairs.iter().fold(0.0f64, |m, (_, _, w)| m.max(w.abs())).max(f64::MIN_POSITIVE);
    let floor = (1e-3 * scale).max(magnitude);
    for &(k, g, w) in pairs {
        let same_nan = g.is_nan() && w.is_nan();
        let abs = if same_nan { 0.0 } else { (g - w).abs() };
        let rel = abs / w.abs().max(floor);
        acc.max_abs = acc.max_abs.max(if abs.is_nan() { f64::INFINITY } else { abs });
        acc.max_rel = acc.max_rel.max(if rel.is_nan() { f64::INFINITY } else { rel });
        if !same_nan && (rel > tol || abs.is_nan()) && acc.worst.is_none() {
            let at: String = unravel(k, dims).iter().map(|i| format!("[{i}]")).collect();
            acc.worst = Some(format!("{name}{at}: kernel {g}, expression oracle {w}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unravel_is_row_major() {
        assert_eq!(unravel(7, &[3, 4]), vec![1, 3]);
    }
}
