#!/usr/bin/python3
"""Re-run every `$ build/accumbench plan ...` example of README.md and check its printed lines
(and a `$ cat FILE` of what it wrote, in the same block).

A plan runs nothing (it is arithmetic on the model's shapes), so its output is the same on every
machine except for the line that names this machine's CPU. Each README block shows a command, then
its output with `...` (or `... (what)`) where lines are left out: the README's lines must appear in the real output
in the same order (a subsequence), each one exactly. Lines that name the machine (`planning for
cpu (...)`) are compared up to the parenthesis.

  scripts/check_readme_plans.py [--build BUILD_DIR] [--readme README.md]

A block whose last line is not an elision shows the output to its end: the command may print
nothing after it.

Exit 0 when every example matches; else prints the first README line not found per example, exit 1.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def examples(readme_text):
    """Yield (line number, [(command, expected lines)]) per ``` block that runs `accumbench plan`
    and nothing but `cat` besides (of a file the plan wrote, or of tests/data), each command with
    its output, in order."""
    lines = readme_text.split("\n")
    i = 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        start = i + 1
        i += 1
        steps = []
        while i < len(lines) and not lines[i].startswith("```"):
            if lines[i].startswith("$ "):
                command = lines[i][2:]
                while command.endswith("\\"):
                    i += 1
                    command = command[:-1] + " " + lines[i].strip()
                steps.append((command, []))
            elif steps:
                steps[-1][1].append(lines[i])
            i += 1
        i += 1
        if any(c.startswith("build/accumbench plan") for c, _ in steps) and \
                all(c.startswith("build/accumbench plan") or c.startswith("cat ") for c, _ in steps):
            yield start, steps


def comparable(line):
    # The CPU's name and LibTorch's version describe the machine, not the plan.
    return re.sub(r"^(planning for cpu) \(.*\)", r"\1 (...)", line.rstrip())


def check(steps, build):
    """The first README line not found in its command's output, with that output; (None, []) if all are."""
    with tempfile.TemporaryDirectory() as work:
        os.symlink(os.path.join(ROOT, "tests"), os.path.join(work, "tests"))
        os.symlink(os.path.abspath(build), os.path.join(work, "build"))
        for command, expected in steps:
            # One pipe for both streams, as on a terminal: notes on stderr keep their place.
            run = subprocess.run(shlex.split(command), cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True)
            actual = [comparable(l) for l in run.stdout.split("\n")]
            position = 0
            for want in expected:
                if want.strip().startswith("...") or want.strip() == "":
                    continue  # an elision: "..." or "... (what was left out)"
                want = comparable(want)
                try:
                    position = actual.index(want, position) + 1
                except ValueError:
                    return command, want, actual
            # A block that does not end in an elision shows the output to its end: a line the
            # command prints after it (a key added to an emitted file) is missing from the README.
            shown = [l for l in expected if l.strip()]
            if shown and not shown[-1].strip().startswith("..."):
                after = [l for l in actual[position:] if l.strip()]
                if after:
                    return command, "(the end of the output; it goes on with: " + after[0] + ")", actual
    return None, None, []


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    args = parser.parse_args()
    with open(args.readme, encoding="utf-8") as f:
        text = f.read()
    failures = 0
    count = 0
    for line_number, steps in examples(text):
        count += 1
        command, missing, actual = check(steps, args.build)
        if missing is None:
            plans = [c for c, _ in steps if c.startswith("build/accumbench plan")]
            print(f"ok    README.md:{line_number}: {plans[0][:100]}")
            continue
        failures += 1
        print(f"FAIL  README.md:{line_number}: {command}\n  README line not in the output (in order):\n    {missing}")
        for near in [l for l in actual if l[:24] == missing[:24]][:3]:
            print(f"  output has:\n    {near}")
    print(f"{count - failures} of {count} README plan examples match their command's output")
    return 1 if failures or count == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
