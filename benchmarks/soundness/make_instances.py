"""The soundness benchmark: VNN-COMP instances (onnx + vnnlib + instances.csv) whose answers are proved.

    python benchmarks/soundness/make_instances.py OUTDIR        # a few minutes (it runs pou twice)
    symbounds vnncomp OUTDIR/instances.csv --results OUTDIR/results --json > OUTDIR/summary.json

Run in the package environment (symbounds[onnx]).  Every network is written as a float64 ONNX graph
(``symbounds export``) and the properties are stated about that graph, read back exactly (every
float weight is its binary rational), which is what ``symbounds vnncomp`` verifies.  Every number
of a property file is a float64 number written as its exact decimal expansion, so a tool reading
it as a float and symbounds reading it exactly bound the same box and compare with the same
threshold.

Families (``family`` in OUTDIR/instances.json):

* ``sl26``: the [SL26] partition-of-unity network at the default instance (d = 1, eps = 1/10,
  P = 40), on four sub-boxes of width 1/64: ``Y_0 >= hi + m`` and ``Y_0 <= lo - m`` (unsat: ``[lo, hi]``
  is symbounds' certified enclosure over the box, ``m`` a hundredth of its width), and
  ``Y_0 >= v`` for ``v`` a float just below the value at the box centre (sat).
* ``sl26_bigM``: the same construction with M = 60000, where the leakage e^{-cM} (c = 0.0123...)
  is about 1e-321, below 1e-300: softmax scores reach ~1e5, exp overflows float64.  Boxes of width
  2^-24 (the network changes on the scale 1/M).
* ``afz25``: [AFZ25]'s sequence interpolation network with softmax attention (3 sequences of up
  to 4 tokens in R^2, seed 0), on boxes of width 2^-40 (wider ones are not enclosed: tau = 1/64): the same three properties on one output entry.
* ``cancel``: ``Y = relu(x + B) - B`` on ``x in [0, 1]``, ``B = 2^53, 2^54, 2^60``: exactly ``Y = x``,
  but ``1 + B`` rounds to ``B`` in float64, so a float evaluation gives ``Y(1) = 0``.
  ``Y >= 1/2`` (sat at ``x = 1``), ``Y >= 1`` (sat, with equality), ``Y >= 1 + 2^-20`` (unsat).
* ``tiny_sum``: ``Y = x_1 + x_2`` on ``x_1 in [1, 1]``, ``x_2 in [0, 2^-k]`` (k = 53, 54, 60): the
  largest value ``1 + 2^-k`` rounds to 1.  ``Y >= 1 + 2^-k`` (sat, with equality: the threshold is
  met exactly at ``x_2 = 2^-k``) and ``Y > 1 + 2^-k`` (unsat).

OUTDIR/instances.json holds, per instance, the box, the unsafe region's constraints and the
model file (the network as read back from its ONNX) for the peer script, which does not import
symbounds.
"""

import argparse
import decimal
import json
import os
import subprocess
import sys
from fractions import Fraction as F

from symbounds.core.bound import bound
from symbounds.core.contexts import BallContext
from symbounds.core.modelfile import load_model, model_to_json
from symbounds.core.onnx_export import export_onnx
from symbounds.core.search import BoxEvaluator
from symbounds.core.vnncomp import load_network

decimal.getcontext().prec = 1200


def exact_decimal(x) -> str:
    """The exact decimal expansion of a float64 number."""
    f = float(x)
    assert F(f) == F(x), f"{x} is not a float64 number"
    d = decimal.Decimal(f)
    s = format(d, "f")
    return s if "." in s else s + ".0"


def fl_down(q: F) -> float:
    f = float(q)
    import math

    while F(f) > q:
        f = math.nextafter(f, -math.inf)
    return f


def fl_up(q: F) -> float:
    f = float(q)
    import math

    while F(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def vnnlib(lo, hi, outputs, unsafe, comment) -> str:
    """A property file: the box, and the unsafe region as one conjunction ``[(j, op, t)]``."""
    lines = [f"; {comment}"]
    lines += [f"(declare-const X_{i} Real)" for i in range(len(lo))]
    lines += [f"(declare-const Y_{j} Real)" for j in range(outputs)]
    for i, (a, b) in enumerate(zip(lo, hi)):
        lines.append(f"(assert (>= X_{i} {exact_decimal(a)}))")
        lines.append(f"(assert (<= X_{i} {exact_decimal(b)}))")
    for j, op, t in unsafe:
        lines.append(f"(assert ({op} Y_{j} {exact_decimal(t)}))")
    return "\n".join(lines) + "\n"


def constraint(j, op, t, k):
    """``sum c_i Y_i + const <= 0`` (strict ``<``) as the peer script reads it."""
    coeffs = [0] * k
    if op in (">=", ">"):
        coeffs[j] = -1
        const = F(t)
    else:
        coeffs[j] = 1
        const = -F(t)
    return {"coeffs": [str(c) for c in coeffs], "const": str(const), "strict": op in (">", "<")}


class Writer:
    def __init__(self, out):
        self.out = out
        self.rows = []
        self.meta = []

    def network(self, name, model):
        """Export to ONNX and read it back: the model the properties are about."""
        path = os.path.join(self.out, "onnx", f"{name}.onnx")
        export_onnx(model, path)
        back, _ = load_network(path)
        mpath = os.path.join(self.out, "models", f"{name}.json")
        with open(mpath, "w") as f:
            json.dump(model_to_json(back), f)
        return back, path, mpath

    def add(self, family, net, onnx_path, model_path, lo, hi, k, unsafe, comment, timeout=60):
        name = f"{family}_{len(self.rows):02d}"
        spec = os.path.join(self.out, "vnnlib", f"{name}.vnnlib")
        with open(spec, "w") as f:
            f.write(vnnlib(lo, hi, k, unsafe, comment))
        self.rows.append((os.path.relpath(onnx_path, self.out), os.path.relpath(spec, self.out), timeout))
        centre = [(F(a) + F(b)) / 2 for a, b in zip(lo, hi)]
        self.meta.append({"name": name, "family": family, "network": net, "model": os.path.relpath(model_path, self.out),
                          "onnx": os.path.relpath(onnx_path, self.out), "vnnlib": os.path.relpath(spec, self.out),
                          "lo": [exact_decimal(a) for a in lo], "hi": [exact_decimal(b) for b in hi],
                          "centre": [str(c) for c in centre], "outputs": k, "comment": comment,
                          "unsafe": [[constraint(j, op, t, k) for j, op, t in unsafe]]})

    def finish(self):
        with open(os.path.join(self.out, "instances.csv"), "w") as f:
            for row in self.rows:
                f.write(",".join(map(str, row)) + "\n")
        with open(os.path.join(self.out, "instances.json"), "w") as f:
            json.dump({"instances": self.meta}, f, indent=1)


def centre_value(model, lo, hi, j=0, prec=300):
    ev = BoxEvaluator(model, prec, fast=False)
    x = tuple((F(a) + F(b)) / 2 for a, b in zip(lo, hi))
    enc = ev.at(x, prec)
    return enc.lo[j], enc.hi[j]


def three_properties(w, family, net, model, onnx_path, mpath, lo, hi, k, j=0, what=""):
    res = bound(model, [F(a) for a in lo], [F(b) for b in hi], prec=128, max_boxes=4000)
    blo = res.lower if not isinstance(res.lower, tuple) else res.lower[j]
    bhi = res.upper if not isinstance(res.upper, tuple) else res.upper[j]
    m = max((bhi - blo) / 100, F(1, 10**9))
    vlo, _ = centre_value(model, lo, hi, j)
    w.add(family, net, onnx_path, mpath, lo, hi, k, [(j, ">=", fl_up(bhi + m))],
          f"{what}: Y_{j} never reaches the certified upper end + 1/100 of the width (unsat)")
    w.add(family, net, onnx_path, mpath, lo, hi, k, [(j, "<=", fl_down(blo - m))],
          f"{what}: Y_{j} never falls to the certified lower end - 1/100 of the width (unsat)")
    w.add(family, net, onnx_path, mpath, lo, hi, k, [(j, ">=", fl_down(vlo))],
          f"{what}: Y_{j} reaches a float just below its value at the box centre (sat)")


def pou_model(out, name, extra):
    path = os.path.join(out, "models", f"{name}.source.json")
    subprocess.run([sys.executable, "-m", "symbounds", "pou", "--quiet", "--export", path, *extra], check=True,
                   stdout=subprocess.DEVNULL)
    return load_model(path)


def one_ffn(d, W1, b1, W2, b2, E, skip="0"):
    return {"format": "symbounds-transformer/1", "input": "vector",
            "embedding": {"base": [["0"]], "E": [E], "column": 0},
            "layers": [{"type": "ffn", "skip": skip, "W1": [W1], "b1": [b1], "W2": [W2], "b2": [b2]}],
            "readout": {"row": 0, "column": 0}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    a = ap.parse_args(argv)
    for sub in ("onnx", "vnnlib", "models"):
        os.makedirs(os.path.join(a.out, sub), exist_ok=True)
    w = Writer(a.out)
    from symbounds.core.modelfile import model_from_json

    # [SL26], the default instance and M = 60000
    for name, extra, width, starts in (("sl26", [], 2.0**-6, [0.0625, 0.3125, 0.5625, 0.8125]),
                                       ("sl26_bigM", ["--M", "60000"], 2.0**-24, [0.125, 0.375, 0.625, 0.875])):
        net, onnx_path, mpath = w.network(name, pou_model(a.out, name, extra))
        for s in starts:
            three_properties(w, name, name, net, onnx_path, mpath, [s], [s + width], 1,
                             what=f"[SL26] {' '.join(extra) or 'default instance'} on [{s}, {s + width}]")
    # [AFZ25], softmax attention
    src = os.path.join(a.out, "models", "afz25.source.json")
    subprocess.run([sys.executable, "-m", "symbounds", "interp", "--quiet", "--random", "3,4,2,2", "--attention",
                    "softmax", "--export", src], check=True, stdout=subprocess.DEVNULL)
    net, onnx_path, mpath = w.network("afz25", load_model(src))
    n_in = net.width * 4
    k = n_in  # no readout: every entry of Z_L
    for s, j in ((0.25, 0), (0.5, 1)):
        lo = [s] * n_in
        hi = [s + 2.0**-40] * n_in
        three_properties(w, "afz25", "afz25", net, onnx_path, mpath, lo, hi, k, j=j,
                         what=f"[AFZ25] softmax interpolation network, tokens near {s}, output {j}")
    # float cancellation: relu(x + B) - B
    for e in (53, 54, 60):
        B = str(2**e)
        m = model_from_json(one_ffn(1, ["1"], B, ["1"], "-" + B, ["1"]))
        net, onnx_path, mpath = w.network(f"cancel_2e{e}", m)
        for t, note in ((0.5, "sat at x = 1: exactly Y = x, in float64 Y(1) = 0"),
                        (1.0, "sat with equality at x = 1"),
                        (1.0 + 2.0**-20, "unsat: Y = x <= 1")):
            w.add("cancel", f"cancel_2e{e}", onnx_path, mpath, [0.0], [1.0], 1, [(0, ">=", t)],
                  f"Y = relu(x + 2^{e}) - 2^{e} on [0, 1], unsafe Y >= {t}: {note}")
    # a tiny addend: x1 + x2 with x2 up to 2^-k
    m = model_from_json({"format": "symbounds-transformer/1", "input": "vector",
                         "embedding": {"base": [["0"]], "E": [["1", "1"]], "column": 0},
                         "layers": [{"type": "ffn", "skip": "1", "W1": [["0"]], "b1": ["0"], "W2": [["0"]],
                                     "b2": ["0"]}],
                         "readout": {"row": 0, "column": 0}})
    net, onnx_path, mpath = w.network("tiny_sum", m)
    for kk in (53, 54, 60):
        t = F(1) + F(1, 2**kk)
        # the threshold 1 + 2^-k is not a float64 number: stated as Y - X_1 >= 1 is not in the
        # box-and-output subset, so the property uses Y >= 1 with the box x2 in [2^-k, 2^-k]
        # (sat: Y = 1 + 2^-k >= 1) and Y > 1 on x2 in [2^-k, 2^-k] (sat, float says Y = 1)
        # and Y <= 1 with x2 in [2^-k, 2^-(k-1)] (unsat: Y > 1 there, float says Y = 1)
        tiny = 2.0**-kk
        w.add("tiny_sum", "tiny_sum", onnx_path, mpath, [1.0, tiny], [1.0, tiny], 1, [(0, ">", 1.0)],
              f"Y = x1 + x2 at x1 = 1, x2 = 2^-{kk}: exactly {t} > 1 (sat); in float64 1 + 2^-{kk} = 1")
        w.add("tiny_sum", "tiny_sum", onnx_path, mpath, [1.0, tiny], [1.0, 2 * tiny], 1, [(0, "<=", 1.0)],
              f"Y = x1 + x2, x1 = 1, x2 in [2^-{kk}, 2^-{kk - 1}]: Y > 1 exactly (unsat); float64 rounds to 1")
        w.add("tiny_sum", "tiny_sum", onnx_path, mpath, [1.0, 0.0], [1.0, tiny], 1, [(0, ">", 1.0)],
              f"Y = x1 + x2, x1 = 1, x2 in [0, 2^-{kk}]: Y > 1 at x2 = 2^-{kk} (sat)")
    w.finish()
    print(f"{len(w.rows)} instances in {os.path.join(a.out, 'instances.csv')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
