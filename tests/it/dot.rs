//! Dot-product groups (`dot`, docs/types.md): a register tile's reduction summed in pairs of
//! bf16 or quads of bytes, through every form the helper holds (the host's instructions, the
//! narrower widths, AVX2's `vpmaddwd`, plain C), each verified; the instruction in the object
//! where the host has it (skipped, and said, where it has not); a wrong pairing caught; the
//! refusals; `teml auto`'s choice by the machine's flags.

use crate::common::*;
use std::path::Path;

/// A tiled matrix product of `a` x `b` into `c` with a partial last block of rows, of columns
/// and of k groups (K = 70: 35 pairs, 17 quads and 2; k blocks of 33), then `tail` (the
/// statements from `l2`, ending in `codegen`).
fn tiled_then(a: &str, b: &str, c: &str, tail: &str) -> String {
    format!(
        "M = 21\nN = 40\nK = 70\nA = tensor({a}, [M, K])\nB = tensor({b}, [K, N])\nC = tensor({c}, [M, N])\n\
         C = contract(A, B, [[2, 1]])\nl = build(C)\nl1 = register_tile(l, C, 6, 32, 33, 2)\n{tail}"
    )
}

/// [`tiled_then`] with B packed and the reduction in groups by `dot`.
fn tiled(a: &str, b: &str, c: &str, dot: &str) -> String {
    tiled_then(a, b, c, &format!("l2 = pack(l1, 3, B)\nl3 = {dot}\ncodegen(l3)\n"))
}

/// B packed in the groups of the instruction (`pack`'s group): every form, every partial block
/// (the last group of each k block of 33 read past its end as zeros), verified.
#[test]
fn b_packed_in_groups_verifies_through_every_form() {
    let d = tempfile::tempdir().unwrap();
    let mut configs = vec![("x86-64", "128")];
    if host_has("avx2") {
        configs.splice(0..0, [("native", ""), ("native", "256"), ("x86-64-v3", "256")]);
    }
    for (a, b, c, g) in
        [("bf16", "bf16", "float", 2), ("u8", "i8", "i32", 4), ("i8", "u8", "i32", 4), ("i8", "i8", "i32", 4)]
    {
        let tail = format!("l2 = dot(l1, 5)\nl3 = pack(l2, 3, B, [1, 2], 1, {g})\ncodegen(l3)\n");
        let f = program(d.path(), &format!("g_{a}_{b}.teml"), &tiled_then(a, b, c, &tail));
        let every = a == "bf16" || (a, b) == ("u8", "i8");
        for (march, bits) in
            configs.iter().filter(|(m, b)| every || (*m, *b) == ("native", "") || *m == "x86-64")
        {
            let src = verified_c(d.path(), &f, march, bits);
            assert!(src.contains(&format!("in groups of {g} along its first dimension")), "{src}");
            assert!(src.contains(&format!("teml_dotg_{a}_{b}_")), "{src}");
            assert!(src.contains("its missing elements read as zeros"), "{src}");
        }
    }
    // The buffer's groups from the first k, the loop's from each k block's first: aligned
    // where the blocks are whole groups (kc 32), refused at the statement where not (kc 33).
    for (kc, ok_wanted) in [(32, true), (33, false)] {
        let src = tiled_then(
            "u8",
            "i8",
            "i32",
            "l2 = dot(l1, 5)\nl3 = pack(l2, 1, B, [1, 2], 1, 4)\ncodegen(l3)\n",
        )
        .replace("6, 32, 33, 2)", &format!("6, 32, {kc}, 2)"));
        let f = program(d.path(), &format!("align{kc}.teml"), &src);
        let (ok, out) = teml_env(d.path(), &[], &["run", &f]);
        assert_eq!(ok, ok_wanted, "{out}");
        if ok {
            assert!(out.contains(": verified"), "{out}");
        } else {
            assert!(
                out.contains("not a multiple of 4: pack it inside")
                    && out.contains(&format!("align{kc}.teml:")),
                "{out}"
            );
        }
    }
    // Groups read outside a `dot` loop, or by one of another group: refused.
    for (tail, want) in [
        (
            "l2 = pack(l1, 3, B, [1, 2], 1, 4)\ncodegen(l2)\n",
            "is read outside a `dot` loop: apply dot to its reduction first",
        ),
        ("l2 = dot(l1, 5)\nl3 = pack(l2, 3, B, [1, 2], 1, 2)\ncodegen(l3)\n", "in groups of 4, not 2"),
        (
            "l2 = dot(l1, 5)\nl3 = pack(l2, 3, B, [2, 1], 1, 4)\ncodegen(l3)\n",
            "its lanes would not be adjacent in the buffer",
        ),
        (
            "l2 = dot(l1, 5)\nl3 = pack(l2, 3, B, [1, 2], 1, 3)\ncodegen(l3)\n",
            "a group of 2 (bf16 pairs) or 4 (byte quads)",
        ),
    ] {
        let f = program(d.path(), "bad.teml", &tiled_then("u8", "i8", "i32", tail));
        let (ok, out) = teml_env(d.path(), &[], &["check", &f]);
        assert!(!ok && out.contains(want) && out.contains("bad.teml:"), "{want}: {out}");
    }
}

/// Runs program `f` compiled with `-march=<march>` at `bits`-bit lanes (empty: the host's),
/// asserts that it verified, and returns its C.
fn verified_c(dir: &Path, f: &str, march: &str, bits: &str) -> String {
    let emit = dir.join(format!("{}_{march}_{bits}.c", Path::new(f).file_stem().unwrap().to_str().unwrap()));
    let cflags = format!("-O3 -march={march} -fopenmp");
    let envs: Vec<(&str, &str)> = if bits.is_empty() { vec![] } else { vec![("TEML_VECTOR_BITS", bits)] };
    let (ok, out) =
        teml_env(dir, &envs, &["run", f, "--cflags", &cflags, "--emit-c", emit.to_str().unwrap()]);
    assert!(ok && out.contains(": verified"), "{f}, -march={march}, {bits} bits: {out}");
    std::fs::read_to_string(&emit).unwrap()
}

#[test]
fn every_pairing_verifies_in_dot_groups_through_every_form_of_its_helper() {
    if !cfg!(target_arch = "x86_64") {
        eprintln!("skipped: the forms below are x86-64's");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    // (-march, lanes): the host's instructions at its width, at 256 and 128 bits; AVX2 alone
    // (vpmaddwd; bf16 in plain C); SSE2 alone (plain C).
    let mut configs = vec![("x86-64-v3", "256"), ("x86-64", "128")];
    if host_has("avx2") {
        configs.splice(0..0, [("native", ""), ("native", "256"), ("native", "128")]);
    }
    for (a, b, c) in [
        ("bf16", "bf16", "float"),
        ("u8", "i8", "i32"),
        ("i8", "u8", "i32"),
        ("i8", "i8", "i32"),
        ("u8", "u8", "i32"),
    ] {
        let f = program(d.path(), &format!("mm_{a}_{b}.teml"), &tiled(a, b, c, "dot(l2, 5)"));
        // The first pairing of each instruction through every form; the others (the operands
        // swapped, no instruction) at the host's widest and through AVX2.
        let every = a == "bf16" || (a, b) == ("u8", "i8");
        for (march, bits) in
            configs.iter().filter(|(m, b)| every || (*m, *b) == ("native", "") || *m == "x86-64-v3")
        {
            let src = verified_c(d.path(), &f, march, bits);
            assert!(src.contains("in groups of") && src.contains(&format!("teml_dot_{a}_{b}_")), "{src}");
            assert!(src.contains("/* the last, partial group */"), "{src}");
        }
    }
}

/// The object holds the instruction where the host has it; where it has not, the test says so
/// and checks that the C still compiles for the host without it.
#[test]
fn the_host_instruction_is_in_the_object_where_the_host_has_it() {
    let d = tempfile::tempdir().unwrap();
    for (a, b, c, flag, insn) in [
        ("bf16", "bf16", "float", "avx512_bf16", "vdpbf16ps"),
        ("u8", "i8", "i32", "avx512_vnni", "vpdpbusd"),
    ] {
        let f = program(d.path(), &format!("mm_{a}.teml"), &tiled(a, b, c, "dot(l2, 5)"));
        let emit = d.path().join(format!("mm_{a}.c"));
        let (ok, out) = teml_env(d.path(), &[], &["run", &f, "--no-run", "--emit-c", emit.to_str().unwrap()]);
        assert!(ok, "{out}");
        let asm = d.path().join(format!("mm_{a}.s"));
        let o = std::process::Command::new("gcc")
            .args(["-O3", "-march=native", "-fopenmp", "-S", "-o"])
            .arg(&asm)
            .arg(&emit)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let asm = std::fs::read_to_string(&asm).unwrap();
        if host_has(flag) {
            assert!(asm.contains(insn), "{insn} not in the object on a host with {flag}");
        } else {
            eprintln!(
                "skipped: this host lacks {flag}: {insn} checked absent, the plain form compiled instead"
            );
            assert!(!asm.contains(insn));
        }
    }
}

/// A compiler that pairs x1 with y0 in every bf16 group (and x0 with y1): the products of the
/// wrong iterations, caught by verification in every form the host compiles.
#[test]
fn a_group_that_pairs_the_wrong_iterations_is_caught() {
    let d = tempfile::tempdir().unwrap();
    let cc = editing_cc(
        d.path(),
        "teml_dot_bf16",
        "s/, \\&A\\[\\([^]]*\\)\\]\\[k1\\], \\&A\\[\\([^]]*\\)\\]\\[k1+1\\]/, \\&A[\\1][k1+1], \\&A[\\2][k1]/g",
        false,
    );
    let f = program(d.path(), "swap.teml", &tiled("bf16", "bf16", "float", "dot(l2, 5)"));
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(["run", &f, "--threads", "1"])
        .env("TEML_CACHE_DIR", d.path().join("cache"))
        .env("CC", &cc)
        .output()
        .unwrap();
    let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(!o.status.success() && out.contains("MISMATCH"), "{out}");
}

#[test]
fn dot_refuses_what_it_cannot_group_and_an_instruction_the_machine_lacks() {
    let d = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &[&str]); 5] = [
        (
            "float",
            "dot(l2, 5)",
            &["dot", "cannot sum in dot-product groups", "float x float has no dot-product group"],
        ),
        ("bf16", "dot(l2, 7)", &["dot", "level"]),
        ("bf16", "dot(l2, 6)", &["dot", "is vectorized"]),
        (
            "bf16",
            "dot(l2, 5, \"avx512_vnni\")",
            &["bf16 x bf16 products are summed by vdpbf16ps (avx512_bf16)"],
        ),
        ("bf16", "dot(l2, 5, \"sse9\")", &["instruction", "one of avx512_bf16, avx512_vnni, avx_vnni"]),
    ];
    for (k, (ty, dot, want)) in cases.iter().enumerate() {
        let f = program(d.path(), &format!("bad{k}.teml"), &tiled(ty, ty, "float", dot));
        let (ok, out) = teml_env(d.path(), &[], &["check", &f]);
        assert!(!ok, "{dot}: {out}");
        assert!(out.contains(&format!("bad{k}.teml:")), "a location: {out}");
        for w in *want {
            assert!(out.contains(w), "{w}: {out}");
        }
    }
    // A machine whose flags lack the instruction: refused, naming the machine and the flag.
    let f = program(d.path(), "vnni.teml", &tiled("u8", "i8", "i32", "dot(l2, 5, \"avx512_vnni\")"));
    let (ok, out) = teml_env(d.path(), &[("TEML_MACHINE", "flags sse2 avx2 fma")], &["check", &f]);
    assert!(
        !ok && out.contains("vpdpbusd needs avx512_vnni, which this machine (") && out.contains("lacks"),
        "{out}"
    );
    let (ok, out) = teml_env(d.path(), &[("TEML_MACHINE", "flags avx2 avx512_vnni")], &["check", &f]);
    assert!(ok, "{out}");
}

/// `teml auto` sums a bf16 or u8 x i8 register tile in groups first where the machine's flags
/// list the instruction (B packed in them), bytes also where they list AVX2 (`vpmaddwd`), and
/// after the plain form (with the reason) where they list neither.
#[test]
fn auto_picks_the_groups_by_the_machines_flags() {
    let d = tempfile::tempdir().unwrap();
    let src = "N = 256\nA = tensor(u8, [N, N])\nB = tensor(i8, [N, N])\nC = tensor(i32, [N, N])\n\
               C = contract(A, B, [[2, 1]])\nl = build(C)\ncodegen(l)\n";
    let f = program(d.path(), "mm8.teml", src);
    let machine = "512-bit vectors, 32 vector registers, 2 cores, L1 48 KiB, L2 2048 KiB, L3 32768 KiB";
    for (flags, picked, grouped, why) in [
        (
            "flags avx2 avx512f avx512_vnni",
            true,
            true,
            "vpdpbusd adds 4 u8 x i8 products into each i32 lane (this machine has avx512_vnni)",
        ),
        (
            "flags avx2 fma",
            true,
            false,
            "vpmaddwd adds pairs of u8 x i8 products, widened to 16 bits, into each i32 lane (this machine has avx2, not the flags vpdpbusd needs)",
        ),
        ("flags sse2", false, false, "vpdpbusd needs avx512_vnni or avx_vnni, which this machine lacks"),
    ] {
        let out_dir = d.path().join(flags.replace(' ', "_"));
        let m = format!("{machine}, {flags}");
        let (ok, out) = teml_env(
            d.path(),
            &[("TEML_MACHINE", &m)],
            &["auto", &f, "--no-db", "--no-run", "--out", out_dir.to_str().unwrap()],
        );
        assert!(ok, "{out}");
        let path = std::fs::read_to_string(out_dir.join("auto.teml")).unwrap();
        assert_eq!(path.contains("= dot(l"), picked, "{flags}: {path}");
        // Where the instruction sums the groups, B is packed in them.
        assert_eq!(path.contains(", [1, 2], 1, 4)"), grouped, "{flags}: {path}");
        let space = std::fs::read_to_string(out_dir.join("space.rhai")).unwrap();
        assert!(space.contains(why), "{flags}: {space}");
    }
}

/// A convolution's gathered register block sums its channels `c` in quads where the machine
/// has VNNI (`kh` and `kw` inside each group), verified at a small size with a partial group.
#[test]
fn auto_sums_a_byte_convolutions_channels_in_groups() {
    let d = tempfile::tempdir().unwrap();
    let conv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/precision/conv_int8.teml");
    let m = "512-bit vectors, 32 vector registers, 2 cores, L1 48 KiB, L2 2048 KiB, L3 32768 KiB, flags avx2 avx512f avx512_vnni";
    let out_dir = d.path().join("conv");
    let (ok, out) = teml_env(
        d.path(),
        &[("TEML_MACHINE", m)],
        &[
            "auto",
            conv.to_str().unwrap(),
            "--no-db",
            "-D",
            "NB=1",
            "-D",
            "CI=18",
            "-D",
            "CO=32",
            "-D",
            "H=8",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    assert!(ok && out.contains(": verified"), "{out}");
    let path = std::fs::read_to_string(out_dir.join("auto.teml")).unwrap();
    assert!(path.contains("c in groups of 4: vpdpbusd") && path.contains("= dot(l"), "{path}");
}
