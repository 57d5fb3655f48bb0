#!/usr/bin/env bash
# Produces the README's performance figures. Usage: bench/run.sh [build-dir]
#  1. tessera_placement_bench: one replay of the default list per policy (1 thread), and one
#     placement decision; 5 repetitions, medians reported.
#  2. tessera_sched_bench: one scheduling cycle at scale and the one-week multi-tenant scenario,
#     pinned to one core.
#  3. tessera_shim_bench: the shim's added cost per launch and per allocation (Direct vs ThroughShim).
#     Also BM_FreeThroughShim[Scrubbed]/BYTES: the cost of scrub-on-free (host memset on the fake).
#  4. tessera_metering_bench: ledger ingest rate and the invoice run (1,000 tenants x 31 days).
#  5. tessera_forecast_bench: the forecaster over 100 and 500 hourly series, and one 90-day forecast.
#  6. The full sweep (17 lists x all policies x 10 seeds) on 2 threads, timed 3 times (median),
#     with peak memory from /usr/bin/time.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=out/bench
mkdir -p "$OUT"

echo "== placement benchmark (median of 5 repetitions) =="
"$BUILD/bench/tessera_placement_bench" --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true --benchmark_out="$OUT/placement_bench.json" \
  --benchmark_out_format=json | grep -E "median|Benchmark|---"

echo "== MIG planner (median of 5 repetitions) =="
"$BUILD/bench/tessera_mig_planner_bench" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  | grep -E "median|Benchmark|---"

echo "== multi-tenant scheduler: one cycle (10k pending, 500 tenants, 2000 GPUs) and the one-week scenario (median of 3) =="
taskset -c 0 "$BUILD/bench/tessera_sched_bench" --benchmark_out="$OUT/sched_bench.json" \
  --benchmark_out_format=json | grep -E "median|Benchmark|---"

echo "== libtessera-shim.so added cost vs the fake driver (median of 5; the difference of each pair) =="
"$BUILD/bench/tessera_shim_bench" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_out="$OUT/shim_bench.json" --benchmark_out_format=json | grep -E "median|Benchmark|---"

echo "== metering: ledger ingest (samples/s, one core) and the invoice run, 1,000 tenants x 31 days (median of 3) =="
taskset -c 0 "$BUILD/bench/tessera_metering_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_out="$OUT/metering_bench.json" --benchmark_out_format=json | grep -E "median|Benchmark|---"

echo "== forecasting: 100 and 500 hourly series (horizon 48 h), one 90-day forecast (median of 3) =="
taskset -c 0 "$BUILD/bench/tessera_forecast_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_out="$OUT/forecast_bench.json" --benchmark_out_format=json | grep -E "median|Benchmark|---"

echo "== full sweep: 17 lists x all policies x 10 seeds, 2 threads (3 runs) =="
times=()
for i in 1 2 3; do
  /usr/bin/time -f "%e %M" -o "$OUT/sweep_time_$i.txt" \
    "$BUILD/tessera" simulate --all-lists --policies all --seeds 42-51 -j 2 --quiet \
    --html "" --json "$OUT/sweep.json" >/dev/null
  read -r secs kib < "$OUT/sweep_time_$i.txt"
  echo "run $i: ${secs} s, peak RSS $((kib / 1024)) MiB"
  times+=("$secs")
done
median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 2p)
echo "median sweep wall time: ${median} s"

echo "== one FGD replay of the default list, whole process (peak memory) =="
/usr/bin/time -f "%e s, peak RSS %M KiB" "$BUILD/tessera" simulate --policies fgd --seeds 42 -j 1 \
  --quiet --html "" --no-reference >/dev/null
