#!/usr/bin/env python3
"""Checks the size limits the house keeps (a long function or CLI file hides logic):

    scripts/check_sizes.py [--root DIR]

  * no file under tools/ longer than 300 lines (the CLI parses and prints);
  * no function in src/sched/ or src/sim/ longer than 120 lines (split long functions at their
    natural seams: a pass, an event kind, a renderer).

A function is measured from the line of its opening brace to the line of its closing brace;
functions nested in other functions (lambdas) count as part of them. Comments, string and
character literals (raw strings too) are skipped before braces are counted.
Exit status: 0 clean, 1 with one line per violation (file:line: what).
Worked example: a 130-line Scheduler::Cycle in src/sched/scheduler.cc:1072 prints
  src/sched/scheduler.cc:1072: function Scheduler::Cycle is 130 lines (at most 120)
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_common  # noqa: E402  (the shared command-line frame)

MAX_TOOLS_FILE_LINES = 300
MAX_FUNCTION_LINES = 120
FUNCTION_MODULES = ("sched", "sim")
SOURCE_ENDINGS = (".cc", ".h")


def blank_literals(text):
    """The text with comments and literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    def blank(s):
        return re.sub(r"[^\n]", " ", s)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j])); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(blank(text[i:j])); i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if m:
                end = text.find(")" + m.group(1) + '"', i)
                end = n if end < 0 else end + len(m.group(1)) + 2
                out.append(blank(text[i:end])); i = end
            else:
                out.append(c); i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                out.append(" "); i += 1
                continue
            out.append(blank(text[i:j + 1])); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)


HEAD = re.compile(r"([~\w:<>]+)\s*\([^;{}]*\)\s*(?:const|noexcept|override|final|mutable|\s|->[^;{}()]*)*"
                  r"(?::\s*[^;{}]*)?$", re.S)
CONTROL = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignof"}


def long_functions(path, limit):
    text = blank_literals(open(path, encoding="utf-8", errors="replace").read())
    found, stack, line, last_stop = [], [], 1, 0
    for idx, ch in enumerate(text):
        if ch == "\n":
            line += 1
        elif ch == "{":
            head = text[last_stop:idx]
            m = HEAD.search(head)
            name = m.group(1) if m else None
            is_func = bool(m) and name not in CONTROL and not any(s[0] for s in stack)
            stack.append((is_func, line, name))
            last_stop = idx + 1
        elif ch == "}":
            if stack:
                is_func, start, name = stack.pop()
                if is_func and line - start + 1 > limit:
                    found.append((start, name, line - start + 1))
            last_stop = idx + 1
        elif ch == ";":
            last_stop = idx + 1
    return found


def check(root):
    problems = []
    for dirpath, _, files in os.walk(os.path.join(root, "tools")):
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                count = sum(1 for _ in f)
            if count > MAX_TOOLS_FILE_LINES:
                rel = os.path.relpath(path, root)
                problems.append(f"{rel}:1: {count} lines (tools/ files at most {MAX_TOOLS_FILE_LINES}: "
                                "the CLI parses and prints; move logic into its module)")
    for module in FUNCTION_MODULES:
        for dirpath, _, files in os.walk(os.path.join(root, "src", module)):
            for name in sorted(files):
                if not name.endswith(SOURCE_ENDINGS):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                for start, fname, count in long_functions(path, MAX_FUNCTION_LINES):
                    problems.append(f"{rel}:{start}: function {fname} is {count} lines (at most {MAX_FUNCTION_LINES})")
    return problems


if __name__ == "__main__":
    sys.exit(check_common.run(__doc__, check, "check_sizes", "over the limits", "within the limits"))
