#!/usr/bin/env python3
"""A PyTorch tenant for tests/gpu/shim_run.sh section 2 (issue 29 section 1): bf16 matmuls of
N x N x N back to back on GPU 0 for SECONDS, counted by GPU time.

    torch_matmul.py N SECONDS [--barrier DIR:COUNT]

It warms up (cuBLAS handle, 13 matmuls), times one matmul alone-ish (10 in a row, events), then
floods the current stream: batches of ~1 ms of matmuls, one timing event after each batch, at most
~32 ms (and 1,000 matmuls) queued. With --barrier it first writes DIR/ready.<pid> and waits until
COUNT such files exist, so that the tenants of a pair start their windows together. A batch counts
when its event completed within SECONDS of GPU time after the window's start event, so neither a
slow host nor the final drain counts. Prints one line:

    matmul n=2048 count=35288 seconds=5.000 per_s=7057.6 ms_each=0.0271 batch=36 torch=2.11.0

Worked example: n=8192, a matmul takes 1.65 ms alone, so batch = 1 and at most 19 batches are
queued; a tenant that holds 30 % of the GPU for 5 s completes ~909 matmuls (per_s ~182).
Exit code 0; 1 when CUDA is not available.
"""
import argparse
import collections
import os
import sys
import time


def barrier(spec):
    directory, count = spec.rsplit(":", 1)
    count = int(count)
    open(os.path.join(directory, "ready.%d" % os.getpid()), "w").close()
    give_up = time.monotonic() + 120
    while sum(1 for f in os.listdir(directory) if f.startswith("ready.")) < count:
        if time.monotonic() > give_up:
            print("torch_matmul: barrier %s: not all %d ready after 120 s; starting alone" % (directory, count),
                  file=sys.stderr)
            return
        time.sleep(0.0002)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int)
    ap.add_argument("seconds", type=float)
    ap.add_argument("--barrier", default="")
    args = ap.parse_args()

    import torch  # noqa: PLC0415 (after the arguments: a usage error needs no CUDA)

    if not torch.cuda.is_available():
        print("matmul n=%d error=cuda_not_available torch=%s" % (args.n, torch.__version__))
        return 1
    dev = torch.device("cuda", 0)
    a = torch.randn(args.n, args.n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(args.n, args.n, device=dev, dtype=torch.bfloat16)
    c = torch.empty(args.n, args.n, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0.record()
    for _ in range(10):
        torch.matmul(a, b, out=c)
    t1.record()
    t1.synchronize()
    ms_each = max(t0.elapsed_time(t1) / 10, 1e-3)
    batch = max(1, int(1.0 / ms_each))
    max_batches = max(2, min(int(32.0 / (batch * ms_each)), 1000 // batch))
    if args.barrier:
        barrier(args.barrier)

    start = torch.cuda.Event(enable_timing=True)
    start.record()
    window_ms = args.seconds * 1000.0
    pending = collections.deque()
    spare = []
    count = 0

    def retire(wait):
        nonlocal count
        if not pending:
            return False
        event = pending[0]
        if wait:
            event.synchronize()
        elif not event.query():
            return False
        if start.elapsed_time(event) <= window_ms:
            count += batch
        spare.append(pending.popleft())
        return True

    host_end = time.monotonic() + args.seconds
    while time.monotonic() < host_end:
        while retire(False):
            pass
        if len(pending) >= max_batches:
            time.sleep(0.00005)
            continue
        for _ in range(batch):
            torch.matmul(a, b, out=c)
        event = spare.pop() if spare else torch.cuda.Event(enable_timing=True)
        event.record()
        pending.append(event)
    while retire(True):
        pass
    print("matmul n=%d count=%d seconds=%.3f per_s=%.1f ms_each=%.4f batch=%d torch=%s" %
          (args.n, count, args.seconds, count / args.seconds, ms_each, batch, torch.__version__))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
