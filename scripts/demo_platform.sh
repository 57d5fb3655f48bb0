#!/usr/bin/env bash
# `make demo`: the platform on one machine, on the embedded default and nothing else.
#   tessera serve (SQLite in a temporary folder) + two node agents with fake GPUs
#   (n-h100: 2 x H100-80GB in MIG mode, its agent cutting them as asked; n-a100: 4 x A100-40GB), tenants from
#   data/examples/demo-tenants.json, a mix of work through `tessera ctl` and `tessera run --server`,
#   commands run for real under the shim against the in-tree fake driver.
# It prints placements, the MIG layout the agent applied for the MIG workload, one preemption and why, a memory limit refusing an allocation, the
# node's view, a few /metrics lines, and the dashboard's URLs with a token; run in a terminal it
# keeps serving until Enter is pressed (for the dashboard), then stops everything it started.
# Usage: scripts/demo_platform.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
bin="$build/tessera"
probe="$build/tests/tessera_shim_probe"
for f in "$bin" "$probe" "$build/tests/fake_nvml/libnvidia-ml.so.1" "$build/libtessera-shim.so"; do
  [[ -e "$f" ]] || { echo "demo: $f is missing (run make build)" >&2; exit 1; }
done
work="$(mktemp -d "${TMPDIR:-/tmp}/tessera-demo.XXXXXX")"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  # Workloads outlive their agents by design; the demo's own end here.
  pkill -f "$work/" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

export TESSERA_BOOTSTRAP_TOKEN="demo-admin-token-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
cat > "$work/serve.yaml" <<EOF
node_timeout: 10
scheduler:
  min_runtime_s: 0
EOF
step "tessera serve: SQLite at $work/tessera.db"
"$bin" serve --config "$work/serve.yaml" --db "sqlite:$work/tessera.db" --listen 127.0.0.1:0 >"$work/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q "http://" "$work/serve.log" 2>/dev/null && break; sleep 0.1; done
url="$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.log" | head -1)"
[[ -n "$url" ]] || { cat "$work/serve.log"; exit 1; }
echo "listening on $url"
export TESSERA_SERVER="$url" TESSERA_TOKEN="$TESSERA_BOOTSTRAP_TOKEN"
ctl() { "$bin" ctl "$@"; }

step "tenants (data/examples/demo-tenants.json)"
python3 - "$root/data/examples/demo-tenants.json" > "$work/tenants.txt" <<'EOF'
import json, sys
for t in json.load(open(sys.argv[1]))["tenants"]:
    print(t["name"], json.dumps(t.get("quota", {})))
EOF
while read -r name quota; do ctl tenants create "$name" --quota "$quota" >/dev/null; done < "$work/tenants.txt"
ctl tenants list

step "two node agents with fake GPUs"
ctl -o json tokens create --role node-agent | json 'd["token"]' > "$work/agent.token"
export TESSERA_FAKE_NVML_LIBRARY="$build/tests/fake_nvml/libnvidia-ml.so.1"
export TESSERA_FAKE_CUDA_MEM_BYTES=$((40 << 30))
# --tenant-uids off: the demo's mktemp folder (0700) is closed to the tenants' own uids (as root).
"$bin" agent --server "$url" --token-file "$work/agent.token" --name n-h100 --run-dir "$work/n-h100" \
  --fake-gpus H100-80GB:2:mig --allow-mig-reconfigure \
  --cpu-milli 64000 --memory-mib 524288 --interval-ms 250 --usage-interval 2 --tenant-uids off >"$work/agent-h100.log" 2>&1 &
pids+=($!)
"$bin" agent --server "$url" --token-file "$work/agent.token" --name n-a100 --run-dir "$work/n-a100" \
  --fake-gpus A100-40GB:4 --cpu-milli 64000 --memory-mib 524288 --interval-ms 250 --usage-interval 2 --tenant-uids off >"$work/agent-a100.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ "$(ctl -o json nodes list | json 'len(d["nodes"])')" == 2 ]] && break; sleep 0.1; done
ctl nodes list

wait_state() {  # wait_state ID STATE (up to 90 s)
  local until=$((SECONDS + 90))
  while (( SECONDS < until )); do
    [[ "$(ctl -o json workloads get "$1" | json 'd["state"]')" == "$2" ]] && return 0
    sleep 0.1
  done
  echo "demo: workload $1 did not become $2" >&2
  ctl workloads list >&2
  ctl nodes list >&2
  tail -n 5 "$work"/agent-*.log >&2
  return 1
}
submit() { ctl -o json workloads submit --file /dev/stdin | json 'd["id"]'; }

step "work: a Guaranteed MIG inference service, two Burstable fractional trainings, BestEffort batch"
inference=$(submit <<EOF
{"tenant": "prod", "name": "inference", "gpus": 1, "qos": "Guaranteed", "mig_profile": "3g.40gb", "model": "H100-80GB"}
EOF
)
train_a=$(submit <<EOF
{"tenant": "research", "name": "train-a", "gpus": 1, "qos": "Burstable", "gpu_milli": 500, "gpu_mem_mib": 4096,
 "model": "A100-40GB", "command": ["$probe", "init", "alloc:mem:1073741824", "launch:1000", "meminfo"]}
EOF
)
train_b=$(submit <<EOF
{"tenant": "research", "name": "train-b", "gpus": 1, "qos": "Burstable", "gpu_milli": 500, "gpu_mem_mib": 256,
 "model": "A100-40GB", "command": ["$probe", "init", "fill:mem:16777216"]}
EOF
)
batch=()
for i in 1 2 3 4; do
  batch+=("$(submit <<EOF
{"tenant": "batch", "name": "batch-$i", "gpus": 1, "qos": "BestEffort", "model": "A100-40GB"}
EOF
)")
done
wait_state "$inference" running
wait_state "$train_a" completed
wait_state "$train_b" completed
for id in "${batch[@]}"; do wait_state "$id" running; done  # the four A100s are taken
ctl workloads list

step "the MIG layout n-h100's agent applied for the inference service (tessera agent --allow-mig-reconfigure)"
for _ in $(seq 100); do grep -q "MIG layout" "$work/agent-h100.log" && break; sleep 0.1; done
grep -h "MIG layout" "$work/agent-h100.log" | sed 's/^tessera agent: /n-h100: /'

step "a memory limit refusing an allocation (train-b: limit 256 MiB, 16 MiB blocks until refused)"
cat "$work/n-a100/agent/w$train_b.log"
echo "train-a (limit 4 GiB) allocated 1 GiB and launched 1,000 kernels:"
cat "$work/n-a100/agent/w$train_a.log"

step "prod needs a whole A100 now (Guaranteed, within its guarantee): a borrower is preempted"
urgent=$(submit <<EOF
{"tenant": "prod", "name": "urgent", "gpus": 1, "qos": "Guaranteed", "model": "A100-40GB"}
EOF
)
wait_state "$urgent" running
for id in "${batch[@]}"; do
  ctl -o json workloads get "$id" | python3 -c '
import json, sys
w = json.load(sys.stdin)
for e in w.get("events", []):
    if e["kind"] == "preempted":
        print("workload %d (%s, %s) preempted: %s" % (w["id"], w["tenant"], w.get("name", ""), e["detail"]))'
done
ctl workloads get "$urgent"

step "tessera run --server: a command placed by the control plane, run by the agent, limit 64 MiB"
TESSERA_RUN_DIR="$work/n-a100" "$bin" run --server "$url" --tenant research --mem 64MiB --share 250 \
  --model A100-40GB -- "$probe" init alloc:mem:67108864 alloc:mem:1 || true

step "the A100 node as the shim sees it (tessera node status)"
TESSERA_RUN_DIR="$work/n-a100" "$bin" node status

step "usage per tenant, as the agents reported it (tessera ctl usage; GPU-seconds)"
sleep 2.5  # the agents report every 2 s here (default 10 s)
ctl usage | sed '/^$/q'

step "the event stream (tessera ctl events --after 0): every placement, preemption and end as it happened"
timeout 3 "$bin" ctl events --after 0 || true  # a stream does not end: stopped after 3 s

step "a few /metrics lines"
python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())" "$url/metrics" |
  grep -E '^tessera_(tenant_allocated_gpu_milli|preemptions_total|workload_starts_total|nodes)' | head -14 || true

step "the dashboard (docs/dashboard.md)"
if grep -q "dashboard at" "$work/serve.log"; then
  viewer="$(ctl -o json tokens create --role viewer | json 'd["token"]')"
  research="$(ctl -o json tokens create --role tenant-user --tenant research | json 'd["token"]')"
  echo "the whole cluster, read only (a viewer token): $url/ui/#token=$viewer"
  echo "tenant research (a tenant-user token: its subtree only): $url/ui/#token=$research"
  echo "admin (this demo's throwaway bootstrap token, also the audit log): $url/ui/#token=$TESSERA_BOOTSTRAP_TOKEN"
  if [[ -t 0 ]]; then
    read -r -p "The demo keeps serving: open a URL above, then press Enter to stop everything. " _ || true
  fi
else
  echo "this build has no dashboard (built without npm or with -DTESSERA_UI=OFF; docs/dashboard.md)"
fi

step "done: everything started here is stopped"
