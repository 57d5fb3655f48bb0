#!/usr/bin/env python3
"""Checks the module boundaries of the source tree against cmake/module_deps.txt.

    scripts/check_modules.py [--root DIR]

Rules (the design's module table; one CMake target per module):
  * A file of module M (src/M/**, include/tessera/M/**) includes public headers
    ("tessera/D/...") only of M itself and of the modules M may use, directly or through
    the modules it uses (cmake/module_deps.txt).
  * No file outside src/M/ includes M's private headers ("src/M/..."), and public headers
    include no private header at all. The shim (src/enforce/shim/) is its own module, "shim";
    the Kubernetes integration (src/integrations/k8s/, include/tessera/integrations/k8s/) is
    "k8s" (it links gRPC, which the Slurm plugin must not).
  * tools/ (the CLI) and bench/ include public headers only.
  * sched does no file I/O: no <fstream>, <filesystem>, <cstdio>, yaml-cpp or nlohmann there.
Tests (tests/) may include anything: they white-box the module they test.

Exit status: 0 clean, 1 with one line per violation (file:line: what), 2 on a bad table.
Worked example: src/placement/foo.cc with `#include "tessera/sched/job.h"` prints
  src/placement/foo.cc:3: placement may not use sched (cmake/module_deps.txt allows: core partition)
and exits 1.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_common  # noqa: E402  (the shared command-line frame)

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
NO_FILE_IO = {"sched": ["fstream", "filesystem", "cstdio", "stdio.h", "yaml-cpp/", "nlohmann/"]}
SOURCE_ENDINGS = (".cc", ".h", ".cpp", ".hpp")


def read_table(path):
    table = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if ":" not in line:
                sys.exit(f"{path}:{number}: expected 'module: deps...'")
            name, deps = line.split(":", 1)
            table[name.strip()] = deps.split()
    for name, deps in table.items():
        for d in deps:
            if d not in table:
                print(f"{path}: {name} uses unknown module {d}", file=sys.stderr)
                sys.exit(2)
    return table


def closure(table, name):
    seen, todo = set(), list(table[name])
    while todo:
        d = todo.pop()
        if d not in seen:
            seen.add(d)
            todo.extend(table[d])
    return seen


def module_of(rel):
    """The module a path belongs to, or None (tests, scripts, ...), or 'tools'/'bench'."""
    parts = rel.split("/")
    if parts[0] == "src" and len(parts) > 2:
        if parts[1] == "enforce" and parts[2] == "shim":
            return "shim"
        if parts[1] == "integrations" and parts[2] == "k8s":
            return "k8s"
        return parts[1]
    if parts[:2] == ["include", "tessera"] and len(parts) > 3:
        if parts[2] == "integrations" and parts[3] == "k8s" and len(parts) > 4:
            return "k8s"
        return parts[2]
    if parts[0] in ("tools", "bench"):
        return parts[0]
    return None


def check(root):
    table = read_table(os.path.join(root, "cmake", "module_deps.txt"))
    problems = []
    for top in ("src", "include", "tools", "bench"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(SOURCE_ENDINGS):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                mod = module_of(rel)
                if mod is None:
                    continue
                if mod not in ("tools", "bench") and mod not in table:
                    problems.append(f"{rel}:1: module '{mod}' is not in cmake/module_deps.txt")
                    continue
                public_header = rel.startswith("include/")
                allowed = None if mod in ("tools", "bench") else closure(table, mod) | {mod}
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = m.group(2)
                        where = f"{rel}:{number}: "
                        if m.group(1) == "<":
                            for bad in NO_FILE_IO.get(mod, []):
                                if target == bad or target.startswith(bad):
                                    problems.append(where + f"{mod} does no file I/O: <{target}> belongs in the config layer")
                            continue
                        if target.startswith("nlohmann/") or target.startswith("yaml-cpp/"):
                            for bad in NO_FILE_IO.get(mod, []):
                                if target.startswith(bad):
                                    problems.append(where + f"{mod} does no file I/O: \"{target}\" belongs in the config layer")
                            continue
                        tparts = target.split("/")
                        if tparts[0] == "src" and len(tparts) > 2:
                            owner = tparts[1]
                            if tparts[1:3] == ["enforce", "shim"]:
                                owner = "shim"
                            elif tparts[1:3] == ["integrations", "k8s"]:
                                owner = "k8s"
                            if public_header:
                                problems.append(where + f"public header includes private header {target}")
                            elif owner != mod:
                                problems.append(where + f"includes {owner}'s private header {target}")
                        elif tparts[0] == "tessera" and len(tparts) > 2:
                            dep = tparts[1]
                            if tparts[1:3] == ["integrations", "k8s"] and len(tparts) > 3:
                                dep = "k8s"
                            if allowed is not None and dep not in allowed:
                                direct = " ".join(table[mod]) or "nothing"
                                problems.append(where + f"{mod} may not use {dep} (cmake/module_deps.txt allows: {direct})")
    return problems


if __name__ == "__main__":
    sys.exit(check_common.run(__doc__, check, "check_modules", "boundary violation(s)", "module boundaries clean"))
