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
========================  =====================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from .claims import Claim, ClaimResult, Verdict, overall
from .transformer import Transformer

__all__ = ["Parameter", "Paper", "Proof"]


@dataclass(frozen=True)
class Parameter:
    """One parameter of an instance: its name, default (as text; None: required or derived), and
    a one-line description."""

    name: str
    default: str | None
    doc: str


@dataclass
class Proof:
    """What ``prove`` returns: the verdicts, the network they are about, and anything else the
    construction reports (``extra``)."""

    results: list[ClaimResult]
    model: Transformer | None = None
    extra: dict = field(default_factory=dict)

    @property
    def verdict(self) -> Verdict:
        return overall(self.results)

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code


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
