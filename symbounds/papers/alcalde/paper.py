"""Exact sequence interpolation as a :class:`~symbounds.core.paper.Paper` (the catalogue entry)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ...core.exact import parse_number
from ...core.paper import Paper, Parameter, Proof
from .claims import CLAIMS
from .dataset import Dataset, random_dataset
from .run import InterpOptions, run

__all__ = ["PAPER", "InterpInstance"]

PARAMETERS = (
    Parameter("N", "3", "number of sequences"),
    Parameter("n", "5", "tokens per sequence (at most)"),
    Parameter("d", "2", "token dimension (at least 2)"),
    Parameter("m", "2", "targets per sequence (at most)"),
    Parameter("seed", "0", "seed of the random dataset and of the construction"),
    Parameter("attention", "hardmax", "hardmax (exact rationals) or softmax (Arb balls + exact)"),
    Parameter("tau", "1/64", "softmax temperature"),
)


@dataclass(frozen=True)
class InterpInstance:
    dataset: Dataset
    options: InterpOptions


def _int(v: Mapping, name: str, lo: int) -> int:
    q = parse_number(v[name], name)
    if q.denominator != 1 or q < lo:
        raise ValueError(f"{name}: {v[name]!r} must be an integer >= {lo}")
    return int(q)


def instance(values: Mapping[str, str]) -> InterpInstance:
    """A seeded random dataset and the run options, from text values (ValueError on bad input)."""
    unknown = set(values) - {p.name for p in PARAMETERS}
    if unknown:
        raise ValueError(f"unknown parameter {sorted(unknown)[0]!r}")
    v = {p.name: values.get(p.name, p.default) for p in PARAMETERS}
    N, n, d, m, seed = (_int(v, k, lo) for k, lo in (("N", 1), ("n", 1), ("d", 2), ("m", 1), ("seed", 0)))
    if m > n:
        raise ValueError("m: at most n targets per sequence")
    ds = random_dataset(N, n, d, m, seed=seed)
    return InterpInstance(ds, InterpOptions(attention=v["attention"], tau=parse_number(v["tau"], "tau"), seed=seed))


def _build(inst: InterpInstance):
    return run(inst.dataset, inst.options).model


def sample_input(inst: InterpInstance) -> list[list]:
    """The first sequence of the dataset as the ``d x n`` token matrix (tokens are columns)."""
    X = inst.dataset.inputs[0]
    return [[x[k] for x in X] for k in range(inst.dataset.d)]


def prove(inst: InterpInstance, **options) -> Proof:
    res = run(inst.dataset, inst.options)
    return Proof(res.claims, res.model, {"result": res})


PAPER = Paper(
    key="alcalde",
    title="Exact sequence interpolation with hardmax and softmax Transformers",
    citation="A. Alcalde, G. Fantuzzi, E. Zuazua, Exact Sequence Interpolation with Transformers, "
             "arXiv:2502.02270",
    docs="docs/alcalde.md",
    parameters=PARAMETERS,
    instance=instance,
    build=_build,
    claims=tuple(CLAIMS.values()),
    prove=prove,
    sample_input=sample_input,
    examples=({"N": "3", "n": "5", "d": "2", "m": "2"},  # hardmax, exact rationals: S1-S3, I1, B1-B3
              {"N": "2", "n": "3", "d": "2", "m": "1", "attention": "softmax"}),  # X1, X2: softmax only
)
