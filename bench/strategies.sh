#!/bin/bash
# bench/strategies.sh [DIR]: random against evolutionary search on mttkrp's space, judged against
# an exhaustive measurement of the whole space: each strategy replays its proposals against the
# exhaustive log (resuming measures nothing), so every strategy sees the same times. About 5
# minutes on 2 cores; the results are quoted in docs/tuning.md.
cd "$(dirname "$0")/.."
J=${1:-target/strategies}
mkdir -p $J
rm -rf $J/out* $J/s*.jsonl
./target/release/teml tune scripts/tune/mttkrp.rhai -D N=96 --strategy exhaustive --budget 1000 \
   --log $J/full.jsonl --out $J/out-full --no-anchors --leaders 1 --rounds 1 > $J/full.txt 2>&1
for strat in random evolutionary; do
  for seed in 1 2 3 4 5 6 7 8 9 10; do
    ./target/release/teml tune scripts/tune/mttkrp.rhai -D N=96 --strategy $strat --seed $seed --budget 40 \
       --merge $J/full.jsonl --log $J/s-$strat-$seed.jsonl --out $J/out-$strat-$seed --no-anchors --leaders 1 --rounds 1 --json > $J/out-$strat-$seed.json 2>/dev/null
  done
done
python3 - "$J" <<'PY'
import json, glob, statistics
import sys; J=sys.argv[1]
full=[json.loads(l) for l in open(J+'/full.jsonl')]
ok=[r['median_s'] for r in full if r['status']=='ok']
opt=min(ok)
print(f"space: {len(full)} points, {len(ok)} verified; optimum {opt*1e3:.3f} ms; median point {statistics.median(ok)*1e3:.3f} ms")
for strat in ['random','evolutionary']:
    rows=[]
    for seed in range(1,11):
        r=json.load(open(f"{J}/out-{strat}-{seed}.json"))
        tr=r['trace']
        def at(n):
            b=[t[2] for t in tr if t[0]<=n and t[2] is not None]
            return (b[-1] if b else float('inf'))/opt
        first=next((t[0] for t in tr if t[2] is not None and t[2]<=1.05*opt), None)
        rows.append((at(10),at(20),at(40),first))
    for i,n in enumerate([10,20,40]):
        v=[x[i] for x in rows]
        print(f"{strat:13s} best/optimum after {n:2d} candidates: median {statistics.median(v):.2f}, worst {max(v):.2f}")
    f=[x[3] for x in rows]
    hit=[x for x in f if x is not None]
    print(f"{strat:13s} within 5% of the optimum in {len(hit)}/10 runs; candidates needed (median of those) {statistics.median(hit) if hit else '-'}")
PY
