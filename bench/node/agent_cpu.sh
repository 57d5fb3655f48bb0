#!/usr/bin/env bash
# The node agent's own cost (issue 32, "Cheap at scale"): a fresh `tessera serve`, one `tessera
# agent` with 8 fake GPUs (heartbeat every second, the desired state when the heartbeat names
# a new version, usage every 10 s, the NVML backstop every second), and TENANTS workloads of 1000/(TENANTS/8) milli each, 8 per GPU, each
# running `sleep` under `tessera run` (the agent's supervisor per workload). Once every workload
# runs, it reads the CPU time (utime + stime, /proc/<pid>/stat) of the agent process, and of all
# the supervisors together, over SECONDS, and the supervisors' wake-ups (context switches of all
# their threads, /proc/<pid>/task/*/status) per second. ROUNDS runs, then the medians.
# Target: the agent <= 1 % of one core with 64 tenants on 8 GPUs. The agent holds every GPU's
# arbiter lock here, so the supervisors are all standbys (they wait for the lock, ArbiterDuty).
# With LOCAL > 0 (issue 34; TENANTS + LOCAL <= 64), the node directory also holds LOCAL tenants the agent did not start,
# as DRA claims or device-plugin slots would be: `tessera run --tenant local-<i>` by hand on GPU
# i % 8 (share 10, 1 GiB), joined once the workloads run, each billed to a tenant local-<i> of the
# control plane; the agent runs with --meter-local-slots (METER_LOCAL=0: without it, which
# reports them in the heartbeat but does not meter them).
# Usage: bench/node/agent_cpu.sh [BUILD (build)] [TENANTS (64)] [SECONDS (60)] [ROUNDS (3)] [LOCAL (0)]
set -euo pipefail
B=${1:-build}
TENANTS=${2:-64}
SECS=${3:-60}
ROUNDS=${4:-3}
LOCAL=${5:-0}
T="$B/tessera"
[ -x "$T" ] || { echo "agent_cpu.sh: $T is not built (ninja -C $B tessera tessera_shim)" >&2; exit 2; }
(( TENANTS % 8 == 0 && TENANTS >= 8 && TENANTS <= 8000 )) || { echo "agent_cpu.sh: TENANTS must be a multiple of 8, 8..8000" >&2; exit 2; }
[[ "$LOCAL" =~ ^[0-9]+$ ]] && (( LOCAL == 0 || TENANTS + LOCAL <= 64 )) ||
  { echo "agent_cpu.sh: TENANTS + LOCAL must be at most 64 (a node directory's tenants, enforce::kMaxTenants)" >&2; exit 2; }
meter_flag=()
(( LOCAL > 0 )) && [ "${METER_LOCAL:-1}" != 0 ] && meter_flag=(--meter-local-slots)
milli=$(( 1000 / (TENANTS / 8) ))
work=$(mktemp -d)
export TESSERA_BOOTSTRAP_TOKEN=tsr_benchmark_admin_token_0123456789
serve_pid= agent_pid= local_pids=()
# stop_local: the LOCAL tenants' supervisors (their commands end with them).
stop_local() {
  (( ${#local_pids[@]} == 0 )) || kill "${local_pids[@]}" 2>/dev/null || true
  local_pids=()
}
cleanup() {
  stop_local
  kill "$agent_pid" "$serve_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  pkill -f "$work/node-" 2>/dev/null || true  # the supervisors and their sleeps (agent stop leaves them)
  sleep 1
  rm -rf "$work" 2>/dev/null || true
}
trap cleanup EXIT

# CPU seconds (utime + stime) of the given pids, from /proc/<pid>/stat (fields 14 and 15, ticks).
cpu_s() {
  python3 - "$@" <<'EOF'
import os, sys
hz = os.sysconf("SC_CLK_TCK")
total = 0
for pid in sys.argv[1:]:
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        continue
    fields = stat[stat.rindex(")") + 2:].split()
    total += int(fields[11]) + int(fields[12])
print(f"{total / hz:.3f}")
EOF
}

# Context switches (voluntary + involuntary: each is a wake-up) of every thread of the given pids.
switches() {
  python3 - "$@" <<'EOF'
import glob, sys
total = 0
for pid in sys.argv[1:]:
    for status in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            for line in open(status):
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    total += int(line.split()[1])
        except OSError:
            continue
print(total)
EOF
}

for r in $(seq "$ROUNDS"); do
  node="$work/node-$r"  # a fresh node directory (the last round's supervisors may still be exiting)
  "$T" serve --db "$work/serve-$r.db" --listen 127.0.0.1:0 >"$work/serve.out" 2>&1 &
  serve_pid=$!
  for _ in $(seq 100); do grep -q "listening on" "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
  port=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.out" | head -1 | cut -d: -f3)
  export TESSERA_SERVER=http://127.0.0.1:$port TESSERA_TOKEN=$TESSERA_BOOTSTRAP_TOKEN
  "$T" ctl tenants create bench >/dev/null
  for i in $(seq "$LOCAL"); do "$T" ctl tenants create "local-$i" >/dev/null; done
  "$T" ctl -o json tokens create --role node-agent | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])' >"$work/agent.token"
  "$T" agent --server "$TESSERA_SERVER" --token-file "$work/agent.token" --name bench-node --run-dir "$node" \
    --fake-gpus A100-40GB:8 --cpu-milli 1000000 --memory-mib 16777216 --tenant-uids off "${meter_flag[@]}" >"$work/agent.out" 2>&1 &
  agent_pid=$!
  for i in $(seq "$TENANTS"); do
    "$T" ctl workloads submit --tenant bench --gpu-milli "$milli" --gpu-mem-mib 1024 --qos Burstable \
      --command sleep 86400 >/dev/null
  done
  running=0
  for _ in $(seq 600); do  # up to 60 s until every workload runs
    running=$("$T" ctl -o json workloads list | python3 -c 'import json,sys; print(sum(w["state"] == "running" for w in json.load(sys.stdin)["workloads"]))')
    [ "$running" = "$TENANTS" ] && break
    sleep 0.1
  done
  [ "$running" = "$TENANTS" ] || { echo "agent_cpu.sh: only $running of $TENANTS workloads run" >&2; tail -5 "$work/agent.out" >&2; exit 1; }
  for i in $(seq "$LOCAL"); do
    TESSERA_RUN_DIR="$node" "$T" run --tenant "local-$i" --gpu $(( i % 8 )) --mem 1GiB --share 10 -- sleep 86400 \
      >>"$work/local.out" 2>&1 &
    local_pids+=($!)
  done
  joined=0
  for _ in $(seq 300); do  # up to 30 s until every local tenant is in the node directory
    joined=$(TESSERA_RUN_DIR="$node" "$T" node status --json - | python3 -c '
import json, sys
print(len({t["name"] for g in json.load(sys.stdin).get("gpus", []) for t in g["tenants"] if t["name"].startswith("local-")}))')
    [ "$joined" = "$LOCAL" ] && break
    sleep 0.1
  done
  [ "$joined" = "$LOCAL" ] || { echo "agent_cpu.sh: only $joined of $LOCAL local tenants joined" >&2; tail -5 "$work/local.out" >&2; exit 1; }
  sleep 5  # the starts settle
  supervisors=$(pgrep -f -- "run --tenant w[0-9]+ .*--exit-file $node/" | tr '\n' ' ')
  a0=$(cpu_s "$agent_pid"); s0=$(cpu_s $supervisors); w0=$(switches $supervisors); t0=$(date +%s.%N)
  sleep "$SECS"
  a1=$(cpu_s "$agent_pid"); s1=$(cpu_s $supervisors); w1=$(switches $supervisors); t1=$(date +%s.%N)
  python3 -c "
a, s, w, t = $a1 - $a0, $s1 - $s0, $w1 - $w0, $t1 - $t0
print('run $r: agent cpu %.2f %% of one core   supervisors (%d) cpu %.2f %% of one core together, %.0f wake-ups/s' % (100 * a / t, $(echo $supervisors | wc -w), 100 * s / t, w / t))
" | tee "$work/run-$r.txt"
  if (( LOCAL > 0 )) && grep -Eq "not metered|usage sample refused" "$work/agent.out"; then
    echo "agent_cpu.sh: the local tenants were not all metered:" >&2; grep -E "not metered|refused" "$work/agent.out" | tail -3 >&2
  fi
  stop_local
  kill "$agent_pid" "$serve_pid"; wait "$agent_pid" "$serve_pid" 2>/dev/null || true
  pkill -f "$node" 2>/dev/null || true
done
echo "medians of $ROUNDS runs ($TENANTS tenants on 8 fake GPUs, $SECS s each; $LOCAL local tenants${meter_flag:+, --meter-local-slots}):"
cat "$work"/run-*.txt | python3 -c '
import re, statistics, sys
text = sys.stdin.read()
agent = [float(x) for x in re.findall(r"agent cpu ([0-9.]+)", text)]
sup = [float(x) for x in re.findall(r"cpu ([0-9.]+) % of one core together", text)]
wakes = [float(x) for x in re.findall(r"together, ([0-9.]+) wake-ups/s", text)]
print("agent %.2f %% of one core   supervisors %.2f %% of one core together, %.0f wake-ups/s" % (statistics.median(agent), statistics.median(sup), statistics.median(wakes)))'
