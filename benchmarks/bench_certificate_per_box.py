"""A certificate's cost per box beside its float pass's, before and after a change, in one run.

    git archive main symbounds | tar -x -C DIR
    python benchmarks/bench_certificate_per_box.py --before DIR [--rounds 1] [--P 256 1024] [--tight 0 1]

``DIR`` holds an earlier checkout's ``symbounds`` package.  Each run is a fresh process with one
worker: ``certify_instance`` of the [SL26] instance ``--d 2 --holder 1 --bound 1 --target
"sin(x1+x2)/2"`` at ``eps = 9/50`` (P = 256) or ``9/100`` (P = 1024), with ``CertifyOptions(tight=...)``,
the two trees interleaved (the order reversed every other round).  CPU seconds of the process
(``time.process_time``), split by wrapping the tree's own functions (the same names in both):

* **setup**: everything but the box phase: the constants and the model file, the model read back
  with its one-off float setup (``boxes._worker_init``), numba's import and the kernel loaded
  from its cache (forced here by one box right after the setup, timed apart as "kernel load"),
  and the certificate written (``make_certificate``, also shown apart);
* **box phase**: ``certify_model`` less its setup: the search, every box's float pass and float
  target, the exact bookkeeping, the sorting of the boxes.

Then, in the same process, **the float pass on the same boxes**: every batch the certificate
evaluated (recorded as ``boxes._worker_eval`` received it) enclosed again by the same evaluator,
``FloatBoxEvaluator.enclose`` on the boxes' exact ends as Fractions (what
``benchmarks/bench_fused.py`` times: the ends turned into float centres and half-widths, the
kernel, the readout's range), and the kernel alone on those centres and half-widths.  The ratio is
the box phase per box over the float pass per box.  "Subnormals flushed" times the kernel alone
once more with the x86 FTZ and DAZ bits set (``flush_subnormals.py``): not sound, never used for a
bound, a diagnosis of how much of the kernel's time subnormal doubles cost.  A box's operation
count is ``(74 d + 296) P`` and the float64 rates are ``bench_fused.float_rates`` (numba loops),
measured at the start and the end of the run.  ``certificate digest`` is the SHA-256 of the proved boxes and their recorded
bounds (the same digest: the same certificate, box for box).

Inside the box phase, the time of every float pass the certificate ran (``FloatBoxEvaluator.enclose``:
the boxes' passes, and the point passes at the centres of boxes that missed ``eps`` where the box's
own model could not decide the centre, ``boxes.centre_refutes``, counted as "centre point passes
per box") is timed too: "the rest" is the box phase less those passes (the float target, the
exact bookkeeping of the search, the sorting), per evaluated box.
"""

import argparse
import json
import os
import subprocess
import sys

INSTANCES = {256: "9/50", 1024: "9/100"}
HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import hashlib, json, sys, time
from fractions import Fraction as F
pt = time.process_time
t_start = pt()
from symbounds.core import boxes as bx, float_boxes as fb, fused_boxes
from symbounds.core.boxes import CertifyOptions
from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao import certificate as slc
T = {"init": 0.0, "load": 0.0, "model": 0.0, "write": 0.0, "passes": 0.0, "centre_boxes": 0}
batches = []
orig_init, orig_eval, orig_model, orig_write = bx._worker_init, bx._worker_eval, slc.certify_model, slc.make_certificate
def init(*a, **k):
    t = pt(); r = orig_init(*a, **k); T["init"] += pt() - t
    fast = bx._W.get("fast")
    if fast is not None and T["load"] == 0.0:  # numba and the kernel, loaded now rather than at the first box
        t = pt(); d = bx._W["d"]; fast.enclose([(F(0),) * d], [(F(1),) * d]); T["load"] += pt() - t
    return r
def record(boxes):
    batches.append(list(boxes))
    return orig_eval(boxes)
def model(*a, **k):
    t = pt(); r = orig_model(*a, **k); T["model"] += pt() - t
    return r
def write(*a, **k):
    t = pt(); r = orig_write(*a, **k); T["write"] += pt() - t
    return r
bx._worker_init, bx._worker_eval, slc.certify_model, slc.make_certificate = init, record, model, write
orig_enclose, orig_refutes = fb.FloatBoxEvaluator.enclose, bx.centre_refutes
def enclose(self, lo, hi):
    t = pt(); r = orig_enclose(self, lo, hi); T["passes"] += pt() - t
    return r
def refutes(model, g, d, boxes, *a):
    T["centre_boxes"] += len(boxes)
    return orig_refutes(model, g, d, boxes, *a)
fb.FloatBoxEvaluator.enclose, bx.centre_refutes = enclose, refutes
inst = sl.Instance(d=2, C_H=1, B=1, eps=EPS, target="sin(x1+x2)/2")
cert, res = slc.certify_instance(inst, CertifyOptions(workers=1, tight=TIGHT))
total = pt() - t_start
box = T["model"] - T["init"] - T["load"]
fb.FloatBoxEvaluator.enclose = orig_enclose
passes = T["passes"] - T["load"]  # the float passes (box and centre point passes) inside the box phase
fast = bx._W["fast"]
n = sum(len(b) for b in batches)
t = pt()
for b in batches:
    fast.enclose([x.lo for x in b], [x.hi for x in b])
pass_s = pt() - t
plan = fused_boxes._plan(fast, fast._prefix, fast._rows_read)
kernel_s = flushed_s = None
if plan is not None:
    tight = fast.tight
    flags = (fb.CENTRE_VALUES and tight, fb.RATIO_VALUES and tight, fb.HULL_VALUES and tight)
    xs = [fb.centres([x.lo for x in b], [x.hi for x in b]) for b in batches]
    t = pt()
    for x0, h in xs:
        plan.run(x0, h, flags)
    kernel_s = pt() - t
    sys.path.insert(0, BENCHDIR)
    from flush_subnormals import flushed
    with flushed():  # a diagnosis only (not sound): the kernel without subnormal operands and results
        t = pt()
        for x0, h in xs:
            plan.run(x0, h, flags)
        flushed_s = pt() - t
digest = hashlib.sha256(json.dumps([[[str(v) for v in b.lo], [str(v) for v in b.hi], str(bd)]
                                    for b, bd in res.boxes]).encode()).hexdigest()[:12]
print(json.dumps({"P": sl.constants(inst).P, "total": total, "init": T["init"], "load": T["load"], "write": T["write"],
                  "box": box, "evaluated": res.evaluated, "passed": n, "proved": len(res.boxes),
                  "max_bound": str(res.max_bound), "verdict": str(res.verdict), "pass": pass_s, "kernel": kernel_s, "flushed": flushed_s,
                  "digest": digest, "passes": passes, "centre_boxes": T["centre_boxes"]}))
"""


def run(tree: str, eps: str, tight: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=tree, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    code = CHILD.replace("EPS", repr(eps)).replace("TIGHT", repr(tight)).replace("BENCHDIR", repr(HERE))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, cwd=tree, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def rates(tree: str) -> tuple:
    """``(scalar, vector)`` float64 rates of ``bench_fused.float_rates`` in a fresh process."""
    code = ("import sys; sys.path.insert(0, 'benchmarks'); from bench_fused import float_rates; "
            "print(*float_rates())")
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, cwd=tree, text=True, check=True)
    return tuple(float(v) for v in out.stdout.split())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, help="directory holding the earlier symbounds package")
    ap.add_argument("--after", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--P", type=int, nargs="+", default=[256, 1024], choices=list(INSTANCES))
    ap.add_argument("--tight", type=int, nargs="+", default=[0, 1], choices=[0, 1])
    args = ap.parse_args()
    print(f"# load average at start: {os.getloadavg()[0]:.1f}")
    s0, v0 = rates(args.after)
    print(f"# float64 rate (CPU) at start: scalar {s0 / 1e9:.2f} Gflop/s, vectorised a x + b {v0 / 1e9:.2f} Gflop/s")
    print()
    print("| P | tight | tree | CPU total (s) | setup (s) | of which kernel load (s) | of which writing (s) |"
          " box phase (s) | boxes evaluated | box phase per box (µs) | float pass per box (µs) |"
          " kernel alone per box (µs) | kernel alone, subnormals flushed (µs) | box phase / float pass |"
          " centre point passes per box | float passes in the box phase (s) | the rest per box (µs) | boxes proved | largest bound | certificate digest |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for r in range(args.rounds):
        for P in args.P:
            for tight in args.tight:
                order = [("before", args.before), ("after", args.after)]
                if r % 2:
                    order.reverse()
                for name, tree in order:
                    o = run(tree, INSTANCES[P], bool(tight))
                    assert o["passed"] == o["evaluated"], o
                    n = o["evaluated"]
                    per, fp = o["box"] / n, o["pass"] / n
                    kern = "-" if o["kernel"] is None else f"{o['kernel'] / n * 1e6:.0f}"
                    flush = "-" if o["flushed"] is None else f"{o['flushed'] / n * 1e6:.0f}"
                    from fractions import Fraction

                    mb = "-" if o["max_bound"] == "None" else f"{float(Fraction(o['max_bound'])):.9f}"
                    print(f"| {o['P']} | {bool(tight)} | {name} | {o['total']:.1f} | {o['total'] - o['box']:.1f} |"
                          f" {o['load']:.1f} | {o['write']:.2f} | {o['box']:.2f} | {n} | {per * 1e6:.0f} |"
                          f" {fp * 1e6:.0f} | {kern} | {flush} | {per / fp:.2f}x | {o['centre_boxes'] / n:.2f} |"
                          f" {o['passes']:.2f} | {(o['box'] - o['passes']) / n * 1e6:.0f} | {o['proved']} | {mb} | {o['digest']} |",
                          flush=True)
                    rows.append(o)
    s1, v1 = rates(args.after)
    print()
    print(f"# float64 rate (CPU) at end: scalar {s1 / 1e9:.2f} Gflop/s, vectorised a x + b {v1 / 1e9:.2f} Gflop/s")
    vec = max(v0, v1)
    for P in args.P:
        ops = (74 * 2 + 296) * P
        print(f"# P = {P}: (74 d + 296) P = {ops:,} operations per box, {ops / vec * 1e6:.1f} µs at "
              f"{vec / 1e9:.1f} Gflop/s")
    print(f"# load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
