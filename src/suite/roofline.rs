//! The physical limit: small probes of this machine's peak double-precision FMA rate and its
//! memory bandwidth (the STREAM triad), compiled with the same compiler and flags as the
//! kernels and run through the same worker; and each kernel's roofline bound,
//! `max(flops / peak, bytes / bandwidth)`, with `bytes` the compulsory traffic (every tensor
//! the kernel touches moved once).

use crate::pipeline::{self, RunOptions, Timing};
use serde::Serialize;

/// Independent FMA chains in vector registers on every thread: 8 chains of 8 lanes. The
/// multiplier and addend come from memory (with constants, gcc collapses the loop).
const FMA: &str = r#"
/* teml bench: peak double-precision FMA rate. */
void teml_entry(void **args)
{
  double *io = (double *)args[0];
  long n = (long)io[0];
  double total = 0.0;
  #pragma omp parallel reduction(+: total)
  {
    double acc[8][8];
    for (int c = 0; c < 8; c++)
      for (int l = 0; l < 8; l++)
        acc[c][l] = 1.0 + 1e-9 * (c * 8 + l);
    /* from memory: constants let the compiler collapse the chains */
    const double x = io[2], y = io[3];
    for (long i = 0; i < n; i++)
      for (int c = 0; c < 8; c++)
        #pragma omp simd
        for (int l = 0; l < 8; l++)
          acc[c][l] = acc[c][l] * x + y;
    for (int c = 0; c < 8; c++)
      for (int l = 0; l < 8; l++)
        total += acc[c][l];
  }
  io[1] = total;
}
"#;

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
    let timing = if quick {
        Timing { warmup: 1, min_time_s: 0.0, min_reps: 1, max_reps: 1 }
    } else {
        Timing { warmup: 1, min_time_s: 0.3, min_reps: 5, max_reps: 100 }
    };
    let opts = RunOptions { threads: Some(threads), timing: Some(timing), ..opts.clone() };
    let iters: u64 = if quick { 200_000 } else { 4_000_000 };
    let io: Vec<u8> =
        [iters as f64, 0.0, 1.000_000_000_1, -1e-10].iter().flat_map(|x| x.to_ne_bytes()).collect();
    let (_, t) = pipeline::run_source(FMA, &[io], &opts).map_err(|e| e.to_string())?;
    let t = t.ok_or("the FMA probe was not timed")?;
    let flops = threads as f64 * iters as f64 * 64.0 * 2.0;
    let n: usize = if quick { 1 << 20 } else { 1 << 23 };
    let arr = |v: f64| -> Vec<u8> { std::iter::repeat_n(v.to_ne_bytes(), n).flatten().collect() };
    let len: Vec<u8> = (n as f64).to_ne_bytes().to_vec();
    let (_, s) = pipeline::run_source(TRIAD, &[arr(0.0), arr(1.0), arr(2.0), len], &opts)
        .map_err(|e| e.to_string())?;
    let s = s.ok_or("the triad probe was not timed")?;
    Ok(Machine {
        threads,
        peak_gflops: flops / t.median_s / 1e9,
        bandwidth_gbs: 24.0 * n as f64 / s.median_s / 1e9,
    })
}

/// The roofline bound of a run of `flops` operations touching `bytes`, in seconds.
pub fn bound_s(m: &Machine, flops: u64, bytes: u64) -> f64 {
    (flops as f64 / (m.peak_gflops * 1e9)).max(bytes as f64 / (m.bandwidth_gbs * 1e9))
}
