"""The whole-certificate table beside an earlier release, in one run on one machine.

    git archive <release> symbounds | tar -x -C DIR
    python benchmarks/bench_certify_release.py --before DIR [--rounds 2] [--workers 1,2] [--only d2]

Each run is a fresh ``python -m symbounds certify ... --out FILE --quiet`` process with
``PYTHONPATH`` set to one tree (``DIR`` for "before", this checkout for "after"), on the
instances of BENCHMARKS.md's whole-certificate table: the default instance (d = 1, P = 40),
d = 1 at eps = 1/25 (P = 100) and d = 2, P = 256.  Round ``r`` runs every instance with both
trees, interleaved, the order of the two trees reversed in every other round (so the machine's
load affects both alike); one untimed run of the default instance per tree comes first (numba's
and Python's caches of a fresh tree).  Each row: the CPU seconds of the process and its worker
processes (user + system, ``RUSAGE_CHILDREN``), the wall seconds, and what the written
certificate holds (boxes proved and evaluated, the largest certified bound, the verdict).
The machine's load average is printed at the start and the end.

``--extra NAME=DIR`` adds a tree (e.g. the commit just before a change, to tell its effect from
the rest); ``--numba-off`` adds "after, numba off": this checkout with numba hidden
(``sys.modules["numba"] = None``), so the float pass runs in NumPy alone, without the fused
kernel's import and cache load (about 2 s per process).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from fractions import Fraction

INSTANCES = {
    "default": [],
    "d1": ["--d", "1", "--holder", "2", "--bound", "2", "--eps", "1/25", "--target", "sin(2*x1)"],
    "d2": ["--d", "2", "--holder", "1", "--bound", "1", "--eps", "9/50", "--target", "sin(x1+x2)/2"],
}


#: ``python -m symbounds`` with numba hidden (the fused kernel then stays off)
NO_NUMBA = ("import runpy, sys; sys.modules['numba'] = None; sys.argv[0] = 'symbounds'; "
            "runpy.run_module('symbounds', run_name='__main__', alter_sys=True)")


def run(tree: str, flags: list, workers: int, numba: bool = True) -> dict:
    """One certificate in a fresh process: CPU (with its workers) and wall seconds, and the file."""
    env = dict(os.environ, PYTHONPATH=tree, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cert.json")
        head = [sys.executable, "-m", "symbounds"] if numba else [sys.executable, "-c", NO_NUMBA]
        argv = [*head, "certify", *flags, "--workers", str(workers), "--out", out, "--quiet"]
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(argv, check=False, env=env, cwd=tmp, capture_output=True, text=True)
        if done.returncode != 0:  # reported, not fatal: the run goes on
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"exit {done.returncode}: {last[:200]}")
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(out, encoding="utf-8") as f:
            cert = json.load(f)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {"cpu": cpu, "wall": wall, "proved": len(cert["boxes"]), "evaluated": cert["boxes_evaluated"],
            "max_bound": cert["max_bound"], "verdict": cert["verdict"]}


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, help="directory holding the earlier release's symbounds package")
    ap.add_argument("--after", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", default="1", help="comma-separated worker counts, e.g. 1,2")
    ap.add_argument("--only", choices=list(INSTANCES))
    ap.add_argument("--extra", action="append", default=[], metavar="NAME=DIR", help="one more tree to time")
    ap.add_argument("--numba-off", action="store_true", help="also this checkout with numba hidden")
    args = ap.parse_args()
    trees = [("before", os.path.abspath(args.before), True)]
    trees += [(e.split("=", 1)[0], os.path.abspath(e.split("=", 1)[1]), True) for e in args.extra]
    trees.append(("after", os.path.abspath(args.after), True))
    if args.numba_off:
        trees.append(("after, numba off", os.path.abspath(args.after), False))
    print(f"# load average at the start: {load()}", flush=True)
    for _, tree, numba in trees:
        run(tree, INSTANCES["default"], 1, numba)
    print("| round | instance | workers | tree | CPU (s) | wall (s) | boxes proved | boxes evaluated | largest bound | "
          "verdict |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows: dict = {}
    for r in range(args.rounds):
        for key, flags in INSTANCES.items():
            if args.only and key != args.only:
                continue
            for w in [int(v) for v in args.workers.split(",")]:
                order = trees[::-1] if r % 2 else trees  # opposite orders in alternate rounds
                for name, tree, numba in order:
                    try:
                        o = run(tree, flags, w, numba)
                    except RuntimeError as e:
                        print(f"| {r + 1} | {key} | {w} | {name} | failed: {e} | | | | | |", flush=True)
                        continue
                    rows.setdefault((key, w, name), []).append(o)
                    mb = "-" if o["max_bound"] is None else o["max_bound"]
                    if o["max_bound"] is not None:
                        mb = f"{o['max_bound']} ({float(Fraction(o['max_bound'])):.9f})"
                    print(f"| {r + 1} | {key} | {w} | {name} | {o['cpu']:.2f} | {o['wall']:.2f} | {o['proved']} | "
                          f"{o['evaluated']} | {mb} | {o['verdict']} |", flush=True)
    print(f"\n# load average at the end: {load()}\n")
    print("| instance | workers | tree | CPU (s, mean) | CPU / before | wall (s, mean) | wall / before |")
    print("|---|---|---|---|---|---|---|")
    for key, w, _ in [k for k in rows if k[2] == "before" and all((k[0], k[1], t[0]) in rows for t in trees)]:
        mean = {name: (sum(o["cpu"] for o in rows[(key, w, name)]) / len(rows[(key, w, name)]),
                       sum(o["wall"] for o in rows[(key, w, name)]) / len(rows[(key, w, name)]))
                for name, _, _ in trees}
        cb, wb = mean["before"]
        for name, _, _ in trees:
            c, wl = mean[name]
            print(f"| {key} | {w} | {name} | {c:.2f} | {c / cb:.2f} | {wl:.2f} | {wl / wb:.2f} |")


if __name__ == "__main__":
    main()
