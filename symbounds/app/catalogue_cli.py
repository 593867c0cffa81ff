"""``symbounds prove KEY [NAME=VALUE ...]``: any construction of the catalogue, by its interface.

The command line reaches a construction only through :class:`symbounds.core.paper.Paper`: its
parameters (``--list`` shows them), ``instance``, ``prove`` and the declared claims.  A new
construction registered in ``symbounds.papers.CATALOGUE`` appears here with nothing else to add.
"""

from __future__ import annotations

import json

from ..core.expr import ExprError
from ..core.version import __version__
from ..papers import CATALOGUE
from .args import UsageError

__all__ = ["add_prove_arguments", "add_paper_arguments", "paper_instance", "run_prove", "catalogue_text"]


def add_prove_arguments(p) -> None:
    p.add_argument("construction", nargs="?", default=None, help="a catalogue key (see --list)")
    add_paper_arguments(p)
    p.add_argument("--list", action="store_true", help="list the constructions and their parameters")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def add_paper_arguments(p) -> None:
    """The instance of a catalogue construction: ``NAME=VALUE ...`` or ``--example K``."""
    p.add_argument("values", nargs="*", metavar="NAME=VALUE", help="instance parameters (default: the paper's)")
    p.add_argument("--example", type=int, default=None, metavar="K",
                   help="the construction's K-th built-in example (0-based) instead")


def catalogue_text() -> str:
    lines = []
    for paper in CATALOGUE.values():
        lines += [f"{paper.key}: {paper.title}", f"  {paper.citation}", f"  mathematics: {paper.docs}"]
        width = max(len(p.name) for p in paper.parameters)
        for p in paper.parameters:
            default = "derived" if p.default is None else p.default
            lines.append(f"  {p.name:<{width}}  {default:<8}  {p.doc}")
        lines.append(f"  claims: {' '.join(c.id for c in paper.claims)}")
    return "\n".join(lines)


def _values(items: list[str]) -> dict:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"{item[:40]!r}: expected NAME=VALUE")
        out[name.strip()] = value.strip()
    return out


def paper_instance(key: str, items: list[str], example: int | None):
    """``(paper, values, instance)`` of the catalogue construction ``key`` from ``NAME=VALUE`` items
    or its ``example``-th example (UsageError, one line, on bad input)."""
    paper = CATALOGUE.get(key)
    if paper is None:
        raise UsageError(f"unknown construction {key[:40]!r} (known: {', '.join(CATALOGUE)})")
    if example is not None:
        if items:
            raise UsageError("--example takes no NAME=VALUE parameters")
        if not 0 <= example < len(paper.examples):
            raise UsageError(f"--example {example}: {paper.key} has {len(paper.examples)} examples")
        values = dict(paper.examples[example])
    else:
        values = _values(items)
    try:
        inst = paper.instance(values)
    except ExprError as e:
        raise UsageError(f"target: {e}") from None
    except (ValueError, TypeError) as e:
        raise UsageError(str(e).splitlines()[0]) from None
    return paper, values, inst


def run_prove(args) -> int:
    if args.list or args.construction is None:
        print(catalogue_text())
        return 0
    paper, values, inst = paper_instance(args.construction, args.values, args.example)
    proof = paper.prove(inst)
    if args.json:
        print(json.dumps({"symbounds": __version__, "command": "prove", "construction": paper.key,
                          "parameters": values, "claims": [r.as_json() for r in proof.results],
                          "verdict": str(proof.verdict)}, indent=2))
    else:
        print(f"symbounds prove {paper.key}: {paper.title}")
        print(f"  {paper.citation}")
        given = "  ".join(f"{k}={v}" for k, v in values.items()) or "(defaults)"
        print(f"instance  {given}")
        for r in proof.results:
            where = r.context if r.prec is None else f"{r.context}@{r.prec}"
            print(f"  {r.id:<5} {r.verdict:<9} {where:<12} {r.statement}")
        if paper.report is not None:
            print(paper.report(inst, proof).rstrip())
        print(f"verdict: {proof.verdict}")
    return proof.exit_code
