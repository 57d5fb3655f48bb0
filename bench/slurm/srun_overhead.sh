#!/usr/bin/env bash
# What spank_tessera.so adds to a Slurm step: `srun --gres=gpu:1 true` N times (default 50) on the
# single-node Slurm of tests/integrations/slurm_cluster.sh, with the plugin (its default limits:
# the whole GPU; the task waits for the arbiter's admission) and without it (an empty
# plugstack.conf: Slurm re-reads it at every launch). Prints each median in ms and the difference.
# Usage: bench/slurm/srun_overhead.sh [BUILD_DIR] [N]   (root; exit 77 without Slurm)
set -uo pipefail
build="$(cd "${1:-build}" && pwd)"
n="${2:-50}"
source "$(dirname "${BASH_SOURCE[0]}")/../../tests/integrations/slurm_cluster.sh"
slurm_cluster_up

# Median wall time of N runs of "$@", in ms.
median_ms() {
  local times=()
  for _ in $(seq 1 "$n"); do
    local t0 t1
    t0=$(date +%s%N)
    "$@" > /dev/null 2>&1 || { echo "FAIL: $*" >&2; return 1; }
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2; printf "%.1f\n", m / 1000}'
}

srun --gres=gpu:1 true > /dev/null 2>&1  # warm-up (first step of the node)
with=$(median_ms srun --gres=gpu:1 true) || exit 1
cp "$T/plugstack.conf" "$T/plugstack.with"
: > "$T/plugstack.conf"
without=$(median_ms srun --gres=gpu:1 true) || exit 1
cp "$T/plugstack.with" "$T/plugstack.conf"
with_again=$(median_ms srun --gres=gpu:1 true) || exit 1
echo "srun --gres=gpu:1 true, median of $n: without plugin ${without} ms, with ${with} ms (again: ${with_again} ms)"
awk -v a="$with" -v b="$with_again" -v w="$without" 'BEGIN {printf "added by spank_tessera.so: %.1f ms\n", (a < b ? a : b) - w}'
