//! Exact legality with isl: for each transformation kind a legal and an illegal case, with the
//! witness in the message at the line that asked for it; parametric and fixed-size verdicts;
//! reductions reordered and parallelized; the paper's paths legal.

use teml::analysis::{Verdict, decide};
use teml::ir::{Nest, State, Value};

fn eval(src: &str, consts: &[(&str, i64)]) -> Result<State, String> {
    let s = consts.iter().fold(State::new(), |s, (n, v)| s.with_const(n, *v));
    teml::lang::eval_with(src, "t.teml", &s, &teml::script::Stdlib::get()).map_err(|e| e.to_string())
}

fn ok(src: &str, consts: &[(&str, i64)]) -> State {
    eval(src, consts).unwrap_or_else(|e| panic!("{e}"))
}

/// The message of the error evaluating `src`, which must be at `line`.
fn refused(src: &str, consts: &[(&str, i64)], line: usize) -> String {
    let e = eval(src, consts).expect_err("refused");
    assert!(e.contains(&format!("--> t.teml:{line}:")), "{e}");
    e.lines().next().unwrap().to_string()
}

fn nest(s: &State, id: &str) -> Nest {
    match s.get(id) {
        Some(Value::Nest(n)) => n.clone(),
        _ => panic!("{id} is not a nest"),
    }
}

fn verdict(s: &State, id: &str) -> Result<Verdict, String> {
    decide(s, &nest(s, id)).unwrap().map_err(|e| e.message)
}

const MM: &str = "A = tensor([N, N])\nB = tensor([N, N])\nC = contract(A, B, [2, 1])\nl = build(C)\n";
const TRANSPOSED_READ: &str = "A = tensor([N, N])\nB = eq(A, [i, j] -> [i, j])\nC = eq(B, [j, i] -> [i, j])\nlb = build(B)\nlc = build(C)\n";
const IN_PLACE_TRANSPOSE: &str = "A = tensor([N, N])\nT = @A: eq(A, [i, j] -> [j, i])\nl = build(T)\n";

#[test]
fn fuse_outer() {
    // Reading B transposed: fused at level 1 or 2, C reads B[j][i] before it is written.
    for level in [1, 2] {
        let e = refused(&format!("{TRANSPOSED_READ}f = fuse_outer(lb, lc, {level})\n"), &[("N", 6)], 6);
        assert_eq!(
            e,
            "error: fuse_outer: illegal: B[1][0] is written by statement 1 (`B[i][j] = A[i][j]`) at (i=1, j=0) \
             and read by statement 2 (`C[i][j] = B[j][i]`) at (i=0, j=1); the transformed nest reads it before \
             it is written (N=6)"
        );
    }
    // Reading B at the same element: legal at both levels, for every N.
    let s = ok(
        "A = tensor([N, N])\nB = eq(A, [i, j] -> [i, j])\nC = eq(B, [i, j] -> [i, j])\nlb = build(B)\nlc = build(C)\n\
         f1 = fuse_outer(lb, lc, 1)\nf2 = fuse_outer(lb, lc, 2)\n",
        &[("N", 6)],
    );
    assert_eq!(verdict(&s, "f1"), Ok(Verdict::AllSizes));
    assert_eq!(verdict(&s, "f2"), Ok(Verdict::AllSizes));
}

#[test]
fn a_contraction_fused_with_itself() {
    // Run twice, each zeroed at its first update: fusing the output loops is legal, fusing the
    // summed loop too would mix the two runs.
    let s = ok(&format!("{MM}f = fuse_outer(l, l, 2)\n"), &[("N", 5)]);
    assert_eq!(verdict(&s, "f"), Ok(Verdict::AllSizes));
    let e = refused(&format!("{MM}f = fuse_outer(l, l, 3)\n"), &[("N", 5)], 5);
    assert!(e.starts_with("error: fuse_outer: illegal: C[0][0] is written by statement 1"), "{e}");
    assert!(e.contains("and written again by statement 2"), "{e}");
}

#[test]
fn fuse_inner() {
    // The two loops of an unrolled outer loop: jammed, legal for an element-wise statement.
    let s = ok(
        "A = tensor([4, N])\nB = eq(A, [i, j] -> [i, j])\nl = build(B)\nu = unroll(l, 1)\nf = fuse_inner(u, 1)\n",
        &[("N", 6)],
    );
    assert_eq!(verdict(&s, "f"), Ok(Verdict::AllSizes));
    // The same for an in-place transpose reorders reads and writes of A.
    let e = refused(
        "A = tensor([2, 2])\nT = @A: eq(A, [i, j] -> [j, i])\nl = build(T)\nu = unroll(l, 1)\nf = fuse_inner(u, 1)\n",
        &[],
        5,
    );
    assert!(e.starts_with("error: fuse_inner: illegal: A["), "{e}");
}

#[test]
fn interchange() {
    let s = ok(&format!("{MM}l2 = interchange(l, 2, 3)\nl3 = interchange(l, 1, 3)\n"), &[("N", 8)]);
    assert_eq!(verdict(&s, "l2"), Ok(Verdict::AllSizes));
    assert_eq!(verdict(&s, "l3"), Ok(Verdict::AllSizes), "the reduction may be reordered");
    let e = refused(&format!("{IN_PLACE_TRANSPOSE}l2 = interchange(l, 1, 2)\n"), &[("N", 6)], 4);
    assert_eq!(
        e,
        "error: interchange: illegal: A[0][1] is written by statement 1 (`A[j][i] = A[i][j]`) at (j=0, i=1) and \
         read by statement 1 (`A[j][i] = A[i][j]`) at (j=1, i=0); the transformed nest reads it before it is \
         written (N=6)"
    );
}

#[test]
fn stripmine_tile_and_unroll_keep_the_order() {
    // They never reorder a statement's own instances: legal even in place.
    let s = ok(&format!("{IN_PLACE_TRANSPOSE}s = stripmine(l, 2, 4)\nu = unroll(l, 2)\n"), &[("N", 6)]);
    assert_eq!(verdict(&s, "s"), Ok(Verdict::AllSizes));
    assert_eq!(verdict(&s, "u"), Ok(Verdict::TheseSizes("N=6".into())), "unrolled: only N=6 is covered");
}

#[test]
fn marks() {
    // A reduction parallelized and vectorized: allowed (private accumulators).
    let s =
        ok(&format!("{MM}p = parallelize(l, 1)\nv = vectorize(l, 3)\nq = parallelize(l, 3)\n"), &[("N", 8)]);
    for id in ["p", "v", "q"] {
        assert_eq!(verdict(&s, id), Ok(Verdict::AllSizes), "{id}");
    }
    // A loop carrying a dependence: refused, with the two iterations.
    let e = refused(&format!("{IN_PLACE_TRANSPOSE}p = parallelize(l, 1)\n"), &[("N", 6)], 4);
    assert_eq!(
        e,
        "error: parallelize: illegal: A[0][1] is written by statement 1 (`A[j][i] = A[i][j]`) at (j=0, i=1) and \
         read by statement 1 (`A[j][i] = A[i][j]`) at (j=1, i=0); loop `j` is parallelized and runs the two in \
         different iterations (N=6)"
    );
    // ... but its inner loop carries none: within one `j`, the instances touch distinct elements.
    let s = ok(&format!("{IN_PLACE_TRANSPOSE}v = vectorize(l, 2)\n"), &[("N", 6)]);
    assert_eq!(verdict(&s, "v"), Ok(Verdict::AllSizes));
    // A reduction whose element varies inside the marked loop cannot be realized: refused at
    // the codegen statement.
    let e = refused(
        &format!("{MM}r = interchange(l, 1, 3)\np = parallelize(r, 1)\ncodegen(p)\n"),
        &[("N", 8)],
        7,
    );
    assert!(e.contains("cannot parallelize loop `k1`"), "{e}");
}

#[test]
fn parametric_and_fixed_size_verdicts() {
    // C[i] = A[i] * B[M]: fused with B's nest, legal only when M = 0.
    let src = "A = tensor([N])\nB = eq(A, [i] -> [i])\nC = mul(A, B, [[i], [M]] -> [i])\nlb = build(B)\n\
               lc = build(C)\nf = fuse_outer(lb, lc, 1)\n";
    let s = ok(src, &[("N", 8), ("M", 0)]);
    assert_eq!(verdict(&s, "f"), Ok(Verdict::TheseSizes("M=0, N=8".into())));
    let e = refused(src, &[("N", 8), ("M", 2)], 6);
    assert!(e.ends_with("the transformed nest reads it before it is written (M=2, N=8)"), "{e}");
}

#[test]
fn paper_paths_are_legal() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut n = 0;
    for dir in ["examples", "examples/paper", "scripts/pluto", "scripts/paper"] {
        for f in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = f.unwrap().path();
            if !matches!(p.extension().and_then(|e| e.to_str()), Some("teml" | "rhai")) {
                continue;
            }
            let t = std::time::Instant::now();
            let s = teml::pipeline::eval_file(&p, &State::new()).unwrap_or_else(|e| panic!("{e}"));
            for (k, v) in &s.vars {
                if let Value::Nest(nest) = v {
                    let r = decide(&s, nest).unwrap();
                    assert!(r.is_ok(), "{}: {k}: {r:?}", p.display());
                }
            }
            eprintln!("{}: evaluated and checked in {:?}", p.display(), t.elapsed());
            n += 1;
        }
    }
    assert!(n >= 20);
}

#[test]
fn legality_is_a_value_for_scripts() {
    let src = r#"
let A = tensor([N, N]);
let B = tensor([N, N]);
let C = contract(A, B, [2, 1]);
let l = build(C);
let X = eq(A, [i, j], [i, j]);
let Y = eq(X, [j, i], [i, j]);
let lx = build(X);
let ly = build(Y);
let Z = eq(X, [i, j], [i, j]);
let lz = build(Z);
let T = at("A", eq(A, [i, j], [j, i]));
let lt = build(T);
let r = #{
    mm: legal(l),
    perms: legal_permutations(l),
    fuse_same: legal_fusions(lx, lz),
    fuse_transposed: legal_fusions(lx, ly),
    in_place: legal_permutations(lt),
    reason: legal(parallelize(lt, 1)),
    par: parallel_levels(l),
    data_par: data_parallel_levels(l),
    par_k_outer: data_parallel_levels(permute(l, [3, 1, 2])),
    par_in_place: parallel_levels(lt),
};
r
"#;
    let state = State { unchecked: true, ..State::new() }.with_const("N", 6);
    let mut session = teml::script::Session::new(state).unwrap();
    let out = session.eval_line(src).unwrap().unwrap();
    assert!(out.contains("\"mm\": true"), "{out}");
    // Every order of a matrix product is legal (the reduction may be reordered).
    assert!(
        out.contains("\"perms\": [[1, 2, 3], [1, 3, 2], [2, 1, 3], [2, 3, 1], [3, 1, 2], [3, 2, 1]]"),
        "{out}"
    );
    assert!(out.contains("\"fuse_same\": [1, 2]"), "{out}");
    assert!(out.contains("\"fuse_transposed\": []"), "{out}");
    assert!(out.contains("\"in_place\": [[1, 2]]"), "{out}");
    assert!(out.contains("\"reason\": \"illegal: A[0][1] is written by statement 1"), "{out}");
    // which loops run in parallel (data-parallel in the sense of Ullrich 2018): i and j carry nothing, k only the reduction;
    // moved outermost, k is still no data-parallel loop; the in-place transpose's i carries a
    // dependence, its j (a row against a column, in one i) none
    assert!(out.contains("\"par\": [1, 2, 3]") && out.contains("\"data_par\": [1, 2]"), "{out}");
    assert!(out.contains("\"par_k_outer\": [2, 3]"), "{out}");
    assert!(out.contains("\"par_in_place\": [2]"), "{out}");
}

#[test]
fn the_repl_says_which_loops_are_data_parallel() {
    let mut r = teml::repl::Repl::new(State::new().with_const("N", 6), teml::repl::Mode::Teml);
    for line in ["A = tensor([N, N])", "B = tensor([N, N])", "C = contract(A, B, [2, 1])", "l = build(C)"] {
        r.handle(line).unwrap();
    }
    let out = r.handle(":legal l").unwrap();
    assert!(
        out.ends_with(
            "its loops:\n  i1 (level 1): data-parallel\n  i2 (level 2): data-parallel\n  \
             k1 (level 3): a reduction (parallel with private accumulators)"
        ),
        "{out}"
    );
}

#[test]
fn permute_is_checked_like_interchange() {
    let src = "let A = tensor([4, 4]);\nlet T = at(\"A\", eq(A, [i, j], [j, i]));\nlet l = build(T);\nlet p = permute(l, [2, 1]);";
    let e = teml::script::eval(src, "p.rhai", &State::new()).unwrap_err().to_string();
    assert!(e.contains("permute: illegal: A[0][1] is written by statement 1"), "{e}");
    assert!(e.contains("p.rhai:4"), "{e}");
}

#[test]
fn tile_and_unroll_and_jam_are_checked_step_by_step() {
    // Legal on a matrix product.
    let s = ok(&format!("{MM}t = tile(l, 4)\nu = unroll_and_jam(l, 1, 2)\n"), &[("N", 8)]);
    assert_eq!(verdict(&s, "t"), Ok(Verdict::TheseSizes("N=8".into())), "4 divides 8: no `min`");
    assert_eq!(verdict(&s, "u"), Ok(Verdict::TheseSizes("N=8".into())));
    // On an in-place transpose, the interchanges inside `tile` and the jam inside
    // `unroll_and_jam` reverse dependences: refused at the line of the call.
    let e = refused(&format!("{IN_PLACE_TRANSPOSE}t = tile(l, 2)\n"), &[("N", 4)], 4);
    assert!(e.starts_with("error: interchange: illegal: A["), "{e}");
    let e = refused(&format!("{IN_PLACE_TRANSPOSE}u = unroll_and_jam(l, 1, 2)\n"), &[("N", 4)], 4);
    assert!(e.starts_with("error: fuse_inner: illegal: A["), "{e}");
}

#[test]
fn a_missing_isl_is_one_clear_message() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.teml");
    std::fs::write(&p, format!("N = 4\n{MM}l2 = interchange(l, 1, 2)\n")).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_teml"))
        .args(["check", p.to_str().unwrap()])
        .env("TEML_ISL", d.path().join("libisl-nowhere.so"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.starts_with(
            "error: interchange: cannot decide legality: the integer set library isl is not installed"
        ) && err.contains("apt-get install libisl23")
            && err.contains("t.teml:6:"),
        "{err}"
    );
}

#[test]
fn a_sub_nest_with_a_free_iterator_only_in_its_accesses_is_checked() {
    // cholesky's first statement before `around(i, ...)` binds `i`: `i` appears in no bound,
    // only in `A[i][j]`, and is a parameter of the check (it once reached isl undeclared).
    let src = "N = 12\nA = tensor([N, N])\nP = vmul(A, A, [[i, k], [j, k]])\n\
        s1 = @A: sub(A, P, [[i, j], ] -> [i, j])\nl1 = build(s1, [[i], [j], [k, 0, j-1]])\n\
        v = vectorize(l1, 1)\n";
    let s = ok(src, &[]);
    assert!(nest(&s, "v").path()[0].annot.vectorize);
}

#[test]
fn max_min_and_sub_onto_the_target_are_reductions() {
    // A reduction over k (`m[i] = max(m[i], A[i][k])`) may run its updates in any order:
    // k reversed, outermost, in parallel; an update that reads another element may not.
    for f in ["max", "min", "sub"] {
        let src = format!(
            "N = 9\nA = tensor([N, N])\nm = tensor([N])\ns = @m: {f}(m, A, [[i], [i, k]] -> [i])\nl = build(s)\n\
             r = reverse(l, 2)\nt = interchange(l, 1, 2)\np = parallelize(t, 1)\n"
        );
        let s = ok(&src, &[]);
        assert!(nest(&s, "p").path()[0].annot.parallel, "{f}");
    }
    let e = refused(
        "N = 9\nA = tensor([N, N])\nm = tensor([N])\ns = @m: max(m, m, [[i], [k]] -> [i])\nl = build(s)\n\
         p = parallelize(l, 2)\n",
        &[],
        6,
    );
    assert!(e.contains("illegal"), "{e}");
}

/// isl runs under an operation limit: a question past it is a clear "cannot decide legality
/// within the limit" at the line (not minutes of work), and `--unchecked` accepts the path.
#[test]
fn an_isl_question_past_the_operation_limit_is_refused_at_its_line() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.teml");
    std::fs::write(&p, format!("N = 4\n{MM}l2 = interchange(l, 1, 2)\n")).unwrap();
    let run = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_teml"))
            .arg("check")
            .args(extra)
            .arg(p.to_str().unwrap())
            .env("TEML_ISL_MAX_OPERATIONS", "5")
            .output()
            .unwrap()
    };
    let o = run(&[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.starts_with("error: interchange: cannot decide legality within the limit of 5 isl operations")
            && err.contains("TEML_ISL_MAX_OPERATIONS")
            && err.contains("--unchecked")
            && err.contains("t.teml:6:"),
        "{err}"
    );
    let o = run(&["--unchecked"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The gate every transformation runs includes the coverage check: a nest that does not run
/// exactly the original instances (here its outer loop stops one value short) is refused by the
/// gate at the program's sizes, not only by `legal(l)`.
#[test]
fn the_gate_checks_that_the_original_instances_run() {
    let s = ok(&format!("N = 6\n{MM}"), &[]);
    let mut n = nest(&s, "l");
    assert!(matches!(teml::analysis::legality::decide_at_sizes(&s, &n), Ok(Ok(()))));
    let teml::ir::LNode::Loop(outer) = &mut n.items[0] else { panic!("a loop") };
    let mut short = (**outer).clone();
    short.ub = short.ub.add_int(-1);
    *outer = std::sync::Arc::new(short);
    match teml::analysis::legality::decide_at_sizes(&s, &n) {
        Ok(Err(e)) => {
            assert!(e.message.contains("does not run exactly the original instances"), "{}", e.message)
        }
        other => panic!("expected a refusal, found {other:?}"),
    }
}

#[test]
fn the_legal_fusion_levels_are_those_each_level_checked_alone_would_give() {
    // `fusion_levels` asks isl from the deepest level down and takes every level above the
    // first legal one without asking again (legality is monotone in the level): the same list
    // as a verdict per level, on every consecutive pair of nests of the example programs.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pairs = 0;
    let mut partial = 0;
    let files =
        ["examples", "examples/polybench"].iter().flat_map(|d| std::fs::read_dir(root.join(d)).unwrap());
    for p in files.map(|f| f.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "teml")) {
        let f = p.display().to_string();
        let s = teml::pipeline::eval_file(&p, &State::new().with_const("N", 12).with_const("TSTEPS", 2))
            .unwrap_or_else(|e| panic!("{e}"));
        for k in &s.kernels {
            for w in k.nests.windows(2) {
                let fast = teml::ops::explore::fusion_levels(&s, &w[0], &w[1]).unwrap();
                let depth = w[0].path().len().min(w[1].path().len());
                let each: Vec<usize> = (1..=depth)
                    .filter(|&r| {
                        teml::ops::fuse_outer(&w[0], &w[1], r as i64)
                            .is_ok_and(|n| teml::analysis::legality::decide_at_sizes(&s, &n).unwrap().is_ok())
                    })
                    .collect();
                assert_eq!(fast, each, "{f}");
                pairs += 1;
                if !each.is_empty() && each.len() < depth {
                    partial += 1;
                }
            }
        }
    }
    // Pairs legal at some levels and not at deeper ones, where the shortcut matters.
    assert!(pairs >= 40 && partial >= 5, "{pairs} pairs, {partial} partial");
}
