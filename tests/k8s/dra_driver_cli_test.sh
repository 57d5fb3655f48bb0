#!/usr/bin/env bash
# The real `tessera k8s dra-driver` against tessera_k8s_fake_kubelet over unix sockets: register,
# prepare (the CDI spec file appears), prepare again, unprepare (it goes); then a prepared claim
# survives a SIGTERM and restart of the driver (re-adopted from its checkpoint).
#   dra_driver_cli_test.sh TESSERA FAKE_KUBELET SHIM
set -euo pipefail
tessera="$1" kubelet="$2" shim="$3"
root="$(mktemp -d /tmp/tdracli-XXXXXX)"
pid=""
cleanup() { [[ -n "$pid" ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$root"; }
trap cleanup EXIT
mkdir -p "$root/claims/team-a"
cat > "$root/claims/team-a/infer.json" <<'JSON'
{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
 "metadata": {"namespace": "team-a", "name": "infer", "uid": "0d5c-11"},
 "status": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.tessera.io",
   "pool": "node-1", "device": "gpu-0", "shareID": "9e1f0000", "consumedCapacity": {"memory": "512Mi", "compute": "250"}}]}}}}
JSON
start() {
  "$tessera" k8s dra-driver --node-dir "$root/node" --plugin-dir "$root/plugin" --registry-dir "$root/reg" \
    --cdi-dir "$root/cdi" --shim "$shim" --nvml /nonexistent --claims-dir "$root/claims" --node-name n1 \
    > "$root/driver.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 200); do
    grep -q "DRA on" "$root/driver.log" && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$root/driver.log"; echo "driver exited"; exit 1; }
    sleep 0.05
  done
  cat "$root/driver.log"; echo "driver not ready"; exit 1
}
start
out="$("$kubelet" "$root/reg/gpu.tessera.io-reg.sock" team-a 0d5c-11 infer)"
echo "$out"
grep -q "prepared 0d5c-11 gpu.tessera.io/gpu=0d5c-11-gpu-0" <<<"$out"
grep -q "unprepared 0d5c-11" <<<"$out"
[[ ! -e "$root/cdi/gpu.tessera.io-claim_0d5c-11.json" ]] || { echo "CDI spec left behind"; exit 1; }
# Prepared, then the driver restarts: the claim is re-adopted (answered without its file).
FAKE_KUBELET_KEEP=1 "$kubelet" "$root/reg/gpu.tessera.io-reg.sock" team-a 0d5c-11 infer
[[ -e "$root/cdi/gpu.tessera.io-claim_0d5c-11.json" ]] || { echo "no CDI spec"; exit 1; }
kill -TERM "$pid"; wait "$pid" || true; pid=""
rm "$root/claims/team-a/infer.json"
start
grep -q "1 claims re-adopted" "$root/driver.log" || { cat "$root/driver.log"; exit 1; }
out="$("$kubelet" "$root/reg/gpu.tessera.io-reg.sock" team-a 0d5c-11 infer)"
grep -q "unprepared 0d5c-11" <<<"$out"
echo "dra_driver_cli: ok"
