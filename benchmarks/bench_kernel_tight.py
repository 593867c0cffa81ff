"""The checker kernel on plain and tight certificates, before and after it read the hull.

    python benchmarks/bench_kernel_tight.py [--only d2-256] [--before DIR]
    git archive <commit> symbounds_kernel | tar -x -C DIR      # DIR: an earlier kernel

For each [SL26] instance (the `symbounds certify` ones of BENCHMARKS.md, "Fewer boxes": the default
d = 1 and d = 2, P = 256, eps = 9/50), ``certify_instance`` writes two certificates in this process,
one with ``CertifyOptions(tight=False)`` (the plain pass, its first grid of 64 / 16 boxes per axis)
and one with ``tight=True`` (centred values, ratio of sums, convex hull; the coarse first grid of
8 / 4).  Each is then checked by ``python -m symbounds_kernel CERT.json`` in a fresh process, by
this tree's kernel ("after") and, with ``--before``, by the kernel in ``DIR`` ("before").  Printed:
one Markdown row per certificate and kernel, the kernel's verdict and its CPU seconds (user +
system of the child, ``resource.getrusage``) and wall seconds.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTANCES = {  # the keyword arguments of sl.Instance
    "d1-40": {},
    "d2-256": dict(d=2, C_H=1, B=1, eps="9/50", target="sin(x1+x2)/2"),
}


def write(instance: dict, tight: bool, path: str) -> dict:
    from symbounds.core.boxes import CertifyOptions
    from symbounds.papers import shi_liao as sl
    from symbounds.papers.shi_liao.certificate import certify_instance

    cert = certify_instance(sl.Instance(**instance), CertifyOptions(tight=tight))[0]
    with open(path, "w") as f:
        json.dump(cert, f)
    return cert


def kernel(path: str, tree: str):
    """``(verdict line, CPU seconds, wall seconds)`` of ``python -m symbounds_kernel path`` with
    ``tree`` first on the path."""
    env = dict(os.environ, PYTHONPATH=tree)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "symbounds_kernel", path], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    line = (p.stdout.strip() or p.stderr.strip()).splitlines()[-1][:90] if (p.stdout or p.stderr) else f"exit {p.returncode}"
    return line, cpu, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=list(INSTANCES))
    ap.add_argument("--before", help="a directory holding an earlier symbounds_kernel package")
    args = ap.parse_args()
    kernels = ([("before", os.path.abspath(args.before))] if args.before else []) + [("after", ROOT)]
    print("| instance | pass | boxes | kernel | verdict | kernel CPU (s) | kernel wall (s) |")
    print("|---|---|---|---|---|---|---|")
    for key, instance in INSTANCES.items():
        if args.only and key != args.only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            for tight in (False, True):
                path = os.path.join(tmp, f"{key}-{'tight' if tight else 'plain'}.json")
                cert = write(instance, tight, path)
                for name, tree in kernels:
                    line, cpu, wall = kernel(path, tree)
                    verdict = "accepted" if line.startswith("accepted") else line
                    print(f"| {key} | {'tight' if tight else 'plain'} | {len(cert['boxes'])} | {name} | {verdict} | "
                          f"{cpu:.1f} | {wall:.1f} |", flush=True)


if __name__ == "__main__":
    main()
