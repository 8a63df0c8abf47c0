//! The PolyBench/C 4.2.1 kernels teml expresses so far (examples/polybench/, issue 21), each run
//! through the real binary on numpy-made inputs (`-i`) at PolyBench's SMALL sizes and its
//! outputs (`-o`) compared with numpy computing the same kernel from PolyBench's published
//! definition. Each kernel runs twice, in both front-ends: its `.teml` file, and the `.rhai`
//! script the numpy side translates it into mechanically (the same program in Rhai's syntax),
//! whose outputs must agree with numpy the same way, and be the `.teml` run's exactly. numpy is
//! required (`.ci/run` installs it).

use std::path::Path;
use std::process::Command;

/// numpy's side: makes the inputs (seeded) and each kernel's `.rhai` translation, runs the
/// kernels' definitions, and compares with what teml saved. `sys.argv`: the directory, `make` or
/// `check`, the directory of the `.teml` files, the kernel names; each kernel's files are in its
/// own subdirectory (one Python for all of them: numpy takes a while to start).
const CHECK: &str = r##"
import os, re, sys, numpy as np
root, what, src, kernels = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def inputs(**shapes):
    out = {}
    for name, shape in shapes.items():
        a = rng.uniform(-1.0, 1.0, shape)
        np.save(f"{d}/{name}.npy", a)
        out[name] = a
    return out
def fix(T, **fs):
    # inputs a kernel needs of another kind (distances >= 0, a sample count, PolyBench's
    # constants), made from the random ones and saved over them
    for name, f in fs.items():
        T[name] = np.asarray(f(T[name]), dtype=np.float64)
        np.save(f"{d}/{name}.npy", T[name])
    return T
def dominant(a):
    # strictly diagonally dominant (entries in [-1, 1], N + 1 added to the diagonal): LU without
    # pivoting is stable and the triangular systems are well-conditioned
    return a + (a.shape[0] + 1.0) * np.eye(a.shape[0])
def spd(a):
    # symmetric and diagonally dominant with a positive diagonal: positive definite
    return dominant((a + a.T) / 2.0)
def autocorrelations(u):
    # decaying r with 2 sum |r| < 1: the symmetric Toeplitz matrix with 1 on its diagonal and
    # r[|i-j|-1] off it is diagonally dominant, so positive definite (|alpha| < 1, beta > 0)
    r = u * 0.8 ** np.arange(len(u))
    return r * (0.45 / np.abs(r).sum())
def lu(A):
    # Gaussian elimination without pivoting, right-looking (not PolyBench's order): the unit lower
    # factor below the diagonal, the upper one on and above it
    A = A.copy()
    for j in range(len(A)):
        A[j + 1:, j] /= A[j, j]
        A[j + 1:, j + 1:] -= np.outer(A[j + 1:, j], A[j, j + 1:])
    return A
def split_top(s, sep=","):
    # s split at the separators outside brackets, parentheses and strings
    out, cur, depth, quoted, i = [], "", 0, False, 0
    while i < len(s):
        c = s[i]
        if c == '"':
            quoted = not quoted
        elif not quoted and c in "([":
            depth += 1
        elif not quoted and c in ")]":
            depth -= 1
        if not quoted and depth == 0 and s.startswith(sep, i):
            out.append(cur)
            cur, i = "", i + len(sep)
            continue
        cur, i = cur + c, i + 1
    return out + [cur]
def closing(s, i):
    # where the bracket or parenthesis opened at s[i] closes
    depth, quoted = 0, False
    for j in range(i, len(s)):
        if s[j] == '"':
            quoted = not quoted
        elif not quoted and s[j] in "([":
            depth += 1
        elif not quoted and s[j] in ")]":
            depth -= 1
            if depth == 0:
                return j
    raise ValueError(f"unbalanced: {s}")
def rhai_expr(s):
    # an expression in Rhai's syntax: an omitted list element is `()`, and in a call's arguments
    # the arrow `X -> Y` is the two arguments `X, Y` (an omitted X: `(), Y`)
    out, i = "", 0
    while i < len(s):
        if s[i] == '"':
            j = s.index('"', i + 1)
        elif s[i] in "([":
            j = closing(s, i)
            inner, call = s[i + 1:j], s[i] == "(" and re.search(r"\w$", out)
            items = []
            if inner.strip():
                for a in split_top(inner):
                    items += split_top(a, "->") if call else [a]
            out += s[i] + ", ".join(rhai_expr(x.strip()) if x.strip() else "()" for x in items) + s[j]
            i = j + 1
            continue
        else:
            j = i
        out, i = out + s[i:j + 1], j + 1
    return out
def rhai(teml):
    # the .rhai script of a .teml program, statement by statement, and the -D arguments of its
    # named constants (a Rhai script cannot define one: a name it does not define is one, bound
    # by -D; `const N = 60;` would be a literal extent)
    lines, defines = [], []
    for line in teml.splitlines():
        s = line.strip()
        named = re.fullmatch(r"(\w+)\s*=\s*(@(\w+):)?\s*(.*)", s)
        if not s or s.startswith("#"):
            lines.append(line.replace("#", "//", 1))
        elif named and re.fullmatch(r"-?\d+", named[4]):
            defines += ["-D", f"{named[1]}={named[4]}"]
        elif named and named[3]:
            lines.append(f'let {named[1]} = at("{named[3]}", {rhai_expr(named[4])});')
        elif named:
            lines.append(f"let {named[1]} = {rhai_expr(named[4])};")
        else:
            lines.append(rhai_expr(s) + ";")
    return "\n".join(lines) + "\n", defines
SMALL = {
    "gemm": lambda: inputs(alpha=(), beta=(), A=(60, 80), B=(80, 70), C=(60, 70)),
    "atax": lambda: inputs(A=(116, 124), x=(124,)),
    "bicg": lambda: inputs(A=(124, 116), r=(124,), p=(116,)),
    "mvt": lambda: inputs(A=(120, 120), x1=(120,), x2=(120,), y1=(120,), y2=(120,)),
    "2mm": lambda: inputs(alpha=(), beta=(), A=(40, 70), B=(70, 50), C=(50, 80), D=(40, 80)),
    "3mm": lambda: inputs(A=(40, 60), B=(60, 50), C=(50, 80), D=(80, 70)),
    "gesummv": lambda: inputs(alpha=(), beta=(), A=(90, 90), B=(90, 90), x=(90,)),
    "doitgen": lambda: inputs(A=(25, 20, 30), C4=(30, 30)),
    "jacobi-1d": lambda: inputs(A=(120,), B=(120,)),
    "jacobi-2d": lambda: inputs(A=(90, 90), B=(90, 90)),
    "heat-3d": lambda: inputs(A=(20, 20, 20), B=(20, 20, 20)),
    "seidel-2d": lambda: inputs(A=(120, 120)),
    "fdtd-2d": lambda: inputs(ex=(60, 80), ey=(60, 80), hz=(60, 80), fict=(40,)),
    "trmm": lambda: inputs(alpha=(), A=(60, 60), B=(60, 80)),
    "syrk": lambda: inputs(alpha=(), beta=(), C=(80, 80), A=(80, 60)),
    "syr2k": lambda: inputs(alpha=(), beta=(), C=(80, 80), A=(80, 60), B=(80, 60)),
    "gemver": lambda: inputs(alpha=(), beta=(), A=(120, 120), u1=(120,), v1=(120,), u2=(120,), v2=(120,),
                             w=(120,), x=(120,), y=(120,), z=(120,)),
    "floyd-warshall": lambda: fix(inputs(path=(180, 180)), path=np.abs),
    "covariance": lambda: fix(inputs(float_n=(), data=(100, 80)), float_n=lambda a: 100.0),
    "adi": lambda: fix(inputs(nf=(), tf=(), u=(60, 60), v=(60, 60), p=(60, 60), q=(60, 60)),
                       nf=lambda a: 60.0, tf=lambda a: 40.0),
    "deriche": lambda: fix(inputs(alpha=(), imgIn=(192, 128)), alpha=lambda a: 0.25),
    "trisolv": lambda: fix(inputs(L=(120, 120), b=(120,)), L=dominant),
    "lu": lambda: fix(inputs(A=(120, 120)), A=dominant),
    "ludcmp": lambda: fix(inputs(A=(120, 120), b=(120,)), A=dominant),
    "symm": lambda: inputs(alpha=(), beta=(), C=(60, 80), A=(60, 60), B=(60, 80)),
    "durbin": lambda: fix(inputs(r=(120,)), r=autocorrelations),
    "cholesky": lambda: fix(inputs(A=(120, 120)), A=spd),
    "gramschmidt": lambda: inputs(A=(80, 60), R=(60, 60), Q=(80, 60)),
    # every 8th column from column 3 on scaled by 0.05: standard deviations about 0.03, at most
    # eps = 0.1, which the kernel replaces by 1.0
    "correlation": lambda: fix(inputs(float_n=(), data=(100, 80)), float_n=lambda a: 100.0,
                               data=lambda a: a * np.where(np.arange(80) % 8 == 3, 0.05, 1.0)),
    # the bases 0, 1, 2, 3 (floor of [0, 4)); the table random (PolyBench's zeros would leave
    # every score an integer), its diagonal and lower triangle read as neighbours too
    "nussinov": lambda: fix(inputs(seq=(180,), table=(180, 180)), seq=lambda a: np.floor(2.0 * (a + 1.0))),
}
def reference(k, T):
    if k == "gemm":
        return {"C": T["alpha"] * T["A"] @ T["B"] + T["beta"] * T["C"]}
    if k == "atax":
        return {"y": T["A"].T @ (T["A"] @ T["x"])}
    if k == "bicg":
        return {"s": T["A"].T @ T["r"], "q": T["A"] @ T["p"]}
    if k == "mvt":
        return {"x1": T["x1"] + T["A"] @ T["y1"], "x2": T["x2"] + T["A"].T @ T["y2"]}
    if k == "2mm":
        return {"D": T["alpha"] * T["A"] @ T["B"] @ T["C"] + T["beta"] * T["D"]}
    if k == "3mm":
        return {"G": (T["A"] @ T["B"]) @ (T["C"] @ T["D"])}
    if k == "gesummv":
        return {"y": T["alpha"] * T["A"] @ T["x"] + T["beta"] * T["B"] @ T["x"]}
    if k == "doitgen":
        return {"A": np.einsum("rqs,sp->rqp", T["A"], T["C4"])}
    if k == "jacobi-1d":
        A, B = T["A"].copy(), T["B"].copy()
        for t in range(40):
            B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
            A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])
        return {"A": A, "B": B}
    if k == "jacobi-2d":
        A, B = T["A"].copy(), T["B"].copy()
        for t in range(40):
            B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
            A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])
        return {"A": A, "B": B}
    if k == "heat-3d":
        A, B = T["A"].copy(), T["B"].copy()
        def heat(X):
            c = X[1:-1, 1:-1, 1:-1]
            return (0.125 * (X[2:, 1:-1, 1:-1] - 2.0 * c + X[:-2, 1:-1, 1:-1])
                    + 0.125 * (X[1:-1, 2:, 1:-1] - 2.0 * c + X[1:-1, :-2, 1:-1])
                    + 0.125 * (X[1:-1, 1:-1, 2:] - 2.0 * c + X[1:-1, 1:-1, :-2]) + c)
        for t in range(40):
            B[1:-1, 1:-1, 1:-1] = heat(A)
            A[1:-1, 1:-1, 1:-1] = heat(B)
        return {"A": A, "B": B}
    if k == "seidel-2d":
        A, n = T["A"].copy(), 120
        for t in range(40):
            for i in range(1, n - 1):
                # the row above is final and the row below not yet touched: their three-point
                # sums, then the sweep along the row, which reads A[i][j-1] just written
                up = (A[i - 1, :-2] + A[i - 1, 1:-1] + A[i - 1, 2:]).tolist()
                row, down = A[i].tolist(), A[i + 1].tolist()
                for j in range(1, n - 1):
                    row[j] = (up[j - 1] + row[j - 1] + row[j] + row[j + 1] + down[j - 1] + down[j] + down[j + 1]) / 9.0
                A[i] = row
        return {"A": A}
    if k == "fdtd-2d":
        ex, ey, hz = T["ex"].copy(), T["ey"].copy(), T["hz"].copy()
        for t in range(40):
            ey[0, :] = T["fict"][t]
            ey[1:, :] = ey[1:, :] - 0.5 * (hz[1:, :] - hz[:-1, :])
            ex[:, 1:] = ex[:, 1:] - 0.5 * (hz[:, 1:] - hz[:, :-1])
            hz[:-1, :-1] = hz[:-1, :-1] - 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
        return {"ex": ex, "ey": ey, "hz": hz}
    if k == "trmm":
        return {"B": T["alpha"] * (T["B"] + np.tril(T["A"], -1).T @ T["B"])}
    if k == "syrk":
        C, low = T["C"].copy(), np.tril_indices(80)
        C[low] = (T["beta"] * T["C"] + T["alpha"] * T["A"] @ T["A"].T)[low]
        return {"C": C}
    if k == "syr2k":
        A, B, C, low = T["A"], T["B"], T["C"].copy(), np.tril_indices(80)
        C[low] = (T["beta"] * T["C"] + T["alpha"] * (B @ A.T + A @ B.T))[low]
        return {"C": C}
    if k == "gemver":
        A = T["A"] + np.outer(T["u1"], T["v1"]) + np.outer(T["u2"], T["v2"])
        x = T["x"] + T["beta"] * A.T @ T["y"] + T["z"]
        return {"A": A, "x": x, "w": T["w"] + T["alpha"] * A @ x}
    if k == "floyd-warshall":
        # distances are >= 0, so row and column k do not change during step k
        path = T["path"].copy()
        for k in range(180):
            path = np.minimum(path, path[:, k:k + 1] + path[k:k + 1, :])
        return {"path": path}
    if k == "covariance":
        mean = T["data"].sum(axis=0) / T["float_n"]
        data = T["data"] - mean
        return {"mean": mean, "data": data, "cov": data.T @ data / (T["float_n"] - 1.0)}
    if k == "adi":
        u, v, p, q, n = T["u"].copy(), T["v"].copy(), T["p"].copy(), T["q"].copy(), 60
        DX = 1.0 / T["nf"]
        DY = 1.0 / T["nf"]
        DT = 1.0 / T["tf"]
        mul1 = 2.0 * DT / (DX * DX)
        mul2 = 1.0 * DT / (DY * DY)
        a, b, d, e = -mul1 / 2.0, 1.0 + mul1, -mul2 / 2.0, 1.0 + mul2
        c, f, I = a, d, slice(1, n - 1)
        for t in range(40):
            # each sweep's rows (columns) are independent: numpy over them, loops along them
            v[0, I] = 1.0
            p[I, 0] = 0.0
            q[I, 0] = v[0, I]
            for j in range(1, n - 1):
                p[I, j] = -c / (a * p[I, j - 1] + b)
                q[I, j] = (-d * u[j, :-2] + (1.0 + 2.0 * d) * u[j, 1:-1] - f * u[j, 2:] - a * q[I, j - 1]) / (a * p[I, j - 1] + b)
            v[n - 1, I] = 1.0
            for j in range(n - 2, 0, -1):
                v[j, I] = p[I, j] * v[j + 1, I] + q[I, j]
            u[I, 0] = 1.0
            p[I, 0] = 0.0
            q[I, 0] = u[I, 0]
            for j in range(1, n - 1):
                p[I, j] = -f / (d * p[I, j - 1] + e)
                q[I, j] = (-a * v[:-2, j] + (1.0 + 2.0 * a) * v[1:-1, j] - c * v[2:, j] - d * q[I, j - 1]) / (d * p[I, j - 1] + e)
            u[I, n - 1] = 1.0
            for j in range(n - 2, 0, -1):
                u[I, j] = p[I, j] * u[I, j + 1] + q[I, j]
        return {"u": u, "v": v, "p": p, "q": q}
    if k == "deriche":
        alpha, x = T["alpha"], T["imgIn"]
        kk = (1.0 - np.exp(-alpha)) * (1.0 - np.exp(-alpha)) / (1.0 + 2.0 * alpha * np.exp(-alpha) - np.exp(2.0 * alpha))
        a1 = a5 = kk
        a2 = a6 = kk * np.exp(-alpha) * (alpha - 1.0)
        a3 = a7 = kk * np.exp(-alpha) * (alpha + 1.0)
        a4 = a8 = -kk * np.exp(-2.0 * alpha)
        b1, b2 = np.power(2.0, -alpha), -np.exp(-2.0 * alpha)
        def causal(x, a, b):  # along axis 1, all rows at once
            y, xm1, ym1, ym2 = np.empty_like(x), 0.0, 0.0, 0.0
            for j in range(x.shape[1]):
                y[:, j] = a * x[:, j] + b * xm1 + b1 * ym1 + b2 * ym2
                xm1, ym2, ym1 = x[:, j], ym1, y[:, j]
            return y
        def anticausal(x, a, b):
            y, xp1, xp2, yp1, yp2 = np.empty_like(x), 0.0, 0.0, 0.0, 0.0
            for j in range(x.shape[1] - 1, -1, -1):
                y[:, j] = a * xp1 + b * xp2 + b1 * yp1 + b2 * yp2
                xp2, xp1, yp2, yp1 = xp1, x[:, j], yp1, y[:, j]
            return y
        y1, y2 = causal(x, a1, a2), anticausal(x, a3, a4)
        out = 1.0 * (y1 + y2)
        y1, y2 = causal(out.T, a5, a6).T, anticausal(out.T, a7, a8).T
        return {"y1": y1, "y2": y2, "imgOut": 1.0 * (y1 + y2)}
    if k == "trisolv":
        return {"x": np.linalg.solve(np.tril(T["L"]), T["b"])}
    if k == "lu":
        return {"A": lu(T["A"])}
    if k == "ludcmp":
        LU = lu(T["A"])
        y = np.linalg.solve(np.tril(LU, -1) + np.eye(len(LU)), T["b"])
        return {"A": LU, "y": y, "x": np.linalg.solve(T["A"], T["b"])}
    if k == "symm":
        # A is symmetric, stored in its lower triangle (the strict upper one is never read)
        A = np.tril(T["A"]) + np.tril(T["A"], -1).T
        return {"C": T["beta"] * T["C"] + T["alpha"] * A @ T["B"]}
    if k == "durbin":
        # the Yule-Walker equations Levinson-Durbin solves: (the Toeplitz matrix with 1 on its
        # diagonal and r[|i-j|-1] off it) y = -r
        r = T["r"]
        gap = np.abs(np.subtract.outer(np.arange(len(r)), np.arange(len(r))))
        return {"y": np.linalg.solve(np.where(gap == 0, 1.0, r[np.maximum(gap - 1, 0)]), -r)}
    if k == "cholesky":
        # the factor in the lower triangle; the strict upper one is never touched
        return {"A": np.tril(np.linalg.cholesky(T["A"])) + np.triu(T["A"], 1)}
    if k == "gramschmidt":
        # A is M x N = 80 x 60 (M >= N: the factorization is defined, examples/polybench/
        # gramschmidt.teml); Gram-Schmidt's R[k][k] is a norm, positive: numpy's signs are fixed
        # to it. R's strict lower triangle is never written; each column j of A ends as Q's
        # column j times R[j][j].
        Q, R = np.linalg.qr(T["A"])
        s = np.sign(np.diag(R))
        Q, R = Q * s, R * s[:, None]
        return {"Q": Q, "R": np.triu(R) + np.tril(T["R"], -1), "A": Q * np.diag(R)}
    if k == "correlation":
        n, data = T["float_n"], T["data"]
        mean = data.sum(axis=0) / n
        stddev = np.sqrt(((data - mean) ** 2).sum(axis=0) / n)
        stddev = np.where(stddev <= 0.1, 1.0, stddev)
        data = (data - mean) / (np.sqrt(n) * stddev)
        corr = data.T @ data
        np.fill_diagonal(corr, 1.0)
        return {"mean": mean, "stddev": stddev, "data": data, "corr": corr}
    if k == "nussinov":
        # Nussinov's recurrence, i from the bottom row up, j left to right: the best of the score
        # so far, the neighbours left and below, the one down-left plus match (not for adjacent
        # bases, j = i + 1) and the splits at k, i < k < j; the last row has no j > i
        t, s, n = T["table"].copy(), T["seq"], 180
        for i in range(n - 2, -1, -1):
            for j in range(i + 1, n):
                best = max(t[i, j], t[i, j - 1], t[i + 1, j])
                if j == i + 1:
                    best = max(best, t[i + 1, j - 1])
                else:
                    match = 1.0 if s[i] + s[j] == 3.0 else 0.0
                    best = max(best, t[i + 1, j - 1] + match, np.max(t[i, i + 1:j] + t[i + 2:j + 1, j]))
                t[i, j] = best
        return {"table": t}
for k in kernels:
    d = f"{root}/{k}"
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(7)  # the same seed: the same data at make and at check
    if what == "make":
        SMALL[k]()
        # the .rhai script, and its -D arguments one a line
        script, defines = rhai(open(f"{src}/{k}.teml").read())
        open(f"{d}/{k}.rhai", "w").write(script)
        open(f"{d}/{k}.defines", "w").write("".join(f"{x}\n" for x in defines))
        continue
    T = {n: np.load(f"{d}/{n}.npy") for n in SMALL[k]().keys()}
    for name, want in reference(k, T).items():
        for front in ("teml", "rhai"):
            got = np.load(f"{d}/{front}_{name}.npy")
            assert got.shape == want.shape, (k, name, front, got.shape, want.shape)
            err = np.max(np.abs(got - want) / np.maximum(np.abs(want), 1.0))
            assert err < 1e-12, (k, name, front, err)
            if front == "rhai":  # the same program: the same numbers, NaNs where teml's are
                assert np.array_equal(got, np.load(f"{d}/teml_{name}.npy"), equal_nan=True), (k, name)
            print(k, name, front, "agrees with numpy, max rel error", err)
"##;

/// Runs the numpy side on the kernels `ks` (`what`: `make` or `check`): what it printed.
fn numpy(dir: &Path, what: &str, ks: &[&str]) -> String {
    let script = dir.join("check.py");
    std::fs::write(&script, CHECK).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/polybench");
    let o = Command::new("python3").arg(&script).arg(dir).arg(what).arg(&src).args(ks).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "numpy ({what}): {text}");
    text
}

#[test]
fn polybench_kernels_agree_with_numpy_at_small_sizes() {
    let kernels: &[(&str, &[&str], &[&str])] = &[
        ("gemm", &["alpha", "beta", "A", "B", "C"], &["C"]),
        ("atax", &["A", "x"], &["y"]),
        ("bicg", &["A", "r", "p"], &["s", "q"]),
        ("mvt", &["A", "x1", "x2", "y1", "y2"], &["x1", "x2"]),
        ("2mm", &["alpha", "beta", "A", "B", "C", "D"], &["D"]),
        ("3mm", &["A", "B", "C", "D"], &["G"]),
        ("gesummv", &["alpha", "beta", "A", "B", "x"], &["y"]),
        ("doitgen", &["A", "C4"], &["A"]),
        ("jacobi-1d", &["A", "B"], &["A", "B"]),
        ("jacobi-2d", &["A", "B"], &["A", "B"]),
        ("heat-3d", &["A", "B"], &["A", "B"]),
        ("seidel-2d", &["A"], &["A"]),
        ("fdtd-2d", &["ex", "ey", "hz", "fict"], &["ex", "ey", "hz"]),
        ("trmm", &["alpha", "A", "B"], &["B"]),
        ("syrk", &["alpha", "beta", "C", "A"], &["C"]),
        ("syr2k", &["alpha", "beta", "C", "A", "B"], &["C"]),
        ("gemver", &["alpha", "beta", "A", "u1", "v1", "u2", "v2", "w", "x", "y", "z"], &["A", "x", "w"]),
        ("floyd-warshall", &["path"], &["path"]),
        ("covariance", &["float_n", "data"], &["mean", "data", "cov"]),
        ("adi", &["nf", "tf", "u", "v", "p", "q"], &["u", "v", "p", "q"]),
        ("deriche", &["alpha", "imgIn"], &["y1", "y2", "imgOut"]),
        ("trisolv", &["L", "b"], &["x"]),
        ("lu", &["A"], &["A"]),
        ("ludcmp", &["A", "b"], &["A", "y", "x"]),
        ("symm", &["alpha", "beta", "C", "A", "B"], &["C"]),
        ("durbin", &["r"], &["y"]),
        ("cholesky", &["A"], &["A"]),
        ("gramschmidt", &["A", "R", "Q"], &["A", "R", "Q"]),
        ("correlation", &["float_n", "data"], &["mean", "stddev", "data", "corr"]),
        ("nussinov", &["seq", "table"], &["table"]),
    ];
    let names: Vec<&str> = kernels.iter().map(|(k, _, _)| *k).collect();
    let root = tempfile::tempdir().unwrap();
    numpy(root.path(), "make", &names);
    for (k, ins, outs) in kernels {
        let d = root.path().join(k); // made by numpy; teml_in keeps its kernel cache there
        let teml = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("examples/polybench/{k}.teml"));
        let rhai = d.join(format!("{k}.rhai"));
        let defines = std::fs::read_to_string(d.join(format!("{k}.defines"))).unwrap();
        for (front, file, extra) in [("teml", &teml, ""), ("rhai", &rhai, defines.as_str())] {
            let mut args: Vec<String> = vec!["run".into(), file.display().to_string(), "-q".into()];
            args.extend(extra.lines().map(String::from));
            for i in *ins {
                args.extend(["-i".into(), format!("{i}={}", d.join(format!("{i}.npy")).display())]);
            }
            for o in *outs {
                args.extend(["-o".into(), format!("{o}={}", d.join(format!("{front}_{o}.npy")).display())]);
            }
            let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
            let o = crate::common::teml_in(&d, &args);
            let text =
                format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
            assert!(o.status.success() && text.contains("verified"), "{k} ({front}): {text}");
        }
    }
    let agreed = numpy(root.path(), "check", &names);
    for (k, _, outs) in kernels {
        let mine = format!("{k} ");
        let n = agreed.lines().filter(|l| l.starts_with(&mine) && l.contains("agrees with numpy")).count();
        assert_eq!(n, 2 * outs.len(), "{k}: {agreed}");
    }
}
