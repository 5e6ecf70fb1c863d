#!/usr/bin/python3
"""Check that every `$ accumbench COMMAND --help` block of README.md is the binary's own help,
line for line (trailing blank lines aside; the checkout's own path, in a default, reads
<checkout>), so that the options reference stays true.

  scripts/check_readme_help.py [--build BUILD_DIR] [--readme README.md]

Exit 0 when every block matches; else prints each block's first differing line, exit 1.
"""
import argparse
import os
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def help_blocks(text):
    """Yield (line number, argv after `accumbench`, the block's lines) per help block."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not (line.startswith("$ accumbench ") and line.rstrip().endswith("--help")):
            continue
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        yield i + 1, shlex.split(line[len("$ accumbench "):]), lines[i + 1:end]


def trimmed(lines):
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    args = parser.parse_args()
    with open(args.readme, encoding="utf-8") as f:
        text = f.read()
    binary = os.path.join(args.build, "accumbench")
    count = failures = 0
    for number, argv, shown in help_blocks(text):
        count += 1
        run = subprocess.run([binary] + argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # Defaults that name the checkout (calibrate-framework's --reference-dir) read <checkout>.
        actual = trimmed(run.stdout.replace(ROOT, "<checkout>").split("\n"))
        shown = trimmed(shown)
        if actual == shown:
            print(f"ok    README.md:{number}: accumbench {' '.join(argv)}")
            continue
        failures += 1
        at = next((k for k in range(max(len(actual), len(shown)))
                   if k >= len(actual) or k >= len(shown) or actual[k] != shown[k]), 0)
        print(f"FAIL  README.md:{number}: accumbench {' '.join(argv)}: line {at + 1} of the block differs")
        print(f"  README: {shown[at] if at < len(shown) else '(nothing)'}")
        print(f"  binary: {actual[at] if at < len(actual) else '(nothing)'}")
    print(f"{count - failures} of {count} README help blocks match the binary's help")
    return 1 if failures or count == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
