#!/usr/bin/env bash
# A one-node Slurm cluster of two GPUs on localhost for gpumux's end-to-end test (and to try the integration by
# hand): munged (unless one runs already), slurmctld and slurmd with simulated GPUs, gres.conf from
# `gpumux slurm gres-conf`, and the gpumux SPANK plugin talking to gpumuxd at $DIR/gpumuxd.sock.
#   cluster.sh start DIR BUILD_DIR   writes DIR/etc/{slurm,gres,plugstack}.conf, starts the daemons,
#                                    waits until the node is idle; use SLURM_CONF=DIR/etc/slurm.conf
#   cluster.sh stop DIR              stops, by pid, every daemon it started
# Needs root and Debian's slurm-wlm and munge (scripts/install-deps.sh installs them).
set -euo pipefail
cmd=$1 dir=$(realpath -m "$2")
node=gpumuxtest

stop() {
  for pidfile in "$dir"/run/slurmd.pid "$dir"/run/slurmctld.pid "$dir"/run/munged.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

if [ "$cmd" = stop ]; then stop; exit 0; fi

build=$(realpath "$3")
mkdir -p "$dir"/etc "$dir"/run "$dir"/log "$dir"/ctld "$dir"/d "$dir"/dev
host=$(hostname -s)

# munge: Slurm's authentication. Reuse a running munged; otherwise start one and remember its pid.
if ! munge -n >/dev/null 2>&1; then
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  chmod 0755 /run/munge; chmod 0700 /var/log/munge /var/lib/munge
  [ -f /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key; }
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
  cp /run/munge/munged.pid "$dir"/run/munged.pid
  for _ in $(seq 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
fi

# Two simulated H100s; their "device files" are character devices of the NVIDIA major made here
# (no driver is needed: nothing opens them).
for i in 0 1; do [ -e "$dir"/dev/nvidia$i ] || mknod "$dir"/dev/nvidia$i c 195 $i; done
"$build"/gpumux slurm gres-conf --sim H100 --gpus 2 --node "$node" --device-file "$dir/dev/nvidia{}" > "$dir"/gres.lines
grep -v '^#' "$dir"/gres.lines | sed -n '/^AutoDetect/,/^$/p' > "$dir"/etc/gres.conf
gres=$(grep '^NodeName=' "$dir"/gres.lines | sed 's/.* Gres=//')

cat > "$dir"/etc/slurm.conf <<CONF
ClusterName=gpumuxtest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
SlurmctldPort=16817
SlurmdPort=16818
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/d
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
PlugStackConfig=$dir/etc/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu,shard
KillWait=5
NodeName=$node NodeAddr=127.0.0.1 NodeHostname=$host CPUs=$(nproc) RealMemory=1000 Gres=$gres State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
echo "required $build/spank_gpumux.so socket=$dir/gpumuxd.sock" > "$dir"/etc/plugstack.conf

export SLURM_CONF="$dir"/etc/slurm.conf
/usr/sbin/slurmctld -i -f "$SLURM_CONF"
/usr/sbin/slurmd -f "$SLURM_CONF" -N "$node"
for _ in $(seq 100); do
  sinfo -h -o %t 2>/dev/null | grep -qx idle && exit 0
  sleep 0.1
done
echo "cluster.sh: the node did not become idle; logs in $dir/log" >&2
exit 1
