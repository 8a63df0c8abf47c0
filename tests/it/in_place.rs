//! In-place statements (Ullrich 2018, compatible statements): `in_place(l, y, x)` stores a result over its operand (no
//! second buffer), verified through the real binary in both front-ends, on threads, in lanes
//! and under `-D`; `-o` saving the result; the C as a user reads it; every refusal with its
//! reason or isl's witness; and `x = e(x)` refused at `build` where it cannot run in place.

use crate::common::{program, refused, teml_bits};

fn teml(dir: &std::path::Path, args: &[&str]) -> (bool, String) {
    teml_bits(dir, None, args)
}

/// `y = x + M`, elementwise: each `x[i][j]` is read once, by the instance that writes `y[i][j]`.
const ADD: &str = "N = 24\nx = tensor([N, N])\nM = tensor([N, N])\n\
    y = add(x, M, [[i, j], [i, j]] -> [i, j])\nl = build(y)\n";

#[test]
fn a_result_stored_over_its_operand_verifies_in_both_front_ends() {
    let d = tempfile::tempdir().unwrap();
    let t = program(
        d.path(),
        "add.teml",
        &format!(
            "{ADD}l1 = in_place(l, y, x)\nl2 = parallelize(l1, 1)\nl3 = vectorize(l2, 2)\ncodegen(l3)\ncodegen(l1)\n"
        ),
    );
    let decl = program(d.path(), "decl.teml", ADD);
    let r = program(
        d.path(),
        "add.rhai",
        &format!("// program: {decl}\nlet p = in_place(l, \"y\", x);\np = parallelize(p, 1);\ncodegen(p);\n"),
    );
    for f in [&t, &r] {
        for bits in ["512", "0"] {
            for n in ["24", "7", "1"] {
                let (ok, out) =
                    teml_bits(d.path(), Some(bits), &["run", f, "--threads", "2", "-D", &format!("N={n}")]);
                assert!(
                    ok && out.contains("verified") && !out.contains("MISMATCH"),
                    "{f} {bits} N={n}: {out}"
                );
                assert!(out.contains("in place: y is stored over x"), "{out}");
                assert!(out.contains("x[i][j] = x[i][j] + M[i][j]"), "{out}");
            }
        }
    }
    // -o saves y from x's buffer: the same bytes as the kernel that writes y apart
    let plain = program(d.path(), "plain.teml", &format!("{ADD}codegen(l)\n"));
    let (a, b, xo) = (d.path().join("a.npy"), d.path().join("b.npy"), d.path().join("x.npy"));
    let (ok, out) = teml(
        d.path(),
        &["run", &t, "-q", "-o", &format!("y={}", a.display()), "-o", &format!("x={}", xo.display())],
    );
    assert!(ok, "{out}");
    let (ok, out) = teml(d.path(), &["run", &plain, "-q", "-o", &format!("y={}", b.display())]);
    assert!(ok, "{out}");
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    // x keeps its meaning (the program never assigns it): its initial data, not y's values
    assert_ne!(std::fs::read(&xo).unwrap(), std::fs::read(&a).unwrap());
    // the C: one buffer for x and y, said so (TEML_BLESS=1 to update the golden file)
    let emitted = d.path().join("k.c");
    let (ok, out) = teml_bits(
        d.path(),
        Some("512"),
        &["run", &t, "--no-run", "-q", "--emit-c", emitted.to_str().unwrap()],
    );
    assert!(ok, "{out}");
    let actual = std::fs::read_to_string(d.path().join("k.1.c")).unwrap();
    assert!(actual.contains("/* in place: `x` holds x at entry and y at exit */"), "{actual}");
    assert!(actual.contains("void teml_l3(double (*restrict M)[N], double (*restrict x)[N])"), "{actual}");
    crate::common::golden("add_in_place.c", &actual);
}

#[test]
fn later_transformations_are_checked_against_the_nest_in_place() {
    // y[i][j] = x[i][j] * x[i][N-1]: in place, each row's last element must be read by every j
    // before y[i][N-1] overwrites it, which the order j = 0, .., N-1 does; the rows stay
    // independent (i in parallel), the columns do not (j in parallel)
    let d = tempfile::tempdir().unwrap();
    let src = "N = 16\nx = tensor([N, N])\ny = mul(x, x, [[i, j], [i, N-1]] -> [i, j])\nl = build(y)\n";
    let ok_src = format!(
        "{src}l1 = in_place(l, y, x)\nl2 = interchange(l1, 1, 2)\nl3 = parallelize(l1, 1)\ncodegen(l2)\ncodegen(l3)\n"
    );
    let f = program(d.path(), "row.teml", &ok_src);
    let (ok, out) = teml(d.path(), &["run", &f, "--threads", "2"]);
    assert!(ok && out.matches("verified").count() == 2, "{out}");
    refused(
        d.path(),
        None,
        "par.teml",
        &format!("{src}l1 = in_place(l, y, x)\nl2 = parallelize(l1, 2)\n"),
        &["parallelize", "x[0][15]", "loop `j` is parallelized"],
    );
    // without in_place the same loop is data-parallel
    let g = program(d.path(), "apart.teml", &format!("{src}l2 = parallelize(l, 2)\ncodegen(l2)\n"));
    let (ok, out) = teml(d.path(), &["run", &g, "--threads", "2", "-q"]);
    assert!(ok && out.contains("verified"), "{out}");
}

#[test]
fn what_cannot_run_in_place_is_refused_with_the_reason() {
    let d = tempfile::tempdir().unwrap();
    let mv = "N = 6\nM = tensor([N, N])\nx = tensor([N])\nv = tensor([N, N])\n\
              y = einsum(\"ik,k->i\", [M, x])\nl = build(y)\n";
    // a matrix-vector product reads all of x for each y[i]: isl's witness
    refused(
        d.path(),
        None,
        "mv.teml",
        &format!("{mv}l1 = in_place(l, y, x)\n"),
        &[
            "in_place",
            "x[0] is read by statement 1 (`y[i] += M[i][k] * x[k]`) at (i=1, k=0) after statement 1",
            "wrote y[0]",
            "not a compatible statement, Ullrich 2018",
        ],
    );
    // a transposition reads x[j][i] where it writes y[i][j]
    refused(
        d.path(),
        None,
        "tr.teml",
        "N = 4\nx = tensor([N, N])\ny = eq(x, [i, j] -> [j, i])\nl = build(y)\nl1 = in_place(l, y, x)\n",
        &["would overwrite a value still to be read"],
    );
    // shapes, roles, order
    refused(
        d.path(),
        None,
        "shape.teml",
        &format!("{mv}l1 = in_place(l, y, M)\n"),
        &["`y` is double [N]", "`M` is double [N, N]", "expected one shape and element type"],
    );
    refused(
        d.path(),
        None,
        "same.teml",
        &format!("{mv}l1 = in_place(l, y, y)\n"),
        &["an operand other than the result"],
    );
    refused(
        d.path(),
        None,
        "role.teml",
        &format!("{mv}l1 = in_place(l, x, y)\n"),
        &["a tensor the nest writes", "`x`"],
    );
    refused(
        d.path(),
        None,
        "absent.teml",
        &format!("{mv}l1 = in_place(l, y, v)\n"),
        &["a tensor the nest reads", "`v`"],
    );
    // an update onto y reads y's values from before the nest: over x, it would read x's
    refused(
        d.path(),
        None,
        "onto.teml",
        "N = 5\nx = tensor([N])\ny = tensor([N])\ny = add(y, x, [[i], [i]] -> [i])\nl = build(y)\nl1 = in_place(l, y, x)\n",
        &["y[0] is read by statement 1", "before the nest writes it"],
    );
    // a layout and in_place on one tensor; another nest of the kernel reading x
    refused(
        d.path(),
        None,
        "laid.teml",
        &format!("{ADD}l1 = in_place(l, y, x)\nl2 = pad(l1, x, 2, 8)\n"),
        &[],
    );
    refused(
        d.path(),
        None,
        "kernel.teml",
        &format!(
            "{ADD}z = add(x, M, [[i, j], [i, j]] -> [i, j])\nk = build(z)\nl1 = in_place(l, y, x)\ncodegen(l1, k)\n"
        ),
        &["`y` is stored over `x` (in_place)", "accesses `x`"],
    );
    // a sum of one term into y, divided by x (the fuzzer's reproducer): the kernel zeroes the
    // accumulator, stored over x, before the one update reads x (it printed `X9[0]: kernel inf`)
    refused(
        d.path(),
        None,
        "quotient.teml",
        "A2 = tensor([1])\nA7 = tensor([3, 1])\nA10 = tensor([3])\nt8 = vcontract(A7, A2, [2, 1])\n\
         X9 = div(t8, A10, [[i1], [i1]] -> [i1])\nl11 = build(X9)\nl25 = in_place(l11, X9, A10)\ncodegen(l25)\n",
        &[
            "quotient.teml:7:",
            "in_place",
            "A10[0] is read by statement 1",
            "after the same update zeroed X9[0]",
            "not a compatible statement, Ullrich 2018",
        ],
    );
    refused(
        d.path(),
        None,
        "fuse.teml",
        &format!(
            "{ADD}z = add(x, M, [[i, j], [i, j]] -> [i, j])\nk = build(z)\nl1 = in_place(l, y, x)\nf = fuse_outer(l1, k, 1)\n"
        ),
        &["expected in_place after the fusion"],
    );
}

#[test]
fn a_statement_over_its_own_operand_runs_in_place_only_where_it_may() {
    let d = tempfile::tempdir().unwrap();
    // x = x * M: compatible, built and verified in place
    let ok_src = "N = 8\nx = tensor([N, N])\nM = tensor([N, N])\nx = mul(x, M, [[i, j], [i, j]] -> [i, j])\nl = build(x)\ncodegen(l)\n";
    let f = program(d.path(), "ok.teml", ok_src);
    let (ok, out) = teml(d.path(), &["run", &f]);
    assert!(ok && out.contains("verified"), "{out}");
    // x = M x: each x[i] needs the old x[k] for every k; refused at build with the witness
    // (its kernel used to read the values it had just overwritten)
    refused(
        d.path(),
        None,
        "mv.teml",
        "N = 8\nM = tensor([N, N])\nx = tensor([N])\nx = einsum(\"ik,k->i\", [M, x])\nl = build(x)\n",
        &[
            "build: `x[i] += M[i][k] * x[k]` sums into `x` while reading it",
            "x[0] is read by statement 1 (`x[i] += M[i][k] * x[k]`) at (i=1, k=0) after statement 1",
            "e.g. `x2 = ...`",
            "mv.teml:5:",
        ],
    );
    // a sum of one term over its own operand: zeroed before its one update reads it
    refused(
        d.path(),
        None,
        "one.teml",
        "M = tensor([1, 1])\nx = tensor([1])\nx = einsum(\"ik,k->i\", [M, x])\nl = build(x)\n",
        &["sums into `x` while reading it", "after the same update zeroed it", "one.teml:4:"],
    );
}

/// Which buffers a kernel computes afresh (their timed runs need no copy of the initial data):
/// results set or summed from zero; not an update onto what a tensor held, not a buffer that
/// holds an operand at entry.
#[test]
fn results_computed_afresh_need_no_restore() {
    let src = "N = 6\nx = tensor([N, N])\nM = tensor([N, N])\nA = tensor([N, N])\n\
               C = contract(x, M, [2, 1])\ny = add(x, M, [[i, j], [i, j]] -> [i, j])\n\
               A = add(A, M, [[i, j], [i, j]] -> [i, j])\nlc = build(C)\nly = build(y)\nla = build(A)\n\
               lp = in_place(ly, y, x)\n";
    let s =
        teml::lang::eval_with(src, "t.teml", &teml::ir::State::new(), &teml::script::Stdlib::get()).unwrap();
    let nest = |id: &str| match s.get(id) {
        Some(teml::ir::Value::Nest(n)) => (teml::ir::Name::from(id), n.clone()),
        _ => panic!("{id}"),
    };
    let fresh = |ids: &[&str]| -> Vec<(String, bool)> {
        let nests: Vec<_> = ids.iter().map(|i| nest(i)).collect();
        let k = teml::codegen::generate(&s, "k", &nests).unwrap();
        k.params.iter().filter(|p| p.written).map(|p| (p.name.to_string(), p.fresh)).collect()
    };
    assert_eq!(fresh(&["lc", "ly", "la"]), vec![("C".into(), true), ("y".into(), true), ("A".into(), false)]);
    assert_eq!(fresh(&["lp"]), vec![("y".into(), false)]);
}
