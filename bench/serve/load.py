#!/usr/bin/env python3
"""Helpers for bench/serve/run.sh against a running `tessera serve` (stdlib only).

  load.py seed PORT TOKEN TENANT N          create TENANT and N pending workloads (4 client threads)
  load.py cluster PORT TOKEN NODES GPUS     register NODES fake nodes of GPUS H100-80GB each
  load.py placed PORT TOKEN TENANT N GAP_MS submit N workloads GAP_MS apart on an idle cluster and
                                            print the submit-to-placed p50/p99 (ms, the server's
                                            own clock: the 'placed' event minus created_ms)
  load.py rss PID SECONDS PORT TOKEN        mixed load (reads, submits, cancels) for SECONDS while
                                            sampling the daemon's RSS; prints first/last/max MiB
"""
import http.client
import json
import statistics
import sys
import threading
import time


def call(port, token, method, path, body=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    h = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    h.update(headers or {})
    c.request(method, path, json.dumps(body) if body is not None else None, h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, (json.loads(data) if data else {})


def seed(port, token, tenant, n):
    call(port, token, "POST", "/v1/tenants", {"name": tenant})
    def worker(k):
        for i in range(k, n, 4):
            s, b = call(port, token, "POST", "/v1/workloads",
                        {"tenant": tenant, "gpus": 1, "qos": "Burstable", "name": "w%d" % i},
                        {"Idempotency-Key": "seed-%d" % i})
            assert s == 201, (s, b)
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]


def cluster(port, token, nodes, gpus):
    s, b = call(port, token, "POST", "/v1/tokens", {"role": "node-agent"})
    agent = b["token"]
    for n in range(nodes):
        inv = {"cpu_milli": 256000, "memory_mib": 2097152,
               "gpus": [{"index": g, "uuid": "GPU-%d-%d" % (n, g), "model": "H100-80GB"} for g in range(gpus)]}
        s, b = call(port, agent, "POST", "/v1/nodes/node-%04d/register" % n, inv)
        assert s == 200, (s, b)
    return agent


def placed(port, token, tenant, n, gap_ms):
    call(port, token, "POST", "/v1/tenants", {"name": tenant})
    ids = []
    for i in range(n):
        s, b = call(port, token, "POST", "/v1/workloads",
                    {"tenant": tenant, "gpus": 1, "gpu_milli": 250, "gpu_mem_mib": 8192, "qos": "Burstable"})
        assert s == 201, (s, b)
        ids.append(b["id"])
        time.sleep(gap_ms / 1000.0)
    time.sleep(1.5)
    waits = []
    for i in ids:
        s, w = call(port, token, "GET", "/v1/workloads/%d" % i)
        ev = [e for e in w.get("events", []) if e["kind"] == "placed"]
        assert ev, w
        waits.append(ev[0]["time_ms"] - w["created_ms"])
    waits.sort()
    p = lambda q: waits[min(len(waits) - 1, int(q * len(waits)))]
    print("submit-to-placed over %d submits: p50 %d ms, p99 %d ms, max %d ms" % (n, p(0.5), p(0.99), waits[-1]))


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def rss(pid, seconds, port, token):
    call(port, token, "POST", "/v1/tenants", {"name": "mixed"})
    stop = time.time() + seconds
    counts = {"get": 0, "submit": 0, "cancel": 0}
    def worker(k):
        i = 0
        last = None
        while time.time() < stop:
            i += 1
            if i % 4 == 0:
                s, b = call(port, token, "POST", "/v1/workloads", {"tenant": "mixed", "gpus": 1, "qos": "Burstable"},
                            {"Idempotency-Key": "mix-%d-%d" % (k, i)})
                last = b.get("id")
                counts["submit"] += 1
            elif i % 4 == 1 and last:
                call(port, token, "DELETE", "/v1/workloads/%d" % last)
                counts["cancel"] += 1
            else:
                call(port, token, "GET", "/v1/workloads?tenant=mixed&limit=100")
                counts["get"] += 1
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    [t.start() for t in ts]
    samples = []
    t0 = time.time()
    while time.time() < stop:
        samples.append((time.time() - t0, rss_mib(pid)))
        time.sleep(5)
    [t.join() for t in ts]
    samples.append((time.time() - t0, rss_mib(pid)))
    # Steady state: compare the second minute's RSS with the last one's (the first minute warms caches).
    warm = [m for t, m in samples if 60 <= t <= 120] or [samples[0][1]]
    end = [m for t, m in samples if t >= samples[-1][0] - 60]
    print("rss over %d s of mixed load (%s): start %.1f MiB, after warm-up %.1f MiB, end %.1f MiB, max %.1f MiB, growth %.1f %%"
          % (seconds, counts, samples[0][1], statistics.median(warm), statistics.median(end),
             max(m for _, m in samples), 100.0 * (statistics.median(end) / statistics.median(warm) - 1)))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "seed": seed(int(args[0]), args[1], args[2], int(args[3]))
    elif cmd == "cluster": cluster(int(args[0]), args[1], int(args[2]), int(args[3]))
    elif cmd == "placed": placed(int(args[0]), args[1], args[2], int(args[3]), int(args[4]))
    elif cmd == "rss": rss(int(args[0]), int(args[1]), int(args[2]), args[3])
    else: sys.exit(__doc__)
