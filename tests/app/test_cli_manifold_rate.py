"""`symbounds pou --manifold ...` and `symbounds rate ...` end to end."""

import json

import pytest

from symbounds.app.cli import main


@pytest.mark.parametrize("argv", [["--manifold", "circle"], ["--manifold", "torus", "--ambient", "6"],
                                  ["--manifold", "curve", "--ambient", "10", "--points", "2"]])
def test_pou_manifold_proves(argv, capsys):
    assert main(["pou", *argv, "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["instance"]["manifold"] == argv[1]
    assert {c["id"] for c in out["claims"]} >= {"M0", "M1", "M2", "L7", "L8.1"}


@pytest.mark.parametrize("argv, msg", [
    (["--manifold", "circle", "--radius", "3/4"], "does not fit"),
    (["--manifold", "sphere", "--ambient", "2"], "below"),
    (["--manifold", "circle", "--d", "2"], "intrinsic dimension"),
    (["--manifold", "circle", "--at", "1/2,1/2"], "does not lie"),
    (["--manifold", "circle", "--target", "x1+"], "--target"),
])
def test_pou_manifold_bad_input_exit_2(argv, msg, capsys):
    assert main(["pou", *argv, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1


def test_rate(capsys):
    assert main(["rate", "--n", "1e6", "--d", "2", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["rate_exponent"] == "1/2" and rep["P"] > 0
    assert main(["rate", "--n", "1", "--d", "2"]) == 2
    assert main(["rate", "--n", "100", "--noise", "-1"]) == 2
