#!/usr/bin/env bash
# Independent C probes of this machine's peak FMA rate and streaming bandwidth, to compare with
# the probes `teml bench` prints (its "Probe at the start/end" lines). Usage:
#   bash bench/independent_probes.sh [threads]      (default 2)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMP_NUM_THREADS=${1:-2}
cc -O2 -march=native -fopenmp "$here/probes/fma.c" -o "$out/fma"
cc -O2 -march=native -fopenmp "$here/probes/triad.c" -o "$out/triad"
"$out/fma"
for size in 64 256; do
  for placement in 0 1 2 3; do
    "$out/triad" "$placement" "$size"
  done
done
# The hand-written interp and helm of issue 20 (fused, temporaries per element), to compare with
# `teml bench --kernel interp` / `--kernel helm` (scripts/best) side by side.
cc -O3 -march=native -fopenmp "$here/probes/interp_hand.c" -o "$out/interp_hand"
cc -O3 -march=native -fopenmp "$here/probes/helm_hand.c" -o "$out/helm_hand"
"$out/interp_hand"
"$out/helm_hand"
# blur with plain against non-temporal stores (AVX-512F only): what skipping the read for
# ownership of B's lines would give (issue 20's blur target; bench/RESULTS.md).
if grep -q avx512f /proc/cpuinfo; then
  cc -O3 -march=native -fopenmp "$here/probes/blur_nt.c" -o "$out/blur_nt"
  "$out/blur_nt"
fi
