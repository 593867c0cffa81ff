"""The partition-of-unity construction as a :class:`~symbounds.core.paper.Paper` (the catalogue entry)."""

from __future__ import annotations

from typing import Mapping

from ...core.exact import parse_number
from ...core.paper import Paper, Parameter, Proof
from .certificate import rebuild
from .claims import CLAIMS
from .constants import Instance, constants
from .construction import build
from .manifolds.claims import MANIFOLD_CLAIMS
from .run import PouOptions, run

__all__ = ["PAPER"]

PARAMETERS = (
    Parameter("d", "1", "input dimension (the cube [0,1]^d)"),
    Parameter("alpha", "1", "Hölder exponent in (0, 1]"),
    Parameter("holder", "2", "Hölder constant C_H > 0"),
    Parameter("bound", "2", "sup-norm bound B > 0 of the target"),
    Parameter("eps", "1/10", "accuracy in (0, 1)"),
    Parameter("target", None, "target g as an expression in x1..xd (default: a 2-Lipschitz sine)"),
    Parameter("M", None, "attention scale M (default: derived)"),
    Parameter("Mg", None, "partition scale M_g (default: derived)"),
)


def instance(values: Mapping[str, str]) -> Instance:
    """An instance from text values (ValueError naming the parameter on bad input)."""
    unknown = set(values) - {p.name for p in PARAMETERS}
    if unknown:
        raise ValueError(f"unknown parameter {sorted(unknown)[0]!r}")
    v = {p.name: values.get(p.name, p.default) for p in PARAMETERS}
    d = parse_number(v["d"], "d")
    if d.denominator != 1:
        raise ValueError(f"d: {v['d']!r} is not an integer")
    inst = Instance(d=int(d), alpha=v["alpha"], C_H=v["holder"], B=v["bound"], eps=v["eps"], target=v["target"],
                    M=v["M"], M_g=v["Mg"])
    inst.target_expr()
    return inst


def prove(inst: Instance, **options) -> Proof:
    res = run(inst, PouOptions(**options))
    return Proof(res.claims, res.model, {"result": res})


PAPER = Paper(
    key="shi_liao",
    title="Softmax partition of unity: a two-block Transformer approximating Hölder functions",
    citation="Z. Shi, W. Liao, Learning Theory of Transformers: Local-to-Global Approximation via Softmax "
             "Partition of Unity, NeurIPS 2026, arXiv:2605.08811",
    docs="docs/shi_liao.md",
    parameters=PARAMETERS,
    instance=instance,
    build=lambda inst: build(constants(inst)),
    claims=tuple(CLAIMS.values()) + tuple(MANIFOLD_CLAIMS.values()),
    prove=prove,
    example={"d": "1", "eps": "1/2"},
    rebuild=rebuild,
)
