//! The physical limit: small probes of this machine's peak double-precision FMA rate and its
//! memory bandwidth (the STREAM triad), compiled with the same compiler and flags as the
//! kernels and run through the same worker; and each kernel's roofline bound,
//! `max(flops / peak, bytes / bandwidth)`, with `bytes` the compulsory traffic (every tensor
//! the kernel touches moved once).

use crate::pipeline::{self, RunOptions, Timing};
use serde::Serialize;

/// Independent FMA chains in explicit vector registers on every thread (GCC/Clang vector
/// extensions of the target's widest vectors), as many as its register file holds beside the
/// multiplier and the addend: 16 chains of 8 lanes in 32 AVX-512 registers, 12 of 4 lanes in 16
/// AVX registers (16 chains of 8 there would be 32 registers' worth, and the spills measured a
/// sixth of the peak), 12 of 2 otherwise. Enough to cover the FMA latency of two pipes. Written
/// out, not left to the loop vectorizer; the multiplier and addend come from memory (with
/// constants, the compiler collapses the chains). The probe writes its FMAs per iteration and
/// thread to `io[4]`.
const FMA: &str = r#"
/* teml bench: peak double-precision FMA rate. */
#if defined(__AVX512F__)
#define LANES 8
#define CHAINS 16
#elif defined(__AVX__)
#define LANES 4
#define CHAINS 12
#else
#define LANES 2
#define CHAINS 12
#endif
typedef double vd __attribute__((vector_size(8 * LANES)));
#define STEP(a) a = a * x + y
#if CHAINS == 16
#define STEPS STEP(a0); STEP(a1); STEP(a2); STEP(a3); STEP(a4); STEP(a5); STEP(a6); STEP(a7); \
  STEP(a8); STEP(a9); STEP(a10); STEP(a11); STEP(a12); STEP(a13); STEP(a14); STEP(a15)
#else
#define STEPS STEP(a0); STEP(a1); STEP(a2); STEP(a3); STEP(a4); STEP(a5); STEP(a6); STEP(a7); \
  STEP(a8); STEP(a9); STEP(a10); STEP(a11)
#endif
void teml_entry(void **args)
{
  double *io = (double *)args[0];
  long n = (long)io[0];
  double total = 0.0;
  #pragma omp parallel reduction(+: total)
  {
    const vd zero = {0};
    const vd x = zero + io[2], y = zero + io[3];
    vd a0 = zero;
    for (int l = 0; l < LANES; l++)
      a0[l] = 1.0 + 1e-9 * l;
    vd a1 = a0 + 1e-8, a2 = a0 + 2e-8, a3 = a0 + 3e-8;
    vd a4 = a0 + 4e-8, a5 = a0 + 5e-8, a6 = a0 + 6e-8, a7 = a0 + 7e-8;
    vd a8 = a0 + 8e-8, a9 = a0 + 9e-8, a10 = a0 + 1e-7, a11 = a0 + 1.1e-7;
#if CHAINS == 16
    vd a12 = a0 + 1.2e-7, a13 = a0 + 1.3e-7, a14 = a0 + 1.4e-7, a15 = a0 + 1.5e-7;
#endif
    for (long i = 0; i < n; i++) {
      STEPS;
    }
    vd s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
#if CHAINS == 16
    s += a12 + a13 + a14 + a15;
#endif
    for (int l = 0; l < LANES; l++)
      total += s[l];
  }
  io[1] = total;
  io[4] = CHAINS * LANES;
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
        [iters as f64, 0.0, 1.000_000_000_1, -1e-10, 0.0].iter().flat_map(|x| x.to_ne_bytes()).collect();
    let (out, t) = pipeline::run_source(FMA, &[io], &opts).map_err(|e| e.to_string())?;
    let t = t.ok_or("the FMA probe was not timed")?;
    let per_iter = out
        .first()
        .and_then(|b| b.get(32..40))
        .map(|b| f64::from_ne_bytes(b.try_into().expect("8 bytes")))
        .filter(|&v| v > 0.0)
        .ok_or("the FMA probe did not report its FMAs per iteration")?;
    let flops = threads as f64 * iters as f64 * per_iter * 2.0;
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
