//! The refusal, before anything is allocated, of a run that would not fit in memory: a clear
//! message instead of the out-of-memory killer.

use super::options::{RunError, RunOptions};
use crate::interp;
use crate::ir::{Nest, State};

/// Memory a run takes per byte of its tensors (held as 8-byte elements): the initial data
/// (which becomes the reference), the shared mapping (twice while timing), the worker's copy
/// in huge pages (where memory allows: `runtime::worker`) and the outputs.
fn memory_factor(opts: &RunOptions) -> f64 {
    if opts.timing.is_some() { 5.0 } else { 4.0 }
}

/// Refuses, before anything is allocated, a kernel whose run would not fit in the memory
/// available: a clear message instead of the out-of-memory killer.
pub(super) fn check_memory(state: &State, nests: &[Nest], opts: &RunOptions) -> Result<(), RunError> {
    // Shapes only: no data is allocated here.
    let shapes = interp::buffers_for(state, nests, &mut |_, _, _| Vec::new()).map_err(RunError::Data)?;
    let data: f64 = shapes.values().map(|t| t.dims.iter().map(|&d| d as f64).product::<f64>() * 8.0).sum();
    let need = data * memory_factor(opts);
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
