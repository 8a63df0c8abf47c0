"""TVM MetaSchedule on mttkrp's naive form, on this machine: the anchor of issue 23's target.

    A[i][j] = sum over k, l of B[i][k][l] * D[l][j] * C[k][j]      (as examples/mttkrp.teml)

    python3 bench/tvm_mttkrp.py tune N TRIALS LIB.so   # search, check, save the best kernel
    python3 bench/tvm_mttkrp.py time N LIB.so          # load it, check it, time it

`tune` searches TRIALS schedules (the anchors' budget: 128) for the host CPU (LLVM's name for
it, all cores) and saves the best one compiled; `time` checks it against numpy on fresh data
and prints the median of 9 runs after a warm-up, in ms, so that bench/lift.sh times it in the
same rounds as teml and numpy. Install (PyPI): `pip install apache-tvm apache-tvm-ffi==0.1.14.post0
xgboost psutil cloudpickle tornado` (apache-tvm 0.27.0.post1; with apache-tvm-ffi 0.1.15 its
MetaSchedule crashed in ToJSONGraph). TVM_WORK=dir keeps MetaSchedule's logs.
"""

import os
import sys

import numpy as np
import tvm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tvm_common  # noqa: E402

if len(sys.argv) < 2 or len(sys.argv) != {"tune": 5, "time": 4}.get(sys.argv[1]):
    sys.exit(__doc__)
mode, n = sys.argv[1], int(sys.argv[2])


def check_and_time(f):
    rng = np.random.default_rng(0)
    dev = tvm.cpu()
    b, c, d = rng.random((n, n, n)), rng.random((n, n)), rng.random((n, n))
    args = [tvm.runtime.tensor(x, dev) for x in (b, c, d, np.zeros((n, n)))]
    want = np.einsum("ikl,lj,kj->ij", b, d, c, optimize=True)
    return tvm_common.check_and_time(f, args, 3, want)


if mode == "time":
    lib = tvm.runtime.load_module(sys.argv[3])
    print(f"{check_and_time(lib['main']):.2f}")
    sys.exit(0)

from tvm import te  # noqa: E402

trials, out = int(sys.argv[3]), sys.argv[4]
B = te.placeholder((n, n, n), "float64", name="B")
C = te.placeholder((n, n), "float64", name="C")
D = te.placeholder((n, n), "float64", name="D")
k = te.reduce_axis((0, n), name="k")
l = te.reduce_axis((0, n), name="l")
A = te.compute((n, n), lambda i, j: te.sum(B[i, k, l] * D[l, j] * C[k, j], axis=[k, l]), name="A")
lib, cpu = tvm_common.tune([B, C, D, A], trials, out)
print(f"tvm mttkrp N={n}: {check_and_time(lib['main']):.2f} ms (MetaSchedule, {trials} trials, {cpu}); saved {out}")
