#!/usr/bin/env python3
"""Checks every project #include against the layer table (docs/ARCHITECTURE.md, "Layers").

    tests/layers/check_layers.py ROOT

ROOT is a source tree (the repository, or a test fixture laid out like it). A file may include
headers of its own layer and of the layers below it; an include that points upward, or at a
project header that the table does not place, is reported as

    PATH:LINE: LAYER must not include HEADER (HEADER_LAYER layer)

and the exit status is 1. Includes of system and third-party headers are not checked.
"""
import pathlib
import re
import sys

# Lowest first. Each layer: the paths (relative to ROOT) that belong to it; a path ending in "/"
# is a folder. tools/, bench/ and tests/ sit on top and may include anything.
LAYERS = [
    ("util", ["include/accumbench/error.hpp", "include/accumbench/units.hpp",
              "include/accumbench/cpu_runtime.hpp", "include/accumbench/interrupt.hpp",
              "src/util/"]),
    ("compat", ["src/compat/"]),
    ("types", ["include/accumbench/options.hpp", "include/accumbench/optimizer_state.hpp",
               "include/accumbench/result.hpp", "src/types/"]),
    ("models", ["include/accumbench/model_config.hpp", "include/accumbench/models.hpp", "src/models/"]),
    ("data", ["include/accumbench/data.hpp", "include/accumbench/lengths.hpp", "src/data/"]),
    ("engine", ["include/accumbench/engine.hpp", "include/accumbench/chunked_loss.hpp", "src/engine/"]),
    ("trace", ["include/accumbench/trace.hpp", "src/trace/"]),
    ("plan", ["include/accumbench/plan.hpp", "include/accumbench/plan_fit.hpp", "src/plan/"]),
    ("sweep", ["include/accumbench/sweep.hpp", "include/accumbench/verify.hpp",
               "include/accumbench/statistics.hpp", "include/accumbench/decision.hpp",
               "include/accumbench/throughput.hpp", "src/sweep/"]),
    ("report", ["include/accumbench/report.hpp", "include/accumbench/trainer_config.hpp",
                "include/accumbench/plan_report.hpp", "src/report/"]),
    ("top", ["tools/", "bench/", "tests/"]),
]
RANK = {name: rank for rank, (name, _) in enumerate(LAYERS)}
SOURCE_SUFFIXES = {".hpp", ".cpp", ".h", ".cc", ".in"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    """The layer of a path relative to ROOT, or None when the table does not place it."""
    for name, members in LAYERS:
        for member in members:
            if path == member or (member.endswith("/") and path.startswith(member)):
                return name
    return None


def resolve(include, root):
    """The ROOT-relative path of a quoted include, or None for a header outside the project."""
    if include.startswith("accumbench/"):
        return "include/" + include
    first = include.split("/", 1)[0]
    if "/" in include and (root / "src" / first).is_dir():
        return "src/" + include
    return None


def check(root):
    problems = []
    for folder in ("include", "src", "tools", "bench", "tests"):
        for file in sorted((root / folder).rglob("*")):
            if file.suffix not in SOURCE_SUFFIXES or not file.is_file():
                continue
            path = file.relative_to(root).as_posix()
            if path.startswith("tests/data/"):
                continue  # fixtures, this checker's own among them
            own = layer_of(path)
            if own is None:
                problems.append(f"{path}:1: not in the layer table; add it to a layer")
                continue
            for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                target = resolve(match.group(1), root)
                if target is None:
                    continue
                theirs = layer_of(target)
                if theirs is None:
                    problems.append(f"{path}:{number}: {match.group(1)} is not in the layer table")
                elif RANK[theirs] > RANK[own]:
                    problems.append(f"{path}:{number}: {own} must not include {match.group(1)} ({theirs} layer)")
    return problems


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    root = pathlib.Path(argv[1])
    if not (root / "src").is_dir():
        print(f"check_layers: {root} has no src/ folder; pass the repository root", file=sys.stderr)
        return 2
    problems = check(root)
    for problem in problems:
        print(problem)
    print(f"check_layers: {len(problems)} wrong include(s)" if problems else "check_layers: every include points down")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
