#!/usr/bin/env bash
# tests/gpu/shim_run_dry.sh BUILD_DIR
#
# A dry run of tests/gpu/shim_run.sh on a machine without a GPU, to check the script's plumbing
# (tenants started together, barriers, tables, the platform of section 5, cleanup) after a change:
# it runs the whole script against the test suite's fakes with two stand-ins, and checks the
# results' shape. It proves nothing about a real GPU: the figures are made up.
#   - shim_check: a bash stand-in printing lines of the real program's format (loop: random counts
#     after the real barrier; hold: allocates through tests/tessera_shim_probe on the fake driver,
#     so that the fake NVML sees the memory);
#   - nvidia-smi: lists one GPU and, per process, the fake driver's bytes + a 500 MiB context.
# Section 5 runs `tessera agent --fake-gpus A100-40GB:1` (AGENT_ARGS) with TESSERA_FAKE_GPU_STATE:
# the hostile workload must be killed within two backstop periods and end violated_limit.
# BUILD_DIR: a build with tessera, libtessera-shim.so, tests/tessera_shim_probe and the fakes
# (tests/fake_nvml, tests/fake_cuda). About a minute (SECONDS_PER_RUN=1). Exit 0 when the results
# have every table and section 5 passed; 1 otherwise (the results are printed).
set -u
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
B="$(cd "${1:?usage: shim_run_dry.sh BUILD_DIR}" && pwd)"
for f in "$B/tessera" "$B/libtessera-shim.so" "$B/tests/tessera_shim_probe" "$B/tests/fake_nvml/libnvidia-ml.so.1"; do
  [ -e "$f" ] || { echo "shim_run_dry: $f is missing" >&2; exit 1; }
done
T="$(mktemp -d "${TMPDIR:-/tmp}/shim-run-dry.XXXXXX")"
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/bin" "$T/state"

cat >"$T/shim_check" <<'EOF'
#!/usr/bin/env bash
# Stand-in for shim_check (tests/gpu/shim_run_dry.sh): the real program's line formats, made-up figures.
mode="$1"
shift
case "$mode" in
  calibrate)
    echo "calibrate cycles_per_us=1755.00 events_cycles_per_us=1754.10 attr_mhz=1980"
    for us in 20 100 500 1000 10000; do echo "spin kernel_us=$us kernels=5 measured_us=$us.5"; done ;;
  loop)
    s="$1"; shift; bar=""; us=1000; st=1; gr=0
    for a in "$@"; do
      case "$a" in barrier=*) bar="${a#barrier=}" ;; us=*) us="${a#us=}" ;; streams=*) st="${a#streams=}" ;; graph=*) gr="${a#graph=}" ;; esac
    done
    if [ -n "$bar" ]; then
      d="${bar%:*}" n="${bar##*:}"
      : >"$d/ready.$$"
      while [ "$(find "$d" -name 'ready.*' | wc -l)" -lt "$n" ]; do sleep 0.01; done
    fi
    sleep "$s"
    k=$(((RANDOM % 1000 + 1000) * st))
    echo "loop kernels=$k seconds=$s kernel_us=$us streams=$st graph=$gr gpu_ms=$(awk -v k="$k" -v u="$us" 'BEGIN { print k * u / 1000 }') cycles_per_us=1755.00" ;;
  launch) echo "launch ns_per=$((3000 + RANDOM % 300)).0" ;;
  limit) for api in cudaMalloc cuMemAlloc cudaMallocAsync; do echo "limit $api below=ok above=fail"; done ;;
  scrubcost) echo "scrubcost mib=$1 reps=5 free_us_median=$((RANDOM % 100)).0" ;;
  scrubverify) echo "scrubverify mib=$1 same_address=yes nonzero=0" ;;
  hold)  # the probe holds the memory until its stdin (a fifo we keep open) ends; TERM ends both
    mib="$1" secs="$2" out="$(mktemp)" fifo="$(mktemp -u)"
    mkfifo "$fifo"
    "$SHIM_RUN_DRY_PROBE" init "alloc:mem:$((mib << 20))" wait <"$fifo" >"$out" 2>&1 &
    probe=$!
    exec 7>"$fifo"
    for _ in $(seq 2000); do grep -q "alloc family=mem" "$out" && break; sleep 0.002; done
    if grep -q "alloc family=mem rc=0" "$out"; then
      echo "hold mib=$mib rc=ok pid=$probe t_ms=$(date +%s%3N) free_mib=0 total_mib=0"
    else
      echo "hold mib=$mib rc=fail:$(tr '\n' ' ' <"$out")"
      kill "$probe" 2>/dev/null
      rm -f "$out" "$fifo"
      exit 1
    fi
    sleep "$secs" &
    sl=$!
    trap 'kill "$probe" "$sl" 2>/dev/null; rm -f "$out" "$fifo"; exit 143' TERM
    wait "$sl"
    exec 7>&-
    wait "$probe"
    rm -f "$out" "$fifo"
    echo "hold mib=$mib done" ;;
  *) exit 2 ;;
esac
EOF
cat >"$T/bin/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
# Stand-in for nvidia-smi (tests/gpu/shim_run_dry.sh) over the fake driver's per-process bytes.
case "$*" in
  -L) echo "GPU 0: Fake GPU (UUID: GPU-fake)" ;;
  *persistence_mode*) echo "Disabled" ;;  # the real script then keeps a holder up through sections 1-4
  *--query-gpu*) echo "Fake GPU (dry run), 0.0, 40960 MiB, Disabled" ;;
  *--query-compute-apps*)
    for f in "$TESSERA_FAKE_GPU_STATE"/*; do
      [ -f "$f" ] || continue
      p="${f##*/}"
      awk -v p="${p%%.*}" '{ b += $2 } END { printf "%s, %d\n", p, b / 1048576 + 500 }' "$f"
    done ;;
esac
EOF
chmod +x "$T/shim_check" "$T/bin/nvidia-smi"

export PATH="$T/bin:$PATH" SHIM_RUN_DRY_PROBE="$B/tests/tessera_shim_probe" SHIM_RUN_DRY_MARK="$T"
export TESSERA_FAKE_NVML_LIBRARY="$B/tests/fake_nvml/libnvidia-ml.so.1" TESSERA_FAKE_CUDA_MEM_BYTES=$((40 << 30))
export TESSERA_FAKE_GPU_STATE="$T/state" TESSERA_FAKE_GPU_CONTEXT_MIB=500
SHIM_CHECK="$T/shim_check" SECONDS_PER_RUN=1 AGENT_ARGS="--fake-gpus A100-40GB:1" \
  timeout 600 bash "$REPO/tests/gpu/shim_run.sh" "$B" "$T/out" >/dev/null 2>&1
rc=$?
R="$T/out/shim-results.md"
cat "$R" 2>/dev/null
fail=0
expect() {  # expect COUNT PATTERN WHAT
  local n
  n="$(grep -cE -- "$2" "$R" 2>/dev/null)"
  [ "${n:-0}" -eq "$1" ] || { echo "shim_run_dry: $3: $1 lines matching /$2/ expected, got ${n:-0}" >&2; fail=1; }
}
[ "$rc" -eq 0 ] || { echo "shim_run_dry: shim_run.sh exited $rc" >&2; fail=1; }
expect 3 '^\| cu[a-zA-Z]+ \| ok \| fail \| yes \|$' "section 1's rows"
expect 14 '^\| [0-9]+ (us kernels|streams x|x [0-9]+ us)|^\| graphs of' "section 2's share rows (7 workloads x 2 pairs)"
expect 1 'Skipped: .python3 -c .import torch.. failed|^\| (2048|8192)\^3' "PyTorch: skipped, or its first row"
expect 1 '^\| [0-9.]+ ns \| [0-9.]+ ns \| [0-9.]+ ns \| [0-9.]+ ns \|' "section 3's row"
expect 3 '^\| [0-9]+ MiB \| [0-9.]+ us \|' "section 4's rows"
expect 2 '^\| (shimmed|re-exec.d).* \| ok \| [0-9]+ MiB \| \+500 MiB \|$' "section 5's NVML view"
expect 1 '^\| killed after its allocation \| [0-9]+ ms \(two periods: 2000 ms\): \*\*within\*\*' "the backstop's kill"
expect 1 'state failed, reason violated_limit, exit code 137: \*\*violated_limit as required\*\*' "the hostile workload's end"
expect 1 '^\| honest workload [0-9]+ .* \| running \|$' "the honest workload"
expect 0 'stopped with exit code' "sections that stopped"
expect 1 '^Persistence mode is off' "the driver keeper (the stand-in nvidia-smi says persistence is off)"
if [ -n "$(find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'shim-run.*' -newer "$T/shim_check" 2>/dev/null)" ]; then
  echo "shim_run_dry: shim_run.sh left its temporary folder" >&2
  fail=1
fi
sleep 1
for d in /proc/[0-9]*; do  # nothing of the run is left: no process but this script's carries its marker
  grep -qz "^SHIM_RUN_DRY_MARK=$T\$" "$d/environ" 2>/dev/null || continue
  c="$(tr '\0' ' ' 2>/dev/null <"$d/cmdline")"
  case "$c" in *shim_run_dry.sh* | "tr "* | "grep "*) continue ;; esac
  echo "shim_run_dry: left running: pid ${d#/proc/}: $c" >&2
  fail=1
done
[ "$fail" -eq 0 ] && echo "shim_run_dry: ok"
exit "$fail"
