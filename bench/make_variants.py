#!/usr/bin/env python3
"""Writes synthetic variants of the bundled default pod list, for checking that a placement
policy generalises beyond the 17 lists of the FGD paper (docs/placement.md, "Robustness").

Usage: bench/make_variants.py OUT_DIR
Writes openb_pod_list_<name>.csv files, all resampled from the default list with a fixed seed:
  cpu000 / cpu072 / cpu300 / cpu350  share of CPU-only tasks 0 / 7.2 / 30 / 35 %
  gpushare20 / gpushare90            share of the GPU request from sharing tasks 20 / 90 %
  gpuspec05 / gpuspec45              share of GPU tasks restricted to models (drawn from the
                                     gpuspec33 list's restrictions) 5 / 45 %
  mix_cpu250_spec33                  25 % CPU-only tasks and 33 % restricted GPU tasks
These are tessera's own constructions, not the upstream variants of the same names.
"""
import csv
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CSV = os.path.join(HERE, "..", "data", "alibaba-gpu-2023", "csv")


def gpu_of(r):
    n = int(r["num_gpu"])
    return n * int(r["gpu_milli"]) if n == 1 else n * 1000


def main(out):
    os.makedirs(out, exist_ok=True)
    rows = list(csv.DictReader(open(os.path.join(CSV, "openb_pod_list_default.csv"))))
    header = list(rows[0].keys())
    cpu = [r for r in rows if r["num_gpu"] == "0"]
    gpu = [r for r in rows if r["num_gpu"] != "0"]
    share = [r for r in gpu if r["num_gpu"] == "1" and int(r["gpu_milli"]) < 1000]
    whole = [r for r in gpu if r not in share]
    specs = [r["gpu_spec"] for r in csv.DictReader(open(os.path.join(CSV, "openb_pod_list_gpuspec33.csv")))
             if r["gpu_spec"]]
    rnd = random.Random(7)
    n = len(rows)

    def write(name, lst):
        with open(os.path.join(out, f"openb_pod_list_{name}.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=header)
            w.writeheader()
            for i, r in enumerate(lst):
                r = dict(r)
                r["name"] = f"openb-pod-{i:05d}"
                w.writerow(r)

    for frac, name in [(0.0, "cpu000"), (0.30, "cpu300"), (0.35, "cpu350"), (0.072, "cpu072")]:
        k = int(n * frac)
        write(name, [rnd.choice(cpu) for _ in range(k)] + [rnd.choice(gpu) for _ in range(n - k)])
    total = sum(gpu_of(r) for r in gpu)
    for target, name in [(0.2, "gpushare20"), (0.9, "gpushare90")]:
        lst, sh, wh = list(cpu), 0, 0
        while sh + wh < total:
            if sh < target * (sh + wh + 1):
                r = rnd.choice(share)
                sh += gpu_of(r)
            else:
                r = rnd.choice(whole)
                wh += gpu_of(r)
            lst.append(r)
        write(name, lst)
    for frac, name in [(0.05, "gpuspec05"), (0.45, "gpuspec45")]:
        lst = []
        for r in rows:
            r = dict(r)
            if r["num_gpu"] != "0" and rnd.random() < frac:
                r["gpu_spec"] = rnd.choice(specs)
            lst.append(r)
        write(name, lst)
    k = int(n * 0.25)
    lst = []
    for r in [rnd.choice(cpu) for _ in range(k)] + [rnd.choice(gpu) for _ in range(n - k)]:
        r = dict(r)
        if r["num_gpu"] != "0" and rnd.random() < 0.33:
            r["gpu_spec"] = rnd.choice(specs)
        lst.append(r)
    write("mix_cpu250_spec33", lst)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out/variants")
