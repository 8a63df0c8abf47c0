//! The numpy anchor of `teml bench`: each Table 1 kernel as a numpy user writes it (BLAS
//! `matmul`, `einsum` with `optimize=True`, sliding windows), on the baseline's own input data
//! (written as `.npy`), timed in Python, and its outputs compared with the baseline's before its
//! time counts. numpy may do fewer floating-point operations (mttkrp's einsum contracts in
//! two steps); its GFLOP/s use teml's count, as effective rates.

use super::VariantResult;
use crate::interp::Buffers;
use crate::ir::{DType, State};
use crate::pipeline::{self, RunOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The kernels in numpy, keyed by their bench names; each returns the tensors it computes.
const NUMPY: &str = r#"
import json, sys, time
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view as sw

def prepare(T): return T
def finish(a): return a

def mm(T): return {"C": T["A"] @ T["B"]}
def tmm(T): return {"C": T["A"].T @ T["B"]}
def bmm(T): return {"C": np.matmul(T["A"], T["B"])}
def gconv(T):
    kh = T["W"].shape[3]
    win = sw(T["I"], (kh, kh), axis=(3, 4))
    return {"O": np.einsum("ngchwxy,gocxy->ngohw", win, T["W"], optimize=True)}
def mttkrp(T): return {"A": np.einsum("ikl,lj,kj->ij", T["B"], T["D"], T["C"], optimize=True)}
def sddmm(T): return {"A": T["S"] * (T["B"] @ T["C"])}
def interp(T):
    A = T["A"]
    t = np.einsum("ad,edbc->eabc", A, T["u"], optimize=True)
    w = np.einsum("bd,eadc->eabc", A, t, optimize=True)
    return {"v": np.einsum("cd,eabd->eabc", A, w, optimize=True)}
def helm(T):
    S, d = T["S"], T["d"]
    L = 1.0 / (d[:, None, None] + d[None, :, None] + d[None, None, :])
    t1 = np.einsum("ad,edbc->eabc", S, T["u"], optimize=True)
    t2 = np.einsum("bd,eadc->eabc", S, t1, optimize=True)
    t3 = np.einsum("cd,eabd->eabc", S, t2, optimize=True)
    r = L[None] * t3
    t4 = np.einsum("da,edbc->eabc", S, r, optimize=True)
    t5 = np.einsum("db,eadc->eabc", S, t4, optimize=True)
    return {"v": np.einsum("dc,eabd->eabc", S, t5, optimize=True)}
def blur(T): return {"B": sw(T["A"], (3, 3)).sum(axis=(-1, -2)) / 9.0}
def coars(T): return {"C": T["Ixx"] * T["Iyy"] - T["Ixy"] * T["Ixy"]}
# The precision suite in float32 (sgemm; the convolution through im2col windows and BLAS).
def mm_float(T): return {"C": T["A"] @ T["B"]}
def conv_float(T):
    kh = T["W"].shape[2]
    win = sw(T["I"], (kh, kh), axis=(2, 3))
    return {"O": np.einsum("nchwxy,ocxy->nohw", win, T["W"], optimize=True)}
"#;

/// The precision suite's bf16 kernels in PyTorch (its CPU matmul and conv2d in bf16: oneDNN,
/// with AVX512-BF16 or AMX where the host has them); the `.npy` inputs are bf16 patterns
/// (`uint16`), viewed as `torch.bfloat16` once, before the timing.
const TORCH: &str = r#"
import json, os, sys, time
import numpy as np
import torch
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))

def prepare(T):
    return {n: torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16) if a.dtype == np.uint16
            else torch.from_numpy(a) for n, a in T.items()}
def finish(a): return a.float().numpy()

def mm_bf16(T): return {"C": T["A"] @ T["B"]}
def conv_bf16(T): return {"O": torch.nn.functional.conv2d(T["I"], T["W"])}
"#;

/// The timing loop both libraries share: `spec.json` names the kernel, its inputs and the
/// timing; the outputs go to `out_<name>.npy` as float64.
const HARNESS: &str = r#"
spec = json.load(open(sys.argv[1]))
T = prepare({n: np.load(p) for n, p in spec["inputs"].items()})
f = globals()[spec["kernel"]]
out = f(T)
times, t0 = [], time.perf_counter()
while True:
    s = time.perf_counter()
    out = f(T)
    times.append(time.perf_counter() - s)
    spent = time.perf_counter() - t0
    enough = len(times) >= spec["min_reps"] and spent >= spec["min_time"]
    if enough or len(times) >= spec["max_reps"] or spent >= spec["max_time"]:
        break
for n, a in out.items():
    np.save(spec["dir"] + "/out_" + n + ".npy", np.ascontiguousarray(finish(a), dtype=np.float64))
times.sort()
print(json.dumps({"times_s": times, "outputs": list(out)}))
"#;

/// Seconds of timed runs after which an anchor stops, whatever its count of runs (a library
/// without a fast path for the type, PyTorch's bf16 matmul on a host without AVX512-BF16,
/// takes tens of seconds a run).
const MAX_TIME_S: f64 = 20.0;

/// A Python library an anchor runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Library {
    /// numpy (BLAS, einsum): the paper suite's kernels and the precision suite's float ones.
    Numpy,
    /// PyTorch on the CPU: the precision suite's bf16 kernels.
    Torch,
}

impl Library {
    /// The variant's name in the report, and the module Python imports.
    pub fn name(self) -> &'static str {
        match self {
            Library::Numpy => "numpy",
            Library::Torch => "torch",
        }
    }

    /// The line that installs it.
    pub fn install(self) -> &'static str {
        match self {
            Library::Numpy => "pip install numpy",
            Library::Torch => "pip install torch --index-url https://download.pytorch.org/whl/cpu",
        }
    }

    /// The script: its kernels, then the timing loop.
    fn script(self) -> String {
        let kernels = match self {
            Library::Numpy => NUMPY,
            Library::Torch => TORCH,
        };
        format!("{kernels}{HARNESS}")
    }

    /// Whether it has a form of kernel `k`.
    pub fn has(self, k: &str) -> bool {
        self.script().contains(&format!("def {k}("))
    }

    /// How its outputs are rounded: PyTorch's bf16 products are bf16 (compared within bf16's
    /// rounding), numpy's in their operands' type.
    fn rounded_to(self) -> Option<DType> {
        match self {
            Library::Numpy => None,
            Library::Torch => Some(DType::Bf16),
        }
    }
}

/// `python3` with `lib`, or why not.
pub fn available(lib: Library) -> Result<PathBuf, String> {
    let py = std::env::var("TEML_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&py)
        .args(["-c", &format!("import {m}; print({m}.__version__)", m = lib.name())])
        .output()
        .map_err(|e| format!("`{py}` cannot run ({e})"))?;
    if !out.status.success() {
        return Err(format!("`{py}` has no {}", lib.name()));
    }
    Ok(PathBuf::from(py))
}

/// Runs kernel `k` in `lib` on the inputs of `state` (the baseline program), compares with the
/// baseline's outputs; `None` for a kernel `lib` has no form for.
pub fn run(
    py: &Path,
    lib: Library,
    k: &str,
    state: &State,
    opts: &RunOptions,
    baseline: &Buffers,
    quick: bool,
) -> Result<Option<VariantResult>, String> {
    if !lib.has(k) {
        return Ok(None);
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut nests = Vec::new();
    for req in &state.kernels {
        nests.extend(pipeline::untransformed(state, req).map_err(|e| e.to_string())?);
    }
    let initial = pipeline::initial_store(state, &nests, opts).map_err(|e| e.to_string())?;
    let mut inputs = serde_json::Map::new();
    for (n, t) in &initial {
        let p = dir.path().join(format!("in_{n}.npy"));
        let shape: Vec<u64> = t.dims.iter().map(|&d| d as u64).collect();
        crate::runtime::npy::write_npy_as(&p, &shape, &t.data, t.dtype).map_err(|e| e.to_string())?;
        inputs.insert(n.to_string(), p.display().to_string().into());
    }
    let (min_reps, min_time, max_reps) = if quick { (1, 0.0, 1) } else { (5, 0.5, 200) };
    let spec = serde_json::json!({
        "kernel": k, "inputs": inputs, "dir": dir.path().display().to_string(),
        "min_reps": min_reps, "min_time": min_time, "max_reps": max_reps, "max_time": MAX_TIME_S,
    });
    let spec_path = dir.path().join("spec.json");
    std::fs::write(&spec_path, spec.to_string()).map_err(|e| e.to_string())?;
    let script = dir.path().join("kernel.py");
    std::fs::write(&script, lib.script()).map_err(|e| e.to_string())?;
    let threads = opts.threads.unwrap_or(1).to_string();
    let out = Command::new(py)
        .arg(&script)
        .arg(&spec_path)
        .env("OMP_NUM_THREADS", &threads)
        .env("OPENBLAS_NUM_THREADS", &threads)
        .env("MKL_NUM_THREADS", &threads)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    // The one definition of median and spread (runtime::TimeStats), as for every variant.
    let times: Vec<f64> = v["times_s"].as_array().into_iter().flatten().filter_map(|t| t.as_f64()).collect();
    let stats = crate::runtime::TimeStats::from(times.as_slice());
    if stats.reps == 0 {
        return Err("no times from numpy".into());
    }
    let median = stats.median_s;
    let flops = {
        let mut f = 0;
        for req in &state.kernels {
            f +=
                pipeline::flop_count(state, &pipeline::untransformed(state, req).map_err(|e| e.to_string())?);
        }
        f
    };
    let mut r = VariantResult {
        verified: true,
        verification: vec!["outputs compared with the untransformed program's".into()],
        median_s: Some(median),
        spread: Some(if median > 0.0 { stats.spread() } else { 0.0 }),
        flops,
        gflops: Some(flops as f64 / median / 1e9),
        ..VariantResult::new(
            lib.name(),
            match lib {
                Library::Numpy => "numpy (matmul / einsum)",
                Library::Torch => "PyTorch (CPU, bf16 matmul / conv2d)",
            },
            opts.threads.unwrap_or(1),
        )
    };
    let mag = pipeline::magnitude(&initial);
    for name in v["outputs"].as_array().into_iter().flatten().filter_map(|x| x.as_str()) {
        let got = crate::runtime::npy::read_npy(dir.path().join(format!("out_{name}.npy")))
            .map_err(|e| e.to_string())?;
        let Some(want) = baseline.get(name) else { continue };
        let mut cmp = pipeline::Comparison::default();
        // Within the rounding of the baseline's type, or of the library's outputs where coarser.
        let tol = lib.rounded_to().map_or(0.0, pipeline::tolerance).max(pipeline::tolerance(want.dtype));
        pipeline::compare_within(name, &want.dims, got.data.to_f64(), &want.data, tol, mag, &mut cmp);
        if let Some(w) = cmp.worst {
            r.verified = false;
            r.median_s = None;
            r.gflops = None;
            r.error = Some(format!("differs from the untransformed program: {w}"));
        }
    }
    Ok(Some(r))
}
