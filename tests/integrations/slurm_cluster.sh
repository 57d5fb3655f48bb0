# A two-node Slurm on this machine for the tests and benchmarks of spank_tessera.so, sourced:
#
#   build=/path/to/build; source tests/integrations/slurm_cluster.sh; slurm_cluster_up
#
# slurm_cluster_up: exits 77 when Slurm is not installed or not root (the caller's "skipped");
# else starts munged (own key and socket), slurmctld and two slurmd, nodes $node and $node2 (ports
# of their own, 127.0.0.1), in a temporary folder $T, each with fake GPUs through the fake NVML
# (character devices with /dev/null's numbers; gres lines from `tessera slurm config`, kept in
# $T/gpu-lines.txt and $T/gpu-lines2.txt, NodeName= before each line of gres.conf): $node two
# A100-40GB, $node2 those and a third A100-40GB in MIG mode with two 3g.20gb instances (fake
# NVML config $mig_config, node GPU 2 = Slurm's GPUs 2 and 3 there); plugstack.conf loading $build/spank_tessera.so on the node
# directory $T/node-%n (each node its own: $T/node is $node's), and each node's node side (`tessera
# node arbiter`: $node's pid $arbiter, metering; start_arbiter starts it again). The default
# partition holds $node only; partition "two" holds both. Exports SLURM_CONF and LD_LIBRARY_PATH
# (the fake CUDA driver); an EXIT trap stops everything and removes $T.
# Set slurm_plugstack_line before calling to load something else (the benchmark's "without").
# slurmctld loads tessera's select_cons_tres.so (best fit for shard jobs; $build/slurm-select,
# src/integrations/slurm/select_plugin/) before Debian's through PluginDir; set slurm_select_dir
# to another folder, or empty for Debian's own plugin (e.g. `slurm_select_dir= bash slurm_test.sh
# build`: check 2c then fails, Debian's slurmctld takes the first GPU with room).
# Define slurm_before_ctld to run something once munged runs and $T/slurm.conf is written, before
# slurmctld starts (the accounting suite starts slurmdbd there and appends its lines).
# Names it defines: T node node2 host pids arbiter probe slurmd_node mig_config slurm_select_dir
# dump_logs released start_arbiter slurm_cluster_stop.

# Whether tenant $1 leaves node tnode's registry within 10 s (the step's end runs slurm_spank_exit
# after srun may have returned; nothing else prunes the registry meanwhile).
released() {
  for _ in $(seq 1 100); do
    grep -q "\"$1\"" "$T/node/tenants.json" 2> /dev/null || return 0
    sleep 0.1
  done
  return 1
}

dump_logs() { tail -n 30 "$T"/log/*.log 2> /dev/null; }
slurm_cluster_stop() {
  for f in "$T"/slurmd-*.pid "$T/slurmctld.pid" "$T/munged.pid"; do
    [ -s "$f" ] && kill "$(cat "$f")" 2> /dev/null
  done
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  sleep 0.2
  for f in "$T"/slurmd-*.pid "$T/slurmctld.pid" "$T/munged.pid"; do
    [ -s "$f" ] && kill -9 "$(cat "$f")" 2> /dev/null
  done
  rm -rf "$T"
}
start_arbiter() {
  "$build/tessera" node arbiter --gpus 0,1 --run-dir "$T/node" --usage-ledger "$T/usage.jsonl" \
    --usage-period 2 --node-name tnode --nvml "$TESSERA_FAKE_NVML_LIBRARY" >> "$T/log/arbiter.log" 2>&1 &
  arbiter=$!
  pids+=("$arbiter")
}

slurm_cluster_up() {
  for tool in slurmctld slurmd srun sbatch sinfo munged; do
    if ! command -v "$tool" > /dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ]; then
      echo "SKIPPED: Slurm is not installed ($tool not found; scripts/setup installs slurmctld slurmd slurm-client munge libslurm-dev)"
      exit 77
    fi
  done
  if [ "$(id -u)" -ne 0 ]; then
    echo "SKIPPED: the Slurm suite starts slurmd, which must run as root"
    exit 77
  fi
  [ -f "$build/spank_tessera.so" ] || { echo "FAIL: $build/spank_tessera.so was not built (spank.h missing?)"; exit 1; }
  slurm_select_dir="${slurm_select_dir-$build/slurm-select}"
  local stock_dir plugin_dir_line=""
  stock_dir="$(dirname "$(ls /usr/lib/*/slurm-wlm/select_cons_tres.so 2> /dev/null | head -n 1)")"
  if [ "$stock_dir" = . ]; then
    echo "FAIL: Debian's select_cons_tres.so is not under /usr/lib/*/slurm-wlm (slurmctld's own plugins)"
    exit 1
  fi
  if [ -n "$slurm_select_dir" ]; then
    [ -f "$slurm_select_dir/select_cons_tres.so" ] || { echo "FAIL: $slurm_select_dir/select_cons_tres.so" \
      "was not built (target slurm_select_plugin: slurmctld 22.05.8 and a download of Debian's source)"; exit 1; }
    plugin_dir_line="PluginDir=$slurm_select_dir:$stock_dir"
  fi
  export PATH="/usr/sbin:$PATH"

  T="$(mktemp -d /tmp/tessera-slurm-XXXXXX)"
  chmod 755 "$T"
  pids=()
  trap slurm_cluster_stop EXIT
  trap "exit 143" TERM  # a timeout (ctest's too) still stops the daemons and removes $T
  trap "exit 130" INT
  # The daemons below must not inherit the caller's descriptors: run as `flock LOCK bash ...`, a
  # munged that outlived a killed suite held the build lock's descriptor (3), and every build
  # waited. 3-9 only: bash keeps its own (a redirected call's saved stdout) at 10 and above.
  local fd
  for fd in 3 4 5 6 7 8 9; do eval "exec $fd>&-"; done

  # Ports of our own (several test trees may run at once): 3 consecutive from a per-process base.
  base=$((20000 + ($$ % 2000) * 3))
  node=tnode
  node2=tnode2
  mkdir -p "$T/log" "$T/spool/ctld" "$T/dev" "$T/node-$node" "$T/node-$node2" "$T/munge"
  ln -s "node-$node" "$T/node"
  chmod 711 "$T/munge"  # a job of another user (srun --uid) reaches the socket, never lists the key

  # munge with a key and socket of its own.
  mungekey -c -k "$T/munge/munge.key" > /dev/null 2>&1 || dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 2> /dev/null
  chmod 600 "$T/munge/munge.key"
  munged --force --socket="$T/munge/sock" --key-file="$T/munge/munge.key" --pid-file="$T/munged.pid" \
    --log-file="$T/log/munged.log" --seed-file="$T/munge/seed" || { echo "FAIL: munged did not start"; dump_logs; exit 1; }

  # Fake GPUs: device files slurmd can stat, and the gres.conf / slurm.conf lines from tessera.
  for i in 0 1; do mknod "$T/dev/fakegpu$i" c 1 3; done
  export TESSERA_FAKE_NVML_CONFIG="A100-40GB*2"
  export TESSERA_FAKE_NVML_LIBRARY="$build/tests/fake_nvml/libnvidia-ml.so.1"
  "$build/tessera" slurm config --fake-gpus A100-40GB:2 --shards-per-gpu 4 --node-name "$node" \
    --device-prefix "$T/dev/fakegpu" > "$T/gpu-lines.txt" || { echo "FAIL: tessera slurm config"; exit 1; }
  # $node2: a third GPU in MIG mode, its instances' capability files fake too (the minors as
  # /proc/driver/nvidia-caps/mig-minors would give them).
  mig_config="A100-40GB*2,A100-40GB:mig=1:gis=3g.20gb@0;3g.20gb@4"
  mkdir -p "$T/dev2"
  for i in 0 1 2; do mknod "$T/dev2/fakegpu$i" c 1 3; done
  for i in 31 32 41 42; do mknod "$T/dev2/nvidia-cap$i" c 1 3; done
  printf 'gpu2/gi1/access 31\ngpu2/gi1/ci0/access 32\ngpu2/gi2/access 41\ngpu2/gi2/ci0/access 42\n' > "$T/mig-minors"
  TESSERA_FAKE_NVML_CONFIG="$mig_config" "$build/tessera" slurm config --nvml "$TESSERA_FAKE_NVML_LIBRARY" \
    --shards-per-gpu 4 --node-name "$node2" --device-prefix "$T/dev2/fakegpu" --mig-minors "$T/mig-minors" \
    | sed "s#/dev/nvidia-caps/#$T/dev2/#g" > "$T/gpu-lines2.txt" || { echo "FAIL: tessera slurm config (MIG)"; exit 1; }
  {
    echo "AutoDetect=off"
    sed -n '/^Name=/s/^/NodeName='"$node"' /p' "$T/gpu-lines.txt"
    sed -n '/^Name=/s/^/NodeName='"$node2"' /p' "$T/gpu-lines2.txt"
  } > "$T/gres.conf"

  host="$(hostname -s)"
  echo "${slurm_plugstack_line-required $build/spank_tessera.so node_dir=$T/node-%n nvml=$TESSERA_FAKE_NVML_LIBRARY shards_per_gpu=4}" \
    > "$T/plugstack.conf"
  cat > "$T/slurm.conf" <<EOF
ClusterName=tessera
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmctldPort=$base
SlurmdPort=$((base + 1))
AuthType=auth/munge
AuthInfo=socket=$T/munge/sock
CredType=cred/munge
StateSaveLocation=$T/spool/ctld
SlurmdSpoolDir=$T/spool/d-%n
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd-%n.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd-%n.log
PlugStackConfig=$T/plugstack.conf
$plugin_dir_line
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
GresTypes=gpu,shard
MpiDefault=none
ReturnToService=2
$(grep '^NodeName=' "$T/gpu-lines.txt") NodeHostname=$host NodeAddr=127.0.0.1 Port=$((base + 1)) CPUs=4 RealMemory=1000 State=UNKNOWN
$(grep '^NodeName=' "$T/gpu-lines2.txt") NodeHostname=$host NodeAddr=127.0.0.1 Port=$((base + 2)) CPUs=4 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
PartitionName=two Nodes=$node,$node2 MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF="$T/slurm.conf"
  if declare -F slurm_before_ctld > /dev/null; then slurm_before_ctld || exit 1; fi
  slurmctld -c || { echo "FAIL: slurmctld did not start"; dump_logs; exit 1; }
  for slurmd_node in "$node" "$node2"; do
    slurmd -N "$slurmd_node" || { echo "FAIL: slurmd -N $slurmd_node did not start"; dump_logs; exit 1; }
  done
  ready=0
  for _ in $(seq 1 150); do  # up to 30 s for the nodes to register
    if [ "$(sinfo -h -N -n "$node,$node2" -o %T 2> /dev/null | sort -u)" = "idle" ]; then ready=1; break; fi
    sleep 0.2
  done
  [ "$ready" = 1 ] || { echo "FAIL: nodes $node, $node2 not idle: $(sinfo -h -N -o '%n %T %E' 2>&1)"; dump_logs; exit 1; }

  # The node side of each node: GPU 0's and 1's lease arbiters on the node directory its tasks
  # join ($node's also meters usage).
  start_arbiter
  TESSERA_FAKE_NVML_CONFIG="$mig_config" "$build/tessera" node arbiter --gpus 0,1,2 --run-dir "$T/node-$node2" \
    --nvml "$TESSERA_FAKE_NVML_LIBRARY" >> "$T/log/arbiter-$node2.log" 2>&1 &
  pids+=($!)
  probe="$build/tests/tessera_shim_probe"
  export LD_LIBRARY_PATH="$build/tests/fake_cuda"
}
