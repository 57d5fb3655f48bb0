#!/usr/bin/env bash
# `cmake --install` into a temporary prefix lays out bin/, lib/, share/tessera, share/doc, the
# systemd units and etc/tessera (cmake/TesseraInstall.cmake); the installed tessera, run from
# elsewhere, finds its data and the shim in the prefix (not in the source tree), accepts the
# sample serve.yaml, and the units (rewritten for the prefix) pass systemd-analyze verify.
# Usage: tests/install/install_layout_test.sh BUILD_DIR
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "$1" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/tessera-install.XXXXXX")"
trap 'rm -rf "$work"' EXIT
fail() { echo "install_layout_test: $*" >&2; exit 1; }
source "$root/tests/install/install_common.sh"

# What it installs must be built (CMAKE_SKIP_INSTALL_ALL_DEPENDENCY: install builds nothing).
cmake --build "$build" --target tessera tessera_shim fake_nvml $(ui_target) $(spank_target) >/dev/null || fail "building the installed targets failed"
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "cmake --install failed"; }
check_layout "$prefix" "$prefix/etc/tessera"
# The units name the prefix's binary and configs, not /usr/bin or /etc.
grep -qxF "ExecStart=$prefix/bin/tessera serve --config $prefix/etc/tessera/serve.yaml \$TESSERA_SERVE_ARGS" \
  "$prefix/lib/systemd/system/tessera-serve.service" || fail "tessera-serve.service does not run $prefix/bin/tessera"
grep -qxF "EnvironmentFile=$prefix/etc/tessera/agent.env" "$prefix/lib/systemd/system/tessera-agent.service" ||
  fail "tessera-agent.service does not read $prefix/etc/tessera/agent.env"
check_units "$prefix/lib/systemd/system"
check_binary "$prefix" "$prefix/etc/tessera"
echo "install_layout_test: ok"
