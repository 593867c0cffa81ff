"""A layer graph written back as ONNX (symbounds.core.graph_onnx_export): onnxruntime, an
independent implementation, computes at random points what a 300-bit Arb evaluation of the graph
gives (a tampered graph does not); the file imports back as the same graph (the same exact numbers
where they are float64 numbers); a PyTorch export goes round unchanged; ``symbounds export`` writes
graphs and refuses bad ones in one line without touching an earlier file."""

import copy
import io
import math
import random
import warnings
from fractions import Fraction

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from symbounds.core.contexts import BallContext
from symbounds.core.graph_file import graph_from_json, graph_to_json
from symbounds.core.graph_onnx_export import graph_to_onnx
from symbounds.core.onnx_graph import onnx_to_graph

from cli_helpers import run_cli

#: every operation of a graph, every number a float64 number (but 0.044715); the first leaky ReLU's
#: alpha and the first LayerNorm's eps are not float32 numbers (PRelu and the LayerNorm chain are
#: written), the second ones are
DOC = {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": 3, "width": 2},
       "nodes": [{"name": "h", "op": "affine", "inputs": ["x"], "W": [["1", "-7/8"], ["1/4", "0.5"], ["0", "2"]],
                  "b": ["5/16", "0", "-1"]},
                 {"name": "a", "op": "leaky_relu", "inputs": ["h"], "alpha": "16777217/134217728"},
                 {"name": "a2", "op": "leaky_relu", "inputs": ["a"], "alpha": "1/4"},
                 {"name": "n", "op": "layer_norm", "inputs": ["a2"], "eps": "1073741825/1099511627776", "weight": ["1", "2", "3"],
                  "bias": ["0", "0", "1"]},
                 {"name": "n2", "op": "layer_norm", "inputs": ["n"], "eps": "1/1024", "weight": ["1", "1/2", "3"],
                  "bias": ["0", "1/8", "1"]},
                 {"name": "r", "op": "add", "inputs": ["n2", "h"]},
                 {"name": "s", "op": "mul_constant", "inputs": ["r"], "constant": "3/2"},
                 {"name": "s2", "op": "add_constant", "inputs": ["s"], "constant": ["1", "-3/8", "0"]},
                 {"name": "q", "op": "rms_norm", "inputs": ["s2"], "eps": "1/1024", "weight": ["2", "1", "-1"]},
                 {"name": "g", "op": "gelu", "inputs": ["q"]},
                 {"name": "g2", "op": "gelu", "inputs": ["g"], "divisor": "3/2"},
                 {"name": "t", "op": "gelu_tanh", "inputs": ["g2"], "a": "0.044715"},
                 {"name": "u", "op": "div_constant", "inputs": ["t"], "constant": ["2", "4", "8"]},
                 {"name": "v", "op": "softplus", "inputs": ["u"]},
                 {"name": "w", "op": "tanh", "inputs": ["v"]},
                 {"name": "z", "op": "sigmoid", "inputs": ["w"]},
                 {"name": "e", "op": "exp", "inputs": ["z"]},
                 {"name": "f", "op": "erf", "inputs": ["e"]},
                 {"name": "m", "op": "relu", "inputs": ["f"]},
                 {"name": "y", "op": "affine", "inputs": ["m"], "W": [["1", "1", "-1"], ["1/2", "0", "3"]]}],
       "output": "y"}


#: operations onnxruntime's CPU provider has no float64 kernel for
NO_ORT_FLOAT64 = {"Erf", "Softplus"}


def ort_run(proto, X: np.ndarray) -> np.ndarray:
    """onnxruntime's output at ``X``; for a float64 graph with an operation it has no float64 kernel
    for, ONNX's own reference evaluator (``onnx.reference``, NumPy: a third implementation) with
    ``math.erf`` for its Erf (the reference's own is a float32-accurate approximation)."""
    name = proto.graph.input[0].name
    float32 = proto.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    X = X.astype(np.float32 if float32 else np.float64)
    if not float32 and {n.op_type for n in proto.graph.node} & NO_ORT_FLOAT64:
        from onnx.reference import ReferenceEvaluator
        from onnx.reference.op_run import OpRun

        class Erf(OpRun):
            def _run(self, x):
                return (np.vectorize(math.erf, otypes=[np.float64])(x),)

        return ReferenceEvaluator(proto, new_ops=[Erf]).run(None, {name: X})[0]
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {name: X})[0]


def arb_values(graph, X: np.ndarray):
    """The graph's outputs at ``X`` (tokens x width, float64 entries taken exactly) as 300-bit balls."""
    flat = [Fraction(float(v)) for v in X.reshape(-1)]
    out = graph.evaluate(BallContext(prec=300), flat)
    return np.array([float(v.mid()) for v in out]).reshape(graph.tokens, graph.out_width), \
        max(float(v.rad()) for v in out)


def points(graph, n, seed):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-3, 3, size=(graph.tokens, graph.in_width)) for _ in range(n)]


def test_onnxruntime_computes_the_graph():
    g = graph_from_json(DOC)
    proto = graph_to_onnx(g)
    ops = {n.op_type for n in proto.graph.node}
    assert {"LeakyRelu", "PRelu", "LayerNormalization", "Pow", "Sqrt", "Erf", "Tanh", "Softplus", "Gemm"} <= ops
    for X in points(g, 8, 0):
        ref, rad = arb_values(g, X)
        assert rad < 1e-60
        got = ort_run(proto, X)
        assert np.allclose(got, ref, rtol=1e-12, atol=1e-12), (got, ref)


def test_onnxruntime_runs_the_float32_export():
    """In float32 every operation has an onnxruntime kernel; the outputs agree to float32 accuracy."""
    g = graph_from_json(DOC)
    proto = graph_to_onnx(g, "float32")
    assert {t.data_type for t in proto.graph.initializer} == {onnx.TensorProto.FLOAT}
    for X in points(g, 4, 6):
        X = X.astype(np.float32).astype(np.float64)  # the float32 input, taken exactly
        got = ort_run(proto, X)
        assert got.dtype == np.float32
        assert np.allclose(got, arb_values(g, X)[0], rtol=1e-4, atol=1e-4)


def test_onnxruntime_float64_where_it_has_the_kernels():
    """Without Erf and Softplus onnxruntime itself runs the float64 export."""
    doc = copy.deepcopy(DOC)
    doc["nodes"] = [n for n in doc["nodes"] if n["op"] not in ("gelu", "softplus", "erf")]
    for n in doc["nodes"]:
        n["inputs"] = [{"g": "q", "g2": "q", "v": "u", "f": "e"}.get(i, i) for i in n["inputs"]]
    g = graph_from_json(doc)
    proto = graph_to_onnx(g)
    assert not {n.op_type for n in proto.graph.node} & NO_ORT_FLOAT64
    for X in points(g, 4, 7):
        assert np.allclose(ort_run(proto, X), arb_values(g, X)[0], rtol=1e-12, atol=1e-12)


def test_a_tampered_graph_is_told_apart():
    """The comparison above is able to fail: one weight changed by 1/64 moves onnxruntime's output."""
    g = graph_from_json(DOC)
    bad = copy.deepcopy(DOC)
    bad["nodes"][-1]["W"][1][2] = "193/64"
    proto = graph_to_onnx(graph_from_json(bad))
    diffs = [np.max(np.abs(ort_run(proto, X) - arb_values(g, X)[0])) for X in points(g, 8, 1)]
    assert max(diffs) > 1e-4


def test_the_file_imports_back_as_the_same_graph():
    """Every number of DOC is a float64 number except sqrt 2 in the default GELU (exported rounded) and
    0.044715: the import gives those as the float64 numbers, the rest unchanged, and the function agrees."""
    g = graph_from_json(DOC)
    back = onnx_to_graph(graph_to_onnx(g))
    assert [n.op for n in back.nodes] == [n.op for n in g.nodes]
    # the graph's names are kept (the importer may rename a node it reads as a scaling)
    assert sum(a.name == b.name for a, b in zip(g.nodes, back.nodes)) >= len(g.nodes) - 2
    for a, b in zip(g.nodes, back.nodes):
        for k, v in a.params.items():
            w = b.params.get(k)
            if k == "a":
                assert w == Fraction(0.044715)
            elif a.op == "gelu" and v is None:
                assert w == Fraction(2 ** 0.5)
            elif a.op == "gelu_tanh" and v is None:
                assert w == Fraction((2 / np.pi) ** 0.5)
            else:
                assert w == v, (a.name, k)
    for X in points(g, 4, 2):
        r1, _ = arb_values(g, X)
        r2, _ = arb_values(back, X)
        assert np.allclose(r1, r2, rtol=1e-13, atol=1e-13)


def random_doc(rng: random.Random) -> dict:
    """A random chain of row-wise operations with dyadic weights (every number a float64 number)."""
    width, tokens = rng.randint(1, 4), rng.randint(1, 3)
    dy = lambda: str(Fraction(rng.randint(-64, 64), 32))
    nodes, prev, w = [], "x", width
    for k in range(rng.randint(2, 7)):
        op = rng.choice(["affine", "relu", "leaky_relu", "tanh", "sigmoid", "softplus", "gelu", "gelu_tanh",
                         "layer_norm", "rms_norm", "add_constant", "mul_constant", "div_constant", "erf"])
        name = f"n{k}"
        nd = {"name": name, "op": op, "inputs": [prev]}
        if op == "affine":
            out = rng.randint(1, 4)
            nd["W"] = [[dy() for _ in range(w)] for _ in range(out)]
            nd["b"] = [dy() for _ in range(out)]
            w = out
        elif op == "leaky_relu":
            nd["alpha"] = rng.choice(["16777217/134217728", "1/8", "3/2"])
        elif op == "gelu":
            nd["divisor"] = rng.choice(["3/2", "1", "5/4"])
        elif op == "gelu_tanh":
            nd["k"], nd["a"] = "3/4", "1/16"
        elif op in ("layer_norm", "rms_norm"):
            nd["eps"] = rng.choice(["1073741825/1099511627776", "1/1024", "1/65536"])
            nd["weight"] = [dy() for _ in range(w)]
            if op == "layer_norm":
                nd["bias"] = [dy() for _ in range(w)]
        elif op.endswith("_constant"):
            nd["constant"] = rng.choice([dy(), [dy() for _ in range(w)]])
            if op == "div_constant":
                nd["constant"] = rng.choice(["1/4", "3", "-5/8"])
        nodes.append(nd)
        prev = name
    return {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": tokens, "width": width},
            "nodes": nodes, "output": prev}


@pytest.mark.parametrize("seed", range(12))
def test_random_graphs_go_round_exactly_and_run(seed):
    rng = random.Random(seed)
    g = graph_from_json(random_doc(rng))
    proto = graph_to_onnx(g)
    back = onnx_to_graph(proto)
    # affine nodes followed by a constant add fold into one bias: compare the functions and, where the
    # node lists agree, the exact numbers
    if [n.op for n in back.nodes] == [n.op for n in g.nodes]:
        assert [n.params for n in back.nodes] == [n.params for n in g.nodes]
    for X in points(g, 3, seed):
        ref, _ = arb_values(g, X)
        assert np.allclose(ort_run(proto, X), ref, rtol=1e-11, atol=1e-11)
        assert np.allclose(arb_values(back, X)[0], ref, rtol=1e-14, atol=1e-14)


def test_a_pytorch_export_goes_round_unchanged():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(2, 5), torch.nn.LayerNorm(5), torch.nn.GELU(),
                            torch.nn.Linear(5, 4), torch.nn.GELU(approximate="tanh"), torch.nn.Linear(4, 1))
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m.double().eval(), (torch.zeros(3, 2, dtype=torch.float64),), f, opset_version=17,
                          dynamo=False)
    g = onnx_to_graph(onnx.load_from_string(f.getvalue()))
    proto = graph_to_onnx(g)
    assert graph_to_json(onnx_to_graph(proto)) == graph_to_json(g)
    X = np.random.default_rng(3).uniform(-1, 1, size=(3, 2))
    with torch.no_grad():
        want = m(torch.from_numpy(X)).numpy()
    assert np.allclose(ort_run(proto, X), want, rtol=1e-13, atol=1e-13)


def test_export_command_writes_graphs_and_refuses_bad_ones(tmp_path, capsys):
    import json

    src = tmp_path / "g.json"
    src.write_text(json.dumps(DOC))
    out = tmp_path / "g.onnx"
    code, _, err = run_cli(capsys, "export", str(src), "--onnx", str(out))
    assert code == 0, err
    g = graph_from_json(DOC)
    X = points(g, 1, 5)[0]
    assert np.allclose(ort_run(onnx.load(str(out)), X), arb_values(g, X)[0], rtol=1e-12, atol=1e-12)
    good = out.read_bytes()
    bad = copy.deepcopy(DOC)
    bad["nodes"][0]["W"][0][0] = 0.5  # a JSON float: refused
    src.write_text(json.dumps(bad))
    code, outp, err = run_cli(capsys, "export", str(src), "--onnx", str(out))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert out.read_bytes() == good


def test_prelu_imports_as_a_leaky_relu_and_per_channel_slopes_are_refused():
    from onnx import helper

    from symbounds.core.onnx_io import OnnxError

    def prelu(slope):
        T = onnx.TensorProto.DOUBLE
        g = helper.make_graph([helper.make_node("PRelu", ["X", "s"], ["Y"])], "g",
                              [helper.make_tensor_value_info("X", T, [1, 3])], [helper.make_tensor_value_info("Y", T, [1, 3])],
                              initializer=[onnx.numpy_helper.from_array(np.array(slope, dtype=np.float64), "s")])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    (node,) = onnx_to_graph(prelu(0.375)).nodes
    assert node.op == "leaky_relu" and node.params["alpha"] == Fraction(3, 8)
    with pytest.raises(OnnxError, match="one slope per channel"):
        onnx_to_graph(prelu([0.1, 0.2, 0.3]))


def test_float32_export_of_a_transformer_model_is_refused(tmp_path, capsys):
    code, _, err = run_cli(capsys, "pou", "--quiet", "--export", str(tmp_path / "m.json"))
    assert code == 0, err
    code, _, err = run_cli(capsys, "export", str(tmp_path / "m.json"), "--onnx", str(tmp_path / "m.onnx"),
                           "--dtype", "float32")
    assert code == 2 and "float64 only" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "m.onnx").exists()


def test_attention_and_token_operations_run_under_onnxruntime():
    """Random graphs of attention (heads, biases, scales, masks, both layouts, several sequences,
    softmax and hardmax) and slice/concat/select_tokens/mean_tokens: onnxruntime's float64 outputs
    agree with a 300-bit evaluation at random points; a tampered value weight is told apart."""
    from test_graph_attention import random_graph as attention_graph

    rng = random.Random(404)
    kinds = set()
    for trial in range(24):
        doc = attention_graph(rng, hardmax=trial % 4 == 3)
        g = graph_from_json(doc)
        kinds |= {n["op"] for n in doc["nodes"]} | {str(n.get("layout")) for n in doc["nodes"]}
        proto = graph_to_onnx(g)
        for X in points(g, 3, trial):
            X = np.round(X * 8) / 8  # dyadic points: hardmax ties stay ties in float64
            ref, _ = arb_values_rows(g, X)
            got = ort_run(proto, X)
            assert got.shape == ref.shape
            assert np.allclose(got, ref, rtol=1e-10, atol=1e-10), (trial, got, ref)
    assert {"slice", "concat", "select_tokens", "mean_tokens", "sequence_major", "batch_major"} <= kinds
    doc = attention_graph(random.Random(5))
    g = graph_from_json(doc)
    bad = copy.deepcopy(doc)
    bad["nodes"][0]["Wv"][0][0] = str(Fraction(bad["nodes"][0]["Wv"][0][0]) + 1)
    proto = graph_to_onnx(graph_from_json(bad))
    assert max(np.max(np.abs(ort_run(proto, X) - arb_values_rows(g, X)[0])) for X in points(g, 4, 9)) > 1e-6


def arb_values_rows(graph, X):
    """:func:`arb_values` for a graph whose output has its own number of rows."""
    flat = [Fraction(float(v)) for v in X.reshape(-1)]
    out = graph.evaluate(BallContext(prec=300), flat)
    return np.array([float(v.mid()) for v in out]).reshape(graph.out_tokens, graph.out_width), \
        max(float(v.rad()) for v in out)


def test_sequence_major_attention_with_several_sequences():
    """Three sequences of two rows, [L, N, E] (rows s, s + 3): each query sees its own sequence's keys
    only; onnxruntime agrees with the 300-bit evaluation."""
    W = lambda r, c, k: [[str(Fraction((i * 3 + j * 5 + k) % 7 - 3, 4)) for j in range(c)] for i in range(r)]
    doc = {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": 6, "width": 2},
           "nodes": [{"name": "a", "op": "attention", "inputs": ["x"], "heads": 2, "Wq": W(2, 2, 1), "Wk": W(2, 2, 2),
                      "Wv": W(4, 2, 3), "Wo": W(3, 4, 4), "bo": ["1/8", "0", "-1/4"], "scale": {"inv_sqrt": 2},
                      "sequence_length": 2, "layout": "sequence_major", "mask": "causal"},
                     {"name": "m", "op": "mean_tokens", "inputs": ["a"], "sequence_length": 2,
                      "layout": "sequence_major"}],
           "output": "m"}
    g = graph_from_json(doc)
    proto = graph_to_onnx(g)
    for X in points(g, 4, 12):
        ref, _ = arb_values_rows(g, X)
        assert np.allclose(ort_run(proto, X), ref, rtol=1e-12, atol=1e-12)
    doc["output"] = "a"  # the rows themselves, in their order
    g = graph_from_json(doc)
    proto = graph_to_onnx(g)
    for X in points(g, 4, 13):
        ref, _ = arb_values_rows(g, X)
        assert np.allclose(ort_run(proto, X), ref, rtol=1e-12, atol=1e-12)


def test_exported_attention_imports_back_as_the_same_function():
    """The import reads most exported attention graphs back (a head per attention node, then the
    output projection): the same function to float64 accuracy (1/sqrt(n) is rounded once); the rest
    are refused in one line naming the node (the heads of one node are written as separate
    products, which the import reads only where its sequences cover the rows once)."""
    from test_graph_attention import random_graph as attention_graph

    from symbounds.core.onnx_io import OnnxError

    rng = random.Random(1)
    read = 0
    for trial in range(20):
        g = graph_from_json(attention_graph(rng))
        try:
            back = onnx_to_graph(graph_to_onnx(g))
        except OnnxError as e:
            assert "\n" not in str(e) and str(e).startswith("node ")
            continue
        read += 1
        for X in points(g, 2, trial):
            X = np.round(X * 8) / 8
            assert np.allclose(arb_values_rows(back, X)[0], arb_values_rows(g, X)[0], rtol=1e-13, atol=1e-13)
    assert read >= 10
