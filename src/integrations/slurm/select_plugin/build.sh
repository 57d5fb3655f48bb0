#!/usr/bin/env bash
# Builds tessera's select_cons_tres.so: Slurm's own select/cons_tres plugin from Debian 12's
# slurm-wlm 22.05.8 source, with one change (best_fit.py, beside this script): a shard (or mps)
# job gets the GPU with the fewest free shards that hold it (best fit, ties to the lowest index)
# instead of the lowest-index GPU with room (first fit). docs/slurm.md, "Which GPU a shard job
# gets", says why and what it measures; the slurm suite's check 2c runs it in a real slurmctld.
#
#   build.sh OUT_DIR              -> OUT_DIR/select_cons_tres.so
#   build.sh OUT_DIR --install DIR   also copies it to DIR (an operator's PluginDir, e.g.
#                                    /usr/local/lib/slurm-tessera; slurm.conf:
#                                    PluginDir=DIR:/usr/lib/x86_64-linux-gnu/slurm-wlm)
#
# Steps: download Debian's source (the upstream tarball and Debian's patches; sha256-checked, kept
# in OUT_DIR/download so a rerun downloads nothing), unpack it afresh in OUT_DIR/src, apply
# Debian's patch series, apply best_fit.py, configure with Debian's flags (debian/rules, less the
# munge and PMIx paths, which only other plugins use), and compile only the plugin's two folders
# (cons_common, cons_tres). Nothing of Slurm's source is in this repository.
#
# ABI: a select plugin runs inside slurmctld and uses its structures (node and job records, gres
# state) and functions directly, so it must come from the same Slurm version as the slurmctld that
# loads it (Slurm refuses a plugin whose plugin_version differs: "Incompatible Slurm plugin
# version"). The script refuses to build for an installed slurmctld other than 22.05.8.
#
# Time on the 2-core dev VM: 70 s (configure 59 s, compile 10 s; docs/slurm.md); JOBS (default:
# the cores) compile jobs. A built plugin is also kept in a machine-wide cache, like ccache's
# objects (TESSERA_SLURM_SELECT_CACHE, default ~/.cache/tessera/slurm-select/), under the SHA-256
# of this script, best_fit.py and the slurmctld version: another build tree or checkout of the
# same scripts copies it from there in no time. TESSERA_SLURM_SELECT_CACHE= (empty) turns it off.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: build.sh OUT_DIR [--install DIR]}"
install_dir=""
if [ $# -ge 2 ]; then
  if [ "$2" != "--install" ] || [ $# -ne 3 ]; then echo "usage: build.sh OUT_DIR [--install DIR]" >&2; exit 2; fi
  install_dir="$3"
fi
jobs="${JOBS:-$(nproc)}"

version=22.05.8
debian_revision=4+deb12u3
orig=slurm-wlm_${version}.orig.tar.gz
orig_sha256=8c8f6a26a5d51e6c63773f2e02653eb724540ee8b360125c8d7732314ce737d6
orig_sha1=0719f99008a22ee412b3729e1e9ae0440d841c07
debian=slurm-wlm_${version}-${debian_revision}.debian.tar.xz
debian_sha256=8608fed8f3f51bbaeadcf9f201da82a2b7b22e01d36b590570801b702b1820c2
debian_sha1=94a0658a68f8eb4524f1816d157ac8c5af890bd9
# Debian moved 22.05.8-4+deb12u3 from debian-security to the main pool with a point release
# (2026-12: the security pool no longer has it); a later revision will push it out of the pool, so
# the last try is snapshot.debian.org, which keeps every file by its SHA-1 (not reachable from the
# dev VM, so untried).
mirrors=(http://deb.debian.org/debian/pool/main/s/slurm-wlm
         http://deb.debian.org/debian-security/pool/updates/main/s/slurm-wlm)

die() { echo "select_plugin/build.sh: $*" >&2; exit 1; }

# The slurmctld this plugin is for: the same upstream version.
installed=""
if command -v slurmctld > /dev/null 2>&1 || [ -x /usr/sbin/slurmctld ]; then
  installed="$(PATH="/usr/sbin:$PATH" slurmctld -V 2> /dev/null | awk '{print $2}')"
fi
[ -z "$installed" ] || [ "$installed" = "$version" ] ||
  die "the installed slurmctld is $installed; this plugin is built from Slurm $version's source" \
      "and a select plugin must match slurmctld's version exactly (Debian 12's slurmctld is $version)"

mkdir -p "$out/download"
out="$(cd "$out" && pwd)"

finish() {  # copies the plugin to --install's folder, if given
  [ -n "$install_dir" ] || return 0
  mkdir -p "$install_dir"
  install -m 0644 "$out/select_cons_tres.so" "$install_dir/select_cons_tres.so"
  echo "select_plugin/build.sh: installed $install_dir/select_cons_tres.so; in slurm.conf set" \
       "PluginDir=$install_dir:/usr/lib/$multiarch/slurm-wlm and restart slurmctld"
}
multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2> /dev/null || echo x86_64-linux-gnu)"
default_cache=""  # without HOME (some CI and systemd setups) and XDG_CACHE_HOME: no cache
if [ -n "${XDG_CACHE_HOME:-}" ]; then default_cache="$XDG_CACHE_HOME/tessera/slurm-select"
elif [ -n "${HOME:-}" ]; then default_cache="$HOME/.cache/tessera/slurm-select"; fi
cache_root="${TESSERA_SLURM_SELECT_CACHE-$default_cache}"
cache=""
if [ -n "$cache_root" ]; then
  key="$( (cat "$here/build.sh" "$here/best_fit.py"; echo "$installed $multiarch") | sha256sum | cut -c1-16)"
  cache="$cache_root/$key"
  if [ -f "$cache/select_cons_tres.so" ]; then
    install -m 0644 "$cache/select_cons_tres.so" "$out/select_cons_tres.so"
    echo "select_plugin/build.sh: $out/select_cons_tres.so from the cache ($cache)"
    finish
    exit 0
  fi
fi
fetch() {  # fetch FILE SHA256 SHA1: into $out/download unless there with the right checksum
  local file="$1" sum="$2" url urls=()
  if [ -f "$out/download/$file" ] && echo "$sum  $out/download/$file" | sha256sum -c --status; then
    return 0
  fi
  for url in "${mirrors[@]}"; do urls+=("$url/$file"); done
  urls+=("http://snapshot.debian.org/file/$3")
  for url in "${urls[@]}"; do
    # A stalled transfer gives up (--speed-time); a wrong file (a proxy's page) tries the next URL.
    if curl -fsSL --retry 2 --retry-connrefused --connect-timeout 20 --speed-limit 1024 --speed-time 60 \
        -o "$out/download/$file.part" "$url"; then
      if echo "$sum  $out/download/$file.part" | sha256sum -c --status; then
        mv "$out/download/$file.part" "$out/download/$file"
        return 0
      fi
      echo "select_plugin/build.sh: $url: sha256 $(sha256sum "$out/download/$file.part" | cut -c1-64)," \
           "expected $sum; trying the next" >&2
    fi
  done
  rm -f "$out/download/$file.part"
  die "cannot download $file (tried ${urls[*]}); put the file in $out/download/ by hand" \
      "(sha256 $sum) and run again"
}
fetch "$orig" "$orig_sha256" "$orig_sha1"
fetch "$debian" "$debian_sha256" "$debian_sha1"

# A fresh unpack each time: best_fit.py edits the source once.
src="$out/src"
rm -rf "$src"
mkdir -p "$src"
tar -xzf "$out/download/$orig" -C "$src" --strip-components=1
tar -xJf "$out/download/$debian" -C "$src"
while read -r patch; do
  case "$patch" in ''|'#'*) continue ;; esac
  patch -s -p1 -d "$src" < "$src/debian/patches/$patch" || die "Debian's patch $patch did not apply"
done < "$src/debian/patches/series"
python3 "$here/best_fit.py" "$src"

# Debian's configure line (debian/rules, dh_auto_configure's defaults included) and build flags
# (dpkg-buildflags with hardening=+all,-bindnow; no -g). Without --with-munge and --with-pmix,
# which fail where libmunge-dev or PMIx is missing and concern only the auth, cred and mpi plugins.
t_configure=$SECONDS
(
  cd "$src"
  ./configure -q --prefix=/usr --sysconfdir=/etc/slurm --localstatedir=/var --runstatedir=/run \
    --libdir="/usr/lib/$multiarch" --disable-maintainer-mode --disable-dependency-tracking \
    --enable-pam --without-rpath --disable-debug --enable-multiple-slurmd \
    SUCMD=/bin/su SLEEP_CMD=/bin/sleep \
    CFLAGS="-O2 -fstack-protector-strong -fstack-clash-protection -fcf-protection -Wformat -Werror=format-security" \
    CPPFLAGS="-Wdate-time -D_FORTIFY_SOURCE=2" LDFLAGS="-Wl,-z,relro" > "$out/configure.log" 2>&1
) || { tail -n 20 "$out/configure.log" >&2; die "Slurm's configure failed (whole log: $out/configure.log)"; }
t_compile=$SECONDS
make -s -C "$src/src/plugins/select/cons_tres" -j "$jobs" select_cons_tres.la > "$out/make.log" 2>&1 ||
  { tail -n 30 "$out/make.log" >&2; die "the plugin did not compile (whole log: $out/make.log)"; }
install -m 0644 "$src/src/plugins/select/cons_tres/.libs/select_cons_tres.so" "$out/select_cons_tres.so"
rm -rf "$src"  # 100 MB; the downloads stay
echo "select_plugin/build.sh: built $out/select_cons_tres.so (Slurm $version-$debian_revision, tessera best fit)" \
  "in $SECONDS s (configure $((t_compile - t_configure)) s, compile $((SECONDS - t_compile)) s)"
if [ -n "$cache" ]; then  # (a cache that cannot be written is no error)
  { mkdir -p "$cache" && cp "$out/select_cons_tres.so" "$cache/select_cons_tres.so.$$" &&
      mv "$cache/select_cons_tres.so.$$" "$cache/select_cons_tres.so"; } 2> /dev/null || true
fi
finish
