"""The small interface every construction implements (docs/adding-a-construction.md).

A construction is one folder under ``symbounds/papers/`` holding a :class:`Paper` and one line in
``symbounds.papers.CATALOGUE``.  The command line, the reports, LaTeX and the catalogue test read
only this interface:

========================  =====================================================================
member                    what it is
========================  =====================================================================
``key``                   short name, the catalogue key and the ``construction`` of certificates
``title``, ``citation``   for reports and LaTeX captions
``docs``                  the page of docs/ with the mathematics in our words
``parameters``            the instance's parameters as data (:class:`Parameter`)
``instance(values)``      an instance from a mapping name -> text (``ValueError``: one line)
``build(inst)``           the network (:class:`~symbounds.core.transformer.Transformer`)
``claims``                every :class:`~symbounds.core.claims.Claim` the proof measures
``prove(inst)``           a :class:`Proof`: one :class:`~symbounds.core.claims.ClaimResult` per claim
``sample_input(inst)``    one exact input of the network: a point of the domain (vector input)
                          or a ``d x n`` token matrix (token input), for spot checks
``examples``              small instances (mappings) that prove in seconds; together they
                          measure every claim (``example``: the first)
``rebuild``               optional: re-derives a certificate's model (whole-domain certificates)
``report(inst, proof)``   optional: the construction's own text after the claims (``prove KEY``)
``latex(inst, proof)``    optional: its LaTeX sections, ``[(title, body), ...]`` in the paper's
                          notation (``symbounds latex KEY`` puts them before the claims)
``figures(inst, proof)``  optional: its figures as data, ``[Figure, ...]`` (``symbounds plot
                          --kind paper --construction KEY`` draws them)
========================  =====================================================================

The hooks return text and data only: the document frame, the claim list, number formatting and
the drawing are the command line's, so a construction needs nothing of ``symbounds.app``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from .claims import Claim, ClaimResult, HasVerdict, load_claims
from .transformer import Transformer

__all__ = ["Parameter", "Paper", "Proof", "Figure", "with_defaults", "load_spec"]


@dataclass(frozen=True)
class Parameter:
    """One parameter of an instance: its name, default (as text; None: required or derived), and
    a one-line description."""

    name: str
    default: str | None
    doc: str


def load_spec(path) -> dict:
    """A construction's data from its ``paper.toml``: ``key``, ``title``, ``citation``, ``docs``,
    ``parameters`` (:class:`Parameter`), ``claims`` (loaded from the claim files it lists, paths
    relative to it) and ``examples``; ``Paper(**load_spec(path), instance=..., ...)`` adds the code."""
    path = Path(path)
    with open(path, "rb") as f:
        data = tomllib.load(f)
    known = {"key", "title", "citation", "docs", "claims", "parameters", "examples"}
    if set(data) - known:
        raise ValueError(f"{path}: unknown field {sorted(set(data) - known)[0]!r}")
    claims = tuple(c for name in data["claims"] for c in load_claims(path.parent / name).values())
    params = tuple(Parameter(p["name"], p.get("default"), p["doc"]) for p in data["parameters"])
    return {**data, "claims": claims, "parameters": params, "examples": tuple(data["examples"])}


def with_defaults(parameters, values: Mapping[str, str]) -> dict:
    """``values`` completed with the parameters' defaults; ValueError on an unknown name."""
    names = {p.name for p in parameters}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ValueError(f"unknown parameter {unknown[0]!r} (known: {', '.join(sorted(names))})")
    return {p.name: values.get(p.name, p.default) for p in parameters}


@dataclass
class Proof(HasVerdict):
    """What ``prove`` returns: the verdicts, the network they are about, and anything else the
    construction reports (``extra``)."""

    results: list[ClaimResult]
    model: Transformer | None = None
    extra: dict = field(default_factory=dict)

    @property
    def claims(self) -> list[ClaimResult]:
        return self.results


@dataclass(frozen=True)
class Figure:
    """One figure of a construction, as data: ``series`` is ``((label, xs, ys), ...)`` of exact or
    float numbers, drawn as points joined by lines (``log``: which axes are logarithmic, a subset
    of ``"xy"``).  ``name`` is what ``symbounds plot --kind paper ... --figure NAME`` selects."""

    name: str
    title: str
    xlabel: str
    ylabel: str
    series: tuple
    log: str = ""


@dataclass(frozen=True)
class Paper:
    """A construction, as data plus a few functions (see the module docstring)."""

    key: str
    title: str
    citation: str
    docs: str
    parameters: tuple[Parameter, ...]
    instance: Callable[[Mapping[str, str]], object]
    build: Callable[[object], Transformer]
    claims: tuple[Claim, ...]
    prove: Callable[[object], Proof]
    sample_input: Callable[[object], object]
    examples: tuple[Mapping[str, str], ...]
    rebuild: Callable | None = None
    report: Callable[[object, Proof], str] | None = None
    latex: Callable[[object, Proof], list] | None = None
    figures: Callable[[object, Proof], list] | None = None

    def __post_init__(self):
        object.__setattr__(self, "examples", tuple(self.examples))
        if not self.examples:
            raise ValueError(f"{self.key}: a construction needs at least one example")

    @property
    def example(self) -> Mapping[str, str]:
        """The first of :attr:`examples`."""
        return self.examples[0]

    def claim(self, cid: str) -> Claim:
        for c in self.claims:
            if c.id == cid:
                return c
        raise KeyError(cid)
