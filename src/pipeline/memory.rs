//! The refusal, before anything is allocated, of a run that would not fit in memory: a clear
//! message instead of the out-of-memory killer.

use super::options::{RunError, RunOptions};
use crate::interp;
use crate::ir::{Nest, State};

/// Memory a run takes per byte of its tensors (held as 8-byte elements), at most: the initial
/// data (which becomes the reference), the shared mapping (with the snapshots of the buffers
/// timed runs restore), the worker's copy in huge pages (where memory allows:
/// `runtime::worker`, which gives back the shared pages buffer by buffer) and the outputs.
/// Measured peaks are 2.2-2.6x (bench/RESULTS.md, "Where tensors live"): the factor is a bound.
fn memory_factor(opts: &RunOptions) -> f64 {
    if opts.timing.is_some() { 5.0 } else { 4.0 }
}

/// Refuses, before anything is allocated, a kernel whose run would not fit in the memory
/// available: a clear message instead of the out-of-memory killer.
pub(super) fn check_memory(state: &State, nests: &[Nest], opts: &RunOptions) -> Result<(), RunError> {
    // Shapes only: no data is allocated here.
    let shapes = interp::buffers_for(state, nests, &mut |_, _, _| Vec::new()).map_err(RunError::Data)?;
    let data: f64 = shapes.values().map(|t| t.dims.iter().map(|&d| d as f64).product::<f64>() * 8.0).sum();
    // A tensor in another layout (padded, regrouped) has a second buffer in the kernel.
    let mut laid: std::collections::BTreeMap<&crate::ir::Name, f64> = Default::default();
    for n in nests {
        for (t, lay) in &n.layouts {
            let Some(dims) = state.real_tensor(t).and_then(|x| {
                x.shape.dims().map(|ds| {
                    ds.iter()
                        .filter_map(|d| match d {
                            crate::ir::Dim::Known(e) => Some(e.clone()),
                            crate::ir::Dim::Unknown => None,
                        })
                        .collect::<Vec<_>>()
                })
            }) else {
                continue;
            };
            let bytes: f64 = lay
                .extents(&dims)
                .iter()
                .map(|e| e.eval(&|v| state.constant(v)).unwrap_or(0).max(0) as f64)
                .product::<f64>()
                * 8.0;
            laid.insert(t, bytes);
        }
    }
    let need = data * memory_factor(opts) + laid.values().sum::<f64>();
    match crate::runtime::host::available_memory().map(|a| a as f64) {
        Some(avail) if need > avail => Err(RunError::Data(format!(
            "expected a run that fits in memory, found one that needs about {:.1} GB (its tensors hold {:.1} GB; \
             verifying{} takes about {:.0}x that) where {:.1} GB are available: give smaller -D constants",
            need / 1e9,
            data / 1e9,
            if opts.timing.is_some() { " and timing" } else { "" },
            memory_factor(opts),
            avail / 1e9
        ))),
        _ => Ok(()),
    }
}
