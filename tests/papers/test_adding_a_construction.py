"""docs/adding-a-construction.md followed literally: its complete listing ("The whole file") is a
construction that imports only the engine, registers under a key of its own (not a catalogue key,
not the test-only ``tiny``), and gets ``symbounds prove KEY``, ``latex KEY`` and ``plot --kind
paper`` with its report line, LaTeX section and figure, with nothing added to ``symbounds.app``."""

from __future__ import annotations

import ast
import re
import sys
import types
from pathlib import Path

import pytest
import tiny_paper
from cli_helpers import run_cli

from symbounds.core.claims import Verdict
from symbounds.papers import CATALOGUE

DOC = Path(__file__).resolve().parents[2] / "docs" / "adding-a-construction.md"


def _listing() -> str:
    """The python block of the page's section "The whole file"."""
    text = DOC.read_text()
    section = text[text.index("## 6. The whole file"):text.index("## 7.")]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    return blocks[0]


@pytest.fixture
def argmax(monkeypatch):
    source = _listing()
    module = types.ModuleType("symbounds_doc_argmax")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # dataclasses look their module up
    exec(compile(source, str(DOC), "exec"), module.__dict__)
    paper = module.PAPER
    assert paper.key not in CATALOGUE and paper.key != tiny_paper.PAPER.key
    monkeypatch.setitem(CATALOGUE, paper.key, paper)
    return paper


def test_the_listing_imports_only_the_engine():
    tree = ast.parse(_listing())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    ours = [m for m in names if m.startswith("symbounds")]
    assert ours and all(m.startswith("symbounds.core.") for m in ours), ours
    assert not any(n.startswith("_") for m in ast.walk(tree) if isinstance(m, ast.ImportFrom)
                   for n in (a.name for a in m.names))


def test_prove_latex_and_plot_of_the_documented_construction(argmax, tmp_path, capsys):
    inst = argmax.instance(argmax.example)
    # the proof against a hand-worked case: max(1/3, -2, 5/7, 0) = 5/7, one layer
    assert [r.verdict for r in argmax.prove(inst).results] == [Verdict.PROVED, Verdict.PROVED]
    code, out, _ = run_cli(capsys, "prove", "argmax", "--example", "0")
    assert code == 0 and "maximum  5/7 (of 4 tokens)" in out and "T1" in out and "T2" in out, out
    tex = tmp_path / "argmax.tex"
    code, _, err = run_cli(capsys, "latex", "argmax", "--example", "0", "--out", str(tex))
    assert code == 0, err
    body = tex.read_text()
    assert r"\subsection*{The network}" in body and "(5/7, 1)" in body and r"\item[\textbf{T1}]" in body
    png = tmp_path / "argmax.png"
    code, _, err = run_cli(capsys, "plot", "--kind", "paper", "--construction", "argmax", "--out", str(png))
    assert code == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", err
    # bad input: one line, exit 2
    code, _, err = run_cli(capsys, "prove", "argmax", "tokens=1,x")
    assert code == 2 and len(err.strip().splitlines()) == 1
