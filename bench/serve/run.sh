#!/usr/bin/env bash
# Benchmarks of the real `tessera serve` on loopback (issue 15's load targets), each on a fresh
# SQLite store in a temporary folder. wrk: 2 threads, 16 connections, SECONDS per run, ROUNDS runs;
# prints every run and the medians.
#   reads    GET /v1/workloads/{id}, and a page of 100 of a tenant with 1,000 workloads
#   submits  POST /v1/workloads, each with its own Idempotency-Key (acknowledged = 201 = durable)
#   placed   submit-to-placed on an idle cluster of 1,000 fake GPUs (125 nodes x 8), 200 submits
#   rss      (RSS_SECONDS > 0 only) RSS growth over mixed load
# Usage: bench/serve/run.sh [BUILD (default build)] [SECONDS (10)] [ROUNDS (3)] [RSS_SECONDS (0)]
set -euo pipefail
B=${1:-build}
SECS=${2:-10}
ROUNDS=${3:-3}
RSS_SECS=${4:-0}
here="$(cd "$(dirname "$0")" && pwd)"
command -v wrk >/dev/null || { echo "run.sh: wrk is not installed (scripts/setup installs it)" >&2; exit 2; }
work=$(mktemp -d)
export TESSERA_BOOTSTRAP_TOKEN=tsr_benchmark_admin_token_0123456789
export TESSERA_BENCH_TOKEN=$TESSERA_BOOTSTRAP_TOKEN
AUTH="Authorization: Bearer $TESSERA_BOOTSTRAP_TOKEN"
pid=
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
start() {  # db -> sets port and pid
  "$B/tessera" serve --db "$work/$1" --listen 127.0.0.1:0 --threads "${SERVE_THREADS:-2}" --rate 1000000000 --burst 1000000000 >"$work/serve.out" 2>&1 &
  pid=$!
  for _ in $(seq 100); do grep -q "listening on" "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
  port=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.out" | head -1 | cut -d: -f3)
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; }
results="$work/results"
record() {  # label wrk-output
  local rps p99 non2xx
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$2")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$2")
  non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$2")
  printf '%-8s %10s req/s  p99 %8s  non-2xx %s\n' "$1" "$rps" "$p99" "${non2xx:-0}"
  echo "$1 $rps $p99" >>"$results"
}
for r in $(seq "$ROUNDS"); do
  start "reads-$r.db"
  python3 "$here/load.py" seed "$port" "$TESSERA_BOOTSTRAP_TOKEN" team-4 1000
  record get "$(wrk -t2 -c16 -d"${SECS}s" --latency -H "$AUTH" "http://127.0.0.1:$port/v1/workloads/500")"
  record page "$(wrk -t2 -c16 -d"${SECS}s" --latency -H "$AUTH" "http://127.0.0.1:$port/v1/workloads?tenant=team-4&limit=100")"
  stop
  start "submits-$r.db"
  curl -s -H "$AUTH" -XPOST "http://127.0.0.1:$port/v1/tenants" -d '{"name":"submits"}' >/dev/null
  record submit "$(wrk -t2 -c16 -d"${SECS}s" --latency -s "$here/submit.lua" "http://127.0.0.1:$port")"
  stop
done
echo "medians of $ROUNDS runs:"
python3 - "$results" <<'PY'
import sys, statistics, collections
def ms(v):
    return float(v[:-2]) if v.endswith("ms") else float(v[:-2]) / 1000 if v.endswith("us") else float(v[:-1]) * 1000
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    label, rps, p99 = line.split()
    runs[label].append((float(rps), ms(p99)))
for label, rs in runs.items():
    print("%-8s %10.0f req/s  p99 %6.2f ms" % (label, statistics.median(r for r, _ in rs), statistics.median(p for _, p in rs)))
PY
start placed.db
python3 "$here/load.py" cluster "$port" "$TESSERA_BOOTSTRAP_TOKEN" 125 8
python3 "$here/load.py" placed "$port" "$TESSERA_BOOTSTRAP_TOKEN" idle 200 20
stop
if [[ "$RSS_SECS" -gt 0 ]]; then
  start rss.db
  python3 "$here/load.py" rss "$pid" "$RSS_SECS" "$port" "$TESSERA_BOOTSTRAP_TOKEN"
  stop
fi
