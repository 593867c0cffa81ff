"""The checker kernel reads layer graphs (symbounds_kernel/graph.py, docs/checking.md).

The kernel's Taylor models of random graphs (every operation it reads) contain a 300-bit mpmath
evaluation written from the formulas (tests/kernel/graph_reference.py) at sampled points of random
boxes, narrow and wide; certificates written by ``symbounds certify --spec`` on PyTorch MLPs
exported to ONNX and on graph files with attention are accepted, and their tampered copies
rejected (a changed weight, a dropped leaf, a shifted bound: each makes the claim false or
unproved, shown independently by the reference)."""

import random
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from flint import arb, ctx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from graph_reference import MP, random_graph, reference  # noqa: E402

from symbounds_kernel import graph as kg  # noqa: E402
from symbounds_kernel.read import Rejected  # noqa: E402


def _frac(v) -> Fraction:
    """An arb's or an mpf's exact binary value (its midpoint)."""
    if isinstance(v, arb):
        man, exp = v.mid().man_exp()
        return Fraction(int(man)) * Fraction(2) ** int(exp)
    sign, man, exp, _ = MP.mpf(v)._mpf_
    return (-1) ** sign * Fraction(int(man)) * Fraction(2) ** int(exp)


def _rad(v) -> Fraction:
    man, exp = arb(v.rad()).mid().man_exp()
    return Fraction(int(man)) * Fraction(2) ** int(exp)


def contains(t, delta, ref) -> bool:
    """Does the model ``t`` at ``delta`` (``c + <g, delta> +- r``) contain the reference value?"""
    v, rad = _frac(t.c), _rad(t.c) + _frac(t.r.abs_upper())
    for g, dl in zip(t.g, delta):
        v, rad = v + _frac(g) * dl, rad + _rad(g) * abs(dl)
    tol = Fraction(1, 2**240) * (1 + abs(ref))
    return v - rad - tol <= ref <= v + rad + tol


def _box(rng, n, half):
    c = [Fraction(rng.randint(-16, 16), 8) for _ in range(n)]
    return [a - half for a in c], [a + half for a in c]


def _points(rng, lo, hi, k=6):
    pts = [list(lo), list(hi), [(a + b) / 2 for a, b in zip(lo, hi)]]
    pts += [[a + (b - a) * Fraction(rng.randint(0, 64), 64) for a, b in zip(lo, hi)] for _ in range(k)]
    return pts


@pytest.mark.parametrize("seed", range(48))
def test_random_graphs_taylor_models_contain_the_300_bit_reference(seed):
    doc = random_graph(seed)
    n = doc["input"]["tokens"] * doc["input"]["width"]
    rng = random.Random(1000 + seed)
    old = ctx.prec
    ctx.prec = 128
    decided = 0
    try:
        g = kg.Graph(doc, n)
        for half in (Fraction(1, 1024), Fraction(1, 16), Fraction(1, 2), Fraction(8)):
            lo, hi = _box(rng, n, half)
            try:
                ys, _ = g.taylor(lo, hi)
            except ArithmeticError:
                continue  # too wide (or an undecided hardmax): the leaf would be bisected, never passed
            decided += 1
            for x in _points(rng, lo, hi):
                ref = [_frac(v) for v in reference(doc, x)]
                delta = [a - (l + u) / 2 for a, l, u in zip(x, lo, hi)]
                assert len(ys) == len(ref)
                for j, (t, r) in enumerate(zip(ys, ref)):
                    assert contains(t, delta, r), (seed, float(half), j, float(r))
    finally:
        ctx.prec = old
    # the narrowest box is always enclosed, unless a hardmax ties (rows a first hardmax made equal)
    assert decided >= 1 or any(nd.get("hardmax") for nd in doc["nodes"]), seed


# ------------------------------------------------------------------------------------------
# certificates written by ``symbounds certify --spec`` on layer graphs

import copy  # noqa: E402
import hashlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import warnings  # noqa: E402

import symbounds_kernel  # noqa: E402




def _spec(n, lo, hi, outputs, y_min):
    """``L <= X <= H`` and the unsafe region ``Y_0 >= y_min``."""
    text = "".join(f"(declare-const X_{i} Real)\n" for i in range(n))
    text += "".join(f"(declare-const Y_{j} Real)\n" for j in range(outputs))
    text += "".join(f"(assert (>= X_{i} {a}))\n(assert (<= X_{i} {b}))\n" for i, (a, b) in enumerate(zip(lo, hi)))
    return text + f"(assert (>= Y_0 {y_min}))\n"


def _torch_nets():
    import torch

    torch.manual_seed(5)
    L = torch.nn.Linear
    return {"layernorm_gelu": torch.nn.Sequential(L(2, 6), torch.nn.LayerNorm(6), torch.nn.GELU(), L(6, 2)),
            "tanh_sigmoid": torch.nn.Sequential(L(2, 5), torch.nn.Tanh(), L(5, 5), torch.nn.Sigmoid(), L(5, 2)),
            "softplus_gelu_tanh_leaky": torch.nn.Sequential(
                L(2, 5), torch.nn.Softplus(), L(5, 4), torch.nn.GELU(approximate="tanh"), L(4, 4),
                torch.nn.LeakyReLU(0.1), L(4, 1))}


def _attention_graph():
    """3 tokens of width 2: affine, LayerNorm, 2-head causal attention, a residual, erf-GELU,
    mean pooling, one output."""
    q = lambda rows: [[str(Fraction(v, 8)) for v in r] for r in rows]
    return {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": 3, "width": 2}, "nodes": [
        {"name": "h", "op": "affine", "inputs": ["x"], "W": q([[8, -4], [3, 8], [-5, 2]]), "b": ["0", "1/8", "-1/4"]},
        {"name": "n", "op": "layer_norm", "inputs": ["h"], "eps": "1e-5", "weight": ["1", "3/4", "5/4"],
         "bias": ["0", "1/8", "0"]},
        {"name": "a", "op": "attention", "inputs": ["n"], "heads": 2, "Wq": q([[4, 1, -2], [1, -3, 2]]),
         "Wk": q([[2, 5, 1], [-3, 1, 4]]), "Wv": q([[6, -1, 2], [1, 2, -5]]), "Wo": q([[3, -2], [1, 4], [-2, 1]]),
         "bq": ["1/8", "0"], "bo": ["0", "1/16", "0"], "scale": {"inv_sqrt": 1}, "mask": "causal"},
        {"name": "r", "op": "add", "inputs": ["a", "n"]},
        {"name": "g", "op": "gelu", "inputs": ["r"]},
        {"name": "m", "op": "mean_tokens", "inputs": ["g"]},
        {"name": "y", "op": "affine", "inputs": ["m"], "W": q([[5, -3, 4]]), "b": ["1/4"]}], "output": "y"}


def _sampled_max(doc, lo, hi, k=200, seed=0):
    """The largest Y_0 of the 300-bit reference at the box's corners and random points, and that point."""
    import itertools

    rng = random.Random(seed)
    pts = [[Fraction(a) + (Fraction(b) - Fraction(a)) * Fraction(rng.randint(0, 256), 256) for a, b in zip(lo, hi)]
           for _ in range(k)] + [[Fraction(v) for v in c] for c in itertools.product(*zip(lo, hi))]
    return max((_frac(reference(doc, x)[0]), x) for x in pts)


def _redigest(c):
    c["model_sha256"] = hashlib.sha256(json.dumps(c["model"], sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    c["property_sha256"] = hashlib.sha256(c["property"].encode("utf-8")).hexdigest()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """``{name: (certificate, sampled max of Y_0, its point, the property's y_min)}``: each written
    by ``symbounds certify --spec`` with the unsafe region ``Y_0 >= max + 1/20`` (an ONNX MLP
    exported by PyTorch, or a graph file)."""
    import torch

    from symbounds.app.cli import main

    t = tmp_path_factory.mktemp("kgraph")
    models = {}
    for name, net in _torch_nets().items():
        f = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(net.eval(), (torch.zeros(1, 2),), f, opset_version=17, dynamo=False)
        (t / f"{name}.onnx").write_bytes(f.getvalue())
        models[name] = (t / f"{name}.onnx", ["-1/2", "0"], ["1/2", "1"])
    (t / "attention.json").write_text(json.dumps(_attention_graph()))
    models["attention"] = (t / "attention.json", ["0"] * 6, ["1/20"] * 6)
    out = {}
    for name, (path, lo, hi) in models.items():
        from symbounds.core.graph_file import graph_from_json, graph_to_json
        from symbounds.core.onnx_graph import import_onnx_network

        if name == "attention":  # as certify writes it back (every bias, weight and layout spelled out)
            doc, k = graph_to_json(graph_from_json(_attention_graph())), 1
        else:
            doc = graph_to_json(import_onnx_network(str(path)))
            k = len(doc["nodes"][-1]["W"])
        top, x = _sampled_max(doc, lo, hi)
        y_min = top + Fraction(1, 20)
        spec = t / f"{name}.vnnlib"
        spec.write_text(_spec(len(lo), lo, hi, k, f"{float(y_min)!r}"))
        code = main(["certify", "--model", str(path), "--spec", str(spec), "--result", str(t / f"{name}.txt"),
                     "--timeout", "120", "--quiet"])
        assert code == 0 and (t / f"{name}.txt").read_text() == "unsat\n", name
        cert = json.loads((t / f"{name}.cert.json").read_text())
        assert cert["model"]["format"] == "symbounds-graph/1" and cert["model"] == doc
        out[name] = (cert, top, x, Fraction(float(y_min)))
    return out, t


NAMES = ["layernorm_gelu", "tanh_sigmoid", "softplus_gelu_tanh_leaky", "attention"]


def _kernel(cert, t, name="c.json"):
    p = t / name
    p.write_text(json.dumps(cert))
    return symbounds_kernel.check_file(str(p))


@pytest.mark.parametrize("name", NAMES)
def test_the_kernel_accepts_certificates_of_layer_graphs(certs, name):
    (cert, _, _, _), t = certs[0][name], certs[1]
    ok, reason = _kernel(cert, t)
    assert ok, (name, reason)
    assert reason.startswith(f"{len(cert['leaves'])} leaves cover the property's box")


def _bias_raised(c, by):
    """The last node's bias ``b_0`` raised by ``by``: Y_0 raised by ``by`` everywhere."""
    nd = c["model"]["nodes"][-1]
    nd.setdefault("b", ["0"] * len(nd["W"]))
    nd["b"][0] = str(Fraction(nd["b"][0]) + by)


@pytest.mark.parametrize("name", NAMES)
def test_a_changed_weight_that_makes_the_property_fail_is_rejected(certs, name):
    """Y_0 + 1/10 >= max + 1/20 at the sampled maximiser (the reference): the claim is false."""
    (cert, top, x, y_min), t = certs[0][name], certs[1]
    c = copy.deepcopy(cert)
    _bias_raised(c, Fraction(1, 10))
    _redigest(c)
    assert _frac(reference(c["model"], x)[0]) >= y_min  # false, shown without either checker
    ok, reason = _kernel(c, t)
    assert not ok and "the kernel cannot show every unsafe alternative unreachable" in reason, reason


@pytest.mark.parametrize("name", NAMES)
def test_a_shifted_bound_that_makes_the_property_fail_is_rejected(certs, name):
    """The unsafe region lowered to ``Y_0 >= max - 1/100``: reached at the sampled maximiser."""
    (cert, top, x, y_min), t = certs[0][name], certs[1]
    c = copy.deepcopy(cert)
    low = top - Fraction(1, 100)
    assert _frac(reference(c["model"], x)[0]) >= low
    c["property"] = c["property"].replace(f"(assert (>= Y_0 {float(y_min)!r}))", f"(assert (>= Y_0 {float(low)!r}))")
    assert c["property"] != cert["property"]
    _redigest(c)
    ok, reason = _kernel(c, t)
    assert not ok and "cannot show every unsafe alternative unreachable" in reason, reason


@pytest.mark.parametrize("name", NAMES)
def test_a_removed_leaf_or_an_unhashed_weight_is_rejected(certs, name):
    (cert, _, _, _), t = certs[0][name], certs[1]
    c = copy.deepcopy(cert)
    c["leaves"].pop(len(c["leaves"]) // 2)
    if c["leaves"]:
        ok, reason = _kernel(c, t)
        assert not ok and reason == "the leaves do not cover the property's input box", reason
    c = copy.deepcopy(cert)
    _bias_raised(c, Fraction(1, 2**60))
    ok, reason = _kernel(c, t)
    assert not ok and reason == "the model does not match model_sha256"


def test_check_runs_both_checkers_on_a_graph_certificate(certs, capsys):
    from cli_helpers import run_cli

    (cert, _, _, _), t = certs[0]["attention"], certs[1]
    path = t / "attention.cert.json"
    code, so, se = run_cli(capsys, "check", str(path))
    assert code == 0, se
    assert "property certificate valid" in so and "independent kernel: accepted: " in so
    c = copy.deepcopy(cert)
    _bias_raised(c, Fraction(1, 10))
    _redigest(c)
    (t / "raised.json").write_text(json.dumps(c))
    code, so, se = run_cli(capsys, "check", str(t / "raised.json"))
    assert code == 1 and "independent kernel: rejected: leaf" in so


# ------------------------------------------------------------------------------------------
# what the kernel refuses to read (the model's semantics would be in doubt)


def _edit(path, value):
    def f(doc):
        obj = doc
        for k in path[:-1]:
            obj = obj[k]
        if value is KeyError:
            del obj[path[-1]]
        else:
            obj[path[-1]] = value
    return f


BAD = {
    "unknown op": (_edit(("nodes", 4, "op"), "selu"), "unknown op"),
    "unknown key": (_edit(("nodes", 1, "momentum"), "1"), "unknown or missing keys"),
    "missing W": (_edit(("nodes", 0, "W"), KeyError), "unknown or missing keys"),
    "name used twice": (_edit(("nodes", 1, "name"), "h"), "a name used twice"),
    "input not earlier": (_edit(("nodes", 0, "inputs"), ["n"]), "not earlier tensors"),
    "add of two inputs": (_edit(("nodes", 3, "inputs"), ["a"]), "not earlier tensors"),
    "add of two shapes": (_edit(("nodes", 3, "inputs"), ["a", "x"]), "shapes differ"),
    "W's width": (_edit(("nodes", 0, "W", 1), ["1"]), "rows of 2 numbers"),
    "a float weight": (_edit(("nodes", 0, "b", 0), 0.5), "is not a number string"),
    "eps 0": (_edit(("nodes", 1, "eps"), "0"), "nodes[1].eps is not positive"),
    "heads not dividing": (_edit(("nodes", 2, "heads"), 3), "the heads do not divide"),
    "Wk rows": (_edit(("nodes", 2, "Wk"), [["1", "0", "0"]]), "the heads do not divide"),
    "Wo width": (_edit(("nodes", 2, "Wo", 0), ["1"]), "rows of 2 numbers"),
    "scale 0": (_edit(("nodes", 2, "scale"), "0"), "scale is not positive"),
    "scale object": (_edit(("nodes", 2, "scale"), {"sqrt": 2}), "is not a number string"),
    "mask of a zero row": (_edit(("nodes", 2, "mask"), [[0, 0, 0], [1, 1, 0], [1, 1, 1]]), "attends no key"),
    "mask of 2": (_edit(("nodes", 2, "mask"), [[2, 0, 0], [1, 1, 0], [1, 1, 1]]), "mask is not null"),
    "mask of true": (_edit(("nodes", 2, "mask"), [[True, 0, 0], [1, 1, 0], [1, 1, 1]]), "mask is not null"),
    "hardmax 1": (_edit(("nodes", 2, "hardmax"), 1), "hardmax is not true or false"),
    "sequence length 2 of 3 rows": (_edit(("nodes", 5, "sequence_length"), 2), "does not divide the rows"),
    "layout": (_edit(("nodes", 5, "layout"), "token_major"), "an unknown layout"),
    "output": (_edit(("output",), "x"), "'output' is not a node"),
    "extra top-level key": (_edit(("meta",), "1"), "needs exactly"),
    "format": (_edit(("format",), "symbounds-graph/2"), "needs exactly"),
    "tokens": (_edit(("input", "tokens"), 2), "the graph has 4 inputs, the property 6"),
}


BAD.update({  # the node named in the reason
    "heads 0": (_edit(("nodes", 2, "heads"), 0), "nodes[2].heads is not an integer in 1..65536"),
    "attention's sequence": (_edit(("nodes", 2, "sequence_length"), 2), "nodes[2]: the sequence length does not divide"),
    "a float in W": (_edit(("nodes", 0, "W", 0, 0), 0.5), "nodes[0].W: '0.5' is not a number string"),
    "a division by zero": (lambda doc: doc["nodes"].insert(5, {"name": "z", "op": "div_constant", "inputs": ["g"],
                                                                "constant": ["1", "0", "2"]}),
                           "nodes[5]: a division by zero"),
    "GELU's divisor 0": (_edit(("nodes", 4, "divisor"), "0"), "nodes[4].divisor is not positive"),
    "slice start": (lambda doc: doc["nodes"].insert(5, {"name": "z", "op": "slice", "inputs": ["g"], "start": 3,
                                                        "stop": 3}), "nodes[5].start is not an integer in 0..2"),
    "input not an object": (_edit(("input",), "x"), "'input' is not {name, tokens, width}"),
    "tokens true": (_edit(("input", "tokens"), True), "input.tokens is not an integer in 1..65536"),
    "width 0": (_edit(("input", "width"), 0), "input.width is not an integer in 1..65536"),
    "output not a name of the graph": (_edit(("output",), "nosuch"), "'output' is not a node"),
})


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_malformed_graph_is_refused_with_its_reason(name):
    doc = _attention_graph()
    edit, words = BAD[name]
    edit(doc)
    with pytest.raises(Rejected, match="^model: .*" + words.replace("(", ".").replace(")", ".").replace("[", ".").replace("]", ".")):
        kg.Graph(doc, 6)


def test_an_affine_graph_is_enclosed_exactly_and_zero_rows_are_read():
    """``y_0 = relu(x_0 - x_1) + x_0 = 2 x_0 - x_1`` on ``[1/2, 1] x [0, 1/4]`` (the ReLU's argument is
    positive there): the enclosure is ``[3/4, 2]`` up to rounding; ``y_1``, a row of zeros of ``W``
    and of an attention's ``Wo``, is the bias alone."""
    doc = {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": 1, "width": 2}, "nodes": [
        {"name": "u", "op": "affine", "inputs": ["x"], "W": [["1", "-1"], ["0", "0"]], "b": ["0", "3"]},
        {"name": "r", "op": "relu", "inputs": ["u"]},
        {"name": "a", "op": "attention", "inputs": ["x"], "heads": 1, "Wq": [["1", "0"]], "Wk": [["0", "1"]],
         "Wv": [["1", "1"]], "Wo": [["0"], ["0"]], "bo": ["0", "1/2"], "scale": "1"},
        {"name": "s", "op": "add", "inputs": ["r", "a"]},
        {"name": "y", "op": "affine", "inputs": ["s", ], "W": [["1", "0"], ["0", "1"]]},
        {"name": "z", "op": "concat", "inputs": ["y", "x"]},
        {"name": "o", "op": "affine", "inputs": ["z"], "W": [["1", "0", "1", "0"], ["0", "1", "0", "0"]]}],
        "output": "o"}
    old, ctx.prec = ctx.prec, 128
    try:
        ys, h = kg.Graph(doc, 2).taylor([Fraction(1, 2), Fraction(0)], [Fraction(1), Fraction(1, 4)])
        ends = [((t.c - kg.tm.spread(t, h)).lower(), (t.c + kg.tm.spread(t, h)).upper()) for t in ys]
    finally:
        ctx.prec = old
    tol = Fraction(1, 2**100)
    for (lo, hi), (a, b) in zip(ends, [(Fraction(3, 4), Fraction(2)), (Fraction(7, 2), Fraction(7, 2))]):
        assert abs(_frac(lo) - a) < tol and abs(_frac(hi) - b) < tol, (lo, hi, a, b)


def test_the_good_graph_is_read_and_its_defaults_are_the_formats():
    """Defaults (GELU's divisor sqrt 2, gelu_tanh's k = sqrt(2/pi) and a = 0.044715, leaky_relu's
    alpha 1/100, LayerNorm's weight 1 and bias 0, attention's biases 0, one sequence) against the
    reference at a point, where every node takes its default."""
    doc = {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": 2, "width": 2}, "nodes": [
        {"name": "a", "op": "gelu", "inputs": ["x"]}, {"name": "b", "op": "gelu_tanh", "inputs": ["a"]},
        {"name": "c", "op": "add_constant", "inputs": ["b"], "constant": "-1"},
        {"name": "d", "op": "leaky_relu", "inputs": ["c"]}, {"name": "e", "op": "layer_norm", "inputs": ["d"], "eps": "1/10"},
        {"name": "f", "op": "attention", "inputs": ["e"], "heads": 1, "Wq": [["1", "2"]], "Wk": [["2", "-1"]],
         "Wv": [["1", "1"]], "Wo": [["1"]], "scale": "1"}], "output": "f"}
    old = ctx.prec
    ctx.prec = 128
    try:
        g = kg.Graph(doc, 4)
        x = [Fraction(1, 3), Fraction(-2), Fraction(3, 4), Fraction(1, 5)]
        ys, _ = g.taylor(x, x)
    finally:
        ctx.prec = old
    ref = [_frac(v) for v in reference(doc, x)]
    assert g.outputs == 2 and all(contains(t, [0] * 4, r) for t, r in zip(ys, ref))
    assert all(t.r.abs_upper() < 1e-30 for t in ys)  # a point: only rounding


# ------------------------------------------------------------------------------------------
# found by mutation testing (docs/mutation-testing.md, "The kernel's layer graphs")

UNARY = ["tanh", "sigmoid", "softplus", "erf", "gelu", "gelu_tanh", "exp", "relu", "leaky_relu", "rsqrt"]


def _model(rng, scale, positive):
    """A random model ``c + <g, delta> +- r`` in two variables (``|delta_i| <= 1``) and its exact parts."""
    c = Fraction(rng.randint(1 if positive else -40, 40), 8)
    g = [Fraction(rng.randint(-8, 8), 8) * scale for _ in range(2)]
    r = Fraction(rng.randint(0, 8), 8) * scale
    ball = lambda q: arb(q.numerator) / q.denominator
    return kg.tm.TM(ball(c), [ball(x) for x in g], ball(r)), c, g, r


@pytest.mark.parametrize("op", UNARY)
def test_a_function_of_a_model_contains_the_function_of_every_value_it_models(op):
    """For ``v = c + <g, delta> + e`` (``|e| <= r``) the model of ``f`` at ``delta`` contains ``f(v)``
    (300 bits), for narrow and wide models (spreads up to 40: Arb's tanh of such a ball is NaN);
    ``rsqrt`` (LayerNorm's root) for the values at least its ``eps``."""
    rng = random.Random(op)
    eps = Fraction(1, 100)
    p = None if op == "rsqrt" else Graph_node(op)
    old, ctx.prec, finite = ctx.prec, 128, 0
    try:
        for trial in range(40):
            scale = [Fraction(1, 1000), Fraction(1, 8), Fraction(2), Fraction(40)][trial % 4]
            t, c, g, r = _model(rng, scale, op == "rsqrt")
            h = [arb(1), arb(1)]
            out = (kg._rsqrt(t, arb(1) / 100, h, 2) if op == "rsqrt" else kg._OPS[op](p, [[[t]]], h, 2)[0][0])
            if not (out.c.is_finite() and out.r.is_finite() and all(x.is_finite() for x in out.g)):
                continue
            finite += 1
            for _ in range(12):
                delta = [Fraction(rng.randint(-16, 16), 16) for _ in range(2)]
                e = r * Fraction(rng.randint(-16, 16), 16)
                v = c + sum(a * b for a, b in zip(g, delta)) + e
                if op == "rsqrt":
                    if v < eps:
                        continue  # not a value of the model's function, which is at least eps
                    ref = 1 / MP.sqrt(MP.mpf(v.numerator) / v.denominator)
                else:
                    ref = reference({"format": "", "input": {"name": "x", "tokens": 1, "width": 1},
                                     "nodes": [{"name": "f", "op": op, "inputs": ["x"]}], "output": "f"}, [v])[0]
                assert contains(out, delta, _frac(ref)), (op, trial, float(v))
    finally:
        ctx.prec = old
    assert finite >= 20, finite


def Graph_node(op):
    """The parameters the kernel reads for a node of ``op`` with its defaults."""
    return kg.Graph._node({"name": "f", "op": op, "inputs": ["x"]}, 0, {"x": (1, 1)})[3]


@pytest.mark.parametrize("name", ["tanh", "erf", "sigmoid", "softplus"])
def test_a_monotone_function_of_a_wide_ball_is_the_hull_of_its_ends(name):
    """Over ``[-300, 299]`` (Arb's own tanh of it is NaN) the hull holds the values at both ends."""
    f = kg._FUNCS[name](None)[0]
    old, ctx.prec = ctx.prec, 128
    try:
        v = f(arb(-1) / 2 + arb(0, 599) / 2)  # the ball [-300, 299]
        assert v.is_finite()
        for x in (-300, -1, 0, 2, 299):
            ref = _frac(reference({"format": "", "input": {"name": "x", "tokens": 1, "width": 1},
                                   "nodes": [{"name": "f", "op": name, "inputs": ["x"]}], "output": "f"}, [x])[0])
            assert _frac(v.lower()) - Fraction(1, 2**100) <= ref <= _frac(v.upper()) + Fraction(1, 2**100), (name, x)
    finally:
        ctx.prec = old
