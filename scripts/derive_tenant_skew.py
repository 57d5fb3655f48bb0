#!/usr/bin/env python3
"""Derives the tenant skew tessera's multi-tenant scenarios use from the Alibaba DLRM v2025
trace (app_name = tenant): GPU-seconds per application over the trace window.

Rules (as the trace's SOURCE.md prescribes): an instance with an empty creation/scheduled time
was present at t=0; one with an empty deletion time runs to the trace end (the largest time in
the file). GPU-seconds = gpu_request x (end - start). Only the output CSV is shipped
(data/tenants/dlrm-app-skew.csv); run this to regenerate it:

  scripts/derive_tenant_skew.py /path/to/disaggregated_DLRM_trace.csv > data/tenants/dlrm-app-skew.csv
"""
import csv
import sys
from collections import defaultdict


def rank_apps(rows):
    """[(app_name, gpu_seconds)], largest first, then by name (the rank order of the output)."""
    end = 0
    for r in rows:
        for k in ("creation_time", "scheduled_time", "deletion_time"):
            if r[k]:
                end = max(end, int(float(r[k])))
    gpu_seconds = defaultdict(float)
    for r in rows:
        g = int(float(r["gpu_request"] or 0))
        if g == 0:
            continue
        start = r["scheduled_time"] or r["creation_time"] or "0"
        stop = r["deletion_time"] or str(end)
        gpu_seconds[r["app_name"]] += g * max(0, int(float(stop)) - int(float(start)))
    return sorted(gpu_seconds.items(), key=lambda kv: (-kv[1], kv[0]))


def main(path):
    rows = list(csv.DictReader(open(path, newline="")))
    ranked = rank_apps(rows)
    total = sum(gs for _, gs in ranked)
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["rank", "app_name", "gpu_seconds", "share"])
    for i, (app, gs) in enumerate(ranked, 1):
        out.writerow([i, app, int(gs), f"{gs / total:.6f}"])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else
         "../shared/traces/alibaba-gpu-v2025-dlrm/disaggregated_DLRM_trace.csv")
