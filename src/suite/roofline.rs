//! The physical limit: small probes of this machine's peak double-precision FMA rate and its
//! memory bandwidth (the STREAM triad), compiled with the same compiler and flags as the
//! kernels and run through the same worker; and each kernel's roofline bound,
//! `max(flops / peak, bytes / bandwidth)`, with `bytes` the compulsory traffic (every tensor
//! the kernel touches moved once).

use crate::pipeline::{self, RunOptions};
use serde::Serialize;

/// The STREAM triad `a = b + s*c`.
const TRIAD: &str = r#"
/* teml bench: memory bandwidth (STREAM triad). */
void teml_entry(void **args)
{
  double *restrict a = (double *)args[0];
  const double *restrict b = (const double *)args[1];
  const double *restrict c = (const double *)args[2];
  long n = (long)((double *)args[3])[0];
  #pragma omp parallel for simd
  for (long i = 0; i < n; i++)
    a[i] = b[i] + 3.0 * c[i];
}
"#;

/// What the probes measured.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Machine {
    /// Threads the probes ran on.
    pub threads: usize,
    /// Peak double-precision GFLOP/s (FMA counted as 2).
    pub peak_gflops: f64,
    /// STREAM triad bandwidth, GB/s (24 bytes per element: two reads, one write).
    pub bandwidth_gbs: f64,
}

/// Runs both probes on `threads` threads.
pub fn probe(opts: &RunOptions, threads: usize, quick: bool) -> Result<Machine, String> {
    let opts = super::instructions::options(opts, threads, quick);
    let iters: u64 = if quick { 200_000 } else { 4_000_000 };
    // The double FMA probe of the instruction probes: 16 chains of AVX-512 vectors, 12 of AVX's.
    let (per_iter, median_s) =
        super::instructions::run_source(&super::instructions::fma_source("double"), iters, &opts)?;
    if per_iter <= 0.0 {
        return Err("the FMA probe did not report its FMAs per iteration".into());
    }
    let flops = threads as f64 * iters as f64 * per_iter * 2.0;
    let n: usize = if quick { 1 << 20 } else { 1 << 23 };
    let arr = |v: f64| -> Vec<u8> { std::iter::repeat_n(v.to_ne_bytes(), n).flatten().collect() };
    let len: Vec<u8> = (n as f64).to_ne_bytes().to_vec();
    let (_, s) = pipeline::run_source(TRIAD, &[arr(0.0), arr(1.0), arr(2.0), len], &opts)
        .map_err(|e| e.to_string())?;
    let s = s.ok_or("the triad probe was not timed")?;
    Ok(Machine {
        threads,
        peak_gflops: flops / median_s / 1e9,
        bandwidth_gbs: 24.0 * n as f64 / s.median_s / 1e9,
    })
}

/// The roofline bound of a run of `flops` operations touching `bytes`, in seconds.
pub fn bound_s(m: &Machine, flops: u64, bytes: u64) -> f64 {
    (flops as f64 / (m.peak_gflops * 1e9)).max(bytes as f64 / (m.bandwidth_gbs * 1e9))
}
