#!/usr/bin/env python3
"""Compares tessera's built-in GPU catalog (src/core/gpu_catalog_data.inc) with what NVML
reported on a real GPU (the JSON of tessera_nvml_probe, written by tests/gpu/run.sh).

Usage: tests/gpu/compare_catalog.py PROBE.json CATALOG_MODEL (e.g. H200-141GB)
Prints one line with the counts and one line per difference; exit 1 if anything differs.
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(probe_path, model):
    probe = json.load(open(probe_path))
    inc = open(os.path.join(HERE, "..", "..", "src", "core", "gpu_catalog_data.inc")).read()
    start = inc.index(f'"{model}"')
    block = inc[start:inc.index("models.push_back", start)]
    cat = {}
    for m in re.finditer(r'push_back\(\{"([^"]+)", (\d+), (\d+), (\d+), (\d+), (-?\d+), \{([^}]*)\}, (\d+), MiB\{(\d+)\}',
                         block):
        name, cs, _ms, mx, idx, pid, starts, size, mib = m.groups()
        cat[int(idx)] = dict(name=name, cs=int(cs), mx=int(mx), pid=int(pid),
                             starts=[int(x) for x in starts.split(",")], size=int(size), mib=int(mib))
    total = int(re.search(r"m.memory = MiB\{(\d+)\}", block).group(1))
    gpu = probe["gpus"][0]
    agree, diff = 0, []

    def check(what, ours, real):
        nonlocal agree
        if ours == real:
            agree += 1
        else:
            diff.append(f"{what}: catalog {ours}, NVML {real}")

    check("total memory MiB", total, gpu["memory_mib"]["total"])
    seen = set()
    for p in gpu["gpu_instance_profiles"]:
        if "id" not in p:
            continue  # profile index not supported by this GPU
        c = cat.get(p["profile_index"])
        if c is None:
            diff.append(f"NVML profile index {p['profile_index']} ({p['name']}) is not in the catalog")
            continue
        seen.add(p["profile_index"])
        check(f"{c['name']} name", "MIG " + c["name"], p["name"])
        check(f"{c['name']} profile id", c["pid"], p["id"])
        check(f"{c['name']} compute slices", c["cs"], p["slice_count"])
        check(f"{c['name']} max count", c["mx"], p["instance_count"])
        check(f"{c['name']} memory MiB", c["mib"], p["memory_mib"])
        check(f"{c['name']} placements", [(s, c["size"]) for s in c["starts"]],
              [(x["start"], x["size"]) for x in p["placements"]])
    for idx, c in cat.items():
        if idx not in seen:
            diff.append(f"catalog profile {c['name']} (NVML index {idx}) is not reported by the GPU")
    print(f"catalog {model} vs NVML on {gpu['name']}: {agree} values agree, {len(diff)} differ")
    for d in diff:
        print("- " + d)
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
