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
        // 2^-8 and 2^-11 are a 16-bit float's own rounding: a few of them.
        DType::Bf16 => 4e-2,
        DType::F16 => 5e-3,
        // Integer results are exact.
        DType::I32 | DType::I8 | DType::U8 => 0.0,
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
    let floor = floor_of(want.iter().copied(), magnitude);
    for (k, (g, &w)) in got.into_iter().zip(want).enumerate() {
        let g = *g.borrow();
        let (abs, rel) = difference(g, w, floor);
        acc.record(abs, rel, rel > tol || rel.is_nan(), || {
            format!("{name}{}: kernel {g}, reference {w}", at(k, dims))
        });
    }
}

/// The floor of relative differences: a thousandth of the largest reference value, or the
/// data's magnitude, whichever is larger (an element near 0 is compared against it).
fn floor_of(want: impl Iterator<Item = f64>, magnitude: f64) -> f64 {
    let scale = want.fold(0.0f64, |m, x| m.max(x.abs())).max(f64::MIN_POSITIVE);
    (1e-3 * scale).max(magnitude)
}

/// One element's difference from the reference, absolute and relative to `floor` (or to the
/// reference value where that is larger): both 0 where the two agree exactly, equal infinities
/// and two NaNs included.
fn difference(g: f64, w: f64, floor: f64) -> (f64, f64) {
    if g == w || (g.is_nan() && w.is_nan()) {
        return (0.0, 0.0);
    }
    let abs = (g - w).abs();
    (abs, abs / w.abs().max(floor))
}

/// `[i][j]` of the element at row-major offset `k` in `dims`.
fn at(k: usize, dims: &[usize]) -> String {
    unravel(k, dims).iter().map(|i| format!("[{i}]")).collect()
}

impl Comparison {
    /// Records one element's differences; the first element outside tolerance (`bad`) is
    /// described by `what`.
    fn record(&mut self, abs: f64, rel: f64, bad: bool, what: impl FnOnce() -> String) {
        self.max_abs = self.max_abs.max(if abs.is_nan() { f64::INFINITY } else { abs });
        self.max_rel = self.max_rel.max(if rel.is_nan() { f64::INFINITY } else { rel });
        if bad && self.worst.is_none() {
            self.worst = Some(what());
        }
    }
}

/// The unit roundoff of `dtype` (half its machine epsilon).
pub fn unit_roundoff(dtype: DType) -> f64 {
    dtype.unit_roundoff()
}

/// For each tensor of `names` that the untransformed `nests` write, each element's rounding
/// bound: `2 γ_(n+1) M`, M the element computed with absolute values (Σ|terms|), n its count of
/// roundings along its longest chain ([`interp::Arith`]), γ of the unit roundoff of `dtype`;
/// the kernel and the reference may each err by `γ_(n+1) M` in any order of their sums (Higham,
/// *Accuracy and Stability of Numerical Algorithms*, Sec. 3.1), the one more rounding being the
/// store. Infinite where no such bound holds (a division, a comparison, a function). Computed
/// from `initial` (the data the kernel starts from), which is left as it is.
pub(super) fn rounding_bounds(
    state: &State,
    nests: &[crate::ir::Nest],
    initial: &Buffers,
    names: &[crate::ir::Name],
    dtype: DType,
) -> Result<std::collections::BTreeMap<crate::ir::Name, Vec<f64>>, RunError> {
    use crate::interp::Arith;
    let mut mag = initial.clone();
    mag.values_mut().for_each(|t| t.data.iter_mut().for_each(|x| *x = x.abs()));
    crate::interp::run_with(state, nests, &mut mag, Arith::Magnitude).map_err(RunError::Data)?;
    let mut out: std::collections::BTreeMap<_, _> =
        names.iter().filter_map(|n| mag.remove(n).map(|t| (n.clone(), t.data))).collect();
    drop(mag);
    let mut count: Buffers = initial
        .iter()
        .map(|(n, t)| (n.clone(), crate::interp::Tensor::zeros(t.dtype, t.dims.clone())))
        .collect();
    crate::interp::run_with(state, nests, &mut count, Arith::Roundings).map_err(RunError::Data)?;
    let u = unit_roundoff(dtype);
    for (name, m) in out.iter_mut() {
        let Some(c) = count.get(name) else { continue };
        for (b, n) in m.iter_mut().zip(&c.data) {
            let nu = (n + 1.0) * u;
            let gamma = if nu < 0.5 { nu / (1.0 - nu) } else { f64::INFINITY };
            *b *= 2.0 * gamma;
            if b.is_nan() {
                *b = f64::INFINITY;
            }
        }
    }
    Ok(out)
}

/// [`compare_within`] where each element has its own rounding bound `bounds[k]`
/// ([`rounding_bounds`]): an element agrees when it differs by at most its bound; an element
/// with no finite bound, by the relative tolerance `tol` as [`compare_within`] measures it; a
/// rewritten result (`rewritten`: `lift`, `factor`, `expand`, whose kernel computes another
/// association than the reference) by either. Returns how many elements each rule decided
/// (rounding bound, relative tolerance).
pub fn compare_bounded(
    name: &str,
    dims: &[usize],
    got: &[f64],
    want: &[f64],
    bounds: &[f64],
    (tol, magnitude, rewritten): (f64, f64, bool),
    acc: &mut Comparison,
) -> (usize, usize) {
    let floor = floor_of(want.iter().copied(), magnitude);
    let (mut by_bound, mut by_tol) = (0usize, 0usize);
    for (k, ((&g, &w), &b)) in got.iter().zip(want).zip(bounds).enumerate() {
        let (abs, rel) = difference(g, w, floor);
        let relative_ok = rel <= tol;
        let same_nan = g.is_nan() && w.is_nan();
        let ok = same_nan
            || if b.is_finite() {
                by_bound += 1;
                abs <= b || (rewritten && relative_ok)
            } else {
                by_tol += 1;
                relative_ok
            };
        acc.record(abs, rel, !ok, || {
            let within = if b.is_finite() {
                format!("its rounding bound {b:.2e}")
            } else {
                format!("{tol:.0e} relative")
            };
            format!(
                "{name}{}: kernel {g}, reference {w}, differing by {abs:.2e}, more than {within}",
                at(k, dims)
            )
        });
    }
    (by_bound, by_tol)
}

/// The report's words for which tolerance decided the comparison of each tensor.
pub fn tolerance_note(used: &[(crate::ir::Name, (usize, usize))], dtype: DType) -> Option<String> {
    let bounded: Vec<String> =
        used.iter().filter(|(_, (b, t))| *b > 0 && *t == 0).map(|(n, _)| n.to_string()).collect();
    let relative: Vec<String> =
        used.iter().filter(|(_, (_, t))| *t > 0).map(|(n, _)| n.to_string()).collect();
    let mut parts = Vec::new();
    if dtype.is_integer() {
        let all: Vec<String> = used.iter().map(|(n, _)| n.to_string()).collect();
        return (!all.is_empty()).then(|| format!("; compared {} exactly (integers)", all.join(", ")));
    }
    if !bounded.is_empty() {
        parts.push(format!(
            "{} within each element's rounding bound (2 γ_n Σ|terms|, {dtype})",
            bounded.join(", ")
        ));
    }
    if !relative.is_empty() {
        parts.push(format!(
            "{} within {:.0e} relative where a division, comparison or function bounds no rounding error",
            relative.join(", "),
            tolerance(dtype)
        ));
    }
    (!parts.is_empty()).then(|| format!("; compared {}", parts.join("; ")))
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
    let floor = floor_of(pairs.iter().map(|(_, _, w)| *w), magnitude);
    for &(k, g, w) in pairs {
        let (abs, rel) = difference(g, w, floor);
        acc.record(abs, rel, rel > tol || rel.is_nan(), || {
            format!("{name}{}: kernel {g}, expression oracle {w}", at(k, dims))
        });
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
