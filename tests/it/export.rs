//! `teml export` used as a user would: a C program that includes the header and links the
//! shared or the static library, a Python script that imports the module and calls it on numpy
//! arrays, each compared with a reference; wrong sizes, dtypes, shapes, non-contiguous arrays
//! and null pointers each give a clear error, never a crash.

use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn export(dir: &Path, args: &[&str]) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_teml"))
        .arg("export")
        .args(args)
        .env("TEML_CACHE_DIR", dir.join("cache"))
        .output()
        .unwrap();
    (
        o.status.success(),
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)),
    )
}

fn sh(dir: &Path, cmd: &str) -> (bool, String) {
    let o = Command::new("sh").arg("-c").arg(cmd).current_dir(dir).output().unwrap();
    (
        o.status.success(),
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)),
    )
}

/// A C program calling the exported `l` (C = A B) at size `n`, checking it against a plain
/// triple loop, and the error codes.
const C_TEST: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "l.h"
static int check(int64_t n) {
    double *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b), *c = malloc(n * n * sizeof *c);
    for (int64_t k = 0; k < n * n; k++) { a[k] = (k % 7) - 3.0; b[k] = (k % 5) * 0.5; c[k] = 99.0; }
    if (l(n, a, b, c) != TEML_OK) { printf("failed at %ld\n", (long)n); return 1; }
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            if (fabs(s - c[i * n + j]) > 1e-9 * (1 + fabs(s))) { printf("C[%ld][%ld]: %g, expected %g\n", (long)i, (long)j, c[i * n + j], s); return 1; }
        }
    free(a); free(b); free(c);
    return 0;
}
int main(void) {
    double x = 0;
    if (check(1) || check(5) || check(37)) return 1;
    if (l(0, &x, &x, &x) != TEML_ERR_SIZE) { printf("size 0 accepted\n"); return 1; }
    if (l(3, NULL, &x, &x) != TEML_ERR_NULL) { printf("NULL accepted\n"); return 1; }
    printf("ok\n");
    return 0;
}
"#;

#[test]
fn a_c_program_links_the_shared_and_the_static_library() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("lib");
    let (ok, text) =
        export(d.path(), &[&format!("{ROOT}/examples/mm.teml"), "-D", "N=16", "-o", out.to_str().unwrap()]);
    assert!(ok, "{text}");
    assert!(text.contains("l: verified") && text.contains("sizes at run time"), "{text}");
    let h = std::fs::read_to_string(out.join("l.h")).unwrap();
    assert!(h.contains("int l(int64_t N, const double *A, const double *B, double *C);"), "{h}");
    assert!(h.contains("C: double [N][N], written") && h.contains("Flags: -O3"), "{h}");
    std::fs::write(out.join("test.c"), C_TEST).unwrap();
    let (ok, text) = sh(&out, "cc -O2 test.c -I. -L. -Wl,-rpath,$PWD -ll -fopenmp -lm -o shared && ./shared");
    assert!(ok && text.contains("ok"), "{text}");
    let (ok, text) = sh(&out, "cc -O2 test.c -I. libl.a -fopenmp -lm -o static && ./static");
    assert!(ok && text.contains("ok"), "{text}");
    // One line through pkg-config (`.ci/run` installs it): the .pc file's flags alone suffice.
    let (ok, text) = sh(&out, "cc -O2 test.c $(pkg-config --cflags --libs ./l.pc) -o viapc && ./viapc");
    assert!(ok && text.contains("ok"), "{text}");
    // The Makefile rebuilds the libraries with the same flags.
    let (ok, text) = sh(&out, "make -s clean && make -s && ls libl.so libl.a");
    assert!(ok, "{text}");
}

/// The Python side: the module of `name` in `dir`, called as a numpy user would.
const PY_TEST: &str = r#"
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
mod = __import__(sys.argv[2])
f = getattr(mod, sys.argv[2])
n = int(sys.argv[3])
baked = sys.argv[4] == "baked"
rng = np.random.default_rng(1)
A, B = rng.standard_normal((n, n)), rng.standard_normal((n, n))
C = f(A, B, np.zeros((n, n)))
assert np.allclose(C, A @ B), "result"
def refused(what, call, kind):
    try:
        call()
    except kind as e:
        print(f"{what}: {e}")
        return
    raise SystemExit(f"{what}: accepted")
refused("dtype", lambda: f(A.astype(np.float32), B, np.zeros((n, n))), TypeError)
refused("shape", lambda: f(A[:, :-1].copy(), B, np.zeros((n, n))), ValueError)
refused("layout", lambda: f(np.asfortranarray(A), B, np.zeros((n, n))), ValueError)
refused("list", lambda: f(A.tolist(), B, np.zeros((n, n))), (TypeError, ValueError))
if baked:
    m = n + 1
    refused("size", lambda: f(np.zeros((m, m)), np.zeros((m, m)), np.zeros((m, m))), ValueError)
else:
    m = n + 3
    A2, B2 = rng.standard_normal((m, m)), rng.standard_normal((m, m))
    assert np.allclose(f(A2, B2, np.zeros((m, m))), A2 @ B2), "another size"
print("ok")
"#;

fn python(dir: &Path, module_dir: &Path, name: &str, n: usize, baked: bool) -> String {
    std::fs::write(dir.join("t.py"), PY_TEST).unwrap();
    let o = Command::new("python3")
        .arg(dir.join("t.py"))
        .arg(module_dir)
        .arg(name)
        .arg(n.to_string())
        .arg(if baked { "baked" } else { "any" })
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success() && text.ends_with("ok\n"), "{text}");
    text
}

#[test]
fn the_python_module_takes_numpy_arrays_and_refuses_wrong_ones_clearly() {
    let d = tempfile::tempdir().unwrap();
    // The untransformed product: any size at run time.
    let any = d.path().join("any");
    let (ok, text) =
        export(d.path(), &[&format!("{ROOT}/examples/mm.teml"), "-D", "N=16", "-o", any.to_str().unwrap()]);
    assert!(ok, "{text}");
    let said = python(d.path(), &any, "l", 16, false);
    assert!(said.contains("dtype: A: expected dtype float64, found float32"), "{said}");
    assert!(said.contains("layout: A: expected a C-contiguous array"), "{said}");
    // The tuned path (register blocks of 8 x 16, cache blocks of 64): made for its size only.
    let tuned = d.path().join("tuned");
    let (ok, text) = export(
        d.path(),
        &[&format!("{ROOT}/scripts/tuned/mm.teml"), "-D", "N=48", "-o", tuned.to_str().unwrap()],
    );
    assert!(ok, "{text}");
    assert!(text.contains("sizes baked in (N=48)"), "{text}");
    let h = std::fs::read_to_string(tuned.join("p.h")).unwrap();
    assert!(
        h.contains("Sizes: baked in, N = 48 only") && h.contains("registers(") && h.contains("parallelize("),
        "{h}"
    );
    let said = python(d.path(), &tuned, "p", 48, true);
    assert!(said.contains("size: size N=49: this kernel was made for N=48 only"), "{said}");
}

#[test]
fn unknown_kernels_and_kernels_that_do_not_verify_are_not_exported() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("x");
    let (ok, text) = export(
        d.path(),
        &[&format!("{ROOT}/examples/mm.teml"), "--kernel", "mm", "-o", out.to_str().unwrap()],
    );
    assert!(!ok && text.contains("--kernel: expected one of l, found `mm`"), "{text}");
    // An illegal fusion, unchecked: verification catches it, and nothing is exported.
    let src = d.path().join("bad.teml");
    std::fs::write(
        &src,
        "A = tensor([8])\nB = eq(A, [i] -> [i])\nC = eq(B, [-i+7] -> [i])\nl1 = build(B)\nl2 = build(C)\n\
         f = fuse_outer(l1, l2, 1)\ncodegen(f, \"bad\")\n",
    )
    .unwrap();
    let (ok, text) = export(d.path(), &[src.to_str().unwrap(), "--unchecked", "-o", out.to_str().unwrap()]);
    assert!(
        !ok && text.contains("kernel `bad` does not match the reference") && text.contains("not exported"),
        "{text}"
    );
    assert!(!out.join("bad.h").exists());
}

#[test]
fn a_rust_program_uses_the_safe_wrapper() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("lib");
    let (ok, text) = export(
        d.path(),
        &[&format!("{ROOT}/examples/mm.teml"), "-D", "N=16", "-o", out.to_str().unwrap(), "--rust"],
    );
    assert!(ok, "{text}");
    let user = d.path().join("user");
    std::fs::create_dir_all(user.join("src")).unwrap();
    std::fs::write(
        user.join("Cargo.toml"),
        "[package]\nname = \"user\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[dependencies]\nl = { path = \"../lib/rust/l\" }\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        user.join("src/main.rs"),
        r#"fn main() {
    for n in [1usize, 6, 19] {
        let a: Vec<f64> = (0..n * n).map(|k| (k % 5) as f64 - 2.0).collect();
        let b: Vec<f64> = (0..n * n).map(|k| (k % 3) as f64 * 0.5).collect();
        let mut c = vec![7.0; n * n];
        l::l(n as i64, &a, &b, &mut c).unwrap();
        for i in 0..n {
            for j in 0..n {
                let s: f64 = (0..n).map(|k| a[i * n + k] * b[k * n + j]).sum();
                assert!((s - c[i * n + j]).abs() <= 1e-9 * (1.0 + s.abs()), "C[{i}][{j}]");
            }
        }
    }
    let (a, b, mut c) = (vec![0.0; 16], vec![0.0; 16], vec![0.0; 16]);
    println!("{}", l::l(4, &a[1..], &b, &mut c).unwrap_err());
    println!("{}", l::l(0, &a, &b, &mut c).unwrap_err());
    println!("ok");
}
"#,
    )
    .unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let o = Command::new(cargo)
        .args(["run", "-q", "--offline"])
        .current_dir(&user)
        .env("CARGO_TARGET_DIR", d.path().join("target"))
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success() && text.ends_with("ok\n"), "{text}");
    assert!(
        text.contains("A: expected 16 elements, found 15") && text.contains("size N=0: expected 1..="),
        "{text}"
    );
}

/// Sizes left to the caller hold up to a computed maximum, which the exported function
/// enforces; a path proven legal at the program's sizes only is baked in, and says why.
#[test]
fn run_time_sizes_have_a_proven_maximum_and_a_size_specific_path_is_baked() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("any");
    let (ok, text) =
        export(d.path(), &[&format!("{ROOT}/examples/mm.teml"), "-D", "N=16", "-o", out.to_str().unwrap()]);
    assert!(ok, "{text}");
    let h = std::fs::read_to_string(out.join("l.h")).unwrap();
    let line = h.lines().find(|l| l.contains("Sizes: given at run time")).unwrap_or_else(|| panic!("{h}"));
    assert!(line.contains("legality proven for every size by isl"), "{line}");
    let max: i64 = line
        .split("1 <= N <= ")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no maximum in {line}"));
    assert!(max >= 16 && max <= i32::MAX as i64, "{max}");
    let c = format!(
        "#include <stdio.h>\n#include \"l.h\"\nint main(void) {{\n  double x = 0;\n  \
         if (l({}, &x, &x, &x) != TEML_ERR_SIZE) {{ printf(\"past the maximum accepted\\n\"); return 1; }}\n  \
         printf(\"ok\\n\");\n  return 0;\n}}\n",
        max + 1
    );
    std::fs::write(out.join("max.c"), c).unwrap();
    let (ok, text) = sh(&out, "cc -O2 max.c -I. libl.a -fopenmp -lm -o max && ./max");
    assert!(ok && text.contains("ok"), "{text}");
    // Strip-mined by a factor that divides the size, without `min`: legal at N=16 only.
    let f = d.path().join("s.teml");
    std::fs::write(
        &f,
        "N = 16\nA = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\n\
         s = stripmine(l, 1, 4)\ncodegen(s)\n",
    )
    .unwrap();
    let baked = d.path().join("baked");
    let (ok, text) = export(d.path(), &[f.to_str().unwrap(), "-o", baked.to_str().unwrap()]);
    assert!(ok, "{text}");
    assert!(text.contains("sizes baked in (N=16)") && text.contains("is proven legal at"), "{text}");
}
