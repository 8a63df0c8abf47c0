#!/usr/bin/env bash
# Lifting (issue 23, docs/algebra.md), side by side in alternating rounds on this machine:
#   - interp: the hand-lifted best path (scripts/best/interp.teml, three einsums fused at e)
#     against interp written as one four-operand einsum, lifted by `lift` and given the same
#     loop path (scripts/best/interp_lifted.teml);
#   - mttkrp: the best and the tuned loop paths of the naive form (scripts/best/mttkrp.teml,
#     scripts/tuned/mttkrp.teml), the tuned lifted path (scripts/tuned/mttkrp_lifted.teml:
#     numpy's contraction order, its two steps fused with the temporary in registers) and
#     numpy's einsum(optimize=True), which contracts in two steps too;
#   - and, on request, TVM MetaSchedule's best kernel for mttkrp's naive form
#     (bench/tvm_mttkrp.py): TVM=1 tunes one before the rounds (128 trials, some 15 minutes,
#     in a temporary folder removed at exit); TVM_LIB=path.so times a saved one instead;
#     TVM_PYTHON names the Python that has TVM. Without either, the TVM fields are left out.
# Every teml figure is the median of `teml run --time` of a verified kernel.
#
#   bash bench/lift.sh [E] [N]        # defaults: E=100000 (interp), N=200 (mttkrp)
set -euo pipefail
cd "$(dirname "$0")/.."
e=${1:-100000}
n=${2:-200}
teml=${TEML:-target/release/teml}
median() {
  "$teml" run "$@" --time --json 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
ks = r["kernels"]
assert all(k["verified"] for k in ks), "not verified"
print(ks[-1]["time"]["median_s"] * 1e3)'
}
numpy_mttkrp() {
  python3 - "$1" <<'PY'
import sys, time
import numpy as np
n = int(sys.argv[1])
rng = np.random.default_rng(0)
B, C, D = rng.random((n, n, n)), rng.random((n, n)), rng.random((n, n))
np.einsum("ikl,lj,kj->ij", B, D, C, optimize=True)
ts = []
for _ in range(9):
    t = time.perf_counter(); np.einsum("ikl,lj,kj->ij", B, D, C, optimize=True); ts.append(time.perf_counter() - t)
print(sorted(ts)[len(ts) // 2] * 1e3)
PY
}
tvm_py=${TVM_PYTHON:-python3}
tvm_lib=${TVM_LIB:-}
if [ -z "$tvm_lib" ] && [ "${TVM:-0}" = 1 ]; then
  if ! "$tvm_py" -c "import tvm.s_tir.meta_schedule" 2>/dev/null; then
    echo "lift.sh: TVM=1 but $tvm_py cannot import tvm.s_tir.meta_schedule (set TVM_PYTHON)" >&2
    exit 2
  fi
  tvm_dir=$(mktemp -d)
  trap 'rm -rf "$tvm_dir"' EXIT
  tvm_lib=$tvm_dir/mttkrp.so
  "$tvm_py" bench/tvm_mttkrp.py tune "$n" 128 "$tvm_lib" | tail -1
fi
for round in 1 2 3; do
  hand=$(median scripts/best/interp.teml -D E="$e")
  lifted=$(median scripts/best/interp_lifted.teml -D E="$e")
  python3 -c "h, l = $hand, $lifted; print(f'round $round interp E=$e: hand-lifted best {h:.2f} ms, lift + same path {l:.2f} ms, ratio {l/h:.3f}')"
done
for round in 1 2 3; do
  tvm_t=nan
  if [ -n "$tvm_lib" ]; then
    tvm_t=$("$tvm_py" bench/tvm_mttkrp.py time "$n" "$tvm_lib") || tvm_t=nan
  fi
  best=$(median scripts/best/mttkrp.teml -D N="$n")
  tuned=$(median scripts/tuned/mttkrp.teml -D N="$n")
  lifted=$(median scripts/tuned/mttkrp_lifted.teml -D N="$n")
  np_t=$(numpy_mttkrp "$n")
  python3 - "$round" "$n" "$best" "$tuned" "$lifted" "$np_t" "$tvm_t" <<'PY'
import math, sys
rnd, n = sys.argv[1], sys.argv[2]
b, t, l, p, v = (float(x) for x in sys.argv[3:])
line = (f"round {rnd} mttkrp N={n}: naive best {b:.1f} ms, naive tuned {t:.1f} ms, "
        f"lifted tuned {l:.1f} ms, numpy einsum(optimize) {p:.1f} ms")
ratios = f"lifted/numpy {l/p:.3f}"
if not math.isnan(v):
    line += f", TVM MetaSchedule (naive) {v:.1f} ms"
    ratios += f", lifted/TVM {l/v:.3f}"
print(f"{line}; {ratios}, lifted/naive best {l/b:.3f}")
PY
done
