"""The commands for a user's own network: bound, certify --model/--spec, check, export, import,
and the README's example run line by line."""

import json
import re
import shlex
from fractions import Fraction
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from byon_helpers import as_fraction, data_path, load, reference
from onnx import TensorProto, helper

from symbounds.app.cli import main
from symbounds.core.exact import parse_number

MODEL = data_path("residual_model.json")
TARGET = "-0.46 + 2.76*x1 + 0.42*x2 - 0.44*x1*x2"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_bound_text_and_json(capsys):
    code, out, err = run(capsys, "bound", MODEL, "--box=-1/2:1/2,0:1", "--split", "3")
    assert code == 0 and err == ""
    assert "8 sub-box(es)" in out and "Taylor models" in out
    lo, hi = re.search(r"output in \[(\S+), (\S+)\]", out).groups()
    code, out, _ = run(capsys, "bound", MODEL, "--box=-1/2:1/2,0:1", "--split", "3", "--json")
    data = json.loads(out)
    assert {"lower", "upper", "boxes", "seconds"} <= data.keys() and data["boxes"] == 8
    lower, upper = Fraction(data["lower"]), Fraction(data["upper"])
    exact_lo, exact_hi = Fraction(data["lower_exact"]), Fraction(data["upper_exact"])
    assert lower <= exact_lo <= exact_hi <= upper  # rounded outward
    assert Fraction(lo) <= exact_lo and exact_hi <= Fraction(hi)
    # the corners are inside (independent 300-bit evaluation)
    for x in ([Fraction(-1, 2), 0], [Fraction(1, 2), 1], [0, Fraction(1, 2)]):
        v = reference(load("residual_model.json"), x)[0]
        assert float(lower) <= v <= float(upper)


def test_bound_width_and_tokens(capsys):
    code, out, _ = run(capsys, "bound", data_path("token_model.json"), "--box", "0:1/4,0:1/4,0:1/4,0:1/4",
                       "--width", "1/8", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["boxes"] == 16 and len(data["lower"]) == 4 and data["shape"] == [2, 2]


@pytest.mark.parametrize("box, fragment", [
    ("0:1", "the box has 1 intervals, the model has 2 inputs"),
    ("0:1,0:1,0:1", "3 intervals"),
    ("1:0,0:1", "LO > HI"),
    ("0:1,x:1", "is not a number"),
    ("0:1,0-1", "is not LO:HI"),
    ("0:1,", "is not LO:HI"),
])
def test_bad_box_is_one_line_exit_2(capsys, box, fragment):
    code, out, err = run(capsys, "bound", MODEL, f"--box={box}")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("symbounds: error:") and fragment in err


def broken(tmp_path, edit):
    mj = load("residual_model.json")
    edit(mj)
    p = tmp_path / "m.json"
    p.write_text(json.dumps(mj))
    return p


@pytest.mark.parametrize("edit, fragment", [
    (lambda m: m.pop("layers"), "'layers'"),
    (lambda m: m["embedding"].pop("E"), "embedding.E"),
    (lambda m: m["layers"][1].pop("b1"), "b1"),
    (lambda m: m["layers"][0]["heads"][0]["W_K"].pop(), "W_K: expected 2 rows"),
    (lambda m: m["layers"][1]["W2"][0].append("1"), "W2"),
    (lambda m: m["embedding"]["E"].append(["1", "1"]), "embedding.E: expected 3 rows"),
])
def test_bad_model_file_is_one_line_exit_2(tmp_path, capsys, edit, fragment):
    for argv in (["bound", broken(tmp_path, edit), "--box", "0:1,0:1"],
                 ["certify", "--model", broken(tmp_path, edit), "--target", "x1", "--eps", "1/2"]):
        code, out, err = run(capsys, *argv)
        assert code == 2 and err.count("\n") == 1 and fragment in err, err


def test_certify_model_proves_a_true_eps_and_check_accepts(tmp_path, capsys):
    cert = tmp_path / "cert.json"
    code, out, err = run(capsys, "certify", "--model", MODEL, "--target", TARGET, "--eps", "1/2",
                         "--out", cert, "--quiet")
    assert code == 0 and "verdict: proved" in out
    data = json.loads(cert.read_text())
    assert data["construction"] == "model" and data["verdict"] == "proved"
    assert data["model"] == load("residual_model.json")
    assert parse_number(data["max_bound"]) <= Fraction(1, 2)
    code, out, err = run(capsys, "check", cert, "--quiet")
    assert code == 0 and "certificate valid" in out
    # a tampered weight is rejected (the digest), a tampered digest too (the boxes re-evaluated)
    data["model"]["layers"][1]["b2"][0] = "1"
    cert.write_text(json.dumps(data))
    code, _, err = run(capsys, "check", cert, "--quiet")
    assert code == 1 and "rejected" in err


def test_certify_model_refutes_a_false_eps_with_a_counterexample(capsys):
    code, out, err = run(capsys, "certify", "--model", MODEL, "--target", TARGET, "--eps", "1/5", "--json",
                         "--quiet")
    assert code == 1
    data = json.loads(out)
    assert data["verdict"] == "refuted"
    x = [Fraction(v) for v in data["counterexample"]["x"]]
    t = reference(load("residual_model.json"), x)[0]
    x1, x2 = (float(v) for v in x)
    g = -0.46 + 2.76 * x1 + 0.42 * x2 - 0.44 * x1 * x2
    assert abs(float(t) - g) > 0.2 + 1e-9


def test_certify_spec_proved_and_refuted(capsys):
    code, out, _ = run(capsys, "certify", "--model", MODEL, "--spec", data_path("holds.vnnlib"))
    assert code == 0 and "verdict: proved" in out
    code, out, _ = run(capsys, "certify", "--model", MODEL, "--spec", data_path("fails.vnnlib"), "--json")
    assert code == 1
    data = json.loads(out)
    x = [Fraction(v) for v in data["counterexample"]["x"]]
    y = reference(load("residual_model.json"), x)[0]
    assert 2.25 <= y <= 10


@pytest.mark.parametrize("argv, fragment", [
    (["certify", "--model", MODEL], "--target"),
    (["certify", "--spec", "x.vnnlib"], "--model"),
    (["certify", "--model", MODEL, "--target", "x1", "--eps", "2"], "(0, 1)"),
    (["certify", "--model", MODEL, "--target", "x3", "--eps", "1/2"], "x3"),
    (["certify", "--model", MODEL, "--spec", "missing.vnnlib"], "missing.vnnlib"),
    (["certify", "--model", data_path("token_model.json"), "--target", "x1", "--eps", "1/2"], "vector-input"),
    (["certify", "--model", MODEL, "--d", "2", "--target", "x1", "--eps", "1/2"], "--d"),
])
def test_certify_model_bad_input(capsys, argv, fragment):
    code, out, err = run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and fragment in err, err


def test_export_import_cli_and_unsupported_op(tmp_path, capsys):
    onnx_path = tmp_path / "m.onnx"
    code, out, _ = run(capsys, "export", MODEL, "--onnx", onnx_path)
    assert code == 0 and onnx_path.exists()
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    x = [Fraction(1, 4), Fraction(3, 5)]
    y = sess.run(None, {"x": np.array([float(v) for v in x])})[0][0]
    assert abs(y - float(reference(load("residual_model.json"), x)[0])) < 1e-13
    back = tmp_path / "back.json"
    code, out, _ = run(capsys, "import", onnx_path, "--out", back)
    assert code == 0
    code, out, _ = run(capsys, "bound", back, "--box", "1/4:1/4,3/5:3/5", "--json")
    data = json.loads(out)
    # the imported (dyadic, so identical) model at the point: a tight enclosure of the exact value,
    # which onnxruntime's float64 result approximates
    lo, hi = Fraction(data["lower_exact"]), Fraction(data["upper_exact"])
    assert hi - lo < Fraction(1, 2**100)
    exact = reference(load("residual_model.json"), x)[0]
    assert lo - Fraction(1, 2**250) <= as_fraction(exact) <= hi + Fraction(1, 2**250)
    assert abs(float(lo) - y) < 1e-13
    bad = tmp_path / "bad.onnx"
    graph = helper.make_graph([helper.make_node("Cos", ["X"], ["Y"], name="gate")], "g",
                              [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [2, 2])],
                              [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, [2, 2])])
    bad.write_bytes(helper.make_model(graph).SerializeToString())
    out_json = tmp_path / "never.json"
    code, out, err = run(capsys, "import", bad, "--out", out_json)
    assert code == 2 and err.count("\n") == 1 and "node 'gate' (Cos)" in err
    assert not out_json.exists()
    (tmp_path / "junk.onnx").write_bytes(b"not a protobuf at all \x00\xff")
    code, _, err = run(capsys, "import", tmp_path / "junk.onnx", "--out", out_json)
    assert code == 2 and err.count("\n") == 1 and not out_json.exists()


def test_readme_example_runs(tmp_path, capsys, monkeypatch):
    """The README's example, executed from the README itself, line by line."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    sh = re.search(r"<!-- readme-snippet: own-network -->\s*```sh\n(.*?)```", readme, re.S)
    spec = re.search(r"<!-- readme-snippet: own-network-vnnlib -->\s*```lisp\n(.*?)```", readme, re.S)
    assert sh and spec, "README lost its own-network example"
    lines = [ln for ln in sh.group(1).splitlines() if ln.strip()]
    assert len(lines) <= 10
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prop.vnnlib").write_text(spec.group(1))
    for line in lines:
        argv = shlex.split(line, comments=True)
        assert argv[0] == "symbounds"
        code, out, err = run(capsys, *argv[1:])
        assert code == 0, (line, err)
    assert json.loads((tmp_path / "cert.json").read_text())["verdict"] == "proved"


def test_spec_left_undecided_exits_3(capsys):
    code, out, _ = run(capsys, "certify", "--model", MODEL, "--spec", data_path("holds.vnnlib"), "--max-boxes", "1")
    assert code == 3 and "verdict: undecided" in out


def test_missing_onnx_extra_is_one_line(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "onnx", None)  # as if the extra were not installed
    code, out, err = run(capsys, "export", MODEL, "--onnx", tmp_path / "m.onnx")
    assert code == 2 and err.count("\n") == 1 and "symbounds[onnx]" in err
    assert not (tmp_path / "m.onnx").exists()


def test_bound_reports_the_sampled_range_inside_the_certified_one(capsys):
    code, out, _ = run(capsys, "bound", MODEL, "--box", "0:1,0:1", "--json", "--quiet")
    data = json.loads(out)
    assert code == 0 and data["mode"] == "adaptive" and data["tol"] == "1/10" and data["stopped"] is None
    lo, hi = Fraction(data["lower_exact"]), Fraction(data["upper_exact"])
    slo, shi = Fraction(data["sampled_lower"]), Fraction(data["sampled_upper"])
    assert lo <= slo <= shi <= hi
    assert hi - lo <= Fraction(11, 10) * (shi - slo) + Fraction(1, 10**20)  # the tolerance reached
    # the corners are inside (independent 300-bit evaluation)
    for x in ([0, 0], [1, 1], [0, 1], [1, 0]):
        assert lo <= as_fraction(reference(load("residual_model.json"), x)[0]) <= hi
    code, out, _ = run(capsys, "bound", MODEL, "--box", "0:1,0:1", "--max-boxes", "3", "--quiet")
    assert code == 0 and "stopped by the box limit" in out and "(sampled: values at points)" in out


@pytest.mark.parametrize("argv, fragment", [
    (["bound", MODEL, "--box", "0:1,0:1", "--tol", "0"], "--tol"),
    (["bound", MODEL, "--box", "0:1,0:1", "--tol", "1/10", "--split", "2"], "not allowed with"),
    (["bound", MODEL, "--box", "0:1,0:1", "--timeout", "-1"], "--timeout"),
    (["bound", MODEL, "--box", "0:1,0:1", "--max-boxes", "0"], "--max-boxes"),
    (["certify", "--model", MODEL, "--spec", data_path("holds.vnnlib"), "--timeout", "x"], "--timeout"),
    (["certify", "--model", MODEL, "--target", "x1", "--eps", "1/2", "--timeout", "2"], "--timeout"),
])
def test_bound_and_spec_limits_bad_input(capsys, argv, fragment):
    code, out, err = run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and fragment in err, err


def test_spec_timeout_is_undecided_with_a_partial_report(tmp_path, capsys):
    from byon_helpers import random_model

    from symbounds.core.bound import bound

    mj = random_model(12, 12, score_scale=Fraction(1, 2), embed_scale=Fraction(1, 4))
    (tmp_path / "m.json").write_text(json.dumps(mj))
    res = bound(mj, [0] * 12, [1] * 12, split=4)
    t = res.sampled_upper + (res.upper - res.sampled_upper) / 10  # true, far from provable in 2 s
    decl = "".join(f"(declare-const X_{i} Real)(assert (>= X_{i} 0))(assert (<= X_{i} 1))" for i in range(12))
    unsafe = f"(declare-const Y_0 Real)(assert (>= Y_0 {t.numerator}/{t.denominator}))"
    (tmp_path / "p.vnnlib").write_text(decl + unsafe)
    argv = ["certify", "--model", tmp_path / "m.json", "--spec", tmp_path / "p.vnnlib", "--timeout", "2",
            "--max-boxes", "100000000"]
    code, out, _ = run(capsys, *argv, "--json", "--quiet")
    data = json.loads(out)
    assert code == 3 and data["verdict"] == "undecided" and data["stopped"] == "timeout"
    # on a loaded machine the 2 s may end after the first box: what was done so far is reported either way
    assert data["boxes"] >= 1 and data["undecided_boxes"] >= 1 and 0 <= Fraction(data["proved_fraction"]) < 1
    assert 2 <= float(data["seconds"]) < 8
    code, out, _ = run(capsys, *argv, "--quiet")
    assert code == 3 and "stopped by the timeout" in out and "verdict: undecided (timeout)" in out


def test_spec_counterexample_at_a_non_dyadic_point_is_exact(tmp_path, capsys):
    """T(x) = x at X_0 = 0.3 exactly: the ball of 0.3 straddles the threshold, the exact value does not."""
    ident = {"format": "symbounds-transformer/1", "input": "vector", "precision_bits": 128,
             "embedding": {"base": [["0"]], "E": [["1"]], "column": 0},
             "layers": [{"type": "ffn", "skip": "0", "W1": [["1"], ["-1"]], "b1": ["0", "0"],
                         "W2": [["1", "-1"]], "b2": ["0"]}],
             "readout": {"row": 0, "column": 0}}
    (tmp_path / "id.json").write_text(json.dumps(ident))
    head = "(declare-const X_0 Real)(declare-const Y_0 Real)(assert (>= X_0 0.3))(assert (<= X_0 0.3))"
    (tmp_path / "ge.vnnlib").write_text(head + "(assert (>= Y_0 0.3))")
    (tmp_path / "gt.vnnlib").write_text(head + "(assert (> Y_0 0.3))")
    code, out, _ = run(capsys, "certify", "--model", tmp_path / "id.json", "--spec", tmp_path / "ge.vnnlib")
    assert code == 1 and "X = (3/10)" in out and "Y = (3/10)" in out and "exact rationals" in out
    code, out, _ = run(capsys, "certify", "--model", tmp_path / "id.json", "--spec", tmp_path / "gt.vnnlib")
    assert code == 0 and "verdict: proved" in out


def test_bound_linear_flag_narrows_a_wide_box_and_stays_sound(tmp_path, capsys):
    """``relu(x) - x`` on [-1, 1] (exact range [0, 1]): with the linear bounds one box gives [0, 1]
    up to rounding, the Taylor models alone [-1, 2]; a bad choice is refused by argparse (exit 2)."""
    path = tmp_path / "relu.json"
    path.write_text(json.dumps({"format": "symbounds-transformer/1", "input": "vector",
                                "embedding": {"base": [["0"]], "E": [["1"]], "column": 0},
                                "layers": [{"type": "ffn", "skip": "-1", "W1": [["1"]], "b1": ["0"], "W2": [["1"]],
                                            "b2": ["0"]}], "readout": {"row": 0, "column": 0}}))
    ends = {}
    for flag in ("on", "off", "auto"):
        code, out, _ = run(capsys, "bound", path, "--box=-1:1", "--split", "0", "--linear", flag, "--json")
        data = json.loads(out)
        assert code == 0
        ends[flag] = (Fraction(data["lower_exact"]), Fraction(data["upper_exact"]), data["method"])
    assert ends["on"][2] == ends["auto"][2] == "linear" and ends["off"][2] == "taylor"
    lo, hi, _ = ends["on"]
    assert -Fraction(1, 10**12) < lo <= 0 and 1 <= hi < 1 + Fraction(1, 10**12)
    assert ends["off"][0] <= -1 + Fraction(1, 10**9) and ends["off"][1] >= 2 - Fraction(1, 10**9)
    code, out, _ = run(capsys, "bound", path, "--box=-1:1", "--split", "0")
    assert code == 0 and "linear relaxations" in out
    code, out, err = run(capsys, "bound", path, "--box=-1:1", "--linear", "maybe")
    assert code == 2 and out == "" and "--linear" in err
