//! The two references agree: for every example program and every optimization path, at the
//! small sizes its `# test:` line gives, the reference interpreter (running the untransformed
//! loop nests) and the oracle (evaluating the tensor expressions themselves, with no loops)
//! compute the same values for every tensor a kernel writes; and the oracle's single-element
//! evaluation ([`Spot`]) agrees with its whole-tensor one.

use std::path::{Path, PathBuf};
use teml::interp;
use teml::ir::{Name, State, TExpr};
use teml::oracle::{self, Spot};
use teml::pipeline::{RunOptions, initial_store, untransformed};
use teml::script::Stdlib;

fn files(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut out: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("teml"))
        .collect();
    out.sort();
    out
}

/// The named constants of the file's `# test:` line (`-D N=12 -D K=8`).
fn small_state(src: &str, path: &Path) -> State {
    let line = src
        .lines()
        .find_map(|l| l.strip_prefix("# test:"))
        .unwrap_or_else(|| panic!("{}: no `# test:` line with small sizes", path.display()));
    line.split_whitespace().filter(|w| *w != "-D").fold(State::new(), |s, def| {
        let (n, v) = def.split_once('=').unwrap_or_else(|| panic!("{}: bad `{def}`", path.display()));
        s.with_const(n, v.parse().unwrap())
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Compares the interpreter and the oracle on every kernel of one program; returns the
/// number of kernels compared.
fn check(path: &Path) -> usize {
    let src = std::fs::read_to_string(path).unwrap();
    check_src(&src, &path.display().to_string(), &small_state(&src, path))
}

fn check_src(src: &str, file: &str, init: &State) -> usize {
    let state =
        teml::lang::eval_with(src, file, init, &Stdlib::get()).unwrap_or_else(|e| panic!("{file}: {e}"));
    assert!(!state.kernels.is_empty(), "{file}: no codegen request");
    for (k, req) in state.kernels.iter().enumerate() {
        let what = format!("{file}, kernel {}", k + 1);
        let nests = untransformed(&state, req).unwrap_or_else(|e| panic!("{what}: {e}"));
        let initial =
            initial_store(&state, &nests, &RunOptions::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
        // The program as written (a lifted expression as the user wrote it).
        let stmts: Vec<TExpr> = nests.iter().flat_map(|n| n.origin.clone()).collect();

        let mut by_interp = initial.clone();
        interp::run(&state, &nests, &mut by_interp).unwrap_or_else(|e| panic!("{what}: interpreter: {e}"));
        let mut by_oracle = initial.clone();
        oracle::run(&state, &stmts, &mut by_oracle).unwrap_or_else(|e| panic!("{what}: oracle: {e}"));

        let mut written: Vec<Name> = stmts.iter().filter_map(|s| s.target()?.id().cloned()).collect();
        written.dedup();
        let mut spot = Spot::new(&state, &stmts, &initial, 50_000_000);
        for name in &written {
            let (want, got) = (&by_interp[name], &by_oracle[name]);
            assert_eq!(want.dims, got.dims, "{what}: extents of `{name}`");
            for (j, (a, b)) in want.data.iter().zip(&got.data).enumerate() {
                assert!(close(*a, *b), "{what}: `{name}` element {j}: interpreter {a}, oracle {b}");
            }
            // A few elements, spread over the tensor, one at a time.
            let n = got.data.len();
            for j in [0, n / 3, n / 2, n - 1] {
                let mut idx = vec![0; got.dims.len()];
                let mut r = j;
                for (i, d) in idx.iter_mut().zip(&got.dims).rev() {
                    *i = r % d;
                    r /= d;
                }
                let v =
                    spot.element(name, &idx).unwrap_or_else(|e| panic!("{what}: spot `{name}`{idx:?}: {e}"));
                assert!(
                    close(v, got.data[j]),
                    "{what}: spot `{name}`{idx:?} = {v}, run gives {}",
                    got.data[j]
                );
            }
        }
    }
    state.kernels.len()
}

fn check_dir(dir: &str) {
    let list = files(dir);
    assert!(!list.is_empty(), "no programs in {dir}");
    for f in &list {
        check(f);
    }
}

#[test]
fn table1_kernels_agree_with_the_interpreter() {
    check_dir("examples");
}

#[test]
fn paper_figures_agree_with_the_interpreter() {
    check_dir("examples/paper");
}

#[test]
fn pluto_paths_agree_with_the_interpreter() {
    check_dir("scripts/pluto");
}

#[test]
fn sec53_paths_agree_with_the_interpreter() {
    check_dir("scripts/paper");
}

/// Corners of the semantics the examples do not reach.
#[test]
fn corner_programs_agree_with_the_interpreter() {
    let progs = [
        // A plain assignment with an iterator absent from the target: the last instance wins.
        "A = tensor([5, 4])\nB = eq(A, [i, j] -> [j])\nl = build(B)\ncodegen(l)",
        // A contraction as a numerator, and as a factor of a product.
        "A = tensor([5, 3])\nB = tensor([3, 4])\nC = tensor([5, 4])\nt = vcontract(A, B, [2, 1])\n\
         X = div(t, C, [, [i1, i2]] -> [i1, i2])\nY = mul(C, t, [[i1, i2], ] -> [i1, i2])\n\
         l1 = build(X)\nl2 = build(Y)\ncodegen(l1, l2)",
        // A chain: an accumulator, then a plain accumulation onto it, then an in-place square.
        "A = tensor([4, 3])\nB = tensor([3, 4])\nD = tensor([4, 4])\nC = contract(A, B, [2, 1])\n\
         C2 = @C: add(C, D, [[i, j], [j, i]] -> [i, j])\nC3 = @C: mul(C, C, [[i, j], [i, j]] -> [i, j])\n\
         l1 = build(C)\nl2 = build(C2)\nl3 = build(C3)\ncodegen(l1, l2, l3)",
        // A contraction summed further over an iterator the target lacks; a dot product.
        "A = tensor([5, 3])\nB = tensor([3, 4])\nt = vcontract(A, B, [2, 1])\nX = eq(t, [i1, i2] -> [i1])\n\
         x = tensor([6])\ny = tensor([6])\nd = vcontract(x, y, [1, 1])\ns = eq(d, [] -> [])\n\
         l1 = build(X)\nl2 = build(s)\ncodegen(l1, l2)",
        // Offsets in reads, the target shorter than the source.
        "A = tensor([7])\nB = sub(A, A, [[i+2], [i]] -> [i])\nl = build(B)\ncodegen(l)",
    ];
    for (k, p) in progs.iter().enumerate() {
        check_src(p, &format!("corner{}.teml", k + 1), &State::new());
    }
}

/// Programs whose meaning the oracle leaves undefined, or whose ranges it infers otherwise
/// than `build`: refused with an error, never a wrong value.
#[test]
fn programs_outside_the_oracle_are_refused() {
    let cases = [
        // In place at other elements: the loops transpose half-updated data.
        ("A = tensor([4, 4])\nT = @A: eq(A, [i, j] -> [j, i])\nl = build(T)\ncodegen(l)", "A", "in place"),
        // `k` indexes B on its own (extent 5) but `A[i][k+1]` only fits 4 of them: `build`
        // narrows the range (ops::infer), the oracle keeps the plain extent and reads past A.
        (
            "A = tensor([3, 5])\nB = tensor([5, 4])\nt = vmul(A, B, [[i, k+1], [k, j]])\nC = tensor([3, 4])\n\
             init(C, 0)\nC = add(C, t, [[i, j], ] -> [i, j])\nl = build(C)\ncodegen(l)",
            "C",
            "reads index 5",
        ),
    ];
    for (src, written, why) in cases {
        let state = teml::lang::eval_with(src, "t.teml", &State::new(), &Stdlib::get()).unwrap();
        let req = &state.kernels[0];
        let nests = untransformed(&state, req).unwrap();
        let bufs = initial_store(&state, &nests, &RunOptions::default()).unwrap();
        interp::run(&state, &nests, &mut bufs.clone()).unwrap();
        // The program as written (a lifted expression as the user wrote it).
        let stmts: Vec<TExpr> = nests.iter().flat_map(|n| n.origin.clone()).collect();
        let e = oracle::run(&state, &stmts, &mut bufs.clone()).unwrap_err();
        assert!(e.to_string().contains(why), "{src}: {e}");
        let e = Spot::new(&state, &stmts, &bufs, 1000).element(written, &[0, 1]).unwrap_err();
        assert!(e.to_string().contains(why), "{src}: {e}");
    }
}
