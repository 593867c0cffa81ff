"""Compiling LaTeX in tests: a real pdflatex, its PDF read back with pdftotext.

In CI (the environment variable CI is set) the compile tests must run (`.ci/run` installs texlive
and poppler-utils); they skip only when CI is unset AND pdflatex/pdftotext are missing.
"""

import os
import shutil
import subprocess

import pytest

HAVE_TEX = shutil.which("pdflatex") is not None and shutil.which("pdftotext") is not None
needs_tex = pytest.mark.skipif(not os.environ.get("CI") and not HAVE_TEX,
                               reason="pdflatex/pdftotext not installed (and CI is not set)")


def compile_tex(tmp_path, name, text):
    """The text of the PDF that ``text`` (a whole document) compiles to; fails on a LaTeX error."""
    tex = tmp_path / f"{name}.tex"
    tex.write_text(text)
    r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", tex.name], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:]
    out = subprocess.run(["pdftotext", "-layout", f"{name}.pdf", "-"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0
    return out.stdout
