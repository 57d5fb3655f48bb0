#!/usr/bin/env python3
"""Derives the per-application arrival profiles tessera's multi-tenant scenarios can use from
the Alibaba DLRM v2025 trace (app_name = tenant): GPUs of the instances each application
created on each day of the trace.

Rules: an instance with an empty creation time existed before the trace started and is not an
arrival; day d covers creation times [d x 86400, (d + 1) x 86400) seconds; GPUs = gpu_request.
Applications are ranked as in data/tenants/dlrm-app-skew.csv (GPU-seconds, largest first, then
name), so rank r here is rank r there. Every (application, day) pair is written, zeros included.
Only the output CSV is shipped (data/tenants/dlrm-app-arrivals.csv); run this to regenerate it:

  scripts/derive_tenant_arrivals.py /path/to/disaggregated_DLRM_trace.csv > data/tenants/dlrm-app-arrivals.csv
"""
import csv
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from derive_tenant_skew import rank_apps  # noqa: E402  (the same ranking as the skew file)

DAY = 86400


def main(path):
    rows = list(csv.DictReader(open(path, newline="")))
    created = defaultdict(lambda: defaultdict(int))
    last_day = 0
    for r in rows:
        g = int(float(r["gpu_request"] or 0))
        if g == 0 or not r["creation_time"]:
            continue
        day = int(float(r["creation_time"])) // DAY
        created[r["app_name"]][day] += g
        last_day = max(last_day, day)
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["rank", "app_name", "day", "gpus_created"])
    for i, (app, _) in enumerate(rank_apps(rows), 1):
        for day in range(last_day + 1):
            out.writerow([i, app, day, created[app][day]])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else
         "../shared/traces/alibaba-gpu-v2025-dlrm/disaggregated_DLRM_trace.csv")
