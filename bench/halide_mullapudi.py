"""Halide's Mullapudi2016 autoscheduler on the bench kernels (issue 42: `teml auto` against it).

Each kernel is written in Halide's Python bindings as its `examples/<k>.teml` defines it (double
precision, the same row-major C layout), scheduled by the Mullapudi2016 autoscheduler alone (no
hand schedule: only the estimates it needs), JIT-compiled for the host, checked against numpy
and timed (median of 9 runs after a warm-up).

    python bench/halide_mullapudi.py KERNEL [NAME=VALUE ...] [--schedule]
    python bench/halide_mullapudi.py all

KERNEL is one of mm tmm bmm gconv mttkrp sddmm blur coars interp helm; it runs at the bench's
sizes (`SIZES` in src/suite/mod.rs, the file's other defaults) unless NAME=VALUE overrides one
(the names are the .teml file's). `all` runs every kernel at those sizes, and gconv once more at
the anchor shape (NB=G=CO=CI=32, H=7, KH=3), one after the other in this process. Each run
prints one JSON line; `--schedule` also prints the schedule the autoscheduler chose (stderr).
A result that differs from numpy exits non-zero with the largest error.

Needs `pip install halide numpy` (the PyPI wheel ships libautoschedule_mullapudi2016.so).
Threads: HL_NUM_THREADS if set, else every CPU this process may use; the autoscheduler's
`parallelism` is that number, its other parameters (last_level_cache_size, balance) its defaults.
"""

import json
import os
import sys
import time
from importlib.metadata import version

THREADS = int(os.environ.get("HL_NUM_THREADS", len(os.sched_getaffinity(0))))
os.environ["HL_NUM_THREADS"] = str(THREADS)  # read by Halide's runtime when its pool starts

import halide as hl  # noqa: E402
import numpy as np  # noqa: E402
import numpy_refs  # noqa: E402

F64 = hl.Float(64)
RUNS = 9


class RowMajor:
    """A Func or ImageParam indexed as the C array it is: `RowMajor(A)[i, k]` is Halide's
    `A[k, i]`. Halide's first dimension is the innermost (stride 1), the reverse of C's order,
    so the last C index goes first; numpy arrays are wrapped with `hl.Buffer(a)`, which reverses
    their axes the same way, and no data moves."""

    def __init__(self, f):
        self.f = f

    def __getitem__(self, idx):
        return self.f[tuple(reversed(idx))] if isinstance(idx, tuple) else self.f[idx]

    def __setitem__(self, idx, value):
        self.f[tuple(reversed(idx)) if isinstance(idx, tuple) else idx] = value


class Kernel:
    """Builds one kernel: its inputs (ImageParams with estimates, and the numpy arrays they
    get), its output Func (with estimates) and the numpy array it is realized into."""

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.params, self.arrays = [], []

    def input(self, name, shape, lo=-1.0, hi=1.0):
        p = hl.ImageParam(F64, len(shape), name)
        p.set_estimates([hl.Range(0, n) for n in reversed(shape)])
        a = self.rng.uniform(lo, hi, shape)
        self.params.append(p)
        self.arrays.append(a)
        return RowMajor(p), a

    def output(self, func, shape):
        func.set_estimates([hl.Range(0, n) for n in reversed(shape)])
        self.func, self.shape = func, tuple(shape)


def func(name, nvars):
    """A Func and its pure Vars, in C order (first = outermost)."""
    vs = [hl.Var(f"{name}_{k}") for k in range(nvars)]
    return hl.Func(name), vs


def rdom(*extents):
    """A reduction domain over the C-order extents (the last one innermost, as in teml's loop
    nest); returns its variables in C order."""
    r = hl.RDom([hl.Range(0, n) for n in reversed(extents)])
    return [r[k] for k in reversed(range(len(extents)))]


def contraction(name, shape, extent, term):
    """out[idx] = sum over d < extent of term(idx, d), zeroed first, then an update definition
    (teml's `build`: init, then += in the innermost loop)."""
    f, vs = func(name, len(shape))
    (d,) = rdom(extent)
    out = RowMajor(f)
    out[tuple(vs)] = hl.f64(0)
    out[tuple(vs)] = out[tuple(vs)] + term(vs, d)
    return f


# Each kernel: (default sizes = the bench's, build(sizes) -> (Kernel, reference numpy result)).


def mm(s):
    N = s["N"]
    k = Kernel()
    A, a = k.input("A", (N, N))
    B, b = k.input("B", (N, N))
    C, (i, j) = func("C", 2)
    (r,) = rdom(N)
    Cr = RowMajor(C)
    Cr[i, j] = hl.f64(0)
    Cr[i, j] = Cr[i, j] + A[i, r] * B[r, j]
    k.output(C, (N, N))
    return k, lambda: a @ b


def tmm(s):
    N = s["N"]
    k = Kernel()
    A, a = k.input("A", (N, N))
    B, b = k.input("B", (N, N))
    At, (i, j) = func("At", 2)  # teml builds the transpose as its own nest
    RowMajor(At)[i, j] = A[j, i]
    At_ = RowMajor(At)
    C, (i, j) = func("C", 2)
    (r,) = rdom(N)
    Cr = RowMajor(C)
    Cr[i, j] = hl.f64(0)
    Cr[i, j] = Cr[i, j] + At_[i, r] * B[r, j]
    k.output(C, (N, N))
    return k, lambda: a.T @ b


def bmm(s):
    BATCH, M, K = s["BATCH"], s["M"], s["K"]
    k = Kernel()
    A, a = k.input("A", (BATCH, M, K))
    B, b = k.input("B", (BATCH, K, M))
    C, (bb, i, j) = func("C", 3)
    (r,) = rdom(K)
    Cr = RowMajor(C)
    Cr[bb, i, j] = hl.f64(0)
    Cr[bb, i, j] = Cr[bb, i, j] + A[bb, i, r] * B[bb, r, j]
    k.output(C, (BATCH, M, M))
    return k, lambda: np.matmul(a, b)


def gconv(s):
    NB, G, CO, CI, H, KH = (s[n] for n in ("NB", "G", "CO", "CI", "H", "KH"))
    k = Kernel()
    I, x = k.input("I", (NB, G, CI, H + KH - 1, H + KH - 1))
    W, w = k.input("W", (G, CO, CI, KH, KH))
    O, (n, g, o, h, ww) = func("O", 5)
    c, kh, kw = rdom(CI, KH, KH)  # teml's loops n, g, o, h, w, c, kh, kw
    Or = RowMajor(O)
    Or[n, g, o, h, ww] = hl.f64(0)
    Or[n, g, o, h, ww] = Or[n, g, o, h, ww] + I[n, g, c, h + kh, ww + kw] * W[g, o, c, kh, kw]
    k.output(O, (NB, G, CO, H, H))

    def ref():
        win = np.lib.stride_tricks.sliding_window_view(x, (KH, KH), axis=(3, 4))
        return np.einsum("ngchwyx,gocyx->ngohw", win, w, optimize=True)

    return k, ref


def mttkrp(s):
    N = s["N"]
    k = Kernel()
    B, b = k.input("B", (N, N, N))
    C, c = k.input("C", (N, N))
    D, d = k.input("D", (N, N))
    A, (i, j) = func("A", 2)
    kk, ll = rdom(N, N)  # teml's loops i, j, k, l
    Ar = RowMajor(A)
    Ar[i, j] = hl.f64(0)
    Ar[i, j] = Ar[i, j] + B[i, kk, ll] * D[ll, j] * C[kk, j]
    k.output(A, (N, N))
    return k, lambda: np.einsum("ikl,lj,kj->ij", b, d, c, optimize=True)


def sddmm(s):
    N, K = s["N"], s["K"]
    k = Kernel()
    S, sv = k.input("S", (N, N))
    B, b = k.input("B", (N, K))
    C, c = k.input("C", (K, N))
    t = RowMajor(contraction("t", (N, N), K, lambda v, r: B[v[0], r] * C[r, v[1]]))
    A, (i, j) = func("A", 2)
    RowMajor(A)[i, j] = S[i, j] * t[i, j]
    k.output(A, (N, N))
    return k, lambda: sv * (b @ c)


def blur(s):
    N = s["N"]
    k = Kernel()
    A, a = k.input("A", (N, N))
    B, (i, j) = func("B", 2)
    terms = [A[i + di, j + dj] for di in range(3) for dj in range(3)]
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    RowMajor(B)[i, j] = total / 9.0
    k.output(B, (N - 2, N - 2))

    def ref():
        m = N - 2
        return sum(a[di : di + m, dj : dj + m] for di in range(3) for dj in range(3)) / 9.0

    return k, ref


def coars(s):
    N = s["N"]
    k = Kernel()
    Ixx, xx = k.input("Ixx", (N, N))
    Iyy, yy = k.input("Iyy", (N, N))
    Ixy, xy = k.input("Ixy", (N, N))
    C, (i, j) = func("C", 2)
    RowMajor(C)[i, j] = Ixx[i, j] * Iyy[i, j] - Ixy[i, j] * Ixy[i, j]
    k.output(C, (N, N))
    return k, lambda: xx * yy - xy * xy


def _three_contractions(name, M, u, E, N):
    """teml's einsum chain "ad,edbc->eabc", "bd,eadc->eabc", "cd,eabd->eabc" with matrix M
    (M[a][d], or M[d][a] where `M` is a lambda taking (row, col))."""
    shape = (E, N, N, N)
    t = RowMajor(contraction(f"{name}1", shape, N, lambda v, d: M(v[1], d) * u[v[0], d, v[2], v[3]]))
    w = RowMajor(contraction(f"{name}2", shape, N, lambda v, d: M(v[2], d) * t[v[0], v[1], d, v[3]]))
    return contraction(f"{name}3", shape, N, lambda v, d: M(v[3], d) * w[v[0], v[1], v[2], d])


def interp(s):
    E, N = s["E"], s["N"]
    k = Kernel()
    A, a = k.input("A", (N, N))
    u, uv = k.input("u", (E, N, N, N))
    v = _three_contractions("t", lambda x, d: A[x, d], u, E, N)
    k.output(v, (E, N, N, N))

    return k, lambda: numpy_refs.interp(a, uv)


def helm(s):
    E, N = s["E"], s["N"]
    k = Kernel()
    S, sv = k.input("S", (N, N))
    D, dv = k.input("d", (N,), 1.0, 2.0)  # kept away from 0: L divides by d[a] + d[b] + d[c]
    u, uv = k.input("u", (E, N, N, N))
    L, (a, b, c) = func("L", 3)
    RowMajor(L)[a, b, c] = 1.0 / (D[a] + D[b] + D[c])
    Lr = RowMajor(L)
    t3 = RowMajor(_three_contractions("t", lambda x, d: S[x, d], u, E, N))
    r, (e, a, b, c) = func("r", 4)
    RowMajor(r)[e, a, b, c] = Lr[a, b, c] * t3[e, a, b, c]
    v = _three_contractions("s", lambda x, d: S[d, x], RowMajor(r), E, N)
    k.output(v, (E, N, N, N))

    return k, lambda: numpy_refs.helm(sv, dv, uv)


# The bench's sizes (src/suite/mod.rs SIZES), the rest from each .teml file's defaults.
KERNELS = {
    "mm": ({"N": 1200}, mm),
    "tmm": ({"N": 1200}, tmm),
    "bmm": ({"BATCH": 32768, "M": 72, "K": 26}, bmm),
    "gconv": ({"NB": 32, "G": 4, "CO": 8, "CI": 8, "H": 28, "KH": 7}, gconv),
    "mttkrp": ({"N": 200}, mttkrp),
    "sddmm": ({"N": 4096, "K": 64}, sddmm),
    "interp": ({"E": 200_000, "N": 7}, interp),
    "helm": ({"E": 15_000, "N": 13}, helm),
    "blur": ({"N": 8192}, blur),
    "coars": ({"N": 8192}, coars),
}
GCONV_ANCHOR = {"NB": 32, "G": 32, "CO": 32, "CI": 32, "H": 7, "KH": 3}


def cpu_name():
    with open("/proc/cpuinfo") as f:
        text = f.read()
    name = next((l.split(":", 1)[1].strip() for l in text.splitlines() if l.startswith("model name")), "?")
    return name + (" (avx512f)" if " avx512f" in text else "")


def mullapudi():
    path = os.path.join(os.path.dirname(hl.__file__), "lib64", "libautoschedule_mullapudi2016.so")
    hl.load_plugin(path if os.path.exists(path) else "autoschedule_mullapudi2016")
    return hl.AutoschedulerParams("Mullapudi2016", {"parallelism": str(THREADS)})


def run(name, overrides, show_schedule=False):
    """Schedules, checks and times one kernel; returns (its JSON record, ok)."""
    defaults, build = KERNELS[name]
    unknown = set(overrides) - set(defaults)
    if unknown:
        sys.exit(f"{name}: unknown size {', '.join(sorted(unknown))} (it has {', '.join(defaults)})")
    sizes = {**defaults, **overrides}
    k, ref = build(sizes)

    target = hl.get_jit_target_from_environment()
    pipeline = hl.Pipeline(k.func)
    t0 = time.perf_counter()
    result = pipeline.apply_autoscheduler(target, mullapudi())
    schedule_s = time.perf_counter() - t0
    if show_schedule:
        print(f"# {name} {sizes}\n{result.schedule_source}", file=sys.stderr)
    t0 = time.perf_counter()
    kernel = pipeline.compile_to_callable(k.params, target)
    compile_s = time.perf_counter() - t0

    out = np.empty(k.shape)
    bufs = [hl.Buffer(a) for a in k.arrays] + [hl.Buffer(out)]
    kernel(*bufs)  # the warm-up, whose result is checked
    want = ref()
    err = float(np.abs(out - want).max())
    ok = bool(np.allclose(out, want, rtol=1e-9, atol=1e-9 * float(np.abs(want).max())))
    del want
    ms = None
    if ok:
        ts = []
        for _ in range(RUNS):
            t = time.perf_counter()
            kernel(*bufs)
            ts.append(time.perf_counter() - t)
        ms = round(float(np.median(ts)) * 1e3, 3)
    record = {
        "kernel": name,
        "sizes": sizes,
        "ms": ms,
        "checked": ok,
        "max_abs_err": err,
        "halide": version("halide"),
        "autoscheduler": "Mullapudi2016",
        "threads": THREADS,
        "target": str(target),
        "cpu": cpu_name(),
        "schedule_s": round(schedule_s, 2),
        "compile_s": round(compile_s, 2),
    }
    return record, ok


def main(argv):
    show = "--schedule" in argv
    args = [a for a in argv if a != "--schedule"]
    if not args or args[0] not in (*KERNELS, "all"):
        sys.exit(__doc__)
    if args[0] == "all":
        jobs = [(k, {}) for k in KERNELS]
        jobs.insert(jobs.index(("gconv", {})) + 1, ("gconv", GCONV_ANCHOR))
    else:
        try:
            jobs = [(args[0], {n: int(v) for n, v in (a.split("=", 1) for a in args[1:])})]
        except ValueError:
            sys.exit(f"sizes are NAME=VALUE with an integer VALUE, not {' '.join(args[1:])}")
    failed = []
    for name, sizes in jobs:
        try:
            record, ok = run(name, sizes, show)
        except Exception as e:  # one kernel's failure is reported, and the others still run
            record, ok = {"kernel": name, "sizes": sizes, "error": f"{type(e).__name__}: {e}"}, False
        print(json.dumps(record), flush=True)
        if not ok:
            failed.append(name)
            if "error" not in record:
                print(f"{name}: differs from numpy (max abs error {record['max_abs_err']:.3g})", file=sys.stderr)
    if failed:
        sys.exit(f"failed: {' '.join(failed)}")


if __name__ == "__main__":
    main(sys.argv[1:])
