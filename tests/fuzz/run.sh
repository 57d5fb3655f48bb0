#!/usr/bin/env bash
# Builds the libFuzzer targets with clang + ASan/UBSan and fuzzes the trace readers for a
# bounded time on a scratch copy of the seed corpus (the checked-in corpus is never modified).
#
#   tests/fuzz/run.sh            # 20 seconds per fuzzer
#   tests/fuzz/run.sh 300        # 5 minutes
#
# Environment: BUILD_DIR (default <repo>/build-fuzz), JOBS (build parallelism, default 2),
# CXX_COMPILER (default clang++), WERROR (ON: warnings are errors, as in CI; default OFF).
# Exit status: 0 if the fuzzer found nothing, non-zero if it
# crashed (the reproducer is copied to $BUILD_DIR/fuzz-artifacts/ and its path printed) or the
# build failed. Reproduce with: $BUILD_DIR/tests/fuzz/csv_fuzzer <reproducer file>
set -euo pipefail

seconds="${1:-20}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -eq 0 ]]; then
  echo "usage: $0 [seconds > 0]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD_DIR:-$root/build-fuzz}"
jobs="${JOBS:-2}"

cmake -S "$root" -B "$build" \
  -DCMAKE_CXX_COMPILER="${CXX_COMPILER:-clang++}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTESSERA_SANITIZE=address,undefined \
  -DTESSERA_BUILD_FUZZ=ON -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF \
  -DTESSERA_WERROR="${WERROR:-OFF}" >/dev/null
cmake --build "$build" -j "$jobs" --target csv_fuzzer mig_layout_fuzzer catalog_file_fuzzer quota_file_fuzzer mig_plan_json_fuzzer http_request_fuzzer anomaly_series_fuzzer price_plan_fuzzer ledger_file_fuzzer forecast_input_fuzzer

work="$(mktemp -d "${TMPDIR:-/tmp}/tessera-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

# fuzz NAME CORPUS_DIR: runs one fuzzer for $seconds on a scratch copy of its seed corpus.
fuzz() {
  local name="$1" corpus="$2" rc=0
  cp -r "$root/tests/fuzz/$corpus" "$work/$corpus"
  mkdir -p "$work/artifacts-$name"
  "$build/tests/fuzz/$name" \
    -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts-$name/" "$work/$corpus" || rc=$?
  if [[ $rc -ne 0 ]] || [[ -n "$(ls -A "$work/artifacts-$name")" ]]; then
    mkdir -p "$build/fuzz-artifacts"
    cp "$work/artifacts-$name"/* "$build/fuzz-artifacts/" 2>/dev/null || true
    echo "$name FAILED (exit $rc); reproducers in $build/fuzz-artifacts/:" >&2
    ls -l "$build/fuzz-artifacts/" >&2 || true
    exit $(( rc == 0 ? 1 : rc ))
  fi
  echo "$name: no crash in ${seconds}s ($(ls "$work/$corpus" | wc -l) corpus entries)"
}

fuzz csv_fuzzer corpus
fuzz mig_layout_fuzzer corpus_mig
fuzz catalog_file_fuzzer corpus_catalog
fuzz quota_file_fuzzer corpus_quota
fuzz mig_plan_json_fuzzer corpus_plan
fuzz http_request_fuzzer corpus_http
fuzz anomaly_series_fuzzer corpus_anomaly
fuzz price_plan_fuzzer corpus_price_plan
fuzz ledger_file_fuzzer corpus_ledger
fuzz forecast_input_fuzzer corpus_forecast
