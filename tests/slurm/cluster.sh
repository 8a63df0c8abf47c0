#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, for tests and for trying `teml tune --slurm`
# without a cluster: munged, slurmctld and slurmd from Debian's packages (munge, slurm-wlm),
# with a generated slurm.conf whose only node is this host, everything under DIR.
#
#   bash tests/slurm/cluster.sh start DIR   # prints `export SLURM_CONF=DIR/slurm.conf`
#   SLURM_CONF=DIR/slurm.conf sbatch ...    # sbatch, squeue, sacct, scancel see this cluster
#   bash tests/slurm/cluster.sh stop DIR
#
# Needs root (slurmd starts each job as its user). Exits non-zero, saying why, when the
# cluster cannot start. Accounting is not configured: sacct has no records here, squeue and
# `scontrol show job` have the jobs' states.
set -euo pipefail
cmd=${1:?usage: cluster.sh start|stop DIR}
D=${2:?usage: cluster.sh start|stop DIR}

stop() {
  for p in slurmd slurmctld munged; do
    if [ -f "$D/$p.pid" ]; then
      pid=$(cat "$D/$p.pid" 2>/dev/null || true)
      [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    fi
  done
  for _ in $(seq 50); do
    alive=no
    for p in slurmd slurmctld munged; do
      pid=$(cat "$D/$p.pid" 2>/dev/null || true)
      [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && alive=yes
    done
    [ $alive = no ] && break
    sleep 0.1
  done
  # Job steps the daemons left behind.
  pkill -f "slurmstepd.*$D" 2>/dev/null || true
}

if [ "$cmd" = stop ]; then
  stop
  exit 0
fi
[ "$cmd" = start ] || { echo "usage: cluster.sh start|stop DIR" >&2; exit 2; }

[ "$(id -u)" = 0 ] || { echo "not root: slurmd must run as root to start jobs as their user" >&2; exit 1; }
for b in munged mungekey slurmctld slurmd sbatch squeue scancel; do
  command -v "$b" >/dev/null 2>&1 || {
    echo "$b not found: install Debian's packages (apt-get install slurmctld slurmd slurm-client munge, or slurm-wlm munge)" >&2
    exit 1
  }
done
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
mkdir -p "$D/state" "$D/spool" "$D/log"
D=$(cd "$D" && pwd)
host=$(hostname -s)
cpus=$(nproc)
mem=$(awk '/MemTotal/ { print int($2 / 1024 * 0.9) }' /proc/meminfo)
ctld_port=$(free_port)
d_port=$(free_port)
while [ "$d_port" = "$ctld_port" ]; do d_port=$(free_port); done
cat > "$D/slurm.conf" <<CONF
# Written by teml's tests/slurm/cluster.sh: a one-node cluster for tests.
ClusterName=teml-test
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
AuthType=auth/munge
AuthInfo=socket=$D/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
# Schedule at once when a job is submitted or ends (defaults: 3 s batch delay, 2 us interval):
# a task that ends starts the next and the merge 1 s later instead of 3 s.
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
[ -f "$D/munge.key" ] || mungekey --create --keyfile="$D/munge.key" >/dev/null 2>&1 ||
  { echo "mungekey could not create a key in $D" >&2; exit 1; }
chmod 600 "$D/munge.key"
munged --force --key-file="$D/munge.key" --socket="$D/munge.socket" --pid-file="$D/munged.pid" \
  --log-file="$D/log/munged.log" --seed-file="$D/munge.seed" ||
  { echo "munged did not start: $(tail -n 3 "$D/log/munged.log" 2>/dev/null)" >&2; exit 1; }
export SLURM_CONF=$D/slurm.conf
slurmctld -f "$SLURM_CONF" || { echo "slurmctld did not start: $(tail -n 5 "$D/log/slurmctld.log" 2>/dev/null)" >&2; stop; exit 1; }
slurmd -f "$SLURM_CONF" || { echo "slurmd did not start: $(tail -n 5 "$D/log/slurmd.log" 2>/dev/null)" >&2; stop; exit 1; }
for _ in $(seq 100); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qx idle; then
    echo "export SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 0.2
done
echo "the node did not come up within 20 s: $(sinfo 2>&1 | tail -n 2); $(tail -n 5 "$D/log/slurmd.log" 2>/dev/null)" >&2
stop
exit 1
