"""``certify --model G.json|G.onnx --target EXPR --eps E`` on layer graphs and ``check`` of the
certificate: proved above the interpolant's true sup error (1/256, tests/core/test_graph_target.py),
refuted below it with an exactly re-checked counterexample, ``check`` valid (saying in one line that
the independent kernel does not read these certificates) and a tampered certificate rejected;
several outputs need ``--output``; bad input is exit 2 with one line."""

import json
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from cli_helpers import run_cli

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "core"))
from test_graph_target import KNOTS, f_exact, interpolant_doc  # noqa: E402


@pytest.fixture
def graph(tmp_path):
    p = tmp_path / "interp.json"
    p.write_text(json.dumps(interpolant_doc()))
    return p


def test_proved_checked_and_tampered(capsys, graph, tmp_path):
    cert = tmp_path / "cert.json"
    code, so, se = run_cli(capsys, "certify", "--model", str(graph), "--target", "x1^2", "--eps", "5/1024",
                           "--out", str(cert), "--quiet")
    assert code == 0, se
    assert "sup over [0,1]^1 of |Y(x) - g(x)| <= 5/1024" in so and "verdict: proved" in so
    code, so, se = run_cli(capsys, "check", str(cert), "--quiet")
    assert code == 0, se
    assert "certificate valid" in so
    assert [line for line in so.splitlines() if line.startswith("independent kernel")] == [
        "independent kernel: not run: it does not read layer-graph target certificates (re-verified by the main "
        "package only)"]
    doc = json.loads(cert.read_text())
    doc["leaves"][0][2] = "1/1000000"  # a bound below the one re-derived
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    code, so, se = run_cli(capsys, "check", str(bad), "--quiet")
    assert code == 1 and "certificate rejected" in se and len(se.strip().splitlines()) == 1


def test_refuted_with_an_exact_counterexample(capsys, graph, tmp_path):
    code, so, se = run_cli(capsys, "certify", "--model", str(graph), "--target", "x1^2", "--eps", "1/300", "--json",
                           "--quiet")
    assert code == 1, se
    doc = json.loads(so)
    assert doc["verdict"] == "refuted"
    x = Fraction(doc["counterexample"]["x"][0])
    assert abs(f_exact(x) - x * x) > Fraction(1, 300)


def test_an_onnx_graph_and_its_outputs(capsys, graph, tmp_path):
    pytest.importorskip("onnx")
    doc = interpolant_doc()
    doc["nodes"][2]["W"].append(["1"] * KNOTS)
    doc["nodes"][2]["b"].append("0")
    two = tmp_path / "two.json"
    two.write_text(json.dumps(doc))
    onnx = tmp_path / "two.onnx"
    code, _, se = run_cli(capsys, "export", str(two), "--onnx", str(onnx))
    assert code == 0, se
    code, so, se = run_cli(capsys, "certify", "--model", str(onnx), "--target", "x1^2", "--eps", "5/1024", "--quiet")
    assert code == 2 and se.startswith("symbounds: error: the graph has 2 outputs: pick one with --output")
    assert len(se.strip().splitlines()) == 1
    code, so, se = run_cli(capsys, "certify", "--model", str(onnx), "--target", "x1^2", "--eps", "5/1024",
                           "--output", "0", "--box", "1/4:1/2", "--quiet")
    assert code == 0, se
    assert "sup over the box [1/4, 1/2] of |Y_0(x) - g(x)| <= 5/1024" in so


@pytest.mark.parametrize("extra,words", [
    (["--target", "y1"], "unknown variable 'y1'"),
    (["--target", "x0"], "unknown variable 'x0'"),
    (["--target", "x1*x2"], "unknown variable 'x2'"),
    (["--target", "__import__('os')"], "--target: invalid character"),
    (["--target", "x1", "--box", "0:1,0:1"], "--box has 2 interval(s)"),
    (["--target", "x1", "--output", "3"], "--output 3"),
    (["--target", "x1", "--workers", "2"], "--workers"),
])
def test_bad_input_is_one_line(capsys, graph, extra, words):
    code, so, se = run_cli(capsys, "certify", "--model", str(graph), "--eps", "1/10", *extra)
    assert code == 2 and words in se and len(se.strip().splitlines()) == 1 and so == ""


def test_a_model_file_refuses_the_graph_only_flags(capsys, tmp_path):
    from symbounds.core.modelfile import export_model
    from symbounds.papers import shi_liao as sl

    p = tmp_path / "m.json"
    export_model(sl.build(sl.constants(sl.Instance(eps="1/2"))), str(p))
    code, _, se = run_cli(capsys, "certify", "--model", str(p), "--target", "x1", "--eps", "1/10", "--output", "0")
    assert code == 2 and "--output and --box apply to a layer graph" in se


def test_the_certificate_validates_against_its_schema(capsys, graph, tmp_path):
    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[2] / "docs" / "schemas"
                         / "graph-target-certificate.schema.json").read_text())
    v = jsonschema.Draft202012Validator(schema)
    for eps, name in (("5/1024", "p.json"), ("1/300", "r.json")):
        run_cli(capsys, "certify", "--model", str(graph), "--target", "x1^2", "--eps", eps, "--out",
                str(tmp_path / name), "--quiet")
        doc = json.loads((tmp_path / name).read_text())
        v.validate(doc)
        broken = dict(doc)
        del broken["leaves"]
        assert not v.is_valid(broken)
        broken = dict(doc, d=str(doc["d"]))
        assert not v.is_valid(broken)
