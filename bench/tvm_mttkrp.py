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
import tempfile
import time

import numpy as np
import tvm

if len(sys.argv) < 2 or len(sys.argv) != {"tune": 5, "time": 4}.get(sys.argv[1]):
    sys.exit(__doc__)
mode, n = sys.argv[1], int(sys.argv[2])


def check_and_time(f):
    rng = np.random.default_rng(0)
    dev = tvm.cpu()
    b, c, d = rng.random((n, n, n)), rng.random((n, n)), rng.random((n, n))
    args = [tvm.runtime.tensor(x, dev) for x in (b, c, d, np.zeros((n, n)))]
    f(*args)
    want = np.einsum("ikl,lj,kj->ij", b, d, c, optimize=True)
    got = args[3].numpy()
    if not np.allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max()):
        sys.exit(f"tvm: the tuned kernel differs from numpy (max abs {np.abs(got - want).max():.3g})")
    ts = []
    for _ in range(9):
        t = time.perf_counter()
        f(*args)
        ts.append(time.perf_counter() - t)
    return sorted(ts)[4] * 1e3


if mode == "time":
    lib = tvm.runtime.load_module(sys.argv[3])
    print(f"{check_and_time(lib['main']):.2f}")
    sys.exit(0)

from tvm import te  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402
from tvm.target import codegen  # noqa: E402

trials, out = int(sys.argv[3]), sys.argv[4]
B = te.placeholder((n, n, n), "float64", name="B")
C = te.placeholder((n, n), "float64", name="C")
D = te.placeholder((n, n), "float64", name="D")
k = te.reduce_axis((0, n), name="k")
l = te.reduce_axis((0, n), name="l")
A = te.compute((n, n), lambda i, j: te.sum(B[i, k, l] * D[l, j] * C[k, j], axis=[k, l]), name="A")
mod = tvm.IRModule({"main": te.create_prim_func([B, C, D, A])})

cpu = codegen.llvm_get_system_cpu()
target = tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": len(os.sched_getaffinity(0))})
with tempfile.TemporaryDirectory() as tmp:
    work = os.environ.get("TVM_WORK", tmp)
    # The builder's and the runner's worker processes import TVM first, which takes some 50 s
    # on a slow machine: their default 30 s timeouts would fail every candidate.
    db = ms.tune_tir(
        mod,
        target,
        work,
        max_trials_global=trials,
        num_trials_per_iter=64,
        seed=1,
        database="memory",
        builder=ms.builder.LocalBuilder(timeout_sec=300),
        runner=ms.runner.LocalRunner(timeout_sec=300),
    )
    sch = ms.tir_integration.compile_tir(db, mod, target)
    if sch is None:
        sys.exit("tvm: MetaSchedule found no valid schedule")
    lib = tvm.compile(sch.mod, target=target)
lib.export_library(out)
with open(out + ".tir.txt", "w") as f:
    f.write(sch.mod.script())
print(f"tvm mttkrp N={n}: {check_and_time(lib['main']):.2f} ms (MetaSchedule, {trials} trials, {cpu}); saved {out}")
