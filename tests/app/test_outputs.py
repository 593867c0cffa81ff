"""Outputs: a file that cannot be written is refused before any work; a run that completes prints
its report even when its constants are beyond float range; a proved certificate is never replaced
by a refuted or undecided one unless --force is given (the new one goes beside it, named on
stderr)."""

import json
from pathlib import Path

import pytest
from cli_helpers import run_cli  # noqa: E402

from symbounds.app.report import approx_text

SMALL = ["--alpha", "1/2", "--holder", "1/2", "--bound", "1/4", "--eps", "1/2", "--target", "sin(x1)/4"]


def _written(err: str) -> list[str]:
    return [line[len("written: "):] for line in err.splitlines() if line.startswith("written: ")]


def _one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("symbounds: error: "), err
    return lines[0]


# ------------------------------------------------------------------------------------------
# outputs checked before the work


class _NoWork(Exception):
    pass


@pytest.fixture
def no_work(monkeypatch):
    """Any of the commands' work functions, if reached, fails the test: the output check must
    come first."""

    def refuse(*a, **k):
        raise _NoWork("the work ran before the output was checked")

    # the command functions import these when they run, so they are replaced where they live
    import symbounds.core.onnx_export as onnx_export
    import symbounds.core.onnx_io as onnx_io
    import symbounds.papers.alcalde.run as interp
    import symbounds.papers.shi_liao.certificate as sl_cert
    import symbounds.papers.shi_liao.run as pou
    import symbounds.papers.shi_liao.sweep as sweep

    for mod, name in ((sl_cert, "certify_instance"), (pou, "run"), (interp, "run"), (sweep, "sweep"),
                      (onnx_export, "export_onnx"), (onnx_io, "import_onnx")):
        monkeypatch.setattr(mod, name, refuse)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    from symbounds.core.modelfile import export_model
    from symbounds.papers import shi_liao as sl

    p = tmp_path_factory.mktemp("model") / "pou.json"
    export_model(sl.build(sl.constants(sl.Instance(eps="1/2"))), str(p))
    return p


def _device(tmp_path):
    """A character device node of our own (a copy of /dev/null's numbers) in the test's folder:
    a test that wrote over /dev/null itself would, run as root against a broken check, replace the
    machine's /dev/null with a regular file."""
    import os
    import stat

    p = tmp_path / "null"
    try:
        os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs root (the FIFO case covers non-regular outputs)")
    return p


def _bad_output(tmp_path, where):
    import os

    if where == "a folder":
        (tmp_path / "folder").mkdir()
        return str(tmp_path / "folder"), "cannot write over a folder"
    if where == "the current folder":
        return ".", "cannot write over a folder"
    if where == "a missing folder":
        return str(tmp_path / "missing" / "x.json"), "does not exist"
    if where == "a FIFO":
        os.mkfifo(tmp_path / "fifo")
        return str(tmp_path / "fifo"), "cannot write over a FIFO or pipe"
    if where == "a device":
        return str(_device(tmp_path)), "cannot write over a character device"
    # /sys takes no new file, whoever runs the test (root included; permission bits would not say)
    assert where == "an unwritable folder"
    return "/sys/symbounds-test.json", "cannot write in folder /sys"


@pytest.mark.parametrize("where", ["a folder", "the current folder", "a missing folder", "a FIFO", "a device",
                                   "an unwritable folder"])
@pytest.mark.parametrize("command", ["certify --out", "pou --out", "pou --export", "interp --export",
                                     "export --onnx", "import --out", "sweep --out"])
def test_unwritable_outputs_are_refused_before_any_work(capsys, tmp_path, no_work, model_file, monkeypatch,
                                                        command, where):
    import os
    import stat

    monkeypatch.chdir(tmp_path)
    path, fragment = _bad_output(tmp_path, where)
    argv = {
        "certify --out": ["certify", *SMALL, "--quiet", "--out", path],
        "pou --out": ["pou", *SMALL, "--quiet", "--out", path],
        "pou --export": ["pou", *SMALL, "--quiet", "--export", path],
        "interp --export": ["interp", "--random", "3,6,2,2", "--quiet", "--export", path],
        "export --onnx": ["export", str(model_file), "--onnx", path],
        "import --out": ["import", str(model_file), "--out", path],
        "sweep --out": ["sweep", "--eps", "1/2", "--quiet", "--out", path],
    }[command]
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and fragment in _one_error_line(err) and out == ""
    if where == "a device":
        assert stat.S_ISCHR(os.stat(path).st_mode)  # still a device, not a file renamed over it


# ------------------------------------------------------------------------------------------
# a completed run with constants beyond float range


def test_approx_text_reads_exponents_beyond_the_user_number_bound():
    # hand-rounded to 12 significant digits: 1.89636578371|74... -> ...372
    assert approx_text("1.89636578371740290810561665648641e+1029", 12) == "1.89636578372e+1029"
    assert approx_text("-2.5e-3000", 3) == "-2.50e-3000"
    assert approx_text("0.0249973963917", 4) == "0.02500"


def test_pou_with_a_target_beyond_its_bound_prints_the_report_and_refutes_it(capsys):
    """exp(2400 x1) reaches e^2400 ~ 2.03e1042 at x1 = 1, far above the declared B = 2: the run
    completes, prints every constant (some above 10^1000) and refutes A1 (exit 1)."""
    code, out, err = run_cli(capsys, "pou", "--target", "exp(2400*x1)", "--quiet")
    assert code == 1, err
    assert "internal error" not in err and err == ""
    a1 = next(line for line in out.splitlines() if line.strip().startswith("A1 "))
    assert "refuted" in a1
    # e^2400 = 10^(2400 / ln 10) = 10^1042.306...: the measured sup of |g| starts 2.0265e+1042
    assert "2.0265464745" in out and "e+1042" in out


def test_pou_export_of_weights_beyond_a_model_file_writes_nothing_and_keeps_the_earlier_file(capsys, tmp_path):
    """``--export`` reads its JSON back before writing: a file the reader would refuse (a weight of
    e^(2400 (1 - 1/80)) = 10^1029.27 at P = 40) is not written; the report still prints, then one
    error line, exit 2, and an earlier file at the path is untouched."""
    path = tmp_path / "net.json"
    path.write_text("earlier\n")
    code, out, err = run_cli(capsys, "pou", "--target", "exp(2400*x1)", "--quiet", "--export", str(path))
    line = _one_error_line(err)
    assert code == 2 and path.read_text() == "earlier\n"
    assert "verdict: refuted" in out  # the report of the completed run
    assert str(path) in line and "10^1029" in line and "not written" in line
    # a readable instance still exports, and the file reads back
    code, _, err = run_cli(capsys, "pou", "--quiet", "--export", str(path))
    assert code == 0 and _written(err) == [str(path)]
    from symbounds.core.modelfile import load_model

    assert load_model(str(path)).layers


def test_certify_with_weights_beyond_a_model_file_names_the_instance_not_a_field(capsys, tmp_path):
    out_file = tmp_path / "c.json"
    code, out, err = run_cli(capsys, "certify", "--target", "exp(2400*x1)", "--quiet", "--out", str(out_file))
    line = _one_error_line(err)
    assert code == 2 and out == "" and not out_file.exists()
    assert "layers[" not in line and "W_V" not in line  # no model-file field the user never wrote
    # the largest weight is g at the last centre, e^(2400 (1 - 1/(2P))) with P = 40: 10^1029.27
    assert "10^1029" in line and "A1" in line


# ------------------------------------------------------------------------------------------
# a proved certificate is kept


@pytest.fixture
def proved(tmp_path, capsys):
    good = tmp_path / "good.json"
    code, _, err = run_cli(capsys, "certify", "--quiet", "--out", str(good))
    assert code == 0 and _written(err) == [str(good)]
    assert json.loads(good.read_text())["verdict"] == "proved"
    return good


@pytest.mark.parametrize("flags, verdict, code", [(["--M", "50"], "refuted", 1), (["--max-boxes", "3"], "undecided", 3)])
def test_a_failed_run_keeps_the_proved_certificate_and_writes_beside_it(proved, capsys, flags, verdict, code):
    before = proved.read_bytes()
    got, out, err = run_cli(capsys, "certify", "--quiet", *flags, "--out", str(proved))
    beside = proved.with_name(f"good.{verdict}.json")
    assert got == code
    assert proved.read_bytes() == before  # the proved file untouched
    assert json.loads(beside.read_text())["verdict"] == verdict
    assert _written(err) == [str(beside)] and f"{proved} holds a proved certificate" in err
    assert f"certificate written to {beside}" in out
    # the kept file still checks
    ok, _, _ = run_cli(capsys, "check", str(proved))
    assert ok == 0


def test_force_replaces_the_proved_certificate(proved, capsys):
    code, _, err = run_cli(capsys, "certify", "--quiet", "--max-boxes", "3", "--force", "--out", str(proved))
    assert code == 3 and _written(err) == [str(proved)]
    assert json.loads(proved.read_text())["verdict"] == "undecided"
    assert not proved.with_name("good.undecided.json").exists()


def test_a_non_proved_certificate_is_replaced(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    assert run_cli(capsys, "certify", "--quiet", "--max-boxes", "3", "--out", str(bad))[0] == 3
    code, _, err = run_cli(capsys, "certify", "--quiet", "--M", "50", "--out", str(bad))
    assert code == 1 and _written(err) == [str(bad)]
    assert json.loads(bad.read_text())["verdict"] == "refuted"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]


def test_certify_model_keeps_a_proved_certificate_too(tmp_path, capsys, model_file):
    good = tmp_path / "cert.json"
    base = ["certify", "--model", str(model_file), "--eps", "1/2", "--quiet", "--out", str(good)]
    code, _, err = run_cli(capsys, *base, "--target", "sin(2*x1)")
    assert code == 0 and _written(err) == [str(good)]
    before = good.read_bytes()
    code, _, err = run_cli(capsys, *base, "--target", "sin(2*x1) + 2")  # |T - g| ~ 2 > eps: refuted
    assert code == 1 and good.read_bytes() == before
    assert _written(err) == [str(tmp_path / "cert.refuted.json")]


def test_a_folder_beside_the_kept_certificate_is_refused_before_the_run(proved, capsys, no_work):
    Path(str(proved)[:-5] + ".refuted.json").mkdir()
    code, _, err = run_cli(capsys, "certify", "--quiet", "--M", "50", "--out", str(proved))
    assert code == 2 and "good.refuted.json: cannot write over a folder" in _one_error_line(err)
