"""The partition-of-unity construction as a :class:`~symbounds.core.paper.Paper` (the catalogue entry)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Mapping

from ...core.exact import parse_number
from ...core.expr import ExprError
from ...core.paper import Paper, Proof, load_spec, with_defaults
from .certificate import rebuild
from .constants import Instance, constants
from .construction import build
from .manifolds.manifold import ManifoldInstance, manifold_instance
from .notation import latex_sections
from .run import PouOptions, run

__all__ = ["PAPER"]

DATA = load_spec(Path(__file__).with_name("paper.toml"))
PARAMETERS = DATA["parameters"]

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
    with_defaults(PARAMETERS, values)
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


def report(inst, proof: Proof) -> str:
    """``prove shi_liao``'s line after the claims: the grid's tokens and the measured error."""
    res = proof.extra["result"]
    return (f"tokens P = {res.K.P}; max |T(x) - g(x)| over {res.samples} sample points in {res.max_error} "
            f"({res.prec} bits)")


PAPER = Paper(**DATA, instance=instance, build=_build, prove=prove, sample_input=sample_input, rebuild=rebuild,
              report=report, latex=latex_sections)
