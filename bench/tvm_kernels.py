"""TVM MetaSchedule on eight of the bench kernels, on this machine: baselines beside `teml tune`.

    python3 bench/tvm_kernels.py tune KERNEL SIZE TRIALS LIB.so   # search, check, save the best
    python3 bench/tvm_kernels.py time KERNEL SIZE LIB.so          # load it, check it, time it

KERNEL is one of mm tmm bmm sddmm interp helm blur coars, each a TE definition in float64 of
what its `examples/<k>.teml` computes (the same as bench/halide_mullapudi.py's), with several
te.compute stages where the .teml file builds several nests (tmm's transpose, sddmm's product
then its sampling, interp's three contractions, helm's L, six contractions and product with L).
SIZE is the kernel's one free size, the others are the .teml file's:

    mm N | tmm N | bmm BATCH (M=72, K=26) | sddmm N (K=64) | interp E (N=7) | helm E (N=13)
    blur N (the result is (N-2)x(N-2)) | coars N

The bench's sizes: mm 1200, tmm 1200 (and 1000), bmm 32768 (and 8192), sddmm 4096, interp
200000, helm 15000, blur 8192, coars 8192; the anchors' budget is 128 trials. `tune` searches
TRIALS schedules for the host CPU (LLVM's name for it, all cores; bench/tvm_common.py) and
saves the best one compiled (its TIR beside it, LIB.so.tir.txt); both modes check the kernel
against a numpy reference written apart from the TE definition, on fresh data, exit non-zero
where it differs, and print the median of 9 runs after a warm-up, in ms (nan if the timing
itself fails). Install (PyPI): `pip install apache-tvm==0.27.0.post1
apache-tvm-ffi==0.1.14.post1 xgboost-cpu psutil cloudpickle tornado numpy`. TVM_WORK=dir keeps
MetaSchedule's logs.
"""

import os
import sys

import numpy as np
import tvm
from tvm import te

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy_refs  # noqa: E402
import tvm_common  # noqa: E402

F64 = "float64"


# --- TE definitions: each returns its tensors, inputs first, the result last.


def inp(name, shape):
    return te.placeholder(shape, F64, name=name)


def te_mm(N):
    A, B = inp("A", (N, N)), inp("B", (N, N))
    k = te.reduce_axis((0, N), name="k")
    C = te.compute((N, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]


def te_tmm(N):
    A, B = inp("A", (N, N)), inp("B", (N, N))
    At = te.compute((N, N), lambda i, j: A[j, i], name="At")  # teml builds it as its own nest
    k = te.reduce_axis((0, N), name="k")
    C = te.compute((N, N), lambda i, j: te.sum(At[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]


def te_bmm(BATCH, M=72, K=26):
    A, B = inp("A", (BATCH, M, K)), inp("B", (BATCH, K, M))
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((BATCH, M, M), lambda b, i, j: te.sum(A[b, i, k] * B[b, k, j], axis=k), name="C")
    return [A, B, C]


def te_sddmm(N, K=64):
    S, B, C = inp("S", (N, N)), inp("B", (N, K)), inp("C", (K, N))
    k = te.reduce_axis((0, K), name="k")
    t = te.compute((N, N), lambda i, j: te.sum(B[i, k] * C[k, j], axis=k), name="t")
    A = te.compute((N, N), lambda i, j: S[i, j] * t[i, j], name="A")
    return [S, B, C, A]


def three_contractions(name, m, u, E, N):
    """einsum "ad,edbc->eabc", then "bd,eadc->eabc", then "cd,eabd->eabc", with m(x, d) the
    matrix's entry (M[x][d], or M[d][x] for the transposed chain)."""
    shape = (E, N, N, N)
    d1, d2, d3 = (te.reduce_axis((0, N), name=f"{name}{k}_d") for k in (1, 2, 3))
    t = te.compute(shape, lambda e, a, b, c: te.sum(m(a, d1) * u[e, d1, b, c], axis=d1), name=f"{name}1")
    w = te.compute(shape, lambda e, a, b, c: te.sum(m(b, d2) * t[e, a, d2, c], axis=d2), name=f"{name}2")
    return te.compute(shape, lambda e, a, b, c: te.sum(m(c, d3) * w[e, a, b, d3], axis=d3), name=f"{name}3")


def te_interp(E, N=7):
    A, u = inp("A", (N, N)), inp("u", (E, N, N, N))
    v = three_contractions("t", lambda x, d: A[x, d], u, E, N)
    return [A, u, v]


def te_helm(E, N=13):
    S, d, u = inp("S", (N, N)), inp("d", (N,)), inp("u", (E, N, N, N))
    L = te.compute((N, N, N), lambda a, b, c: 1.0 / (d[a] + d[b] + d[c]), name="L")
    t3 = three_contractions("t", lambda x, k: S[x, k], u, E, N)
    r = te.compute((E, N, N, N), lambda e, a, b, c: L[a, b, c] * t3[e, a, b, c], name="r")
    v = three_contractions("s", lambda x, k: S[k, x], r, E, N)
    return [S, d, u, v]


def te_blur(N):
    A = inp("A", (N, N))

    def body(i, j):
        total = A[i, j]
        for di, dj in [(di, dj) for di in range(3) for dj in range(3)][1:]:
            total = total + A[i + di, j + dj]
        return total / 9.0

    B = te.compute((N - 2, N - 2), body, name="B")
    return [A, B]


def te_coars(N):
    Ixx, Iyy, Ixy = inp("Ixx", (N, N)), inp("Iyy", (N, N)), inp("Ixy", (N, N))
    C = te.compute((N, N), lambda i, j: Ixx[i, j] * Iyy[i, j] - Ixy[i, j] * Ixy[i, j], name="C")
    return [Ixx, Iyy, Ixy, C]


# --- numpy: each returns (its inputs, in the TE function's order, the result's shape, the
# reference result), from numpy's own operations alone.


def np_mm(rng, N):
    a, b = rng.uniform(-1, 1, (N, N)), rng.uniform(-1, 1, (N, N))
    return [a, b], (N, N), lambda: a @ b


def np_tmm(rng, N):
    a, b = rng.uniform(-1, 1, (N, N)), rng.uniform(-1, 1, (N, N))
    return [a, b], (N, N), lambda: a.T @ b


def np_bmm(rng, BATCH, M=72, K=26):
    a, b = rng.uniform(-1, 1, (BATCH, M, K)), rng.uniform(-1, 1, (BATCH, K, M))
    return [a, b], (BATCH, M, M), lambda: np.matmul(a, b)


def np_sddmm(rng, N, K=64):
    s, b, c = rng.uniform(-1, 1, (N, N)), rng.uniform(-1, 1, (N, K)), rng.uniform(-1, 1, (K, N))
    return [s, b, c], (N, N), lambda: s * (b @ c)


def np_interp(rng, E, N=7):
    a, u = rng.uniform(-1, 1, (N, N)), rng.uniform(-1, 1, (E, N, N, N))

    return [a, u], (E, N, N, N), lambda: numpy_refs.interp(a, u)


def np_helm(rng, E, N=13):
    s = rng.uniform(-1, 1, (N, N))
    d = rng.uniform(1, 2, (N,))  # kept away from 0: L divides by d[a] + d[b] + d[c]
    u = rng.uniform(-1, 1, (E, N, N, N))

    return [s, d, u], (E, N, N, N), lambda: numpy_refs.helm(s, d, u)


def np_blur(rng, N):
    a = rng.uniform(-1, 1, (N, N))
    m = N - 2
    return [a], (m, m), lambda: sum(a[di : di + m, dj : dj + m] for di in range(3) for dj in range(3)) / 9.0


def np_coars(rng, N):
    xx, yy, xy = (rng.uniform(-1, 1, (N, N)) for _ in range(3))
    return [xx, yy, xy], (N, N), lambda: xx * yy - xy * xy


KERNELS = {
    "mm": ("N", te_mm, np_mm),
    "tmm": ("N", te_tmm, np_tmm),
    "bmm": ("BATCH", te_bmm, np_bmm),
    "sddmm": ("N", te_sddmm, np_sddmm),
    "interp": ("E", te_interp, np_interp),
    "helm": ("E", te_helm, np_helm),
    "blur": ("N", te_blur, np_blur),
    "coars": ("N", te_coars, np_coars),
}

if len(sys.argv) < 3 or sys.argv[2] not in KERNELS or len(sys.argv) != {"tune": 6, "time": 5}.get(sys.argv[1]):
    sys.exit(__doc__)
mode, kernel, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
size_name, te_def, np_def = KERNELS[kernel]


def check_and_time(f):
    arrays, out_shape, ref = np_def(np.random.default_rng(0), size)
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(x, dev) for x in (*arrays, np.zeros(out_shape))]
    want = ref()
    return tvm_common.check_and_time(f, args, len(arrays), want)


if mode == "time":
    lib = tvm.runtime.load_module(sys.argv[4])
    print(f"{check_and_time(lib['main']):.2f}")
    sys.exit(0)

trials, out = int(sys.argv[4]), sys.argv[5]
lib, cpu = tvm_common.tune(te_def(size), trials, out)
ms = check_and_time(lib["main"])
print(f"tvm {kernel} {size_name}={size}: {ms:.2f} ms (MetaSchedule, {trials} trials, {cpu}); saved {out}")
