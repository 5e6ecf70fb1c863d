#!/usr/bin/env python3
"""Seeded fuzzing of the files accumbench reads: mutants of real config.json files through
`plan`, and mutants of a real sweep JSON through `report` and `compare`.

    tests/fuzz/fuzz_inputs.py ACCUMBENCH HF_DIR WORK_DIR [--configs N] [--results N] [--seed S]

Every run must end in exit 0, 1 or 2; exit 2 with exactly one line "accumbench: error: ..." on
stderr; never a signal, a C++ backtrace or "internal error". A failing mutant is kept in
WORK_DIR and printed with its command, so it can be added to the fixed tests. Two workers run
at a time; the whole run is bounded by a deadline.
"""
import argparse
import concurrent.futures
import json
import pathlib
import random
import subprocess
import sys
import time

WEIRD_VALUES = [0, -1, 1, 2**31, 2**63 - 1, 2**64, 10**20, 1e308, -1e308, 0.5, 1e-320, "",
                "x" * 5000, "2048", None, True, [], {}, [1, 2], {"a": 1}]
RAW_NUMBERS = ["1e999", "-1e999", "18446744073709551616", "1.0e-400", "0e0", "-0"]


def mutate_value(rng, doc):
    """One structural mutation of a parsed JSON document (in place where it can)."""
    paths = []

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                paths.append(path + [k])
                walk(v, path + [k])
        elif isinstance(node, list):
            for i, v in enumerate(node[:8]):
                paths.append(path + [i])
                walk(v, path + [i])

    walk(doc, [])
    if not paths:
        return doc
    path = rng.choice(paths)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    action = rng.random()
    if action < 0.2 and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = rng.choice(WEIRD_VALUES)
    return doc


def mutant_text(rng, original):
    """A mutant: structural edits, a raw out-of-range number, truncation or byte noise."""
    kind = rng.random()
    if kind < 0.55:
        doc = json.loads(original)
        for _ in range(rng.randint(1, 3)):
            doc = mutate_value(rng, doc)
        return json.dumps(doc)
    if kind < 0.7:
        doc = json.loads(original)
        keys = [k for k, v in doc.items() if isinstance(v, (int, float))] if isinstance(doc, dict) else []
        text = json.dumps(doc)
        if keys:
            key = rng.choice(keys)
            text = text.replace('"%s": %s' % (key, json.dumps(doc[key])), '"%s": %s' % (key, rng.choice(RAW_NUMBERS)), 1)
        return text
    if kind < 0.85:
        return original[: rng.randint(0, max(0, len(original) - 1))]
    data = bytearray(original.encode())
    for _ in range(rng.randint(1, 8)):
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    return data.decode("utf-8", errors="replace")


def judge(cmd, result):
    """None when the run ended correctly, else what went wrong."""
    if result.returncode < 0:
        return "killed by signal %d" % -result.returncode
    if result.returncode not in (0, 1, 2):
        return "exit status %d" % result.returncode
    err = result.stderr
    if "internal error" in err or "frame #" in err or "terminate called" in err:
        return "internal error or backtrace: " + err[:300]
    if result.returncode == 2:
        lines = [l for l in err.splitlines() if l.strip()]
        if len(lines) != 1 or not lines[0].startswith("accumbench: error: "):
            return "exit 2 without exactly one error sentence: " + err[:300]
    return None


def run(cmd, timeout):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("hf_dir")
    parser.add_argument("work_dir")
    parser.add_argument("--configs", type=int, default=150)
    parser.add_argument("--results", type=int, default=75)
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--deadline", type=float, default=600.0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    work = pathlib.Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()

    configs = sorted(p for p in pathlib.Path(args.hf_dir).glob("*.json") if not p.name.startswith("bad_"))
    sweep_json = work / "real.json"
    made = subprocess.run([args.binary, "sweep", "--model", "gpt2-tiny", "--seq-len", "16", "--batch", "2",
                           "--warmup", "1", "--steps", "1", "--threads", "1", "--device", "cpu",
                           "--json", str(sweep_json)], capture_output=True, text=True)
    if made.returncode != 0:
        print("fuzz: the seed sweep failed:", made.stderr, file=sys.stderr)
        return 1
    result_text = sweep_json.read_text()

    jobs = []
    for i in range(args.configs):
        source = rng.choice(configs)
        path = work / ("config-%03d.json" % i)
        path.write_text(mutant_text(rng, source.read_text()), errors="replace")
        jobs.append([args.binary, "plan", "--hf-config", str(path), "--seq-len", "8", "--batch", "2"])
    for i in range(args.results):
        path = work / ("result-%03d.json" % i)
        path.write_text(mutant_text(rng, result_text), errors="replace")
        jobs.append([args.binary, "report", str(path)])
        jobs.append([args.binary, "compare", str(sweep_json), str(path)])

    failures, done = [], 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {}
        for cmd in jobs:
            futures[pool.submit(run, cmd, 60)] = cmd
        for future in concurrent.futures.as_completed(futures):
            cmd = futures[future]
            result = future.result()
            done += 1
            problem = "timed out (60 s)" if result is None else judge(cmd, result)
            if problem:
                failures.append((cmd, problem))
            if time.monotonic() - start > args.deadline:
                print("fuzz: deadline reached after %d of %d runs" % (done, len(jobs)))
                pool.shutdown(cancel_futures=True)
                break
    for cmd, problem in failures:
        print("FAIL %s\n     %s" % (" ".join(cmd), problem))
    print("%d passed, %d failed" % (done - len(failures), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
