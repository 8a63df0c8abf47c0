//! The PolyBench/C 4.2.1 kernels teml expresses so far (examples/polybench/, issue 21), each run
//! through the real binary on numpy-made inputs (`-i`) at PolyBench's SMALL sizes and its
//! outputs (`-o`) compared with numpy computing the same kernel from PolyBench's published
//! definition. numpy is required (`.ci/run` installs it).

use std::path::Path;
use std::process::Command;

/// numpy's side: makes the inputs (seeded), runs the kernel's definition, and compares with
/// what teml saved. `sys.argv`: the directory, the kernel name.
const CHECK: &str = r#"
import sys, numpy as np
d, k = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(7)
def inputs(**shapes):
    out = {}
    for name, shape in shapes.items():
        a = rng.uniform(-1.0, 1.0, shape)
        np.save(f"{d}/{name}.npy", a)
        out[name] = a
    return out
SMALL = {
    "gemm": lambda: inputs(alpha=(), beta=(), A=(60, 80), B=(80, 70), C=(60, 70)),
    "atax": lambda: inputs(A=(116, 124), x=(124,)),
    "bicg": lambda: inputs(A=(124, 116), r=(124,), p=(116,)),
    "mvt": lambda: inputs(A=(120, 120), x1=(120,), x2=(120,), y1=(120,), y2=(120,)),
    "2mm": lambda: inputs(alpha=(), beta=(), A=(40, 70), B=(70, 50), C=(50, 80), D=(40, 80)),
    "3mm": lambda: inputs(A=(40, 60), B=(60, 50), C=(50, 80), D=(80, 70)),
    "gesummv": lambda: inputs(alpha=(), beta=(), A=(90, 90), B=(90, 90), x=(90,)),
    "doitgen": lambda: inputs(A=(25, 20, 30), C4=(30, 30)),
}
def reference(k, T):
    if k == "gemm":
        return {"C": T["alpha"] * T["A"] @ T["B"] + T["beta"] * T["C"]}
    if k == "atax":
        return {"y": T["A"].T @ (T["A"] @ T["x"])}
    if k == "bicg":
        return {"s": T["A"].T @ T["r"], "q": T["A"] @ T["p"]}
    if k == "mvt":
        return {"x1": T["x1"] + T["A"] @ T["y1"], "x2": T["x2"] + T["A"].T @ T["y2"]}
    if k == "2mm":
        return {"D": T["alpha"] * T["A"] @ T["B"] @ T["C"] + T["beta"] * T["D"]}
    if k == "3mm":
        return {"G": (T["A"] @ T["B"]) @ (T["C"] @ T["D"])}
    if k == "gesummv":
        return {"y": T["alpha"] * T["A"] @ T["x"] + T["beta"] * T["B"] @ T["x"]}
    if k == "doitgen":
        return {"A": np.einsum("rqs,sp->rqp", T["A"], T["C4"])}
if sys.argv[3] == "make":
    SMALL[k]()
else:
    T = {n: np.load(f"{d}/{n}.npy") for n in SMALL[k]().keys()}  # the same seed: the same data
    for name, want in reference(k, T).items():
        got = np.load(f"{d}/out_{name}.npy")
        assert got.shape == want.shape, (name, got.shape, want.shape)
        err = np.max(np.abs(got - want) / np.maximum(np.abs(want), 1.0))
        assert err < 1e-12, (k, name, err)
        print(k, name, "agrees with numpy, max rel error", err)
"#;

fn numpy(dir: &Path, kernel: &str, what: &str) -> String {
    let script = dir.join("check.py");
    std::fs::write(&script, CHECK).unwrap();
    let o = Command::new("python3").arg(&script).arg(dir).arg(kernel).arg(what).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "numpy ({kernel}, {what}): {text}");
    text
}

#[test]
fn polybench_kernels_agree_with_numpy_at_small_sizes() {
    let kernels: &[(&str, &[&str], &[&str])] = &[
        ("gemm", &["alpha", "beta", "A", "B", "C"], &["C"]),
        ("atax", &["A", "x"], &["y"]),
        ("bicg", &["A", "r", "p"], &["s", "q"]),
        ("mvt", &["A", "x1", "x2", "y1", "y2"], &["x1", "x2"]),
        ("2mm", &["alpha", "beta", "A", "B", "C", "D"], &["D"]),
        ("3mm", &["A", "B", "C", "D"], &["G"]),
        ("gesummv", &["alpha", "beta", "A", "B", "x"], &["y"]),
        ("doitgen", &["A", "C4"], &["A"]),
    ];
    for (k, ins, outs) in kernels {
        let d = tempfile::tempdir().unwrap();
        numpy(d.path(), k, "make");
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("examples/polybench/{k}.teml"));
        let mut args: Vec<String> = vec!["run".into(), file.display().to_string(), "-q".into()];
        for i in *ins {
            args.extend(["-i".into(), format!("{i}={}", d.path().join(format!("{i}.npy")).display())]);
        }
        for o in *outs {
            args.extend(["-o".into(), format!("{o}={}", d.path().join(format!("out_{o}.npy")).display())]);
        }
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let o = crate::common::teml_in(d.path(), &args);
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success() && text.contains("verified"), "{k}: {text}");
        let agreed = numpy(d.path(), k, "check");
        assert_eq!(agreed.matches("agrees with numpy").count(), outs.len(), "{k}: {agreed}");
    }
}
