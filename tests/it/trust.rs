//! Regression tests for the promises "nothing is timed that is not verified" and "no input
//! crashes the process" (issue 18's defects), through the real binary.

use crate::common::teml_in as teml;
use std::process::Command;

/// Flags that make a correct kernel wrong, deterministically: every `double` buffer is read
/// as `float`, so the kernel computes garbage that verification must catch.
const WRONG: &str = "-O2 -fopenmp -Ddouble=float";

const MM: &str =
    "N = 24\nA = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\ncodegen(l)\n";

/// `time(l)` of a kernel that fails verification returns no time: a search loop written as
/// `if m.median_s < best` cannot pick a fast wrong variant.
#[test]
fn time_in_a_script_gives_no_time_to_a_kernel_that_failed_verification() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("t.rhai");
    std::fs::write(
        &f,
        "let A = tensor([N, N]);\nlet B = tensor([N, N]);\nlet C = contract(A, B, [2, 1]);\nlet l = build(C);\n\
         let m = time(l);\nprint(`verified=${m.verified} median=${m.median_s} min=${m.min_s} spread=${m.spread} \
         gflops=${m.gflops} reps=${m.reps} cflags=${m.cflags}`);\ncodegen(l);\n",
    )
    .unwrap();
    let f = f.to_str().unwrap();
    let o = teml(d.path(), &["run", f, "-D", "N=16", "--no-run", "--cflags", WRONG]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.contains("verified=false median= min= spread= gflops= reps=0 cflags=-O2 -fopenmp -Ddouble=float"),
        "{out}"
    );
    // The same kernel with correct flags is timed.
    let o = teml(d.path(), &["run", f, "-D", "N=16", "--no-run"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("verified=true median=") && !out.contains("median= "), "{out}");
}

/// `teml run --time` of a kernel that fails verification: MISMATCH, and no time, GFLOP/s or
/// speedup, neither in the text summary nor in the JSON.
#[test]
fn run_reports_no_time_for_a_kernel_that_failed_verification() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("mm.teml");
    std::fs::write(&f, MM).unwrap();
    let f = f.to_str().unwrap();
    let o = teml(d.path(), &["run", f, "--time", "--min-time", "0.01", "--cflags", WRONG]);
    let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(!o.status.success(), "{out}");
    assert!(out.contains("MISMATCH"), "{out}");
    assert!(!out.contains("time:") && !out.contains("GFLOP/s") && !out.contains("; speedup"), "{out}");
    let o = teml(d.path(), &["run", f, "--time", "--min-time", "0.01", "--cflags", WRONG, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    let k = &v["kernels"][0];
    assert_eq!(k["verified"], false, "{v}");
    for field in ["time", "median_s", "gflops", "baseline", "speedup"] {
        assert!(k[field].is_null(), "{field}: {v}");
    }
}

/// A `// program:` line that leads back to the script itself (or through another script)
/// is refused with a located error, not a stack overflow.
#[test]
fn a_program_line_must_name_a_teml_file() {
    let d = tempfile::tempdir().unwrap();
    let own = d.path().join("self.rhai");
    std::fs::write(&own, "// A space over itself\n// program: self.rhai\nlet x = 1;\n").unwrap();
    let a = d.path().join("a.rhai");
    let b = d.path().join("b.rhai");
    std::fs::write(&a, "// program: b.rhai\n").unwrap();
    std::fs::write(&b, "// program: a.rhai\n").unwrap();
    for (f, line) in [(&own, "self.rhai:2:1"), (&a, "a.rhai:1:1")] {
        for cmd in ["check", "run"] {
            let o = teml(d.path(), &[cmd, f.to_str().unwrap()]);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{cmd} {}: {err}", f.display());
            assert!(err.contains(line) && err.contains("expected a .teml file"), "{err}");
        }
    }
    // `teml tune` reads the same line.
    let o = teml(
        d.path(),
        &["tune", own.to_str().unwrap(), "--budget", "1", "--out", d.path().join("o").to_str().unwrap()],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("self.rhai:2:1") && err.contains("expected a .teml file"), "{err}");
}

/// `teml repl FILE` loads a path with a space (it used to go through `:load`'s word split),
/// and `-D` follows one identifier rule in `teml run`/`check` and the REPL's `:load`.
#[test]
fn repl_loads_a_path_with_a_space_and_defines_follow_one_rule() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("a b");
    std::fs::create_dir(&dir).unwrap();
    let f = dir.join("f.teml");
    std::fs::write(&f, "A = tensor([N])\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(["repl", f.to_str().unwrap(), "-D", "N=5"])
        .env("TEML_HISTORY", d.path().join("h.txt"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b":state\n:load f.teml -D 9N=4\n").unwrap();
    let o = child.wait_with_output().unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("loaded ") && out.contains("N = 5") && out.contains("A: "), "{out}{err}");
    assert!(err.contains(":load: -D 9N=4: expected a constant name (a C identifier)"), "{err}");
    let o = teml(d.path(), &["check", f.to_str().unwrap(), "-D", "9N=4"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("expected a constant name (a C identifier)"), "{err}");
}

/// gcc 12.2 miscompiles this valid kernel (sddmm 9x6, unroll-and-jammed; no pragmas) at `-O3`
/// with 512-bit vectors (`-march=native` on an AVX-512 machine): the reproducer of issue 19.
/// A legal path must not fail on the compiler's account: with the default flags the program
/// verifies, is timed, and computes what the `-O2` build computes; where the compiler is at
/// fault, the report names the defect and the flags that avoid it.
#[test]
fn the_gcc12_avx512_miscompile_reproducer_verifies_and_names_the_defect() {
    if !avx512() {
        eprintln!(
            "NOTE: this machine has no AVX-512: gcc's 512-bit miscompile cannot happen here; the program \
             is still required to verify"
        );
    }
    gcc_reproducer(
        "X0 = tensor([9, 6])\nX1 = tensor([6, 6])\nv2 = vcontract(X0, X1, [2, 1])\nT3 = entrywise_mul(X0, v2)\n\
         l4 = build(T3)\nl5 = unroll(l4, 3)\nl6 = unroll_and_jam(l5, 2, 2)\ncodegen(l6)\n",
        "T3",
        &["-O2 -fopenmp"],
        false,
    );
}

/// The third gcc 12 `-O3 -march=native` miscompile (found by the fuzzer, issue 20): a
/// five-times strip-mined element loop, then an in-place update of its result; no pragmas, no
/// explicit vectors. It fails with 256-bit vectors too (forced here with
/// `-mprefer-vector-width=256` where the machine has more), so the recheck is exercised on
/// any x86 machine with gcc 12: the default build verifies, naming the defect where it hit.
#[test]
fn the_gcc12_strip_mined_element_loop_reproducer_verifies_and_names_the_defect() {
    gcc_reproducer(
        "N = 3\nA1 = tensor([10])\nX2 = add(A1, A1, [[i+1], [i]] -> [i])\nl3 = build(X2)\n\
         Y4 = @X2: add(X2, X2, [[i], [i]] -> [i])\nl5 = build(Y4)\nl6 = stripmine(l3, 1, 3)\n\
         l7 = stripmine(l6, 1, 2)\nl8 = stripmine(l7, 1, 2)\nl9 = stripmine(l8, 1, 2)\n\
         l10 = stripmine(l9, 1, 2)\ncodegen(l10, l5)\n",
        "X2",
        &["-O2 -fopenmp", "-O3 -march=native -fopenmp -fno-tree-loop-vectorize"],
        true,
    );
}

/// The fourth gcc 12 `-O3 -march=native` miscompile (found by the fuzzer, issue 21), this time
/// in the SLP vectorizer (`-fno-tree-loop-vectorize` does not help; `-fno-tree-slp-vectorize`,
/// `-O2` or 256-bit vectors do): `X3[i][j] = (A1[i][j] * A1[j][i] - A2[i][j]) * 3.0` over 5x5,
/// then `X3[i][j] += A12[i][j]`, A2 and A12 float. The default build verifies, naming the
/// defect where it hit.
#[test]
fn the_gcc12_slp_reproducer_verifies_and_names_the_defect() {
    gcc_reproducer(
        "A1 = tensor([5, 5])\nA2 = tensor(float, [5, 5])\nt4 = vmul(A1, A1, [[i, j], [j, i]])\n\
         t5 = vsub(t4, A2, [, [i, j]])\nX3 = mul(t5, 3.0, [, ] -> [i, j])\nl6 = build(X3)\n\
         A12 = tensor(float, [5, 5])\nY11 = @X3: add(X3, A12, [[i, j], [i, j]] -> [i, j])\n\
         l13 = build(Y11)\ncodegen(l6, l13)\n",
        "X3",
        &["-O2 -fopenmp", "-O3 -march=native -fopenmp -fno-tree-slp-vectorize"],
        false,
    );
}

/// The fifth gcc 12 `-O3 -march=native` defect (found by the fuzzer after issue 41): a
/// contraction over a backward range (`i1` from 7 down to 0) with its operand in a padded
/// layout. The 512-bit build crashes (SIGSEGV) instead of computing wrong values; `-O2`, no
/// `-march` or 256-bit vectors run it. A crash of valid C gets the same rebuilds as a mismatch:
/// the default build verifies, naming the defect (a binary that crashed) where it hit.
#[test]
fn the_gcc12_crashing_build_reproducer_verifies_and_names_the_defect() {
    if !avx512() {
        eprintln!(
            "NOTE: this machine has no AVX-512: the crash cannot happen here; the program still verifies"
        );
    }
    gcc_reproducer(
        "A1 = tensor([8, 4])\nC2 = contract(A1, A1, [2, 2])\nl4 = build(C2, [[i1, 7, 0, -1]])\n\
         l7 = pad(l4, A1, 1, 4, 0)\ncodegen(l7)\n",
        "C2",
        &["-O2 -fopenmp"],
        false,
    );
}

/// The sixth gcc 12 `-O3 -march=native` defect (found by the fuzzer on an Intel Xeon with
/// AVX-512, 2026-11-28): an outer product over a backward range, shifted and interchanged,
/// `W3[-i1+5][i2-2][i3] = A1[-i1+5][i2-2] * A2[i3]` with A1 float. gcc loads A1 as one 512-bit
/// vector from 16 bytes *before* its first element (`vpermq -16(%rdi)`), which crashes where
/// the tensor starts a page (256-bit vectors too). The default build verifies, naming the
/// defect where it hit.
#[test]
fn the_gcc12_reversed_outer_product_reproducer_verifies_and_names_the_defect() {
    gcc_reproducer(
        "A1 = tensor(float, [6, 2])\nA2 = tensor([2])\nW3 = outerproduct(A1, A2)\n\
         l5 = build(W3, [[i1, 5, 0, -1]])\nl6 = shift(l5, 2, 2)\nl7 = interchange(l6, [3, 2])\n\
         codegen(l7)\n",
        "W3",
        &["-O2 -fopenmp", "-O3 -march=native -fopenmp -fno-tree-loop-vectorize -fno-tree-slp-vectorize"],
        true,
    );
}

fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A gcc reproducer: the program verifies with each of the `safe` flags (the last build's
/// output kept); with the default flags (and, on x86, with 256-bit vectors preferred) it
/// verifies too, is timed, and computes what the safe build computes (`exact`, else within
/// 1e-12 relative). Where the default build hit the defect, the report names it and the flags
/// that avoided it. Returns whether a defect was named.
fn gcc_reproducer(src: &str, tensor: &str, safe: &[&str], exact: bool) -> bool {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("reproducer.teml");
    std::fs::write(&f, src).unwrap();
    let (f, safe_out, default_out) =
        (f.to_str().unwrap(), d.path().join("safe.npy"), d.path().join("o3.npy"));
    for flags in safe {
        let out = format!("{tensor}={}", safe_out.display());
        let o = teml(d.path(), &["run", f, "--cflags", flags, "-o", &out]);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && text.contains("verified"),
            "{flags}: {text}{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let mut defect = false;
    let mut runs: Vec<Vec<&str>> = vec![vec![]];
    if cfg!(target_arch = "x86_64") {
        runs.push(vec!["--cflags", "-O3 -march=native -mprefer-vector-width=256 -fopenmp"]);
    }
    for extra in runs {
        let out = format!("{tensor}={}", default_out.display());
        let mut args = vec!["run", f, "--time", "--min-time", "0.01", "-o", &out];
        args.extend(extra.iter().copied());
        let o = teml(d.path(), &args);
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(
            o.status.success()
                && text.contains("verified")
                && text.contains("time:")
                && !text.contains("MISMATCH"),
            "{extra:?}: a legal path must verify whatever the compiler does: {text}"
        );
        if text.contains("compiler defect: ") {
            // The defect is named with the flags that failed and those that avoided it.
            assert!(text.contains("from valid C") && text.contains("instead"), "{text}");
            eprintln!(
                "NOTE {extra:?}: {}",
                text.lines().find(|l| l.contains("compiler defect")).unwrap_or("")
            );
            defect = true;
        }
        let (a, b) =
            (teml::runtime::read_npy(&safe_out).unwrap(), teml::runtime::read_npy(&default_out).unwrap());
        assert_eq!(a.shape, b.shape);
        if exact {
            assert_eq!(a.data.to_f64(), b.data.to_f64());
        } else {
            for (x, y) in a.data.to_f64().iter().zip(&b.data.to_f64()) {
                assert!((x - y).abs() <= 1e-12 * x.abs().max(1.0), "{x} vs {y}");
            }
        }
    }
    defect
}

/// A C compiler that builds like gcc, except that where it optimizes with gcc's loop
/// vectorizer on (`-O3` without `-fno-tree-loop-vectorize`) it adds `defect` to the command
/// line: a compiler whose optimizer has a defect, the kind the rebuilds avoid.
fn defective_cc(dir: &std::path::Path, name: &str, defect: &str) -> std::path::PathBuf {
    let cc = dir.join(name);
    std::fs::write(
        &cc,
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" -fno-tree-loop-vectorize \"*) exec gcc \"$@\";; esac\n\
             case \" $* \" in *\" -O3 \"*) exec gcc {defect} \"$@\";; esac\nexec gcc \"$@\"\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cc, std::fs::Permissions::from_mode(0o755)).unwrap();
    cc
}

/// A build that crashes or computes wrong values is put on the compiler (and rebuilt) only
/// where the same C built without optimization (`-O0`) verifies: a kernel whose C is itself
/// at fault fails with that said, even where another compiler's binary would happen to
/// survive it (the fuzzer's out-of-bounds pack copy, which clang's build ran, was once taken
/// for a gcc defect).
#[test]
fn a_failure_is_put_on_the_compiler_only_where_the_unoptimized_build_verifies() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("mm.teml");
    std::fs::write(&f, MM).unwrap();
    let f = f.to_str().unwrap();
    let crash = d.path().join("crash.h");
    std::fs::write(
        &crash,
        "#include <stdlib.h>\n__attribute__((constructor)) static void boom(void) { abort(); }\n",
    )
    .unwrap();
    let include = format!("-include {}", crash.display());
    let out = |o: &std::process::Output| {
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
    };

    // Crashes at every level, -O0 included: the C's fault, an error that says so.
    let o = teml(d.path(), &["run", f, "--cflags", &format!("-O3 -fopenmp {include}")]);
    let text = out(&o);
    assert!(!o.status.success(), "{text}");
    assert!(
        text.contains("kernel crashed: SIGABRT, and so did the same C built at -O0")
            && !text.contains("compiler defect"),
        "{text}"
    );
    // Wrong values at every level: a mismatch, and not put on the compiler.
    let o = teml(d.path(), &["run", f, "--cflags", WRONG]);
    let text = out(&o);
    assert!(!o.status.success() && text.contains("MISMATCH"), "{text}");
    assert!(text.contains("the same C built at -O0 does not match either"), "{text}");
    assert!(!text.contains("compiler defect"), "{text}");

    // The optimizer's fault (a crash, wrong values): rebuilt without the vectorizers, the
    // defect named with the evidence that the C verifies at -O0.
    for (name, defect) in [("crashcc", include.as_str()), ("wrongcc", "-Ddouble=float")] {
        let cc = defective_cc(d.path(), name, defect);
        let o = Command::new(env!("CARGO_BIN_EXE_teml"))
            .args(["run", f, "--time", "--min-time", "0.01"])
            .env("CC", &cc)
            .env("TEML_CACHE_DIR", d.path().join("cache"))
            .output()
            .unwrap();
        let text = out(&o);
        assert!(o.status.success() && text.contains("verified") && text.contains("time:"), "{name}: {text}");
        assert!(
            text.contains("compiler defect: ")
                && text.contains("from valid C, which verifies at -O0")
                && text.contains("-fno-tree-loop-vectorize"),
            "{name}: {text}"
        );
        assert_eq!(
            text.contains("built a binary that crashed (kernel crashed: SIGABRT)"),
            name == "crashcc",
            "{text}"
        );
    }
}
