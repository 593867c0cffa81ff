"""The checker kernel beside `symbounds check`, on the default certificate and the d = 2, P = 256 one.

    python benchmarks/bench_kernel.py [--only default|d2]

Certifies each instance (`symbounds certify`, float pass, one process) into a temporary file,
then times, each in a fresh process: the full re-verification alone (`check_certificate`), the
kernel (`python -m symbounds_kernel CERT.json`), and `symbounds check` (both).  Prints one
Markdown row per instance, with how many boxes the kernel's single enclosure leaves above the
recorded bound (those it bisects) and the median ratio of its bound to the recorded one.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from fractions import Fraction

INSTANCES = {
    "default": ("default (d=1, C_H=2, B=2, eps=1/10, g=sin(2 x1))", []),
    "d2": ("d=2, C_H=1, B=1, eps=9/50, g=sin(x1+x2)/2",
           ["--d", "2", "--holder", "1", "--bound", "1", "--eps", "9/50", "--target", "sin(x1+x2)/2"]),
}
FULL = ("import sys; from symbounds.core.certificate import load_certificate; "
        "from symbounds.papers import check_certificate; check_certificate(load_certificate(sys.argv[1]))")


def timed(cmd):
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"{cmd}: exit {p.returncode}: {p.stderr.strip()[-300:]}")
    return time.perf_counter() - t


def ratios(path):
    """Per box: the kernel's single-enclosure bound over the recorded one."""
    from flint import ctx

    from symbounds_kernel import verify
    from symbounds_kernel.network import Network
    from symbounds_kernel.target import evaluate, parse

    cert = json.load(open(path))
    ctx.prec = verify.PREC
    net, tree = Network(cert["model"], cert["d"]), parse(cert["target"], cert["d"])
    out = []
    for b in cert["boxes"]:
        lo, hi = [Fraction(v) for v in b["lo"]], [Fraction(v) for v in b["hi"]]
        g = evaluate(tree, [verify._interval(a, c) for a, c in zip(lo, hi)])
        out.append(verify._upper(abs(net.enclose(lo, hi) - g)) / Fraction(b["bound"]))
    return sorted(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=list(INSTANCES))
    args = ap.parse_args()
    bin_dir = os.path.dirname(sys.executable)
    print("| certificate | P | boxes | certify (s) | check, full only (s) | kernel (s) | symbounds check, both (s) "
          "| boxes the kernel bisects | median kernel / recorded bound |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key, (name, flags) in INSTANCES.items():
        if args.only and key != args.only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "cert.json")
            t_cert = timed([os.path.join(bin_dir, "symbounds"), "certify", *flags, "--out", path, "--quiet"])
            cert = json.load(open(path))
            t_full = timed([sys.executable, "-c", FULL, path])
            t_kernel = timed([sys.executable, "-m", "symbounds_kernel", path])
            t_both = timed([os.path.join(bin_dir, "symbounds"), "check", path, "--quiet"])
            r = ratios(path)
            P = len(cert["model"]["embedding"]["base"][0])
            print(f"| {name} | {P} | {len(cert['boxes'])} | {t_cert:.1f} | {t_full:.1f} | {t_kernel:.1f} | "
                  f"{t_both:.1f} | {sum(q > 1 for q in r)} | {float(r[len(r) // 2]):.2f} |", flush=True)


if __name__ == "__main__":
    main()
