#!/usr/bin/env bash
# What checks the full-size binary of every shipped path (docs/verification.md), at the sizes it
# was tuned at (its header's `Tuned by ... -D N=...`, else the file's own) and under the tuner's
# reference limit (2e6 interpreted instances): one line per script with, for each kernel,
# whether it verified, where the reference interpreter ran (full_size, reduced, refused) and what
# checked the full-size binary (interpreter, oracle, untransformed, nothing).
#   bash bench/full_size_census.sh [TEML]      (TEML: the binary, default target/release/teml)
set -uo pipefail
cd "$(dirname "$0")/.."
teml=${1:-${TEML:-target/release/teml}}
for f in scripts/polybench/tuned/*.teml scripts/tuned/*.teml scripts/best/*.teml scripts/pluto/*.teml scripts/paper/*.teml; do
  # shellcheck disable=SC2046
  defs=$(grep -m1 "^# Tuned by" "$f" | grep -o -- "-D [A-Za-z0-9_]*=[0-9]*" | tr '\n' ' ')
  # shellcheck disable=SC2086
  out=$(timeout 600 "$teml" run "$f" $defs --max-reference 2000000 --json 2>/dev/null)
  printf '%s [%s] ' "$f" "$defs"
  printf '%s' "$out" | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except Exception:
    print("error (run it alone to see why)"); sys.exit()
print("; ".join("%s verified=%s reference=%s full_size=%s%s" % (k["name"], k["verified"], k["evidence"]["reference"]["at"],
      k["evidence"]["full_size"]["by"], " compiler_defect" if k["evidence"]["compiler_defect"] else "") for k in d["kernels"]))
'
done
