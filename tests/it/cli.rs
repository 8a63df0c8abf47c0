//! The real `teml` binary on real files: exit codes, outputs, JSON reports and the messages
//! for malformed input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn teml(args: &[&str], _dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(args)
        .env("TEML_CACHE_DIR", crate::common::kernel_cache())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("teml runs")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn write(dir: &Path, name: &str, src: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, src).unwrap();
    p
}

#[test]
fn run_verifies_the_paper_example() {
    let d = tempfile::tempdir().unwrap();
    let o = teml(&["run", "examples/paper/fig6.teml", "-D", "N=48", "--threads", "2"], d.path());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(out.contains("kernel l2 at examples/paper/fig6.teml:16:1: verified"), "{out}");
}

#[test]
fn json_report_has_the_kernel_fields() {
    let d = tempfile::tempdir().unwrap();
    let o = teml(
        &["run", "examples/paper/matmul_core.teml", "-D", "N=40", "--time", "--min-time", "0.01", "--json"],
        d.path(),
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let k = &v["kernels"][0];
    assert_eq!(v["ok"], true);
    assert_eq!(k["name"], "l3");
    assert_eq!(k["verified"], true);
    for f in ["max_rel_error", "median_s", "gflops", "speedup"] {
        assert!(k[f].as_f64().is_some(), "{f} in {k}");
    }
    assert_eq!(k["flops"], 2 * 40 * 40 * 40);
}

#[test]
fn inputs_and_outputs_are_npy_files() {
    let d = tempfile::tempdir().unwrap();
    let prog = write(
        d.path(),
        "scale.teml",
        "A = tensor([2, 3])\nB = add(A, A, [[i, j], [i, j]] -> [i, j])\nl = build(B)\ncodegen(l)\n",
    );
    let out_path = d.path().join("b.npy");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/small.npy");
    let o = teml(
        &[
            "run",
            prog.to_str().unwrap(),
            "-i",
            &format!("A={}", fixture.display()),
            "-o",
            &format!("B={}", out_path.display()),
        ],
        d.path(),
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let a = teml::runtime::npy::read_npy(&fixture).unwrap().data.to_f64();
    let b = teml::runtime::npy::read_npy(&out_path).unwrap();
    assert_eq!(b.shape, vec![2, 3]);
    let want: Vec<f64> = a.iter().map(|x| 2.0 * x).collect();
    assert_eq!(b.data.to_f64(), want);
    // a shape that does not fit is refused
    let bad = teml(
        &["run", prog.to_str().unwrap(), "-i", &format!("B={}", fixture.display()), "-i", "A=nope.npy"],
        d.path(),
    );
    assert!(!bad.status.success());
}

#[test]
fn emit_c_and_no_run() {
    let d = tempfile::tempdir().unwrap();
    let c = d.path().join("k.c");
    let emit = |bits: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_teml"))
            .args(["run", "examples/paper/fig6.teml", "--no-run", "--emit-c", c.to_str().unwrap()])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("TEML_CACHE_DIR", d.path().join("cache"))
            .env("TEML_VECTOR_BITS", bits)
            .output()
            .unwrap();
        assert!(o.status.success(), "{:?}", text(&o));
        std::fs::read_to_string(&c).unwrap()
    };
    // Fig. 6 as the paper prints it: pragmas only
    let src = emit("0");
    assert!(
        src.contains("#pragma omp parallel for")
            && src.contains("#pragma omp simd")
            && src.contains("E[i1][i2] = C[i1][i2] * (A[i1][i2] + B[i1][i2]);"),
        "{src}"
    );
    // with AVX-512: explicit 8-lane vectors, and a scalar remainder loop (N is a named constant)
    let src = emit("512");
    assert!(
        src.contains("#pragma omp parallel for")
            && src.contains("for (; i2 <= (N-8); i2 += 8)")
            && src.contains(
                "*(teml_d8 *)&E[i1][i2] = *(teml_d8 *)&C[i1][i2] * (*(teml_d8 *)&A[i1][i2] + *(teml_d8 *)&B[i1][i2]);"
            )
            && src.contains("E[i1][i2] = C[i1][i2] * (A[i1][i2] + B[i1][i2]);"),
        "{src}"
    );
}

#[test]
fn check_and_builtins() {
    let d = tempfile::tempdir().unwrap();
    let o = teml(&["check", "examples/paper/fig5.teml"], d.path());
    assert!(o.status.success() && text(&o).0.contains("ok"), "{:?}", text(&o));
    let o = teml(&["builtins"], d.path());
    let (out, _) = text(&o);
    for b in teml::ops::builtins() {
        assert!(out.contains(&format!("| `{}` |", b.name)), "{}", b.name);
    }
    let o = teml(&["--help"], d.path());
    let (out, _) = text(&o);
    for sub in ["run", "check", "repl", "builtins"] {
        assert!(out.contains(sub), "{out}");
    }
    let o = teml(&["run", "--help"], d.path());
    let (out, _) = text(&o);
    for flag in ["-D", "-i", "-o", "--emit-c", "--time", "--threads", "--cflags", "--json", "--no-run"] {
        assert!(out.contains(flag), "{flag}: {out}");
    }
}

fn fails(src: &str, expect: &[&str]) {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "bad.teml", src);
    for cmd in ["check", "run"] {
        let o = teml(&[cmd, p.to_str().unwrap()], d.path());
        let (out, err) = text(&o);
        assert!(!o.status.success(), "{cmd} should fail: {out}{err}");
        for e in expect {
            assert!(err.contains(e), "{cmd}: expected `{e}` in:\n{err}");
        }
    }
}

#[test]
fn parse_error_has_a_location() {
    fails(
        "A = tensor([4, 4])\nB = eq(A, [i1 i2] -> [i2, i1])\n",
        &["bad.teml:2:", "B = eq(A, [i1 i2] -> [i2, i1])", "^"],
    );
}

#[test]
fn unknown_identifier_has_a_location() {
    fails("A = tensor([4, 4])\n\nB = eq(Q, [i, j] -> [j, i])\n", &["bad.teml:3:8", "unknown identifier `Q`"]);
}

#[test]
fn shape_mismatch_has_a_location() {
    fails(
        "A = tensor([4, 3])\nB = tensor([3, 5])\nP = vmul(A, B, [[i, k], [i, j]])\n",
        &["bad.teml:3:", "shape mismatch", "expected iterator `i` to index dimensions of one extent"],
    );
}

#[test]
fn level_out_of_range_has_a_location() {
    fails(
        "A = tensor([4, 3])\nB = eq(A, [i, j] -> [j, i])\nl = build(B)\nl1 = stripmine(l, 3, 2)\n",
        &["bad.teml:4:", "level out of range: expected 1..=2, found 3"],
    );
}

#[test]
fn a_verification_failure_is_a_failure() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "fuse.teml",
        "A = tensor([8])\nB = eq(A, [i] -> [i])\nC = eq(B, [-i+7] -> [i])\nl1 = build(B)\nl2 = build(C)\nf = fuse_outer(l1, l2, 1)\ncodegen(f)\n",
    );
    // Checked (the default), the illegal fusion is refused at its line, with a witness.
    let o = teml(&["check", p.to_str().unwrap()], d.path());
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(
        err.starts_with(
            "error: fuse_outer: illegal: B[4] is written by statement 1 (`B[i] = A[i]`) at (i=4) and read by \
             statement 2 (`C[i] = B[-i+7]`) at (i=3); the transformed nest reads it before it is written"
        ) && err.contains("fuse.teml:6:1"),
        "{err}"
    );
    // Unchecked, it reaches verification, which reports the mismatch.
    let o = teml(&["run", p.to_str().unwrap(), "--unchecked", "--time", "--json"], d.path());
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(err.contains("does not match the reference"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["kernels"][0]["verified"], false);
    assert!(v["kernels"][0]["speedup"].is_null());
}

#[test]
fn large_kernels_are_verified_at_a_reduced_size() {
    let d = tempfile::tempdir().unwrap();
    let o = teml(
        &["run", "examples/paper/matmul_core.teml", "-D", "N=96", "--max-reference", "50000", "--json"],
        d.path(),
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let k = &v["kernels"][0];
    assert_eq!(k["verified"], true);
    let how = k["verification"].as_str().unwrap();
    assert!(how.starts_with("reduced size (N=32)") && how.contains("884736"), "{how}");
    // ... and the full-size binary, the one that is timed, is checked at sampled elements.
    assert!(
        how.ends_with("full-size kernel checked at 24 sampled elements against the expression oracle"),
        "{how}"
    );
}

/// The committed generated doc `rel` equals `generated` (what `command` prints); rewritten
/// under `TEML_BLESS=1`.
fn assert_current(rel: &str, generated: &str, command: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    if std::env::var_os("TEML_BLESS").is_some() {
        std::fs::write(&path, generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{rel} is stale: run `{command} > {rel}` (or TEML_BLESS=1 cargo test --profile ci --test it cli::):\n{}",
        crate::common::unified_diff(&committed, generated, rel, command)
    );
}

#[test]
fn the_language_reference_is_generated_from_the_table() {
    assert_current("docs/reference.md", &teml::cli::reference(), "teml builtins");
    // every example in the table is valid syntax (Rhai ones start with `let`)
    for b in teml::ops::builtins().iter().filter(|b| !b.example.starts_with("let ")) {
        teml::lang::parse(b.example, b.name).unwrap_or_else(|e| panic!("{}: {e}", b.name));
    }
}

#[test]
fn the_command_line_reference_is_generated_from_the_clap_definitions() {
    let generated = teml::cli::cli_reference();
    assert_current("docs/cli.md", &generated, "teml cli-reference");
    let out = teml(&["cli-reference"], Path::new("."));
    assert_eq!(String::from_utf8_lossy(&out.stdout), generated);
    // Every environment variable the sources read is in it.
    let mut read = std::collections::BTreeSet::new();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut dirs = vec![src];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                for (i, _) in text.match_indices("\"TEML_") {
                    let name: String = text[i + 1..]
                        .chars()
                        .take_while(|c| c.is_ascii_uppercase() || *c == '_' || c.is_ascii_digit())
                        .collect();
                    read.insert(name);
                }
            }
        }
    }
    // (TEML_TARGET is the build's own target triple, set by build.rs; `TEML_EXPORT_` begins an
    // exported header's include guard.)
    for name in read.iter().filter(|n| n.as_str() != "TEML_TARGET" && !n.ends_with('_')) {
        assert!(
            teml::cli::ENVIRONMENT.iter().any(|(v, _)| v == name),
            "{name} is read by the sources but not documented in teml::cli::ENVIRONMENT (docs/cli.md)"
        );
    }
}

/// Names the language accepts but C does not (keywords, the block iterator `do` that
/// strip-mining `d` creates, a tensor named like its iterator) are spelled apart in C.
#[test]
fn c_keywords_and_clashing_names_compile_and_verify() {
    let d = tempfile::tempdir().unwrap();
    let programs = [
        "int = tensor([4])\nfor = eq(int, [do] -> [do])\nl = build(for)\ncodegen(l)\n",
        "A = tensor([8])\nB = eq(A, [d] -> [d])\nl = build(B)\nl1 = stripmine(l, 1, 2)\ncodegen(l1)\n",
        "A = tensor([8])\ni = eq(A, [i] -> [i])\nl = build(i)\ncodegen(l)\n",
        "int = 6\nrestrict = tensor([int, 3])\ndouble = tensor([3])\n\
         teml_x = add(restrict, double, [[for, do], [do]] -> [for, do])\nl = build(teml_x)\ncodegen(l)\n",
        "A = tensor([5, 5])\ni = tensor([5, 5])\nsizeof = vmul(A, A, [[i_, j], [j, i]])\n\
         i = add(i, sizeof, [[i_, i], ] -> [i_, i])\nl = build(i)\nl1 = parallelize(l, 1)\ncodegen(l1)\n",
    ];
    for (k, src) in programs.iter().enumerate() {
        let p = write(d.path(), &format!("names{k}.teml"), src);
        let o = teml(&["run", p.to_str().unwrap(), "--threads", "2"], d.path());
        let (out, err) = text(&o);
        assert!(o.status.success() && out.contains(": verified"), "{src}\n{out}{err}");
    }
}

/// A mark that C generation would refuse is refused at the `codegen` statement, with its
/// place, by `check` as by `run`, in both front-ends.
#[test]
fn codegen_refusals_are_located_at_the_statement() {
    let d = tempfile::tempdir().unwrap();
    let teml_src = "A = tensor([4, 6])\nB = tensor([6, 5])\nC = tensor([4, 5])\nP = vmul(A, B, [[i, k], [k, j]])\n\
                    C = add(C, P, [[i, j], ] -> [i, j])\nl = build(C)\na = interchange(l, 1, 3)\na = parallelize(a, 1)\n\ncodegen(a)\n";
    let rhai_src = "let A = tensor([4, 6]);\nlet B = tensor([6, 5]);\nlet C = tensor([4, 5]);\n\
                    let P = vmul(A, B, [[i, k], [k, j]]);\nC = add(C, P, [[i, j], ()], [i, j]);\nlet l = build(C);\n\
                    let a = interchange(l, 1, 3);\na = parallelize(a, 1);\ncodegen(a);\n";
    let msg = "error: codegen: cannot parallelize loop `k` ([0, 5]): loop `k` accumulates into C[i][j], which varies inside the loop";
    for (name, src, at) in [("cg.teml", teml_src, "cg.teml:10:1"), ("cg.rhai", rhai_src, "cg.rhai:9:1")] {
        let p = write(d.path(), name, src);
        for cmd in ["check", "run"] {
            let o = teml(&[cmd, p.to_str().unwrap()], d.path());
            let (out, err) = text(&o);
            assert!(!o.status.success(), "{cmd} {name} should fail: {out}{err}");
            assert!(err.starts_with(msg) && err.contains(at), "{cmd} {name}:\n{err}");
        }
    }
}

#[test]
fn json_on_stdout_is_only_the_report_and_says_how_it_timed() {
    let d = tempfile::tempdir().unwrap();
    let prog = write(
        d.path(),
        "p.rhai",
        "let A = tensor([N, N]);\nlet B = tensor([N, N]);\nlet C = contract(A, B, [2, 1]);\nlet l = build(C);\n\
         print(\"a line the script prints\");\ncodegen(l);\n",
    );
    let o = teml(&["run", prog.to_str().unwrap(), "-D", "N=8", "--json", "--threads", "2"], d.path());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(err.contains("a line the script prints"), "{err}");
    assert_eq!(v["threads"], 2);
    for f in ["compiler", "flags", "machine"] {
        assert!(v[f].as_str().is_some_and(|s| !s.is_empty()), "{f} in {v}");
    }
    assert!(v["flags"].as_str().unwrap().contains("-O3"), "{v}");
}

#[test]
fn a_program_too_large_for_memory_is_refused_before_anything_is_allocated() {
    let d = tempfile::tempdir().unwrap();
    let prog = write(
        d.path(),
        "huge.teml",
        "N = 3000000\nA = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\ncodegen(l)\n",
    );
    // Its own cache, to count what was compiled.
    let o = Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(["run", prog.to_str().unwrap()])
        .env("TEML_CACHE_DIR", d.path().join("cache"))
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(err.contains("expected a run that fits in memory, found one that needs about"), "{err}");
    assert!(err.contains("GB are available: give smaller -D constants"), "{err}");
    // refused before anything ran: nothing was compiled
    let compiled =
        walk(&d.path().join("cache")).into_iter().filter(|p| p.extension().is_some_and(|e| e == "so"));
    assert_eq!(compiled.count(), 0);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.flatten().flat_map(|e| if e.path().is_dir() { walk(&e.path()) } else { vec![e.path()] }).collect()
}

/// A compiler without OpenMP gets a hint: how to install it, or how to compile without it.
#[test]
fn a_compiler_without_openmp_gets_a_hint() {
    let d = tempfile::tempdir().unwrap();
    let cc = write(
        d.path(),
        "noompcc",
        "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in -fopenmp) echo \"clang: error: unsupported option '-fopenmp'\" >&2; exit 1;; esac; done\nexec gcc \"$@\"\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cc, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_teml"))
            .args(["run", "examples/mm.teml", "-D", "N=8"])
            .args(extra)
            .env("CC", &cc)
            .env("TEML_CACHE_DIR", d.path().join("cache"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap()
    };
    let o = run(&[]);
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(
        err.contains("unsupported option '-fopenmp'")
            && err.contains("hint: this C compiler has no usable OpenMP"),
        "{err}"
    );
    assert!(err.contains("--cflags \"-O3 -march=native\""), "{err}");
    // ... and the hint works
    let o = run(&["--cflags", "-O3 -march=native"]);
    let (out, err) = text(&o);
    assert!(o.status.success() && out.contains("verified"), "{out}{err}");
}

/// Kernels are named by the last string of their `codegen`, else by their nests; a name used
/// twice gets `_2`. The names are the same in text, JSON and C.
#[test]
fn kernels_have_stable_names() {
    let d = tempfile::tempdir().unwrap();
    let prog = write(
        d.path(),
        "names.teml",
        "A = tensor([N, N])\nB = eq(A, [i, j] -> [j, i])\nl = build(B)\nl2 = interchange(l, 1, 2)\n\
         codegen(l)\ncodegen(l2, \"swapped\")\ncodegen(l)\n",
    );
    let o = teml(&["run", prog.to_str().unwrap(), "-D", "N=8", "--json"], d.path());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let names: Vec<&str> =
        v["kernels"].as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["l", "swapped", "l_2"]);
    let o = teml(&["run", prog.to_str().unwrap(), "-D", "N=8", "--no-run"], d.path());
    let (c, _) = text(&o);
    assert!(c.contains("void teml_swapped(") && c.contains("void teml_l_2("), "{c}");
    let o = teml(&["run", prog.to_str().unwrap(), "-D", "N=8", "-q"], d.path());
    let (out, _) = text(&o);
    assert!(out.contains("kernel swapped (l2) at ") && out.contains("kernel l_2 (l) at "), "{out}");
    // `teml check` says which constants a run needs
    let o = teml(&["check", prog.to_str().unwrap()], d.path());
    let (out, _) = text(&o);
    assert!(o.status.success() && out.contains("leaves unbound: -D N=INT"), "{out}");
    // a name that is not a C identifier is refused at the statement
    let bad = write(
        d.path(),
        "bad.teml",
        "A = tensor([4])\nB = eq(A, [i] -> [i])\nl = build(B)\ncodegen(l, \"two words\")\n",
    );
    let o = teml(&["check", bad.to_str().unwrap()], d.path());
    let (_, err) = text(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("bad.teml:4:") && err.contains("C identifier"), "{err}");
}

/// An assignment whose operands carry an iterator that is neither in the result nor summed is
/// legal (eq. 16) but almost always a forgotten sum: both front-ends warn at its line without
/// changing its meaning, and `--deny-warnings` makes the warning an error.
#[test]
fn a_forgotten_sum_is_warned_about_at_its_line() {
    let d = tempfile::tempdir().unwrap();
    let teml_src = write(
        d.path(),
        "y.teml",
        "N = 6\nX = tensor([N, N])\nW = tensor([N, N])\nY = mul(X, W, [[i, k], [k, j]] -> [i, j])\nl = build(Y)\ncodegen(l)\n",
    );
    let rhai_src = write(
        d.path(),
        "y.rhai",
        "let X = tensor([N, N]);\nlet W = tensor([N, N]);\nlet Y = mul(X, W, [[i, k], [k, j]], [i, j]);\nlet l = build(Y);\ncodegen(l);\n",
    );
    let msg = "`k` is neither in the result nor summed: each Y[i][j] is written N times";
    for (f, at) in [(&teml_src, "y.teml:4:5"), (&rhai_src, "y.rhai:3:5")] {
        let f = f.to_str().unwrap();
        let o = teml(&["run", f, "-D", "N=6"], d.path());
        let (out, err) = text(&o);
        assert!(o.status.success(), "{out}{err}");
        assert!(err.contains("warning: ") && err.contains(at) && err.contains(msg), "{err}");
        // The meaning is unchanged: it still verifies against the same statement.
        assert!(out.contains("verified"), "{out}");
        let o = teml(&["check", f, "-D", "N=6", "--deny-warnings"], d.path());
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("error: ") && err.contains(msg) && err.contains("(--deny-warnings)"), "{err}");
    }
    // A sum, or an update of its own target, is not warned about.
    let sum = write(
        d.path(),
        "c.teml",
        "N = 6\nX = tensor([N, N])\nW = tensor([N, N])\nC = contract(X, W, [2, 1])\nm = tensor([N])\n\
         s = @m: max(m, X, [[i], [i, k]] -> [i])\n",
    );
    let o = teml(&["check", sum.to_str().unwrap(), "--deny-warnings"], d.path());
    let (out, err) = text(&o);
    assert!(o.status.success() && !err.contains("warning"), "{out}{err}");
}

/// A call nested in a call's arguments, in the paper's syntax, says that arguments are names
/// or literals there and that the Rhai front-end allows nesting.
#[test]
fn a_nested_call_in_the_papers_syntax_says_how_to_write_it() {
    let d = tempfile::tempdir().unwrap();
    let f = write(d.path(), "n.teml", "A = tensor([4])\nl = build(eq(A, [i] -> [i]))\n");
    let o = teml(&["check", f.to_str().unwrap()], d.path());
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("found `(`: in the paper's syntax a call's arguments are names or literals")
            && err.contains("the Rhai front-end (`.rhai`) allows nested calls")
            && err.contains("n.teml:2:13"),
        "{err}"
    );
}

/// `teml run` on a search space runs one point and says so, with the command that searches it.
#[test]
fn running_a_space_says_which_point_and_suggests_tune() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("p.teml"),
        "N = 8\nA = tensor([N, N])\nB = tensor([N, N])\nC = einsum(\"ik,kj->ij\", [A, B])\nl = build(C)\n",
    )
    .unwrap();
    let space = d.path().join("s.rhai");
    std::fs::write(
        &space,
        "// program: p.teml\nlet p = stripmine(l, 1, param(\"s\", [2, 4]));\ncodegen(p);\n",
    )
    .unwrap();
    let s = space.to_str().unwrap();
    let out = teml(&["run", s, "-q"], d.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(
            "is a search space (1 parameter): this run takes one point, each at its first choice: s=2"
        ),
        "{err}"
    );
    assert!(err.contains(&format!("`teml tune {s}` searches it")), "{err}");
    let out = teml(&["run", s, "-q", "--param", "s=4"], d.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("at --param's choices, the others at their first: s=4"), "{err}");
    // A program without parameters says nothing of the kind.
    let out = teml(&["run", d.path().join("p.teml").to_str().unwrap(), "-q"], d.path());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("search space"));
}
