"""The `symbounds` command: exit codes, one-line errors, JSON keys, atomic files."""

import json
import os
import subprocess
import sys

import pytest
from cli_helpers import run_cli  # noqa: E402

SMALL = ["--alpha", "1/2", "--holder", "1/2", "--bound", "1/4", "--eps", "1/2", "--target", "sin(x1)/4",
         "--quiet", "--points", "2"]


def test_default_instance_is_proved(capsys):
    code, out, err = run_cli(capsys, "pou", "--quiet")
    assert code == 0
    assert "verdict: proved" in out
    assert "P " in out and " 40" in out


def test_json_report_has_the_documented_keys(capsys):
    code, out, _ = run_cli(capsys, "pou", *SMALL, "--json", "--at", "0.3", "--at", "1/3")
    assert code == 0
    data = json.loads(out)
    assert {"instance", "constants", "claims", "max_error", "points"} <= data.keys()
    for key in ("r_g", "M_g", "c", "M", "eta", "lambda", "w_ind", "max_weight"):  # numbers: strings
        assert isinstance(data["constants"][key], str), key
    for key in ("P", "D", "d_ff", "heads_1", "heads_2", "params_dense", "params_nonzero"):  # counts: integers
        assert type(data["constants"][key]) is int, key
    assert data["constants"]["P"] == 8 and data["constants"]["r_g"] == "1/16"
    for c in data["claims"]:
        assert {"id", "statement", "context", "prec", "verdict", "lhs", "rhs"} <= c.keys()
    assert [p["x"] for p in data["points"]] == [["3/10"], ["1/3"]]
    # the enclosure of T(0.3) and g(0.3) = sin(0.3)/4 overlap within eps
    g = data["points"][0]["g"]
    assert g.startswith("[0.0738800")  # sin(0.3)/4 = 0.07388005...


def test_fp_context_reports_float64_side_by_side(capsys):
    code, out, _ = run_cli(capsys, "pou", "--quiet", "--points", "1", "--grid", "2", "--M", "100000",
                           "--context", "fp", "--json")
    assert code == 0
    data = json.loads(out)
    status = {c["id"]: c["status"] for c in data["float64"]["claims"]}
    assert status["L3"] == "vacuous" and status["L5.1"] == "wrong"
    q = {r["name"]: r for r in data["float64"]["quantities"]}
    assert q["exp(-cM)"]["value"] == "0.0" and q["exp(-cM)"]["digits"] == 0


@pytest.mark.parametrize("argv, fragment", [
    (["--alpha", "2"], "alpha"),
    (["--alpha", "0"], "alpha"),
    (["--eps", "0"], "eps"),
    (["--eps", "1"], "eps"),
    (["--eps", "-0.1"], "eps"),
    (["--d", "0"], "--d"),
    (["--d", "x"], "--d"),
    (["--holder", "-1"], "Hoelder"),
    (["--bound", "0"], "bound"),
    (["--M", "-3"], "attention scale"),
    (["--Mg", "0"], "partition scale"),
    (["--eps", "nan"], "--eps"),
    (["--eps", "1e99999"], "--eps"),
    (["--target", "y+1"], "unknown variable"),
    (["--target", "foo(x1)"], "unknown function"),
    (["--target", "__import__('os').system('true')"], "--target"),
    (["--target", "x1.__class__"], "--target"),
    (["--at", "0.3,0.4"], "--at"),
    (["--at", "abc"], "--at"),
    (["--at", "2"], "--at"),
    (["--prec", "8"], "--prec"),
    (["--max-prec", "64"], "--max-prec"),
    (["--context", "gpu"], "--context"),
    (["--frobnicate"], "unrecognized"),
    (["--eps", "0.0001"], "tokens"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, fragment):
    code, out, err = run_cli(capsys, "pou", "--quiet", *argv)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("symbounds: error:"), err
    assert fragment in lines[0]
    assert "Traceback" not in err


def test_refuted_scale_exits_1(capsys):
    code, out, _ = run_cli(capsys, "pou", "--quiet", "--points", "1", "--M", "500")
    assert code == 1
    assert "refuted" in out


def test_export_and_out_are_atomic(tmp_path, capsys):
    model = tmp_path / "model.json"
    report = tmp_path / "report.json"
    code, _, _ = run_cli(capsys, "pou", *SMALL, "--export", str(model), "--out", str(report), "--json")
    assert code == 0
    first_model, first_report = model.read_text(), report.read_text()
    assert json.loads(first_model)["format"] == "symbounds-transformer/1"
    assert json.loads(first_report)["verdict"] == "proved"
    # a failing run leaves the earlier good files untouched
    code, _, _ = run_cli(capsys, "pou", *SMALL, "--alpha", "3", "--export", str(model), "--out", str(report))
    assert code == 2
    assert model.read_text() == first_model and report.read_text() == first_report
    assert sorted(os.listdir(tmp_path)) == ["model.json", "report.json"]  # no temporary left behind


def test_missing_output_folder_is_bad_input(tmp_path, capsys):
    code, _, err = run_cli(capsys, "pou", *SMALL, "--export", str(tmp_path / "nope" / "m.json"))
    assert code == 2 and "does not exist" in err


def test_console_script_runs_as_a_module():
    r = subprocess.run([sys.executable, "-m", "symbounds", "pou", *SMALL], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "CI": "true"})
    assert r.returncode == 0, r.stderr
    assert "verdict: proved" in r.stdout
    # under CI (no terminal): no bar; at most a progress line every 5 s (a loaded machine may get one)
    assert all(line.startswith("symbounds: pou: ") for line in r.stderr.splitlines()), r.stderr


def test_undecided_at_the_precision_limit_exits_3(capsys):
    # At M = 1e5, 1 - eta ~ 4e-535 needs ~1800 bits; with at most 1024 bits it stays undecided.
    code, out, _ = run_cli(capsys, "pou", "--quiet", "--points", "0", "--grid", "2", "--M", "100000",
                           "--max-prec", "1024", "--json")
    assert code == 3
    data = json.loads(out)
    assert data["verdict"] == "undecided"
    undecided = {c["id"] for c in data["claims"] if c["verdict"] == "undecided"}
    assert "L2.3" in undecided and not any(c["verdict"] == "refuted" for c in data["claims"])
