#!/usr/bin/env bash
# Slurm's own accounting against tessera's metering (issue 33), with a real sacct: the two-node
# Slurm of slurm_cluster.sh plus slurmdbd (Debian 12's 22.05) on a MariaDB server of its own
# (throwaway data directory, 127.0.0.1, grant tables skipped), accounting gres/gpu and gres/shard.
# Checks what an operator does at the end of a month:
#   1. two jobs of two accounts (physics on 2 of GPU 0's 4 shards, chem on a whole GPU) run at
#      once under spank_tessera.so and are metered by `tessera node arbiter --usage-ledger`;
#   2. sacct lists them with their accounts, ElapsedRaw and AllocTRES (gres/shard=2, gres/gpu=1),
#      in the parsable form docs/slurm.md gives;
#   3. `tessera slurm reconcile` on that very output matches each job to its metered usage: same
#      account, Slurm's GPU-seconds = GPUs x ElapsedRaw (0.5 and 1 GPU), tessera's within 2 s of
#      the job's GPUs x elapsed (metering runs from the task's join to its release), no note.
# Usage: slurm_accounting_test.sh BUILD_DIR. Exit 77 (ctest: skipped) only when Slurm, slurmdbd or
# MariaDB is not installed or the test does not run as root; scripts/setup installs them, so CI
# runs it. About 15 s.
set -uo pipefail
build="$(cd "$1" && pwd)"
for tool in slurmdbd mariadbd mariadb-install-db sacct sacctmgr; do
  if ! command -v "$tool" > /dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ]; then
    echo "SKIPPED: $tool is not installed (scripts/setup installs slurmdbd mariadb-server slurm-client)"
    exit 77
  fi
done
source "$(dirname "${BASH_SOURCE[0]}")/slurm_cluster.sh"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# Ports of our own, away from slurm_cluster.sh's (20000 + 3 per process).
db_port=$((40000 + ($$ % 2000) * 2))
dbd_port=$((db_port + 1))

# Run by slurm_cluster_up once munged runs and slurm.conf is written: MariaDB, slurmdbd, the
# cluster, its accounts and root as their user; slurm.conf then points slurmctld at slurmdbd.
slurm_before_ctld() {
  mariadb-install-db --user=root --datadir="$T/db" --auth-root-authentication-method=normal --skip-test-db \
    > "$T/log/mariadb-install.log" 2>&1 || { echo "FAIL: mariadb-install-db"; tail -5 "$T/log/mariadb-install.log"; return 1; }
  mariadbd --user=root --datadir="$T/db" --socket="$T/db.sock" --port="$db_port" --bind-address=127.0.0.1 \
    --pid-file="$T/mariadb.pid" --log-error="$T/log/mariadb.log" --skip-grant-tables --skip-log-bin \
    --innodb-buffer-pool-size=64M > /dev/null 2>&1 &
  pids+=($!)
  for _ in $(seq 1 200); do [ -S "$T/db.sock" ] && break; sleep 0.1; done
  [ -S "$T/db.sock" ] || { echo "FAIL: MariaDB did not start"; tail -5 "$T/log/mariadb.log"; return 1; }
  cat > "$T/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$T/munge/sock
DbdHost=$host
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=root
StorageLoc=tessera_acct
PidFile=$T/slurmdbd.pid
LogFile=$T/log/slurmdbd.log
EOF
  chmod 600 "$T/slurmdbd.conf"  # slurmdbd refuses a configuration others can read
  # AccountingStoragePass names the munge socket the clients (sacct, sacctmgr) and slurmctld use
  # towards slurmdbd; AuthInfo's is not used there.
  cat >> "$T/slurm.conf" <<EOF
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$dbd_port
AccountingStoragePass=$T/munge/sock
AccountingStorageTRES=gres/gpu,gres/shard
JobAcctGatherType=jobacct_gather/none
EOF
  slurmdbd -D > /dev/null 2>&1 &  # slurmdbd.conf is found next to $SLURM_CONF
  pids+=($!)
  local up=0
  # The first start creates the database's tables: seconds on a slow disk.
  for _ in $(seq 1 300); do
    if sacctmgr -n list cluster > /dev/null 2> "$T/log/sacctmgr.err"; then up=1; break; fi
    sleep 0.2
  done
  [ "$up" = 1 ] || {
    echo "FAIL: slurmdbd did not answer within 60 s: $(cat "$T/log/sacctmgr.err")"
    tail -20 "$T/log/slurmdbd.log"
    return 1
  }
  sacctmgr -i add cluster tessera > /dev/null &&
    sacctmgr -i add account physics,chem > /dev/null &&
    sacctmgr -i add user root account=physics,chem defaultaccount=physics > /dev/null ||
    { echo "FAIL: sacctmgr could not add the cluster and its accounts"; return 1; }
}
slurm_cluster_up

# 1. Two accounts' jobs at once: physics on 2 of GPU 0's 4 shards, chem on GPU 1 (first fit).
srun -A physics --gres=shard:2 sh -c "echo job=\$SLURM_JOB_ID > '$T/physics.id'; sleep 3" > "$T/physics.out" 2>&1 &
a=$!
srun -A chem --gres=gpu:1 --gpu-mem=1GiB sh -c "echo job=\$SLURM_JOB_ID > '$T/chem.id'; sleep 3" > "$T/chem.out" 2>&1 &
b=$!
wait "$a" || fail "the physics job failed: $(cat "$T/physics.out")"
wait "$b" || fail "the chem job failed: $(cat "$T/chem.out")"
physics="$(sed -n 's/^job=//p' "$T/physics.id" 2> /dev/null)"
chem="$(sed -n 's/^job=//p' "$T/chem.id" 2> /dev/null)"
[ -n "$physics" ] && [ -n "$chem" ] || fail "the jobs did not say their ids: '$physics' '$chem'"

# 2. sacct lists both once slurmctld has sent their ends to slurmdbd (asynchronously).
format=JobIDRaw,Account,ElapsedRaw,AllocTRES
listed=""
for _ in $(seq 1 100); do
  listed="$(sacct -a -X -P -n --format="$format,State" -j "$physics,$chem" 2> "$T/sacct.err")"
  [ "$(echo "$listed" | grep -c '|COMPLETED$')" = 2 ] && break
  sleep 0.2
done
[ "$(echo "$listed" | grep -c '|COMPLETED$')" = 2 ] || fail "sacct does not list both jobs as completed: $listed $(cat "$T/sacct.err")"
sacct -a -X -P -n --format="$format" -j "$physics,$chem" > "$T/sacct.txt" 2> "$T/sacct.err" ||
  fail "sacct failed: $(cat "$T/sacct.err")"
grep -q "^$physics|physics|[0-9]*|.*gres/shard=2" "$T/sacct.txt" || fail "sacct's line of the physics job: $(cat "$T/sacct.txt")"
grep -q "^$chem|chem|[0-9]*|.*gres/gpu=1" "$T/sacct.txt" || fail "sacct's line of the chem job: $(cat "$T/sacct.txt")"

# 3. The arbiter stopped (every open interval written), reconcile sacct's own output.
released "physics.$physics" && released "chem.$chem" || fail "the jobs are still registered: $(cat "$T/node/tenants.json")"
kill "$arbiter"; wait "$arbiter" 2> /dev/null
rec="$("$build/tessera" slurm reconcile --usage "$T/usage.jsonl" --sacct "$T/sacct.txt" --shards-per-gpu 4 -o json 2>&1)" ||
  fail "tessera slurm reconcile failed: $rec"
got="$(echo "$rec" | python3 -c '
import json, sys
r = json.load(sys.stdin)
elapsed = {l.split("|")[0]: int(l.split("|")[2]) for l in open(sys.argv[3]) if l.strip()}
out = []
for job, account, gpus in ((sys.argv[1], "physics", 0.5), (sys.argv[2], "chem", 1.0)):
    rows = [x for x in r["jobs"] if x["job_id"] == job]
    if len(rows) != 1:
        out.append("job %s: %d rows" % (job, len(rows)))
        continue
    x = rows[0]
    slurm = gpus * elapsed[job]
    if x["account"] != account: out.append("job %s: account %s" % (job, x["account"]))
    if abs(x["slurm_gpu_s"] - slurm) > 1e-6: out.append("job %s: slurm %s, not %s" % (job, x["slurm_gpu_s"], slurm))
    if not (slurm - 2 * gpus <= x["metered_gpu_s"] <= slurm + 1e-6):
        out.append("job %s: metered %s against %s" % (job, x["metered_gpu_s"], slurm))
    if "note" in x: out.append("job %s: note %s" % (job, x["note"]))
print("; ".join(out) or "ok")' "$physics" "$chem" "$T/sacct.txt" 2>&1)"
[ "$got" = ok ] || fail "reconcile against the real sacct: $got ($rec; sacct: $(cat "$T/sacct.txt"))"

if [ "$fails" -gt 0 ]; then
  dump_logs
  echo "slurm_accounting_test: $fails check(s) failed"
  exit 1
fi
echo "slurm_accounting_test: all checks passed (sacct: $(tr '\n' ' ' < "$T/sacct.txt"); reconcile: $(echo "$rec" | python3 -c '
import json, sys
print(", ".join("job %s %s slurm %.1f GPU-s metered %.1f" % (x["job_id"], x["account"], x["slurm_gpu_s"], x["metered_gpu_s"]) for x in json.load(sys.stdin)["jobs"]))'))"
