#!/usr/bin/env bash
# Every shipped program at its default sizes: `teml run FILE` for each file under examples/ and
# scripts/ (a space runs its first point), one line per file as it finishes: its exit status,
# its seconds, and, where it failed, the last line it printed. The tests run the same files at
# their `# test:` sizes (tests/it/examples.rs); this is the check at the sizes a user gets.
#   bash bench/defaults.sh [TEML] [THREADS]   (default target/release/teml, 2 threads)
# Exits 1 when some file did not run and verify.
set -uo pipefail
cd "$(dirname "$0")/.."
teml=${1:-${TEML:-target/release/teml}}
threads=${2:-2}
failed=0
total=0
files=$(find examples scripts -name '*.teml' -o -name '*.rhai' | grep -v '/errors/' | sort)
echo "$(echo "$files" | wc -l) programs, $threads threads, $teml"
for f in $files; do
  total=$((total + 1))
  start=$(date +%s%N)
  out=$(timeout 900 "$teml" run "$f" --threads "$threads" 2>&1)
  rc=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  if [ $rc -eq 0 ]; then
    printf 'ok     %5d.%01d s  %s\n' $((ms / 1000)) $((ms % 1000 / 100)) "$f"
  else
    failed=$((failed + 1))
    printf 'FAILED %5d.%01d s  %s (exit %d): %s\n' $((ms / 1000)) $((ms % 1000 / 100)) "$f" "$rc" "$(printf '%s' "$out" | tail -1 | cut -c1-300)"
  fi
done
echo "$((total - failed)) of $total ran and verified at their defaults"
[ $failed -eq 0 ]
