"""TVM MetaSchedule on gconv (grouped convolution), on this machine: the gconv anchor.

    O[n][g][o][h][w] = sum over c, kh, kw of I[n][g][c][h+kh][w+kw] * W[g][o][c][kh][kw]
    I: (NB, G, CI, H+KH-1, H+KH-1), W: (G, CO, CI, KH, KH), O: (NB, G, CO, H, H)
    (as examples/gconv.teml)

    python3 bench/tvm_gconv.py tune NB G CO CI H KH TRIALS LIB.so   # search, check, save the best
    python3 bench/tvm_gconv.py time NB G CO CI H KH LIB.so          # load it, check it, time it

The anchor shape is NB=G=CO=CI=32, H=7, KH=3, with 128 trials. `tune` searches TRIALS schedules
for the host CPU (LLVM's name for it, all cores) and saves the best one compiled; `time` checks
it against numpy on fresh data and prints the median of 9 runs after a warm-up, in ms (nan if
the timing itself fails). Install (PyPI): `pip install apache-tvm==0.27.0.post1
apache-tvm-ffi==0.1.14.post1 xgboost-cpu psutil cloudpickle tornado numpy` (with apache-tvm-ffi
0.1.15 MetaSchedule crashed in ToJSONGraph). TVM_WORK=dir keeps MetaSchedule's logs.
"""

import os
import sys

import numpy as np
import tvm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tvm_common  # noqa: E402

if len(sys.argv) < 2 or len(sys.argv) != {"tune": 10, "time": 9}.get(sys.argv[1]):
    sys.exit(__doc__)
mode = sys.argv[1]
NB, G, CO, CI, H, KH = (int(a) for a in sys.argv[2:8])
HI = H + KH - 1


def check_and_time(f):
    rng = np.random.default_rng(0)
    dev = tvm.cpu()
    i, w = rng.random((NB, G, CI, HI, HI)), rng.random((G, CO, CI, KH, KH))
    args = [tvm.runtime.tensor(x, dev) for x in (i, w, np.zeros((NB, G, CO, H, H)))]
    want = np.zeros((NB, G, CO, H, H))
    for kh in range(KH):
        for kw in range(KH):
            win = i[:, :, :, kh : kh + H, kw : kw + H]
            want += np.einsum("ngchw,goc->ngohw", win, w[:, :, :, kh, kw], optimize=True)
    return tvm_common.check_and_time(f, args, 2, want)


if mode == "time":
    lib = tvm.runtime.load_module(sys.argv[8])
    print(f"{check_and_time(lib['main']):.2f}")
    sys.exit(0)

from tvm import te  # noqa: E402

trials, out = int(sys.argv[8]), sys.argv[9]
I = te.placeholder((NB, G, CI, HI, HI), "float64", name="I")
W = te.placeholder((G, CO, CI, KH, KH), "float64", name="W")
c = te.reduce_axis((0, CI), name="c")
kh = te.reduce_axis((0, KH), name="kh")
kw = te.reduce_axis((0, KH), name="kw")
O = te.compute(
    (NB, G, CO, H, H),
    lambda n, g, o, h, w: te.sum(I[n, g, c, h + kh, w + kw] * W[g, o, c, kh, kw], axis=[c, kh, kw]),
    name="O",
)
lib, cpu = tvm_common.tune([I, W, O], trials, out)
shape = f"NB={NB} G={G} CO={CO} CI={CI} H={H} KH={KH}"
print(f"tvm gconv {shape}: {check_and_time(lib['main']):.2f} ms (MetaSchedule, {trials} trials, {cpu}); saved {out}")
