#!/usr/bin/env bash
# The control plane under a fleet of node agents (issue 32, "Cheap at scale"): a fresh SQLite
# store, `tessera serve`, and bench/serve/fleet_load simulating AGENTS agents of 8 fake GPUs
# (heartbeat every second, the desired state when the heartbeat's answer says it changed or
# every 30 s, usage every 10 s, a node-bound token each) for SECONDS; ROUNDS runs, then the
# medians of the heartbeat p99 and of the daemon's CPU. SERVE_THREADS: serve's --threads (2);
# FLEET_DESIRED=always: GET desired every round, as agents did before (issue 32).
# Targets: serve <= 20 % of one core, heartbeat p99 <= 50 ms at 1,000 agents.
# Usage: bench/serve/fleet.sh [BUILD (build)] [AGENTS (1000)] [SECONDS (60)] [ROUNDS (3)]
set -euo pipefail
B=${1:-build}
AGENTS=${2:-1000}
SECS=${3:-60}
ROUNDS=${4:-3}
load="$B/bench/serve/fleet_load"
[ -x "$load" ] || { echo "fleet.sh: $load is not built (ninja -C $B tessera_fleet_load)" >&2; exit 2; }
work=$(mktemp -d)
export TESSERA_BOOTSTRAP_TOKEN=tsr_benchmark_admin_token_0123456789
pid=
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
for r in $(seq "$ROUNDS"); do
  # The node timeout is the default's; --rate/--burst are per token (each node's own bucket).
  "$B/tessera" serve --db "$work/fleet-$r.db" --listen 127.0.0.1:0 --threads "${SERVE_THREADS:-2}" >"$work/serve.out" 2>&1 &
  pid=$!
  for _ in $(seq 100); do grep -q "listening on" "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
  port=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.out" | head -1 | cut -d: -f3)
  "$load" --port "$port" --token "$TESSERA_BOOTSTRAP_TOKEN" --agents "$AGENTS" --seconds "$SECS" --serve-pid "$pid" ${FLEET_DESIRED:+--desired "$FLEET_DESIRED"} \
    | tee "$work/run-$r.txt"
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
echo "medians of $ROUNDS runs ($AGENTS agents, $SECS s each):"
cat "$work"/run-*.txt | python3 -c '
import re, statistics, sys
text = sys.stdin.read()
p99 = [float(x) for x in re.findall(r"p99 ([0-9.]+)", text)]
cpu = [float(x) for x in re.findall(r"serve cpu ([0-9.]+)", text)]
print("heartbeat p99 %.2f ms   serve cpu %.1f %% of one core" % (statistics.median(p99), statistics.median(cpu)))'
