"""The README's "As a library" section: its snippets run, and every name it lists is exported by
``symbounds`` itself (the same object as in the module that defines it)."""

import contextlib
import io
import re
from pathlib import Path

import pytest

import symbounds

README = Path(__file__).resolve().parents[2] / "README.md"


def snippet(name: str) -> str:
    m = re.search(rf"<!-- readme-snippet: {name} -->\s*```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert m, name
    return m.group(1)


def run_snippet(name: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(snippet(name), f"README:{name}", "exec"), {})
    return out.getvalue()


def test_library_snippet_runs():
    lines = run_snippet("library").splitlines()
    first, second, verdicts = lines[0], lines[1], lines[2]
    assert first == second  # a Fraction input and the string "1/3", "0.2" give the same ball
    assert first.startswith("[") and "+/-" in first
    assert verdicts.startswith("0 ")


def test_constants_snippet_runs_and_prints_what_its_comments_say():
    lines = run_snippet("constants").splitlines()
    assert lines[0] == "log(8*B*P/varepsilon)/(3*(varepsilon/(4*C_H))**(2/alpha))"
    assert lines[1].startswith("[1743.48631369633 +/- ")
    assert lines[2] == "1743.48631369633"
    assert lines[3].startswith("M_g = \\frac{")


@pytest.mark.parametrize("name, module", [
    ("load_model", "symbounds.core.modelfile"), ("export_model", "symbounds.core.modelfile"),
    ("model_to_json", "symbounds.core.modelfile"), ("model_from_json", "symbounds.core.modelfile"),
    ("certify_model", "symbounds.core.boxes"), ("Box", "symbounds.core.boxes"),
    ("CertifyOptions", "symbounds.core.boxes"), ("CATALOGUE", "symbounds.papers"),
    ("Claim", "symbounds.core.claims"), ("Verdict", "symbounds.core.claims"),
])
def test_exports(name, module):
    import importlib

    assert name in symbounds.__all__
    assert getattr(symbounds, name) is getattr(importlib.import_module(module), name)
    section = README.read_text(encoding="utf-8").split("## As a library")[1].split("\n## ")[0]
    assert f"`{name}" in section, f"{name} is not documented in the README's As a library section"


def test_exported_model_round_trip(tmp_path):
    """What a user reaches for, from the top-level package alone: build, export, load, compare."""
    from fractions import Fraction

    from symbounds.papers import shi_liao as sl

    model = sl.build(sl.constants(sl.Instance(eps=Fraction(1, 2))))
    path = tmp_path / "m.json"
    symbounds.export_model(model, str(path), 192)
    again = symbounds.load_model(str(path))
    import json

    from_dict = symbounds.model_from_json(json.loads(path.read_text()))
    ctx = symbounds.BallContext(256)
    a, b, c = (symbounds.forward(ctx, m, ("1/3",)) for m in (model, again, from_dict))
    assert b.mid() == c.mid() and b.rad() == c.rad()  # the file read two ways: one network
    assert abs(a - b).upper() < 1e-25  # the file holds 192-bit decimals of the weights: a nearby network
