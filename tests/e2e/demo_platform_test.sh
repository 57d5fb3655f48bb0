#!/usr/bin/env bash
# `make demo` as a test: runs scripts/demo_platform.sh on the build folder and checks that it
# showed what it promises (placements, the MIG layout the agent applied, the limit refusing an allocation, one preemption and why,
# `tessera run --server` passing the command's exit code, the node view, /metrics), and that it
# stopped everything it started.
# Usage: tests/e2e/demo_platform_test.sh BUILD_DIR
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$1"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
export TMPDIR="$(mktemp -d)"
rc=0
timeout 300 bash "$root/scripts/demo_platform.sh" "$build" >"$out" 2>&1 || rc=$?
cat "$out"
fail() { echo "demo_platform_test: $*" >&2; exit 1; }
[[ $rc -eq 0 ]] || fail "the demo exited $rc"
expect() { grep -qE -- "$1" "$out" || fail "the demo did not print /$1/"; }
expect '^1 +inference +prod +running +Guaranteed +mig:3g\.40gb +n-h100'
expect "^n-h100: GPU [01]: MIG layout '3g\\.40gb@[0-9]' applied \\(was '', 1 step\\)"   # the agent cut the GPU
expect '^2 +train-a +research +completed +Burstable +fraction\(500,4096MiB\) +n-a100'
expect '^[0-9]+ +batch-[0-9] +batch +running +BestEffort +exclusive +n-a100:\[3\]'  # all four A100s in use
expect 'fill family=mem count=16 rc=2'                                   # 256 MiB limit: 16 x 16 MiB, then refused
expect 'preempted: reclaim: for workload'
expect 'alloc family=mem rc=0 id=0'
expect 'alloc family=mem rc=2 id=1'                                      # 64 MiB limit + 1 byte refused
expect 'completed \(exit code 0\)'
expect '^tessera_nodes\{state="ready"\} 2'
expect '^TENANT +GPU_S_ALLOCATED +GPU_S_USED +KERNEL_LAUNCHES +SAMPLES'
expect '^research +[1-9][0-9]* +[0-9]+ +[0-9]+ +[1-9]'                # usage samples reached serve
expect '^[0-9]+ +[0-9T:-]+Z +prod +1 +placed +n-h100'                  # the event stream's history
expect '^[0-9]+ +[0-9T:-]+Z +[a-z-]+ +[0-9]+ +preempted +reclaim'
if [[ -f "$build/ui/index.html" ]]; then                               # the dashboard, when built
  expect '^the whole cluster, read only \(a viewer token\): http://127\.0\.0\.1:[0-9]+/ui/#token=tsr_'
  expect '^admin \(this demo.s throwaway bootstrap token, also the audit log\): http://127\.0\.0\.1:[0-9]+/ui/#token=demo-admin-token-'
  expect '^tenant research \(a tenant-user token: its subtree only\): http://127\.0\.0\.1:[0-9]+/ui/#token=tsr_'
fi
# Nothing it started is left: no process runs from the demo's temporary folder.
sleep 1
if pgrep -f "$TMPDIR/tessera-demo" >/dev/null; then
  pgrep -af "$TMPDIR/tessera-demo" >&2
  fail "processes of the demo are still running"
fi
[[ -z "$(ls -A "$TMPDIR")" ]] || fail "the demo left files in $TMPDIR: $(ls "$TMPDIR")"
rmdir "$TMPDIR"
echo "demo_platform_test: ok"
