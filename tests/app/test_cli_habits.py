"""Command-line habits: no abbreviated flags, "did you mean" for a mistyped command, flag or choice,
messages that name a path once, a description and an example in every ``--help`` of the commands a
new user reaches first, a progress bar whose rate has the unit it counts, exact values printed
exactly, and a start that loads no heavy module for ``--version``."""

import io
import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from symbounds.app.args import Bar
from symbounds.app.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _error(capsys, *argv):
    code = main(list(argv))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, (argv, code, err)
    assert len(err) == 1 and err[0].startswith("symbounds: error:"), err
    return err[0]


@pytest.mark.parametrize("argv, flag", [
    (["pou", "--ep", "1/2"], "--ep"),              # once silently read as --eps
    (["certify", "--work", "2"], "--work"),         # once --workers
    (["rate", "--n", "100", "--alph", "1"], "--alph"),
    (["interp", "--random", "3,4,2,1", "--atten", "softmax"], "--atten"),
])
def test_abbreviated_flags_are_refused(capsys, argv, flag):
    msg = _error(capsys, *argv)
    assert f"unrecognized arguments: {flag}" in msg


def test_a_mistyped_flag_gets_a_suggestion(capsys):
    assert _error(capsys, "pou", "--ep", "1/2").endswith("(did you mean --eps?)")
    assert "did you mean --workers?" in _error(capsys, "certify", "--worker", "2")


def test_a_mistyped_command_or_choice_gets_a_suggestion(capsys):
    assert "(did you mean pou?)" in _error(capsys, "puo")
    assert "(did you mean tighten?)" in _error(capsys, "tigthen")
    assert "did you mean ball" in _error(capsys, "pou", "--context", "bal")


def test_nothing_close_gets_no_suggestion(capsys):
    msg = _error(capsys, "pou", "--zzzzzz", "1")
    assert "did you mean" not in msg
    assert "did you mean" not in _error(capsys, "qqqqqqq")


def test_a_missing_file_is_named_once(capsys, tmp_path):
    model = ROOT / "tests" / "data" / "residual_model.json"
    missing = tmp_path / "nonexist.vnnlib"
    msg = _error(capsys, "certify", "--model", str(model), "--spec", str(missing))
    assert msg.count(str(missing)) == 1 and "No such file" in msg


def test_one_input_variable_is_named_x1(capsys):
    msg = _error(capsys, "pou", "--target", "x2", "--quiet")
    assert "(expected x1)" in msg and "x1..x1" not in msg
    assert "(expected x1..x2)" in _error(capsys, "pou", "--d", "2", "--target", "x3", "--quiet")


@pytest.mark.parametrize("command", ["certify", "bound", "import", "export", "check", "prove"])
def test_help_has_a_description_and_an_example(capsys, command):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    usage, _, rest = out.partition("\n\n")
    description = rest.split("\n\n")[0]
    assert len(description.split()) >= 15, description  # a description, not only the usage line
    examples = out.rpartition("\nexample")[2]
    assert f"symbounds {command}" in examples, out


class _Terminal(io.StringIO):
    def isatty(self):
        return True


class _Args:
    quiet = False
    command = "certify"


def test_the_volume_bar_counts_percent(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    stream = _Terminal()
    bar = Bar(_Args(), "box", stream=stream)
    assert bar.bar is not None
    start = len(stream.getvalue())
    bar.volume(Fraction(37, 100), 12)
    assert bar.bar.unit == "%" and bar.bar.n == 37 and bar.bar.total == 100
    bar.bar.refresh()
    shown = stream.getvalue()[start:]
    assert "%/s" in shown and "box/s" not in shown
    bar.close()


def test_rate_prints_exact_values_exactly(capsys):
    assert main(["rate", "--n", "10000", "--d", "2", "--alpha", "1", "--holder", "1", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    eps = Fraction(rep["eps"])
    assert eps == Fraction(1, 10)  # 10000^(-1/4)
    assert Fraction(rep["r_g"]) == eps / 4  # r_g = eps / (4 C_H) at alpha = 1, written exactly: "1/40"
    assert rep["r_g"] == "1/40"
    assert Fraction(rep["P_order_eps^-d/alpha"]) == eps ** -2
    assert Fraction(rep["covering_radius"]) == Fraction(1, 10000)  # sigma / n
    assert Fraction(rep["approx_term"]) == 4 * eps**2


def test_rate_writes_a_long_fraction_as_a_decimal(capsys):
    """eps = 1000^(-1/8) is irrational: eps is a 40-bit dyadic, and r_g = (eps/4)^2 would be a
    60-digit fraction; it is written as its decimal upper bound instead."""
    assert main(["rate", "--n", "1000", "--d", "3", "--alpha", "1/2", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    eps = Fraction(rep["eps"])
    assert "/" not in rep["r_g"] and len(rep["r_g"]) < 20
    r_g = (eps / 4) ** 2
    assert r_g <= Fraction(rep["r_g"]) <= r_g * (1 + Fraction(1, 10**10))



def test_version_imports_no_heavy_module():
    """``--version`` (and the parser behind it) loads neither SymPy, NumPy, python-flint nor
    matplotlib: they are imported by the commands that use them (timed in benchmarks/bench_startup.py)."""
    code = ("import sys; from symbounds.app.cli import main; assert main(['--version']) == 0; "
            "heavy = [m for m in ('sympy', 'numpy', 'flint', 'mpmath', 'matplotlib', 'torch', 'onnx') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_reader_that_closes_stdout_early_is_no_internal_error():
    """``symbounds rate | head -0``: stdout's reader is gone before anything is written.  The
    command ends quietly with 141 (128 + SIGPIPE, as a shell reports it), never with an internal
    error or Python's 'Exception ignored' at exit."""
    import os

    r, w = os.pipe()
    os.close(r)  # every write to w now fails with EPIPE
    try:
        proc = subprocess.run([sys.executable, "-m", "symbounds", "rate", "--n", "10000", "--d", "2"],
                              stdout=w, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    assert proc.returncode == 141, proc.stderr
    assert proc.stderr == ""
