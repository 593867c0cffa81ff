"""ONNX out and in: exported constructions agree with the ball evaluation under onnxruntime, an
attention block written with onnx.helper (framework layout: tokens as rows, per-head projections
with biases, scaled scores, concatenated heads, a ReLU block, residual adds) is imported exactly
and its certified bound contains onnxruntime's outputs; unsupported operations are refused."""

import random
from fractions import Fraction

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import sympy
from byon_helpers import load
from onnx import TensorProto, helper, numpy_helper

from symbounds.core.bound import bound
from symbounds.core.contexts import BallContext, ExactContext
from symbounds.core.modelfile import model_from_json
from symbounds.core.onnx_export import model_to_onnx
from symbounds.core.onnx_io import OnnxError, onnx_to_model
from symbounds.core.transformer import forward
from symbounds.papers.alcalde import construction as al
from symbounds.papers.alcalde.dataset import random_dataset
from symbounds.papers.shi_liao import Instance, build, constants


def session(proto):
    return ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])


def exact_float(q):
    return float(Fraction(q))


def test_shi_liao_model_exported_agrees_with_balls():
    model = build(constants(Instance(d=1, eps=sympy.Rational(1, 2))))
    sess = session(model_to_onnx(model))
    ball = BallContext(128)
    rng = random.Random(0)
    pts = [Fraction(0), Fraction(1)] + [Fraction(rng.randrange(0, 1001), 1000) for _ in range(30)]
    for x in pts:
        y = sess.run(None, {"x": np.array([float(x)], dtype=np.float64)})[0]
        with ball.scope():
            ref = forward(ball, model, [x])
        assert ref.rad() < 1e-30
        # values of order 1 through a softmax of O(1e2) scores: float64 accuracy is ~1e-15 here
        assert abs(float(ref.mid()) - float(y[0])) < 1e-13, x


def test_alcalde_hardmax_model_exported_agrees_with_exact_evaluation():
    ds = random_dataset(2, 3, 2, 1, seed=0)
    model = al.build(ds).model
    sess = session(model_to_onnx(model))
    ex = ExactContext()
    for X in ds.inputs:
        d = len(X[0])
        Z, tr = forward(ex, model, [[x[k] for x in X] for k in range(d)], trace=True)
        # float64 accuracy relative to the largest intermediate value (an integer frame)
        scale = max(abs(float(Fraction(int(v.p), int(v.q)))) for Zi in tr.Z for row in Zi for v in row)
        y = sess.run(None, {"X": np.array([[float(v) for v in x] for x in X], dtype=np.float64)})[0]
        for t in range(len(X)):
            for k in range(d):
                exact = Fraction(int(Z[k][t].p), int(Z[k][t].q))
                assert abs(float(exact) - y[t, k]) <= 64 * 2.0**-52 * scale * len(model.layers)


def test_round_trip_of_a_model_file_is_exact():
    mj = load("residual_model.json")  # dyadic weights: exactly representable in float64
    model = model_from_json(mj)
    back = onnx_to_model(model_to_onnx(model))
    x = [Fraction(1, 3), Fraction(2, 7)]
    ex = ExactContext()
    ball = BallContext(200)
    with ball.scope():
        a, b = forward(ball, model, x), forward(ball, back, x)
    assert (a - b).contains(0) and (a - b).rad() < 1e-50
    assert [type(l).__name__ for l in back.layers] == ["Attention", "FeedForward"]
    del ex


# ------------------------------------------------------------------------------------------
# an attention block as a framework would export it


def attention_block(n=3, D=4, dk=2, hidden=5, seed=1):
    rng = np.random.default_rng(seed)
    w = lambda *s: rng.normal(0, 0.5, size=s)
    inits, nodes = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr, dtype=np.float64), name))
        return name

    heads = []
    for h in range(2):
        q = f"q{h}"
        nodes.append(helper.make_node("MatMul", ["X", init(f"Wq{h}", w(D, dk))], [q]))
        nodes.append(helper.make_node("MatMul", ["X", init(f"Wk{h}", w(D, dk))], [f"k{h}0"]))
        nodes.append(helper.make_node("Add", [f"k{h}0", init(f"bk{h}", w(dk))], [f"k{h}"]))  # key bias
        nodes.append(helper.make_node("MatMul", ["X", init(f"Wv{h}", w(D, dk))], [f"v{h}0"]))
        nodes.append(helper.make_node("Add", [f"v{h}0", init(f"bv{h}", w(dk))], [f"v{h}"]))  # value bias
        nodes.append(helper.make_node("Transpose", [f"k{h}"], [f"kt{h}"], perm=[1, 0]))
        nodes.append(helper.make_node("MatMul", [q, f"kt{h}"], [f"s{h}0"]))
        nodes.append(helper.make_node("Div", [f"s{h}0", init(f"sq{h}", np.sqrt(dk))], [f"s{h}"]))
        nodes.append(helper.make_node("Softmax", [f"s{h}"], [f"p{h}"], axis=-1))
        nodes.append(helper.make_node("MatMul", [f"p{h}", f"v{h}"], [f"a{h}"]))
        heads.append(f"a{h}")
    nodes.append(helper.make_node("Concat", heads, ["cat"], axis=-1))
    nodes.append(helper.make_node("MatMul", ["cat", init("Wo", w(2 * dk, D))], ["o0"]))
    nodes.append(helper.make_node("Add", ["o0", init("bo", w(D))], ["o"]))
    nodes.append(helper.make_node("Add", ["X", "o"], ["x1"]))
    nodes.append(helper.make_node("Gemm", ["x1", init("W1", w(hidden, D)), init("b1", w(hidden))], ["h0"], transB=1))
    nodes.append(helper.make_node("Relu", ["h0"], ["h"]))
    nodes.append(helper.make_node("MatMul", ["h", init("W2", w(hidden, D))], ["f0"]))
    nodes.append(helper.make_node("Add", ["f0", init("b2", w(D))], ["f"]))
    nodes.append(helper.make_node("Add", ["x1", "f"], ["Y"]))
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [n, D])],
                              [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, [n, D])], initializer=inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    onnx.checker.check_model(proto)
    return proto


def _bound_around(model, centre, r: float, split: int):
    """The certified bound over the box ``centre +- r`` of the token matrix; the box order is token
    by token, the row-major order of the framework's X [n, D]."""
    lo = [Fraction(float(v)) - Fraction(r) for v in centre.flat]
    hi = [Fraction(float(v)) + Fraction(r) for v in centre.flat]
    return bound(model, lo, hi, split=split)


def test_imported_attention_block_bound_contains_onnxruntime_outputs():
    n, D = 3, 4
    proto = attention_block(n, D)
    model = onnx_to_model(proto)
    assert model.input == "tokens" and model.readout is None
    sess = session(proto)
    rng = np.random.default_rng(7)
    centre, r = rng.normal(0, 1, size=(n, D)), 1 / 32
    res = _bound_around(model, centre, r, split=2)
    assert res.shape == (D, n)
    # the exact rational model at the centre agrees with onnxruntime to float64 accuracy
    ball = BallContext(128)
    with ball.scope():
        Z = forward(ball, model, [[ball.convert(Fraction(float(centre[j, k]))) for j in range(n)] for k in range(D)])
    y0 = sess.run(None, {"X": centre})[0]
    assert max(abs(float(Z[k][j].mid()) - y0[j, k]) for j in range(n) for k in range(D)) < 1e-12
    for _ in range(300):
        X = centre + rng.uniform(-r, r, size=(n, D))
        y = sess.run(None, {"X": X})[0]
        for i, v in enumerate(y.flat):  # y[j, k] is output i = j*D + k
            assert float(res.lower[i]) - 1e-12 <= v <= float(res.upper[i]) + 1e-12
    # and the bound is not vacuous
    assert max(float(b - a) for a, b in zip(res.lower, res.upper)) < 2


def test_unsupported_operation_is_named():
    graph = helper.make_graph([helper.make_node("Tanh", ["X"], ["Y"], name="act")], "g",
                              [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [2, 2])],
                              [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, [2, 2])])
    with pytest.raises(OnnxError, match=r"node 'act' \(Tanh\): operation Tanh"):
        onnx_to_model(helper.make_model(graph))


def fused_heads_block(n=3, D=4, h=2, seed=3, slice_v=False, batch=False):
    """Multi-head attention as fused-projection exports write it: one input projection, Split into
    q, k, v (or Slice), Reshape into heads, Transpose, batched MatMul, Softmax, merge back."""
    dk = D // h
    rng = np.random.default_rng(seed)
    w = lambda *s: rng.normal(0, 0.5, size=s)
    inits = []

    def init(name, arr, dtype=np.float64):
        inits.append(numpy_helper.from_array(np.asarray(arr, dtype=dtype), name))
        return name

    b_in = w(3 * D)
    b_in[:D] = 0  # no query bias (it cannot be written in a model file)
    nodes = [helper.make_node("MatMul", ["X", init("W_in", w(D, 3 * D))], ["p0"]),
             helper.make_node("Add", ["p0", init("b_in", b_in)], ["p"])]
    if slice_v:
        for nm, (a, b) in zip("qkv", [(0, D), (D, 2 * D), (2 * D, 3 * D)]):
            nodes.append(helper.make_node("Slice", ["p", init(f"s{nm}", [a], np.int64), init(f"e{nm}", [b], np.int64),
                                                    init(f"a{nm}", [-1], np.int64)], [nm]))
    else:
        nodes.append(helper.make_node("Split", ["p", init("sizes", [D, D, D], np.int64)], ["q", "k", "v"], axis=-1))
    B = [1] if batch else []
    o = len(B)
    heads_shape = init("hs", B + [n, h, dk], np.int64)
    for nm in "qkv":
        nodes.append(helper.make_node("Reshape", [nm, heads_shape], [f"{nm}r"]))
    nodes += [
        helper.make_node("Transpose", ["qr"], ["qh"], perm=[0] * o + [o + 1, o, o + 2]),
        helper.make_node("Transpose", ["kr"], ["kt"], perm=[0] * o + [o + 1, o + 2, o]),
        helper.make_node("Transpose", ["vr"], ["vh"], perm=[0] * o + [o + 1, o, o + 2]),
        helper.make_node("MatMul", ["qh", "kt"], ["s0"]),
        helper.make_node("Mul", ["s0", init("scale", 1 / np.sqrt(dk))], ["s"]),
        helper.make_node("Softmax", ["s"], ["pr"], axis=-1),
        helper.make_node("MatMul", ["pr", "vh"], ["oh"]),
        helper.make_node("Transpose", ["oh"], ["ot"], perm=[0] * o + [o + 1, o, o + 2]),
        helper.make_node("Reshape", ["ot", init("flat", B + [n, D], np.int64)], ["o"]),
        helper.make_node("MatMul", ["o", init("W_out", w(D, D))], ["a0"]),
        helper.make_node("Add", ["a0", init("b_out", w(D))], ["a"]),
        helper.make_node("Add", ["X", "a"], ["Y"]),
    ]
    graph = helper.make_graph(nodes, "mha", [helper.make_tensor_value_info("X", TensorProto.DOUBLE, B + [n, D])],
                              [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, B + [n, D])], initializer=inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    onnx.checker.check_model(proto)
    return proto


@pytest.mark.parametrize("slice_v, batch", [(False, False), (True, False), (False, True)])
def test_fused_multi_head_block_is_imported_and_bounded(slice_v, batch):
    n, D = 3, 4
    proto = fused_heads_block(n, D, slice_v=slice_v, batch=batch)
    model = onnx_to_model(proto)
    heads = [l for l in model.layers if type(l).__name__ == "Attention"]
    assert len(heads) == 1 and len(heads[0].heads) == 2
    sess = session(proto)
    rng = np.random.default_rng(11)
    centre, r = rng.normal(0, 1, size=(n, D)), 1 / 64
    res = _bound_around(model, centre, r, split=1)
    for _ in range(200):
        X = centre + rng.uniform(-r, r, size=(n, D))
        y = sess.run(None, {"X": X[None] if batch else X})[0]
        for i, v in enumerate(y.flat):
            assert float(res.lower[i]) - 1e-12 <= v <= float(res.upper[i]) + 1e-12
    assert max(float(b - a) for a, b in zip(res.lower, res.upper)) < 1


def test_query_bias_is_refused_naming_the_node():
    proto = fused_heads_block()
    for t in proto.graph.initializer:
        if t.name == "b_in":
            arr = numpy_helper.to_array(t).copy()
            arr[0] = 0.25
            t.CopyFrom(numpy_helper.from_array(arr, "b_in"))
    with pytest.raises(OnnxError, match=r"\(MatMul\): a query bias"):
        onnx_to_model(proto)


@pytest.mark.parametrize("nodes, inits, fragment", [
    # constant shapes that do not fit
    ([helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")], {"W": np.ones((3, 2))}, "node 'mm' (MatMul)"),
    ([helper.make_node("Add", ["X", "b"], ["Y"], name="add")], {"b": np.ones(5)}, "node 'add' (Add)"),
    # a bare input is no layer
    ([helper.make_node("Identity", ["X"], ["Y"], name="id")], {}, "no attention or feed-forward layer"),
    # a softmax of something that is not attention scores
    ([helper.make_node("Softmax", ["X"], ["Y"], name="sm")], {}, "node 'sm' (Softmax)"),
])
def test_malformed_graphs_are_one_line_errors(nodes, inits, fragment):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [2, 2])],
                              [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, [2, 2])],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    with pytest.raises(OnnxError) as info:
        onnx_to_model(helper.make_model(graph))
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_general_linear_skip_becomes_relu_pairs():
    """``relu(X W1 + b1) W2 + X A`` with a general matrix ``A``: the linear part is written as
    pairs of ReLU units, and the imported model computes the graph's function."""
    rng = np.random.default_rng(5)
    n, D, h = 2, 3, 4
    inits = {"W1": rng.normal(size=(D, h)), "b1": rng.normal(size=h), "W2": rng.normal(size=(h, D)),
             "A": rng.normal(size=(D, D))}
    nodes = [helper.make_node("MatMul", ["X", "W1"], ["h0"]), helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h"]), helper.make_node("MatMul", ["h", "W2"], ["f"]),
             helper.make_node("MatMul", ["X", "A"], ["s"]), helper.make_node("Add", ["f", "s"], ["Y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [n, D])],
                              [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, [n, D])],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    model = onnx_to_model(proto)
    (layer,) = model.layers
    assert len(layer.W1) == h + 2 * D and layer.skip == 0
    X = rng.normal(size=(n, D))
    y = session(proto).run(None, {"X": X})[0]
    ball = BallContext(128)
    with ball.scope():
        Z = forward(ball, model, [[ball.convert(Fraction(float(X[j, r]))) for j in range(n)] for r in range(D)])
    assert max(abs(float(Z[r][j].mid()) - y[j, r]) for j in range(n) for r in range(D)) < 1e-12


def test_every_operation_of_the_table_has_its_method_and_every_method_its_operation():
    from symbounds.core import onnx_io

    methods = {m for m in vars(onnx_io._Importer) if m.startswith("op_")}
    assert set(onnx_io._OPS.values()) == methods
    # the operations the module docstring lists are the table's
    for op in ("MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Relu", "Softmax", "Transpose", "Reshape",
               "Concat", "Split", "Slice", "Gather", "Constant", "Identity"):
        assert op in onnx_io._OPS and op in onnx_io.__doc__
    assert len(onnx_io._OPS) == 16
