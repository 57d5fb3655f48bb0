"""The command-line frame scripts/check_modules.py and scripts/check_sizes.py share: --root,
one line per problem on stdout, a summary on stderr, exit 0 (clean) or 1 (problems)."""
import argparse
import os
import sys


def run(doc, check, name, problem_words, clean_words):
    """Parses --root, runs check(root) -> [problem lines] and returns the exit status."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    args = parser.parse_args()
    problems = check(os.path.abspath(args.root))
    for p in problems:
        print(p)
    if problems:
        print(f"{name}: {len(problems)} {problem_words}", file=sys.stderr)
        return 1
    print(f"{name}: {clean_words}")
    return 0
