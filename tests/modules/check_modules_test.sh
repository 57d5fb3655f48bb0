#!/usr/bin/env bash
# scripts/check_modules.py finds each kind of violation (and passes a clean tree): a fixture tree
# in a temporary folder with the real cmake/module_deps.txt.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/tessera-modules.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/cmake" "$work/src/placement" "$work/src/sched" "$work/src/core" "$work/src/sim" \
  "$work/src/enforce/shim" "$work/include/tessera/core" "$work/tools/tessera"
cp "$root/cmake/module_deps.txt" "$work/cmake/"
fail=0
expect() {  # expect EXIT_CODE PATTERN...: runs the checker, checks its exit code and output lines
  local want="$1"; shift
  local out rc=0
  out="$(python3 "$root/scripts/check_modules.py" --root "$work" 2>&1)" || rc=$?
  if [[ "$rc" != "$want" ]]; then echo "FAIL: exit $rc, want $want"; echo "$out"; fail=1; fi
  for pattern in "$@"; do
    if ! grep -qF -- "$pattern" <<<"$out"; then echo "FAIL: no line with: $pattern"; echo "$out"; fail=1; fi
  done
}
printf '#include "tessera/placement/task.h"\n#include <vector>\n' > "$work/src/sched/ok.cc"
printf '#include "tessera/core/status.h"\n#include "src/sim/private.h"\n' > "$work/src/sim/ok.cc"
expect 0 "module boundaries clean"
printf '#include "tessera/core/status.h"\n#include "tessera/sched/job.h"\n' > "$work/src/placement/up.cc"
printf '#include "src/core/private.h"\n' > "$work/include/tessera/core/pub.h"
printf '#include "src/sim/private.h"\n' > "$work/tools/tessera/cmd.cc"
printf '#include <fstream>\n' > "$work/src/sched/io.cc"
printf '#include "tessera/sched/scheduler.h"\n' > "$work/src/enforce/shim/hook.cc"
printf '#include "tessera/store/store.h"\n' > "$work/src/sim/store_user.cc"
expect 1 \
  "src/placement/up.cc:2: placement may not use sched" \
  "include/tessera/core/pub.h:1: public header includes private header src/core/private.h" \
  "tools/tessera/cmd.cc:1: includes sim's private header src/sim/private.h" \
  "src/sched/io.cc:1: sched does no file I/O" \
  "src/enforce/shim/hook.cc:1: shim may not use sched" \
  "src/sim/store_user.cc:1: sim may not use store"
if [[ "$fail" != 0 ]]; then exit 1; fi
echo "check_modules_test: every violation found, the clean tree passes"
