#!/usr/bin/env bash
# scripts/check_sizes.py finds a tools/ file over 300 lines and a sched/sim function over 120
# lines (and passes what is within the limits): a fixture tree in a temporary folder.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/tessera-sizes.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tools/tessera" "$work/src/sched" "$work/src/sim"
# function NAME BODY_LINES: a C++ function whose braces span BODY_LINES + 2 lines, with a brace
# inside a string and a comment that must not count.
function_of() {
  echo "int $1(int x) {"
  echo '  const char* s = "{ not a brace"; // } nor this'
  for ((i = 0; i < $2 - 1; i++)); do echo "  x += $i;"; done
  echo "}"
}
{ function_of Short 100; } > "$work/src/sched/ok.cc"
for ((i = 0; i < 300; i++)); do echo "// line $i"; done > "$work/tools/tessera/ok.cc"
out="$(python3 "$root/scripts/check_sizes.py" --root "$work" 2>&1)" || { echo "FAIL: clean tree: $out"; exit 1; }
{ echo "namespace n {"; function_of Long 119; echo "}"; } > "$work/src/sim/long.cc"
echo "// one more" >> "$work/tools/tessera/ok.cc"
rc=0
out="$(python3 "$root/scripts/check_sizes.py" --root "$work" 2>&1)" || rc=$?
fail=0
[[ "$rc" == 1 ]] || { echo "FAIL: exit $rc, want 1"; fail=1; }
grep -qF "src/sim/long.cc:2: function Long is 121 lines" <<<"$out" || { echo "FAIL: long function not found"; fail=1; }
grep -qF "tools/tessera/ok.cc:1: 301 lines" <<<"$out" || { echo "FAIL: long tools file not found"; fail=1; }
if grep -qF "ok.cc:1: function" <<<"$out"; then echo "FAIL: a 102-line function reported"; fail=1; fi
if [[ "$fail" != 0 ]]; then echo "$out"; exit 1; fi
echo "check_sizes_test: both found, the rest passes"
