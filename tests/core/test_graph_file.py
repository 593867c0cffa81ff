"""symbounds-graph/1 files: exact round trip, the JSON Schema (docs/schemas/graph.schema.json)
accepts what the writer and the ONNX import write and rejects broken documents, the reader checks
every declared size before building anything, and a graph is never written partly."""

import copy
import json
from fractions import Fraction
from pathlib import Path

import jsonschema
import pytest

from symbounds.core.contexts import ExactContext
from symbounds.core.graph_file import GraphFileError, export_graph, graph_from_json, graph_to_json, load_graph
from symbounds.core.modelfile import ModelFileError
from symbounds.core.networks import load_network

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "schemas" / "graph.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)

DOC = {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": 2, "width": 2},
       "nodes": [{"name": "h", "op": "affine", "inputs": ["x"], "W": [["1", "-7/8"], ["1e-3", "0.5"], ["0", "2"]],
                  "b": ["1/3", "0", "-1"]},
                 {"name": "a", "op": "leaky_relu", "inputs": ["h"], "alpha": "1/10"},
                 {"name": "n", "op": "layer_norm", "inputs": ["a"], "eps": "1e-5", "weight": ["1", "2", "3"],
                  "bias": ["0", "0", "1"]},
                 {"name": "r", "op": "add", "inputs": ["n", "h"]},
                 {"name": "s", "op": "mul_constant", "inputs": ["r"], "constant": "3/2"},
                 {"name": "q", "op": "rms_norm", "inputs": ["s"], "eps": "1/1000"},
                 {"name": "g", "op": "gelu", "inputs": ["q"]},
                 {"name": "t", "op": "gelu_tanh", "inputs": ["g"], "a": "0.044715"},
                 {"name": "u", "op": "div_constant", "inputs": ["t"], "constant": ["2", "4", "8"]},
                 {"name": "v", "op": "softplus", "inputs": ["u"]},
                 {"name": "y", "op": "affine", "inputs": ["v"], "W": [["1", "1", "-1"]]}],
       "output": "y"}


def test_round_trip_is_exact_and_validates():
    g = graph_from_json(DOC)
    assert g.tokens == 2 and g.in_width == 2 and g.out_width == 1 and g.output_count == 2
    out = graph_to_json(g)
    VALIDATOR.validate(DOC)
    VALIDATOR.validate(out)
    again = graph_from_json(out)
    assert [n.params for n in again.nodes] == [n.params for n in g.nodes]
    assert again.nodes[0].params["W"][1][0] == Fraction(1, 1000)  # "1e-3" read as the decimal it spells


def test_broken_documents_fail_the_schema_and_the_reader():
    for change in (lambda d: d["nodes"][0].pop("W"), lambda d: d["nodes"][0]["b"].__setitem__(0, 0.5),
                   lambda d: d["nodes"][1].update(op="swish"), lambda d: d["input"].update(width=10**9)):
        d = copy.deepcopy(DOC)
        change(d)
        assert not VALIDATOR.is_valid(d)
        with pytest.raises(GraphFileError):
            graph_from_json(d)


def test_a_piecewise_linear_graph_is_exact_in_the_exact_context():
    doc = {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": 1, "width": 2},
           "nodes": [{"name": "h", "op": "affine", "inputs": ["x"], "W": [["1", "-1"], ["2", "1"]], "b": ["0", "-1"]},
                     {"name": "a", "op": "relu", "inputs": ["h"]},
                     {"name": "l", "op": "leaky_relu", "inputs": ["h"]},
                     {"name": "r", "op": "add", "inputs": ["a", "l"]},
                     {"name": "y", "op": "affine", "inputs": ["r"], "W": [["1", "3"]], "b": ["1/2"]}],
           "output": "y"}
    g = graph_from_json(doc)
    ex = ExactContext()
    x1, x2 = Fraction(1, 3), Fraction(3, 4)
    h = [x1 - x2, 2 * x1 + x2 - 1]
    r = [max(v, 0) + (v if v >= 0 else v / 100) for v in h]
    (y,) = g.evaluate(ex, [x1, x2])
    assert Fraction(int(y.p), int(y.q)) == r[0] + 3 * r[1] + Fraction(1, 2)


def test_declared_sizes_are_checked_before_building(tmp_path):
    huge = copy.deepcopy(DOC)
    huge["input"] = {"name": "x", "tokens": 65536, "width": 1024}
    with pytest.raises(GraphFileError, match="more than"):
        graph_from_json(huge)
    many = copy.deepcopy(DOC)
    many["nodes"] = [{"name": f"n{i}", "op": "relu", "inputs": ["x"]} for i in range(5000)]
    with pytest.raises(GraphFileError, match="4096"):
        graph_from_json(many)
    wide = copy.deepcopy(DOC)
    wide["nodes"][0]["W"] = [["1", "1"]] * 2000
    with pytest.raises(GraphFileError, match="1024"):
        graph_from_json(wide)


def test_export_reads_back_and_never_writes_partly(tmp_path):
    path = tmp_path / "g.json"
    export_graph(graph_from_json(DOC), str(path))
    assert [n.name for n in load_graph(str(path)).nodes] == [n["name"] for n in DOC["nodes"]]
    assert type(load_network(str(path))).__name__ == "Graph"
    good = path.read_text()
    bad = graph_from_json(DOC)
    bad.nodes[0].params["W"] = ((Fraction(1),),)  # a shape the reader refuses
    with pytest.raises(GraphFileError, match="not written"):
        export_graph(bad, str(path))
    assert path.read_text() == good


def test_loader_names_both_formats():
    with pytest.raises(ModelFileError, match="symbounds-graph/1"):
        from symbounds.core.graph_file import network_from_json

        network_from_json({"format": "other/1"})


def test_bound_of_a_relu_graph_at_a_point_is_exact_and_over_a_box_contains_the_exact_values():
    """A point box of a piecewise-linear graph is evaluated exactly (method "exact", both ends the
    hand-computed value); over a box the enclosure contains the exact value at sampled points."""
    from symbounds.core.bound import bound

    doc = copy.deepcopy(DOC)
    doc["nodes"] = [{"name": "h", "op": "affine", "inputs": ["x"], "W": [["1", "-1"], ["2", "1"]], "b": ["0", "-1"]},
                    {"name": "a", "op": "relu", "inputs": ["h"]},
                    {"name": "y", "op": "affine", "inputs": ["a"], "W": [["1", "3"]], "b": ["1/2"]}]
    g = graph_from_json(doc)  # two rows of width 2

    def f(x1, x2):
        return max(x1 - x2, 0) + 3 * max(2 * x1 + x2 - 1, 0) + Fraction(1, 2)

    pt = [Fraction(1, 3), Fraction(3, 4), Fraction(-1, 2), Fraction(5, 7)]
    res = bound(g, pt, pt)
    assert res.method == "exact"
    assert res.lower == res.upper == (f(pt[0], pt[1]), f(pt[2], pt[3]))
    lo, hi = [Fraction(0)] * 4, [Fraction(1, 2), Fraction(1), Fraction(1, 4), Fraction(1, 2)]
    res = bound(g, lo, hi)
    import random

    rng = random.Random(5)
    for _ in range(50):
        p = [a + (b - a) * Fraction(rng.randint(0, 64), 64) for a, b in zip(lo, hi)]
        for k, v in enumerate((f(p[0], p[1]), f(p[2], p[3]))):
            assert res.lower[k] <= v <= res.upper[k]
