"""What bench/tvm_mttkrp.py and bench/tvm_gconv.py share: checking a kernel against numpy and
timing it, and tuning a TE definition with TVM MetaSchedule for this host.

The kernels' scripts put this folder on `sys.path` (they run as `python bench/tvm_*.py`).
"""

import os
import sys
import tempfile
import time

import numpy as np
import tvm


def check_and_time(f, args, out, want):
    """Runs `f(*args)`, checks `args[out]` against `want`, then returns the median of 9 timed
    runs in ms (nan, reported on stderr, where the timing itself fails; a wrong result exits)."""
    f(*args)
    got = args[out].numpy()
    if not np.allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max()):
        sys.exit(f"tvm: the tuned kernel differs from numpy (max abs {np.abs(got - want).max():.3g})")
    try:
        ts = []
        for _ in range(9):
            t = time.perf_counter()
            f(*args)
            ts.append(time.perf_counter() - t)
        return sorted(ts)[4] * 1e3
    except Exception as e:  # a failed timing reports nan, not a stop
        print(f"tvm: timing failed: {e}", file=sys.stderr)
        return float("nan")


def tune(tensors, trials, out):
    """Searches `trials` schedules of the TE function over `tensors` (inputs, then the result)
    for the host CPU (LLVM's name for it, all the cores this process may use), with the XGB cost
    model and the evolutionary search; saves the best compiled kernel to `out` and its TIR to
    `out.tir.txt`. Returns the loaded kernel and the CPU's name."""
    from tvm import te
    from tvm.s_tir import meta_schedule as ms
    from tvm.target import codegen

    mod = tvm.IRModule({"main": te.create_prim_func(tensors)})
    cpu = codegen.llvm_get_system_cpu()
    target = tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": len(os.sched_getaffinity(0))})
    with tempfile.TemporaryDirectory() as tmp:
        work = os.environ.get("TVM_WORK", tmp)
        # The builder's and the runner's worker processes import TVM first, which takes some
        # 50 s on a slow machine: their default 30 s timeouts would fail every candidate.
        db = ms.tune_tir(
            mod,
            target,
            work,
            max_trials_global=trials,
            num_trials_per_iter=64,
            seed=1,
            database="memory",
            cost_model="xgb",
            strategy="evolutionary",
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
    return lib, cpu
