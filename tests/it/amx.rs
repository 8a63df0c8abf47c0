//! AMX tiles (`amx`, docs/types.md): a reduction's whole 32 x 32 blocks of the result summed
//! in tiles, the partial blocks and hosts without tiles through the dot groups. The tile form
//! runs here through `TEML_AMX_MODEL=1` (the tile instructions as C after Intel's pseudo-code)
//! on any host, for every pairing of operand types, verified; built for the real instructions
//! (`-mamx-*`) it runs them where the Linux kernel gives the tile state and the groups where
//! it does not (this is what a host without AMX checks); a dropped tile product is caught; the
//! refusals; `teml auto`'s choice where the machine has the flags.

use crate::common::*;

/// A machine with AMX (the rules and `amx` read its flags; the C follows the compiler's).
const AMX_MACHINE: &str = "512-bit vectors, 32 vector registers, 2 cores, L1 48 KiB, L2 1024 KiB, \
                           L3 32768 KiB, flags avx2 fma avx512f avx512bw avx512_bf16 avx512_vnni amx_tile amx_bf16 amx_int8";

/// A product of `a` x `b` into `c` in `amx_tile`'s blocks, B packed in groups of `g`: rows and
/// columns with a partial last block (80 = 2 x 32 + 16, 72 = 2 x 32 + 8), k blocks of `kc`
/// of which the last is not a whole tile where K is not (bytes: 200 = 128 + 72).
fn program_of(a: &str, b: &str, c: &str, g: usize, kc: usize, k: usize) -> String {
    format!(
        "M = 80\nN = 72\nK = {k}\nA = tensor({a}, [M, K])\nB = tensor({b}, [K, N])\nC = tensor({c}, [M, N])\n\
         C = contract(A, B, [[2, 1]])\nl = build(C)\nl1 = amx_tile(l, C, {kc}, 2)\n\
         l2 = pack(l1, 3, B, [1, 2], 1, {g})\ncodegen(l2)\n"
    )
}

const PAIRINGS: [(&str, &str, &str, usize, &str); 5] = [
    ("bf16", "bf16", "float", 2, "_tile_dpbf16ps"),
    ("u8", "i8", "i32", 4, "_tile_dpbusd"),
    ("i8", "u8", "i32", 4, "_tile_dpbsud"),
    ("i8", "i8", "i32", 4, "_tile_dpbssd"),
    ("u8", "u8", "i32", 4, "_tile_dpbuud"),
];

#[test]
fn every_pairing_verifies_in_tiles_through_the_model_and_in_groups_elsewhere() {
    let d = tempfile::tempdir().unwrap();
    for (a, b, c, g, insn) in PAIRINGS {
        let (kc, k) = if g == 2 { (64, 160) } else { (128, 200) };
        let f = program(d.path(), &format!("{a}_{b}.teml"), &program_of(a, b, c, g, kc, k));
        let emit = d.path().join(format!("{a}_{b}.c"));
        let envs = [("TEML_MACHINE", AMX_MACHINE), ("TEML_AMX_MODEL", "1")];
        let (ok, out) = teml_env(d.path(), &envs, &["run", &f, "--emit-c", emit.to_str().unwrap()]);
        assert!(ok && out.contains(": verified"), "{a} x {b}: {out}");
        let src = std::fs::read_to_string(&emit).unwrap();
        for want in [
            &format!("{insn}(3, 5, 7);")[..],
            "_tile_loadd(4, &A[",
            "_tile_stored(0, &C[",
            "TEML_AMX_MODEL=1",
            "in 4 AMX tiles across",
            // The partial blocks: the groups.
            &format!("in groups of {g}: one dot product a group"),
        ] {
            assert!(src.contains(want), "{a} x {b}: no `{want}` in\n{src}");
        }
        // Without the model: the tiles only where the compiler targets them.
        let (ok, out) = teml_env(
            d.path(),
            &[("TEML_MACHINE", AMX_MACHINE)],
            &["run", &f, "--emit-c", emit.to_str().unwrap()],
        );
        assert!(ok && out.contains(": verified"), "{a} x {b} without the model: {out}");
        let src = std::fs::read_to_string(&emit).unwrap();
        let kind = if g == 2 { "BF16" } else { "INT8" };
        assert!(
            src.contains(&format!("#ifdef TEML_AMX_{kind}")) && src.contains("ARCH_REQ_XCOMP_PERM"),
            "{src}"
        );
        assert!(!src.contains("TEML_AMX_MODEL"), "{src}");
    }
}

/// Built for the tile instructions: they are in the object; the run verifies either way (in
/// tiles where the Linux kernel gives their state, in groups where it refuses: no illegal
/// instruction on a host without AMX).
#[test]
fn built_for_the_tile_instructions_the_kernel_runs_verified_with_or_without_them() {
    if !cfg!(target_arch = "x86_64") {
        eprintln!("skipped: AMX is x86-64's");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let f = program(d.path(), "bf16.teml", &program_of("bf16", "bf16", "float", 2, 64, 160));
    let cflags = "-O3 -march=native -mamx-tile -mamx-bf16 -mamx-int8 -fopenmp";
    let (ok, out) = teml_env(d.path(), &[("TEML_MACHINE", AMX_MACHINE)], &["run", &f, "--cflags", cflags]);
    assert!(ok && out.contains(": verified"), "{out}");
    let emit = d.path().join("bf16.c");
    let (ok, out) = teml_env(
        d.path(),
        &[("TEML_MACHINE", AMX_MACHINE)],
        &["run", &f, "--no-run", "--emit-c", emit.to_str().unwrap()],
    );
    assert!(ok, "{out}");
    let obj = d.path().join("bf16.o");
    let cc = std::process::Command::new("cc")
        .args([
            "-O2",
            "-mamx-tile",
            "-mamx-bf16",
            "-mamx-int8",
            "-c",
            emit.to_str().unwrap(),
            "-o",
            obj.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(cc.status.success(), "{}", String::from_utf8_lossy(&cc.stderr));
    let dis = std::process::Command::new("objdump").arg("-d").arg(&obj).output().unwrap();
    let dis = String::from_utf8_lossy(&dis.stdout);
    assert!(dis.contains("tdpbf16ps") && dis.contains("tileloadd") && dis.contains("tilestored"), "{dis}");
    if host_has("amx_tile") && host_has("amx_bf16") {
        eprintln!("this host has amx_tile and amx_bf16: the run above summed in tiles");
    } else {
        eprintln!(
            "skipped: this host lacks amx_tile or amx_bf16, so the run above summed in groups (the tiles' run is checked through TEML_AMX_MODEL)"
        );
    }
}

/// A tile product left out (the fourth, C's tile at rows 16.., columns 16..) is caught.
#[test]
fn a_dropped_tile_product_is_caught() {
    let d = tempfile::tempdir().unwrap();
    let f = program(d.path(), "drop.teml", &program_of("bf16", "bf16", "float", 2, 64, 160));
    let cc = editing_cc(d.path(), "_tile_dpbf16ps(3, 5, 7)", "s/_tile_dpbf16ps(3, 5, 7);//", false);
    let cache = d.path().join("cache");
    let (ok, out) = teml_env(
        d.path(),
        &[
            ("TEML_MACHINE", AMX_MACHINE),
            ("TEML_AMX_MODEL", "1"),
            ("CC", cc.to_str().unwrap()),
            ("TEML_CACHE_DIR", cache.to_str().unwrap()),
        ],
        &["run", &f],
    );
    assert!(!ok && out.contains("MISMATCH") && out.contains("C[16][16]"), "{out}");
}

#[test]
fn amx_is_refused_where_the_machine_lacks_it_the_nest_is_no_block_or_b_is_not_in_groups() {
    let d = tempfile::tempdir().unwrap();
    let head = "M = 64\nN = 64\nK = 64\nA = tensor(bf16, [M, K])\nB = tensor(bf16, [K, N])\nC = tensor(float, [M, N])\n\
                C = contract(A, B, [[2, 1]])\nl = build(C)\n";
    let no_amx = "512-bit vectors, 32 vector registers, 2 cores, L1 48 KiB, L2 1024 KiB, L3 32768 KiB, flags avx2 fma avx512_bf16";
    let cases: [(&str, &str, &str, &str); 4] = [
        // No AMX: the machine named, what it lacks.
        (no_amx, "check", "l1 = amx_tile(l, C, 64, 2)\n", "lacks: its CPU flags have no `amx_tile`"),
        // The register tile's unrolled rows are no block of tiles.
        (
            AMX_MACHINE,
            "check",
            "l1 = register_tile(l, C, 8, 32, 64, 2)\nl2 = amx(l1, 5)\n",
            "is not a block of AMX tiles: expected exactly one loop",
        ),
        // Blocks of 8 rows: not a tile's 16.
        (
            AMX_MACHINE,
            "check",
            "l0 = stripmine(l, 1, 8)\nl1 = stripmine(l0, 3, 32)\nl2 = permute(l1, [1, 3, 5, 2, 4])\nl3 = amx(l2, 3)\n",
            "runs 8 iterations: expected blocks of 16 or 32",
        ),
        // B read in place: the tile loads need its groups.
        (
            AMX_MACHINE,
            "run",
            "l1 = amx_tile(l, C, 64, 2)\ncodegen(l1)\n",
            "must be read from a buffer packed in groups of 2",
        ),
    ];
    for (k, (machine, cmd, tail, want)) in cases.iter().enumerate() {
        let f = program(d.path(), &format!("bad{k}.teml"), &format!("{head}{tail}"));
        let (ok, out) = teml_env(d.path(), &[("TEML_MACHINE", machine)], &[cmd, &f]);
        assert!(!ok && out.contains(want) && out.contains(&format!("bad{k}.teml:")), "{want}: {out}");
    }
}

/// `teml auto` sums a bf16 or int8 product in tiles where the machine has them (the reason in
/// the path) and never offers them where it has not.
#[test]
fn auto_picks_the_tiles_where_the_machine_has_them() {
    let d = tempfile::tempdir().unwrap();
    for (example, insn) in [("mm_bf16", "_tile_dpbf16ps"), ("mm_int8", "_tile_dpbusd")] {
        let out_dir = d.path().join(example);
        let src = format!("examples/precision/{example}.teml");
        let args = ["auto", &src, "-D", "N=96", "--threads", "2", "--out", out_dir.to_str().unwrap()];
        let envs = [("TEML_MACHINE", AMX_MACHINE), ("TEML_AMX_MODEL", "1")];
        let (ok, out) = teml_env(d.path(), &envs, &args);
        assert!(ok && out.contains(": verified"), "{example}: {out}");
        let path = std::fs::read_to_string(out_dir.join("auto.teml")).unwrap();
        assert!(path.contains(&format!("tiles = amx: 32 x 32 blocks in four AMX tiles, {insn}")), "{path}");
        assert!(path.contains("= amx_tile(l, C, ") && path.contains("], 1, "), "{path}");
        let (ok, out) = teml_env(
            d.path(),
            &[(
                "TEML_MACHINE",
                "512-bit vectors, 32 vector registers, 2 cores, flags avx2 fma avx512_bf16 avx512_vnni",
            )],
            &["auto", &src, "-D", "N=96", "--no-run", "--out", out_dir.to_str().unwrap()],
        );
        assert!(ok, "{out}");
        let path = std::fs::read_to_string(out_dir.join("auto.teml")).unwrap();
        assert!(!path.contains("amx"), "{path}");
    }
}
