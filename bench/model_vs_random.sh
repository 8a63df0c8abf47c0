#!/usr/bin/env bash
# What the learned cost model buys over random search at the same budget: `teml tune` of the
# space the rules generate for each kernel (no space written), with --strategy random and with
# --strategy model, the same budget and seeds, without the tuning database (each run starts
# from nothing). Prints, per kernel and seed, the winner's verified median of each strategy
# (the final round's interleaved re-measurement) and their ratio. Compare within one run only.
#
#   bash bench/model_vs_random.sh                       # gconv, mm, mttkrp at moderate sizes
#   BUDGET=32 SEEDS="1 2 3" KERNELS="gconv" bash bench/model_vs_random.sh
set -euo pipefail
TEML=${TEML:-target/release/teml}
BUDGET=${BUDGET:-24}
SEEDS=${SEEDS:-"1 2"}
KERNELS=${KERNELS:-"gconv mm mttkrp"}
declare -A SIZES=(
  [gconv]="-D NB=32 -D G=32 -D CO=32 -D CI=32 -D H=7 -D KH=3"
  [mm]="-D N=512"
  [mttkrp]="-D N=96"
  [tmm]="-D N=512"
  [sddmm]="-D N=1024 -D K=64"
)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
best() { python3 -c 'import json,sys; r=json.load(sys.stdin); b=r.get("best"); print("%.3f" % (b["median_s"]*1e3) if b else "none")'; }
echo "kernel | seed | random (ms) | model (ms) | random / model   ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), budget $BUDGET)"
for k in $KERNELS; do
  for s in $SEEDS; do
    r=()
    for strategy in random model; do
      # shellcheck disable=SC2086
      r+=("$("$TEML" tune "examples/$k.teml" ${SIZES[$k]:-} --strategy "$strategy" --seed "$s" --budget "$BUDGET" \
            --no-db --no-anchors --leaders 2 --rounds 2 --json --out "$out/$k-$strategy-$s" 2>/dev/null | best)")
    done
    ratio=$(python3 -c "a,b='${r[0]}','${r[1]}'; print('%.2f' % (float(a)/float(b)) if 'none' not in (a,b) else '-')")
    echo "$k | $s | ${r[0]} | ${r[1]} | $ratio"
  done
done
