"""ONNX files that declare more than they hold: every declared dimension and every constant's
shape is bounded before anything of that size is built, and every failure is one line naming the
input, the initializer or the node (exit 2), quickly and in little memory.

The hostile files are tiny (a hundred bytes declaring ``[10^9]``); they are imported in one
child process whose address space is limited, which reports each exit code, message, time and
the peak resident memory."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from symbounds.core.onnx_io import MAX_WIDTH, OnnxError, onnx_to_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _graph(dims, nodes=None, inits=(), out="Y"):
    X = helper.make_tensor_value_info("X", TensorProto.DOUBLE, dims)
    Y = helper.make_tensor_value_info(out, TensorProto.DOUBLE, None)
    nodes = nodes if nodes is not None else [helper.make_node("Relu", ["X"], ["Y"], name="relu")]
    g = helper.make_graph(nodes, "g", [X], [Y], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _declared(name, dims, external=None):
    """A double tensor that declares ``dims`` and holds no data (or points at another file)."""
    t = TensorProto()
    t.name, t.data_type = name, TensorProto.DOUBLE
    t.dims.extend(dims)
    if external is not None:
        t.data_location = TensorProto.EXTERNAL
        e = t.external_data.add()
        e.key, e.value = "location", external
    return t


def _matmul_with(init):
    return _graph([4, 2], [helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")], [init])


def _double(name, arr):
    import numpy as np

    return onnx.numpy_helper.from_array(np.asarray(arr, dtype=np.float64), name)


HOSTILE = {
    "vector 12000": (_graph([12000]), "input 'X': dimension 0 is 12000, expected 1..1024"),
    "vector 10^9": (_graph([10**9]), "input 'X': dimension 0 is 1000000000"),
    "tokens 3 x 10^9": (_graph([3, 10**9]), "input 'X': dimension 1 is 1000000000"),
    "tokens 10^9 x 4": (_graph([10**9, 4]), "input 'X': dimension 0 is 1000000000, expected 1..65536"),
    "vector -5": (_graph([-5]), "input 'X': dimension 0 is -5"),
    "tokens 3 x 0": (_graph([3, 0]), "input 'X': dimension 1 is 0"),
    "initializer 10^6 x 10^6 without data": (
        _matmul_with(_declared("W", [10**6, 10**6])),
        "initializer 'W': declares 1000000 x 1000000 = 1000000000000 entries"),
    "initializer with a negative dimension": (_matmul_with(_declared("W", [2, -3])),
                                              "initializer 'W': a negative dimension"),
    "initializer holding fewer entries than declared": (_matmul_with(_declared("W", [2, 3])), "initializer 'W': "),
    "initializer in another file (/dev/zero)": (_matmul_with(_declared("W", [2, 3], external="/dev/zero")),
                                                "initializer 'W': weights stored in another file"),
    "constant node declaring 10^6 x 10^6": (
        _graph([4, 2], [helper.make_node("Constant", [], ["W"], name="c", value=_declared("v", [10**6, 10**6])),
                        helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")]),
        "node 'c' (Constant): declares 1000000 x 1000000"),
    # 2048 + 2048 entries held, 2048^2 = MAX_ELEMENTS computed: over the budget by the 4096 held
    "a product of two constants larger than the budget": (
        _graph([4, 2], [helper.make_node("MatMul", ["A", "B"], ["C"], name="outer"),
                        helper.make_node("Add", ["X", "C"], ["Y"], name="add")],
               [_double("A", [[1.0]] * 2048), _double("B", [[1.0] * 2048])]),
        "node 'outer' (MatMul): a constant of 4194304 entries"),
    "a layer widening the state beyond the limit": (
        _graph([4, 2], [helper.make_node("MatMul", ["X", "W"], ["H"], name="wide"),
                        helper.make_node("Relu", ["H"], ["Y"], name="relu")],
               [_double("W", [[1.0] * 5000] * 2)]),
        "node 'wide' (MatMul): a tensor of 5000 features, above the limit of 1024"),
}

_CHILD = r"""
import contextlib, io, json, resource, sys, time
limit = 3 << 30
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from symbounds.app.cli import main
import onnx  # imported before the baseline is taken
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = []
for path in sys.argv[2:]:
    err = io.StringIO()
    t0 = time.monotonic()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["import", path, "--out", sys.argv[1]])
    out.append({"code": code, "err": err.getvalue(), "seconds": time.monotonic() - t0})
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
sys.__stdout__.write(json.dumps({"cases": out, "growth_kib": peak - base}))
"""


def test_hostile_declarations_are_one_line_errors_quickly_and_without_allocating(tmp_path):
    paths = []
    for k, (model, _) in enumerate(HOSTILE.values()):
        p = tmp_path / f"h{k}.onnx"
        p.write_bytes(model.SerializeToString())
        assert p.stat().st_size < 100_000  # the files are small: what they declare is not in them
        paths.append(str(p))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("SYMBOUNDS_DEBUG", None)
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "out.json"), *paths], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    for (name, (_, fragment)), r in zip(HOSTILE.items(), got["cases"]):
        lines = r["err"].splitlines()
        assert r["code"] == 2, (name, r)
        assert len(lines) == 1 and lines[0].startswith("symbounds: error: ") and fragment in lines[0], (name, r)
        assert r["seconds"] < 5, (name, r)
    # [12000] alone used to take 1.2 GB; the whole set now stays within a small fraction of that
    assert got["growth_kib"] < 200 * 1024, got["growth_kib"]
    assert not (tmp_path / "out.json").exists()


def test_the_limits_are_where_they_are_said_to_be():
    """A vector input of exactly MAX_WIDTH passes the dimension check (the graph is refused for its
    node instead); one more is refused by the check."""
    with pytest.raises(OnnxError) as e:
        onnx_to_model(_graph([MAX_WIDTH]))
    assert "dimension" not in str(e.value) and "relu" in str(e.value)
    with pytest.raises(OnnxError, match=f"dimension 0 is {MAX_WIDTH + 1}"):
        onnx_to_model(_graph([MAX_WIDTH + 1]))
