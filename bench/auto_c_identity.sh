#!/bin/bash
# The C of every golden kernel's auto path (tests/golden/schedule: the paper's ten, PolyBench's 30 at
# the bench sizes, the held-out kernels), replayed from auto.teml under the pinned AVX-512 machine,
# into /tmp/cid/LABEL. Run it before and after a scheduler change and compare, kernel and nest
# names aside (they come from the path's last variables):
#   n() { sed -E 's/teml_[A-Za-z0-9_]+/teml_K/g; s/l[0-9]+/lN/g; s#^( *)/\* [A-Za-z0-9_, ]+ \*/$#\1/* N */#; s/runs [A-Za-z0-9_, ]+ in order/runs X/' "$1"; }
#   for f in /tmp/cid/before/*.c; do cmp -s <(n $f) <(n /tmp/cid/after/${f##*/}) || echo "differs: $f"; done
L=${1:?usage: bench/auto_c_identity.sh LABEL}; R=$(realpath "$(dirname "$0")/.."); T=$(realpath "${TEML:-$R/target/ci/teml}")
export TEML_MACHINE="512-bit vectors, 32 vector registers, 2 cores, L1 48 KiB, L2 1024 KiB, L3 32768 KiB"
unset TEML_VECTOR_BITS
out=/tmp/cid/$L; rm -rf $out; mkdir -p $out
run() { # dir name sizes...
  d=$1; n=$2; shift 2; w=$(mktemp -d); cp $R/$d/$n.teml $w/
  D=(); for s in "$@"; do D+=(-D "$s"); done
  (cd $w && TEML_TUNING_DB=$w/db.jsonl $T auto $n.teml "${D[@]}" --no-run --no-db --out out >/dev/null 2>&1 \
    && cp out/auto.teml $out/$n.auto.teml && $T run out/auto.teml "${D[@]}" --no-run --emit-c $out/$n.c >/dev/null 2>$out/$n.err) || echo "FAIL $n" >> $out/FAILS
  rm -rf $w
}
run examples mm N=1200; run examples tmm N=1200; run examples bmm BATCH=32768; run examples gconv NB=32
run examples mttkrp N=200; run examples sddmm N=4096; run examples interp E=200000; run examples helm E=15000
run examples blur N=8192; run examples coars N=8192
while read n s; do run examples/polybench $n $s; done <<'P'
2mm NI=800 NJ=900 NK=1100 NL=1200
3mm NI=800 NJ=900 NK=1000 NL=1100 NM=1200
adi TSTEPS=100 N=1000
atax M=1900 N=2100
bicg M=1900 N=2100
cholesky N=1200
correlation M=1200 N=1400
covariance M=1200 N=1400
deriche W=4096 H=2160
doitgen NQ=140 NR=150 NP=160
durbin N=120
fdtd-2d TMAX=100 NX=1000 NY=1200
floyd-warshall N=1000
gemm NI=1000 NJ=1100 NK=1200
gemver N=2000
gesummv N=1300
gramschmidt M=1200 N=1000
heat-3d TSTEPS=50 N=120
jacobi-1d TSTEPS=500 N=2000
jacobi-2d TSTEPS=100 N=1300
lu N=200
ludcmp N=200
mvt N=2000
nussinov N=1000
seidel-2d TSTEPS=20 N=2000
symm M=1000 N=1200
syr2k M=1000 N=1200
syrk M=1000 N=1200
trisolv N=2000
trmm M=1000 N=1200
P
for f in $R/bench/heldout/*.teml; do n=$(basename $f .teml); run bench/heldout $n; done
ls $out/*.c | wc -l
