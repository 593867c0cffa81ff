"""Datasets for exact sequence interpolation [AFZ25]: JSON format, validation, random generators.

Format (one JSON object)::

    {"d": 2,
     "sequences": [{"input":  [[x11, x12], [x21, x22], ...],     # n_j tokens in R^d
                    "target": [[y11, y12], ...]},                 # m_j <= n_j target points
                   ...]}

Numbers are read exactly, never through a binary double: JSON integers, strings ``"p/q"``,
``"-3"``, ``"0.125"``, ``"1e-3"`` (matched by a strict pattern, no ``eval``), and JSON numbers with a
fraction or exponent such as ``0.1`` are read **from their decimal text**, so ``0.1`` is exactly
``1/10`` (not the double nearest to it).  ``NaN`` and ``Infinity`` are rejected.

Assumptions of the paper (docs/alcalde.md, Setting), each checked with a one-line :class:`DatasetError` naming
the sequence and the token (0-based): ``d >= 2``; tokens of a sequence pairwise distinct; targets
of a sequence pairwise distinct; ``1 <= m_j <= n_j``; the sequences pairwise different as *sets*
of tokens (the model is permutation-equivariant, so two orderings of one set are one input).

Paper symbols: ``X^j = (x^j_1..x^j_{n_j})`` is ``Dataset.inputs[j]``, ``Y^j`` is
``Dataset.targets[j]``, ``N = len(inputs)``, ``M = sum_j m_j``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "Dataset",
    "DatasetError",
    "dataset_from_json",
    "dataset_to_json",
    "load_dataset",
    "random_dataset",
    "core_dataset",
    "authors_dataset",
    "parse_exact",
]

_MAX_FILE = 256 * 2**20

Point = tuple  # tuple of Fractions


class DatasetError(ValueError):
    """A dataset that breaks the format or an assumption (one line naming sequence and token)."""


@dataclass(frozen=True)
class Dataset:
    """``inputs[j]`` is the tuple of tokens of sequence ``j``; ``targets[j]`` its target points."""

    d: int
    inputs: tuple
    targets: tuple

    @property
    def N(self) -> int:
        return len(self.inputs)

    @property
    def n(self) -> list[int]:
        return [len(x) for x in self.inputs]

    @property
    def m(self) -> list[int]:
        return [len(y) for y in self.targets]

    @property
    def M(self) -> int:
        return sum(self.m)

    def summary(self) -> dict:
        return {"N": self.N, "d": self.d, "n_j": self.n, "m_j": self.m}


def parse_exact(v, what: str) -> Fraction:
    """An exact Fraction from a JSON int, a Fraction (decimal JSON numbers arrive as Fractions read
    from their text), or a string ``"3"``, ``"-7/8"``, ``"0.125"``, ``"1.5e-3"``."""
    if isinstance(v, bool):
        raise DatasetError(f"{what}: expected a number, got a boolean")
    if isinstance(v, int):
        return Fraction(v)
    if isinstance(v, Fraction):
        return v
    if isinstance(v, str):
        from ...core.modelfile import ModelFileError, parse_number

        try:
            return parse_number(v, what)
        except ModelFileError as e:
            raise DatasetError(str(e)) from None
    raise DatasetError(f"{what}: expected a number, got {type(v).__name__}")


def _points(obj, d, what) -> tuple:
    if not isinstance(obj, list) or not obj:
        raise DatasetError(f"{what}: expected a non-empty list of points")
    out = []
    for i, p in enumerate(obj):
        if not isinstance(p, list) or len(p) != d:
            raise DatasetError(f"{what} token {i}: expected a list of d = {d} numbers")
        out.append(tuple(parse_exact(v, f"{what} token {i} coordinate {k}") for k, v in enumerate(p)))
    return tuple(out)


def _fmt(p) -> str:
    return "(" + ", ".join(str(v) for v in p) + ")"


def _distinct_points(points, d: int, j: int, kind: str) -> None:
    """Every point of sequence ``j`` has ``d`` coordinates and no two are equal."""
    first: dict = {}
    for i, x in enumerate(points):
        if len(x) != d:
            raise DatasetError(f"sequence {j} {kind} {i}: expected d = {d} coordinates")
        if x in first:
            raise DatasetError(f"sequence {j}: {kind}s {first[x]} and {i} are equal {_fmt(x)}")
        first[x] = i


def validate(ds: Dataset) -> Dataset:
    """Check the assumptions of the paper (docs/alcalde.md, Setting); raise :class:`DatasetError` naming the first violation."""
    if not isinstance(ds.d, int) or isinstance(ds.d, bool) or ds.d < 2:
        raise DatasetError(f"d must be an integer >= 2, got {ds.d!r}")
    if not ds.inputs:
        raise DatasetError("the dataset has no sequences")
    seen: dict = {}
    for j, (X, Y) in enumerate(zip(ds.inputs, ds.targets)):
        _distinct_points(X, ds.d, j, "token")
        _distinct_points(Y, ds.d, j, "target")
        if not Y:
            raise DatasetError(f"sequence {j}: no target points")
        if len(Y) > len(X):
            raise DatasetError(f"sequence {j}: {len(Y)} targets but only {len(X)} tokens (need m_j <= n_j)")
        key = frozenset(X)
        if key in seen:
            raise DatasetError(f"sequence {j} has the same set of tokens as sequence {seen[key]}")
        seen[key] = j
    return ds


def dataset_from_json(data) -> Dataset:
    if not isinstance(data, dict):
        raise DatasetError("dataset: the top level must be an object with 'd' and 'sequences'")
    d = data.get("d")
    if not isinstance(d, int) or isinstance(d, bool) or d < 2:
        raise DatasetError(f"dataset: 'd' must be an integer >= 2, got {str(d)[:20]}")
    seqs = data.get("sequences")
    if not isinstance(seqs, list) or not seqs:
        raise DatasetError("dataset: 'sequences' must be a non-empty list")
    inputs, targets = [], []
    for j, s in enumerate(seqs):
        if not isinstance(s, dict):
            raise DatasetError(f"sequence {j}: expected an object with 'input' and 'target'")
        inputs.append(_points(s.get("input"), d, f"sequence {j} input"))
        targets.append(_points(s.get("target"), d, f"sequence {j} target"))
    return validate(Dataset(d, tuple(inputs), tuple(targets)))


def _reject_constant(text):
    raise DatasetError(f"JSON constant {text!r} is not a number")


def load_dataset(path: str) -> Dataset:
    """Read and validate a dataset file (JSON decimals are read exactly from their text)."""
    from ...core.files import read_json_file

    return dataset_from_json(read_json_file(path, DatasetError, Fraction, _reject_constant, _MAX_FILE))


def _num(v: Fraction):
    return v.numerator if v.denominator == 1 else f"{v.numerator}/{v.denominator}"


def dataset_to_json(ds: Dataset) -> dict:
    """Integers as JSON integers, other rationals as ``"p/q"`` strings."""
    return {
        "d": ds.d,
        "sequences": [
            {"input": [[_num(v) for v in x] for x in X], "target": [[_num(v) for v in y] for y in Y]}
            for X, Y in zip(ds.inputs, ds.targets)
        ],
    }


# ------------------------------------------------------------------------------------------
# generators

DEN = 2**16  # random coordinates are k / 2^16 in [0, 1]


def _rand_point(rng: random.Random, d: int) -> Point:
    return tuple(Fraction(rng.randint(0, DEN), DEN) for _ in range(d))


def _fresh(rng, d, count, avoid: set) -> list:
    out = []
    while len(out) < count:
        p = _rand_point(rng, d)
        if p not in avoid:
            avoid.add(p)
            out.append(p)
    return out


def random_dataset(N: int, n: int, d: int, m: int, seed: int = 0, share: Fraction = Fraction(1, 4),
                   vary: bool = True) -> Dataset:
    """A seeded random dataset: ``N`` sequences of ``n_j`` tokens in ``[0,1]^d`` (``k / 2^16``).

    ``vary``: lengths ``n_j`` uniform in ``[max(m, 3n/4), n]`` (else all ``n``); ``m_j`` uniform in
    ``[1, m]``.  About ``share * n_j`` tokens of each sequence come from a common pool of ``n``
    tokens, so sequences share tokens; the rest are private.  Targets uniform in ``[0,1]^d``.
    """
    if N < 1 or n < 1 or d < 2 or not (1 <= m <= n):
        raise DatasetError(f"random dataset: need N >= 1, n >= 1, d >= 2, 1 <= m <= n (got {N},{n},{d},{m})")
    rng = random.Random(seed)
    used: set = set()
    pool = _fresh(rng, d, n, used)
    inputs, targets, sets = [], [], set()
    while len(inputs) < N:
        nj = rng.randint(max(m, (3 * n + 3) // 4), n) if vary else n
        k = min(nj, int(share * nj))
        X = rng.sample(pool, k) + _fresh(rng, d, nj - k, used)
        rng.shuffle(X)
        if frozenset(X) in sets:
            continue
        sets.add(frozenset(X))
        mj = rng.randint(1, m)
        targets.append(tuple(_fresh(rng, d, mj, set())))
        inputs.append(tuple(X))
    return validate(Dataset(d, tuple(inputs), tuple(targets)))


def core_dataset(N: int, n: int, d: int, m: int, seed: int = 0) -> Dataset:
    """The worst case for separation: a common core of ``n - 1`` tokens shared by every sequence,
    plus one token of its own per sequence; ``m_j = m`` targets each (``m >= 2`` forces splitting)."""
    if N < 1 or n < 2 or d < 2 or not (1 <= m <= n):
        raise DatasetError(f"core dataset: need N >= 1, n >= 2, d >= 2, 1 <= m <= n (got {N},{n},{d},{m})")
    rng = random.Random(seed)
    used: set = set()
    core = _fresh(rng, d, n - 1, used)
    own = _fresh(rng, d, N, used)
    inputs = tuple(tuple(core + [own[j]]) for j in range(N))
    targets = tuple(tuple(_fresh(rng, d, m, set())) for _ in range(N))
    return validate(Dataset(d, inputs, targets))


def authors_dataset(N: int = 10, n: int = 100, d: int = 16, seed: int = 0) -> Dataset:
    """The authors' regularised-training experiment (docs/alcalde.md, Regularised training): ``N`` sequences of ``n`` tokens in
    ``[0,1]^d`` and one target each, ``y^j = mu^j + W relu(U mu^j + b)`` with ``mu^j`` the exact
    sequence mean (a softmax SA with ``A = 0, V = I, rho = 0``) and a residual width-4 ReLU FF whose
    weights are seeded rationals ``k/8``, ``|k| <= 8``."""
    rng = random.Random(seed)
    used: set = set()
    inputs = [tuple(_fresh(rng, d, n, used)) for _ in range(N)]
    w = lambda: Fraction(rng.randint(-8, 8), 8)
    U = [[w() for _ in range(d)] for _ in range(4)]
    b = [w() for _ in range(4)]
    W = [[w() for _ in range(4)] for _ in range(d)]
    targets = []
    for X in inputs:
        mu = [sum(x[k] for x in X) / n for k in range(d)]
        h = [max(Fraction(0), sum(u * m for u, m in zip(row, mu)) + bb) for row, bb in zip(U, b)]
        targets.append((tuple(m + sum(wr * hh for wr, hh in zip(W[r], h)) for r, m in enumerate(mu)),))
    return validate(Dataset(d, tuple(inputs), tuple(targets)))
