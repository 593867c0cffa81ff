"""Every notebook runs top to bottom.

Notebooks live in `notebooks/` as jupytext percent-format files (readable diffs; open them in
Jupyter with jupytext, or run them as scripts). Each is executed here as a script, so a notebook
that stops working fails the suite; the cells assert what they claim.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.py"))


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path):
    env = {**os.environ, "MPLBACKEND": "Agg"}
    r = subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       env=env)
    assert r.returncode == 0, r.stderr[-3000:]
