//! The tensor operations of the standard library (Sec. 4.2) against their definitions in the
//! paper: each builds the tree its equation composes from core builtins, and (compiled and
//! run) computes what the reference interpreter computes.

use crate::common::{instance_set, verify_kernels};
use teml::ir::{Nest, State, Value};
use teml::script::{Stdlib, eval};

fn ok(src: &str, s: &State) -> State {
    eval(src, "t.rhai", s).unwrap_or_else(|e| panic!("{e}"))
}

fn fails(src: &str) -> String {
    match eval(src, "t.rhai", &State::new()) {
        Ok(_) => panic!("should fail:\n{src}"),
        Err(e) => e.message,
    }
}

fn get<'a>(s: &'a State, id: &str) -> &'a Value {
    s.get(id).unwrap_or_else(|| panic!("`{id}` unbound"))
}

fn infix(s: &State, id: &str) -> String {
    match get(s, id) {
        Value::Tensor(t) => t.to_string(),
        Value::Nest(_) => panic!("`{id}` is a nest"),
    }
}

fn nest(s: &State, id: &str) -> Nest {
    match get(s, id) {
        Value::Nest(n) => n.clone(),
        Value::Tensor(_) => panic!("`{id}` is a tensor"),
    }
}

fn order(n: &Nest) -> Vec<String> {
    n.path().iter().map(|l| l.iter.to_string()).collect()
}

/// Asserts in the script that each pair of expressions builds the same tree (before naming:
/// values compared straight from the calls carry the hole).
fn same(decls: &str, pairs: &[(&str, &str)]) {
    let mut src = decls.to_string();
    for (k, (a, b)) in pairs.iter().enumerate() {
        src.push_str(&format!(
            "\nif {a} != {b} {{ throw `pair {k}: ${{tree({a})}}\n  !=\n${{tree({b})}}`; }}"
        ));
    }
    ok(&src, &State::new());
}

const MATS: &str = "let A = tensor([N, M]);\nlet B = tensor([N, M]);\nlet C = tensor([N, M]);\n\
                    let D = tensor([M, K]);\nlet u = tensor([N]);\nlet v = tensor([M]);\nlet w = tensor([K]);\n\
                    let T = tensor([N, M, K]);";

#[test]
fn entrywise_operations_are_eq_30_and_31() {
    same(
        MATS,
        &[
            ("ventrywise_add(A, B)", "vadd(A, B, [[i1, i2], [i1, i2]])"),
            ("ventrywise_sub(A, B)", "vsub(A, B, [[i1, i2], [i1, i2]])"),
            ("ventrywise_mul(A, B)", "vmul(A, B, [[i1, i2], [i1, i2]])"),
            ("ventrywise_div(A, B)", "vdiv(A, B, [[i1, i2], [i1, i2]])"),
            ("entrywise_add(A, B)", "add(A, B, [[i1, i2], [i1, i2]], [i1, i2])"),
            ("entrywise_sub(A, B)", "sub(A, B, [[i1, i2], [i1, i2]], [i1, i2])"),
            ("entrywise_mul(A, B)", "mul(A, B, [[i1, i2], [i1, i2]], [i1, i2])"),
            ("entrywise_div(A, B)", "div(A, B, [[i1, i2], [i1, i2]], [i1, i2])"),
            // n-ary: one list I for every operand, left to right.
            ("ventrywise_add([A, B, C])", "vadd(vadd(A, B, [[i1, i2], [i1, i2]]), C, [(), [i1, i2]])"),
            ("ventrywise_add(A, B, C)", "ventrywise_add([A, B, C])"),
            (
                "entrywise_sub([A, B, C])",
                "sub(vsub(A, B, [[i1, i2], [i1, i2]]), C, [(), [i1, i2]], [i1, i2])",
            ),
            ("entrywise_mul(A, B, C)", "entrywise_mul([A, B, C])"),
            // A virtual operand has its free iterators renamed to I.
            (
                "entrywise_add(vadd(A, B, [[x, y], [x, y]]), C)",
                "add(vadd(A, B, [[i1, i2], [i1, i2]]), C, [(), [i1, i2]], [i1, i2])",
            ),
        ],
    );
    let s = ok(&format!("{MATS}\nlet E = entrywise_mul([A, B, C]);\nlet l = build(E);"), &State::new());
    assert_eq!(infix(&s, "E"), "E[i1][i2] = A[i1][i2] * B[i1][i2] * C[i1][i2]");
    assert_eq!(order(&nest(&s, "l")), ["i1", "i2"]);
    assert!(
        fails(&format!("{MATS}\nentrywise_add(A, u)"))
            .starts_with("entrywise_add: argument 2 (operand): expected a tensor of rank 2")
    );
    assert!(fails(&format!("{MATS}\nentrywise_add(A, D)")).contains("shape mismatch"));
    assert!(
        fails(&format!("{MATS}\nentrywise_add([A])"))
            .starts_with("entrywise_add: argument 1 (operands): expected an array of 2 or more")
    );
}

#[test]
fn transpose_is_eq_32() {
    same(
        MATS,
        &[
            ("transpose(A, [[1, 2]])", "eq(A, [i1, i2], [i2, i1])"),
            ("transpose(A, [1, 2])", "transpose(A, [[1, 2]])"),
            ("transpose(T, [[1, 3]])", "eq(T, [i1, i2, i3], [i3, i2, i1])"),
            // Pairs swap one after the other.
            ("transpose(T, [[1, 2], [2, 3]])", "eq(T, [i1, i2, i3], [i2, i3, i1])"),
        ],
    );
    let s = ok(&format!("{MATS}\nlet At = transpose(A, [[1, 2]]);\nlet l = build(At);"), &State::new());
    assert_eq!(infix(&s, "At"), "At[i2][i1] = A[i1][i2]");
    assert_eq!(
        get(&s, "At").paper(),
        "⟨(=, •, •), [⟨(At, [M, N], [i2, i1]), []⟩, ⟨(A, [N, M], [i1, i2]), []⟩]⟩"
    );
    assert_eq!(
        nest(&s, "l").tree(),
        "for i1 in [0, N-1]\n  for i2 in [0, M-1]\n    At[i2][i1] = A[i1][i2]\n"
    );
    assert!(
        fails(&format!("{MATS}\ntranspose(A, [[1, 3]])"))
            .starts_with("transpose: argument 2 (dimension pairs): expected dimensions in 1..=2")
    );
}

#[test]
fn vtranspose_reorganizes_iterators_only() {
    same(
        MATS,
        &[
            ("vtranspose(A, [[1, 2]])", "with_iters(A, [i2, i1])"),
            ("vtranspose(vadd(A, B, [[i1, i2], [i1, i2]]), [[1, 2]])", "vadd(A, B, [[i2, i1], [i2, i1]])"),
        ],
    );
    // Used with an omitted list it is the transpose, without a copy of its own.
    let s = ok(
        &format!(
            "{MATS}\nlet Av = vtranspose(A, [[1, 2]]);\nlet X = eq(Av, (), [i1, i2]);\n\
             let Y = mul(D, vtranspose(vadd(A, B, [[i1, i2], [i1, i2]]), [[1, 2]]), [[i1, i3], ()], [i1, i2, i3]);"
        ),
        &State::new(),
    );
    assert_eq!(infix(&s, "X"), "X[i1][i2] = A[i2][i1]");
    assert_eq!(
        get(&s, "X").paper(),
        "⟨(=, •, •), [⟨(X, [M, N], [i1, i2]), []⟩, ⟨(A, [N, M], [i2, i1]), []⟩]⟩"
    );
    assert_eq!(infix(&s, "Y"), "Y[i1][i2][i3] = D[i1][i3] * (A[i2][i1] + B[i2][i1])");
}

#[test]
fn contract_is_eq_33() {
    same(
        MATS,
        &[
            (
                "contract(A, D, [2, 1])",
                "add(accumulator([N, K]), vmul(A, D, [[i1, k1], [k1, i2]]), [[i1, i2], ()], [i1, i2])",
            ),
            ("contract(A, D, [[2, 1]])", "contract(A, D, [2, 1])"),
            (
                "contract(T, D, [[2, 1], [3, 2]])",
                "add(accumulator([N]), vmul(T, D, [[i1, k1, k2], [k1, k2]]), [[i1], ()], [i1])",
            ),
            (
                "contract(A, B, [1, 1])",
                "add(accumulator([M, M]), vmul(A, B, [[k1, i1], [k1, i2]]), [[i1, i2], ()], [i1, i2])",
            ),
            // Dot product: rank 0.
            ("contract(u, u, [1, 1])", "add(accumulator([]), vmul(u, u, [[k1], [k1]]), [[], ()], [])"),
        ],
    );
    // mm via contract: the loop nest i1, i2, then the summed k1; the accumulator is zeroed first.
    let s = ok(&format!("{MATS}\nlet R = contract(A, D, [2, 1]);\nlet l = build(R);"), &State::new());
    assert_eq!(infix(&s, "R"), "R[i1][i2] += A[i1][k1] * D[k1][i2]");
    assert_eq!(
        get(&s, "R").paper(),
        "⟨(=, •, •), [⟨(R, [N, K], [i1, i2]), []⟩, ⟨(+, [N, K, M], •), [⟨(R, [N, K], [i1, i2]), []⟩, \
         ⟨(*, [N, M, K], •), [⟨(A, [N, M], [i1, k1]), []⟩, ⟨(D, [M, K], [k1, i2]), []⟩]⟩]⟩]⟩"
    );
    assert!(get(&s, "R").tree().starts_with("(=, •, •)  accumulator: zeroed at its first update"));
    assert_eq!(
        nest(&s, "l").tree(),
        "for i1 in [0, N-1]\n  for i2 in [0, K-1]\n    for k1 in [0, M-1]\n      R[i1][i2] += A[i1][k1] * D[k1][i2]\n"
    );
    // C is declared [N, M]: the contraction's [N, K] does not fit.
    let e = fails(&format!("{MATS}\nlet C = contract(A, D, [2, 1]);\nlet l = build(C);"));
    assert!(e.contains("shape mismatch"), "{e}");
    assert!(fails(&format!("{MATS}\ncontract(A, D, [1, 1])")).contains("shape mismatch"));
    assert!(fails(&format!("{MATS}\ncontract(A, D, [3, 1])")).starts_with(
        "contract: argument 3 (dimension pairs): expected a dimension of operand 1 in 1..=2, found 3"
    ));
    assert!(
        fails(&format!("{MATS}\ncontract(T, D, [[2, 1], [2, 2]])"))
            .contains("each dimension contracted at most once")
    );
}

#[test]
fn outer_products_are_eq_34_and_35() {
    same(
        MATS,
        &[
            ("vouterproduct(u, v)", "vmul(u, v, [[i1], [i2]])"),
            ("vouterproduct([u, v, w])", "vmul(u, vmul(v, w, [[i2], [i3]]), [[i1], ()])"),
            ("vouterproduct(u, v, w)", "vouterproduct([u, v, w])"),
            ("vouterproduct(A, w)", "vmul(A, w, [[i1, i2], [i3]])"),
            ("outerproduct(u, v)", "eq(vmul(u, v, [[i1], [i2]]), (), [i1, i2])"),
            (
                "outerproduct([u, v, w])",
                "eq(vmul(u, vmul(v, w, [[i2], [i3]]), [[i1], ()]), (), [i1, i2, i3])",
            ),
        ],
    );
    let s = ok(&format!("{MATS}\nlet W = outerproduct(u, v, w);\nlet l = build(W);"), &State::new());
    assert_eq!(infix(&s, "W"), "W[i1][i2][i3] = u[i1] * v[i2] * w[i3]");
    assert_eq!(
        get(&s, "W").paper().split("), []⟩").next(),
        Some("⟨(=, •, •), [⟨(W, [N, M, K], [i1, i2, i3]")
    );
    assert_eq!(order(&nest(&s, "l")), ["i1", "i2", "i3"]);
}

#[test]
fn einsum_lowers_to_vmul_and_an_accumulator() {
    let decls = "let B = tensor([I, K, L]);\nlet C = tensor([K, J]);\nlet D = tensor([L, J]);\n\
                 let X = tensor([Bt, I, K]);\nlet Y = tensor([Bt, K, J]);\nlet S = tensor([I, J]);\nlet P = tensor([I, K]);";
    same(
        decls,
        &[
            (
                "einsum(\"ikl,lj,kj->ij\", [B, D, C])",
                "add(accumulator([I, J]), vmul(vmul(B, D, [[i, k, l], [l, j]]), C, [(), [k, j]]), [[i, j], ()], [i, j])",
            ),
            (
                "einsum(\"bik,bkj->bij\", [X, Y])",
                "add(accumulator([Bt, I, J]), vmul(X, Y, [[b, i, k], [b, k, j]]), [[b, i, j], ()], [b, i, j])",
            ),
            (
                "einsum(\"ij,ik,kj->ij\", [S, P, C])",
                "add(accumulator([I, J]), vmul(vmul(S, P, [[i, j], [i, k]]), C, [(), [k, j]]), [[i, j], ()], [i, j])",
            ),
            ("einsum(\"ij->ji\", [S])", "eq(S, [i, j], [j, i])"),
            ("einsum(\"ij->i\", [S])", "add(accumulator([I]), S, [[i], [i, j]], [i])"),
            ("einsum(\"ik,kj\", [P, C])", "einsum(\"ik,kj->ij\", [P, C])"),
            (
                "einsum(\"ik,kj->ij\", [P, C], S)",
                "add(S, vmul(P, C, [[i, k], [k, j]]), [[i, j], ()], [i, j])",
            ),
        ],
    );
    // mttkrp: A[i][j] += B[i][k][l] * D[l][j] * C[k][j], loops i, j, k, l as the Sec. 5.3 listing.
    let s = ok(
        &format!("{decls}\nlet A = einsum(\"ikl,lj,kj->ij\", [B, D, C]);\nlet l = build(A);"),
        &State::new(),
    );
    assert_eq!(infix(&s, "A"), "A[i][j] += B[i][k][l] * D[l][j] * C[k][j]");
    assert_eq!(order(&nest(&s, "l")), ["i", "j", "k", "l"]);
    assert!(
        fails(&format!("{decls}\neinsum(\"ikl,lj->ij\", [B, D, C])"))
            .starts_with("einsum: argument 2 (operands): expected 2 tensors")
    );
    assert!(
        fails(&format!("{decls}\neinsum(\"ik,lj->ij\", [B, D])"))
            .starts_with("einsum: argument 1 (spec): expected 3 letters for operand 1")
    );
    assert!(fails(&format!("{decls}\neinsum(\"iK,Kj->ij\", [P, C])")).contains("not named constants"));
    assert!(
        fails(&format!("{decls}\neinsum(\"ik,kj->iz\", [P, C])"))
            .contains("output letters that appear in some input")
    );
    assert!(fails(&format!("{decls}\neinsum(\"ik,kj->ij\", [P, D])")).contains("shape mismatch"));
}

#[test]
fn the_mttkrp_of_sec_5_3_in_teml_syntax() {
    // The listing, with the forms that type-check (docs/semantics.md): D transposed first, then the
    // kernel through einsum (or through vmul/add).
    let src = "B = tensor(double, [I, K, L])\nC = tensor(double, [K, J])\nD = tensor(double, [J, L])\n\
               Dt = transpose(D, [[1, 2]])\nA = einsum(\"ikl,lj,kj->ij\", [B, Dt, C])\nld = build(Dt)\nl = build(A)\n\
               l1 = parallelize(l, 1)\nl2 = interchange(l1, [2, 3])\ncodegen(ld, l2)";
    let st = State::new().with_const("I", 6).with_const("J", 5).with_const("K", 4).with_const("L", 3);
    let s = teml::lang::eval_with(src, "mttkrp.teml", &st, &Stdlib::get()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(infix(&s, "Dt"), "Dt[i2][i1] = D[i1][i2]");
    assert_eq!(infix(&s, "A"), "A[i][j] += B[i][k][l] * Dt[l][j] * C[k][j]");
    assert_eq!(order(&nest(&s, "l2")), ["i", "k", "j", "l"]);
    assert_eq!(instance_set(&nest(&s, "l2"), &s), instance_set(&nest(&s, "l"), &s));
    verify_kernels(&s);
    // contract and friends from .teml.
    let src = "A = tensor([4, 3])\nB = tensor([3, 5])\nC = contract(A, B, [2, 1])\nW = outerproduct(A, B)\n\
               E = entrywise_add([A, A, A])\nV = vtranspose(A, [[1, 2]])\nX = eq(V, -> [i1, i2])";
    let s =
        teml::lang::eval_with(src, "t.teml", &State::new(), &Stdlib::get()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(infix(&s, "C"), "C[i1][i2] += A[i1][k1] * B[k1][i2]");
    assert_eq!(infix(&s, "W"), "W[i1][i2][i3][i4] = A[i1][i2] * B[i3][i4]");
    assert_eq!(infix(&s, "E"), "E[i1][i2] = A[i1][i2] + A[i1][i2] + A[i1][i2]");
    assert_eq!(infix(&s, "X"), "X[i1][i2] = A[i2][i1]");
    // A library error keeps the core's type.
    let e = teml::lang::eval_with(
        "A = tensor([4])\nC = contract(A, A, [1, 2])",
        "t.teml",
        &State::new(),
        &Stdlib::get(),
    )
    .unwrap_err();
    assert!(matches!(e.error, Some(teml::Error::BadArgument { .. })), "{e:?}");
    assert_eq!(
        e.message,
        "contract: argument 3 (dimension pairs): expected a dimension of operand 2 in 1..=1, found 2"
    );
    assert_eq!((e.line, e.col), (2, 20), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Compiled, run and verified against the reference interpreter.

#[test]
fn library_kernels_verify() {
    let src = "let A = tensor([N, M]);\nlet D = tensor([M, K]);\nlet C = contract(A, D, [2, 1]);\n\
               let lc = build(C);\ncodegen(lc);\ncodegen(tile(lc, 4));\n\
               let A2 = tensor([9, 7]);\nlet D2 = tensor([7, 6]);\nlet C2 = contract(A2, D2, [2, 1]);\n\
               codegen(unroll_and_jam(build(C2), 1, 3));\ncodegen(unroll_and_jam(unroll_by(build(C2), 3, 7), 2, 2));\n\
               let B = tensor([N, K, M]);\nlet E = tensor([M, 5]);\nlet F = tensor([K, 5]);\n\
               let G = einsum(\"ikl,lj,kj->ij\", [B, E, F]);\nlet lg = build(G);\ncodegen(lg);\ncodegen(interchange(lg, 2, 3));\n\
               let X = tensor([3, N, K]);\nlet Y = tensor([3, K, M]);\nlet Z = einsum(\"bik,bkj->bij\", [X, Y]);\n\
               codegen(tile(build(Z), 2));\nlet T = transpose(A, [[1, 2]]);\nlet W = outerproduct(A, D);\n\
               let S = entrywise_mul([A, A, A]);\nlet Dt = transpose(D, [1, 2]);\nlet AD = contract(A, Dt, [2, 2]);\n\
               codegen(build(T), build(W), build(S), build(Dt), build(AD));";
    let st = State::new().with_const("N", 9).with_const("M", 7).with_const("K", 6);
    let s = ok(src, &st);
    verify_kernels(&s);
}

#[test]
fn transpose_refuses_a_pair_of_one_dimension() {
    let e = fails("let T = tensor([3, 4]);\nlet X = transpose(T, [[1, 1]]);");
    assert_eq!(
        e,
        "transpose: argument 2 (dimension pairs): expected pairs of two different dimensions, found [1, 1]"
    );
    let e = fails("let T = tensor([3, 4]);\nlet X = vtranspose(T, [2, 2]);");
    assert_eq!(
        e,
        "vtranspose: argument 2 (dimension pairs): expected pairs of two different dimensions, found [2, 2]"
    );
}

/// The contraction of two float tensors into an undeclared result is a float tensor (the
/// accumulator takes its operands' type), and it verifies.
#[test]
fn contraction_of_floats_is_float() {
    for src in [
        "let A = tensor(float, [4, 5]);\nlet B = tensor(float, [5, 3]);\nlet C = contract(A, B, [2, 1]);\nlet l = build(C);\ncodegen(l);",
        "let A = tensor(float, [4, 5]);\nlet B = tensor(float, [5, 3]);\nlet C = einsum(\"ik,kj->ij\", [A, B]);\nlet l = build(C);\ncodegen(l);",
    ] {
        let s = ok(src, &State::new());
        let c = s.real_tensor("C").unwrap();
        assert_eq!(c.dtype, teml::ir::DType::Float, "{src}");
        verify_kernels(&s);
    }
    // a double operand makes it double
    let s = ok(
        "let A = tensor(float, [4, 5]);\nlet B = tensor([5, 3]);\nlet C = contract(A, B, [2, 1]);",
        &State::new(),
    );
    assert_eq!(s.real_tensor("C").unwrap().dtype, teml::ir::DType::Double);
}
