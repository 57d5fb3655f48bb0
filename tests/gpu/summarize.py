#!/usr/bin/env python3
"""Writes OUT_DIR/gpu-results.md from what tests/gpu/run.sh collected.

Reads nvml-probe.json (tessera's NVML adapter), nvidia-smi-query.csv and the mig -lgip/-lgipp
listings. Where NVIDIA's Python bindings (nvidia-ml-py, module pynvml) are installed it also
reads the same fields through them and reports every difference: the bindings are NVIDIA's
own declaration of the C ABI, so agreement checks tessera's hand-written declarations.
Everything here is read-only.

Usage: summarize.py OUT_DIR
"""
import csv
import ctypes
import json
import os
import re
import sys


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def smi_rows(out_dir):
    text = read(os.path.join(out_dir, "nvidia-smi-query.csv"))
    if not text or "," not in text:
        return []
    rows = list(csv.reader(line for line in text.splitlines() if line.strip()))
    header = [h.strip() for h in rows[0]]
    return [dict(zip(header, (c.strip() for c in r))) for r in rows[1:]]


def field(value):
    if isinstance(value, dict) and "error" in value:
        return "error: " + value["error"]
    return str(value)


def placements_text(placements):
    if isinstance(placements, dict):
        return field(placements)
    return ", ".join(f"{p['start']}:{p['size']}" for p in placements)


def pynvml_placements(pynvml, handle, profile_id):
    """[(start, size)] through pynvml, whose signature changed across releases."""
    try:
        return [(p.start, p.size)
                for p in pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile_id)]
    except TypeError:  # newer bindings: (device, profileId, placementsRef, countRef)
        count = ctypes.c_uint(0)
        pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile_id, None,
                                                          ctypes.byref(count))
        array = (pynvml.c_nvmlGpuInstancePlacement_t * count.value)()
        pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile_id, array,
                                                          ctypes.byref(count))
        return [(p.start, p.size) for p in array[:count.value]]


LGIP_ROW = re.compile(r"^\|\s+(\d+)\s+(MIG \S+)\s+(\d+)\s+(\d+)/(\d+)\s+([\d.]+)\s+\S+\s+(\d+)")
LGIPP_ROW = re.compile(r"GPU\s+(\d+)\s+Profile ID\s+(\d+)\s+Placements?\s*:\s*\{([\d,]*)\}:(\d+)")


def smi_crosscheck(out_dir, probe):
    """Compares the probe's profiles with nvidia-smi mig -lgip / -lgipp (Markdown lines)."""
    lgip = read(os.path.join(out_dir, "mig-lgip.txt")) or ""
    lgipp = read(os.path.join(out_dir, "mig-lgipp.txt")) or ""
    ours = {}
    for gpu in probe.get("gpus", []):
        for p in gpu.get("gpu_instance_profiles", []):
            if "error" not in p:
                ours[(gpu["index"], p["id"])] = p
    checked, diffs, seen = 0, [], set()
    for line in lgip.splitlines():
        m = LGIP_ROW.match(line)
        if not m:
            continue
        gpu, name, pid, _, total, gib, sm = m.groups()
        key = (int(gpu), int(pid))
        seen.add(key)
        p = ours.get(key)
        if p is None:
            diffs.append(f"gpu {gpu} profile id {pid} ({name}): listed by nvidia-smi, not by NVML")
            continue
        for what, a, b in (("name", p["name"], name), ("total", p["instance_count"], int(total)),
                           ("SMs", p["multiprocessor_count"], int(sm)),
                           ("GiB", f"{p['memory_mib'] / 1024:.2f}", f"{float(gib):.2f}")):
            checked += 1
            if a != b:
                diffs.append(f"gpu {gpu} profile id {pid} {what}: tessera {a!r} vs -lgip {b!r}")
    for m in LGIPP_ROW.finditer(lgipp):
        gpu, pid, starts, size = m.groups()
        p = ours.get((int(gpu), int(pid)))
        checked += 1
        want = ", ".join(f"{s}:{size}" for s in starts.split(",") if s)
        got = placements_text(p.get("placements", [])) if p else "(none)"
        if got != want:
            diffs.append(f"gpu {gpu} profile id {pid} placements: tessera {got} vs -lgipp {want}")
    missing = [k for k in ours if k not in seen] if lgip.strip() else []
    for gpu, pid in missing:
        diffs.append(f"gpu {gpu} profile id {pid}: reported by NVML, not by nvidia-smi -lgip")
    if checked == 0 and not diffs:
        return ["nvidia-smi listed no MIG profiles to compare."]
    return ([f"Compared {checked} values with nvidia-smi mig -lgip/-lgipp: "
             + ("all agree." if not diffs else f"{len(diffs)} differ:")]
            + [f"- {d}" for d in diffs])


def pynvml_crosscheck(probe):
    """Returns Markdown lines comparing the probe with pynvml, or a note why it did not run."""
    try:
        import pynvml  # NVIDIA's nvidia-ml-py
    except ImportError:
        return ["nvidia-ml-py (pynvml) is not installed: no cross-check."]
    lines = []
    mismatches = []
    checked = 0

    def same(what, ours, theirs):
        nonlocal checked
        checked += 1
        if ours != theirs:
            mismatches.append(f"{what}: tessera {ours!r} vs pynvml {theirs!r}")

    def text(v):
        return v.decode() if isinstance(v, bytes) else v

    try:
        pynvml.nvmlInit()
    except Exception as e:  # noqa: BLE001 - report whatever the bindings raise
        return [f"pynvml could not initialise NVML: {e}"]
    try:
        count = pynvml.nvmlDeviceGetCount()
        same("device count", probe.get("device_count"), count)
        for gpu in probe.get("gpus", []):
            i = gpu["index"]
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            same(f"gpu {i} name", gpu.get("name"), text(pynvml.nvmlDeviceGetName(h)))
            same(f"gpu {i} uuid", gpu.get("uuid"), text(pynvml.nvmlDeviceGetUUID(h)))
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            ours = gpu.get("memory_mib", {})
            same(f"gpu {i} memory total MiB", ours.get("total"), mem.total // (1 << 20))
            # used/free move while other processes run; compare totals only.
            try:
                cur, pend = pynvml.nvmlDeviceGetMigMode(h)
                theirs = {"current": "enabled" if cur else "disabled",
                          "pending": "enabled" if pend else "disabled"}
            except pynvml.NVMLError as e:
                theirs = {"error": str(e)}
            ours_mig = gpu.get("mig_mode", {})
            if "error" in ours_mig or "error" in theirs:
                same(f"gpu {i} MIG mode fails on both", "error" in ours_mig, "error" in theirs)
            else:
                same(f"gpu {i} MIG mode", ours_mig, theirs)
            for prof in gpu.get("gpu_instance_profiles", []):
                idx = prof["profile_index"]
                try:
                    info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(h, idx)
                except pynvml.NVMLError as e:
                    same(f"gpu {i} profile index {idx} fails on both", "error" in prof, True)
                    if "error" in prof:
                        same(f"gpu {i} profile index {idx} error text",
                             str(e) in prof["error"], True)
                    continue
                except Exception as e:  # noqa: BLE001 - e.g. an index the bindings reject
                    lines.append(f"- profile index {idx}: pynvml raised {e!r}; not compared")
                    continue
                if "error" in prof:
                    mismatches.append(f"gpu {i} profile index {idx}: tessera {prof['error']}, "
                                      f"pynvml id {info.id}")
                    continue
                for ours_key, theirs_key in (("id", "id"), ("slice_count", "sliceCount"),
                                             ("instance_count", "instanceCount"),
                                             ("multiprocessor_count", "multiprocessorCount"),
                                             ("memory_mib", "memorySizeMB")):
                    same(f"gpu {i} profile index {idx} {ours_key}", prof.get(ours_key),
                         getattr(info, theirs_key))
                try:
                    same(f"gpu {i} profile index {idx} placements",
                         placements_text(prof.get("placements", [])),
                         ", ".join(f"{a}:{b}" for a, b in pynvml_placements(pynvml, h, info.id)))
                except Exception as e:  # noqa: BLE001
                    lines.append(f"- placements of profile id {info.id}: pynvml raised {e!r}")
    finally:
        pynvml.nvmlShutdown()
    lines.insert(0, f"Compared {checked} fields with nvidia-ml-py "
                    f"{getattr(pynvml, '__version__', '')}: "
                    + ("all agree." if not mismatches else f"{len(mismatches)} differ:"))
    lines[1:1] = [f"- {m}" for m in mismatches]
    return lines


def main():
    out_dir = sys.argv[1]
    md = ["# tessera GPU check: NVML adapter vs nvidia-smi", ""]
    md.append("Read-only: listings and tessera_nvml_probe only; no MIG mode or instance was "
              "changed.")
    md.append("")
    probe_text = read(os.path.join(out_dir, "nvml-probe.json"))
    try:
        probe = json.loads(probe_text) if probe_text else None
    except json.JSONDecodeError as e:
        probe = None
        md.append(f"**nvml-probe.json is not valid JSON** ({e}).")
    smi = smi_rows(out_dir)

    if probe is None:
        md.append("The probe produced no output (see run.log).")
    elif "error" in probe:
        md.append(f"The probe could not use NVML: `{probe['error']}`")
    else:
        md.append(f"NVML library: `{probe.get('library')}`, {probe.get('device_count')} GPU(s).")
        for gpu in probe.get("gpus", []):
            i = gpu["index"]
            row = smi[i] if i < len(smi) else {}
            mem = gpu.get("memory_mib", {})
            mig = gpu.get("mig_mode", {})
            md += ["", f"## GPU {i}: {field(gpu.get('name'))}", ""]
            md += ["| what | tessera (NVML) | nvidia-smi |", "|---|---|---|"]
            md.append(f"| name | {field(gpu.get('name'))} | {row.get('name', '')} |")
            md.append(f"| UUID | {field(gpu.get('uuid'))} | |")
            md.append(f"| driver | | {row.get('driver_version', '')} |")
            total = mem.get("total", field(mem))
            md.append(f"| memory total MiB | {total} | {row.get('memory.total [MiB]', '')} |")
            md.append(f"| memory used MiB | {mem.get('used', '')} | |")
            mig_text = (f"{mig['current']} (pending {mig['pending']})" if "current" in mig
                        else field(mig))
            md.append(f"| MIG mode | {mig_text} | {row.get('mig.mode.current', '')} |")
            md += ["", "GPU-instance profiles reported by NVML:", ""]
            md.append("| index | id | name | compute slices | max count | SMs | memory MiB "
                      "| placements (start:size) |")
            md.append("|---|---|---|---|---|---|---|---|")
            errors = {}
            for p in gpu.get("gpu_instance_profiles", []):
                if "error" in p:
                    errors.setdefault(p["error"].split(": ", 1)[-1].split("): ")[-1],
                                      []).append(str(p["profile_index"]))
                    continue
                md.append(f"| {p['profile_index']} | {p['id']} | {p['name']} | "
                          f"{p['slice_count']} | {p['instance_count']} | "
                          f"{p['multiprocessor_count']} | {p['memory_mib']} | "
                          f"{placements_text(p.get('placements', []))} |")
            for why, idx in errors.items():
                md.append(f"\nProfile indexes {', '.join(idx)}: {why}")
            def count(key):
                value = gpu.get(key, [])
                return field(value) if isinstance(value, dict) else len(value)
            md.append("")
            md.append(f"GPU instances that exist: {count('gpu_instances')}; "
                      f"processes: {count('processes')}; "
                      f"utilisation: {field(gpu.get('utilization_percent'))}")
        md += ["", "## Cross-check with nvidia-smi's MIG listings", ""]
        md += smi_crosscheck(out_dir, probe)
        md += ["", "## Cross-check with NVIDIA's Python bindings", ""]
        md += pynvml_crosscheck(probe)

    for name, title in (("mig-lgip.txt", "nvidia-smi mig -lgip"),
                        ("mig-lgipp.txt", "nvidia-smi mig -lgipp"),
                        ("nvidia-smi-L.txt", "nvidia-smi -L")):
        text = read(os.path.join(out_dir, name))
        md += ["", f"## {title}", "", "```", (text or "(missing)").rstrip(), "```"]
    with open(os.path.join(out_dir, "gpu-results.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
