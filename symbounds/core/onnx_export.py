"""ONNX out (optional extra ``symbounds[onnx]``: onnx, onnxruntime); the import is
:mod:`symbounds.core.onnx_io`.

**Export** (:func:`export_onnx`) writes a model as a float64 ONNX graph (opset 17) that onnxruntime
runs.  Tokens are *rows* there, as in the usual frameworks: the state is ``X = Z^T`` (``n x D``).

* vector input ``x`` (shape ``[d]``): ``X_0 = base^T + e_c (x E^T)`` (``e_c`` the one-hot column
  of the embedding's token ``c``); token input ``X`` (shape ``[n, D]``, ``X[j, r] = Z_0[r, j]``);
* attention: per head ``S = (X W_Q^T)(X W_K^T)^T / tau``, ``P = softmax(S)`` along the last axis
  (hardmax: the indicator of the row maxima divided by their number, ties averaged as in the model
  file), ``X' = rho X + sum_h P (X W_V^T) W_O^T``;
* feed-forward: ``X' = eta X + relu(X W1^T + b1) W2^T + b2``;
* output ``y`` (shape ``[1]``): the readout ``X[column, row]``; without a readout, ``Y = X_L``.

Weights are rounded to the nearest float64 once (the exported graph is a float64 copy).
"""

from __future__ import annotations

from fractions import Fraction

from .modelfile import model_from_json, model_to_json
from .onnx_builder import OnnxBuilder
from .onnx_io import OnnxError
from .transformer import Attention, Transformer, flatten

__all__ = ["export_onnx", "model_to_onnx"]


def _exact(model: Transformer) -> Transformer:
    """The model with plain rational weights (constructions hold SymPy expressions)."""
    arrays = [a for _, a in model.weight_arrays()]
    if model.embedding is not None:
        arrays += [model.embedding.base, model.embedding.E]
    if model.definitions or any(not isinstance(v, (int, Fraction)) or isinstance(v, bool)
                                for a in arrays for v in flatten(a)):
        return model_from_json(model_to_json(model, 192))
    return model


def model_to_onnx(model: Transformer):
    """The ONNX ModelProto of ``model`` (float64, opset 17)."""
    b = OnnxBuilder()
    helper = b.helper
    model = _exact(model)
    T = b.T
    nodes = b.nodes
    const, ints, node = b.const, b.ints, b.node
    scalar = const

    def T_(m):
        return tuple(zip(*m))

    if model.input == "vector":
        emb = model.embedding
        D, n = len(emb.base), len(emb.base[0])
        d = len(emb.E[0])
        inp = helper.make_tensor_value_info("x", T, [d])
        row = node("Reshape", ["x", ints([1, d])])
        e = node("MatMul", [row, const(T_(emb.E))])
        onehot = [[1 if j == emb.column else 0] for j in range(n)]
        X = node("Add", [node("MatMul", [const(onehot), e]), const(T_(emb.base))])
    else:
        D = model.width
        inp = helper.make_tensor_value_info("X", T, ["n", D])
        X = "X"
    for layer in model.layers:
        if isinstance(layer, Attention):
            parts = []
            if layer.skip != 0:
                parts.append(X if layer.skip == 1 else node("Mul", [X, scalar(layer.skip)]))
            for h in layer.heads:
                Q = node("MatMul", [X, const(T_(h.W_Q))])
                K = node("MatMul", [X, const(T_(h.W_K))])
                V = node("MatMul", [X, const(T_(h.W_V))])
                S = node("MatMul", [Q, node("Transpose", [K], perm=[1, 0])])
                if layer.tau is not None:
                    S = node("Div", [S, scalar(layer.tau)])
                if layer.kind == "softmax":
                    P = node("Softmax", [S], axis=-1)
                else:
                    m = node("ReduceMax", [S], axes=[-1], keepdims=1)
                    mask = node("Cast", [node("Equal", [S, m])], to=T)
                    P = node("Div", [mask, node("ReduceSum", [mask, ints([-1])], keepdims=1)])
                parts.append(node("MatMul", [node("MatMul", [P, V]), const(T_(h.W_O))]))
        else:
            H = node("Relu", [node("Add", [node("MatMul", [X, const(T_(layer.W1))]), const(layer.b1)])])
            parts = [node("Add", [node("MatMul", [H, const(T_(layer.W2))]), const(layer.b2)])]
            if layer.skip != 0:
                parts.append(X if layer.skip == 1 else node("Mul", [X, scalar(layer.skip)]))
        if not parts:
            raise OnnxError("an attention layer with no heads and no skip")
        X = parts[0]
        for p in parts[1:]:
            X = node("Add", [X, p])
    if model.readout is not None:
        r = model.readout
        tok = node("Gather", [X, ints(r.column)], axis=0)
        y = node("Gather", [tok, ints(r.row)], axis=0)
        nodes.append(helper.make_node("Reshape", [y, ints([1])], ["y"], name="readout"))
        out = helper.make_tensor_value_info("y", T, [1])
    else:
        nodes.append(helper.make_node("Identity", [X], ["Y"], name="output"))
        out = helper.make_tensor_value_info("Y", T, ["n", D])
    return b.model(inp, out, "symbounds")


def export_onnx(model, path: str, dtype: str = "float64") -> None:
    """Write :func:`model_to_onnx` of ``model`` (a layer graph: :func:`graph_to_onnx`, float64 or
    float32) to ``path`` (atomically: an earlier file stays whole when the export fails)."""
    from .files import atomic_write
    from .graph import Graph
    from .graph_onnx_export import graph_to_onnx

    if isinstance(model, Graph):
        proto = graph_to_onnx(model, dtype)
    elif dtype != "float64":
        raise OnnxError(f"--dtype {str(dtype)[:20]}: a symbounds-transformer/1 model is exported in float64 only")
    else:
        proto = model_to_onnx(model)
    atomic_write(path, proto.SerializeToString())
