//! Element types besides double and float (docs/types.md): bf16, f16, i32, i8, u8 in both
//! syntaxes, through the seeded data, `-i`/`-o` files, transformations and `teml auto`, each
//! kernel verified within its accumulation type's bound (integers exactly); the warnings of
//! integer range and the refusals of mismatched data.

use crate::common::*;
use std::path::Path;
use teml::runtime::{NpyData, read_npy, write_npy_as};

/// A matrix product of `a` x `b` operands into `c` (or an undeclared result where `c` is
/// empty), tiled, vectorized and parallelized.
fn mm(a: &str, b: &str, c: &str, (m, n, k): (usize, usize, usize)) -> String {
    let declare = if c.is_empty() { String::new() } else { format!("C = tensor({c}, [M, N])\n") };
    format!(
        "M = {m}\nN = {n}\nK = {k}\nA = tensor({a}, [M, K])\nB = tensor({b}, [K, N])\n{declare}\
         C = contract(A, B, [[2, 1]])\nl = build(C)\nl1 = permute(l, [1, 3, 2])\nl2 = tile(l1, 8)\n\
         l3 = parallelize(l2, 1)\np = vectorize(l3, 6)\ncodegen(p)\n"
    )
}

fn run_ok(dir: &Path, file: &str, extra: &[&str]) -> String {
    let mut args = vec!["run", file, "--threads", "2"];
    args.extend_from_slice(extra);
    let o = teml_in(dir, &args);
    let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{out}");
    assert!(out.contains(": verified"), "{out}");
    out
}

#[test]
fn every_type_runs_transformed_and_verifies_in_its_accumulation_type() {
    let d = tempfile::tempdir().unwrap();
    let cases = [
        ("bf16", "bf16", "", "float"),
        ("bf16", "bf16", "bf16", "bf16"),
        ("f16", "f16", "float", "float"),
        ("u8", "i8", "", "exactly (integers)"),
        ("i8", "i8", "i32", "exactly (integers)"),
        ("i32", "i32", "i32", "exactly (integers)"),
        ("u8", "float", "", "float"),
    ];
    for (k, (a, b, c, how)) in cases.iter().enumerate() {
        let f = program(d.path(), &format!("mm{k}.teml"), &mm(a, b, c, (37, 45, 61)));
        let out = run_ok(d.path(), &f, &["--emit-c", d.path().join(format!("mm{k}.c")).to_str().unwrap()]);
        assert!(out.contains(how), "{a} x {b} -> {c}: {out}");
        let src = std::fs::read_to_string(d.path().join(format!("mm{k}.c"))).unwrap();
        if *a == "bf16" {
            assert!(src.contains("teml_bf16_to_float(A["), "{src}");
        }
        if *c == "bf16" {
            assert!(src.contains("teml_float_to_bf16("), "{src}");
        }
    }
}

#[test]
fn the_rhai_front_end_and_auto_take_the_types_too() {
    let d = tempfile::tempdir().unwrap();
    let f = program(
        d.path(),
        "mm.rhai",
        "const M = 48; const N = 64; const K = 40;\nlet A = tensor(bf16, [M, K]);\nlet B = tensor(bf16, [K, N]);\n\
         let C = contract(A, B, [2, 1]);\nlet l = build(C);\ncodegen(l);\n",
    );
    let out = run_ok(d.path(), &f, &[]);
    assert!(out.contains("float"), "{out}");
    for (a, b) in [("bf16", "bf16"), ("u8", "i8")] {
        let f = program(d.path(), &format!("auto_{a}.teml"), &mm(a, b, "", (64, 64, 64)));
        let o =
            teml_in(d.path(), &["auto", &f, "--threads", "2", "--out", d.path().join(a).to_str().unwrap()]);
        let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success() && out.contains(": verified"), "{out}");
    }
}

/// A compiler that drops the last term of every sum over `k1` at `-O3` (`k1 <= (K-1)` becomes
/// `k1 <= (K-2)`): one term of a thousand of a bf16 product summed in float.
#[test]
fn a_bf16_kernel_that_drops_one_term_of_a_thousand_is_caught() {
    let d = tempfile::tempdir().unwrap();
    let cc = editing_cc(d.path(), "k1 <= (K-1)", "s/k1 <= (K-1)/k1 <= (K-2)/", false);
    let f = program(
        d.path(),
        "drop.teml",
        "M = 8\nN = 8\nK = 1000\nA = tensor(bf16, [M, K])\nB = tensor(bf16, [K, N])\nC = tensor(float, [M, N])\n\
         C = contract(A, B, [[2, 1]])\nl = build(C)\ncodegen(l)\n",
    );
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(["run", &f, "--threads", "1"])
        .env("TEML_CACHE_DIR", d.path().join("cache"))
        .env("CC", &cc)
        .output()
        .unwrap();
    let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(!o.status.success(), "{out}");
    assert!(out.contains("MISMATCH") && out.contains("its rounding bound"), "{out}");
    // The same program with the real compiler verifies.
    run_ok(d.path(), &f, &[]);
}

#[test]
fn npy_files_carry_each_type_and_data_of_another_dtype_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let f = program(
        d.path(),
        "add.teml",
        "N = 6\nX = tensor(bf16, [N])\nY = tensor(u8, [N])\nZ = tensor(bf16, [N])\n\
         Z = add(X, Y, [[i], [i]] -> [i])\nl = build(Z)\ncodegen(l)\n",
    );
    let x = d.path().join("x.npy");
    let y = d.path().join("y.npy");
    let z = d.path().join("z.npy");
    write_npy_as(&x, &[6], &[1.0, 0.5, -2.0, 3.0, 1.0 / 3.0, 100.0], teml::ir::DType::Bf16).unwrap();
    write_npy_as(&y, &[6], &[1.0, 2.0, 3.0, 250.0, 0.0, 7.0], teml::ir::DType::U8).unwrap();
    let args = npy_args(&[("X", &x), ("Y", &y)], &[("Z", &z)]);
    let mut a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    a.insert(0, &f);
    run_ok(d.path(), a[0], &a[1..]);
    let got = read_npy(&z).unwrap();
    let NpyData::Bf16(bits) = &got.data else { panic!("{:?}", got.data) };
    // bf16 patterns: 2.0, 2.5, 1.0, 253.0, 1/3 (rounded), 107.0
    let want: Vec<u16> = [2.0f32, 2.5, 1.0, 253.0, 0.333_984_38, 107.0]
        .iter()
        .map(|v| half::bf16::from_f32(*v).to_bits())
        .collect();
    assert_eq!(bits, &want);
    // float64 data for a bf16 tensor: refused with both dtypes.
    teml::runtime::write_npy_f64(&x, &[6], &[0.0; 6]).unwrap();
    let o = teml_in(d.path(), &["run", &f, "-i", &format!("X={}", x.display())]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains(
            "expected dtype <u2 (uint16 (bf16 patterns)) for tensor `X`, declared bf16, found <f8 (float64)"
        ),
        "{err}"
    );
}

#[test]
fn integer_overflow_and_narrowing_are_warnings_at_their_lines() {
    let d = tempfile::tempdir().unwrap();
    let f = program(
        d.path(),
        "ov.teml",
        "M = 2\nK = 70000\nA = tensor(u8, [M, K])\nB = tensor(i8, [K, M])\nC = contract(A, B, [[2, 1]])\n\
         E = tensor(i32, [M, M])\nD = tensor(i8, [M, M])\nD = add(E, E, [[i, j], [i, j]] -> [i, j])\n\
         S = contract(A, A, [[2, 2]])\n",
    );
    let o = teml_in(d.path(), &["check", &f]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("ov.teml:5:5: an integer overflow: the value stored in `C` (i32) can reach 2.285e9"),
        "{err}"
    );
    assert!(err.contains("ov.teml:8:5: a narrowing: `D` is i8 (from -128 to 127)"), "{err}");
    // u8 x u8 over 70000 terms reaches 4.6e9: also past i32.
    assert!(err.contains("ov.teml:9:5: an integer overflow"), "{err}");
    let small = program(
        d.path(),
        "ok.teml",
        "M = 2\nK = 1000\nA = tensor(u8, [M, K])\nB = tensor(i8, [K, M])\nC = contract(A, B, [[2, 1]])\n",
    );
    let o = teml_in(d.path(), &["check", &small]);
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("warning"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = teml_in(d.path(), &["check", &f, "--deny-warnings"]);
    assert!(!o.status.success());
}

#[test]
fn an_unknown_element_type_names_every_type() {
    let d = tempfile::tempdir().unwrap();
    refused(
        d.path(),
        None,
        "bad.teml",
        "A = tensor(int4, [4])\n",
        &["bad.teml:1:", "expected an element type: double, float, bf16, f16, i32, i8, u8, found `int4`"],
    );
}

/// A register tile of a product of narrow operands: bf16 reads widened into float lanes, u8 and
/// i8 reads into i32 lanes (`teml_widen_...`, one conversion per vector of B), the result's
/// block in vector registers of the compute type; partial tiles and tails included, at the
/// host's vector width and at 128 and 512 bits (vector extensions of any width build on every
/// GCC target), each verified. A narrow result cannot be kept in lanes and says why; `teml
/// auto` takes the register tile for both.
#[test]
fn narrow_operands_are_read_widened_into_lanes_of_their_compute_type() {
    let d = tempfile::tempdir().unwrap();
    let cases = [
        ("bf16", "bf16", "float", "teml_widen_bf16_f"),
        ("u8", "i8", "i32", "teml_widen_i8_i32x"),
        ("i8", "u8", "i32", "teml_widen_u8_i32x"),
    ];
    for (k, (a, b, c, widen)) in cases.iter().enumerate() {
        let src = format!(
            "M = 37\nN = 45\nK = 61\nA = tensor({a}, [M, K])\nB = tensor({b}, [K, N])\nC = tensor({c}, [M, N])\n\
             C = contract(A, B, [[2, 1]])\nl = build(C)\np = register_tile(l, C, 4, 16, 32, 2)\ncodegen(p)\n"
        );
        let f = program(d.path(), &format!("rt{k}.teml"), &src);
        for bits in [None, Some("128"), Some("512")] {
            let c_file = d.path().join(format!("rt{k}_{}.c", bits.unwrap_or("host")));
            let c_path = c_file.to_str().unwrap();
            let (ok, out) = teml_bits(d.path(), bits, &["run", &f, "--threads", "2", "--emit-c", c_path]);
            assert!(ok && out.contains(": verified"), "{a} x {b} at {bits:?}: {out}");
            let code = std::fs::read_to_string(&c_file).unwrap();
            assert!(code.contains("static inline teml_") && code.contains(widen), "{code}");
            assert!(
                code.lines().any(|l| l.trim_start().starts_with("teml_C0 += ") && l.contains(widen)),
                "the register block multiplies widened lanes: {code}"
            );
        }
    }
    // A bf16 result: its lanes would be stored narrowed.
    let f = program(
        d.path(),
        "narrow.teml",
        "N = 64\nA = tensor(bf16, [N, N])\nB = tensor(bf16, [N, N])\nC = tensor(bf16, [N, N])\n\
         C = contract(A, B, [[2, 1]])\nl = build(C)\np = register_tile(l, C, 4, 16, 32, 2)\ncodegen(p)\n",
    );
    let o = teml_in(d.path(), &["check", &f]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("explicit vectors store double, float or i32 lanes, and `C` is bf16")
            && err.contains("narrow.teml:7:5"),
        "{err}"
    );
    // teml auto takes the register tile for bf16 and for u8 x i8.
    for (a, b) in [("bf16", "bf16"), ("u8", "i8")] {
        let f = program(
            d.path(),
            &format!("auto_{a}.teml"),
            &format!(
                "N = 128\nA = tensor({a}, [N, N])\nB = tensor({b}, [N, N])\nC = contract(A, B, [[2, 1]])\nl = build(C)\ncodegen(l)\n"
            ),
        );
        let out_dir = d.path().join(format!("auto_{a}"));
        let o =
            teml_in(d.path(), &["auto", &f, "--no-db", "--threads", "2", "--out", out_dir.to_str().unwrap()]);
        let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success() && out.contains(": verified"), "{out}");
        assert!(out.contains("sketch = register_tile"), "{out}");
    }
}
