#!/usr/bin/env bash
# The real `tessera k8s dra-driver` against tessera_k8s_fake_kubelet over unix sockets.
# 1. --claims-dir: register, prepare (the CDI spec file appears), prepare again, unprepare (it
#    goes); a prepared claim survives a SIGTERM and restart of the driver (checkpoint).
# 2. The API server (tessera_k8s_fake_kube_api): the driver publishes its node's slices at start
#    (a stale one deleted, the Node as owner), reads the claims it prepares from the server; a
#    claim with another uid and a missing claim are errors naming them; the CDI spec names the
#    device nodes of --dev-dir.
# 3. The NVML backstop: a process of the claim's pod (its cgroup in a --proc-dir stand-in) that runs
#    without the shim and allocates 2 GiB under the claim's 1 GiB is killed, and the driver says so.
# 4. MIG (the fake NVML's H100-80GB in MIG mode, no instance): a claim for gpu-0-mig-3g-40gb-4 fails
#    naming the instance and the flag; with --allow-mig-reconfigure the driver creates the instance
#    (its CDI spec pins MIG-...), and destroys it at unprepare (the fake NVML's mutation log).
#   dra_driver_cli_test.sh TESSERA FAKE_KUBELET SHIM FAKE_KUBE_API FAKE_NVML PROBE
set -euo pipefail
tessera="$1" kubelet="$2" shim="$3" fake_api="$4" fake_nvml="$5" probe="$6"
root="$(mktemp -d /tmp/tdracli-XXXXXX)"
pid="" api_pid="" probe_pid=""
cleanup() {
  [[ -n "$probe_pid" ]] && kill -9 "$probe_pid" 2>/dev/null
  [[ -n "$pid" ]] && kill "$pid" 2>/dev/null
  [[ -n "$api_pid" ]] && kill "$api_pid" 2>/dev/null
  wait 2>/dev/null || true
  rm -rf "$root"
}
trap cleanup EXIT
mkdir -p "$root/claims/team-a"
cat > "$root/claims/team-a/infer.json" <<'JSON'
{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
 "metadata": {"namespace": "team-a", "name": "infer", "uid": "0d5c-11"},
 "status": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.tessera.io",
   "pool": "node-1", "device": "gpu-0", "shareID": "9e1f0000", "consumedCapacity": {"memory": "512Mi", "compute": "250"}}]}}}}
JSON
wait_ready() {  # LOG PID WHAT
  for _ in $(seq 1 200); do
    grep -q "$3" "$1" && return 0
    kill -0 "$2" 2>/dev/null || { cat "$1"; echo "$3: exited"; exit 1; }
    sleep 0.05
  done
  cat "$1"; echo "$3: not ready"; exit 1
}
start() {
  "$tessera" k8s dra-driver --node-dir "$root/node" --plugin-dir "$root/plugin" --registry-dir "$root/reg" \
    --cdi-dir "$root/cdi" --shim "$shim" --nvml /nonexistent --node-name n1 "$@" > "$root/driver.log" 2>&1 &
  pid=$!
  wait_ready "$root/driver.log" "$pid" "DRA on"
}
# Without NVML the backstop cannot run: the driver does not start unless it is turned off.
if "$tessera" k8s dra-driver --node-dir "$root/node" --plugin-dir "$root/plugin" --registry-dir "$root/reg" \
    --cdi-dir "$root/cdi" --shim "$shim" --nvml /nonexistent --node-name n1 --claims-dir "$root/claims" \
    --dev-dir "" > "$root/nonvml.log" 2>&1; then
  echo "started without NVML for the backstop"; exit 1
fi
grep -q "NVML, for the backstop (--backstop-ms 0 turns it off)" "$root/nonvml.log" || { cat "$root/nonvml.log"; exit 1; }
start --claims-dir "$root/claims" --dev-dir "" --backstop-ms 0
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
start --claims-dir "$root/claims" --dev-dir "" --backstop-ms 0
grep -q "1 claims re-adopted" "$root/driver.log" || { cat "$root/driver.log"; exit 1; }
out="$("$kubelet" "$root/reg/gpu.tessera.io-reg.sock" team-a 0d5c-11 infer)"
grep -q "unprepared 0d5c-11" <<<"$out"
kill -TERM "$pid"; wait "$pid" || true; pid=""
echo "dra_driver_cli: --claims-dir ok"

# 2. The API server.
mkdir -p "$root/objects" "$root/dev"
touch "$root/dev/nvidiactl" "$root/dev/nvidia-uvm" "$root/dev/nvidia0" "$root/dev/nvidia1"
cat > "$root/objects/claim.json" <<'JSON'
{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
 "metadata": {"namespace": "team-b", "name": "serve", "uid": "7a11-22"},
 "status": {"reservedFor": [{"resource": "pods", "name": "serve-0", "uid": "0c1d2e3f-0000-4000-8000-000000000001"}],
  "allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.tessera.io",
   "pool": "n1", "device": "gpu-1", "shareID": "5c2d0000", "consumedCapacity": {"memory": "1Gi", "compute": "300"}}]}}}}
JSON
sed 's/"serve"/"again"/; s/7a11-22/7a11-99/' "$root/objects/claim.json" > "$root/objects/claim-again.json"
cat > "$root/objects/node.json" <<'JSON'
{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "node-uid-1"}}
JSON
cat > "$root/objects/stale.json" <<'JSON'
{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpu.tessera.io-4"},
 "spec": {"driver": "gpu.tessera.io", "nodeName": "n1", "pool": {"name": "n1", "generation": 3, "resourceSliceCount": 5}}}
JSON
"$fake_api" "$root/state.json" "$root"/objects/*.json > "$root/api.log" 2>&1 &
api_pid=$!
wait_ready "$root/api.log" "$api_pid" "listening on"
port="$(sed -n 's/^listening on //p' "$root/api.log")"
mkdir -p "$root/gpu-state" "$root/proc"
TESSERA_FAKE_GPU_STATE="$root/gpu-state" TESSERA_FAKE_NVML_LIBRARY="$fake_nvml" \
  start --server "http://127.0.0.1:$port" --fake-gpus A100-40GB:2 --dev-dir "$root/dev" --proc-dir "$root/proc" \
  --backstop-ms 200
grep -q "slices of node n1: generation 4, 1 created, 0 updated, 1 deleted, 0 unchanged" "$root/driver.log" ||
  { cat "$root/driver.log"; echo "slices not published"; exit 1; }
grep -q "claims from the API server" "$root/driver.log"
FAKE_KUBELET_KEEP=1 "$kubelet" "$root/reg/gpu.tessera.io-reg.sock" team-b 7a11-22 serve
spec="$root/cdi/gpu.tessera.io-claim_7a11-22.json"
grep -q "\"hostPath\": \"$root/dev/nvidia1\"" "$spec" || { cat "$spec"; echo "no device node nvidia1"; exit 1; }
grep -q "\"path\": \"/dev/nvidiactl\"" "$spec"
grep -q "\"path\": \"/dev/nvidia-uvm\"" "$spec"
# 3. A process of pod serve-0 (the claim's) without the shim: 2 GiB on GPU 1 under a 1 GiB limit.
# Its stdin a FIFO this script holds open: the probe's `wait` returns only when it is closed.
mkfifo "$root/hold"
exec 3<>"$root/hold"
CUDA_VISIBLE_DEVICES=1 TESSERA_FAKE_GPU_STATE="$root/gpu-state" "$probe" init alloc:mem:2147483648 wait \
  < "$root/hold" > "$root/probe.log" 2>&1 &
probe_pid=$!
mkdir -p "$root/proc/$probe_pid"
echo "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0c1d2e3f_0000_4000_8000_000000000001.slice/cri-containerd-1.scope" \
  > "$root/proc/$probe_pid/cgroup"
status=0
for _ in $(seq 1 100); do kill -0 "$probe_pid" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$probe_pid" 2>/dev/null; then
  cat "$root/probe.log" "$root/driver.log"; ls -R "$root/gpu-state" "$root/proc"; echo "the probe still runs"; exit 1
fi
wait "$probe_pid" || status=$?
probe_pid=""
[[ "$status" == 137 ]] || { cat "$root/probe.log" "$root/driver.log"; echo "the probe was not killed (exit $status)"; exit 1; }
grep -q "backstop: claim team-b/serve: 1548 MiB on GPU 1 over its limit of 1024 MiB .*; killed" "$root/driver.log" ||
  { cat "$root/driver.log"; echo "no backstop line"; exit 1; }
# The kubelet's uid is not the claim's: the claim was replaced.
if out="$("$kubelet" "$root/reg/gpu.tessera.io-reg.sock" team-b 7a11-00 again 2>&1)"; then
  echo "prepared a claim whose uid differs"; exit 1
fi
echo "$out"
grep -q "ResourceClaim team-b/again (uid 7a11-00): metadata.uid: '7a11-99' is not the kubelet's '7a11-00'" <<<"$out"
# No such claim.
if out="$("$kubelet" "$root/reg/gpu.tessera.io-reg.sock" team-b 0000-01 gone 2>&1)"; then
  echo "prepared a missing claim"; exit 1
fi
echo "$out"
grep -q "ResourceClaim team-b/gone (uid 0000-01): GET /apis/resource.k8s.io/v1/namespaces/team-b/resourceclaims/gone: HTTP 404" <<<"$out"
kill -TERM "$pid"; wait "$pid" || true; pid=""
kill -TERM "$api_pid"; wait "$api_pid" || true; api_pid=""
python3 - "$root/state.json" <<'PY'
import json, sys
state = json.load(open(sys.argv[1]))
slices = state["resourceslices"]
assert sorted(slices) == ["n1-gpu.tessera.io-0"], sorted(slices)
s = slices["n1-gpu.tessera.io-0"]
assert [d["name"] for d in s["spec"]["devices"]] == ["gpu-0", "gpu-1"], s["spec"]["devices"]
assert s["spec"]["pool"] == {"name": "n1", "generation": 4, "resourceSliceCount": 1}, s["spec"]["pool"]
assert s["metadata"]["ownerReferences"][0]["uid"] == "node-uid-1", s["metadata"]
assert "GET /apis/resource.k8s.io/v1/namespaces/team-b/resourceclaims/serve" in state["requests"]
PY

# 4. MIG.
mkdir -p "$root/claims/team-c"
cat > "$root/claims/team-c/vision.json" <<'JSON'
{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
 "metadata": {"namespace": "team-c", "name": "vision", "uid": "3c9d-44"},
 "status": {"allocation": {"devices": {"results": [{"request": "mig", "driver": "gpu.tessera.io",
   "pool": "n1", "device": "gpu-0-mig-3g-40gb-4"}]}}}}
JSON
export TESSERA_FAKE_NVML_CONFIG="H100-80GB:mig=1" TESSERA_FAKE_NVML_MUTATION_LOG="$root/mig-mutations.log"
mig_start() {
  "$tessera" k8s dra-driver --node-dir "$root/mig-node" --plugin-dir "$root/mig-plugin" --registry-dir "$root/mig-reg" \
    --cdi-dir "$root/mig-cdi" --shim "$shim" --nvml "$fake_nvml" --node-name n1 --claims-dir "$root/claims" \
    --dev-dir "" --backstop-ms 0 "$@" > "$root/mig-driver.log" 2>&1 &
  pid=$!
  wait_ready "$root/mig-driver.log" "$pid" "DRA on"
}
mig_start
if out="$("$kubelet" "$root/mig-reg/gpu.tessera.io-reg.sock" team-c 3c9d-44 vision 2>&1)"; then
  echo "prepared a MIG claim whose instance does not exist, without --allow-mig-reconfigure"; exit 1
fi
echo "$out"
grep -q "results device gpu-0-mig-3g-40gb-4: MIG instance 3g.40gb@4 on GPU 0 does not exist (the GPU has ''), and the driver runs without --allow-mig-reconfigure" <<<"$out"
[[ ! -e "$root/mig-mutations.log" ]] || { cat "$root/mig-mutations.log"; echo "the GPU was changed"; exit 1; }
kill -TERM "$pid"; wait "$pid" || true; pid=""
mig_start --allow-mig-reconfigure
FAKE_KUBELET_KEEP=1 "$kubelet" "$root/mig-reg/gpu.tessera.io-reg.sock" team-c 3c9d-44 vision
grep -q '"CUDA_VISIBLE_DEVICES=MIG-' "$root/mig-cdi/gpu.tessera.io-claim_3c9d-44.json" ||
  { cat "$root/mig-cdi/gpu.tessera.io-claim_3c9d-44.json"; echo "the CDI spec does not pin the MIG device"; exit 1; }
grep -q "nvmlDeviceCreateGpuInstanceWithPlacement" "$root/mig-mutations.log"
out="$("$kubelet" "$root/mig-reg/gpu.tessera.io-reg.sock" team-c 3c9d-44 vision)"
grep -q "unprepared 3c9d-44" <<<"$out"
grep -q "nvmlGpuInstanceDestroy" "$root/mig-mutations.log" || { cat "$root/mig-mutations.log"; echo "not destroyed"; exit 1; }
kill -TERM "$pid"; wait "$pid" || true; pid=""
echo "dra_driver_cli: ok"
