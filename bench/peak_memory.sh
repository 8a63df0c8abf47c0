#!/bin/bash
# bench/peak_memory.sh CMD...: runs CMD and prints the peak of the summed PSS (proportional set
# size: shared pages such as the kernel buffers' mapping counted once) of every process whose
# command line mentions teml: the command and its worker processes. Sampled every 20 ms.
#   bench/peak_memory.sh target/release/teml run examples/coars.teml -D N=8192 --time -q
# Run it on a quiet machine: other teml processes are counted too.
"$@" > /dev/null 2>&1 &
pid=$!
peak=0
while kill -0 "$pid" 2>/dev/null; do
  tot=0
  for p in $(pgrep -f teml); do
    [ "$p" = "$$" ] && continue
    v=$(awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null)
    tot=$((tot + ${v:-0}))
  done
  [ "$tot" -gt "$peak" ] && peak=$tot
  sleep 0.02
done
wait "$pid"
rc=$?
echo "peak PSS: $((peak / 1024)) MiB (exit status $rc)"
