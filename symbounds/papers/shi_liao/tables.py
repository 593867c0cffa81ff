"""[SL26]'s comparison table and the ablation, as data, with this project's numbers.

``COMPARISON``: the paper's rows (orders as stated there) and, for [SL26] itself, what this
project measures on the built networks.  ``ABLATION`` and ``SLOPES``: recorded by
``python benchmarks/bench_ablation.py`` (deterministic; ``tests/papers/test_tables.py`` recomputes
them).  ``RATES``: recorded by ``python benchmarks/bench_rate.py`` (seeded, float64 evidence).
``to_latex`` renders any of them.
"""

from __future__ import annotations

__all__ = ["COMPARISON", "ABLATION", "SLOPES", "RATES", "to_latex", "COMPARISON_COLUMNS", "ABLATION_COLUMNS",
           "SLOPE_COLUMNS", "RATE_COLUMNS"]

COMPARISON_COLUMNS = ("work", "attention", "positions", "depth", "parameters", "domain", "measured here")

COMPARISON = [
    {"work": "Gurevych et al.", "attention": "hardmax", "positions": "none / hand-made", "depth": "O(1)",
     "parameters": "O(eps^{-d/alpha})", "domain": "Euclidean grid", "measured here": "not reproduced"},
    {"work": "Takakura & Suzuki", "attention": "softmax", "positions": "sinusoidal", "depth": "O(poly log(1/eps))",
     "parameters": "O(eps^{-d/alpha} poly log(1/eps))", "domain": "anisotropic Euclidean",
     "measured here": "not reproduced"},
    {"work": "Havrilla & Liao", "attention": "ReLU attention", "positions": "sinusoidal", "depth": "O(log(1/eps))",
     "parameters": "O(eps^{-d/alpha} log(1/eps))", "domain": "low-dim manifold", "measured here": "not reproduced"},
    {"work": "Shi et al.", "attention": "softmax", "positions": "standard", "depth": "O(log(1/eps))",
     "parameters": "O(eps^{-d/alpha} log(1/eps))", "domain": "hierarchical composition",
     "measured here": "not reproduced"},
    {"work": "Jiao et al.", "attention": "softmax", "positions": "coordinate projection", "depth": "O(log(1/eps))",
     "parameters": "O(eps^{-d/alpha} log(1/eps))", "domain": "Hoelder", "measured here": "not reproduced"},
    {"work": "[SL26]", "attention": "softmax", "positions": "sinusoidal", "depth": "2",
     "parameters": "O(eps^{-d/alpha})", "domain": "Euclidean and manifold",
     "measured here": ("2 blocks (built); P vs 1/eps slope 0.9995 (d=1), 1.9955 (S^2), 0.9995 (curve in R^10); "
                       "cube d=1 eps=1/10: P=40, 1930 params, largest weight 3.69e4 (paper order "
                       "eps^{-2d/alpha} log(1/eps) = 230); all of L1-L8 proved on circle, sphere, torus, curve in R^10, "
                       "and |T - g| <= eps over each whole manifold (L7.M)")},
]

ABLATION_COLUMNS = ("manifold", "d", "ambient", "eps", "C_H", "P_net", "params_net", "P_net_paper", "P_cube",
                    "params_cube", "P_cube_paper")

#: python benchmarks/bench_ablation.py (table 1); alpha = 1.
ABLATION = [
    ("circle", 1, 2, "1/2", "1", 26, 1692, 33.66, 36, 2172, 512),
    ("circle", 1, 10, "1/2", "1", 26, 4844, 33.66, 137858491849, 15440151089020, 1.1e17),
    ("sphere", 2, 3, "9/10", "1/2", 42, 2926, 99.55, 8, 1022, 456.2),
    ("torus", 2, 4, "9/10", "1/2", 36, 3024, 37.74, 81, 5904, 6243),
    ("curve", 1, 10, "1/2", "13/14", 26, 4844, 33.66, 61917364224, 6934744795020, 5.24e16),
    ("curve", 1, 10, "1/10", "13/14", 128, 16268, 168.3, 511116753300641401, 57245076369671838844, 5.117e23),
]

SLOPE_COLUMNS = ("manifold", "d", "ambient", "alpha", "slope_net", "d/alpha", "slope_cube", "D/alpha")

#: python benchmarks/bench_ablation.py (table 2): eps = 2^-4 .. 2^-12.
SLOPES = [
    ("circle", 1, 2, "1", 0.9995, "1", 1.9955, "2"),
    ("circle", 1, 2, "1/2", 2.0000, "2", 3.9999, "4"),
    ("sphere", 2, 3, "1", 1.9955, "2", 2.9946, "3"),
    ("torus", 2, 4, "1", 1.9973, "2", 4.0000, "4"),
    ("curve", 1, 10, "1", 0.9995, "1", 9.9992, "10"),
    ("curve", 1, 10, "1/2", 2.0000, "2", 19.9998, "20"),
]

RATE_COLUMNS = ("case", "d", "ambient", "n range", "fitted slope", "-2a/(2a+d)", "-2a/(2a+D)")

#: python benchmarks/bench_rate.py (10 repetitions, sigma = 1/2, seed 0).
RATES = [
    ("cube [0,1]^1", 1, 1, "10^2 .. 10^4.5", -0.706, -0.667, -0.667),
    ("cube [0,1]^2", 2, 2, "10^2 .. 10^4.5", -0.440, -0.500, -0.500),
    ("closed curve in [0,1]^10", 1, 10, "10^2 .. 10^4.5", -0.647, -0.667, -0.167),
]


def _tex(v) -> str:
    s = str(v)
    for a, b in (("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("^", r"\^{}"), ("#", r"\#")):
        s = s.replace(a, b)
    return s


def to_latex(rows, columns) -> str:
    """A ``tabular`` with one column per name; rows are dicts or tuples in column order."""
    out = [r"\begin{tabular}{" + "l" * len(columns) + "}", r"\hline",
           " & ".join(_tex(c) for c in columns) + r" \\", r"\hline"]
    for r in rows:
        vals = [r[c] for c in columns] if isinstance(r, dict) else list(r)
        out.append(" & ".join(_tex(v) for v in vals) + r" \\")
    out += [r"\hline", r"\end{tabular}"]
    return "\n".join(out)
