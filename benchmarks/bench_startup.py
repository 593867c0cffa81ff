"""Start-up time of the command line: ``symbounds --version``, ``symbounds --help`` and, for
comparison, one command's ``--help`` (which imports that command's modules), each a fresh process
(wall-clock time, the best of --repeat runs: the machine may be loaded by other work).  The first
two must stay under 0.5 s: the heavy modules (SymPy, python-flint, NumPy, matplotlib, PyTorch,
ONNX) are imported only by the commands that use them.

    python benchmarks/bench_startup.py [--repeat 5]
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 0.5
CASES = [["--version"], ["--help"], ["pou", "--help"]]


def best_time(argv, repeat):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "symbounds", *argv], env=env, check=True, capture_output=True)
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print("| command | best of %d (s) | limit |" % args.repeat)
    print("|---|---|---|")
    slow = []
    for argv in CASES:
        t = best_time(argv, args.repeat)
        limited = argv in (["--version"], ["--help"])
        print(f"| `symbounds {' '.join(argv)}` | {t:.3f} | {LIMIT if limited else '-'} |")
        if limited and t > LIMIT:
            slow.append(argv)
    if slow:
        print(f"above {LIMIT} s: {slow}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
