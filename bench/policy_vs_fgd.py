#!/usr/bin/env python3
"""Compares a policy with FGD per pod list from `tessera simulate --json` output.

Usage: bench/policy_vs_fgd.py RESULTS.json [POLICY=tessera]
Prints, per pod list, the median unallocated GPU % at arrived 100 % and 130 % of FGD and the
policy, the relative change at 100 %, and flags lists where the policy is worse at either point.
"""
import json
import sys


def main(path, policy):
    rows = {}
    for s in json.load(open(path))["summary"]:
        rows.setdefault(s["pods"], {})[s["policy"]] = s
    print(f"| pod list | fgd @100 | {policy} @100 | change | fgd @130 | {policy} @130 |")
    print("|---|---:|---:|---:|---:|---:|")
    worse = 0
    for pods, r in rows.items():
        if "fgd" not in r or policy not in r:
            continue
        f, t = r["fgd"], r[policy]
        a, b = f["median_unallocated_gpu_pct_at_100"], t["median_unallocated_gpu_pct_at_100"]
        a3, b3 = f["median_unallocated_gpu_pct_at_130"], t["median_unallocated_gpu_pct_at_130"]
        flag = " **worse**" if b > a or b3 > a3 else ""
        worse += bool(flag)
        print(f"| {pods.replace('openb_pod_list_', '')} | {a:.2f} | {b:.2f} | {100 * (b - a) / a:+.1f} % | "
              f"{a3:.2f} | {b3:.2f}{flag} |")
    print(f"\n{worse} list(s) where {policy} is worse than fgd at 100 % or 130 %.")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "tessera")
