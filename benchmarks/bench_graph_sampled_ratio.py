"""Width of ``bound``'s default adaptive enclosure over the range onnxruntime reaches, per layer kind.

    PYTHONPATH=. python3 benchmarks/bench_graph_sampled_ratio.py [--kinds relu,mha,...] [--samples 2000]
        [--boxes 3] [--max-boxes N] [--timeout S] [--linear auto|on|off] [--attention-taylor]
        [--out ratios.json]

Every network is built in PyTorch (float64, seeded), exported with ``torch.onnx.export`` (opset
17) and imported as a layer graph (:func:`symbounds.core.onnx_graph.onnx_to_graph`).  Boxes of
width 0.1 in every input around ``--boxes`` seeded centres; on each, ``bound`` (its defaults unless
``--max-boxes``/``--timeout`` are given) and onnxruntime's float64 outputs at ``--samples``
uniform points, as many random corners, and the two extreme corners.  Reported per kind: the
largest over boxes and outputs of ``(upper - lower) / (sampled max - sampled min)`` (the sampled
range lies inside the true range, so the ratio is at least the enclosure's over the true range),
the sub-boxes and the CPU seconds of ``bound``.  An enclosure missing a sampled value is reported
as ``MISSED`` (a soundness failure).  ``--attention-taylor`` drops the backward passes that relax
softmax attention (the node then enters every pass as its Taylor model, as before the relaxation),
for the before/after comparison.  No assertions.
"""

from __future__ import annotations

import argparse
import io
import json
import time
import warnings
from fractions import Fraction

import numpy as np


def nets():
    """name -> (factory, input shape): MLPs with each activation, the norms, a residual block,
    ``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer`` (both norm orders)."""
    import torch

    L = torch.nn.Linear

    class Fn(torch.nn.Module):
        def __init__(self, f):
            super().__init__()
            self.f = f

        def forward(self, x):
            return self.f(x)

    class Residual(torch.nn.Module):
        def __init__(self, d=2, w=6):
            super().__init__()
            self.a, self.ln, self.g = L(d, w), torch.nn.LayerNorm(w), torch.nn.GELU()
            self.b, self.t, self.o = L(w, w), torch.nn.GELU(approximate="tanh"), L(w, 2)

        def forward(self, x):
            h = self.a(x)
            h = h + self.b(self.g(self.ln(h)))
            return self.o(self.t(h))

    class RMSNorm(torch.nn.Module):
        """``x / sqrt(mean(x^2) + eps) w`` written out (the TorchScript exporter has no RMSNorm
        below opset 23; the importer reads this chain as one rms_norm node)."""

        def __init__(self, n, eps=1e-5):
            super().__init__()
            self.w, self.eps = torch.nn.Parameter(1 + 0.3 * torch.randn(n)), eps

        def forward(self, x):
            return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.w

    class MHA(torch.nn.Module):
        def __init__(self, E=4, heads=2, seed=0):
            super().__init__()
            torch.manual_seed(seed)
            self.m = torch.nn.MultiheadAttention(E, heads, batch_first=True)
            with torch.no_grad():
                for p in self.m.parameters():
                    p.copy_(torch.randn_like(p) * 0.6)

        def forward(self, x):
            return self.m(x, x, x, need_weights=False)[0]

    class Encoder(torch.nn.Module):
        def __init__(self, seed=0, **kw):
            super().__init__()
            torch.manual_seed(seed)
            self.layer = torch.nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, batch_first=True, **kw)
            with torch.no_grad():
                for p in self.parameters():
                    p.add_(torch.randn_like(p) * 0.2)

        def forward(self, x):
            return self.layer(x)

    def mlp(act, seed):
        def make():
            torch.manual_seed(seed)
            return torch.nn.Sequential(L(2, 8), act, L(8, 1))
        return make

    def seeded(f, seed):
        def make():
            torch.manual_seed(seed)
            return f()
        return make

    acts = {"relu": torch.nn.ReLU(), "leaky": torch.nn.LeakyReLU(0.125), "gelu": torch.nn.GELU(),
            "gelu_tanh": torch.nn.GELU(approximate="tanh"), "tanh": torch.nn.Tanh(), "sigmoid": torch.nn.Sigmoid(),
            "softplus": torch.nn.Softplus(), "exp": Fn(torch.exp), "erf": Fn(torch.erf)}
    out = {k: (mlp(a, i), (1, 2)) for i, (k, a) in enumerate(acts.items())}
    out["layernorm"] = (seeded(lambda: torch.nn.Sequential(L(2, 5), torch.nn.LayerNorm(5), torch.nn.Tanh(), L(5, 1)), 20),
                        (1, 2))
    out["rmsnorm"] = (seeded(lambda: torch.nn.Sequential(L(2, 5), RMSNorm(5), torch.nn.Tanh(), L(5, 1)), 21), (1, 2))
    out["residual"] = (seeded(Residual, 22), (1, 2))
    out["mha"] = (lambda: MHA(), (1, 3, 4))
    out["mha_small"] = (lambda: MHA(E=2, heads=2, seed=11), (1, 2, 2))
    out["encoder_post"] = (lambda: Encoder(seed=0), (1, 3, 4))
    out["encoder_pre"] = (lambda: Encoder(seed=1, norm_first=True, activation="gelu"), (1, 3, 4))
    return out


def export(net, shape):
    import torch

    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net.double().eval(), (torch.zeros(*shape, dtype=torch.float64),), f,
                          opset_version=17, dynamo=False)
    return f.getvalue()


def outputs(data, net, pts):
    """onnxruntime's float64 outputs (PyTorch's where onnxruntime lacks a float64 kernel)."""
    import onnxruntime as ort
    import torch

    try:
        sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    except Exception:
        with torch.no_grad():
            return np.stack([net(torch.tensor(p)).numpy().reshape(-1) for p in pts])
    name = sess.get_inputs()[0].name
    return np.stack([sess.run(None, {name: p})[0].reshape(-1) for p in pts])


def box(n, seed, width=Fraction(1, 10)):
    rng = np.random.default_rng(seed)
    c = [Fraction(int(v), 64) for v in rng.integers(-48, 48, n)]
    return [v - width / 2 for v in c], [v + width / 2 for v in c]


def samples(lo, hi, shape, k, seed):
    rng = np.random.default_rng(seed + 1000)
    a, b = np.array([float(v) for v in lo]), np.array([float(v) for v in hi])
    pts = [a, b] + [rng.uniform(a, b) for _ in range(k)]
    pts += [np.where(rng.integers(0, 2, a.size) == 1, a, b) for _ in range(k)]
    return [p.reshape(shape) for p in pts]


def measure(name, factory, shape, args):
    import onnx

    from symbounds.core.bound import bound
    from symbounds.core.onnx_graph import onnx_to_graph

    net = factory()
    data = export(net, shape)
    g = onnx_to_graph(onnx.load_model_from_string(data))
    linear = {"auto": "auto", "on": True, "off": False}[args.linear]
    worst, boxes, cpu, missed = 0.0, [], [], False
    for seed in range(args.boxes):
        lo, hi = box(g.input_count, seed)
        t0 = time.process_time()
        res = bound(g, lo, hi, max_boxes=args.max_boxes, timeout=args.timeout, linear=linear)
        cpu.append(time.process_time() - t0)
        boxes.append(res.boxes)
        ys = outputs(data, net, samples(lo, hi, shape, args.samples, seed))
        for k in range(ys.shape[1]):
            lo_k, hi_k = float(res.lower[k]), float(res.upper[k])
            if lo_k > ys[:, k].min() or hi_k < ys[:, k].max():
                missed = True
            span = ys[:, k].max() - ys[:, k].min()
            worst = max(worst, (hi_k - lo_k) / span if span > 0 else float("inf"))
    return {"kind": name, "ops": sorted({n.op for n in g.nodes}), "inputs": g.input_count, "ratio": worst,
            "sub_boxes": boxes, "cpu_s": [round(c, 2) for c in cpu], "missed": missed}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kinds", default="")
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--boxes", type=int, default=3)
    ap.add_argument("--max-boxes", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=None)
    ap.add_argument("--linear", default="auto", choices=("auto", "on", "off"))
    ap.add_argument("--attention-taylor", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.attention_taylor:
        from symbounds.core import linear_graph as lg

        passes = lg._Bounds._passes
        lg._Bounds._passes = lambda self, upto: [p for p in passes(self, upto) if p[1]] or passes(self, upto)
    all_nets = nets()
    kinds = args.kinds.split(",") if args.kinds else list(all_nets)
    rows = []
    for k in kinds:
        factory, shape = all_nets[k]
        r = measure(k, factory, shape, args)
        rows.append(r)
        print(f"{k:14s} ratio {r['ratio']:8.3f}  sub-boxes {r['sub_boxes']}  CPU s {r['cpu_s']}"
              f"{'  MISSED' if r['missed'] else ''}  ops {','.join(r['ops'])}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
