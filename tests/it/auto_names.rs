//! Names Rhai reserves: the `.teml` front-end accepts a tensor or nest named `var`, `fn`, `in`,
//! `match`, ...; every script teml generates (the space of `teml auto` and `teml tune`) must
//! still parse and schedule it. Shipped kernels of each kind of rule (a register tile, fused
//! nests with a contracted temporary, a lifted contraction, a left-looking column loop), their
//! names renamed to such words: `teml auto` schedules each (no point of its space refused) and
//! verifies it; `teml tune` searches the space of one.

use std::path::Path;
use std::process::{Command, Output};

/// `teml` run in `dir` (its own kernel cache and database there).
fn teml_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(args)
        .current_dir(dir)
        .env("TEML_CACHE_DIR", crate::common::kernel_cache())
        .env("TEML_TUNING_DB", dir.join("tuning-db.jsonl"))
        .output()
        .unwrap()
}

/// `src` with the identifiers of `map` renamed (whole words, outside comments and strings).
fn rename(src: &str, map: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for line in src.lines() {
        if line.trim_start().starts_with('#') {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let (mut word, mut quoted) = (String::new(), false);
        let flush = |word: &mut String, out: &mut String| {
            let w = map.iter().find(|(from, _)| *from == word.as_str()).map_or(word.as_str(), |(_, to)| to);
            out.push_str(w);
            word.clear();
        };
        for c in line.chars() {
            if !quoted && (c.is_ascii_alphanumeric() || c == '_') {
                word.push(c);
                continue;
            }
            flush(&mut word, &mut out);
            if c == '"' {
                quoted = !quoted;
            }
            out.push(c);
        }
        flush(&mut word, &mut out);
        out.push('\n');
    }
    out
}

/// The program `rel` (under examples/) with `map` applied, written to `dir`; its file name.
fn renamed(dir: &Path, rel: &str, map: &[(&str, &str)]) -> String {
    let src =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(rel)).unwrap();
    let name = Path::new(rel).file_name().unwrap().to_str().unwrap().to_string();
    std::fs::write(dir.join(&name), rename(&src, map)).unwrap();
    name
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn renaming_helps_the_test_only_where_meant() {
    let src = "N = 4\nA = tensor([N, N])\n# A stays\nB = einsum(\"ij->ji\", [A])\nl = build(B)\n";
    assert_eq!(
        rename(src, &[("A", "var"), ("l", "let")]),
        "N = 4\nvar = tensor([N, N])\n# A stays\nB = einsum(\"ij->ji\", [var])\nlet = build(B)\n"
    );
}

/// A shipped program, its `-D` settings and its renaming.
type Kernel = (&'static str, &'static [&'static str], &'static [(&'static str, &'static str)]);

#[test]
fn tensors_and_nests_named_after_rhai_keywords_get_a_verified_auto_path() {
    let d = tempfile::tempdir().unwrap();
    let kernels: &[Kernel] = &[
        ("mm.teml", &["N=48"], &[("A", "var"), ("B", "fn"), ("C", "match"), ("l", "let")]),
        ("polybench/2mm.teml", &[], &[("tmp", "in"), ("D", "static"), ("P", "new"), ("l1", "do")]),
        ("mttkrp.teml", &["N=24"], &[("A", "this"), ("B", "shared"), ("l", "as")]),
        ("polybench/gramschmidt.teml", &["M=40", "N=30"], &[("R", "case"), ("Q", "default"), ("l", "fn")]),
    ];
    for (rel, defines, map) in kernels {
        let f = renamed(d.path(), rel, map);
        let out = format!("a-{}", f.trim_end_matches(".teml"));
        let mut args = vec!["auto", &f, "--no-db", "--threads", "2", "--out", &out];
        for x in defines.iter() {
            args.extend(["-D", x]);
        }
        let o = teml_in(d.path(), &args);
        let t = text(&o);
        assert!(o.status.success() && t.contains(": verified"), "{rel}: {t}");
        assert!(!t.contains("refused") && !t.contains("reserved"), "{rel}: {t}");
        assert!(!t.contains("found no legal point"), "{rel}: {t}");
        let space = std::fs::read_to_string(d.path().join(&out).join("space.rhai")).unwrap();
        assert!(space.contains("lookup(\""), "{rel}: {space}");
    }
    // teml tune searches the generated space of a program with such names
    let f = renamed(d.path(), "mm.teml", &[("A", "var"), ("B", "fn"), ("C", "match"), ("l", "let")]);
    let o = teml_in(
        d.path(),
        &["tune", &f, "-D", "N=48", "--budget", "3", "--no-db", "--threads", "2", "--out", "t"],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    // Its scheduled points ran verified (the final round may still crown the program as
    // written at this toy size: a measurement, not a property of the names).
    let log = std::fs::read_to_string(d.path().join("t/log.jsonl")).unwrap();
    let scheduled = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["status"] == "ok" && r["key"].as_str().is_some_and(|k| k.contains("sketch=register_")));
    assert!(scheduled.count() >= 1, "{log}");
    let best = d.path().join("t/best.teml");
    let o = teml_in(d.path(), &["run", best.to_str().unwrap(), "-q"]);
    assert!(o.status.success() && text(&o).contains("verified"), "{}", text(&o));
}

/// A kernel whose nest a user already transformed (its operand packed transposed): the rules
/// read the operand as declared, and the lane block they offer first is one code generation
/// cannot realize (`A2[k1][i1]` is not contiguous in `i1` in the pack). `teml auto` refuses such
/// a point before writing it and takes the next; found by the fuzzer's `teml auto` check.
#[test]
fn an_auto_point_code_generation_cannot_realize_is_never_written() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("p.teml"),
        "A1 = tensor([2])\nA2 = tensor([2, 9])\nC3 = contract(A1, A2, [1, 1])\nl4 = build(C3)\n\
         l14 = pack(l4, 2, A2, [2, 1])\ncodegen(l14)\n",
    )
    .unwrap();
    let o = teml_in(d.path(), &["auto", "p.teml", "--no-db", "--threads", "2", "--out", "a"]);
    let t = text(&o);
    assert!(o.status.success() && t.contains(": verified"), "{t}");
    // the lane block (C3 in registers across k1) was tried first and refused
    assert!(t.contains("2 points tried"), "{t}");
    let path = std::fs::read_to_string(d.path().join("a/auto.teml")).unwrap();
    assert!(!path.contains("registers("), "{path}");
}

/// Found by the fuzzer's `teml auto` check: a program that rebinds a name after building a
/// nest from it (`X9 = @A8: ...`, then `Y12 = @X9: ...` makes `X9` the tensor). The path starts
/// from the program's own nests (`fuse_outer(l10, l14, 1)`), never `build(X9)` again, and
/// replays verified.
#[test]
fn an_auto_path_over_a_rebound_name_replays() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("p.teml"),
        "A7 = tensor([4])\nA8 = tensor([4])\nX9 = @A8: sub(A7, 1.5, [[i], ] -> [i])\nl10 = build(X9)\n\
         A13 = tensor([4])\nY12 = @X9: add(X9, A13, [[i], [i]] -> [i])\nl14 = build(Y12)\ncodegen(l10, l14)\n",
    )
    .unwrap();
    let o = teml_in(d.path(), &["auto", "p.teml", "--no-db", "--threads", "2", "--out", "a"]);
    let t = text(&o);
    assert!(o.status.success() && t.contains(": verified"), "{t}");
    let path = std::fs::read_to_string(d.path().join("a/auto.teml")).unwrap();
    let tuned = path.split("# The tuned path").nth(1).unwrap_or_default();
    assert!(tuned.contains("= fuse_outer(l10, l14, 1)") && !tuned.contains("build("), "{path}");
    let o = teml_in(d.path(), &["run", "a/auto.teml", "-q"]);
    assert!(o.status.success() && text(&o).contains("verified"), "{}", text(&o));
}
