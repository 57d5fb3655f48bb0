#!/usr/bin/env bash
# tests/gpu/run.sh [BUILD_DIR] [OUT_DIR]
#
# Read-only check of tessera's NVML adapter on a machine with real NVIDIA GPUs: lists the GPUs
# and their MIG geometry with nvidia-smi and with tessera_nvml_probe (the adapter), and writes
# OUT_DIR/gpu-results.md comparing the two (and, where Python's nvidia-ml-py is installed, a
# field-by-field cross-check against NVIDIA's own bindings).
#
# It never changes a GPU: only listings (nvidia-smi -L, --query-gpu, mig -lgip, mig -lgipp)
# and the probe, which creates and destroys nothing and cannot change the MIG mode.
#
#   BUILD_DIR  a configured tessera build holding tests/tessera_nvml_probe: nothing is built.
#              Empty or absent: only the probe is compiled (c++ -std=c++20, three sources, no
#              third-party libraries), into a temporary folder.
#   OUT_DIR    where outputs go (default ./gpu-results).
#   TESSERA_NVML_LIBRARY (environment), if set, is passed to the probe as --library (to try
#   the script against the fake NVML of the test suite).
#
# Each step may fail (no GPU, no nvidia-smi, MIG off, no permission); the script records the
# failure and goes on. Exit code: 0 when the probe ran and NVML answered, 1 otherwise.
set -u

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${1:-}"
OUT_DIR="${2:-gpu-results}"
mkdir -p "$OUT_DIR" || { echo "run.sh: cannot create $OUT_DIR" >&2; exit 1; }
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
LOG="$OUT_DIR/run.log"
: >"$LOG"

log() { echo "$*" | tee -a "$LOG"; }

# run_listing FILE CMD...: runs a read-only listing into OUT_DIR/FILE, logging its exit code.
run_listing() {
  local file="$1"
  shift
  local rc=0
  if command -v timeout >/dev/null 2>&1; then
    timeout 120 "$@" >"$OUT_DIR/$file" 2>&1 || rc=$?
  else
    "$@" >"$OUT_DIR/$file" 2>&1 || rc=$?
  fi
  log "$* -> exit $rc ($file)"
  return 0
}

# 1. The probe.
PROBE=""
if [ -n "$BUILD_DIR" ]; then
  for candidate in "$BUILD_DIR/tests/tessera_nvml_probe" "$BUILD_DIR/tessera_nvml_probe"; do
    if [ -x "$candidate" ]; then PROBE="$candidate"; break; fi
  done
  [ -n "$PROBE" ] || log "no tessera_nvml_probe under $BUILD_DIR (build its tessera_nvml_probe)"
else
  TMP_BUILD="$(mktemp -d)"
  trap 'rm -rf "$TMP_BUILD"' EXIT
  if ${CXX:-c++} -std=c++20 -O2 -Wall -Wextra -I"$REPO/include" -I"$REPO" \
      "$REPO/tests/gpu/nvml_probe.cc" "$REPO/src/enforce/nvml_loader.cc" \
      "$REPO/src/core/status.cc" -ldl -o "$TMP_BUILD/tessera_nvml_probe" >>"$LOG" 2>&1; then
    PROBE="$TMP_BUILD/tessera_nvml_probe"
    log "compiled the probe with ${CXX:-c++}"
  else
    log "compiling the probe failed (see above)"
  fi
fi

# 2. nvidia-smi's read-only listings.
if command -v nvidia-smi >/dev/null 2>&1; then
  run_listing nvidia-smi-L.txt nvidia-smi -L
  run_listing nvidia-smi-query.csv nvidia-smi \
    --query-gpu=name,memory.total,mig.mode.current,driver_version --format=csv
  run_listing mig-lgip.txt nvidia-smi mig -lgip
  run_listing mig-lgipp.txt nvidia-smi mig -lgipp
else
  log "nvidia-smi not found"
fi

# 3. The adapter's view.
PROBE_RC=1
if [ -n "$PROBE" ]; then
  PROBE_RC=0
  PROBE_ARGS=()
  [ -n "${TESSERA_NVML_LIBRARY:-}" ] && PROBE_ARGS=(--library "$TESSERA_NVML_LIBRARY")
  "$PROBE" "${PROBE_ARGS[@]}" >"$OUT_DIR/nvml-probe.json" 2>>"$LOG" || PROBE_RC=$?
  log "tessera_nvml_probe -> exit $PROBE_RC (nvml-probe.json)"
fi

# 4. The summary.
if command -v python3 >/dev/null 2>&1 && \
    python3 "$REPO/tests/gpu/summarize.py" "$OUT_DIR" >>"$LOG" 2>&1; then
  log "wrote gpu-results.md"
else
  log "summarize.py failed or python3 is missing: writing the raw outputs instead"
  {
    echo "# tessera GPU check (raw)"
    for f in nvidia-smi-query.csv mig-lgip.txt nvml-probe.json run.log; do
      echo
      echo "## $f"
      echo '```'
      cat "$OUT_DIR/$f" 2>/dev/null || echo "(missing)"
      echo '```'
    done
  } >"$OUT_DIR/gpu-results.md"
fi

[ "$PROBE_RC" -eq 0 ] && exit 0 || exit 1
