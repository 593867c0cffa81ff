"""Subnormal doubles in the NumPy float pass's Taylor-model arrays, on a certificate's boxes.

    python benchmarks/count_subnormals.py [--P 256] [--boxes 64] [--tight 0]

The d = 2 instance of ``bench_certificate_per_box.py`` (``eps = 9/50``: P = 256, ``9/100``:
P = 1024) is certified with at most ``max(--boxes, 1024)`` boxes; its first ``--boxes`` boxes are
enclosed once more by
the NumPy pass (the kernel off), every Taylor-model array it makes (``float_boxes.FTM``) counted:
the share of nonzero entries below ``2^-1022`` in magnitude, for the outputs of ``_Boxes.exp``
(the softmax weights) and for all arrays.  Run it with ``PYTHONPATH`` at the tree to count.
"""

import argparse
import json

import numpy as np

from symbounds.core import boxes as bx
from symbounds.core import float_boxes as fb
from symbounds.core import fused_boxes
from symbounds.core.boxes import CertifyOptions
from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao import certificate as slc

INSTANCES = {256: "9/50", 1024: "9/100"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--P", type=int, default=256, choices=list(INSTANCES))
    ap.add_argument("--boxes", type=int, default=64)
    ap.add_argument("--tight", type=int, default=0, choices=[0, 1])
    args = ap.parse_args()
    batches = []
    orig_eval = bx._worker_eval

    def record(boxes):
        batches.append(list(boxes))
        return orig_eval(boxes)

    bx._worker_eval = record
    inst = sl.Instance(d=2, C_H=1, B=1, eps=INSTANCES[args.P], target="sin(x1+x2)/2")
    slc.certify_instance(inst, CertifyOptions(workers=1, tight=bool(args.tight), max_boxes=max(args.boxes, 1024)))
    boxes = [b for batch in batches for b in batch][: args.boxes]
    fast = bx._W["fast"]
    counts = {k: [0, 0] for k in ("exp c", "exp G", "exp r", "all c", "all G", "all r")}

    def tally(key, a):
        if a is None:
            return
        a = np.asarray(a)
        nz = a[a != 0]
        counts[key][0] += int(np.count_nonzero(np.abs(nz) < 2.0**-1022))
        counts[key][1] += int(a.size)

    orig_init = fb.FTM.__init__

    def init(self, c, G, r):
        orig_init(self, c, G, r)
        tally("all c", c)
        tally("all G", G)
        tally("all r", r)

    orig_exp = fb._Boxes.exp

    def exp(self, a):
        out = orig_exp(self, a)
        tally("exp c", out.c)
        tally("exp G", out.G)
        tally("exp r", out.r)
        return out

    fb.FTM.__init__, fb._Boxes.exp = init, exp
    fused_boxes.ENABLED = False
    with np.errstate(all="ignore"):
        fast.enclose([b.lo for b in boxes], [b.hi for b in boxes])
    print(json.dumps({"P": args.P, "tight": bool(args.tight), "boxes": len(boxes),
                      **{k: f"{s / max(n, 1):.1%} of {n}" for k, (s, n) in counts.items()}}))


if __name__ == "__main__":
    main()
