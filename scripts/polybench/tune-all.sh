#!/usr/bin/env bash
# Tunes every PolyBench space (scripts/polybench/tune/K.rhai) at the bench's sizes (the table
# POLYBENCH_SIZES of src/suite/mod.rs, which `teml bench --suite polybench` runs) and keeps each
# winner as scripts/polybench/tuned/K.teml, the "tuned" variant of the bench.
#
#   bash scripts/polybench/tune-all.sh [KERNEL...]     # default: all 30
#   BUDGET=10 SECONDS_EACH=60 bash scripts/polybench/tune-all.sh gemm
#
# Run it on an otherwise idle machine: every candidate is timed. The logs stay in
# tune-out/polybench/K/ (resumed by a second run).
set -euo pipefail
cd "$(dirname "$0")/../.."
teml=${TEML:-target/release/teml}
budget=${BUDGET:-10}
seconds=${SECONDS_EACH:-45}
kernels=("$@")
if [ ${#kernels[@]} -eq 0 ]; then
    mapfile -t kernels < <(ls scripts/polybench/tune | sed 's/\.rhai$//')
fi
mkdir -p scripts/polybench/tuned
for k in "${kernels[@]}"; do
    sizes=$(grep "(\"$k\", &\[" src/suite/mod.rs | grep -o '("[A-Z]*", [0-9]*)' \
        | sed -E 's/\("([A-Z]+)", ([0-9]+)\)/-D \1=\2/' | tr '\n' ' ')
    [ -n "$sizes" ] || { echo "$k: no sizes in src/suite/mod.rs" >&2; exit 1; }
    out=tune-out/polybench/$k
    echo "== $k ($sizes)"
    # shellcheck disable=SC2086
    if "$teml" tune "scripts/polybench/tune/$k.rhai" $sizes --budget "$budget" \
        --time-budget "$seconds" --leaders 2 --rounds 3 --out "$out" 2>&1 | grep -E "^best|rejected"; then
        [ -f "$out/best.teml" ] && cp "$out/best.teml" "scripts/polybench/tuned/$k.teml"
    else
        echo "$k: the search found no verified candidate" >&2
    fi
done
