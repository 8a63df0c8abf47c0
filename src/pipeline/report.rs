//! What one kernel did ([`KernelReport`]), and its summary in words.

use crate::runtime::TimeStats;
use serde::Serialize;
use std::path::PathBuf;

/// What one kernel did.
#[derive(Clone, Debug, Serialize)]
pub struct KernelReport {
    /// The kernel's stable name: the one its `codegen` gives, else its nests' joined by `_`
    /// (the C function is `teml_<name>`).
    pub name: String,
    /// The nests it runs, in order.
    pub nests: Vec<String>,
    /// Where its `codegen` statement is (`file:line:col`), when it has one.
    pub at: Option<String>,
    /// Every written tensor matched the reference within tolerance.
    pub verified: bool,
    /// How verification was done ("full size", or a reduced size), in words.
    pub verification: String,
    /// What checked the kernel, at which size, and what checked the full-size binary.
    pub evidence: super::evidence::Evidence,
    /// Largest absolute difference from the reference.
    pub max_abs_error: f64,
    /// Largest relative difference from the reference.
    pub max_rel_error: f64,
    /// The element that differs most, when verification failed.
    pub worst: Option<String>,
    /// Kernel timing.
    pub time: Option<TimeStats>,
    /// Median time in seconds (from `time`).
    pub median_s: Option<f64>,
    /// Floating-point operations of one run (from the trees).
    pub flops: u64,
    /// GFLOP/s at the median time.
    pub gflops: Option<f64>,
    /// Timing of the untransformed build of the same statements, same flags, same run.
    pub baseline: Option<TimeStats>,
    /// Baseline median over kernel median.
    pub speedup: Option<f64>,
    /// The generated C source (in the cache).
    pub c_path: PathBuf,
    /// The shared object was already in the cache.
    pub cached: bool,
}

impl KernelReport {
    /// A short human-readable summary.
    pub fn summary(&self) -> String {
        let nests = if self.name == self.nests.join("_") {
            String::new()
        } else {
            format!(" ({})", self.nests.join(", "))
        };
        let mut s = format!(
            "kernel {}{nests}{}: {} (max rel error {:.2e}, {})",
            self.name,
            self.at.as_ref().map_or(String::new(), |a| format!(" at {a}")),
            match (self.verified, &self.worst) {
                (true, _) => "verified",
                (false, Some(_)) => "MISMATCH",
                (false, None) => "NOT VERIFIED",
            },
            self.max_rel_error,
            self.verification
        );
        if let Some(w) = &self.worst {
            s.push_str(&format!("\n  first mismatch: {w}"));
        }
        if let Some(t) = &self.time {
            s.push_str(&format!(
                "\n  time: median {:.3} ms, min {:.3} ms, spread {:.1}% over {} runs",
                t.median_s * 1e3,
                t.min_s * 1e3,
                t.spread() * 100.0,
                t.reps
            ));
            if let Some(g) = self.gflops {
                s.push_str(&format!(", {g:.2} GFLOP/s"));
            }
        }
        if let (Some(b), Some(x)) = (&self.baseline, self.speedup) {
            s.push_str(&format!("\n  untransformed: median {:.3} ms; speedup {x:.2}x", b.median_s * 1e3));
        }
        s
    }
}
