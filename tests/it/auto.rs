//! Automatic schedules as a user meets them, with the real binary and compiler, on kernels no
//! script of the repository covers: `teml auto` (the model's path with its reasons, verified,
//! replayed), `teml tune` on a program without `param` (the generated space, the learned model,
//! the tuning database), `--emit-space`, `auto_space(l)` in a hand-written space, and programs
//! the rules can do little with. No timing is asserted.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// A convolution with one group (no script here covers it): O[n][k][y][x] += I * F.
const CONV: &str = "NB = 2\nK = 8\nC = 3\nH = 6\nR = 3\n\
I = tensor([NB, C, H+R-1, H+R-1])\nF = tensor([K, C, R, R])\nO = tensor([NB, K, H, H])\ninit(O, 0)\n\
P = vmul(I, F, [[n, c, y+r, x+s], [k, c, r, s]])\nO = add(O, P, [[n, k, y, x], ] -> [n, k, y, x])\n\
l = build(O)\ncodegen(l)\n";

/// A tensor-times-matrix contraction, C[a][b][e] = sum_d A[a][d][e] B[d][b].
const TTM: &str = "NA = 6\nND = 10\nNE = 12\nA = tensor([NA, ND, NE])\nB = tensor([ND, NA])\n\
C = tensor([NA, NA, NE])\ninit(C, 0)\nP = vmul(A, B, [[a, d, e], [d, b]])\nC = add(C, P, [[a, b, e], ] -> [a, b, e])\n";

/// The machine every test here plans for, whatever the host (a 2-core Zen 5): the paths the
/// rules choose depend on the vector width, the registers, the cores and the caches. Vector
/// types of any width build and run on any host (a 512-bit vector is two 256-bit ones on AVX2).
pub const MACHINE: &str =
    "512-bit vectors, 32 vector registers, 2 cores, L1 48 KiB, L2 1024 KiB, L3 32768 KiB";

fn teml(dir: &Path, args: &[&str]) -> Output {
    teml_with(dir, args, &[])
}

/// `teml args` in `dir` planning for [`MACHINE`], with the variables `env` set after.
fn teml_with(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_teml"));
    c.args(args)
        .current_dir(dir)
        .env("TEML_MACHINE", MACHINE)
        .env_remove("TEML_VECTOR_BITS")
        .env("TEML_CACHE_DIR", crate::common::kernel_cache())
        .env("TEML_TUNING_DB", dir.join("tuning-db.jsonl"));
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn write(dir: &Path, name: &str, src: &str) -> String {
    std::fs::write(dir.join(name), src).unwrap();
    name.to_string()
}

/// `teml auto` on `src` (written to `name` in `dir`, the path to `a/`): it succeeds and
/// verifies; the path's text.
fn auto_verified(dir: &Path, name: &str, src: &str) -> String {
    let f = write(dir, name, src);
    let o = teml(dir, &["auto", &f, "--out", "a", "--no-db"]);
    let out = text(&o);
    assert!(o.status.success() && out.contains(": verified"), "{out}");
    std::fs::read_to_string(dir.join("a/auto.teml")).unwrap()
}

/// `teml auto --emit-space` on `src` (written as `name` in `dir`), without the database: it
/// succeeds; the space's text.
fn emitted_space(dir: &Path, name: &str, src: &str) -> String {
    let f = write(dir, name, src);
    let out = format!("{name}.rhai");
    let o = teml(dir, &["auto", &f, "--emit-space", &out, "--no-db"]);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::read_to_string(dir.join(out)).unwrap()
}

/// `teml run a/auto.teml` with `defines` (`-D` settings), its C emitted: it verifies; the C.
fn auto_c(dir: &Path, defines: &[&str]) -> String {
    let mut args = vec!["run", "a/auto.teml", "-q"];
    for d in defines {
        args.extend(["-D", d]);
    }
    args.extend(["--emit-c", "k.c"]);
    let o = teml(dir, &args);
    assert!(o.status.success() && text(&o).contains("verified"), "{}", text(&o));
    std::fs::read_to_string(dir.join("k.c")).unwrap()
}

/// `teml auto` on the shipped example `rel` (under examples/) with `-D` settings `defines`: it
/// succeeds and verifies; the path's text.
fn auto_example(dir: &Path, rel: &str, defines: &[&str]) -> String {
    auto_example_with(dir, rel, defines, &[])
}

/// [`auto_example`] with the variables `env` set.
fn auto_example_with(dir: &Path, rel: &str, defines: &[&str], env: &[(&str, &str)]) -> String {
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(rel);
    let mut args = vec!["auto", program.to_str().unwrap()];
    for d in defines {
        args.extend(["-D", d]);
    }
    args.extend(["--out", "a", "--no-db"]);
    let o = teml_with(dir, &args, env);
    let out = text(&o);
    assert!(o.status.success() && out.contains(": verified"), "{out}");
    std::fs::read_to_string(dir.join("a/auto.teml")).unwrap()
}

#[test]
fn auto_writes_a_verified_path_with_its_reasons_and_it_replays() {
    let d = tempfile::tempdir().unwrap();
    let f = write(d.path(), "conv.teml", CONV);
    let o = teml(d.path(), &["auto", &f, "--threads", "2", "--out", "a"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("teml auto: analytic model") && out.contains("verified") && out.contains("time:"),
        "{out}"
    );
    let path = std::fs::read_to_string(d.path().join("a/auto.teml")).unwrap();
    assert!(path.contains("# Chosen by `teml auto conv.teml`"), "{path}");
    // Every decision carries its reason; the block is on O: its 6-wide rows x fill a vector of
    // 8 badly, so the lanes are its 8 channels k, 36 apart, with F stored k-last.
    assert!(
        path.contains("#   sketch = gathered_block: a block of O in vector registers, k (8) in lanes"),
        "{path}"
    );
    assert!(path.contains("permute_layout(") && path.contains("F stored with k last"), "{path}");
    assert!(path.lines().filter(|l| l.starts_with("#   ") && l.contains(": ")).count() >= 4, "{path}");
    assert!(path.contains("register") || path.contains("registers("), "{path}");
    let space = std::fs::read_to_string(d.path().join("a/space.rhai")).unwrap();
    assert!(space.starts_with("// program: ../conv.teml\n"), "{space}");
    // The gathered block's rows: only x (level 4), the last loop of O. Rows y or n would leave
    // x inside the block, which `registers` refuses (every such point was rejected).
    let gathered = space.split("if sketch == \"gathered_block\"").nth(1).unwrap_or("");
    assert!(gathered.contains("let rows = param(\"rows\", [4]);"), "{space}");
    let o = teml(d.path(), &["run", "a/auto.teml", "-q"]);
    assert!(o.status.success() && text(&o).contains("verified"), "{}", text(&o));
}

#[test]
fn tune_without_param_searches_the_generated_space_records_it_and_auto_replays_the_best() {
    let d = tempfile::tempdir().unwrap();
    let f = write(d.path(), "ttm.teml", &format!("{TTM}l = build(C)\ncodegen(l)\n"));
    let args = [
        "tune",
        &f,
        "--budget",
        "5",
        "--strategy",
        "model",
        "--json",
        "--no-anchors",
        "--min-time",
        "0",
        "--leaders",
        "2",
        "--rounds",
        "1",
        "--threads",
        "2",
        "--out",
        "t",
    ];
    let o = teml(d.path(), &args);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    let notes = report["notes"].to_string();
    assert!(notes.contains("asks for no param") && notes.contains("space.rhai"), "{notes}");
    // A point of the generated space, or, at this toy size, the program as written where it
    // beat every point beyond the spreads (then said in a note).
    let key = report["best"]["key"].as_str().unwrap();
    assert!(
        key.contains("sketch=")
            || (key == "untransformed" && notes.contains("the winner is the program as written")),
        "{report}"
    );
    assert_eq!(report["strategy"], "model");
    let best = d.path().join("t/best.teml");
    let o = teml(d.path(), &["run", best.to_str().unwrap(), "-q"]);
    assert!(o.status.success() && text(&o).contains("verified"), "{}", text(&o));
    // Every measured candidate is in the database, with its workload, machine and path.
    let db = std::fs::read_to_string(d.path().join("tuning-db.jsonl")).unwrap();
    let records: Vec<Value> = db.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(!records.is_empty());
    for r in &records {
        assert_eq!(r["space"], "generated");
        assert!(r["workload"].as_str().unwrap().contains("a:6"), "{r}");
        assert!(r["median_s"].as_f64().unwrap() > 0.0);
        if r["as_written"] == true {
            // The program as written won the final round: no choices, no path.
            assert!(
                r["path"].as_array().unwrap().is_empty() && r["params"].as_object().unwrap().is_empty(),
                "{r}"
            );
        } else {
            assert!(r["path"][0].as_str().unwrap().contains("build(C)"), "{r}");
            assert_eq!(r["features"].as_array().unwrap().len(), 20);
        }
    }
    let as_written = records.iter().filter(|r| r["as_written"] == true).count();
    assert_eq!(as_written, usize::from(key == "untransformed"), "{db}");
    // teml auto now replays the fastest record instead of asking the model.
    let o = teml(d.path(), &["auto", &f, "--no-run", "--out", "a"]);
    assert!(o.status.success() && text(&o).contains("teml auto: database"), "{}", text(&o));
    // Records made with other rules, another space, compiler or flags (another fingerprint)
    // are never replayed: the model's pick, with a note.
    let stale: String = records
        .iter()
        .map(|r| {
            assert_eq!(r["fingerprint"].as_str().unwrap().len(), 16, "{r}");
            let mut r = r.clone();
            r["fingerprint"] = Value::from("0000000000000000");
            format!("{r}\n")
        })
        .collect();
    let stale_db = d.path().join("stale.jsonl");
    std::fs::write(&stale_db, stale).unwrap();
    let o = teml(d.path(), &["auto", &f, "--no-run", "--out", "a-stale", "--db", stale_db.to_str().unwrap()]);
    assert!(o.status.success() && text(&o).contains("teml auto: analytic model"), "{}", text(&o));
    assert!(
        text(&o).contains("made with other rules, another space, compiler or flags: ignored"),
        "{}",
        text(&o)
    );
    // Where the fastest record is the program as written (a search whose every point it beat),
    // teml auto hands back the program itself, and it runs verified.
    let mut r = records.iter().find(|r| r["as_written"] != true).unwrap().clone();
    r["as_written"] = Value::Bool(true);
    r["params"] = serde_json::json!({});
    r["path"] = serde_json::json!([]);
    r["median_s"] = serde_json::json!(1e-9);
    std::fs::write(d.path().join("tuning-db.jsonl"), format!("{db}{r}\n")).unwrap();
    let o = teml(d.path(), &["auto", &f, "--out", "a2"]);
    assert!(
        o.status.success() && text(&o).contains("teml auto: database") && text(&o).contains("verified"),
        "{}",
        text(&o)
    );
    let written = std::fs::read_to_string(d.path().join("a2/auto.teml")).unwrap();
    assert!(
        written.contains("the program as written, which beat every point")
            && written.ends_with("codegen(l)\n"),
        "{written}"
    );
    // The same statements at another size: the records seed the search.
    let o = teml(
        d.path(),
        &[
            "tune",
            &f,
            "-D",
            "NE=20",
            "--budget",
            "2",
            "--json",
            "--no-anchors",
            "--min-time",
            "0",
            "--rounds",
            "1",
            "--out",
            "t2",
        ],
    );
    let report: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    assert!(report["notes"].to_string().contains("measured first"), "{report}");
    // Records of these statements at other sizes (at least six, with their features): the
    // learned model ranks the analytic model's points at a size the database has not seen,
    // and the path says which model chose; it runs verified.
    let measured: Vec<&Value> = records.iter().filter(|r| r["as_written"] != true).collect();
    let mut learn = String::new();
    for (k, factor) in [1.0, 1.2, 0.9, 1.1, 0.8, 1.3].iter().enumerate() {
        for r in &measured {
            let mut r = (*r).clone();
            r["median_s"] = serde_json::json!(r["median_s"].as_f64().unwrap() * factor);
            r["workload"] = Value::from(format!("{} (size {k})", r["workload"].as_str().unwrap()));
            learn.push_str(&format!("{r}\n"));
        }
    }
    let learn_db = d.path().join("learn.jsonl");
    std::fs::write(&learn_db, learn).unwrap();
    let o = teml(d.path(), &["auto", &f, "-D", "NE=16", "--out", "a3", "--db", learn_db.to_str().unwrap()]);
    let out = text(&o);
    assert!(
        o.status.success() && out.contains("teml auto: learned model (") && out.contains("verified"),
        "{out}"
    );
    let written = std::fs::read_to_string(d.path().join("a3/auto.teml")).unwrap();
    assert!(written.contains("from the learned model (gradient-boosted trees on"), "{written}");
    // Without them, the analytic model chooses, and says so.
    let o = teml(d.path(), &["auto", &f, "-D", "NE=16", "--no-run", "--out", "a4", "--no-db"]);
    assert!(text(&o).contains("teml auto: analytic model (the rules' order"), "{}", text(&o));
}

#[test]
fn the_emitted_space_is_a_script_to_edit_and_tune() {
    let d = tempfile::tempdir().unwrap();
    let f = write(d.path(), "conv.teml", CONV);
    let o = teml(d.path(), &["auto", &f, "--emit-space", "s/conv_space.rhai"]);
    assert!(o.status.success(), "{}", text(&o));
    let s = std::fs::read_to_string(d.path().join("s/conv_space.rhai")).unwrap();
    assert!(s.starts_with("// program: ../conv.teml\n"), "{s}");
    assert!(s.contains("param(\"sketch\", [\"gathered_block\", \"register_block\", \"loops\"])"), "{s}");
    assert!(s.contains("// loops: n (2, data-parallel)"), "{s}");
    // At its first choices it is teml auto's path; any other point runs too.
    for extra in [&[][..], &["--param", "sketch=register_block"][..], &["--param", "sketch=loops"][..]] {
        let mut args = vec!["run", "s/conv_space.rhai", "-q"];
        args.extend_from_slice(extra);
        let o = teml(d.path(), &args);
        assert!(o.status.success() && text(&o).contains("verified"), "{extra:?}: {}", text(&o));
    }
}

#[test]
fn a_hand_written_space_starts_from_auto_space_and_auto_continues_a_path() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "ttm.teml", &format!("{TTM}l = build(C)\n"));
    let space = "// program: ttm.teml\nlet p = auto_space(l);\n\
        if param(\"mine\", [false, true]) { p = unroll(p, depth(p)); }\ncodegen(p);\n";
    let f = write(d.path(), "space.rhai", space);
    let o = teml(
        d.path(),
        &[
            "tune",
            &f,
            "--budget",
            "3",
            "--strategy",
            "exhaustive",
            "--json",
            "--no-anchors",
            "--min-time",
            "0",
            "--rounds",
            "1",
            "--out",
            "t",
        ],
    );
    let report: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    assert_eq!(report["candidates"], 3, "{report}");
    let keys = std::fs::read_to_string(d.path().join("t/log.jsonl")).unwrap();
    assert!(keys.contains("sketch=") && keys.contains("mine="), "{keys}");
    let f = write(
        d.path(),
        "cont.rhai",
        "// program: ttm.teml\nlet q = auto(l);\nprint(history(q).len() > 1);\ncodegen(q);\n",
    );
    let o = teml(d.path(), &["run", &f, "-q"]);
    assert!(o.status.success() && text(&o).contains("true") && text(&o).contains("verified"), "{}", text(&o));
}

#[test]
fn programs_the_rules_can_do_little_with_still_get_a_valid_answer() {
    let d = tempfile::tempdir().unwrap();
    // Shapes of 1, and a kernel of one statement instance.
    let ones =
        "A = tensor([1, 1])\nB = tensor([1, 1])\nC = contract(A, B, [2, 1])\nl = build(C)\ncodegen(l)\n";
    let scalar =
        "A = tensor([1])\nB = tensor([1])\nS = add(A, B, [[i], [i]] -> [i])\nl = build(S)\ncodegen(l)\n";
    for (name, src) in [("ones.teml", ones), ("one.teml", scalar)] {
        let f = write(d.path(), name, src);
        let o = teml(d.path(), &["auto", &f, "--threads", "1", "--out", &format!("o_{name}")]);
        assert!(o.status.success() && text(&o).contains("verified"), "{name}: {}", text(&o));
    }
    // No kernel: a clear error.
    let f = write(d.path(), "none.teml", "A = tensor([4])\n");
    let o = teml(d.path(), &["auto", &f]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("expected a program with a codegen statement"), "{}", text(&o));
    // A corrupt database is reported and ignored.
    std::fs::write(d.path().join("tuning-db.jsonl"), "{not json\n{\"version\": 7}\n").unwrap();
    let f = write(d.path(), "conv.teml", CONV);
    let o = teml(d.path(), &["auto", &f, "--no-run"]);
    let out = text(&o);
    assert!(o.status.success() && out.contains("teml auto: analytic model"), "{out}");
    assert!(
        out.contains("1 line that do not parse (line 1)") && out.contains("1 record of another version"),
        "{out}"
    );
}

#[test]
fn the_repl_shows_the_automatic_path_with_its_reasons() {
    let d = tempfile::tempdir().unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_teml"))
        .arg("repl")
        .current_dir(d.path())
        .env("TEML_CACHE_DIR", crate::common::kernel_cache())
        .env("TEML_MACHINE", MACHINE)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    c.stdin
        .take()
        .unwrap()
        .write_all(format!("{TTM}l = build(C)\n:auto l\n:auto A\n:quit\n").as_bytes())
        .unwrap();
    let o = c.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("l: teml auto's path") && out.contains("  sketch = "), "{out}");
    assert!(out.contains("l1 = build(C)"), "{out}");
}

/// A chain of three matrix products written as one einsum (N^5 operations as written, 3 N^3
/// lifted): no script here covers it.
const CHAIN: &str = "N = 24\nA = tensor([N, N])\nB = tensor([N, N])\nC = tensor([N, N])\nD = tensor([N, N])\n\
X = einsum(\"ij,jk,kl,lm->im\", [A, B, C, D])\nl = build(X)\ncodegen(l)\n";

#[test]
fn a_product_of_four_operands_is_lifted_and_each_contraction_gets_the_rules() {
    let d = tempfile::tempdir().unwrap();
    let f = write(d.path(), "chain.teml", CHAIN);
    let o = teml(d.path(), &["auto", &f, "--threads", "2", "--out", "a", "--no-db"]);
    let out = text(&o);
    assert!(o.status.success() && out.contains("verified"), "{out}");
    let path = std::fs::read_to_string(d.path().join("a/auto.teml")).unwrap();
    // Lifted first (it saves far more than half the operations), in the cheapest order, and
    // every contraction scheduled on its own (through focus), the last one first.
    assert!(path.contains("#   form = lifted: X as single contractions"), "{path}");
    assert!(path.contains("#   contraction = [[0, 1], [0, 1], [0, 1]]"), "{path}");
    for c in ["c1_sketch", "c2_sketch", "c3_sketch"] {
        assert!(path.contains(&format!("#   {c} = ")), "{c}: {path}");
    }
    assert!(path.contains("lift(X, [[0, 1], [0, 1], [0, 1]], \"summed_first\")"), "{path}");
    assert!(path.contains("focus("), "{path}");
    // The space offers the product as written too, with the rules of a single nest.
    let space = std::fs::read_to_string(d.path().join("a/space.rhai")).unwrap();
    assert!(space.contains("let form = param(\"form\", [\"lifted\", \"as_written\"]);"), "{space}");
    assert!(space.contains("if form == \"as_written\" {"), "{space}");
    let o = teml(d.path(), &["run", "a/space.rhai", "--param", "form=as_written", "-q"]);
    assert!(o.status.success() && text(&o).contains("verified"), "{}", text(&o));
}

/// A batched sampled product (no script covers it): A[b][i][j] = E[b][j] * sum_k B[b][i][k] C[k][j],
/// the rows 20 (not a multiple of the blocks: 8 + 8 + 4) and the columns 40 (five vectors of 8
/// doubles), a batch of 3.
const SAMPLED: &str = "NB = 3\nM = 20\nN = 40\nK = 12\nB = tensor([NB, M, K])\nC = tensor([K, N])\n\
E = tensor([NB, N])\nA = einsum(\"bik,kj,bj->bij\", [B, C, E])\nl = build(A)\ncodegen(l)\n";

#[test]
fn a_lifted_product_of_two_contractions_is_fused_block_by_block() {
    let d = tempfile::tempdir().unwrap();
    let path = auto_verified(d.path(), "sampled.teml", SAMPLED);
    // Lifted (B C first: 1.4x fewer operations), the two contractions in the same order, each
    // register-blocked alike, fused over the shared loops, the temporary a block at a time; the
    // 3 blocks of rows on threads, not collapsed with the batch: their last block is partial,
    // and a collapsed loop cannot be split where it starts (no block would keep registers).
    assert!(path.contains("#   form = lifted: A as single contractions"), "{path}");
    assert!(path.contains("which fuse"), "{path}");
    assert!(path.contains("fusion = fused: both contractions over i, b, j"), "{path}");
    assert!(path.contains("summed over k in registers"), "{path}");
    for step in ["register_block(", "fuse_inner(", "store_at(", "parallelize("] {
        let n = path.lines().filter(|l| l.contains(step) && !l.starts_with('#')).count();
        assert!(n >= 1, "{step}: {path}");
    }
    // The parameters' names carry the order's rank by operations (`o2_fusion`, `o2f_mr`: the
    // second cheapest, listed first because it fuses).
    assert!(path.contains("#   o2_fusion = fused"), "{path}");
    let space = std::fs::read_to_string(d.path().join("a/space.rhai")).unwrap();
    assert!(space.contains("let fusion = param(\"o2_fusion\", [\"fused\", \"apart\"]);"), "{space}");
    // The other order (C and E first) leaves i outside the temporary: fusing would compute it
    // once per row; it gets no fused branch.
    assert_eq!(space.matches("fusion\", [").count(), 1, "{space}");
    assert!(space.contains("param(\"o2f_parallel\", [\"outer\", \"collapse\", \"none\"])"), "{space}");
    let o = teml(d.path(), &["run", "a/auto.teml", "-q", "--emit-c", "k.c"]);
    assert!(o.status.success(), "{}", text(&o));
    let c = std::fs::read_to_string(d.path().join("k.c")).unwrap();
    assert!(c.contains("in two parts") && c.contains("in registers across"), "{c}");
    // Other points of the fused branch verify and take effect (a 6 x 16 block of the
    // temporary, a last, partial one of each); apart, the temporary stays whole in memory.
    let points: [(&[&str], &str, bool); 2] = [
        (&["o2f_mr=6", "o2f_nr=16", "o2f_parallel=outer"], "teml_A_1_local[6][16]", true),
        (&["o2_fusion=apart"], "_local[", false),
    ];
    for (params, needle, present) in points {
        let mut a = vec!["run", "a/space.rhai", "--emit-c", "k.c"];
        for x in params {
            a.extend(["--param", x]);
        }
        let o = teml(d.path(), &a);
        assert!(o.status.success() && text(&o).contains("verified"), "{params:?}: {}", text(&o));
        let c = std::fs::read_to_string(d.path().join("k.c")).unwrap();
        assert_eq!(c.contains(needle), present, "{params:?}: {c}");
    }
}

#[test]
fn entrywise_kernels_and_stencils_get_plain_loops_and_a_transposition_does_not() {
    // Every element used once, in order: no register block, no tiles (a fused multiply-add of
    // three matrices, 128 x 136).
    let d = tempfile::tempdir().unwrap();
    let src = "M = 128\nN = 136\nA = tensor([M, N])\nB = tensor([M, N])\nC = tensor([M, N])\n\
p = ventrywise_mul(A, B)\nD = entrywise_add(p, C)\nl = build(D)\ncodegen(l)\n";
    let path = auto_verified(d.path(), "fma.teml", src);
    assert!(path.contains("#   sketch = loops: every element is used once"), "{path}");
    assert!(path.contains("#   tile = 0: no tiles"), "{path}");
    assert!(!path.contains("registers(") && !path.contains("unroll("), "{path}");
    // A stencil: rows share nothing a block could keep (neighbouring rows come from the
    // cache), and three rows fit the cache: plain loops, no tiles.
    let d = tempfile::tempdir().unwrap();
    let src = "M = 130\nN = 138\nA = tensor([M, N])\nr0 = vadd(A, A, [[i, j], [i, j+1]])\n\
r1 = vadd(r0, A, [, [i+1, j]])\nB = div(r1, 3.0, [, ] -> [i, j])\nl = build(B)\ncodegen(l)\n";
    let path = auto_verified(d.path(), "stencil.teml", src);
    assert!(path.contains("#   sketch = loops: no reduction for a block of registers"), "{path}");
    assert!(path.contains("#   tile = 0: no tiles"), "{path}");
    // A transposition reads across rows: its element is not used in order.
    let d = tempfile::tempdir().unwrap();
    let src = "N = 72\nA = tensor([N, N])\nT = transpose(A, [[1, 2]])\nl = build(T)\ncodegen(l)\n";
    let path = auto_verified(d.path(), "t.teml", src);
    assert!(!path.contains("every element is used once"), "{path}");
}

#[test]
fn a_run_of_nests_that_share_a_loop_is_fused_where_another_nest_shares_none() {
    // A weight table without the element loop, then three nests over elements e (two
    // contractions and a scaling): no level is common to every pair, but the three element
    // nests share e and a (helm's shape, smaller and in two dimensions).
    let d = tempfile::tempdir().unwrap();
    let src = "E = 40\nN = 6\nS = tensor([N, N])\nw = tensor([N])\nu = tensor([E, N, N])\n\
s = vadd(w, w, [[a], [b]])\nL = div(1.0, s, [, ] -> [a, b])\nt1 = einsum(\"ad,edb->eab\", [S, u])\n\
t2 = einsum(\"bd,ead->eab\", [S, t1])\nr = mul(L, t2, [[a, b], [e, a, b]] -> [e, a, b])\n\
l0 = build(L)\nl1 = build(t1)\nl2 = build(t2)\nl3 = build(r)\ncodegen(l0, l1, l2, l3)\n";
    let path = auto_verified(d.path(), "run.teml", src);
    assert!(path.contains("#   fuse = 2-4@2: l1 to l3 fused at level 2"), "{path}");
    assert!(path.contains("t1, t2 stored per iteration"), "{path}");
    assert_eq!(path.matches("fuse_outer(").count(), 2, "{path}");
    assert!(path.contains("store_at(") && path.contains("codegen("), "{path}");
}

#[test]
fn nests_of_a_kernel_are_fused_together_and_their_temporaries_stored_per_iteration() {
    // interp: t, w and v in three nests; every pair fuses at level 2 (e, a), and t and w are
    // read only by the later nests of the same iteration.
    let d = tempfile::tempdir().unwrap();
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/interp.teml");
    let o = teml(d.path(), &["auto", program.to_str().unwrap(), "-D", "E=16", "--out", "a", "--no-db"]);
    let out = text(&o);
    assert!(o.status.success() && out.contains("verified"), "{out}");
    let path = std::fs::read_to_string(d.path().join("a/auto.teml")).unwrap();
    assert!(path.contains("#   fuse = all@2: every nest fused at level 2"), "{path}");
    assert!(path.contains("#   contract = true"), "{path}");
    assert!(path.contains("store_at(") && path.contains("fuse_outer("), "{path}");
    // The other choices stay in the space: a pair, or nothing fused.
    let space = std::fs::read_to_string(d.path().join("a/space.rhai")).unwrap();
    assert!(
        space.contains("let fuse = param(\"fuse\", [\"all@2\", \"1+2@2\", \"each\", \"none\"]);"),
        "{space}"
    );
    for fuse in ["1+2@2", "each", "none"] {
        let o =
            teml(d.path(), &["run", "a/space.rhai", "-D", "E=16", "--param", &format!("fuse={fuse}"), "-q"]);
        assert!(o.status.success() && text(&o).contains("verified"), "{fuse}: {}", text(&o));
    }
}

#[test]
fn a_kernel_of_many_nests_keeps_every_nest_in_its_path() {
    // adi: twelve nests. A path whose kernel left some out would verify on the rest; every
    // tensor the program writes must be compared, but `p` and `q`, whose every value is read
    // after it is written (a temporary of each row's sweep), stored per block of rows.
    let d = tempfile::tempdir().unwrap();
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/polybench/adi.teml");
    let o = teml(
        d.path(),
        &["auto", program.to_str().unwrap(), "-D", "N=20", "-D", "TSTEPS=3", "--out", "a", "--no-db"],
    );
    let out = text(&o);
    assert!(o.status.success() && out.contains(": verified"), "{out}");
    for t in ["DX", "mul1", "a", "f", "v", "u"] {
        assert!(
            out.contains(&format!(" {t},")) || out.contains(&format!(" {t} ")),
            "{t} not compared: {out}"
        );
    }
    // Its sweeps: rows `i` around forward and backward recurrences over `j`, in blocks of rows
    // in lanes; `p` and `q`, which only the sweeps touch with the row first, each row writing
    // them before it reads them, stored per block of rows (transposed) in both sweeps.
    let path = std::fs::read_to_string(d.path().join("a/auto.teml")).unwrap();
    assert!(
        path.contains("#   n12_rows = ") && path.contains("each loop over j, j, j, j that carries"),
        "{path}"
    );
    assert!(path.contains("#   n12_transpose = block: p, q stored per block of rows"), "{path}");
    assert_eq!(path.matches("= store_at(").count(), 4, "{path}");
    assert!(path.contains(", \"q\", [2, 1])") && !path.contains("permute_layout("), "{path}");
    assert_eq!(path.matches("= interchange(").count(), 4, "{path}");
    // The buffers: one per block, its rows in lanes read and written as explicit vectors.
    let c = text(&teml(d.path(), &["run", "a/auto.teml", "-D", "N=20", "-D", "TSTEPS=3", "--no-run"]));
    assert_eq!(c.matches("double teml_p_local[N-1][").count(), 2, "{c}");
    assert!(
        c.contains("*(teml_d4 *)&teml_p_local[j][") || c.contains("*(teml_d8 *)&teml_p_local[j]["),
        "{c}"
    );
}

#[test]
fn a_matrix_product_among_several_nests_gets_its_register_tile() {
    // gemm: C *= beta, then C += alpha A B (a reduction of 80): unfused, each nest by its own
    // rules, first (fusing the scaling in would forbid the product's register tile).
    let d = tempfile::tempdir().unwrap();
    let path = auto_example(d.path(), "polybench/gemm.teml", &[]);
    assert!(
        path.contains("#   fuse = each: not fused: each nest by its own rules (1 matrix product"),
        "{path}"
    );
    assert!(path.contains("#   n2_sketch = register_tile"), "{path}");
}

#[test]
fn a_nest_fused_as_written_is_distributed_and_its_sum_reordered() {
    // covariance: the sum over the samples, the scaling and the mirroring fused under one
    // `i, j` as PolyBench writes them, the sum's `k` innermost (a column walk). The rules
    // distribute the nest (legal: isl) and give each part its own order: the sum as i k j.
    let d = tempfile::tempdir().unwrap();
    let args = ["-D", "M=40", "-D", "N=50"];
    let path = auto_example(d.path(), "polybench/covariance.teml", &["M=40", "N=50"]);
    assert!(path.contains("#   fuse = each: not fused: each nest by its own rules; lm distributed into 2 nests; lc distributed into 3 nests"), "{path}");
    assert!(path.contains("lc (i#1)'s loops reordered, j innermost"), "{path}");
    assert!(path.contains("#   n3d1_order = [1, 3, 2]: i k j (j innermost"), "{path}");
    assert!(path.contains("distribute("), "{path}");
    // The nest as written stays a choice of the space.
    let mut r = vec!["run", "a/space.rhai", "--param", "fuse=none", "-q"];
    r.extend(args);
    let o = teml(d.path(), &r);
    assert!(o.status.success() && text(&o).contains("verified"), "{}", text(&o));
}

#[test]
fn a_nest_that_stays_whole_gets_its_inner_reductions_in_lanes_and_its_carried_loop_unrolled() {
    // cholesky: no loop of it distributes or runs on threads (`j` and `i` carry dependences),
    // but its two inner sums over `k` are reductions into one element each: in lanes; the `j`
    // around the first, with a statement beside it, unrolled by 2.
    let d = tempfile::tempdir().unwrap();
    let path = auto_example(d.path(), "polybench/cholesky.teml", &["N=60"]);
    assert!(
        path.contains(
            "#   lanes = true: in lanes: k#1 (a reduction into A[i][j]), k#2 (a reduction into A[i][i])"
        ),
        "{path}"
    );
    assert!(path.contains("#   unroll = 2: j#1 by 2"), "{path}");
    let c = teml(d.path(), &["run", "a/auto.teml", "-D", "N=60", "--no-run"]);
    let c = text(&c);
    // The first sum in each unrolled copy and in the rest of `j`, the second sum once.
    assert_eq!(c.matches("#pragma omp simd reduction(+:").count(), 5, "{c}");
}

/// A recursive filter along each row (no script here covers it): a recurrence over `j` inside
/// independent rows `i`.
const SCAN: &str = "N = 40\nM = 30\nX = tensor([N, M])\nY = tensor([N, M])\n\
s0 = @Y: eq(X, [i, 0] -> [i, 0])\nm = vmul(0.5, Y, [, [i, j-1]])\ns1 = @Y: add(m, X, [, [i, j]] -> [i, j])\n\
l0 = build(s0, [[i]])\nl1 = build(s1, [[i], [j, 1, M-1]])\nl = around(i, [0, N-1], l0, l1)\ncodegen(l)\n";

#[test]
fn recurrences_over_independent_rows_run_a_block_of_rows_in_lanes() {
    // The rows `i` in blocks on threads; the recurrence over `j` interchanged outside the
    // block's rows, which run in lanes (each lane its own row's chain). Nothing loops around the
    // sweep, so Y and X keep their layout; Y, read by the sweep but its last column never read,
    // is the result: compared, never stored per block (by the rule or by code generation).
    let d = tempfile::tempdir().unwrap();
    let path = auto_verified(d.path(), "scan.teml", SCAN);
    assert!(
        path.contains("#   rows = ")
            && path.contains("each loop over j that carries a dependence interchanged outside"),
        "{path}"
    );
    assert!(path.contains("#   transpose = none: as declared"), "{path}");
    assert!(path.contains("= interchange(") && !path.contains("permute_layout"), "{path}");
    assert!(!path.contains("store_at"), "{path}");
    let c = text(&teml(d.path(), &["run", "a/auto.teml", "--no-run"]));
    // The block on threads, then j, then the block's rows in lanes.
    let par = c.find("#pragma omp parallel for").expect(&c);
    let j = c[par..].find("for (int j = 1;").expect(&c) + par;
    assert!(c[j..].find("#pragma omp simd").is_some_and(|s| s < c[j..].find("for (int i").unwrap()), "{c}");
    assert!(!c.contains("teml_Y_local"), "{c}");
    let o = teml(d.path(), &["run", "a/auto.teml"]);
    assert!(
        o.status.success() && text(&o).contains("verified") && text(&o).contains("compared Y"),
        "{}",
        text(&o)
    );
    // The program as written, too: its result is computed and compared, not dropped.
    let o = teml(d.path(), &["run", "scan.teml"]);
    assert!(o.status.success() && text(&o).contains("compared Y"), "{}", text(&o));
}

/// Projections of each column out of every later one (no script here covers it; gramschmidt's
/// shape without the normalization): a loop over columns `k`, each finishing its column and
/// then updating every column `j > k`.
const PROJECT: &str = "M = 48\nN = 40\nA = tensor([M, N])\nR = tensor([N, N])\ns = tensor([N])\n\
s0 = @s: add(0.0, 0.0, [, ] -> [k])\naa = vmul(A, A, [[i, k], [i, k]])\ns1 = @s: add(s, aa, [[k], ] -> [k])\n\
r1 = @R: add(0.0, 0.0, [, ] -> [k, j])\nqa = vmul(A, A, [[i, k], [i, j]])\nr2 = @R: add(R, qa, [[k, j], ] -> [k, j])\n\
qr = vmul(A, R, [[i, k], [k, j]])\nqd = vdiv(qr, s, [, [k]])\na0 = @A: sub(A, qd, [[i, j], ] -> [i, j])\n\
ls0 = build(s0, [[k]])\nls1 = build(s1, [[k]])\nlr1 = build(r1, [[k], [j]])\nlr2 = build(r2, [[k], [j]])\n\
la0 = build(a0, [[k], [j]])\nlj = around(j, [k+1, N-1], lr1, lr2, la0)\nl = around(k, [0, N-1], ls0, ls1, lj)\ncodegen(l)\n";

#[test]
fn column_steps_over_every_later_column_run_left_looking_in_blocks() {
    // The column's own statements sunk into the first later column, the later columns in
    // aligned blocks outside `k` (each block takes every earlier column's update while in
    // cache), `A` stored by columns, a block's columns after its first on threads.
    let d = tempfile::tempdir().unwrap();
    let path = auto_verified(d.path(), "project.teml", PROJECT);
    assert!(path.contains("#   left = 64: blocks of 64 columns outside k#1"), "{path}");
    assert!(path.contains("A stored by columns"), "{path}");
    for step in [
        "= split(",
        "= sink(",
        ", 1, \"first\", \"j\")",
        ", 2, 64, \"aligned\")",
        "= interchange(",
        "= permute_layout(",
        "= parallelize(",
        "= vectorize(",
    ] {
        assert!(path.contains(step), "{step}: {path}");
    }
    // The path replays, verified, at shapes whose blocks do not divide the columns.
    for (m, n) in [("M=48", "N=40"), ("M=17", "N=70"), ("M=5", "N=130")] {
        let o = teml(d.path(), &["run", "a/auto.teml", "-D", m, "-D", n, "--threads", "2"]);
        assert!(o.status.success() && text(&o).contains("verified"), "{m} {n}: {}", text(&o));
    }
    // The blocks outermost, `k` inside them, `A` by columns in the C.
    let c = text(&teml(d.path(), &["run", "a/auto.teml", "--no-run"]));
    let jo = c.find("for (int jo = 0;").expect(&c);
    assert!(c[jo..].find("for (int k = 0;").is_some(), "{c}");
    assert!(c.contains("teml_A_layout[k][i]"), "{c}");
}

/// A min-plus dynamic program (no script here covers it): D[i][j] = min(D[i][j], D[i][j-1]),
/// then min over the splits k of D[i][k] + D[k][j], which reads down column j.
const MIN_PLUS: &str = "N = 40\nD = tensor([N, N])\n\
s1 = @D: min(D, D, [[i, j], [i, j-1]] -> [i, j])\nsp = vadd(D, D, [[i, k], [k, j]])\n\
s2 = @D: min(D, sp, [[i, j], ] -> [i, j])\nl1 = build(s1, [[i], [j]])\n\
l2 = build(s2, [[i], [j], [k, i+1, j-1]])\nlj = around(j, [i+2, N-1], l1, l2)\n\
l = around(i, [N-2, 0, -1], lj)\ncodegen(l)\n";

#[test]
fn a_sum_down_a_column_is_turned_into_row_updates_in_lanes() {
    // The statement beside the splits' loop sinks into it at its last iteration (min updates
    // of one element commute), `k` goes outside `j`, the iteration that runs the sunk
    // statement is split off, and the rest of `j` (D[k][j] along a row) runs in lanes.
    let d = tempfile::tempdir().unwrap();
    let path = auto_verified(d.path(), "minplus.teml", MIN_PLUS);
    assert!(path.contains("#   sink = true: j#1's statements sunk into the sum"), "{path}");
    assert!(path.contains("D[k][j] is read along rows"), "{path}");
    for step in ["= sink(", "= interchange(", "= split(", "= vectorize("] {
        assert!(path.contains(step), "{step}: {path}");
    }
    let c = text(&teml(d.path(), &["run", "a/auto.teml", "--no-run"]));
    let k = c.find("for (int k = ").expect(&c);
    assert!(c[k..].contains("*(teml_d") || c[k..].contains("#pragma omp simd"), "{c}");
}

/// Gauss-Seidel in one dimension, in place over T steps (no script here covers it).
const SEIDEL_1D: &str = "T = 40\nN = 200\nA = tensor([N])\ns = vadd(A, A, [[i-1], [i]])\n\
s2 = vadd(s, A, [, [i+1]])\na = @A: div(s2, 3.0, [, ] -> [i])\nl1 = build(a, [[i, 1, N-2]])\n\
l = around(t, [0, T-1], l1)\ncodegen(l)\n";

#[test]
fn a_stencil_swept_in_place_over_time_is_skewed_and_tiled_across_time() {
    // Every loop carries a dependence: no threads, no lanes as written. Skewed (i by t), the
    // band is permutable and tiled on the aligned lattice, tiles outermost; the wavefront
    // variant (tiles of one wavefront on threads) verifies too.
    let d = tempfile::tempdir().unwrap();
    let path = auto_verified(d.path(), "seidel1d.teml", SEIDEL_1D);
    assert!(path.contains("#   sketch = time_tiles: every loop carries a dependence (t, i;"), "{path}");
    assert!(path.contains("= skew(") && path.contains(", 16, \"aligned\")"), "{path}");
    let o = teml(d.path(), &["run", "a/space.rhai", "-q", "--param", "wavefront=true", "--param", "tile=8"]);
    assert!(o.status.success() && text(&o).contains("verified"), "{}", text(&o));
}

/// A product through a scalar accumulator (no script here covers it): for each i, j:
/// t = 0; t += A[i][k] B[k][j] over k; C[i][j] = 2 t. The scalar pins `j`.
const SCALAR_SUM: &str = "N = 48\nA = tensor([N, N])\nB = tensor([N, N])\nC = tensor([N, N])\nt = scalar()\n\
z = @t: add(0.0, 0.0, [, ] -> [])\npr = vmul(A, B, [[i, k], [k, j]])\nu = @t: add(t, pr, [, ] -> [])\n\
w = @C: mul(t, 2.0, [, ] -> [i, j])\nlz = build(z)\nlu0 = build(u, [[i], [j], [k]])\n\
lu = around(k, [0, N-1], lu0)\nlw = build(w, [[i], [j]])\nlj = around(j, [0, N-1], lz, lu, lw)\n\
l = around(i, [0, N-1], lj)\ncodegen(l)\n";

#[test]
fn a_scalar_that_pins_a_loop_is_privatized_and_the_loop_scheduled() {
    // `t` privatized at `j` (one copy per iteration): `j` carries nothing more; its blocks go
    // on threads and the sum over `k` runs outside the block's `j`, which run in lanes.
    let d = tempfile::tempdir().unwrap();
    let path = auto_verified(d.path(), "scalar_sum.teml", SCALAR_SUM);
    assert!(path.contains("= privatize(") && path.contains(", 1, \"t\")"), "{path}");
    assert!(path.contains("= parallelize(") && path.contains("= vectorize("), "{path}");
    let space = std::fs::read_to_string(d.path().join("a/space.rhai")).unwrap();
    assert!(space.contains("// a scalar that pins a loop, one copy per iteration (privatize)"), "{space}");
}

/// A second-order recursive filter along each row (no script here covers it): the states
/// `y1`, `y2` reset per row, then Y[i][j] = X[i][j] + 0.5 y1 - 0.25 y2 along j.
const ROW_FILTER2: &str = "N = 40\nM = 36\nX = tensor([N, M])\nY = tensor([N, M])\ny1 = scalar()\ny2 = scalar()\n\
z1 = @y1: add(0.0, 0.0, [, ] -> [])\nz2 = @y2: add(0.0, 0.0, [, ] -> [])\na = vmul(0.5, y1, [, ])\n\
b = vmul(-0.25, y2, [, ])\nc = vadd(a, b, [, ])\nu = @Y: add(X, c, [[i, j], ] -> [i, j])\nv = @y2: eq(y1, -> [])\n\
w = @y1: eq(Y, [i, j] -> [])\nlz1 = build(z1)\nlz2 = build(z2)\nlu = build(u, [[i], [j]])\nlv = build(v)\n\
lw = build(w, [[i], [j]])\nlj = around(j, [0, M-1], lu, lv, lw)\nl = around(i, [0, N-1], lz1, lz2, lj)\ncodegen(l)\n";

#[test]
fn scalars_that_pin_one_loop_together_are_privatized_together() {
    // Privatizing `y1` alone leaves the rows `i` carried through `y2` (and the reverse): both
    // at once free them, and the path says so in one step.
    let d = tempfile::tempdir().unwrap();
    let path = auto_verified(d.path(), "row_filter2.teml", ROW_FILTER2);
    assert!(path.contains(", 1, \"y1\")") && path.contains(", 1, \"y2\")"), "{path}");
    let space = std::fs::read_to_string(d.path().join("a/space.rhai")).unwrap();
    assert!(space.contains("p = privatize(p, 1, \"y1\"); p = privatize(p, 1, \"y2\");"), "{space}");
}

/// Widest paths (max-min closure, no script here covers it): under each pivot k, every
/// W[i][j] = max(W[i][j], min(W[i][k], W[k][j])).
const WIDEST: &str = "N = 60\nW = tensor([N, N])\nm = vmin(W, W, [[i, k], [k, j]])\n\
s = @W: max(W, m, [[i, j], ] -> [i, j])\nl1 = build(s, [[k]])\nl = around(k, [0, N-1], l1)\ncodegen(l)\n";

#[test]
fn loops_carried_only_through_a_pivot_are_split_there_and_the_sides_run_free() {
    // `i` and `j` carry dependences only through row and column k: split before, at and after
    // the pivot, the sides of `i` on threads, the sides of `j` in lanes.
    let d = tempfile::tempdir().unwrap();
    let path = auto_verified(d.path(), "widest.teml", WIDEST);
    assert!(path.contains("#   pivot = true: split j at k, i at k"), "{path}");
    assert_eq!(path.matches("= split(").count(), 4, "{path}");
    assert_eq!(path.matches("= parallelize(").count(), 2, "{path}");
    assert!(path.matches("= vectorize(").count() >= 4, "{path}");
    let c = text(&teml(d.path(), &["run", "a/auto.teml", "--no-run"]));
    assert_eq!(c.matches("#pragma omp parallel for").count(), 2, "{c}");
}

/// A separable blur repeated over time (no script here covers it): a horizontal pass into B,
/// a vertical pass back into A, T times.
const BLUR_STEPS: &str = "T = 10\nN = 64\nA = tensor([N, N])\nB = tensor([N, N])\n\
h0 = vadd(A, A, [[i, j-1], [i, j]])\nh1 = vadd(h0, A, [, [i, j+1]])\nsb = @B: mul(h1, 0.25, [, ] -> [i, j])\n\
v0 = vadd(B, B, [[i-1, j], [i, j]])\nv1 = vadd(v0, B, [, [i+1, j]])\nsa = @A: mul(v1, 0.25, [, ] -> [i, j])\n\
l1 = build(sb, [[i, 1, N-2], [j, 1, N-2]])\nl2 = build(sa, [[i, 1, N-2], [j, 1, N-2]])\n\
l = around(t, [0, T-1], l1, l2)\ncodegen(l)\n";

#[test]
fn the_sweeps_inside_a_time_loop_run_on_threads_and_in_lanes() {
    // `t` carries the passes' dependences; inside it each pass's rows are data-parallel: on
    // threads, a team per pass, and each row in lanes.
    let d = tempfile::tempdir().unwrap();
    let path = auto_verified(d.path(), "blur_steps.teml", BLUR_STEPS);
    assert!(path.contains("#   threads = true: i#1, i#2 on threads"), "{path}");
    let c = text(&teml(d.path(), &["run", "a/auto.teml", "--no-run"]));
    let t = c.find("for (int t = 0;").expect(&c);
    assert_eq!(c[t..].matches("#pragma omp parallel for").count(), 2, "{c}");
    assert!(c[t..].contains("*(teml_d") || c[t..].contains("#pragma omp simd"), "{c}");
}

/// A 1-D convolution (FIR filter): the result has one data-parallel loop, so no rows for a
/// register block.
const FIR: &str = "N = 200\nK = 5\nX = tensor([N+K-1])\nF = tensor([K])\nY = tensor([N])\ninit(Y, 0)\n\
P = vmul(X, F, [[i+k], [k]])\nY = add(Y, P, [[i], ] -> [i])\nl = build(Y)\ncodegen(l)\n";

#[test]
fn a_result_with_one_data_parallel_loop_gets_a_block_of_lanes_across_the_reduction() {
    let d = tempfile::tempdir().unwrap();
    let path = auto_verified(d.path(), "fir.teml", FIR);
    assert!(path.contains("#   sketch = lane_block: Y contiguous in i"), "{path}");
    // i strip-mined, its block innermost in lanes, Y kept in registers across k.
    assert!(
        path.contains("stripmine(") && path.contains("vectorize(") && path.contains("registers("),
        "{path}"
    );
    // 200 is not a multiple of 32 lanes: the last block of 8 runs too and verifies.
    for nr in ["8", "16", "64"] {
        let o = teml(d.path(), &["run", "a/space.rhai", "--param", &format!("nr={nr}"), "-q"]);
        assert!(o.status.success() && text(&o).contains("verified"), "nr={nr}: {}", text(&o));
    }
}

/// Attention's scores, `Q K^T` per batch and head: the columns `j` run across K's rows.
const ATTN: &str = "B = 2\nH = 2\nS = 24\nD = 16\nQ = tensor([B, H, S, D])\nK = tensor([B, H, S, D])\n\
A = einsum(\"bhid,bhjd->bhij\", [Q, K])\nl = build(A)\ncodegen(l)\n";

#[test]
fn a_product_whose_second_operand_is_read_across_the_columns_is_blocked_with_it_stored_transposed() {
    // `register_tile` needs the columns in lanes of every operand (K[b][h][j][d] is strided
    // along j): the space offers no such point (the tune stopped on its first point), and the
    // block along j stores K with j last, converted once at entry.
    let d = tempfile::tempdir().unwrap();
    let path = auto_verified(d.path(), "attn.teml", ATTN);
    assert!(
        path.contains("#   sketch = register_block: A contiguous in j (data-parallel)")
            && path.contains("K stored with j last ([1, 2, 4, 3])"),
        "{path}"
    );
    assert!(path.contains("permute_layout(") && path.contains("register_block("), "{path}");
    let f = write(d.path(), "attn.teml", ATTN);
    let o = teml(d.path(), &["auto", &f, "--emit-space", "s.rhai"]);
    assert!(o.status.success(), "{}", text(&o));
    let space = std::fs::read_to_string(d.path().join("s.rhai")).unwrap();
    assert!(!space.contains("register_tile("), "{space}");
    let o = teml(d.path(), &["tune", &f, "--budget", "3", "--no-db", "--out", "t"]);
    let out = text(&o);
    assert!(o.status.success() && out.contains("best:"), "{out}");
}

#[test]
fn a_block_whose_rows_do_not_divide_keeps_its_rows_loop_off_a_collapsed_band() {
    // 10 output channels in blocks of 8 rows behind a batch of 2: collapsed with the batch,
    // the channels' blocks could not be split where the partial block starts, and its guards
    // would keep every block out of registers. The batch alone goes on threads.
    let d = tempfile::tempdir().unwrap();
    let src = CONV.replace("K = 8", "K = 10").replace("H = 6", "H = 8");
    let path = auto_verified(d.path(), "conv10.teml", &src);
    assert!(path.contains("#   sketch = register_block: O contiguous in x"), "{path}");
    assert!(path.contains("#   mr = 8:") && path.contains("#   parallel = outer:"), "{path}");
    let c = auto_c(d.path(), &[]);
    assert!(c.contains("in two parts") && c.contains("in registers across"), "{c}");
}

#[test]
fn a_batch_of_one_puts_the_second_loop_on_threads() {
    // A convolution of batch 1 (inference): the batch alone on threads would leave every core
    // but one idle. The channels' blocks go on threads instead, split where the partial block
    // starts (10 channels in blocks of 8), the full blocks in registers.
    let d = tempfile::tempdir().unwrap();
    let src = CONV.replace("NB = 2", "NB = 1").replace("K = 8", "K = 10").replace("H = 6", "H = 8");
    let path = auto_verified(d.path(), "conv1.teml", &src);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        eprintln!("NOTE: one core: no loop goes on threads to fill the others");
        return;
    }
    assert!(path.contains("#   parallel = second: k (10) on threads: n has 1 iteration"), "{path}");
    assert!(path.contains("p = parallelize(") && path.contains(", 2)\n"), "{path}");
    let c = auto_c(d.path(), &[]);
    assert!(c.contains("in two parts") && c.contains("in registers across"), "{c}");
    assert_eq!(c.matches("#pragma omp parallel for").count(), 2, "both parts on threads: {c}");
}

#[test]
fn recurrences_over_independent_rows_are_not_fused_away_from_their_lanes() {
    // deriche: four passes, each a recurrence along the rows or the columns of the image. Fused
    // (the three first passes share `i`), every core would run one row's chain at a time; apart,
    // each pass runs a block of rows in lanes (4096 x 2160: 77 ms fused, 26 ms apart; Zen 5).
    let d = tempfile::tempdir().unwrap();
    let path = auto_example(d.path(), "polybench/deriche.teml", &[]);
    assert!(
        path.contains("#   fuse = each: not fused: each nest by its own rules (4 nests of recurrences over independent rows"),
        "{path}"
    );
    assert!(!path.contains("fuse_outer("), "{path}");
}

#[test]
fn a_result_added_onto_is_never_offered_streaming_stores() {
    // `C[i][j] += P[i][j]` reads C's old values: `stream` refuses it, so the space offers no
    // such choice (it was the first point where C exceeds half the L3: a 4000 x 4000 update
    // got no path on an AMD EPYC with 32 MiB of L3). A result set once keeps the choice.
    let d = tempfile::tempdir().unwrap();
    let space = emitted_space(
        d.path(),
        "update.teml",
        "N = 64\nC = tensor([N, N])\nP = tensor([N, N])\nC = add(C, P, [[i, j], [i, j]] -> [i, j])\n\
         l = build(C)\ncodegen(l)\n",
    );
    assert!(space.contains("param(\"vectorize\"") && !space.contains("stream"), "{space}");
    let space = emitted_space(
        d.path(),
        "set.teml",
        "N = 64\nA = tensor([N, N])\nP = tensor([N, N])\nC = entrywise_add(A, P)\nl = build(C)\ncodegen(l)\n",
    );
    assert!(space.contains("param(\"stream\""), "{space}");
}

#[test]
fn a_vector_used_again_at_every_inner_iteration_is_no_reason_to_tile() {
    // A tensor times a vector, y[i][j] = sum_k A[i][j][k] x[k]: A (32 MiB) is read once, and x
    // (2 KiB) is used again at every `j`, so it stays in cache whatever `i` touches. Tiles cut
    // A's rows into pieces for nothing (2.8x slower than no tiles at 256^3; Zen 5).
    let d = tempfile::tempdir().unwrap();
    let f = write(
        d.path(),
        "ttv.teml",
        "I = 16\nJ = 1024\nK = 256\nA = tensor([I, J, K])\nx = tensor([K])\n\
         y = einsum(\"ijk,k->ij\", [A, x])\nl = build(y)\ncodegen(l)\n",
    );
    let o = teml(d.path(), &["auto", &f, "--out", "a", "--no-db", "--no-run"]);
    assert!(o.status.success(), "{}", text(&o));
    let path = std::fs::read_to_string(d.path().join("a/auto.teml")).unwrap();
    assert!(path.contains("#   sketch = loops:") && path.contains("#   tile = 0: no tiles"), "{path}");
}

#[test]
fn a_sum_into_one_element_innermost_runs_in_lanes() {
    // y[i][j] = sum_k A[i][j][k] x[k] as `i j k`: the sum over k is a reduction into y[i][j],
    // which the C compiler keeps scalar (it may not reorder a floating-point sum): marked, it
    // runs as a vector of partial sums (ttv at 256^3: 3.9 -> 2.5 ms, syrk's `C[i][j] += A[i][k]
    // * A[j][k]` 176 -> 35 ms; Zen 5).
    let d = tempfile::tempdir().unwrap();
    let src = "I = 5\nJ = 6\nK = 70\nA = tensor([I, J, K])\nx = tensor([K])\n\
               y = einsum(\"ijk,k->ij\", [A, x])\nl = build(y)\ncodegen(l)\n";
    let path = auto_verified(d.path(), "ttv.teml", src);
    assert!(path.contains("#   order = [1, 2, 3]: i j k"), "{path}");
    assert!(
        path.contains(
            "#   vectorize = true: the innermost loop in lanes where it is data-parallel or a reduction"
        ),
        "{path}"
    );
    let c = auto_c(d.path(), &[]);
    assert!(c.contains("#pragma omp simd reduction(+:"), "{c}");
    // A sum of two terms (a 2 x 2 pooling window innermost) is no vector's work: left alone
    // (8.7 ms in lanes against 3.5 ms as written at 16 x 64 x 56 x 56; Zen 5).
    let d = tempfile::tempdir().unwrap();
    let src = "N = 2\nC = 3\nH = 8\nR = 2\nI = tensor([N, C, 2*H, 2*H])\nF = tensor([R, R])\n\
               O = tensor([N, C, H, H])\ninit(O, 0)\nP = vmul(I, F, [[n, c, 2*h+r, 2*w+s], [r, s]])\n\
               O = add(O, P, [[n, c, h, w], ] -> [n, c, h, w])\nl = build(O)\ncodegen(l)\n";
    let path = auto_verified(d.path(), "pool.teml", src);
    assert!(path.contains("#   sketch = loops:") && path.contains("#   vectorize = true"), "{path}");
    assert!(!path.contains("vectorize("), "{path}");
}

#[test]
fn a_product_over_a_triangle_is_cut_into_square_tiles_with_a_register_tile_off_the_diagonal() {
    // The upper triangle of X^T X (j from i): no constant trip count for j, so no register tile
    // as written; in 48 x 48 tiles, those off the diagonal are rectangular products.
    // covariance at M=1200, N=1400: 61 -> 27-35 ms, the hand-tuned path 33-35 ms; correlation
    // (j from i + 1) 64 -> 32 ms (Zen 5, 2 threads). 200 is no multiple of 48: partial tiles.
    let d = tempfile::tempdir().unwrap();
    let src = "M = 200\nN = 70\nX = tensor([N, M])\nG = einsum(\"ki,kj->ij\", [X, X])\n\
               l = build(G, [[i, 0, M-1], [j, i, M-1]])\ncodegen(l)\n";
    let path = auto_verified(d.path(), "tri.teml", src);
    assert!(
        path.contains("#   sketch = triangle: G: a product over a triangle (j from i): 48 x 48 tiles"),
        "{path}"
    );
    assert!(
        path.contains("split(") && path.contains("distribute(") && path.contains("register_tile("),
        "{path}"
    );
    // Each row of tiles has one fewer than the row before: the tiles of a row on threads.
    assert!(path.contains("#   parallel = 2: each row's tiles (j) on threads"), "{path}");
    // Part of a distributed nest whose target is written again after it (correlation's `corr`,
    // mirrored in place), from i + 1.
    let d = tempfile::tempdir().unwrap();
    let path = auto_example(d.path(), "polybench/correlation.teml", &["M=200", "N=70"]);
    assert!(path.contains("_sketch = triangle: corr: a product over a triangle (j from i + 1)"), "{path}");
    // Too small a triangle for four rows of tiles: the rules of any nest.
    let d = tempfile::tempdir().unwrap();
    let path = auto_verified(d.path(), "small.teml", &src.replace("M = 200", "M = 100"));
    assert!(!path.contains("triangle"), "{path}");
}

#[test]
fn sums_in_a_fused_nest_run_in_lanes() {
    // gesummv: two dot products per row, fused at `i` with y's element (tmp and u stored per
    // row): as fused, their sums over j stayed scalar (0.81 ms at N=1300; 0.23 ms in lanes, the
    // hand-tuned path 0.50 ms; Zen 5).
    let d = tempfile::tempdir().unwrap();
    let path = auto_example(d.path(), "polybench/gesummv.teml", &["N=40"]);
    assert!(path.contains("#   fuse = all@1:"), "{path}");
    assert!(
        path.contains("#   sums = true: in lanes (vectors of partial sums): j#1 (a reduction into tmp[i]), j#2 (a reduction into u[i])"),
        "{path}"
    );
    let c = auto_c(d.path(), &["N=40"]);
    assert_eq!(c.matches("#pragma omp simd reduction(+:").count(), 2, "{c}");
    // A sum read down a column (A[j][i] along j) is not contiguous: not offered; sums shorter
    // than two vectors neither.
    let d = tempfile::tempdir().unwrap();
    let src = "N = 40\nA = tensor([N, N])\nx = tensor([N])\ny = einsum(\"ij,j->i\", [A, x])\n\
               z = einsum(\"ji,j->i\", [A, x])\nw = add(y, z, [[i], [i]] -> [i])\n\
               l1 = build(y)\nl2 = build(z)\nl3 = build(w)\ncodegen(l1, l2, l3)\n";
    let space = emitted_space(d.path(), "cols.teml", src);
    assert!(space.contains("j#1 (a reduction into y[i])") && !space.contains("j#2 (a reduction"), "{space}");
    let short = src.replace("N = 40", "N = 6");
    let space = emitted_space(d.path(), "short.teml", &short);
    assert!(!space.contains("param(\"sums\""), "{space}");
}

#[test]
fn a_product_is_tiled_over_the_loops_its_operands_share_and_an_operand_read_twice_is_not_packed() {
    // C[a][b][c][d] = sum_k A[a][b][k] B[k][c][d]: the inner loops c, d, k look like a matrix
    // product, but no operand is read along c and k: each row of such a tile would broadcast
    // the same element. No register tile; the block's rows are a row of A.
    let d = tempfile::tempdir().unwrap();
    let src = "N = 16\nK = 64\nA = tensor([N, N, K])\nB = tensor([K, N, N])\n\
C = einsum(\"abk,kcd->abcd\", [A, B])\nl = build(C)\ncodegen(l)\n";
    let path = auto_verified(d.path(), "abcd.teml", src);
    assert!(path.contains("#   sketch = register_block: C contiguous in d"), "{path}");
    assert!(path.contains("A one broadcast a row, B shared by every row"), "{path}");
    let space = std::fs::read_to_string(d.path().join("a/space.rhai")).unwrap();
    assert!(!space.contains("register_tile("), "{space}");
    // The Gram matrix X^T X: a register tile, but X is both operands, and packing rewrites
    // every access of it: no pack offered, and every point of the space verifies.
    let d = tempfile::tempdir().unwrap();
    let src =
        "M = 64\nN = 24\nX = tensor([M, N])\nG = einsum(\"ki,kj->ij\", [X, X])\nl = build(G)\ncodegen(l)\n";
    auto_verified(d.path(), "gram.teml", src);
    let space = std::fs::read_to_string(d.path().join("a/space.rhai")).unwrap();
    assert!(space.contains("register_tile(") && !space.contains("pack(p"), "{space}");
    let o = teml(d.path(), &["tune", "gram.teml", "--budget", "6", "--no-db", "--out", "t"]);
    assert!(o.status.success() && text(&o).contains("best:"), "{}", text(&o));
}

#[test]
fn a_temporary_whose_first_value_comes_from_before_the_kernel_is_never_offered_per_iteration() {
    // Row sums initialized before the kernel, then each row divided by its sum: the two nests
    // fuse at `i`, but `s` stored per iteration would lose its first value (set before the
    // kernel), which the script's `store_at` refuses: the space offers the fusion without it,
    // so its first point is legal, and `teml tune` times the untransformed build and its
    // winner from it (a generated space whose first point is refused is searched from the
    // first legal point one choice away, as `teml auto` does).
    let d = tempfile::tempdir().unwrap();
    let src = "M = 40\nN = 24\nA = tensor([M, N])\ns = tensor([M])\ninit(s, 0)\n\
s = add(s, A, [[i], [i, j]] -> [i])\nB = div(A, s, [[i, j], [i]] -> [i, j])\n\
l1 = build(s)\nl2 = build(B)\ncodegen(l1, l2)\n";
    let f = write(d.path(), "rownorm.teml", src);
    let o = teml(d.path(), &["auto", &f, "--emit-space", "space.rhai"]);
    assert!(o.status.success(), "{}", text(&o));
    let space = std::fs::read_to_string(d.path().join("space.rhai")).unwrap();
    assert!(space.contains("fuse_outer(p1, p2, 1)") && !space.contains("store_at"), "{space}");
    let o = teml(d.path(), &["run", "space.rhai", "-q"]);
    assert!(o.status.success() && text(&o).contains("verified"), "the first point: {}", text(&o));
    let o = teml(d.path(), &["tune", &f, "--budget", "3", "--no-db", "--out", "t"]);
    let out = text(&o);
    assert!(o.status.success() && out.contains("best:") && out.contains("untransformed build:"), "{out}");
    assert!(!out.contains("note: untransformed:"), "{out}");
    let o = teml(d.path(), &["run", "t/best.teml", "-q"]);
    assert!(o.status.success() && text(&o).contains("verified"), "{}", text(&o));
}

#[test]
fn teml_machine_pins_the_machine_planned_for_and_a_malformed_one_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let f = write(d.path(), "conv.teml", CONV);
    // The plan for an AVX2 machine of 16 registers, on any host: its 4-lane rows of x.
    let avx2 = "256-bit vectors, 16 vector registers, 2 cores, L1 32 KiB, L2 512 KiB, L3 8192 KiB";
    let o = teml_with(d.path(), &["auto", &f, "--out", "a", "--no-db"], &[("TEML_MACHINE", avx2)]);
    assert!(o.status.success() && text(&o).contains(": verified"), "{}", text(&o));
    let path = std::fs::read_to_string(d.path().join("a/auto.teml")).unwrap();
    assert!(path.contains(avx2) && path.contains("of up to 4 lanes"), "{path}");
    for bad in ["384-bit vectors", "2 cores, L1 32 KB"] {
        let o = teml_with(d.path(), &["run", &f, "-q"], &[("TEML_MACHINE", bad)]);
        let e = text(&o);
        assert!(!o.status.success() && e.contains("TEML_MACHINE: expected ") && e.contains("found `"), "{e}");
    }
}

#[test]
fn with_sixteen_registers_a_block_takes_fewer_vectors_a_row_so_that_all_its_rows_fit() {
    // gconv with a 7-wide output: the block's rows are w's 7, its lanes the channels o. With 16
    // registers (AVX2), 7 rows x 2 vectors = 14 accumulators, the weights' two vectors and a
    // broadcast do not fit: one vector a row. (The C's vectors follow TEML_MACHINE, not
    // TEML_VECTOR_BITS, which is set here to the other width.)
    let d = tempfile::tempdir().unwrap();
    let shape = ["NB=2", "G=2", "CO=16", "CI=4", "H=7", "KH=3"];
    let avx2 = "256-bit vectors, 16 vector registers, 2 cores, L1 32 KiB, L2 512 KiB, L3 8192 KiB";
    let avx512 = "512-bit vectors, 32 vector registers, 2 cores, L1 32 KiB, L2 1024 KiB, L3 32768 KiB";
    let plan = |machine: &str, bits: &str| {
        auto_example_with(
            d.path(),
            "gconv.teml",
            &shape,
            &[("TEML_MACHINE", machine), ("TEML_VECTOR_BITS", bits)],
        )
    };
    let p = plan(avx2, "512");
    assert!(p.contains("#   sketch = gathered_block") && p.contains("o (16) in lanes"), "{p}");
    assert!(
        p.contains("#   nr = 4: 4 lanes (1 vector) a row: 4 whole blocks; 7 rows of 1 accumulator each"),
        "{p}"
    );
    assert!(p.contains("#   mr = 7: 7 rows x 1 vector = 7 accumulators of 16 registers"), "{p}");
    // 32 registers: two vectors of 8 lanes a row, every row.
    let p = plan(avx512, "256");
    assert!(
        p.contains("#   nr = 16: ") && p.contains("#   mr = 7: 7 rows x 2 vectors = 14 accumulators of 32"),
        "{p}"
    );
}

#[test]
fn auto_exports_its_path_at_the_sizes_it_was_chosen_at() {
    let d = tempfile::tempdir().unwrap();
    let src =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mm.teml")).unwrap();
    let f = write(d.path(), "mm.teml", &src);
    let o = teml(
        d.path(),
        &[
            "auto",
            &f,
            "-D",
            "N=48",
            "--no-run",
            "--no-db",
            "--out",
            "a",
            "--export",
            "lib",
            "--export-name",
            "mm",
        ],
    );
    assert!(o.status.success() && text(&o).contains("mm: exported to lib"), "{}", text(&o));
    let header = std::fs::read_to_string(d.path().join("lib/mm.h")).unwrap();
    assert!(header.contains("N=48") || header.contains("N = 48"), "{header}");
    // The path itself holds the size: replayed without -D, it runs at N=48.
    let path = std::fs::read_to_string(d.path().join("a/auto.teml")).unwrap();
    assert!(path.contains("N = 48  # chosen at N=48; the program's default: 512"), "{path}");
    // --export-name needs --export.
    let o = teml(d.path(), &["auto", &f, "--no-run", "--export-name", "mm"]);
    assert!(!o.status.success() && text(&o).contains("--export"), "{}", text(&o));
}
