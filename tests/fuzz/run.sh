#!/usr/bin/env bash
# Builds the libFuzzer targets with clang + ASan/UBSan and fuzzes the parsers for a bounded time
# each on a scratch copy of their seed corpus (the checked-in corpus is never modified), JOBS of
# them at a time (each fuzzer is one process on one core).
#
#   tests/fuzz/run.sh                # build, then 20 seconds per fuzzer
#   tests/fuzz/run.sh 300            # 5 minutes per fuzzer
#   tests/fuzz/run.sh --build-only   # configure and build only (`make test` times the two apart)
#   tests/fuzz/run.sh --run-only 15  # run what is built
#
# Environment: BUILD_DIR (default <repo>/build-fuzz), JOBS (fuzzers at a time and build
# parallelism, default 2), CXX_COMPILER (default clang++), WERROR (ON: warnings are errors, as in
# CI; default OFF), FUZZ_OPT (default -O0: clang's -O1 under ASan+UBSan+coverage doubles this
# tree's compile time, which a 15-second run in CI does not win back; for a long campaign use
# FUZZ_OPT=-O1 BUILD_DIR=build-fuzz-o1: more executions per second). The tree is
# configured by scripts/configure_tree (Ninja, ccache, lld).
# Exit status: 0 if no fuzzer found anything, non-zero if one crashed (the reproducer is copied
# to $BUILD_DIR/fuzz-artifacts/ and its path printed, with the end of that fuzzer's log) or the
# build failed.
# Reproduce with: $BUILD_DIR/tests/fuzz/csv_fuzzer <reproducer file>
set -euo pipefail

do_build=1 do_run=1
case "${1:-}" in
  --build-only) do_run=0; shift ;;
  --run-only) do_build=0; shift ;;
esac
seconds="${1:-20}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -eq 0 ]]; then
  echo "usage: $0 [--build-only | --run-only] [seconds > 0]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD_DIR:-$root/build-fuzz}"
jobs="${JOBS:-2}"

fuzzers=(csv_fuzzer:corpus mig_layout_fuzzer:corpus_mig catalog_file_fuzzer:corpus_catalog
  quota_file_fuzzer:corpus_quota mig_plan_json_fuzzer:corpus_plan http_request_fuzzer:corpus_http
  anomaly_series_fuzzer:corpus_anomaly price_plan_fuzzer:corpus_price_plan
  ledger_file_fuzzer:corpus_ledger forecast_input_fuzzer:corpus_forecast sacct_fuzzer:corpus_sacct
  gpu_table_fuzzer:corpus_gpu_table mountinfo_fuzzer:corpus_mountinfo maps_fuzzer:corpus_maps)

if [[ $do_build -eq 1 ]]; then
  "$root/scripts/configure_tree" "$build" \
    -DCMAKE_CXX_COMPILER="${CXX_COMPILER:-clang++}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="${FUZZ_OPT:--O0} -g1 -DNDEBUG" \
    -DTESSERA_SANITIZE=address,undefined \
    -DTESSERA_BUILD_FUZZ=ON -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF \
    -DTESSERA_WERROR="${WERROR:-OFF}"
  cmake --build "$build" -j "$jobs" --target "${fuzzers[@]%%:*}"
fi
[[ $do_run -eq 1 ]] || exit 0

work="$(mktemp -d "${TMPDIR:-/tmp}/tessera-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

# fuzz NAME CORPUS_DIR: runs one fuzzer for $seconds on a scratch copy of its seed corpus, its
# output in $work/NAME.log; on a finding, keeps the reproducers and prints the log's end.
fuzz() {
  local name="$1" corpus="$2" rc=0
  cp -r "$root/tests/fuzz/$corpus" "$work/$name-corpus"
  mkdir -p "$work/artifacts-$name"
  "$build/tests/fuzz/$name" \
    -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts-$name/" "$work/$name-corpus" >"$work/$name.log" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]] || [[ -n "$(ls -A "$work/artifacts-$name")" ]]; then
    mkdir -p "$build/fuzz-artifacts"
    cp "$work/artifacts-$name"/* "$build/fuzz-artifacts/" 2>/dev/null || true
    tail -n 60 "$work/$name.log" >&2
    echo "$name FAILED (exit $rc); reproducers in $build/fuzz-artifacts/:" >&2
    ls -l "$build/fuzz-artifacts/" >&2 || true
    return $(( rc == 0 ? 1 : rc ))
  fi
  echo "$name: no crash in ${seconds}s ($(ls "$work/$name-corpus" | wc -l) corpus entries," \
    "$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$name.log" | grep -o '[0-9]*$' || echo '?') runs)"
}

# JOBS fuzzers at a time; the first failure is reported after the running ones finish.
failed=0
running=0
for entry in "${fuzzers[@]}"; do
  if [[ $running -ge $jobs ]]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  fuzz "${entry%%:*}" "${entry#*:}" &
  running=$((running + 1))
done
while [[ $running -gt 0 ]]; do
  wait -n || failed=1
  running=$((running - 1))
done
exit "$failed"
