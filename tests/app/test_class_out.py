"""``certify --holder-class --out`` keeps a proved certificate as ``certify --out`` does.

A class run that does not prove (refuted at a small ``--Mg``, undecided at a tiny ``--M``) is
written beside a proved certificate at ``--out`` (``CERT.refuted.json`` / ``CERT.undecided.json``,
named on stderr), ``--force`` replaces it, and the same holds across the two formats (a proved
single-target certificate is not replaced by a class run that does not prove, nor the other way).
"""

import json
import os
from pathlib import Path

import pytest
from cli_helpers import run_cli

#: the smallest class instance that proves (P = 8, under a second of CPU)
SMALL = ["--eps", "1/2", "--holder", "1", "--bound", "1"]


def _written(err):
    return [line[len("written: "):] for line in err.splitlines() if line.startswith("written: ")]


def _one_error_line(err):
    lines = [line for line in err.splitlines() if not line.startswith("written: ")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def proved(tmp_path, capsys):
    good = tmp_path / "good.json"
    code, _, err = run_cli(capsys, "certify", "--holder-class", *SMALL, "--quiet", "--out", str(good))
    assert code == 0 and _written(err) == [str(good)]
    cert = json.loads(good.read_text())
    assert cert["verdict"] == "proved" and cert["format"] == "symbounds-class-certificate/1"
    return good


def _files(folder):
    return sorted(p.name for p in Path(folder).iterdir())


@pytest.mark.parametrize("flags, verdict, code", [
    (["--Mg", "100"], "refuted", 1),  # the default class (C_H = B = 2, eps = 1/10): the worst target is above eps
    (SMALL + ["--Mg", "1", "--M", "1"], "undecided", 3),  # E above eps at a centre, the worst target below it
])
def test_a_class_run_that_does_not_prove_keeps_the_proved_certificate(proved, capsys, flags, verdict, code):
    before = proved.read_bytes()
    got, out, err = run_cli(capsys, "certify", "--holder-class", *flags, "--quiet", "--out", str(proved))
    beside = proved.with_name(f"good.{verdict}.json")
    assert got == code
    assert proved.read_bytes() == before  # the proved file untouched
    rec = json.loads(beside.read_text())
    assert rec["verdict"] == verdict and rec["format"] == "symbounds-class-certificate/1"
    assert _written(err) == [str(beside)] and f"{proved} holds a proved certificate" in err
    assert f"certificate written to {beside}" in out
    assert _files(proved.parent) == sorted(["good.json", beside.name])  # no temporary file left
    ok, out, _ = run_cli(capsys, "check", str(proved), "--quiet")  # the kept file still checks
    assert ok == 0 and "class certificate valid" in out


def test_force_replaces_the_proved_class_certificate(proved, capsys):
    code, _, err = run_cli(capsys, "certify", "--holder-class", "--Mg", "100", "--quiet", "--force",
                           "--out", str(proved))
    assert code == 1 and _written(err) == [str(proved)]
    assert json.loads(proved.read_text())["verdict"] == "refuted"
    assert _files(proved.parent) == ["good.json"]


def test_a_non_proved_class_certificate_is_replaced(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    assert run_cli(capsys, "certify", "--holder-class", "--Mg", "100", "--quiet", "--out", str(bad))[0] == 1
    code, _, err = run_cli(capsys, "certify", "--holder-class", *SMALL, "--Mg", "1", "--M", "1", "--quiet",
                           "--out", str(bad))
    assert code == 3 and _written(err) == [str(bad)]
    assert json.loads(bad.read_text())["verdict"] == "undecided"
    assert _files(tmp_path) == ["bad.json"]


def test_a_proved_certificate_of_the_other_format_is_kept_too(proved, tmp_path, capsys):
    # a single-target run that does not prove, over a proved class certificate
    before = proved.read_bytes()
    code, _, err = run_cli(capsys, "certify", "--quiet", "--M", "50", "--out", str(proved))
    assert code == 1 and proved.read_bytes() == before
    assert _written(err) == [str(tmp_path / "good.refuted.json")]
    # a class run that does not prove, over a proved single-target certificate
    single = tmp_path / "single.json"
    assert run_cli(capsys, "certify", "--quiet", "--out", str(single))[0] == 0
    before = single.read_bytes()
    code, _, err = run_cli(capsys, "certify", "--holder-class", "--Mg", "100", "--quiet", "--out", str(single))
    assert code == 1 and single.read_bytes() == before
    assert _written(err) == [str(tmp_path / "single.refuted.json")]


def test_a_folder_beside_the_kept_class_certificate_is_refused_before_the_run(proved, capsys):
    Path(str(proved)[:-5] + ".refuted.json").mkdir()
    before = proved.read_bytes()
    code, out, err = run_cli(capsys, "certify", "--holder-class", "--Mg", "100", "--quiet", "--out", str(proved))
    assert code == 2 and out == ""
    assert "good.refuted.json: cannot write over a folder" in _one_error_line(err)
    assert proved.read_bytes() == before


def test_a_failed_write_leaves_no_partial_file(proved, capsys, monkeypatch):
    """The certificate is written to a temporary file and renamed: when the rename fails, the
    proved file is untouched and nothing else is left in the folder."""
    import symbounds.core.files as files

    before = proved.read_bytes()

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", refuse)
    code, _, err = run_cli(capsys, "certify", "--holder-class", *SMALL, "--quiet", "--out", str(proved))
    assert code != 0 and "Traceback" not in err
    assert proved.read_bytes() == before
    assert _files(proved.parent) == ["good.json"]
    assert not any(name.startswith(".symbounds-") for name in os.listdir(proved.parent))
