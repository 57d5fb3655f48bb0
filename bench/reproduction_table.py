#!/usr/bin/env python3
"""Turns `tessera simulate --json` output into the Markdown tables of docs/placement.md.

Usage: bench/reproduction_table.py out/reproduce.json
Prints one row per pod list: tessera's median unallocated GPU % at arrived=100 % per policy,
with the artifact's median and the tolerance, and marks any miss.
"""
import json
import sys

POLICIES = ["random", "dotproduct", "gpuclustering", "gpupacking", "bestfit", "fgd"]


def main(path):
    with open(path) as f:
        data = json.load(f)
    rows = {}
    for s in data["summary"]:
        rows.setdefault(s["pods"], {})[s["policy"]] = s
    print("| pod list | " + " | ".join(POLICIES) + " |")
    print("|---|" + "---:|" * len(POLICIES))
    misses = 0
    total = 0
    for pods, by_policy in rows.items():
        cells = []
        for p in POLICIES:
            s = by_policy.get(p)
            if s is None:
                cells.append("-")
                continue
            ours = s["median_unallocated_gpu_pct_at_100"]
            ref = s.get("artifact_median_unallocated_gpu_pct_at_100")
            if ref is None:
                cells.append(f"{ours:.2f}")
                continue
            total += 1
            ok = s["within_tolerance"]
            misses += not ok
            mark = "" if ok else " **miss**"
            cells.append(f"{ours:.2f} ({ref:.2f} ±{s['tolerance_pct']:.2f}){mark}")
        print(f"| {pods.replace('openb_pod_list_', '')} | " + " | ".join(cells) + " |")
    print()
    print(f"{total - misses} of {total} (list, policy) medians within tolerance.")


if __name__ == "__main__":
    main(sys.argv[1])
