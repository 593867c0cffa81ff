"""The partition-of-unity construction as a :class:`~symbounds.core.paper.Paper` (the catalogue entry)."""

from __future__ import annotations

from fractions import Fraction
from typing import Mapping

from ...core.exact import parse_number
from ...core.expr import ExprError
from ...core.paper import Paper, Parameter, Proof
from .certificate import rebuild
from .claims import CLAIMS
from .constants import Instance, constants
from .construction import build
from .manifolds.claims import MANIFOLD_CLAIMS
from .manifolds.manifold import NAMES, ManifoldInstance, manifold_instance
from .run import PouOptions, run

__all__ = ["PAPER"]

PARAMETERS = (
    Parameter("d", "1", "input dimension (the cube [0,1]^d); on a manifold its intrinsic dimension"),
    Parameter("alpha", "1", "Hölder exponent in (0, 1]"),
    Parameter("holder", "2", "Hölder constant C_H > 0 (manifold: its target's)"),
    Parameter("bound", "2", "sup-norm bound B > 0 of the target (manifold: its target's)"),
    Parameter("eps", "1/10", "accuracy in (0, 1) (manifold: by manifold)"),
    Parameter("target", None, "target g as an expression in x1..xd (default: a 2-Lipschitz sine)"),
    Parameter("M", None, "attention scale M (default: derived)"),
    Parameter("Mg", None, "partition scale M_g (default: derived)"),
    Parameter("manifold", None, f"inputs on a manifold instead of the cube: {', '.join(NAMES)}"),
    Parameter("ambient", None, "manifold: the ambient dimension (default: by manifold)"),
    Parameter("radius", None, "manifold: its radius (default: by manifold)"),
)

_MANIFOLD_ONLY = ("ambient", "radius")


def _integer(values: Mapping[str, str], name: str) -> int | None:
    if values.get(name) is None:
        return None
    q = parse_number(values[name], name)
    if q.denominator != 1:
        raise ValueError(f"{name}: {values[name]!r} is not an integer")
    return int(q)


def _manifold(values: Mapping[str, str]) -> ManifoldInstance:
    """Inputs on a manifold: parameters left out take the manifold's defaults (docs/shi_liao.md)."""
    num = lambda k: None if values.get(k) is None else parse_number(values[k], k)  # noqa: E731
    return manifold_instance(
        values["manifold"], ambient=_integer(values, "ambient"), d=_integer(values, "d"), alpha=num("alpha"),
        C_H=num("holder"), B=num("bound"), eps=num("eps"), target=values.get("target"), radius=num("radius"),
        M=num("M"), M_g=num("Mg"))


def instance(values: Mapping[str, str]) -> Instance | ManifoldInstance:
    """An instance from text values (ValueError naming the parameter on bad input): on the cube
    ``[0,1]^d``, or on a manifold when ``manifold`` is given."""
    unknown = set(values) - {p.name for p in PARAMETERS}
    if unknown:
        raise ValueError(f"unknown parameter {sorted(unknown)[0]!r}")
    try:
        return _manifold(values) if values.get("manifold") is not None else _cube(values)
    except ExprError as e:
        raise ExprError(f"target: {e}") from None


def _cube(values: Mapping[str, str]) -> Instance:
    for name in _MANIFOLD_ONLY:
        if values.get(name) is not None:
            raise ValueError(f"{name}: only with a manifold")
    v = {p.name: values.get(p.name, p.default) for p in PARAMETERS}
    d = parse_number(v["d"], "d")
    if d.denominator != 1:
        raise ValueError(f"d: {v['d']!r} is not an integer")
    inst = Instance(d=int(d), alpha=v["alpha"], C_H=v["holder"], B=v["bound"], eps=v["eps"], target=v["target"],
                    M=v["M"], M_g=v["Mg"])
    inst.target_expr()
    return inst


def _build(inst: Instance | ManifoldInstance):
    return build(constants(inst) if isinstance(inst, Instance) else inst.constants())


def sample_input(inst: Instance | ManifoldInstance) -> tuple:
    """A point of the domain: ``(1/3, 2/4, 3/5, ...)`` in the cube, a seeded random rational point
    on a manifold."""
    if isinstance(inst, Instance):
        return tuple(Fraction(k + 1, k + 3) for k in range(inst.d))
    return inst.sample_points(1, seed=0)[-1]


def prove(inst: Instance | ManifoldInstance, **options) -> Proof:
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
    build=_build,
    claims=tuple(CLAIMS.values()) + tuple(MANIFOLD_CLAIMS.values()),
    prove=prove,
    sample_input=sample_input,
    examples=({"d": "1", "eps": "1/2"},  # the cube [0,1]: L1-L8, E0-E3, A1/A2
              {"manifold": "circle"}),  # a circle in [0,1]^2 (P = 26): M0-M2, L7.M and its own E1, L8
    rebuild=rebuild,
)
