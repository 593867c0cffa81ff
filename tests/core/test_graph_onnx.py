"""PyTorch networks exported by ``torch.onnx.export`` (opset 13 to 18), imported as layer graphs,
bounded: the certified enclosure contains onnxruntime's float64 outputs at sampled points of the
box, the adaptive bound is within 2x of the sampled range on boxes of width 0.1, a tampered weight
is refuted somewhere, and malformed graphs and unsupported operations are one line, exit 2."""

import io
import json
import warnings
import zlib
from fractions import Fraction

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from symbounds.core.bound import bound
from symbounds.core.graph import Graph
from symbounds.core.graph_file import graph_from_json, graph_to_json
from symbounds.core.onnx_graph import onnx_to_graph

from cli_helpers import run_cli


def export(model, shape, opset):
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.double().eval(), (torch.zeros(*shape, dtype=torch.float64),), f,
                          opset_version=opset, dynamo=False)
    return f.getvalue()


class Residual(torch.nn.Module):
    """Linear, LayerNorm, GELU (erf), a residual add, GELU (tanh), Linear."""

    def __init__(self, d=2, w=6):
        super().__init__()
        self.a, self.ln, self.g = torch.nn.Linear(d, w), torch.nn.LayerNorm(w), torch.nn.GELU()
        self.b, self.t, self.o = torch.nn.Linear(w, w), torch.nn.GELU(approximate="tanh"), torch.nn.Linear(w, 2)

    def forward(self, x):
        h = self.a(x)
        h = h + self.b(self.g(self.ln(h)))
        return self.o(self.t(h))


class Arithmetic(torch.nn.Module):
    """Sub, Mul and Div by constants, a constant minus a tensor, a difference of two tensors."""

    def __init__(self):
        super().__init__()
        self.a, self.o = torch.nn.Linear(2, 4), torch.nn.Linear(4, 1)

    def forward(self, x):
        h = self.a(x)
        u = (1.5 - (h - 0.5) * 2.0 / 3.0)
        return self.o(torch.sigmoid(u) - torch.exp(h * -0.25) + h)


def sequential(kind):
    torch.manual_seed(zlib.crc32(kind.encode()) % 1000)  # str hash() changes per process
    L = torch.nn.Linear  # LeakyReLU: ONNX keeps alpha as a float32, so the PyTorch net uses that value
    acts = {"relu": torch.nn.ReLU(), "leaky": torch.nn.LeakyReLU(float(np.float32(0.1))), "gelu": torch.nn.GELU(),
            "gelu_tanh": torch.nn.GELU(approximate="tanh"), "tanh": torch.nn.Tanh(), "sigmoid": torch.nn.Sigmoid(),
            "softplus": torch.nn.Softplus()}
    if kind == "layernorm":
        return torch.nn.Sequential(L(2, 5), torch.nn.LayerNorm(5), torch.nn.Tanh(), L(5, 1))
    if kind == "residual":
        return Residual()
    if kind == "arith":
        return Arithmetic()
    return torch.nn.Sequential(L(2, 8), acts[kind], L(8, 1))


def ort_outputs(data, xs, net=None):
    """onnxruntime's float64 outputs at the points ``xs``; where onnxruntime has no float64 kernel
    for an operation (LeakyRelu), PyTorch's float64 outputs of the exported ``net``."""
    try:
        sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    except Exception as e:
        if net is None or "Could not find an implementation" not in str(e):
            raise
        with torch.no_grad():
            return np.stack([net(torch.tensor(x, dtype=torch.float64)).numpy().reshape(-1) for x in xs])
    name = sess.get_inputs()[0].name
    return np.stack([sess.run(None, {name: x})[0].reshape(-1) for x in xs])


KINDS = ["relu", "leaky", "gelu", "gelu_tanh", "tanh", "sigmoid", "softplus", "layernorm", "residual", "arith"]


@pytest.mark.parametrize("opset", [13, 17, 18])
@pytest.mark.parametrize("kind", KINDS)
def test_bound_contains_onnxruntime_outputs(kind, opset):
    """Batch of 2 (N independent rows): the enclosure of each output over the box contains
    onnxruntime's float64 output at 40 sampled points (and at the corners)."""
    net = sequential(kind)
    data = export(net, (2, 2), opset)
    g = onnx_to_graph(onnx.load_model_from_string(data))
    assert isinstance(g, Graph) and g.tokens == 2 and g.in_width == 2
    lo = [Fraction(-1, 2), Fraction(1, 4), Fraction(0), Fraction(-1, 10)]
    hi = [Fraction(-2, 5), Fraction(7, 20), Fraction(1, 10), Fraction(0)]
    res = bound(g, lo, hi, max_boxes=200)
    rng = np.random.default_rng(0)
    pts = [rng.uniform([float(a) for a in lo], [float(b) for b in hi]) for _ in range(40)]
    pts += [np.array([float(a) for a in lo]), np.array([float(b) for b in hi])]
    ys = ort_outputs(data, [p.reshape(2, 2) for p in pts], net)
    assert ys.shape[1] == len(res.lower)
    for k in range(ys.shape[1]):
        assert float(res.lower[k]) <= ys[:, k].min() + 1e-12 * max(1, abs(ys[:, k].min()))
        assert float(res.upper[k]) >= ys[:, k].max() - 1e-12 * max(1, abs(ys[:, k].max()))


def test_the_imported_graph_is_the_exported_function():
    """At exact points, the graph in 200-bit balls agrees with onnxruntime to float64 accuracy,
    for every kind (so a chain that was recognised computes what the nodes compute)."""
    from symbounds.core.contexts import BallContext

    ball = BallContext(200)
    for kind in KINDS:
        net = sequential(kind)
        data = export(net, (1, 2), 13)
        g = onnx_to_graph(onnx.load_model_from_string(data))
        x = np.array([[0.3125, -0.71875]])
        with ball.scope():
            out = g.evaluate(ball, [ball.convert(Fraction(float(v))) for v in x.reshape(-1)])
        y = ort_outputs(data, [x], net)[0]
        for o, v in zip(out, y):
            assert abs(float(o.mid()) - v) <= 1e-12 * max(1, abs(v)), kind


def test_chains_are_read_as_one_operation():
    data = export(Residual(), (1, 2), 13)
    ops = [n.op for n in onnx_to_graph(onnx.load_model_from_string(data)).nodes]
    assert ops == ["affine", "layer_norm", "gelu", "affine", "add", "gelu_tanh", "affine"]
    ops17 = [n.op for n in onnx_to_graph(onnx.load_model_from_string(export(Residual(), (1, 2), 17))).nodes]
    assert ops17 == ops


def test_rank_one_and_rank_three_inputs():
    """``[D]`` and ``[1, N, D]`` inputs (a Linear on rank 3 is a MatMul and an Add, folded into one
    affine node); the bound over a box contains onnxruntime's outputs."""
    net = sequential("tanh")
    for shape, tokens in (((2,), 1), ((1, 3, 2), 3)):
        data = export(net, shape, 17)
        g = onnx_to_graph(onnx.load_model_from_string(data))
        assert g.tokens == tokens and g.input_count == tokens * 2
        assert [n.op for n in g.nodes] == ["affine", "tanh", "affine"]
        lo = [Fraction(k, 10) for k in range(2 * tokens)]
        hi = [v + Fraction(1, 20) for v in lo]
        res = bound(g, lo, hi, max_boxes=100)
        rng = np.random.default_rng(1)
        pts = [rng.uniform([float(a) for a in lo], [float(b) for b in hi]).reshape(shape) for _ in range(30)]
        ys = ort_outputs(data, pts, net)
        for k in range(tokens):
            assert float(res.lower[k]) <= ys[:, k].min() and float(res.upper[k]) >= ys[:, k].max()


def _hand_graph(nodes, inits, opset, shape=(1, 3)):
    from onnx import TensorProto, helper

    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.DOUBLE, list(shape))],
                          [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, list(shape))], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def test_rms_normalization_and_gelu_nodes_of_later_opsets():
    """RMSNormalization (opset 23) and Gelu (opset 20, both forms), written by hand: imported as
    rms_norm, gelu and gelu_tanh; at a point the graph agrees with a 300-bit evaluation of the
    formulas (eps the float32 of the attribute, as ONNX holds it)."""
    import mpmath
    from onnx import helper, numpy_helper

    from symbounds.core.contexts import BallContext

    mp = mpmath.MPContext()
    mp.prec = 300
    w = numpy_helper.from_array(np.array([0.5, -1.0, 2.0]), "w")
    nodes = [helper.make_node("RMSNormalization", ["X", "w"], ["R"], name="rms", epsilon=1e-3),
             helper.make_node("Gelu", ["R"], ["G"], name="ge"),
             helper.make_node("Gelu", ["G"], ["Y"], name="gt", approximate="tanh")]
    g = onnx_to_graph(_hand_graph(nodes, [w], 23))
    assert [n.op for n in g.nodes] == ["rms_norm", "gelu", "gelu_tanh"]
    x = [Fraction(3, 4), Fraction(-1, 8), Fraction(2)]
    ball = BallContext(200)
    with ball.scope():
        out = g.evaluate(ball, [ball.convert(v) for v in x])
    eps = mp.mpf(float(np.float32(1e-3)))
    xs = [mp.mpf(v.numerator) / v.denominator for v in x]
    r = [v / mp.sqrt(sum(t * t for t in xs) / 3 + eps) * wi for v, wi in zip(xs, [0.5, -1.0, 2.0])]
    ge = [v * mp.ncdf(v) for v in r]
    gt = [v / 2 * (1 + mp.tanh(mp.sqrt(2 / mp.pi) * (v + mp.mpf(44715) / 10**6 * v**3))) for v in ge]
    for o, ref in zip(out, gt):
        assert abs(mp.mpf(o.mid().str(80, radius=False)) - ref) < mp.mpf(10) ** -50 + mp.mpf(o.rad().str(5, radius=False)) * 2


@pytest.mark.parametrize("kind", ["relu", "leaky", "gelu", "gelu_tanh", "tanh", "sigmoid", "softplus", "layernorm",
                                  "residual"])
def test_adaptive_bound_is_within_twice_the_sampled_range(kind):
    """Boxes of width 0.1: the default adaptive bound's enclosure is at most 2x the range onnxruntime
    reaches on a fine grid (which lies inside the true range)."""
    net = sequential(kind)
    data = export(net, (1, 2), 17)
    g = onnx_to_graph(onnx.load_model_from_string(data))
    for c in ((0, 0), (Fraction(-1, 2), Fraction(3, 10)), (Fraction(7, 10), Fraction(-9, 10))):
        lo = [Fraction(c[0]) - Fraction(1, 20), Fraction(c[1]) - Fraction(1, 20)]
        hi = [Fraction(c[0]) + Fraction(1, 20), Fraction(c[1]) + Fraction(1, 20)]
        res = bound(g, lo, hi)
        grid = np.linspace(0, 1, 41)
        pts = [np.array([[float(lo[0]) + a * 0.1, float(lo[1]) + b * 0.1]]) for a in grid for b in grid]
        Y = ort_outputs(data, pts, net)
        for k in range(Y.shape[1]):
            ys = Y[:, k]
            span = ys.max() - ys.min()
            lo_, hi_ = res.lower[k], res.upper[k]
            assert float(lo_) <= ys.min() and float(hi_) >= ys.max()
            assert float(hi_ - lo_) <= 2 * span, (kind, c, k, float(hi_ - lo_), span)


def test_a_tampered_weight_is_refuted_somewhere():
    """One weight of the last layer changed by 1/8: over a point box the tampered graph's certified
    enclosure excludes the original network's onnxruntime output."""
    net = sequential("gelu")
    data = export(net, (1, 2), 17)
    g = onnx_to_graph(onnx.load_model_from_string(data))
    doc = graph_to_json(g)
    last = [n for n in doc["nodes"] if n["op"] == "affine"][-1]
    last["W"][0][3] = str(Fraction(last["W"][0][3]) + Fraction(1, 8))
    tampered = graph_from_json(doc)
    x = np.array([[0.25, -0.5]])
    y = ort_outputs(data, [x], net)[0, 0]
    pt = [Fraction(0.25), Fraction(-0.5)]
    honest = bound(g, pt, pt)
    assert float(honest.lower[0]) - 1e-12 <= y <= float(honest.upper[0]) + 1e-12
    bad = bound(tampered, pt, pt)
    assert not (float(bad.lower[0]) - 1e-12 <= y <= float(bad.upper[0]) + 1e-12)


def test_bound_command_takes_onnx_and_graph_files(tmp_path, capsys):
    data = export(sequential("relu"), (1, 2), 17)
    path = tmp_path / "mlp.onnx"
    path.write_bytes(data)
    code, out, err = run_cli(capsys, "bound", str(path), "--box=-1/20:1/20,0:1/10", "--json", "--quiet")
    assert code == 0, err
    res = json.loads(out)
    y = ort_outputs(data, [np.array([[0.0, 0.05]])])[0, 0]
    assert float(res["lower"][0]) <= y <= float(res["upper"][0])
    gpath = tmp_path / "mlp.json"
    gpath.write_text(json.dumps(graph_to_json(onnx_to_graph(onnx.load_model_from_string(data)))))
    code, out2, err = run_cli(capsys, "bound", str(gpath), "--box=-1/20:1/20,0:1/10", "--json", "--quiet")
    assert code == 0, err
    assert json.loads(out2)["lower_exact"] == res["lower_exact"]


def test_unsupported_onnx_operation_is_one_line_naming_node_and_op(tmp_path, capsys):
    net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Hardswish(), torch.nn.Linear(3, 1))
    path = tmp_path / "hs.onnx"
    path.write_bytes(export(net, (1, 2), 17))
    code, out, err = run_cli(capsys, "bound", str(path), "--box=0:1,0:1", "--quiet")
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "HardSwish" in lines[0] and "node" in lines[0]


def _mlp_doc():
    return {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": 1, "width": 2},
            "nodes": [{"name": "h", "op": "affine", "inputs": ["x"], "W": [["1", "2"], ["-1", "1/2"]], "b": ["0", "1"]},
                      {"name": "a", "op": "relu", "inputs": ["h"]},
                      {"name": "y", "op": "affine", "inputs": ["a"], "W": [["1", "1"]]}],
            "output": "y"}


@pytest.mark.parametrize("change,needle", [
    (lambda d: d["nodes"][1].update(op="swish"), "unknown operation 'swish'"),
    (lambda d: d["nodes"][2].update(W=[["1", "1", "1"]]), "expected a row of 2 numbers"),
    (lambda d: d["nodes"].append({"name": "z", "op": "add", "inputs": ["y", "h"]}), "shapes differ"),
    (lambda d: d["input"].update(width=10**9), "input.width"),
    (lambda d: d["input"].update(tokens=10**12), "input.tokens"),
    (lambda d: d["nodes"][0].update(b=["0", 0.5]), "numbers must be strings"),
    (lambda d: d["nodes"][0]["W"][0].__setitem__(0, "__import__('os')"), "is not a number"),
    (lambda d: d.update(output="nowhere"), "output"),
    (lambda d: d["nodes"][1].update(inputs=["later"]), "neither the graph's input nor an earlier node"),
])
def test_malformed_graph_is_one_line_exit_2(tmp_path, capsys, change, needle):
    doc = _mlp_doc()
    change(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    code, out, err = run_cli(capsys, "bound", str(path), "--box=0:1,0:1", "--quiet")
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], err


def test_import_command_writes_a_layer_graph(tmp_path, capsys):
    """``symbounds import`` of an MLP writes a symbounds-graph/1 file that the schema accepts, and
    ``bound`` of it prints each output of the batch as ``Y[row, column]``."""
    from pathlib import Path

    import jsonschema

    data = export(sequential("gelu"), (2, 2), 13)
    src, dst = tmp_path / "mlp.onnx", tmp_path / "mlp.json"
    src.write_bytes(data)
    code, out, err = run_cli(capsys, "import", str(src), "--out", str(dst))
    assert code == 0, err
    assert "layer graph" in out and "input [2, 2]" in out
    doc = json.loads(dst.read_text())
    schema = json.loads((Path(__file__).resolve().parents[2] / "docs/schemas/graph.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert [n["op"] for n in doc["nodes"]] == ["affine", "gelu", "affine"]
    code, out, err = run_cli(capsys, "bound", str(dst), "--box=0:1/10,0:1/10,-1/10:0,1/2:1/2", "--quiet")
    assert code == 0, err
    assert "Y[0, 0] in [" in out and "Y[1, 0] in [" in out



@pytest.mark.parametrize("kind", ["gelu", "gelu_tanh", "layernorm", "residual"])
def test_a_wide_box_is_bounded_in_seconds(kind):
    """[-1, 1]^2 (a box 20 times the width above): one box, the Taylor model and the plain balls
    met. The derivatives of GELU, erf and tanh over a wide ball once had ``e^(rad^2)`` in them
    (Arb's ``x * x`` around 0 is not ``>= 0``), and a LayerNorm + GELU network's one box did not
    finish in 300 s; now it is finite, contains onnxruntime's outputs, and is not astronomically wide."""
    net = sequential(kind)
    data = export(net, (1, 2), 17)
    g = onnx_to_graph(onnx.load_model_from_string(data))
    res = bound(g, [Fraction(-1), Fraction(-1)], [Fraction(1), Fraction(1)], split=0)
    grid = np.linspace(-1, 1, 21)
    Y = ort_outputs(data, [np.array([[a, b]]) for a in grid for b in grid], net)
    for k in range(Y.shape[1]):
        assert float(res.lower[k]) <= Y[:, k].min() and float(res.upper[k]) >= Y[:, k].max()
        assert float(res.upper[k] - res.lower[k]) < 1e4


def test_derivative_enclosures_over_a_wide_ball_stay_near_their_true_ranges():
    """Over [-10, 10] the enclosures of GELU', erf', tanh' = sech^2 and of the tanh form's
    derivative contain their values at 201 points (mpmath at 50 digits, from the textbook
    formulas) and are of moderate width, not wide by the factor e^100 they once were (Arb's
    ``x * x`` and ``abs`` of a ball around 0 reach below 0)."""
    import flint
    import mpmath

    from symbounds.core import activations as act

    x = flint.arb(0, 10)
    s = flint.arb(2).sqrt()
    k, a = (2 / flint.arb.pi()).sqrt(), flint.arb(act.GELU_A)
    mp = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.mp
    mp.dps = 50
    K, A = mp.sqrt(2 / mp.pi), mp.mpf(44715) / 10**6

    def gelu_tanh_d(t):
        u = mp.tanh(K * (t + A * t**3))
        return (1 + u) / 2 + t * (1 - u * u) * K * (1 + 3 * A * t * t) / 2

    cases = ((act._gelu_d(s)(x), lambda t: mp.ncdf(t) + t * mp.npdf(t)),
             (act._erf_d(x), lambda t: 2 / mp.sqrt(mp.pi) * mp.exp(-t * t)),
             (act._sech2(x), lambda t: mp.sech(t) ** 2),
             (act._gelu_tanh_d(k, a)(x), gelu_tanh_d))
    for enc, f in cases:
        assert enc.is_finite() and enc.rad() < 100, enc
        lo, hi = mp.mpf(enc.lower().str(30, radius=False)), mp.mpf(enc.upper().str(30, radius=False))
        for i in range(201):
            v = f(mp.mpf(i - 100) / 10)
            assert lo - mp.mpf(10) ** -25 <= v <= hi + mp.mpf(10) ** -25, (enc, i, v)
    for y, m, M in ((flint.arb(0, 10), 0, 100), (flint.arb(-3, 1), 4, 16), (flint.arb(3, 1), 4, 16)):
        sq = act.square_ball(y)
        assert sq.lower() <= m and sq.upper() >= M and sq.lower() >= m - 1e-6  # a union's rounding, at 53 bits
    lo = flint.arb(1) / 1024
    c = act.clip_below(flint.arb(0, 10), lo)
    assert lo - 1e-6 <= c.lower() <= lo and c.upper() >= 10  # the union's rounding, at 53 bits
