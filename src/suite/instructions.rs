//! The peak of each arithmetic instruction a precision runs on: small probes, one per
//! instruction (float and double FMA, AVX512-BF16's `vdpbf16ps`, AVX512-VNNI's `vpdpbusd`, AMX's
//! `tdpbf16ps` and `tdpbusd`), compiled with the kernels' compiler and flags and run through the
//! same worker as [`super::roofline`]'s. A probe runs only where the host's flags list its
//! instruction and the compiler targets it (`-march=native` defines `__AVX512BF16__`, ...):
//! elsewhere it is reported absent, with what the host lacks, and never executed (no illegal
//! instruction). Each probe keeps as many independent accumulators as the register file holds
//! (tiles for AMX: four accumulator tiles fed by two row and two column tiles), so that the
//! instruction's throughput, not its latency, is what it measures; the values stay normal
//! (no denormal or overflow slows a lane).

use crate::pipeline::{self, RunOptions, Timing};
use crate::runtime::machine::Machine as Host;
use serde::Serialize;

/// The probe's arguments (`io`, doubles): `io[0]` iterations, `io[1]` the sum the probe leaves
/// (so that nothing is optimized away), `io[2]` and `io[3]` the multiplicands, `io[4]` what the
/// probe writes back: its multiply-adds per iteration and thread (0: not compiled for its
/// instruction; -1: the Linux kernel refused the tile state).
const IO: usize = 5;

/// The FMA probe of a floating-point type `ty` (`float`, `double`): 16 chains of the widest
/// vectors in 32 AVX-512 registers, 12 in 16 AVX registers (16 there spill: a sixth of the
/// peak measured), 12 otherwise; GCC/Clang vector extensions, the multiplicands from memory.
pub fn fma_source(ty: &str) -> String {
    FMA.replace("TYPE", ty)
}

const FMA: &str = r#"
/* teml bench: peak TYPE FMA rate. */
#if defined(__AVX512F__)
#define VBYTES 64
#define CHAINS 16
#elif defined(__AVX__)
#define VBYTES 32
#define CHAINS 12
#else
#define VBYTES 16
#define CHAINS 12
#endif
#define LANES (VBYTES / (int)sizeof(TYPE))
typedef TYPE vd __attribute__((vector_size(VBYTES)));
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
    const vd x = zero + (TYPE)io[2], y = zero + (TYPE)io[3];
    vd a0 = zero;
    for (int l = 0; l < LANES; l++)
      a0[l] = 1 + (TYPE)1e-9 * l;
    vd a1 = a0 + (TYPE)1e-8, a2 = a0 + (TYPE)2e-8, a3 = a0 + (TYPE)3e-8;
    vd a4 = a0 + (TYPE)4e-8, a5 = a0 + (TYPE)5e-8, a6 = a0 + (TYPE)6e-8, a7 = a0 + (TYPE)7e-8;
    vd a8 = a0 + (TYPE)8e-8, a9 = a0 + (TYPE)9e-8, a10 = a0 + (TYPE)1e-7, a11 = a0 + (TYPE)1.1e-7;
#if CHAINS == 16
    vd a12 = a0 + (TYPE)1.2e-7, a13 = a0 + (TYPE)1.3e-7, a14 = a0 + (TYPE)1.4e-7, a15 = a0 + (TYPE)1.5e-7;
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

/// AVX512-BF16's `vdpbf16ps`: 16 float lanes, each adding the products of a pair of bf16s.
const DPBF16: &str = r#"
/* teml bench: peak rate of vdpbf16ps (AVX512-BF16: bf16 pairs into float lanes). */
#include <immintrin.h>
#include <string.h>
void teml_entry(void **args)
{
  double *io = (double *)args[0];
  long n = (long)io[0];
  double total = 0.0;
  io[4] = 0.0;
#if defined(__AVX512BF16__)
  #pragma omp parallel reduction(+: total)
  {
    /* The multiplicands as bf16 pairs: the high halves of their floats. */
    float xf = (float)io[2], yf = (float)io[3];
    unsigned xb, yb;
    memcpy(&xb, &xf, 4);
    memcpy(&yb, &yf, 4);
    xb >>= 16;
    yb >>= 16;
    __m512i xi = _mm512_set1_epi32((int)(xb | xb << 16)), yi = _mm512_set1_epi32((int)(yb | yb << 16));
    __m512bh x, y;
    memcpy(&x, &xi, sizeof x);
    memcpy(&y, &yi, sizeof y);
    __m512 a[16];
    for (int k = 0; k < 16; k++)
      a[k] = _mm512_set1_ps(1.0f + 1e-3f * k);
    for (long i = 0; i < n; i++) {
      #pragma GCC unroll 16
      for (int k = 0; k < 16; k++)
        a[k] = _mm512_dpbf16_ps(a[k], x, y);
    }
    __m512 s = a[0];
    for (int k = 1; k < 16; k++)
      s = _mm512_add_ps(s, a[k]);
    total += _mm512_reduce_add_ps(s);
  }
  io[4] = 16.0 * 16 * 2; /* accumulators x lanes x products a lane */
#endif
  io[1] = total;
}
"#;

/// AVX512-VNNI's `vpdpbusd` (or AVX-VNNI's 256-bit form): i32 lanes, each adding the products
/// of four u8 x i8 pairs.
const DPBUSD: &str = r#"
/* teml bench: peak rate of vpdpbusd (VNNI: u8 x i8 quads into i32 lanes). */
#include <immintrin.h>
void teml_entry(void **args)
{
  double *io = (double *)args[0];
  long n = (long)io[0];
  double total = 0.0;
  io[4] = 0.0;
#if defined(__AVX512VNNI__)
  #pragma omp parallel reduction(+: total)
  {
    __m512i x = _mm512_set1_epi8((char)(int)io[2]), y = _mm512_set1_epi8((char)(int)(io[2] + 1.0));
    __m512i a[16];
    for (int k = 0; k < 16; k++)
      a[k] = _mm512_set1_epi32(k);
    for (long i = 0; i < n; i++) {
      #pragma GCC unroll 16
      for (int k = 0; k < 16; k++)
        a[k] = _mm512_dpbusd_epi32(a[k], x, y);
    }
    __m512i s = a[0];
    for (int k = 1; k < 16; k++)
      s = _mm512_add_epi32(s, a[k]);
    total += (double)_mm512_reduce_add_epi32(s);
  }
  io[4] = 16.0 * 16 * 4; /* accumulators x lanes x products a lane */
#elif defined(__AVXVNNI__)
  #pragma omp parallel reduction(+: total)
  {
    __m256i x = _mm256_set1_epi8((char)(int)io[2]), y = _mm256_set1_epi8((char)(int)(io[2] + 1.0));
    __m256i a[12];
    for (int k = 0; k < 12; k++)
      a[k] = _mm256_set1_epi32(k);
    for (long i = 0; i < n; i++) {
      #pragma GCC unroll 12
      for (int k = 0; k < 12; k++)
        a[k] = _mm256_dpbusd_avx_epi32(a[k], x, y);
    }
    int l[8];
    for (int k = 1; k < 12; k++)
      a[0] = _mm256_add_epi32(a[0], a[k]);
    _mm256_storeu_si256((__m256i *)l, a[0]);
    for (int k = 0; k < 8; k++)
      total += l[k];
  }
  io[4] = 12.0 * 8 * 4;
#endif
  io[1] = total;
}
"#;

/// AMX: `tdpbf16ps` or `tdpbusd` (the source's `OP`), after asking the Linux kernel for the
/// tile state (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`). Eight tiles of 16 rows
/// of 64 bytes: four accumulators (16 x 16 of float or i32), two row tiles of A, two column
/// tiles of B; every iteration runs the four independent products.
const AMX: &str = r#"
/* teml bench: peak rate of AMX OP (16 x 16 accumulator tiles). */
#include <immintrin.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
typedef struct {
  unsigned char palette, start_row, reserved[14];
  unsigned short colsb[16];
  unsigned char rows[16];
} teml_tile_config;
void teml_entry(void **args)
{
  double *io = (double *)args[0];
  long n = (long)io[0];
  double total = 0.0;
  io[4] = 0.0;
#if defined(__AMX_TILE__) && defined(NEEDS)
  if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) != 0) {
    io[4] = -1.0;
    return;
  }
  #pragma omp parallel reduction(+: total)
  {
    teml_tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
      cfg.colsb[t] = 64;
      cfg.rows[t] = 16;
    }
    _tile_loadconfig(&cfg);
    /* Operands: 16 rows of 64 bytes, small values (bf16 1 and io[3]; bytes 1 and 2). */
    unsigned char a[16 * 64] __attribute__((aligned(64))), b[16 * 64] __attribute__((aligned(64)));
    float xf = (float)io[2], yf = (float)io[3];
    unsigned xb, yb;
    memcpy(&xb, &xf, 4);
    memcpy(&yb, &yf, 4);
    for (int e = 0; e < 16 * 64; e += 2) {
      unsigned short xs = (unsigned short)(xb >> 16), ys = (unsigned short)(yb >> 16);
      memcpy(&a[e], BYTES ? (const void *)"\x01\x01" : (const void *)&xs, 2);
      memcpy(&b[e], BYTES ? (const void *)"\x02\x02" : (const void *)&ys, 2);
    }
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a, 64);
    _tile_loadd(6, b, 64);
    _tile_loadd(7, b, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (long i = 0; i < n; i++) {
      OP(0, 4, 6);
      OP(1, 4, 7);
      OP(2, 5, 6);
      OP(3, 5, 7);
    }
    int c[16 * 16] __attribute__((aligned(64)));
    for (int t = 0; t < 4; t++) {
      if (t == 0) _tile_stored(0, c, 64);
      if (t == 1) _tile_stored(1, c, 64);
      if (t == 2) _tile_stored(2, c, 64);
      if (t == 3) _tile_stored(3, c, 64);
      if (BYTES)
        total += c[0];
      else {
        float f;
        memcpy(&f, &c[0], 4);
        total += f;
      }
    }
    _tile_release();
  }
  io[4] = 4.0 * 16 * 16 * (BYTES ? 64 : 32); /* tiles x 16 x 16 results x products each */
#endif
  io[1] = total;
}
"#;

/// One instruction's probe.
#[derive(Clone, Copy, Debug)]
struct Probe {
    /// What it is called in the report.
    name: &'static str,
    /// The instruction, as the manuals spell it.
    instruction: &'static str,
    /// The element types it multiplies and the type it sums in.
    types: &'static str,
    /// The host's flags it needs (all of them), as `/proc/cpuinfo` lists them.
    flags: &'static [&'static str],
}

/// The probes, in the order they are reported.
const PROBES: &[Probe] = &[
    Probe { name: "double FMA", instruction: "vfmadd231pd", types: "double", flags: &[] },
    Probe { name: "float FMA", instruction: "vfmadd231ps", types: "float", flags: &[] },
    Probe {
        name: "bf16 dot",
        instruction: "vdpbf16ps",
        types: "bf16 pairs, summed in float",
        flags: &["avx512_bf16"],
    },
    Probe {
        name: "int8 dot",
        instruction: "vpdpbusd",
        types: "u8 x i8 quads, summed in i32",
        flags: &["avx512_vnni"],
    },
    Probe {
        name: "AMX bf16",
        instruction: "tdpbf16ps",
        types: "bf16 tiles, summed in float",
        flags: &["amx_tile", "amx_bf16"],
    },
    Probe {
        name: "AMX int8",
        instruction: "tdpbusd",
        types: "u8 x i8 tiles, summed in i32",
        flags: &["amx_tile", "amx_int8"],
    },
];

/// What one probe measured, or why it did not run.
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct Measured {
    /// Its name in the report (`float FMA`, `bf16 dot`, ...).
    pub name: String,
    /// The instruction.
    pub instruction: String,
    /// What it multiplies and sums in.
    pub types: String,
    /// Threads it ran on.
    pub threads: usize,
    /// Billions of operations a second, a multiply-add counted as 2 (`None`: absent).
    pub gops: Option<f64>,
    /// Why it has no figure: what the host lacks, or what failed.
    pub absent: Option<String>,
}

/// The C source of probe `p`.
fn source(p: &Probe) -> String {
    match p.instruction {
        "vfmadd231pd" => fma_source("double"),
        "vfmadd231ps" => fma_source("float"),
        "vdpbf16ps" => DPBF16.to_string(),
        "vpdpbusd" => DPBUSD.to_string(),
        "tdpbf16ps" => {
            AMX.replace("OP", "_tile_dpbf16ps").replace("NEEDS", "__AMX_BF16__").replace("BYTES", "0")
        }
        _ => AMX.replace("OP", "_tile_dpbusd").replace("NEEDS", "__AMX_INT8__").replace("BYTES", "1"),
    }
}

/// What `host` lacks of the flags `p` needs (empty: it has them all). AVX-VNNI's 256-bit form
/// stands in for AVX512-VNNI.
fn lacks(p: &Probe, host: &Host) -> Vec<&'static str> {
    p.flags
        .iter()
        .copied()
        .filter(|f| !(host.has_flag(f) || (*f == "avx512_vnni" && host.has_flag("avx_vnni"))))
        .collect()
}

/// Runs every probe on `threads` threads (those the host lacks reported absent, not run).
pub fn probe(opts: &RunOptions, threads: usize, quick: bool) -> Vec<Measured> {
    let host = Host::host();
    let opts = options(opts, threads, quick);
    PROBES
        .iter()
        .map(|p| {
            let lacking = lacks(p, host);
            let result = if lacking.is_empty() {
                run(p, &opts, quick)
            } else {
                Err(format!("this host ({}) lacks {}", host.cpu.model, lacking.join(" and ")))
            };
            Measured {
                name: p.name.into(),
                instruction: p.instruction.into(),
                types: p.types.into(),
                threads,
                gops: result.as_ref().ok().copied(),
                absent: result.err(),
            }
        })
        .collect()
}

/// Runs probe `p`: its rate, billions of operations a second.
fn run(p: &Probe, opts: &RunOptions, quick: bool) -> Result<f64, String> {
    // AMX's products take tens of cycles each, and do 8192 or 16384 multiply-adds.
    let iters: u64 = match (p.instruction.starts_with('t'), quick) {
        (true, true) => 20_000,
        (true, false) => 400_000,
        (false, true) => 200_000,
        (false, false) => 4_000_000,
    };
    let (per_iter, median_s) = run_source(&source(p), iters, opts)?;
    if per_iter == 0.0 {
        return Err(format!(
            "the compiler did not target {} with these flags ({})",
            p.instruction,
            opts.flags.opt.join(" ")
        ));
    }
    if per_iter < 0.0 {
        return Err("the Linux kernel refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM)".into());
    }
    let threads = opts.threads.unwrap_or(1) as f64;
    Ok(threads * iters as f64 * per_iter * 2.0 / median_s / 1e9)
}

/// The run options of a probe on `threads` threads: one timed run for `quick`, else at least
/// five and 0.3 s.
pub(super) fn options(opts: &RunOptions, threads: usize, quick: bool) -> RunOptions {
    let timing = if quick {
        Timing { warmup: 1, min_time_s: 0.0, min_reps: 1, max_reps: 1 }
    } else {
        Timing { warmup: 1, min_time_s: 0.3, min_reps: 5, max_reps: 100 }
    };
    RunOptions { threads: Some(threads), timing: Some(timing), ..opts.clone() }
}

/// Runs a probe's C for `iters` iterations ([`IO`]'s arguments): the multiply-adds per
/// iteration and thread it reported (`io[4]`), and its median time, seconds.
pub(super) fn run_source(source: &str, iters: u64, opts: &RunOptions) -> Result<(f64, f64), String> {
    let mut io = [0.0f64; IO];
    io[0] = iters as f64;
    io[2] = 1.000_000_000_1;
    io[3] = -1e-10;
    let io: Vec<u8> = io.iter().flat_map(|x| x.to_ne_bytes()).collect();
    let (out, t) = pipeline::run_source(source, &[io], opts).map_err(|e| e.to_string())?;
    let t = t.ok_or("the probe was not timed")?;
    let per_iter = out
        .first()
        .and_then(|b| b.get(32..40))
        .map(|b| f64::from_ne_bytes(b.try_into().expect("8 bytes")))
        .unwrap_or(0.0);
    Ok((per_iter, t.median_s))
}

/// Each probe's better run of `a` and `b` (the machine is shared: a slow phase under-measures);
/// absent where both are.
pub fn better(a: Vec<Measured>, b: Vec<Measured>) -> Vec<Measured> {
    if a.is_empty() {
        return b;
    }
    a.into_iter()
        .map(|x| match b.iter().find(|y| y.name == x.name) {
            Some(y) if y.gops.unwrap_or(0.0) > x.gops.unwrap_or(0.0) => y.clone(),
            _ => x,
        })
        .collect()
}

/// The probe that bounds a kernel of precision `class` on this host: the fastest instruction
/// of its types the host ran (AMX, then the dot products, then plain FMA), and its figure.
pub fn peak_for(class: Precision, probes: &[Measured]) -> Option<&Measured> {
    let order: &[&str] = match class {
        Precision::Double => &["double FMA"],
        Precision::Float => &["float FMA"],
        // Without the dot products, plain C converts to float and multiplies there.
        Precision::Bf16 => &["AMX bf16", "bf16 dot", "float FMA"],
        Precision::Int8 => &["AMX int8", "int8 dot"],
    };
    order.iter().find_map(|n| probes.iter().find(|m| m.name == *n && m.gops.is_some()))
}

/// The precisions of `teml bench --suite precision`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// double.
    Double,
    /// float.
    Float,
    /// bf16 operands summed in float.
    Bf16,
    /// u8 x i8 summed in i32.
    Int8,
}

/// In a line: `float FMA (vfmadd231ps): 178.7 GFLOP/s` or `bf16 dot (vdpbf16ps): absent (...)`.
pub fn line(m: &Measured) -> String {
    let unit = if m.types.contains("i32") { "GOP/s" } else { "GFLOP/s" };
    match (m.gops, &m.absent) {
        (Some(g), _) => format!("{} ({}, {}): {g:.1} {unit}", m.name, m.instruction, m.types),
        (None, why) => format!(
            "{} ({}, {}): absent ({})",
            m.name,
            m.instruction,
            m.types,
            why.as_deref().unwrap_or("not run")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(flags: &str) -> Host {
        Host {
            cpu: crate::runtime::machine::Cpu {
                model: "AMD EPYC".into(),
                flags: flags.into(),
                mem_gib: None,
            },
            ..Host::default()
        }
    }

    #[test]
    fn a_probe_runs_only_where_the_host_has_its_instruction() {
        let zen3 = host("fpu sse avx avx2 fma");
        let xeon = host("avx2 fma avx512f avx512_bf16 avx512_vnni amx_tile amx_bf16 amx_int8");
        let adl = host("avx2 fma avx_vnni");
        for p in PROBES {
            assert!(lacks(p, &xeon).is_empty(), "{}", p.name);
        }
        let missing: Vec<Vec<&str>> = PROBES.iter().map(|p| lacks(p, &zen3)).collect();
        assert_eq!(
            missing,
            vec![
                vec![],
                vec![],
                vec!["avx512_bf16"],
                vec!["avx512_vnni"],
                vec!["amx_tile", "amx_bf16"],
                vec!["amx_tile", "amx_int8"]
            ]
        );
        // AVX-VNNI's 256-bit vpdpbusd stands in for AVX512-VNNI's.
        assert!(lacks(&PROBES[3], &adl).is_empty());
    }

    #[test]
    fn each_precision_is_bounded_by_the_fastest_instruction_the_host_ran() {
        let m = |name: &str, gops: Option<f64>| Measured {
            name: name.into(),
            instruction: String::new(),
            types: String::new(),
            threads: 2,
            gops,
            absent: gops.is_none().then(|| "lacks it".into()),
        };
        let zen3 = vec![
            m("double FMA", Some(90.0)),
            m("float FMA", Some(180.0)),
            m("bf16 dot", None),
            m("int8 dot", None),
        ];
        assert_eq!(peak_for(Precision::Bf16, &zen3).map(|p| p.name.as_str()), Some("float FMA"));
        assert_eq!(peak_for(Precision::Int8, &zen3), None);
        let zen4 = vec![m("float FMA", Some(260.0)), m("bf16 dot", Some(520.0)), m("int8 dot", Some(1000.0))];
        assert_eq!(peak_for(Precision::Bf16, &zen4).map(|p| p.name.as_str()), Some("bf16 dot"));
        assert_eq!(peak_for(Precision::Int8, &zen4).map(|p| p.name.as_str()), Some("int8 dot"));
        assert!(line(&zen3[2]).ends_with("absent (lacks it)"), "{}", line(&zen3[2]));
    }

    /// Every probe's C compiles for a target that has its instruction (gcc's `-march=` of a
    /// Sapphire Rapids Xeon), whatever the host: the sources are right where they cannot run
    /// here. Nothing is executed.
    #[test]
    fn every_probe_compiles_for_a_target_with_its_instruction() {
        let Ok(cc) = crate::runtime::Compiler::detect() else { return };
        let dir = tempfile::tempdir().unwrap();
        for p in PROBES {
            let c = dir.path().join(format!("{}.c", p.instruction));
            std::fs::write(&c, source(p)).unwrap();
            let out = std::process::Command::new(cc.path())
                .args(["-O2", "-march=sapphirerapids", "-fopenmp", "-c", "-o"])
                .arg(dir.path().join(format!("{}.o", p.instruction)))
                .arg(&c)
                .output()
                .unwrap();
            assert!(out.status.success(), "{}: {}", p.instruction, String::from_utf8_lossy(&out.stderr));
            // And it emits the instruction (not a plain fallback).
            let s = std::process::Command::new(cc.path())
                .args(["-O2", "-march=sapphirerapids", "-fopenmp", "-S", "-o", "-"])
                .arg(&c)
                .output()
                .unwrap();
            let asm = String::from_utf8_lossy(&s.stdout);
            // FMA's operand order is the compiler's (231, 213 or 132).
            let mnemonic = if p.instruction.starts_with("vfmadd") { "vfmadd" } else { p.instruction };
            let suffix = &p.instruction[p.instruction.len() - 2..];
            assert!(
                asm.lines().any(|l| l.contains(mnemonic) && l.contains(suffix)),
                "{} not in the assembly",
                p.instruction
            );
        }
    }
}
