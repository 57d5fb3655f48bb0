#!/usr/bin/env bash
# cpack -G DEB builds tessera_<version>_<arch>.deb: its control fields (Depends from
# dpkg-shlibdeps, conffiles) and contents are checked, it is installed with dpkg into a temporary
# root (dpkg --root with its own database: no package of this machine changes), the installed
# tessera runs `version` and finds its data and shim inside that root, and the units (paths
# moved into that root) pass systemd-analyze verify.
# Usage: tests/install/install_deb_test.sh BUILD_DIR
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "$1" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/tessera-deb.XXXXXX")"
trap 'rm -rf "$work"' EXIT
fail() { echo "install_deb_test: $*" >&2; exit 1; }
source "$root/tests/install/install_common.sh"

cmake --build "$build" --target tessera tessera_shim fake_nvml $(ui_target) $(spank_target) >/dev/null || fail "building the packaged targets failed"
(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/pkg") >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack -G DEB failed"; }
debs=("$work"/pkg/tessera_*.deb)
[[ ${#debs[@]} -eq 1 && -f "${debs[0]}" ]] || fail "cpack made no single tessera_*.deb: $(ls "$work/pkg")"
deb="${debs[0]}"
version="$(sed -n 's/^project(tessera VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")"

# The control fields.
field() { dpkg-deb -f "$deb" "$1"; }
[[ "$(field Package)" == tessera ]] || fail "Package is '$(field Package)'"
[[ "$(field Version)" == "$version" ]] || fail "Version is '$(field Version)', want $version"
[[ "$(field Architecture)" == "$(dpkg --print-architecture)" ]] || fail "Architecture is '$(field Architecture)'"
[[ -n "$(field Maintainer)" ]] || fail "no Maintainer"
[[ -n "$(field Description)" ]] || fail "no Description"
depends="$(field Depends)"
for lib in libc6 libstdc\\+\\+6 libyaml-cpp libsqlite3 libpq5 libssl3; do
  grep -qE "(^|, )$lib" <<<"$depends" || fail "Depends lacks $lib (dpkg-shlibdeps): $depends"
done
dpkg-deb -I "$deb" conffiles > "$work/conffiles" || fail "the package has no conffiles"
[[ "$(sort "$work/conffiles")" == "$(printf '/etc/tessera/agent.env\n/etc/tessera/node-arbiter.env\n/etc/tessera/serve.env\n/etc/tessera/serve.yaml')" ]] ||
  fail "conffiles: $(cat "$work/conffiles")"

# The contents: the .deb's paths, none from the build machine.
dpkg-deb -c "$deb" | awk '{print $6}' > "$work/contents"
for f in ./usr/bin/tessera ./usr/lib/libtessera-shim.so ./usr/lib/tessera/fake/libnvidia-ml.so.1 \
         ./usr/share/tessera/alibaba-gpu-2023/SOURCE.md ./usr/share/doc/tessera/README.md \
         ./usr/lib/systemd/system/tessera-serve.service ./usr/lib/systemd/system/tessera-agent.service \
         ./usr/lib/systemd/system/tessera-node-arbiter.service ./etc/tessera/node-arbiter.env \
         ./etc/tessera/serve.yaml ./etc/tessera/serve.env ./etc/tessera/agent.env; do
  grep -qxF "$f" "$work/contents" || fail "the package lacks $f"
done
if [[ -n "$(spank_target)" ]]; then
  grep -qxF ./usr/lib/spank_tessera.so "$work/contents" || fail "the package lacks the Slurm plugin ./usr/lib/spank_tessera.so"
fi
if grep -E '^\./usr/local|_CPack_Packages|^\./usr/etc' "$work/contents"; then fail "the package holds paths of the build"; fi
dpkg-deb -c "$deb" | grep -E ' \./etc/tessera/serve\.env$' | grep -q '^-rw-------' ||
  fail "/etc/tessera/serve.env is not mode 0600 in the package"
dpkg-deb -x "$deb" "$work/unpacked"
grep -qxF "ExecStart=/usr/bin/tessera serve --config /etc/tessera/serve.yaml \$TESSERA_SERVE_ARGS" \
  "$work/unpacked/usr/lib/systemd/system/tessera-serve.service" || fail "tessera-serve.service does not run /usr/bin/tessera"

# dpkg installs it into a root of its own (an empty database: dependencies are not there, and the
# maintainer scripts run outside a chroot with DPKG_ROOT set, as they are written to).
target="$work/root"
mkdir -p "$target/var/lib/dpkg/info" "$target/var/lib/dpkg/updates"
touch "$target/var/lib/dpkg/status" "$target/var/lib/dpkg/available"
force="--force-depends,script-chrootless"
[[ "$(id -u)" -eq 0 ]] || force="$force,not-root"
dpkg --root="$target" --log=/dev/null "$force" -i "$deb" >"$work/dpkg.log" 2>&1 ||
  { cat "$work/dpkg.log"; fail "dpkg -i into $target failed"; }
dpkg --root="$target" -s tessera | grep -qx "Status: install ok installed" || fail "dpkg does not list tessera as installed"
check_layout "$target/usr" "$target/etc/tessera"
check_binary "$target/usr" "$target/etc/tessera"
mkdir -p "$work/units"
for u in tessera-serve.service tessera-agent.service tessera-node-arbiter.service; do
  sed -e "s#/usr/bin/tessera#$target/usr/bin/tessera#g" -e "s#/etc/tessera/#$target/etc/tessera/#g" \
    "$target/usr/lib/systemd/system/$u" > "$work/units/$u"
done
check_units "$work/units"
# Removal takes the files and keeps the operator's configs (conffiles) until purge.
dpkg --root="$target" --log=/dev/null "$force" -r tessera >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -r failed"; }
[[ ! -e "$target/usr/bin/tessera" ]] || fail "dpkg -r left /usr/bin/tessera"
[[ -f "$target/etc/tessera/serve.yaml" ]] || fail "dpkg -r removed the conffile serve.yaml"
echo "install_deb_test: ok ($(basename "$deb"))"
