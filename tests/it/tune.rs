//! `teml tune` with the real binary, the real compiler and real kernels: strategies on small
//! spaces, resuming from a log, shards, rejected candidates with their reasons, the replay
//! script, and `time(l)` in scripts. No timing is asserted.

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A small matrix product and a space of 3 x 2 x 2 = 12 points (orders of the first two loops
/// are all legal; the mark choices always are).
const MM: &str =
    "N = 12\nA = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\ncodegen(l)\n";
const SPACE: &str = "// program: mm.teml\n\
let p = permute(l, param(\"order\", [[1, 2, 3], [1, 3, 2], [3, 1, 2]]));\n\
if param(\"parallel\", [true, false]) { p = parallelize(p, 1); }\n\
if param(\"vectorize\", [false, true]) { p = vectorize(p, depth(p)); }\n\
codegen(p);\n";

fn setup(space: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("mm.teml"), MM).unwrap();
    std::fs::write(dir.path().join("space.rhai"), space).unwrap();
    dir
}

fn tune(dir: &Path, args: &[&str]) -> (Value, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_teml"))
        .arg("tune")
        .arg(dir.join("space.rhai"))
        .args([
            "--json",
            "--no-anchors",
            "--min-time",
            "0",
            "--leaders",
            "2",
            "--rounds",
            "2",
            "--threads",
            "2",
        ])
        .arg("--out")
        .arg(dir.join("out"))
        .args(args)
        .env("TEML_CACHE_DIR", dir.join("cache"))
        .env("TEML_TUNING_DB", dir.join("tuning-db.jsonl"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    (v, err)
}

fn log(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn keys(records: &[Value]) -> Vec<String> {
    records.iter().map(|r| r["key"].as_str().unwrap().to_string()).collect()
}

#[test]
fn exhaustive_search_measures_every_point_once_and_resumes_without_measuring() {
    let dir = setup(SPACE);
    let (r, _) = tune(dir.path(), &["--strategy", "exhaustive", "--budget", "100"]);
    assert_eq!(r["candidates"], 12, "{r}");
    assert_eq!(r["measured"], 12);
    assert_eq!(r["exhausted"], true);
    let first = log(&dir.path().join("out/log.jsonl"));
    let ks: BTreeSet<String> = keys(&first).into_iter().collect();
    assert_eq!(ks.len(), 12, "every point once");
    // k outermost in parallel: a reduction into an element that varies inside the loop.
    let illegal: Vec<&Value> = first.iter().filter(|x| x["status"] == "illegal").collect();
    assert_eq!(illegal.len(), 2, "{first:?}");
    assert!(illegal.iter().all(|x| x["key"].as_str().unwrap().starts_with("order=[3, 1, 2]; parallel=true")));
    assert!(illegal.iter().all(|x| x["reason"].as_str().unwrap().contains("cannot parallelize loop `k1`")));
    let ok: Vec<&Value> = first.iter().filter(|x| x["status"] == "ok").collect();
    assert_eq!(ok.len(), 10);
    assert!(
        ok.iter().all(|x| x["verification"].as_str().unwrap().starts_with("full size")
            && x["median_s"].as_f64().is_some())
    );
    assert_eq!(r["rejected"]["illegal"], 2);
    // The best was re-measured in rounds, and is one of the candidates.
    let best = &r["best"];
    assert!(ks.contains(best["key"].as_str().unwrap()), "{best}");
    assert!(best["speedup"].as_f64().is_some());

    // A second run with the same log measures nothing.
    let (again, _) = tune(dir.path(), &["--strategy", "exhaustive", "--budget", "100"]);
    assert_eq!(again["measured"], 0, "{again}");
    assert_eq!(again["resumed"], 12);
    assert_eq!(log(&dir.path().join("out/log.jsonl")).len(), 12, "nothing appended");
}

#[test]
fn the_replayed_best_script_reproduces_the_best_kernels_c() {
    let dir = setup(SPACE);
    let (r, _) = tune(dir.path(), &["--strategy", "random", "--budget", "5", "--seed", "3"]);
    let best = &r["best"];
    let replay = PathBuf::from(best["replay"].as_str().unwrap());
    let c = PathBuf::from(best["c"].as_str().unwrap());
    let text = std::fs::read_to_string(&replay).unwrap();
    assert!(text.contains("# The tuned path\n"), "{text}");
    // The path starts from the program's own nest `l`, never building it again.
    let tuned = text.split("# The tuned path\n").nth(1).unwrap();
    assert!(tuned.starts_with("l1 = ") && tuned.contains("(l, ") && !tuned.contains("build("), "{text}");
    let emitted = dir.path().join("replayed.c");
    let o = Command::new(env!("CARGO_BIN_EXE_teml"))
        .arg("run")
        .arg(&replay)
        .arg("--emit-c")
        .arg(&emitted)
        .env("TEML_CACHE_DIR", dir.path().join("cache"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("verified"));
    assert_eq!(std::fs::read_to_string(&emitted).unwrap(), std::fs::read_to_string(&c).unwrap());
}

#[test]
fn strategies_are_deterministic_given_the_seed() {
    for strategy in ["random", "evolutionary"] {
        let run = |seed: &str| {
            let dir = setup(SPACE);
            tune(dir.path(), &["--strategy", strategy, "--budget", "6", "--seed", seed]);
            keys(&log(&dir.path().join("out/log.jsonl")))
        };
        let a = run("5");
        assert_eq!(a.len(), 6, "{strategy}: {a:?}");
        assert_eq!(a, run("5"), "{strategy}");
        assert_ne!(a, run("6"), "{strategy}");
    }
}

#[test]
fn shards_cover_the_space_exactly_once_and_their_logs_merge() {
    let dir = setup(SPACE);
    let mut all = Vec::new();
    for k in 0..3 {
        let l = dir.path().join(format!("shard{k}.jsonl"));
        tune(
            dir.path(),
            &[
                "--strategy",
                "exhaustive",
                "--budget",
                "100",
                "--shard",
                &format!("{k}/3"),
                "--log",
                l.to_str().unwrap(),
            ],
        );
        let recs = log(&l);
        assert!(recs.iter().all(|x| x["shard"] == format!("{k}/3")));
        all.extend(keys(&recs));
    }
    let distinct: BTreeSet<&String> = all.iter().collect();
    assert_eq!(all.len(), 12, "{all:?}");
    assert_eq!(distinct.len(), 12, "no point twice");
    // Merging the shards' logs: the whole space, nothing measured again.
    let merge: Vec<String> =
        (0..3).map(|k| dir.path().join(format!("shard{k}.jsonl")).display().to_string()).collect();
    let (r, _) = tune(
        dir.path(),
        &[
            "--strategy",
            "exhaustive",
            "--budget",
            "100",
            "--merge",
            &merge[0],
            "--merge",
            &merge[1],
            "--merge",
            &merge[2],
        ],
    );
    assert_eq!(r["measured"], 0, "{r}");
    assert_eq!(r["resumed"], 12);
    assert!(r["best"]["key"].is_string());
}

/// A compiler that refuses kernels whose C mentions `MARK_NOCOMPILE`, builds kernels that
/// mention `MARK_CRASH` with a constructor that aborts, and builds `MARK_WRONG` ones with
/// `double` as `float` (wrong results); gcc otherwise.
fn fake_cc(dir: &Path) -> PathBuf {
    let crash = dir.join("crash.h");
    std::fs::write(
        &crash,
        "#include <stdlib.h>\n__attribute__((constructor)) static void boom(void) { abort(); }\n",
    )
    .unwrap();
    let cc = dir.join("fakecc");
    std::fs::write(
        &cc,
        format!(
            "#!/bin/sh\nsrc=\nfor a in \"$@\"; do case \"$a\" in *.c) src=\"$a\";; esac; done\n\
             if [ -n \"$src\" ] && grep -q MARK_NOCOMPILE \"$src\"; then echo \"$src:1:1: error: refused by the test compiler\" >&2; exit 1; fi\n\
             if [ -n \"$src\" ] && grep -q MARK_CRASH \"$src\"; then exec gcc -include {} \"$@\"; fi\n\
             if [ -n \"$src\" ] && grep -q MARK_WRONG \"$src\"; then exec gcc -Ddouble=float \"$@\"; fi\n\
             if [ -n \"$src\" ] && grep -q MARK_SLOW \"$src\"; then sleep 60; fi\n\
             exec gcc \"$@\"\n",
            crash.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cc, std::fs::Permissions::from_mode(0o755)).unwrap();
    cc
}

#[test]
fn illegal_noncompiling_crashing_and_wrong_candidates_are_logged_with_their_reason_and_never_chosen() {
    // The nest's variable names the kernel's C; the fake compiler reacts to the names.
    let space = "// program: mm.teml\n\
        let kind = param(\"kind\", [\"good\", \"illegal\", \"nocompile\", \"crash\", \"wrong\", \"slow\"]);\n\
        if kind == \"good\" { let good = parallelize(l, 1); codegen(good); }\n\
        if kind == \"illegal\" { let bad = parallelize(permute(l, [3, 1, 2]), 1); codegen(bad); }\n\
        if kind == \"nocompile\" { let MARK_NOCOMPILE = l; codegen(MARK_NOCOMPILE); }\n\
        if kind == \"crash\" { let MARK_CRASH = l; codegen(MARK_CRASH); }\n\
        if kind == \"wrong\" { let MARK_WRONG = l; codegen(MARK_WRONG); }\n\
        if kind == \"slow\" { let MARK_SLOW = l; codegen(MARK_SLOW); }\n";
    let dir = setup(space);
    let cc = fake_cc(dir.path());
    let (r, _) = tune(
        dir.path(),
        &[
            "--strategy",
            "exhaustive",
            "--budget",
            "10",
            "--cc",
            cc.to_str().unwrap(),
            "--compile-timeout",
            "2",
        ],
    );
    let recs = log(&dir.path().join("out/log.jsonl"));
    let status = |k: &str| {
        let x =
            recs.iter().find(|x| x["key"] == format!("kind={k}")).unwrap_or_else(|| panic!("{k}: {recs:?}"));
        (x["status"].as_str().unwrap().to_string(), x["reason"].as_str().unwrap_or("").to_string())
    };
    assert_eq!(status("good").0, "ok");
    let (s, why) = status("illegal");
    assert_eq!(s, "illegal", "{why}");
    assert!(why.contains("cannot parallelize"), "{why}");
    let (s, why) = status("nocompile");
    assert_eq!(s, "compile", "{why}");
    assert!(why.contains("refused by the test compiler"), "{why}");
    let (s, why) = status("crash");
    assert_eq!(s, "crash", "{why}");
    assert!(why.contains("SIGABRT"), "{why}");
    let (s, why) = status("wrong");
    assert_eq!(s, "mismatch", "{why}");
    assert!(why.contains("does not match the reference"), "{why}");
    let (s, why) = status("slow");
    assert_eq!(s, "compile", "{why}");
    assert!(why.contains("ran past 2 s"), "{why}");
    assert_eq!(r["best"]["key"], "kind=good", "{r}");
    assert_eq!(r["rejected"]["crash"], 1);
}

#[test]
fn time_in_a_script_returns_a_measurement() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.rhai");
    std::fs::write(
        &f,
        "let A = tensor([N, N]);\nlet B = tensor([N, N]);\nlet C = contract(A, B, [2, 1]);\nlet l = build(C);\n\
         let m = time(permute(l, [1, 3, 2]));\n\
         if !m.verified || m.median_s <= 0.0 || m.reps < 1 { throw `bad measurement ${m}`; }\n\
         print(`keys ${m.keys()}`);\ncodegen(l);\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_teml"))
        .arg("run")
        .arg(&f)
        .args(["-D", "N=16", "-q"])
        .env("TEML_CACHE_DIR", dir.path().join("cache"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    for k in ["median_s", "min_s", "spread", "reps", "gflops", "verified", "error"] {
        assert!(out.contains(k), "{k}: {out}");
    }
    // Under `teml check` nothing runs: a clear error at the call.
    let o =
        Command::new(env!("CARGO_BIN_EXE_teml")).arg("check").arg(&f).args(["-D", "N=16"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("time: measurements run under `teml run`"), "{err}");
    assert!(err.contains("t.rhai:5:"), "{err}");
}

#[test]
fn a_space_with_errors_is_the_users_to_fix() {
    let dir = setup("// program: mm.teml\nlet p = permute(l, param(\"order\", []));\ncodegen(p);\n");
    let o = Command::new(env!("CARGO_BIN_EXE_teml"))
        .arg("tune")
        .arg(dir.path().join("space.rhai"))
        .arg("--out")
        .arg(dir.path().join("out"))
        .arg("--no-db")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("param: argument 2: expected a non-empty list of choices for `order`, found []"),
        "{err}"
    );
    assert!(err.contains("space.rhai:2:"), "{err}");
    let o =
        Command::new(env!("CARGO_BIN_EXE_teml")).args(["tune", "x.rhai", "--shard", "3/3"]).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("expected 0 <= K < N, found `3/3`"));
}

/// A candidate's run is limited from the untransformed build's time from the first candidate
/// on: a hanging first candidate is a time-out after its screening job's two runs of at most
/// 5 s each (the floor), not after `--timeout` (30 s by default), even before any candidate has
/// a time.
#[test]
fn the_run_limit_follows_the_untransformed_build_from_the_first_candidate() {
    let space = "// program: mm.teml\n\
        let kind = param(\"kind\", [\"hang\", \"good\"]);\n\
        if kind == \"hang\" { let MARK_HANG = l; codegen(MARK_HANG); }\n\
        if kind == \"good\" { let good = parallelize(l, 1); codegen(good); }\n";
    let dir = setup(space);
    let hang = dir.path().join("hang.h");
    std::fs::write(
        &hang,
        "#include <unistd.h>\n__attribute__((constructor)) static void nap(void) { sleep(25); }\n",
    )
    .unwrap();
    let cc = dir.path().join("hangcc");
    std::fs::write(
        &cc,
        format!(
            "#!/bin/sh\nsrc=\nfor a in \"$@\"; do case \"$a\" in *.c) src=\"$a\";; esac; done\n\
             if [ -n \"$src\" ] && grep -q MARK_HANG \"$src\"; then exec gcc -include {} \"$@\"; fi\n\
             exec gcc \"$@\"\n",
            hang.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cc, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (r, _) =
        tune(dir.path(), &["--strategy", "exhaustive", "--budget", "2", "--cc", cc.to_str().unwrap()]);
    assert!(r["baseline_s"].as_f64().is_some_and(|b| b > 0.0), "{r}");
    let recs = log(&dir.path().join("out/log.jsonl"));
    let hung = recs.iter().find(|x| x["key"] == "kind=hang").unwrap_or_else(|| panic!("{recs:?}"));
    assert_eq!(hung["status"], "timeout", "{hung}");
    assert!(hung["reason"].as_str().is_some_and(|w| w.contains("10 s")), "{hung}");
    assert_eq!(r["best"]["key"], "kind=good", "{r}");
}

#[test]
fn a_fixed_param_holds_for_every_candidate() {
    let dir = setup(SPACE);
    let (r, err) =
        tune(dir.path(), &["--strategy", "exhaustive", "--budget", "100", "--param", "order=[1, 3, 2]"]);
    // The other two parameters span 4 points; every one takes the fixed order.
    assert_eq!(r["candidates"], 4, "{r}\n{err}");
    let records = log(&dir.path().join("out/log.jsonl"));
    assert_eq!(records.len(), 4);
    assert!(keys(&records).iter().all(|k| k.starts_with("order=[1, 3, 2];")), "{records:?}");
    // The winner's header says which choice the search did not range over.
    let best = std::fs::read_to_string(dir.path().join("out/best.teml")).unwrap();
    assert!(best.lines().next().is_some_and(|l| l.contains(", --param order=[1, 3, 2])")), "{best}");
}

#[test]
fn the_winner_is_exported_with_export() {
    let dir = setup(SPACE);
    let lib = dir.path().join("lib");
    let (r, err) = tune(dir.path(), &["--budget", "3", "--export", lib.to_str().unwrap()]);
    assert!(r["best"].is_object(), "{r}");
    assert!(err.contains("exported to"), "{err}");
    let h = std::fs::read_to_string(lib.join("p.h")).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert!(
        h.contains("best.teml")
            && h.contains("int p(int64_t N, const double *A, const double *B, double *C);"),
        "{h}"
    );
    // --export-name names the exported function; it needs --export
    let lib2 = dir.path().join("lib2");
    let (_, err) =
        tune(dir.path(), &["--budget", "3", "--export", lib2.to_str().unwrap(), "--export-name", "mm"]);
    let h = std::fs::read_to_string(lib2.join("mm.h")).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert!(h.contains("int mm(int64_t N, const double *A, const double *B, double *C);"), "{h}");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(["tune", "x.rhai", "--export-name", "mm"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("--export"), "{e}");
}

/// A script that asks for no `param` has a space of one point: the search says so, and what
/// to do, instead of a winner with no choices.
#[test]
fn a_space_with_no_param_says_why_there_was_nothing_to_search() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("one.rhai");
    std::fs::write(&f, "let A = tensor([8]);\nlet B = eq(A, [i], [i]);\ncodegen(build(B));\n").unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(["tune", f.to_str().unwrap(), "--budget", "2", "--threads", "1", "--no-db", "--out"])
        .arg(d.path().join("out"))
        .env("TEML_CACHE_DIR", crate::common::kernel_cache())
        .output()
        .unwrap();
    let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("asks for no param: its space is one point")
            && out.contains("param(\"name\", [choices])"),
        "{out}"
    );
}
