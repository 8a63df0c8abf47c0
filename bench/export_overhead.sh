#!/usr/bin/env bash
# The exported mm kernel called from numpy against `teml run --time` on the same path, side by
# side in one run (issue 22's target: within 5 %). Both take the median of their timed runs;
# numpy's side calls the ctypes module on preallocated arrays (the Python checks included),
# allocated 64-byte aligned with the module's aligned_zeros (numpy's own start at 16 bytes,
# where the kernel's 512-bit vectors split cache lines: 3-9 % slower).
#
#   bash bench/export_overhead.sh [N]          # default N=1200
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1200}
teml=${TEML:-target/release/teml}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$teml" export scripts/tuned/mm.teml -D N="$n" -o "$out" >/dev/null
for round in 1 2 3; do
  t_run=$("$teml" run scripts/tuned/mm.teml -D N="$n" --time --json 2>/dev/null \
    | python3 -c 'import json,sys; r=json.load(sys.stdin); k=r["kernels"][0] if "kernels" in r else r[0]; print(k["time"]["median_s"] if "time" in k else k["median_s"])')
  t_py=$(python3 - "$out" "$n" <<'PY'
import sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
import p
n = int(sys.argv[2])
rng = np.random.default_rng(0)
A, B, C = (p.aligned_zeros((n, n)) for _ in range(3))   # 64-byte aligned, as teml's buffers are
A[:], B[:] = rng.standard_normal((n, n)), rng.standard_normal((n, n))
p.p(A, B, C)
assert np.allclose(C, A @ B)
ts = []
for _ in range(9):
    t = time.perf_counter(); p.p(A, B, C); ts.append(time.perf_counter() - t)
print(sorted(ts)[len(ts) // 2])
PY
)
  python3 -c "r, p = $t_run, $t_py; print(f'round $round: teml run --time {r*1e3:.2f} ms, numpy call {p*1e3:.2f} ms, ratio {p/r:.3f}')"
done
