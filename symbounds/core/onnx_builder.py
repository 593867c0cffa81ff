"""Writing an ONNX graph: the helper both exporters build on (:mod:`symbounds.core.onnx_export` for
model files, :mod:`symbounds.core.graph_onnx_export` for layer graphs); optional extra
``symbounds[onnx]``."""

from __future__ import annotations

from .onnx_io import OnnxError, onnx_modules

__all__ = ["DTYPES", "OPSET", "OnnxBuilder"]

#: the opset every export writes
OPSET = 17
#: the element types an export can have (a model file's: float64 only)
DTYPES = ("float64", "float32")


class OnnxBuilder:
    """The nodes and initializers of an ONNX graph being written: fresh names (never one of
    ``taken``), constants of the export's float type (each exact number rounded once to the nearest
    number of that type), int64 constants, and nodes with one output."""

    def __init__(self, dtype: str = "float64", taken=()):
        onnx, helper, numpy_helper, np = onnx_modules()
        self.onnx, self.helper, self.numpy_helper, self.np = onnx, helper, numpy_helper, np
        if dtype not in DTYPES:
            raise OnnxError(f"dtype {str(dtype)[:20]!r}: expected one of {', '.join(DTYPES)}")
        self.float = np.float64 if dtype == "float64" else np.float32
        self.T = onnx.TensorProto.DOUBLE if dtype == "float64" else onnx.TensorProto.FLOAT
        self.nodes, self.inits = [], []
        self.count = 0
        self.taken = set(taken)

    def fresh(self, prefix: str) -> str:
        """A name for an intermediate tensor or initializer, never one of ``taken``."""
        while True:
            self.count += 1
            name = f"{prefix}_{self.count}"
            if name not in self.taken:
                return name

    def const(self, values, prefix="c", finite=True) -> str:
        """An initializer of the export's type (a number, a vector or a matrix of exact numbers, each
        rounded to the nearest number of that type; ``-inf`` entries only where not ``finite``)."""
        n = self.fresh(prefix)
        with self.np.errstate(over="ignore"):
            a = self.np.array(values, dtype=object).astype(self.np.float64).astype(self.float)
        if finite and not self.np.all(self.np.isfinite(a)):
            raise OnnxError(f"constant {n}: a number beyond {self.np.dtype(self.float).name}'s range")
        self.inits.append(self.numpy_helper.from_array(a, n))
        return n

    def ints(self, values, prefix="i") -> str:
        n = self.fresh(prefix)
        self.inits.append(self.numpy_helper.from_array(self.np.array(values, dtype=self.np.int64), n))
        return n

    def node(self, op, ins, out=None, **attrs) -> str:
        out = out or self.fresh(op.lower())
        self.nodes.append(self.helper.make_node(op, list(ins), [out], name=out, **attrs))
        return out

    def model(self, inp, out, name: str):
        """The checked ModelProto of the nodes written, input and output value infos ``inp``, ``out``."""
        graph = self.helper.make_graph(self.nodes, name, [inp], [out], initializer=self.inits)
        proto = self.helper.make_model(graph, opset_imports=[self.helper.make_opsetid("", OPSET)],
                                       producer_name="symbounds")
        proto.ir_version = 8
        self.onnx.checker.check_model(proto)
        return proto
