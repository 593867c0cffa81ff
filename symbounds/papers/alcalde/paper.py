"""Exact sequence interpolation as a :class:`~symbounds.core.paper.Paper` (the catalogue entry)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ...core.exact import parse_number
from ...core.paper import Paper, Proof, load_spec, with_defaults
from .dataset import Dataset, random_dataset
from .run import InterpOptions, run

__all__ = ["PAPER", "InterpInstance"]

DATA = load_spec(Path(__file__).with_name("paper.toml"))
PARAMETERS = DATA["parameters"]


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
    v = with_defaults(PARAMETERS, values)
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


def report(inst, proof: Proof) -> str:
    """``prove alcalde``'s line after the claims: the network's size and whether it interpolates."""
    res = proof.extra["result"]
    ds = res.dataset
    return (f"{res.options.attention}: N = {ds.N} sequences in R^{ds.d}, {res.sizes.get('blocks')} blocks, "
            f"width {res.sizes.get('width')}; exact interpolation: {'yes' if res.exact else 'no'}")


PAPER = Paper(**DATA, instance=instance, build=_build, prove=prove, sample_input=sample_input, report=report)
