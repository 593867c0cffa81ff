"""``symbounds latex class``: the theorem for every target of the Hölder class, compiled with a
real pdflatex and read back with pdftotext; its numbers are the (re-checked) certificate's."""

import json
import os
import shutil
import subprocess
from fractions import Fraction

import pytest
from cli_helpers import run_cli

from symbounds.core.exact import decimal_down, decimal_up
from symbounds.papers.shi_liao.class_bound import ClassOptions
from symbounds.papers.shi_liao.class_certificate import certify_class
from symbounds.papers.shi_liao.constants import Instance

HAVE_TEX = shutil.which("pdflatex") is not None and shutil.which("pdftotext") is not None
needs_tex = pytest.mark.skipif(not os.environ.get("CI") and not HAVE_TEX,
                               reason="pdflatex/pdftotext not installed (and CI is not set)")


@pytest.fixture(scope="module")
def cert_file(tmp_path_factory):
    cert, _ = certify_class(Instance(alpha="1/2", C_H=1, B=1, eps="1/2"), ClassOptions(prec=128))
    p = tmp_path_factory.mktemp("cls") / "class.json"
    p.write_text(json.dumps(cert))
    return p, cert


def _pdf_text(folder, name):
    r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", f"{name}.tex"], cwd=folder,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:]
    out = subprocess.run(["pdftotext", f"{name}.pdf", "-"], cwd=folder, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    return " ".join(out.stdout.split())


@needs_tex
def test_class_theorem_compiles_with_the_certificates_numbers(cert_file, tmp_path, capsys):
    assert HAVE_TEX, "CI is set but pdflatex/pdftotext are missing"
    path, cert = cert_file
    code, _, err = run_cli(capsys, "latex", "class", "--certificate", str(path), "--out", str(tmp_path / "thm.tex"))
    assert code == 0, err
    text = _pdf_text(tmp_path, "thm")
    assert "Theorem." in text and "For every g" in text
    assert decimal_up(Fraction(cert["max_bound"]), 7) in text
    assert decimal_down(Fraction(cert["worst"]["lower"]), 7) in text
    assert f"{len(cert['boxes'])} boxes" in text
    assert "P = 32 tokens" in text  # r_g = (eps / (4 C_H))^(1/alpha) = 1/64: m = 32 centres


@needs_tex
def test_class_theorem_fragment_compiles_inside_a_document(cert_file, tmp_path, capsys):
    assert HAVE_TEX, "CI is set but pdflatex/pdftotext are missing"
    path, _ = cert_file
    code, _, _ = run_cli(capsys, "latex", "class", "--certificate", str(path), "--fragment",
                         "--out", str(tmp_path / "frag.tex"))
    assert code == 0
    frag = (tmp_path / "frag.tex").read_text()
    assert "\\documentclass" not in frag and frag.startswith("% symbounds latex class --fragment")
    (tmp_path / "doc.tex").write_text("\\documentclass{article}\\usepackage{amsmath,amssymb}\\begin{document}"
                                      "\\input{frag}\\end{document}\n")
    assert "Theorem." in _pdf_text(tmp_path, "doc")


def test_class_theorem_refuses_a_tampered_certificate(cert_file, tmp_path, capsys):
    path, cert = cert_file
    bad = json.loads(json.dumps(cert))
    bad["max_bound"] = "1/100"
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(bad))
    code, _, err = run_cli(capsys, "latex", "class", "--certificate", str(p), "--out", str(tmp_path / "t.tex"))
    assert code == 2 and "rejected" in err and not (tmp_path / "t.tex").exists()
    code, _, err = run_cli(capsys, "latex", "class", "--certificate", str(tmp_path / "none.json"),
                           "--out", str(tmp_path / "t.tex"))
    assert code == 2 and "not a class certificate" in err


@needs_tex
def test_class_theorem_with_the_tightened_constants(cert_file, tmp_path, capsys):
    assert HAVE_TEX, "CI is set but pdflatex/pdftotext are missing"
    path, cert = cert_file
    code, out, _ = run_cli(capsys, "tighten", "--class", "--what", "Mg", "--eps", "1/2", "--resolution", "1/10",
                           "--quiet", "--json")
    assert code == 0
    rep = json.loads(out)
    (tmp_path / "t.json").write_text(out)
    code, _, err = run_cli(capsys, "latex", "class", "--certificate", str(path), "--table", str(tmp_path / "t.json"),
                           "--out", str(tmp_path / "thm.tex"))
    assert code == 0, err
    text = _pdf_text(tmp_path, "thm")
    assert "Tightened constants" in text
    assert f"{float(Fraction(rep['results'][0]['minimum'])):.8g}" in text
