"""`symbounds prove`: the command line reaches every construction through the catalogue alone."""

import json
import sys
from pathlib import Path

import pytest

from symbounds.app.cli import main
from symbounds.papers import CATALOGUE

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "papers"))
import tiny_paper  # noqa: E402


def test_list_shows_every_construction_and_its_parameters(capsys):
    assert main(["prove", "--list"]) == 0
    out = capsys.readouterr().out
    for paper in CATALOGUE.values():
        assert paper.title in out and all(p.name in out for p in paper.parameters)


def test_a_construction_registered_later_is_reachable(monkeypatch, capsys):
    monkeypatch.setitem(CATALOGUE, "tiny", tiny_paper.PAPER)
    assert main(["prove", "--list"]) == 0
    assert "tiny" in capsys.readouterr().out
    assert main(["prove", "tiny", "tokens=1/3,-2,5/7", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "proved" and [c["id"] for c in data["claims"]] == ["T1", "T2"]


def test_a_false_claim_is_refuted_through_the_command(monkeypatch, capsys):
    """T2 ("one block") fails on a tampered build with two layers: exit 1, not a proof."""
    two = lambda inst: tiny_paper.Transformer(tiny_paper.build(inst).layers * 2, None, None, "tokens")  # noqa: E731
    paper = tiny_paper.PAPER.__class__(**{**tiny_paper.PAPER.__dict__, "build": two,
                                          "prove": lambda inst: tiny_paper.Proof(
                                              tiny_paper.verdicts(two(inst), inst), two(inst))})
    monkeypatch.setitem(CATALOGUE, "tiny", paper)
    assert main(["prove", "tiny", "tokens=1,2"]) == 1
    assert "refuted" in capsys.readouterr().out


def test_each_example_proves(capsys):
    assert main(["prove", "alcalde", "--example", "0", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {c["id"] for c in data["claims"]} >= {"S1", "S2", "S3", "I1"}


@pytest.mark.parametrize("argv, needle", [
    (["prove", "nope"], "unknown construction"),
    (["prove", "shi_liao", "foo=1"], "unknown parameter"),
    (["prove", "shi_liao", "eps"], "expected NAME=VALUE"),
    (["prove", "shi_liao", "eps=2"], "eps"),
    (["prove", "shi_liao", "target=x1+"], "target"),
    (["prove", "alcalde", "--example", "9"], "examples"),
])
def test_bad_input_is_one_line(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
