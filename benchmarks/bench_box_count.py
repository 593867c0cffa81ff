"""Boxes per whole-cube certificate (and CPU seconds), before and after each box-count change.

    python benchmarks/bench_box_count.py [--rounds 1] [--only d2-256] [--variants before,centred]
    python benchmarks/bench_box_count.py --before DIR   # "before" from an earlier tree instead

Each run is a fresh process with one worker: ``certify_instance`` of one [SL26] instance
(``symbounds certify``), CPU seconds of the whole run (construction, model file, float setup,
boxes; ``time.process_time``), the boxes proved and evaluated, the largest certified bound and the
verdict.  The variants of one instance run one after the other (their order reversed in every
other round), so the machine's load affects them alike:

* ``before``: the enclosure as it was (``float_boxes.CENTRE_VALUES``, ``RATIO_VALUES`` and
  ``HULL_VALUES`` False; the fused kernel follows the switches), halving the widest side, from the
  first grid of 64, 16 and 4 boxes per axis at d = 1, 2, 3: what ``certify`` does by default;

the others run with ``CertifyOptions(tight=True)`` and the switches below:

* ``centred``: the softmax-weighted values centred at their weighted mean (``CENTRE_VALUES``);
* ``ratio``: centred, and the weighted sum taken as a ratio of sums (``RATIO_VALUES``);
* ``hull``: both, and met with the values' convex hull under bounded weights (``HULL_VALUES``);
* ``hull+gradient``: the same, halving the side ``certify --bisect gradient`` picks;
* ``hull+coarse``: the same, from a coarser first grid (8 boxes per axis at d = 1, 4 at d = 2, 2 at
  d = 3).

With ``--before DIR`` (a ``git archive`` of an earlier commit's ``symbounds`` package, e.g.
``git archive main symbounds | tar -x -C DIR``) the ``before`` variant runs that tree instead of
the switch.  ``--check`` also re-verifies each proved certificate with ``check_certificate`` (CPU
seconds in the last column).
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

INSTANCES = {
    "d1-40": "sl.Instance()",
    "d2-64": "sl.Instance(d=2, C_H=1, B=1, eps='2/5', target='sin(x1+x2)/2')",
    "d2-144": "sl.Instance(d=2, C_H=1, B=1, eps='1/4', target='sin(x1+x2)/2')",
    "d2-256": "sl.Instance(d=2, C_H=1, B=1, eps='9/50', target='sin(x1+x2)/2')",
    "d3-125": "sl.Instance(d=3, C_H=1, B=1, eps='4/5', target='sin(x1+x2+x3)/3')",
    "d2-1024": "sl.Instance(d=2, C_H=1, B=1, eps='9/100', target='sin(x1+x2)/2')",
}
DEFAULT = ["d1-40", "d2-64", "d2-144", "d2-256", "d3-125"]

#: (CENTRE_VALUES, RATIO_VALUES, HULL_VALUES, split rule, first grid per axis by d) of each variant
GRID = {1: 64, 2: 16, 3: 4}
COARSE = {1: 8, 2: 4, 3: 2}
VARIANTS = {
    "before": (False, False, False, "widest", GRID),
    "centred": (True, False, False, "widest", GRID),
    "ratio": (True, True, False, "widest", GRID),
    "hull": (True, True, True, "widest", GRID),
    "hull+gradient": (True, True, True, "gradient", GRID),
    "hull+coarse": (True, True, True, "widest", COARSE),
}

CHILD = r"""
import json, sys, time
t0 = time.process_time()
from symbounds.core import float_boxes
from symbounds.core.boxes import CertifyOptions
from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao.certificate import certify_instance, rebuild
centre, ratio, hull, split, grid, check = @CENTRE@, @RATIO@, @HULL@, @SPLIT@, @GRID@, @CHECK@
if hasattr(float_boxes, "HULL_VALUES"):
    float_boxes.CENTRE_VALUES, float_boxes.RATIO_VALUES, float_boxes.HULL_VALUES = centre, ratio, hull
elif centre:
    raise SystemExit("this tree has no CENTRE_VALUES switch")
inst = @INST@
kw = {"tight": True} if "tight" in CertifyOptions.__dataclass_fields__ else {}
opts = CertifyOptions(workers=1, split=split, initial=grid[inst.d], **kw)
cert, res = certify_instance(inst, opts)
cpu = time.process_time() - t0
tc = None
if check and res.verdict == "proved":
    from symbounds.core.certificate import check_certificate
    t1 = time.process_time()
    check_certificate(cert, rebuild)
    tc = time.process_time() - t1
print(json.dumps({"P": sl.constants(inst).P, "eps": str(inst.eps), "cpu": cpu, "proved": len(res.boxes),
                  "evaluated": res.evaluated, "max_bound": str(res.max_bound), "verdict": str(res.verdict),
                  "check": tc}))
"""


def run(tree: str, inst: str, variant: str, check: bool) -> dict:
    centre, ratio, hull, split, grid = VARIANTS[variant]
    code = (CHILD.replace("@INST@", inst).replace("@CENTRE@", repr(centre)).replace("@RATIO@", repr(ratio))
            .replace("@HULL@", repr(hull)).replace("@SPLIT@", repr(split)).replace("@GRID@", repr(grid))
            .replace("@CHECK@", repr(check)))
    env = dict(os.environ, PYTHONPATH=tree, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, cwd=tree, text=True)
    if out.returncode:
        raise SystemExit(f"{variant} on {inst} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--only", help="comma-separated instances: " + ", ".join(INSTANCES))
    ap.add_argument("--variants", default="before,centred,ratio,hull,hull+gradient,hull+coarse")
    ap.add_argument("--before", help="directory holding an earlier symbounds package for the 'before' runs")
    ap.add_argument("--check", action="store_true", help="also re-verify each proved certificate")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else DEFAULT
    variants = args.variants.split(",")
    for v in variants:
        if v not in VARIANTS:
            raise SystemExit(f"unknown variant {v!r}")
    print("| instance | P | eps | variant | boxes proved | boxes evaluated | largest bound | verdict | CPU (s) |"
          " check CPU (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in range(args.rounds):
        for name in names:
            order = variants if r % 2 == 0 else list(reversed(variants))
            for v in order:
                tree = args.before if (v == "before" and args.before) else ROOT
                o = run(tree, INSTANCES[name], v, args.check)
                from fractions import Fraction

                mb = "-" if o["max_bound"] == "None" else f"{float(Fraction(o['max_bound'])):.6f}"
                tc = "-" if o["check"] is None else f"{o['check']:.1f}"
                print(f"| {name} | {o['P']} | {o['eps']} | {v} | {o['proved']} | {o['evaluated']} | {mb} | "
                      f"{o['verdict']} | {o['cpu']:.1f} | {tc} |", flush=True)


if __name__ == "__main__":
    main()
