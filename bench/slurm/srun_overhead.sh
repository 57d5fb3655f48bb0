#!/usr/bin/env bash
# What spank_tessera.so adds to a Slurm step: `srun --gres=gpu:1 true` N times (default 50) with
# the plugin (its default limits: the whole GPU; the task waits for the arbiter's admission) and N
# times without it (an empty plugstack.conf: srun and slurmstepd read it at every launch), on the
# single-node Slurm of tests/integrations/slurm_cluster.sh. The runs are interleaved in pairs
# (with/without, then without/with, ...) so that a change of the machine's load during the run
# falls on both sides alike; on a shared machine two blocks of 50 run minutes apart differed by
# more than the plugin's cost. Prints the median of each side in ms, their difference, and the
# median of the N paired differences (each pair's with minus without). A third run per pair,
# with the plugin and --gpu-isolation=none (loaded in srun and slurmstepd, joins nothing), tells
# the cost of loading the plugin from that of the task's join, admission and shim.
#
# Worked example (N = 4, ms): with 300 310 305 320, without 290 295 300 290 -> medians 307.5 and
# 292.5, difference 15.0; pair differences 10 15 5 30 -> median 12.5.
#
# Usage: bench/slurm/srun_overhead.sh [BUILD_DIR] [N]   (root; exit 77 without Slurm)
set -uo pipefail
build="$(cd "${1:-build}" && pwd)"
n="${2:-50}"
source "$(dirname "${BASH_SOURCE[0]}")/../../tests/integrations/slurm_cluster.sh"
slurm_cluster_up

cp "$T/plugstack.conf" "$T/plugstack.with"
: > "$T/plugstack.without"
use() { cp "$T/plugstack.$1" "$T/plugstack.conf"; }

# Wall time of one `srun --gres=gpu:1 [OPTION] true`, in µs.
once_us() {
  local t0 t1
  t0=$(date +%s%N)
  srun --gres=gpu:1 "$@" true > /dev/null 2>&1 || { echo "FAIL: srun --gres=gpu:1 $* true" >&2; dump_logs >&2; exit 1; }
  t1=$(date +%s%N)
  echo $(( (t1 - t0) / 1000 ))
}
median_ms() { sort -n | awk '{a[NR]=$1} END {m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2; printf "%.1f\n", m / 1000}'; }

# The switch works: with the plugin the task is a tenant, without it the task is not.
tenant() { srun --gres=gpu:1 sh -c 'echo "tenant=$TESSERA_TENANT"' 2>&1; }
use with
out="$(tenant)"
# (srun may add "job N queued and waiting for resources" lines: look for the task's own line.)
grep -q '^tenant=default\.[0-9]*$' <<< "$out" || { echo "FAIL: with the plugin the task is no tenant: $out"; dump_logs; exit 1; }
use without
out="$(tenant)"
grep -q '^tenant=$' <<< "$out" || { echo "FAIL: without the plugin the task is a tenant: $out"; exit 1; }

with=() without=() diffs=() loaded=()
for i in $(seq 1 "$n"); do
  if (( i % 2 )); then
    use with; a=$(once_us) || exit 1; c=$(once_us --gpu-isolation=none) || exit 1
    use without; b=$(once_us) || exit 1
  else
    use without; b=$(once_us) || exit 1
    use with; c=$(once_us --gpu-isolation=none) || exit 1; a=$(once_us) || exit 1
  fi
  with+=("$a"); without+=("$b"); loaded+=("$c"); diffs+=($((a - b)))
done
m_with=$(printf '%s\n' "${with[@]}" | median_ms)
m_without=$(printf '%s\n' "${without[@]}" | median_ms)
m_diff=$(printf '%s\n' "${diffs[@]}" | median_ms)
m_loaded=$(printf '%s\n' "${loaded[@]}" | median_ms)
echo "srun --gres=gpu:1 true, median of $n (interleaved): without plugin ${m_without} ms, with ${m_with} ms" \
  "(with, --gpu-isolation=none: ${m_loaded} ms)"
awk -v a="$m_with" -v b="$m_without" -v d="$m_diff" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
  'BEGIN {printf "added by spank_tessera.so: %.1f ms (median of the %s pair differences: %.1f ms; load average %s)\n", a - b, "'"$n"'", d, l}'
