# Shared by install_layout_test.sh and install_deb_test.sh (sourced): the installed layout and
# what the installed binary must find. The callers set `root` (the source tree) and `work` (a
# temporary folder outside it) and define fail().

# check_layout PREFIX ETC: every file cmake/TesseraInstall.cmake promises is there.
check_layout() {
  local prefix="$1" etc="$2" f
  for f in bin/tessera lib/libtessera-shim.so lib/tessera/fake/libnvidia-ml.so.1 \
           share/tessera/alibaba-gpu-2023/csv/openb_pod_list_default.csv share/tessera/alibaba-gpu-2023/SOURCE.md \
           share/tessera/gpu-models/mig-profiles.json share/tessera/gpu-models/SOURCE.md \
           share/tessera/nab/LICENSE share/tessera/nab/SOURCE.md share/tessera/forecast/README.md \
           share/tessera/tenants/SOURCE.md share/tessera/scenarios/quotas-default.yaml \
           share/tessera/examples/price-plan.yaml share/tessera/examples/demo-tenants.json \
           share/tessera/config/serve.yaml share/tessera/config/serve.env share/tessera/config/agent.env \
           share/tessera/config/node-arbiter.env lib/systemd/system/tessera-node-arbiter.service \
           share/doc/tessera/README.md share/doc/tessera/docs/api.md \
           lib/systemd/system/tessera-serve.service lib/systemd/system/tessera-agent.service; do
    [[ -f "$prefix/$f" ]] || fail "$prefix/$f is not installed"
  done
  for f in serve.yaml serve.env agent.env node-arbiter.env; do
    [[ -f "$etc/$f" ]] || fail "$etc/$f is not installed"
  done
  [[ -x "$prefix/bin/tessera" ]] || fail "$prefix/bin/tessera is not executable"
  if [[ -n "$(spank_target)" ]]; then
    [[ -f "$prefix/lib/spank_tessera.so" ]] || fail "$prefix/lib/spank_tessera.so is not installed (beside the shim it preloads)"
  fi
  [[ -z "$(find "$etc/serve.env" -perm /077)" ]] || fail "$etc/serve.env is readable by others (it may hold a token)"
  # All of data/ (the attribution files with the data they describe).
  local want got
  want="$(cd "$root/data" && find . -type f | sort)"
  got="$(cd "$prefix/share/tessera" && find . -type f -not -path './config/*' -not -path './ui/*' | sort)"
  [[ "$want" == "$got" ]] || fail "share/tessera differs from data/: $(diff <(echo "$want") <(echo "$got") | head -5)"
  # The dashboard, when this build made one (cmake/TesseraUi.cmake).
  if [[ -n "$(ui_target)" ]]; then
    [[ -f "$prefix/share/tessera/ui/index.html" ]] || fail "$prefix/share/tessera/ui/index.html is not installed"
    ls "$prefix/share/tessera/ui/assets/"*.js >/dev/null 2>&1 || fail "no dashboard script in $prefix/share/tessera/ui/assets"
  fi
  file -L "$prefix/lib/libtessera-shim.so" | grep -q 'ELF 64-bit LSB shared object' ||
    fail "lib/libtessera-shim.so is not a shared object: $(file -L "$prefix/lib/libtessera-shim.so")"
}

# ui_target: "tessera_ui" when the build tree $build makes the dashboard, else "".
ui_target() {
  if grep -qx 'TESSERA_UI_BUILT:INTERNAL=ON' "$build/CMakeCache.txt" 2>/dev/null; then echo tessera_ui; fi
}

# The Slurm SPANK plugin, when this build has it (Slurm's spank.h was found: libslurm-dev).
spank_target() {
  if grep -q '^TESSERA_SPANK_INCLUDE_DIR:PATH=/' "$build/CMakeCache.txt" 2>/dev/null; then echo spank_tessera; fi
}

# check_binary PREFIX ETC: the installed tessera, run from a folder outside the source tree with
# none of the TESSERA_* overrides, finds the data and the shim under PREFIX, and accepts the
# sample config (a wrong key fails the check).
check_binary() {
  local prefix="$1" etc="$2" out
  mkdir -p "$work/elsewhere"
  cd "$work/elsewhere"
  local -a run=(env -u TESSERA_DATA_DIR -u TESSERA_SHIM_PATH -u TESSERA_FAKE_NVML_LIBRARY "$prefix/bin/tessera")
  out="$("${run[@]}" version)" || fail "tessera version exited $?"
  [[ "$out" =~ ^tessera\ [0-9]+\.[0-9]+\.[0-9]+\ \(commit ]] || fail "tessera version printed '$out'"
  out="$("${run[@]}" version --paths 2>&1)" || fail "tessera version --paths exited $?: $out"
  echo "$out"
  grep -qxF "data:      $prefix/share/tessera (next to the executable)" <<<"$out" ||
    fail "the data folder is not $prefix/share/tessera"
  grep -qxF "shim:      $prefix/lib/libtessera-shim.so (next to the executable)" <<<"$out" ||
    fail "the shim is not $prefix/lib/libtessera-shim.so"
  grep -qxF "fake-nvml: $prefix/lib/tessera/fake/libnvidia-ml.so.1 (for tessera agent --fake-gpus)" <<<"$out" ||
    fail "the fake NVML is not $prefix/lib/tessera/fake/libnvidia-ml.so.1"
  if grep -qF "$root" <<<"$out"; then fail "the installed tessera uses the source tree $root"; fi
  # The bundled data is usable: `tessera forecast --backtest` reads share/tessera/forecast/.
  out="$("${run[@]}" forecast --backtest --horizon 24 --holdout 24 2>&1)" ||
    fail "tessera forecast --backtest on the bundled series exited $?: ${out:0:300}"
  grep -qE '^dlrm/gpus +1 ' <<<"$out" || fail "tessera forecast --backtest printed no dlrm/gpus row: ${out:0:300}"
  out="$("${run[@]}" serve --config "$etc/serve.yaml" --check 2>&1)" || fail "the sample serve.yaml: $out"
  grep -qF "valid" <<<"$out" || fail "serve --check printed '$out'"
  if [[ -n "$(ui_target)" ]]; then
    grep -qxF "tessera serve: dashboard: $prefix/share/tessera/ui" <<<"$out" ||
      fail "the installed serve does not find its dashboard in $prefix/share/tessera/ui: $out"
  fi
  { cat "$etc/serve.yaml"; echo "scheduler_typo: 1"; } > "$work/bad.yaml"
  local rc=0
  out="$("${run[@]}" serve --config "$work/bad.yaml" --check 2>&1)" || rc=$?
  [[ $rc -eq 2 ]] || fail "serve --check of a config with a wrong key exited $rc: $out"
  grep -qF "bad.yaml:$(wc -l < "$work/bad.yaml" | tr -d ' '): scheduler_typo: unknown key" <<<"$out" ||
    fail "serve --check did not name the wrong key with file:line: $out"
  cd - >/dev/null
}

# check_units DIR: systemd-analyze verify on the three units in DIR (their paths already point at
# the installed binary), and the properties the package promises.
check_units() {
  local dir="$1" out
  out="$(systemd-analyze verify --man=no "$dir/tessera-serve.service" "$dir/tessera-agent.service" \
    "$dir/tessera-node-arbiter.service" 2>&1)" || fail "systemd-analyze verify failed: $out"
  # It reports an unknown key or a bad value as a warning and still exits 0.
  if grep -E "tessera-(serve|agent|node-arbiter)\.service" <<<"$out"; then fail "systemd-analyze verify warns about the units"; fi
  grep -q "^ExecStart=.* node arbiter --run-dir /run/tessera " "$dir/tessera-node-arbiter.service" ||
    fail "tessera-node-arbiter.service does not run the arbiter on /run/tessera"
  grep -qx "KillMode=process" "$dir/tessera-agent.service" || fail "tessera-agent.service: no KillMode=process"
  grep -qx "Restart=on-failure" "$dir/tessera-serve.service" || fail "tessera-serve.service: no Restart=on-failure"
  grep -qx "DynamicUser=yes" "$dir/tessera-serve.service" || fail "tessera-serve.service: no DynamicUser=yes"
  grep -qx "StateDirectory=tessera" "$dir/tessera-serve.service" || fail "tessera-serve.service: no StateDirectory"
}
