#!/usr/bin/env bash
# Measures the two HTTP candidates (docs/decisions/0003-http-library.md) under the control
# plane's read load: wrk on loopback, 16 connections, 2 wrk threads, GET of one workload and of
# a page of 100, ROUNDS rounds alternating the candidates; prints req/s and p99 per run and the
# medians. Usage: bench/http/compare.sh [DIR of the two servers (default build/bench/http)] [SECONDS] [ROUNDS]
set -euo pipefail
B=${1:-build/bench/http}
SECS=${2:-10}
ROUNDS=${3:-3}
TOKEN="Authorization: Bearer tsr_benchmark_token_0123456789abcdef"
command -v wrk >/dev/null || { echo "compare.sh: wrk is not installed (scripts/setup installs it)" >&2; exit 2; }
results=$(mktemp)
trap 'rm -f "$results"; kill $(jobs -p) 2>/dev/null || true' EXIT
run() {  # name server threads path label
  local port=$((20000 + RANDOM % 20000))
  "$B/$2" "$port" "$3" >/dev/null &
  local pid=$!
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
  local out
  out=$(wrk -t2 -c16 -d"${SECS}s" --latency -H "$TOKEN" "http://127.0.0.1:$port$4")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  local rps p99
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  local errs
  errs=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
  printf '%-10s %-5s %10s req/s  p99 %8s  non-2xx %s\n' "$1" "$5" "$rps" "$p99" "${errs:-0}"
  echo "$1 $5 $rps $p99" >>"$results"
}
for r in $(seq "$ROUNDS"); do
  for path in /v1/workloads/4711 "/v1/workloads?tenant=team-4&limit=100"; do
    label=get; [[ $path == *limit* ]] && label=page
    run httplib-32 httplib_server 32 "$path" $label
    run beast-2 beast_server 2 "$path" $label
    run beast-4 beast_server 4 "$path" $label
  done
done
# The same GET while 100 other clients hold idle keep-alive connections (node agents between
# heartbeats, event-stream subscribers): how long those 100 took to be answered, and the p99.
for cand in "httplib-32 httplib_server 32" "beast-2 beast_server 2"; do
  set -- $cand
  port=$((20000 + RANDOM % 20000))
  "$B/$2" "$port" "$3" >/dev/null &
  pid=$!
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
  python3 "$(dirname "$0")/idle_clients.py" "$port" 100 $((SECS + 4)) >"$results.idle" &
  ipid=$!
  sleep 2
  out=$(wrk -t2 -c16 -d"${SECS}s" --latency -H "$TOKEN" "http://127.0.0.1:$port/v1/workloads/4711")
  wait "$ipid" || true
  kill "$pid"; wait "$pid" 2>/dev/null || true
  printf '%-10s idle+get %10s req/s  p99 %8s  timeouts %s | idle clients: %s\n' "$1" \
    "$(awk '/Requests\/sec/ {print $2}' <<<"$out")" "$(awk '$1 == "99%" {print $2}' <<<"$out")" \
    "$(awk '/timeout/ {print $NF}' <<<"$out")" "$(cat "$results.idle")"
  rm -f "$results.idle"
done
echo "medians of $ROUNDS runs:"
python3 - "$results" <<'PY'
import sys, statistics, collections
def ms(v):
    return float(v[:-2]) if v.endswith('ms') else float(v[:-2]) / 1000 if v.endswith('us') else float(v[:-1]) * 1000
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, label, rps, p99 = line.split()
    runs[(name, label)].append((float(rps), ms(p99)))
for (name, label), v in sorted(runs.items()):
    print(f"{name:10} {label:5} {statistics.median(r for r, _ in v):10.0f} req/s  p99 {statistics.median(p for _, p in v):7.2f} ms")
PY
