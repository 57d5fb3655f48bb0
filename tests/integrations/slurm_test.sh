#!/usr/bin/env bash
# A real two-node Slurm (munge, slurmctld, two slurmd on 127.0.0.1, Debian 12's 22.05 packages)
# with spank_tessera.so in its plugstack and two fake GPUs (character devices with /dev/null's
# numbers, listed by `tessera slurm config --fake-gpus`) and the node side (`tessera node arbiter`
# on the node directory), checking what a user sees:
#   1. `srun --gpu-mem=1GiB` and `sbatch --gpu-mem=1GiB` run the probe under the shim with exactly
#      that limit (the fake CUDA driver refuses the 65th 16 MiB block), also in a job of another
#      user (`srun --uid=nobody`: its counters file is that user's); --gpu-share=25 is the tenant's weight (250 milli) on the
#      GPU's lease board, whose arbiter is alive; a step of two GPUs is one tenant on both, with
#      the limit on each; a job of two nodes (srun -N2) is confined on each node, in each node's
#      own node directory; a MIG gres (--gres=gpu:3g.20gb:1 on the second node, whose third GPU
#      is in MIG mode) with --gpu-isolation=hardware runs on its instance, limited to its memory;
#   2. a job on 2 of 4 shards without options gets half the GPU's memory and a share of 500 milli;
#      two such jobs of two accounts at once share GPU 0 as two tenants of share 500; slurmctld,
#      with tessera's select_cons_tres.so, gives a shard job the GPU with the least room that
#      fits it (best fit); options above the shards' part are refused;
#   3. `srun --gpu-mem=abc` and `sbatch --gpu-share=150` are rejected at submit, naming the option;
#   4. with the node side stopped (no `tessera node arbiter`) or its node directory gone, the task
#      is refused (fail closed), unless --gpu-isolation=none;
#   5. a SIGKILLed task's slot is released when its step ends; a job whose slurmstepd is SIGKILLed
#      with its task, by the job epilog when the job ends; a task that truncates its counters file
#      is killed by the node side;
#   6. so is a running job's after scancel;
#   7. `tessera node arbiter --usage-ledger` metered every account's jobs (slurm-job-<id>), `tessera
#      bill` bills the accounts, and `tessera slurm reconcile` matches a job to its metered usage.
# Usage: slurm_test.sh BUILD_DIR. Exit 77 (ctest: skipped) only when Slurm is not installed or
# the test does not run as root (slurmd must); scripts/setup installs it, so CI runs it. The
# cluster: tests/integrations/slurm_cluster.sh.
set -uo pipefail
build="$(cd "$1" && pwd)"
source "$(dirname "${BASH_SOURCE[0]}")/slurm_cluster.sh"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# The job id a task wrote to file $1 as "job=<id>" once it runs (within 10 s; "" if it never did).
job_id_in() {
  local id=""
  for _ in $(seq 1 100); do
    id="$(sed -n 's/^job=\([0-9]*\).*/\1/p' "$1" 2> /dev/null)"
    [ -n "$id" ] && break
    sleep 0.1
  done
  echo "$id"
}
slurm_cluster_up

# The GPU lines the cluster was configured with (tessera slurm config --fake-gpus A100-40GB:2).
grep -q "^NodeName=$node Name=shard Count=4 File=$T/dev/fakegpu1$" "$T/gres.conf" || fail "gres.conf lacks GPU 1's shards: $(cat "$T/gres.conf")"
nodeline="$(grep '^NodeName=' "$T/gpu-lines.txt")"
[ "$nodeline" = "NodeName=$node Gres=gpu:a100-40gb:2,shard:8" ] || fail "slurm.conf node line: $nodeline"

# 1. --gpu-mem=1GiB is the shim's limit: 64 blocks of 16 MiB fit, the 65th is out of memory.
out="$(srun -A physics --gres=gpu:1 --gpu-mem=1GiB "$probe" init fill:mem:16777216 meminfo 2>&1)"
grep -q "fill family=mem count=64 rc=2" <<< "$out" || fail "--gpu-mem=1GiB not applied: $out"
grep -q "total=1073741824" <<< "$out" || fail "the task does not see 1 GiB: $out"
env_out="$(srun -A physics --gres=gpu:1 --gpu-mem=1GiB sh -c 'echo "$TESSERA_TENANT $LD_PRELOAD $CUDA_VISIBLE_DEVICES"' 2>&1)"
grep -q "^physics\.[0-9]* .*libtessera-shim.so" <<< "$env_out" || fail "tenant/preload in the task: $env_out"
# The node side's GPU table (gpus.tsv) gives the task its GPU's UUID, with no NVML in the task.
uuid0="$(awk -F'\t' '$1 == "0" {print $2}' "$T/node/gpus.tsv" 2> /dev/null)"
[ "$uuid0" = "GPU-fa4e0000-0000-4000-8000-000000000000" ] || fail "the node's GPU table: $(cat "$T/node/gpus.tsv" 2>&1)"
grep -q " $uuid0\$" <<< "$env_out" || fail "the task is not pinned to GPU 0's UUID ($uuid0): $env_out"

# 1d. A step of both GPUs (--gres=gpu:2) is one tenant on both: the task sees them in order, and
# the limit holds on each (64 x 16 MiB on ordinal 0, again on ordinal 1).
out="$(TESSERA_FAKE_CUDA_DEVICES=2 srun -A physics --gres=gpu:2 --gpu-mem=1GiB sh -c \
  "echo gpus=\$TESSERA_SHIM_GPUS; exec '$probe' init fill:mem:16777216 ctx:1 fill:mem:16777216" 2>&1)"
grep -q "^gpus=0,1$" <<< "$out" || fail "a two-GPU step does not see both GPUs: $out"
[ "$(echo "$out" | grep -c "fill family=mem count=64 rc=2")" = 2 ] || fail "a two-GPU step: the limit is not on each GPU: $out"

# 1e. A job on both nodes (srun -p two -N2): a task on each node, each confined there: its tenant
#     is in that node's own directory (node_dir=$T/node-%n) and 64 x 16 MiB fit, the 65th does not;
#     both nodes' step ends release it.
cat > "$T/two_nodes.sh" <<EOF
echo "on=\$SLURMD_NODENAME job=\$SLURM_JOB_ID tenants=\$(grep -c "\"physics.\$SLURM_JOB_ID\"" "$T/node-\$SLURMD_NODENAME/tenants.json")"
exec "$probe" init fill:mem:16777216
EOF
out="$(srun -p two -N2 -A physics --gres=gpu:1 --gpu-mem=1GiB sh "$T/two_nodes.sh" 2>&1)"
grep -q "^on=$node job=[0-9]* tenants=1$" <<< "$out" || fail "srun -N2: no confined task on $node: $out"
grep -q "^on=$node2 job=[0-9]* tenants=1$" <<< "$out" || fail "srun -N2: no confined task on $node2: $out"
[ "$(grep -c "fill family=mem count=64 rc=2" <<< "$out")" = 2 ] || fail "srun -N2: the limit is not on each node: $out"
job="$(sed -n 's/^on=.* job=\([0-9]*\) .*/\1/p' <<< "$out" | head -1)"
for d in "$T/node-$node" "$T/node-$node2"; do
  for _ in $(seq 1 100); do grep -q "physics\.$job\"" "$d/tenants.json" 2> /dev/null || break; sleep 0.1; done
  grep -q "physics\.$job\"" "$d/tenants.json" 2> /dev/null && fail "srun -N2: physics.$job still registered in $d"
done

# 1f. A MIG gres on $node2 (GPU 2 in MIG mode: Slurm's GPUs 2 and 3 are its 3g.20gb instances)
#     with --gpu-isolation=hardware runs on that instance: CUDA_VISIBLE_DEVICES is the MIG UUID of
#     the node's GPU table, no lease board (no TESSERA_SHIM_LEASES), and the shim's limit is the
#     instance's memory (the fake device is larger); hardware isolation on a whole GPU is refused.
mig_line="$(awk -F'\t' '$1 == "mig" {print; exit}' "$T/node-$node2/gpus.tsv" 2> /dev/null)"
mig_uuid="$(cut -f5 <<< "$mig_line")"
mig_mib="$(cut -f7 <<< "$mig_line")"
[[ "$mig_uuid" == MIG-* && "$mig_mib" -gt 0 ]] || fail "$node2's GPU table lists no MIG instance: $(cat "$T/node-$node2/gpus.tsv" 2>&1)"
out="$(TESSERA_FAKE_CUDA_MEM_BYTES=$((64 << 30)) srun -p two -w "$node2" -A physics --gres=gpu:3g.20gb:1 \
  --gpu-isolation=hardware sh -c "echo step=\$SLURM_STEP_GPUS cvd=\$CUDA_VISIBLE_DEVICES leases=\${TESSERA_SHIM_LEASES-none}
    exec '$probe' init meminfo" 2>&1)"
grep -q "^step=2 cvd=$mig_uuid leases=none$" <<< "$out" || fail "a MIG gres does not run on its instance ($mig_uuid): $out"
grep -q "meminfo rc=0 .*total=$((mig_mib << 20))$" <<< "$out" || fail "the instance's $mig_mib MiB are not the limit: $out"
out="$(srun -p two -w "$node2" -A physics --gres=gpu:a100-40gb:1 --gpu-isolation=hardware true 2>&1)" &&
  fail "hardware isolation ran on a whole GPU: $out"
grep -q -- "--gpu-isolation=hardware: Slurm's GPU 0 (GPU 0) is a whole GPU.*--gres=gpu:3g.20gb:1" <<< "$out" ||
  fail "no message asking for a MIG gres: $out"

# 1a. The same through sbatch: the batch step's task is confined too.
sbatch -Q --wait -A bio --gres=gpu:1 --gpu-mem=1GiB -o "$T/batch.out" \
  --wrap "'$probe' init fill:mem:16777216" > /dev/null 2>&1 || fail "sbatch --gpu-mem=1GiB failed: $(cat "$T/batch.out")"
grep -q "fill family=mem count=64 rc=2" "$T/batch.out" || fail "sbatch --gpu-mem=1GiB not applied: $(cat "$T/batch.out")"

# 1b. --gpu-share=25: the tenant is on GPU 0's lease board with weight 250 (the node directory's
#     shares are milli of the GPU), its arbiter alive.
status="$(srun -A physics --gres=gpu:1 --gpu-mem=1GiB --gpu-share=25 \
  sh -c "TESSERA_RUN_DIR='$T/node' '$build/tessera' node status --json -" 2> "$T/status.err")"
got="$(echo "$status" | python3 -c '
import json, sys
g = json.load(sys.stdin)["gpus"][0]
t = g["tenants"][0]
print(g["arbiter_alive"], t["share"], t["limit_bytes"] > 0)' 2>&1)"
[ "$got" = "True 250 True" ] || fail "--gpu-share=25 not on an arbitrated board at 250 milli: $got ($status $(cat "$T/status.err"))"

# 1c. A job of another user (root's srun --uid=nobody): the task runs as nobody, so its tenant's
#     counters file (mode 0600) is nobody's; the shim in the task maps it and applies the limit;
#     the step's end (root) releases the slot.
out="$(srun --uid=nobody -A physics --gres=gpu:1 --gpu-mem=1GiB sh -c \
  "echo job=\$SLURM_JOB_ID; stat -c 'owner=%u mode=%a' '$T/node/counters/'\$TESSERA_SHIM_TENANT; '$probe' init fill:mem:16777216" 2>&1)"
job="$(echo "$out" | sed -n 's/^job=\([0-9]*\).*/\1/p')"
[ -n "$job" ] || fail "nobody's task printed no job id: $out"
grep -q "owner=65534 mode=600" <<< "$out" || fail "the job user's task does not own its counters file: $out"
grep -q "fill family=mem count=64 rc=2" <<< "$out" || fail "--gpu-mem=1GiB not applied to nobody's job: $out"
scancel -u nobody 2> /dev/null  # (a failed srun can leave its allocation holding GPU 0)
released "physics.$job" || fail "nobody's physics.$job is still registered after its step ended: $(cat "$T/node/tenants.json")"

# 2. Two of the GPU's four shards, no options: half of the A100-40GB's memory (NVML: 40537 MiB) and
#    a share of 500 milli, as the node's registry holds them while the task runs.
reg="$(srun -A physics --gres=shard:2 cat "$T/node/tenants.json" 2> "$T/reg.err")"
got="$(echo "$reg" | python3 -c '
import json, sys
t = json.load(sys.stdin)["tenants"][0]
print(t["name"].split(".")[0], t["mem_bytes"], t["share"])' 2>&1)"
[ "$got" = "physics $((40537 * 1048576 / 4 * 2)) 500" ] ||
  fail "shard:2 of 4 is not half an A100-40GB at share 500: $got ($reg $(cat "$T/reg.err"))"

# 2b. Two accounts' shard jobs on one GPU at once: each its own tenant with its half.
mkfifo "$T/hold"
srun -A physics --gres=shard:2 sh -c "cat '$T/hold'" > /dev/null 2>&1 &
held=$!
for _ in $(seq 1 100); do grep -q '"physics\.' "$T/node/tenants.json" 2> /dev/null && break; sleep 0.1; done
status="$(srun -A chem --gres=shard:2 sh -c "TESSERA_RUN_DIR='$T/node' '$build/tessera' node status --json -" 2> "$T/status.err")"
timeout 10 sh -c "echo done > '$T/hold'" || fail "the held physics job is gone: it did not read its fifo"
wait "$held" || fail "the held physics job failed"
got="$(echo "$status" | python3 -c '
import json, sys
gpus = json.load(sys.stdin)["gpus"]
print(" ".join("%d:%s:%d" % (g["gpu"], t["name"].split(".")[0], t["share"]) for g in gpus for t in g["tenants"]))' 2>&1)"
[ "$got" = "0:physics:500 0:chem:500" ] || [ "$got" = "0:chem:500 0:physics:500" ] ||
  fail "two accounts on one GPU: $got ($status $(cat "$T/status.err"))"

# 2c. Which GPU Slurm gives a shard job (docs/slurm.md "Which GPU"): slurmctld runs tessera's
#     select_cons_tres.so (best fit; its log says so). With GPU 0 holding 2 of its 4 shards and
#     GPU 1 holding 3, a shard:1 job goes to GPU 1, the least room that fits, and a shard:2 job
#     then starts on GPU 0. Debian's own plugin (`slurm_select_dir= bash slurm_test.sh build`)
#     takes GPU 0, the lowest index with room (first fit), and the shard:2 job cannot start.
#     bench/slurm_gpu_choice.cc measures the rules on a node with mixed load.
if [ -n "$slurm_select_dir" ]; then
  grep -q "select/cons_tres: init: tessera best fit: " "$T/log/slurmctld.log" ||
    fail "slurmctld did not load $slurm_select_dir/select_cons_tres.so: $(grep -i 'plugin\|select' "$T/log/slurmctld.log" | tail -n 5)"
fi
srun -A physics --gres=shard:2 sh -c "echo job=\$SLURM_JOB_ID gpus=\$SLURM_STEP_GPUS > '$T/a.id'; cat '$T/hold'" \
  > /dev/null 2>&1 &
held_a=$!
[ -n "$(job_id_in "$T/a.id")" ] || fail "the shard:2 job did not start"
srun -A chem --gres=shard:3 sh -c "echo job=\$SLURM_JOB_ID gpus=\$SLURM_STEP_GPUS > '$T/b.id'; cat '$T/hold'" \
  > /dev/null 2>&1 &
held_b=$!
[ -n "$(job_id_in "$T/b.id")" ] || fail "the shard:3 job did not start"
got="$(sed -n 's/.*gpus=//p' "$T/a.id") $(sed -n 's/.*gpus=//p' "$T/b.id")"
[ "$got" = "0 1" ] || fail "shard:2 then shard:3 are not on GPUs 0 and 1: $got"
srun -A bio --gres=shard:1 sh -c "echo job=\$SLURM_JOB_ID gpus=\$SLURM_STEP_GPUS > '$T/c.id'; cat '$T/hold'" \
  > /dev/null 2>&1 &
held_c=$!
[ -n "$(job_id_in "$T/c.id")" ] || fail "the held shard:1 job did not start"
got="$(sed -n 's/.*gpus=//p' "$T/c.id")"
[ "$got" = "1" ] || fail "Slurm gave the shard:1 job GPU '$got', not GPU 1 (best fit; 0 is Debian's first fit)"
got="$(srun --immediate=3 -A bio --gres=shard:2 sh -c 'echo $SLURM_STEP_GPUS' 2>&1)"
[ "$got" = "0" ] || fail "a shard:2 job did not start on GPU 0's two free shards: $got"
# (one writer's close ends every reader's cat; write again for one that opened the fifo late)
for _ in $(seq 1 10); do
  kill -0 "$held_a" 2> /dev/null || kill -0 "$held_b" 2> /dev/null || kill -0 "$held_c" 2> /dev/null || break
  timeout 1 sh -c "echo done > '$T/hold'"
  sleep 0.2
done
wait "$held_a" "$held_b" "$held_c" 2> /dev/null || fail "a held shard job failed"

# 2d. On shards the options may ask for less than the shards give, never more: 1 of 4 shards of
#     the A100-40GB is 10,134 MiB, so --gpu-mem=12GiB is refused with the shards to ask for.
out="$(srun -A physics --gres=shard:1 --gpu-mem=12GiB true 2>&1)" && fail "--gpu-mem above the shards' part ran: $out"
grep -q -- "more than the 1 of GPU 0's 4 shards give .*ask for --gres=shard:2" <<< "$out" ||
  fail "no message naming the shards to ask for: $out"
srun -A physics --gres=shard:1 --gpu-mem=8GiB --gpu-share=25 true > /dev/null 2>&1 ||
  fail "--gpu-mem=8GiB --gpu-share=25 inside 1 of 4 shards was refused"

# 3. Bad values are rejected at submit, naming the option.
out="$(srun --gres=gpu:1 --gpu-mem=abc true 2>&1)" && fail "srun --gpu-mem=abc ran"
grep -q -- "--gpu-mem: 'abc'" <<< "$out" || fail "srun's rejection does not name --gpu-mem: $out"
out="$(sbatch --gres=gpu:1 --gpu-share=150 --wrap true 2>&1)" && fail "sbatch --gpu-share=150 was accepted: $out"
grep -q -- "--gpu-share: '150'" <<< "$out" || fail "sbatch's rejection does not name --gpu-share: $out"

# 4. Fail closed: without the node side the task is refused, unless isolation is none.
kill "$arbiter"; wait "$arbiter" 2> /dev/null
out="$(srun -A physics --gres=gpu:1 --gpu-mem=1GiB true 2>&1)" && fail "a task ran without the arbiter: $out"
grep -q "node side unreachable: no tessera arbiter drives GPU 0" <<< "$out" || fail "no fail-closed message: $out"
srun -A physics --gres=gpu:1 --gpu-isolation=none true > /dev/null 2>&1 || fail "--gpu-isolation=none was refused"
mv "$T/node-$node" "$T/node.away"  # (the arbiter would create it again)
out="$(srun -A physics --gres=gpu:1 --gpu-mem=1GiB true 2>&1)" && fail "a task ran without the node directory: $out"
grep -q "node side unreachable: the node directory" <<< "$out" || fail "no fail-closed message: $out"
mv "$T/node.away" "$T/node-$node"
start_arbiter

# 5. A SIGKILLed task: its slot is released when the step ends (slurm_spank_exit).
out="$(srun -A chem --gres=gpu:1 --gpu-mem=1GiB sh -c 'echo job=$SLURM_JOB_ID; kill -9 $$' 2>&1)"
job="$(echo "$out" | sed -n 's/^job=\([0-9]*\).*/\1/p')"
[ -n "$job" ] || fail "the killed task printed no job id: $out"
released "chem.$job" || fail "chem.$job is still registered after its SIGKILLed step ended: $(cat "$T/node/tenants.json")"

# 5b. The job epilog: a step whose slurmstepd is SIGKILLed with its task runs no slurm_spank_exit;
#     the slot is released by slurm_spank_job_epilog, which slurmd runs when the job ends.
srun -A bio --gres=gpu:1 --gpu-mem=1GiB sh -c "echo job=\$SLURM_JOB_ID > '$T/bio.id'; exec sleep 60" > /dev/null 2>&1 &
held=$!
job="$(job_id_in "$T/bio.id")"
stepd="$(pgrep -f "^slurmstepd: \[$job\.0\]" | head -1)"
if [ -z "$job" ] || [ -z "$stepd" ]; then
  fail "the bio task or its slurmstepd is not there (job '$job', slurmstepd '$stepd')"
else
  grep -q "\"bio\.$job\"" "$T/node/tenants.json" || fail "bio.$job is not registered while it runs"
  task="$(pgrep -P "$stepd" -f '^sleep 60' | head -1)"
  kill -9 "$stepd" $task
  sleep 0.5  # nothing of the step is left to release anything; the entry stays
  grep -q "\"bio\.$job\"" "$T/node/tenants.json" || fail "bio.$job went before its job ended (not by the epilog)"
  scancel "$job"
  released "bio.$job" || fail "the job epilog did not release bio.$job: $(cat "$T/node/tenants.json")"
fi
# srun outlives its SIGKILLed slurmstepd by about 30 s after a SIGTERM (it waits for the step
# to answer); the job is gone, so SIGKILL it.
kill -9 "$held" 2> /dev/null; wait "$held" 2> /dev/null

# 5c. A task that truncates its own counters file (its memory is then no longer accounted) is
#     killed by the node side within about a second; the step fails.
start=$(date +%s)
out="$(srun -A chem --gres=gpu:1 --gpu-mem=1GiB sh -c \
  'truncate -s 0 "$TESSERA_SHIM_COUNTERS/$TESSERA_SHIM_TENANT"; sleep 20; echo survived' 2>&1)" &&
  fail "a task that broke its counters file ran on: $out"
grep -q survived <<< "$out" && fail "a task that broke its counters file was not killed: $out"
[ $(( $(date +%s) - start )) -lt 15 ] || fail "the task that broke its counters file was killed late"
grep -q "tenant chem\.[0-9]* killed (1 process(es)): counters file" "$T/log/arbiter.log" ||
  fail "the arbiter does not say it killed the tenant: $(tail -3 "$T/log/arbiter.log")"

# 6. scancel of a running job releases its slot.
srun -A geo --gres=gpu:1 --gpu-mem=1GiB sh -c "echo job=\$SLURM_JOB_ID > '$T/geo.id'; cat '$T/hold'" > /dev/null 2>&1 &
held=$!
# The task writes geo.id after its join and admission, once it runs: wait for that, not for the
# registry (the join is recorded before the task execs, so the id may not be written yet).
job="$(job_id_in "$T/geo.id")"
if [ -z "$job" ]; then
  fail "the geo task never wrote its job id: $(cat "$T/node/tenants.json")"
  kill "$held"  # (srun cancels the step, so that the wait below cannot hang)
fi
grep -q "\"geo\.$job\"" "$T/node/tenants.json" || fail "geo.$job never registered: $(cat "$T/node/tenants.json")"
[ -n "$job" ] && scancel "$job"
wait "$held"
released "geo.$job" || fail "geo.$job is still registered after scancel: $(cat "$T/node/tenants.json")"

# 7. Per-account metering: the arbiter (stopped and restarted in 4, stopped now, so every open
#    interval is written) metered each account's jobs as slurm-job-<id>, and `tessera bill` bills
#    the accounts.
kill "$arbiter"; wait "$arbiter" 2> /dev/null
got="$(python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
accounts = sorted({r["tenant"] for r in rows})
jobs = all(r["workload"].startswith("slurm-job-") for r in rows)
nodes = sorted({r["node"] for r in rows}); models = sorted({r["model"] for r in rows})
print(" ".join(accounts), jobs, " ".join(nodes), " ".join(models))' "$T/usage.jsonl" 2>&1)"
case "$got" in
  *chem*geo*physics*"True tnode A100-40GB") ;;
  *) fail "the usage ledger does not hold the accounts' jobs: $got ($(head -3 "$T/usage.jsonl" 2> /dev/null))" ;;
esac
printf 'currency: USD\nidle: operator\nprices:\n  A100-40GB: {gpu_hour: 3.00, milli_gpu_hour: 0.0033}\n' > "$T/plan.yaml"
bill="$("$build/tessera" bill --usage "$T/usage.jsonl" --plan "$T/plan.yaml" -o json 2> "$T/bill.err")" ||
  fail "tessera bill on the Slurm ledger failed: $(cat "$T/bill.err")"
got="$(echo "$bill" | python3 -c '
import json, sys
print(" ".join(sorted(i["tenant"] for i in json.load(sys.stdin)["invoices"])))' 2>&1)"
case "$got" in
  *chem*physics*) ;;
  *) fail "the bill does not name the accounts: $got" ;;
esac
# 7b. tessera slurm reconcile: the scancelled geo job (6), as sacct would list it, against the ledger.
printf '%s|geo|5|billing=1,cpu=1,gres/gpu=1,node=1\n' "$job" > "$T/sacct.txt"
rec="$("$build/tessera" slurm reconcile --usage "$T/usage.jsonl" --sacct "$T/sacct.txt" --shards-per-gpu 4 -o json 2>&1)" ||
  fail "tessera slurm reconcile failed: $rec"
got="$(echo "$rec" | python3 -c '
import json, sys
r = json.load(sys.stdin)
j = [x for x in r["jobs"] if x["job_id"] == sys.argv[1]]
print(len(j), j and j[0]["account"], j and j[0]["metered_gpu_s"] > 0, j and "note" not in j[0])' "$job" 2>&1)"
[ "$got" = "1 geo True True" ] || fail "reconcile does not match geo's job $job to its metered usage: $got ($rec)"

if [ "$fails" -gt 0 ]; then
  dump_logs
  echo "slurm_test: $fails check(s) failed"
  exit 1
fi
echo "slurm_test: all checks passed"
