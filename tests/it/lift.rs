//! Algebraic rewrites (issue 23): `lift` turns a product of several tensors into single
//! contractions through temporaries, in the cheapest order or the one given; the kernel is
//! verified against the expression as written (temporaries not compared, the tolerance widened
//! by the reassociation's rounding bound, stated in the report), the temporaries are the
//! kernel's own, the tuner chooses among `contraction_orders`, the REPL shows `:lift`, and
//! every expression that cannot be lifted is refused at its line.

use crate::common::{program, refused, teml_bits};
use proptest::prelude::*;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

const INTERP: &str = "E = 5\nN = 4\nA = tensor([N, N])\nu = tensor([E, N, N, N])\n\
    v = einsum(\"ad,bf,cg,edfg->eabc\", [A, A, A, u])\n";

#[test]
fn interp_as_one_expression_is_lifted_verified_against_it_and_transformed() {
    let d = tempfile::tempdir().unwrap();
    let src = format!(
        "{INTERP}l = lift(v)\ncodegen(l)\n\
         f = fuse_inner(l, 1)\np = parallelize(f, 1)\ncodegen(p)\n"
    );
    let f = program(d.path(), "interp1.teml", &src);
    let c = d.path().join("p.c");
    let (ok, o) = teml_bits(d.path(), None, &["run", &f, "--time", "--emit-c", c.to_str().unwrap()]);
    assert!(ok && o.matches("verified").count() == 2, "{o}");
    // E N^6 points, 4 operations each, as written; 3 steps of E N^4 points, 2 each, lifted.
    assert!(
        o.contains("lifted: v from 81920 -> 7680 flops (10.7x fewer), order [[0, 3], [0, 2], [0, 1]]"),
        "{o}"
    );
    assert!(o.contains("`v` lifted: compared with the expression as written, within"), "{o}");
    assert!(o.contains("(rounding of 64 sums of 4 factors"), "{o}");
    // The speedup is over the expression as written.
    assert!(o.contains("untransformed: median"), "{o}");
    // Fused at e, the temporaries live per element; none is a parameter of the kernel.
    let csrc = std::fs::read_to_string(d.path().join("p.2.c")).unwrap();
    assert!(csrc.contains("teml_v_1_local") && csrc.contains("teml_v_2_local"), "{csrc}");
    assert!(csrc.contains("void teml_p(double (*restrict A)[N], double (*restrict u)[N][N][N], double (*restrict v)[N][N][N])"), "{csrc}");
}

#[test]
fn the_lifted_result_equals_numpy_and_temporaries_are_the_kernels_own() {
    // numpy is a dependency of the tests (README; .ci/run installs it): its absence fails.
    assert!(
        std::process::Command::new("python3")
            .args(["-c", "import numpy"])
            .status()
            .is_ok_and(|s| s.success()),
        "python3 with numpy is required by this test: apt-get install python3-numpy (or pip install numpy)"
    );
    let d = tempfile::tempdir().unwrap();
    let f = format!("{ROOT}/examples/tensor_network.teml");
    let c = d.path().join("k.c");
    let npy = |n: &str| d.path().join(format!("{n}.npy")).to_str().unwrap().to_string();
    let (ok, o) = teml_bits(
        d.path(),
        None,
        &[
            "run",
            &f,
            "-D",
            "O=3",
            "-D",
            "W=5",
            "-o",
            &format!("V={}", npy("V")),
            "-o",
            &format!("t={}", npy("t")),
            "-o",
            &format!("R={}", npy("R")),
            "--emit-c",
            c.to_str().unwrap(),
        ],
    );
    assert!(ok && o.contains("verified"), "{o}");
    let csrc = std::fs::read_to_string(&c).unwrap();
    assert!(
        csrc.contains("a temporary of `lift`, held by the kernel")
            && !csrc.contains("(*restrict R_1)[W][O][O][W],"),
        "{csrc}"
    );
    let py = format!(
        "import numpy as np\nV = np.load('{}')\nt = np.load('{}')\nR = np.load('{}')\n\
         want = np.einsum('klcd,ci,dj,ak,bl->abij', V, t, t, t, t)\n\
         assert np.allclose(R, want, rtol=1e-12), abs(R - want).max()\nprint('ok')\n",
        npy("V"),
        npy("t"),
        npy("R")
    );
    let out = std::process::Command::new("python3").args(["-c", &py]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Exported, a lifted kernel's interface is the expression's: no temporary among its
    // arguments, and numpy gets einsum's result.
    let lib = d.path().join("lib");
    let f = format!("{ROOT}/examples/interp_lifted.teml");
    let (ok, o) =
        teml_bits(d.path(), None, &["export", &f, "-D", "E=6", "-D", "N=5", "-o", lib.to_str().unwrap()]);
    assert!(ok, "{o}");
    let h = std::fs::read_to_string(lib.join("l.h")).unwrap();
    assert!(h.contains("int l(int64_t E, int64_t N, const double *A, const double *u, double *v);"), "{h}");
    let py = format!(
        "import sys\nsys.path.insert(0, '{}')\nimport numpy as np, l\nrng = np.random.default_rng(2)\n\
         A, u = rng.random((5, 5)), rng.random((6, 5, 5, 5))\nv = l.l(A, u, np.zeros((6, 5, 5, 5)))\n\
         assert np.allclose(v, np.einsum('ad,bf,cg,edfg->eabc', A, A, A, u), rtol=1e-12)\nprint('ok')\n",
        lib.display()
    );
    let out = std::process::Command::new("python3").args(["-c", &py]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn an_order_can_be_given_and_bad_ones_say_which_step() {
    let d = tempfile::tempdir().unwrap();
    let src = format!("{INTERP}l = lift(v, [[0, 1], [0, 1], [0, 1]])\ncodegen(l)\n");
    let f = program(d.path(), "o.teml", &src);
    let (ok, o) = teml_bits(d.path(), None, &["run", &f]);
    assert!(ok && o.contains("order [[0, 1], [0, 1], [0, 1]]") && o.contains("verified"), "{o}");
    // A[a][d] * A[b][f] first: an N^4 temporary, more operations than the best order.
    assert!(o.contains("v_1[a][b][d][f] = A[a][d] * A[b][f]"), "{o}");
    refused(
        d.path(),
        None,
        "b1.teml",
        &format!("{INTERP}l = lift(v, [[0, 1], [0, 5], [0, 1]])\n"),
        &["b1.teml:6:13", "lift: argument 2 (order)", "step 2 [0, 5]: 3 operands remain (positions 0 to 2)"],
    );
    refused(
        d.path(),
        None,
        "b2.teml",
        &format!("{INTERP}l = lift(v, [[0, 1]])\n"),
        &["lift: argument 2 (order)", "1 steps (one per contraction of 4 operands: 3)"],
    );
    refused(
        d.path(),
        None,
        "b3.teml",
        &format!("{INTERP}l = lift(v, [], \"columns\")\n"),
        &[
            "lift: argument 3 (layout)",
            "\"result_first\" or \"summed_first\"",
            "found the string \"columns\"",
        ],
    );
}

#[test]
fn what_cannot_be_lifted_is_refused_at_its_line() {
    let d = tempfile::tempdir().unwrap();
    let mm = "N = 4\nA = tensor([N, N])\nB = tensor([N, N])\nD = tensor([N, N])\n";
    // One contraction already.
    refused(
        d.path(),
        None,
        "two.teml",
        &format!("{mm}C = contract(A, B, [2, 1])\nl = lift(C)\n"),
        &[
            "two.teml:6:10",
            "lift: argument 1 (expression)",
            "a product of 2 tensors: one contraction already, nothing to lift",
        ],
    );
    // A sum of products is not a product.
    refused(
        d.path(),
        None,
        "sum.teml",
        &format!(
            "{mm}X = tensor([N, N])\np = vmul(A, B, [[i, k], [k, j]])\nq = vadd(p, D, [, [i, j]])\n\
             r = vmul(q, A, [, [j, l]])\nY = @X: add(X, r, [[i, l], ] -> [i, l])\nl = lift(Y)\n"
        ),
        &["lift: argument 1 (expression)", "whose `+` is not a product of tensors"],
    );
    // A plain assignment keeps k and j free: the last instance wins, not a sum.
    refused(
        d.path(),
        None,
        "plain.teml",
        &format!(
            "{mm}p = vmul(A, B, [[i, k], [k, j]])\nq = vmul(p, D, [, [j, l]])\nX = eq(q, -> [i, l])\nl = lift(X)\n"
        ),
        &["lift: argument 1 (expression)", "the last instance wins, not a sum"],
    );
    // Affine indices.
    refused(
        d.path(),
        None,
        "affine.teml",
        &format!(
            "{mm}X = tensor([N, N])\np = vmul(A, B, [[i, k], [k+1, j]])\nq = vmul(p, D, [, [j, l]])\n\
             Y = @X: add(X, q, [[i, l], ] -> [i, l])\nl = lift(Y)\n"
        ),
        &["lift: argument 1 (expression)", "indexed by an affine expression"],
    );
    // A nest, and a declared tensor.
    refused(
        d.path(),
        None,
        "nest.teml",
        &format!("{mm}C = contract(A, B, [2, 1])\nc = build(C)\nl = lift(c)\n"),
        &["lift: argument 1 (expression)", "expected a tensor expression, found a loop nest"],
    );
    refused(
        d.path(),
        None,
        "leaf.teml",
        &format!("{mm}l = lift(A)\n"),
        &["lift: argument 1 (expression)", "the tensor `A`"],
    );
    // A lifted nest inside a time loop.
    refused(
        d.path(),
        None,
        "around.teml",
        &format!("{INTERP}l = lift(v)\nt = around(s, [0, 3], l)\n"),
        &["around: argument 3 (nest)", "nests without an algebraic rewrite"],
    );
}

#[test]
fn a_space_chooses_among_contraction_orders_and_the_winner_replays() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let (ok, o) = teml_bits(
        d.path(),
        None,
        &[
            "tune",
            &format!("{ROOT}/scripts/tune/mttkrp_lifted.rhai"),
            "-D",
            "N=12",
            "--budget",
            "4",
            "--seed",
            "3",
            // What is chosen and replayed matters here, not how precisely it was timed.
            "--no-anchors",
            "--min-time",
            "0",
            "--rounds",
            "1",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(ok, "{o}");
    let best = std::fs::read_to_string(out.join("best.teml")).unwrap();
    assert!(best.contains("lift(A, [["), "{best}");
    let (ok, o) = teml_bits(d.path(), None, &["run", out.join("best.teml").to_str().unwrap(), "-D", "N=12"]);
    assert!(ok && o.contains("verified") && o.contains("lifted: A from"), "{o}");
    // The orders, cheapest first: the Khatri-Rao product first.
    let script = "// program: ".to_string()
        + ROOT
        + "/examples/mttkrp.teml\nlet o = contraction_orders(A);\nprint(o);\nlet l = lift(A, o[2]);\nprint(tree(l));\n";
    let f = program(d.path(), "orders.rhai", &script);
    let (ok, o) = teml_bits(d.path(), None, &["check", &f, "-D", "N=6"]);
    assert!(ok && o.contains("[[1, 2], [0, 1]]") && o.contains("lifted: A from"), "{o}");
}

/// mttkrp's other cheapest order, B D first (A_1[k][i][j] = sum over l of B[i][k][l] D[l][j], then
/// A = sum over k of C (.) A_1), with the two nests fused at (io, k, jo): each block of A_1 is
/// summed in registers, kept per jo on the stack (store_at) and added into A at once, so the N^3
/// temporary is gone. Sizes that leave remainders of the register block in both directions.
#[test]
fn lifted_nests_fuse_and_their_temporary_contracts_to_a_register_block() {
    let d = tempfile::tempdir().unwrap();
    let c = d.path().join("k.c");
    let (ok, o) = teml_bits(
        d.path(),
        None,
        &[
            "run",
            &format!("{ROOT}/scripts/tune/mttkrp_lifted.rhai"),
            "-D",
            "N=13",
            "--param",
            "order=[[0, 1], [0, 1]]",
            "--param",
            "mr=5",
            "--param",
            "nr=8",
            "--threads",
            "2",
            "--emit-c",
            c.to_str().unwrap(),
        ],
    );
    assert!(ok && o.contains("verified") && o.contains("order [[0, 1], [0, 1]], temporaries A_1"), "{o}");
    assert!(o.contains("`A` lifted: compared with the expression as written"), "{o}");
    // One nest: rows on threads, then k, then blocks of columns holding both statements.
    let tree: Vec<&str> = o.lines().take_while(|l| !l.starts_with("lifted:")).collect();
    let tree = tree.join("\n");
    assert!(!tree.contains("seq"), "{tree}");
    for want in
        ["for io in [0, floor((N-1)/5)]  parallel", "store_at(A_1)", "registers(A_1)", "when N-5*io-5 >= 0"]
    {
        assert!(tree.contains(want), "{want}: {tree}");
    }
    let csrc = std::fs::read_to_string(&c).unwrap();
    assert!(csrc.contains("double teml_A_1_local[5][8] __attribute__((aligned(64)));"), "{csrc}");
    assert!(!csrc.contains("teml_buffer(sizeof(double[N][N][N]))"), "{csrc}");
}

#[test]
fn the_repl_shows_the_lift_and_survives_bad_input() {
    let mut r = teml::repl::Repl::new(teml::ir::State::new(), teml::repl::Mode::Teml);
    for l in INTERP.lines() {
        r.handle(l).unwrap();
    }
    let out = r.handle(":lift v").unwrap();
    assert!(out.contains("1. v_1[e][a][f][g] += A[a][d] * u[e][d][f][g]"), "{out}");
    assert!(out.contains("lifted: v from") && out.contains("orders (15 listed, cheapest first):"), "{out}");
    assert!(r.handle(":lift A").unwrap_err().contains("a product of three or more tensors"));
    assert!(r.handle(":lift nothing").unwrap_err().contains("unknown identifier"));
    assert!(r.handle("l = lift(v)").is_ok());
    assert!(r.handle(":lift l").unwrap_err().contains("a loop nest"));
}

/// TeIL Sec. 3.6 eq. 5 with the distributive law: an iterator one operand alone carries is
/// summed within it first. `Σ_j A[i] B[j]` (a product of two, liftable now) becomes one sum of
/// `B` and N products; `Σ_{k,l} M[i][k] M[k][l] B[j]` sums `M`'s rows first, an O(N^2) chain
/// instead of O(N^3); a trace `Σ_i M[i][i]` is summed over its N points, not N^2. Every kernel
/// verifies against the expression as written, and `contraction_orders` counts the sums too.
#[test]
fn an_iterator_one_operand_alone_carries_is_summed_within_it_first() {
    let d = tempfile::tempdir().unwrap();
    let src = "N = 20\nM = tensor([N, N])\nA = tensor([N])\nB = tensor([N])\n\
               C = einsum(\"i,j->i\", [A, B])\nc = lift(C)\ncodegen(c)\n\
               D = einsum(\"ik,kl,j->ij\", [M, M, B])\nl = lift(D)\ncodegen(l)\n\
               F = einsum(\"ii,j->j\", [M, B])\nf = lift(F)\ncodegen(f)\n";
    let f = program(d.path(), "own.teml", src);
    let (ok, o) = teml_bits(d.path(), None, &["run", &f]);
    assert!(ok && o.matches("verified").count() == 3, "{o}");
    assert!(o.contains("C_1 += B[j]") && o.contains("C[i] = A[i] * C_1"), "{o}");
    // As written 2 N^2; lifted N additions and N products.
    assert!(
        o.contains("lifted: C from 800 -> 40 flops (20.0x fewer), order [[0, 1]], temporaries C_1"),
        "{o}"
    );
    // As written 3 N^4 (three factors, one sum, at N^4 points); lifted: N^2 row sums, N^2
    // multiply-adds (2 N^2), N^2 products.
    assert!(o.contains("D_1[k] += M[k][l]") && o.contains("D_2[i] += M[i][k] * D_1[k]"), "{o}");
    assert!(o.contains("lifted: D from 4.80e5 -> 1600 flops (300.0x fewer)"), "{o}");
    assert!(o.contains("F_1 += M[i][i]") && o.contains("lifted: F from 800 -> 40 flops"), "{o}");

    // The sums' temporaries follow the layout too: the result's iterators first, or what the
    // next step sums over first.
    let lay = program(
        d.path(),
        "layout.teml",
        "N = 5\nB = tensor([N, N, N])\nC = tensor([N, N])\nA = einsum(\"kil,kj->ij\", [B, C])\n\
         l = lift(A)\ncodegen(l)\nm = lift(A, [], \"summed_first\")\ncodegen(m)\n",
    );
    let (ok, o) = teml_bits(d.path(), None, &["run", &lay]);
    assert!(ok && o.matches("verified").count() == 2, "{o}");
    assert!(o.contains("A_1[i][k] += B[k][i][l]") && o.contains("A_1[k][i] += B[k][i][l]"), "{o}");
    // The orders `:lift` lists (and `contraction_orders` ranks) count the sums: the cheapest is
    // the one `lift` took.
    let mut r = teml::repl::Repl::new(teml::ir::State::new(), teml::repl::Mode::Teml);
    for l in src.lines().filter(|l| !l.contains("lift") && !l.contains("codegen")) {
        r.handle(l.trim()).unwrap();
    }
    let out = r.handle(":lift D").unwrap();
    assert!(out.contains("orders (3 listed, cheapest first):\n  [[0, 1], [0, 1]]  1600 flops"), "{out}");
    // A two-operand product whose own iterator spans one point saves nothing: still refused.
    refused(
        d.path(),
        None,
        "one.teml",
        "N = 4\nA = tensor([N])\nB = tensor([1])\nC = einsum(\"i,j->i\", [A, B])\nl = lift(C)\n",
        &[
            "one.teml:5:10",
            "lift: argument 1 (expression)",
            "a product of 2 tensors: one contraction already",
        ],
    );
}

/// A random einsum over 2 to 5 operands (letters from a small pool, ranks 1 to 3, some
/// letters kept): `lift` succeeds (its own oracle check passes), its order is never costlier
/// than the expression as written, and the lifted kernel verifies.
fn spec() -> impl Strategy<Value = String> {
    let operand =
        proptest::collection::btree_set(proptest::sample::select(vec!['a', 'b', 'c', 'd', 'e']), 1..=3)
            .prop_map(|s| s.into_iter().collect::<String>());
    (
        proptest::collection::vec(operand, 2..=5),
        proptest::collection::btree_set(proptest::sample::select(vec!['a', 'b', 'c', 'd', 'e']), 0..=2),
    )
        .prop_map(|(ops, out)| {
            let used: String = ops.concat();
            let out: String = out.into_iter().filter(|c| used.contains(*c)).collect();
            format!("{}->{}", ops.join(","), out)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn random_products_lift_to_no_more_operations(s in spec()) {
        let (ins, out) = s.split_once("->").unwrap();
        let ops: Vec<&str> = ins.split(',').collect();
        let mut src = String::from("Na = 3\nNb = 4\nNc = 2\nNd = 5\nNe = 3\n");
        let dims = |o: &str| o.chars().map(|c| format!("N{c}")).collect::<Vec<_>>().join(", ");
        for (k, o) in ops.iter().enumerate() {
            src.push_str(&format!("T{k} = tensor([{}])\n", dims(o)));
        }
        let names: Vec<String> = (0..ops.len()).map(|k| format!("T{k}")).collect();
        src.push_str(&format!("R = einsum(\"{ins}->{out}\", [{}])\nl = lift(R)\ncodegen(l)\n", names.join(", ")));
        let state = teml::lang::eval_with(&src, "p.teml", &teml::ir::State::new(), &teml::script::Stdlib::get());
        let state = match state {
            Ok(s) => s,
            // A product of two operands where neither carries an iterator of its own is refused
            // cleanly.
            Err(e) => { prop_assert!(e.to_string().contains("nothing to lift") || e.to_string().contains("distinct"), "{src}\n{e}"); return Ok(()); }
        };
        let teml::ir::Value::Nest(n) = state.get("l").unwrap().clone() else { panic!("not a nest") };
        let r = &n.rewrites[0];
        prop_assert!(r.flops_after <= r.flops_before * (1.0 + 1e-12), "{src}: {} > {}", r.flops_after, r.flops_before);
        let report = teml::pipeline::run_request(&state, &state.kernels[0], 0, &teml::pipeline::RunOptions::default());
        let report = report.map_err(|e| TestCaseError::fail(format!("{src}: {e}")))?;
        prop_assert!(report.verified, "{src}: {report:?}");
    }
}

const SUMS: &str = "N = 6\nA = tensor([N, N])\nB = tensor([N, N])\nD = tensor([N, N])\nC = tensor([N, N])\n";

#[test]
fn factor_and_expand_are_checked_rewrites_whose_kernels_verify() {
    let d = tempfile::tempdir().unwrap();
    // A[i][k] B[k][j] + A[i][k] D[k][j] summed onto C; and a difference of two vcontracts, which
    // cannot be assigned until A is factored out (its iterators k1, k12 renamed to match).
    let src = format!(
        "{SUMS}p = vmul(A, B, [[i, k], [k, j]])\nq = vmul(A, D, [[i, k], [k, j]])\ns = vadd(p, q, [, ])\n\
         Y = @C: add(C, s, [[i, j], ] -> [i, j])\nF = factor(Y)\nG = expand(F)\n\
         X = vcontract(A, B, [2, 1])\nZ = vcontract(A, D, [2, 1])\nS = vsub(X, Z, [, ])\nS2 = factor(S)\n\
         W = eq(S2, -> [i1, i2])\nl1 = build(F)\nl2 = build(G)\nl3 = build(W)\ncodegen(l1)\ncodegen(l2)\ncodegen(l3)\n"
    );
    let f = program(d.path(), "fx.teml", &src);
    let (ok, o) = teml_bits(d.path(), None, &["run", &f]);
    assert!(ok && o.matches(": verified (").count() == 3, "{o}");
    assert!(o.contains("F[i][j] += A[i][k] * (B[k][j] + D[k][j])"), "{o}");
    // F and G are verified against Y as written (`F = F + (A B + A D)`), at the rounding bound
    // of the two forms, and their trees say what the rewrite saved.
    assert!(
        o.contains(
            "factored: F from 864 -> 648 flops (1.3x fewer), verified against the expression as written"
        ),
        "{o}"
    );
    assert!(o.contains("expanded: G from 864 -> 864 flops (1.0x fewer)"), "{o}");
    assert!(o.contains("; `F` factored: compared with the expression as written, within "), "{o}");
    assert!(o.contains("; `G` expanded: compared with the expression as written, within "), "{o}");
    assert!(o.contains("A[i1][k12] * (B[k12][i2] - D[k12][i2])"), "{o}");
    refused(
        d.path(),
        None,
        "f1.teml",
        &format!(
            "{SUMS}p = vmul(A, B, [[i, k], [k, j]])\nY = @C: add(C, p, [[i, j], ] -> [i, j])\nF = factor(Y)\n"
        ),
        &["f1.teml:8:12", "factor: argument 1 (expression)", "a sum or difference of products"],
    );
    refused(
        d.path(),
        None,
        "f2.teml",
        &format!(
            "{SUMS}p = vmul(A, B, [[i, k], [k, j]])\nq = vmul(D, A, [[i, k], [k, j]])\ns = vadd(p, q, [, ])\n\
             Y = @C: add(C, s, [[i, j], ] -> [i, j])\nF = factor(Y)\n"
        ),
        &["factor: argument 1 (expression)", "expected products with a common operand"],
    );
    refused(
        d.path(),
        None,
        "f3.teml",
        &format!(
            "{SUMS}p = vmul(A, B, [[i, k], [k, j]])\nY = @C: add(C, p, [[i, j], ] -> [i, j])\nF = expand(Y)\n"
        ),
        &["expand: argument 1 (expression)", "a product with a sum or difference among its factors"],
    );
}

/// `factor` and `expand` over three products (`A B + A D - A C` and back), both verified
/// against the assignment as written (`Y`), not against their own statements: the report
/// names the comparison and its rounding bound. A third product without the common operand
/// is refused with all three.
#[test]
fn factor_and_expand_take_any_number_of_products_and_verify_against_the_original() {
    let d = tempfile::tempdir().unwrap();
    let three = format!(
        "{SUMS}p = vmul(A, B, [[i, k], [k, j]])\nq = vmul(A, D, [[i, k], [k, j]])\nr = vmul(A, C, [[i, k], [k, j]])\n\
         s = vadd(p, q, [, ])\nu = vsub(s, r, [, ])\nE = tensor([N, N])\nY = @E: add(E, u, [[i, j], ] -> [i, j])\n"
    );
    let src = format!(
        "{three}F = factor(Y)\nG = expand(F)\nl1 = build(F)\nl2 = build(G)\ncodegen(l1)\ncodegen(l2)\n"
    );
    let f = program(d.path(), "f3.teml", &src);
    let (ok, o) = teml_bits(d.path(), None, &["run", &f]);
    assert!(ok && o.matches(": verified (").count() == 2, "{o}");
    assert!(o.contains("F[i][j] += A[i][k] * (B[k][j] + D[k][j] - C[k][j])"), "{o}");
    assert!(o.contains("G[i][j] += A[i][k] * B[k][j] + A[i][k] * D[k][j] - A[i][k] * C[k][j]"), "{o}");
    assert!(o.contains("; `F` factored: compared with the expression as written"), "{o}");
    assert!(o.contains("; `G` expanded: compared with the expression as written"), "{o}");
    assert!(o.contains("(rounding of 24 sums of 2 factors"), "{o}");
    // the third product shares no operand with the others
    let bad = three.replace("r = vmul(A, C,", "r = vmul(C, D,");
    refused(
        d.path(),
        None,
        "f4.teml",
        &format!("{bad}F = factor(Y)\n"),
        &["f4.teml:13", "expected products with a common operand", "C[i][k] * D[k][j]"],
    );
}
