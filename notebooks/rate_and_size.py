# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The rate experiment, and `P` against ε for the cube and a manifold
#
# Two log-log pictures for Shi & Liao [SL26]:
#
# 1. the number of tokens `P` against the accuracy ε: on the cube it grows like `ε^{-d/α}`; for a
#    curve in `[0,1]^{10}` (intrinsic `d = 1`) a net of the manifold grows like `ε^{-1}`, while a
#    grid of the ambient cube would grow like `ε^{-10}` (the paper's ablation; docs/shi_liao.md, Manifolds);
# 2. the excess risk of the softmax-partition-of-unity estimator with `ε(n) = n^{-α/(2α+d)}`
#    against the sample size `n` (float64 evidence, seeded), beside `n^{-2α/(2α+d)}`.
#
# Every computation is an import from `symbounds`.
# Both figures are saved as PNG in the folder `figures/` of the working directory (in Jupyter:
# next to this notebook, `notebooks/figures/`), or in the folder named by `SYMBOUNDS_FIGURES`.

# %%
from symbounds.papers.shi_liao.empirical import CASES, fit_slope, measure
from symbounds.papers.shi_liao.ablation import slope, sweep
import os
from pathlib import Path

from symbounds.app.plot import plot_loglog, save_figure

FIGURES = Path(os.environ.get("SYMBOUNDS_FIGURES", "figures"))
FIGURES.mkdir(parents=True, exist_ok=True)

curve = sweep("curve", 1, 1, 10, ks=range(1, 9))  # (eps, P_manifold, P_cube) at eps = 2^-k
eps = [e for e, _, _ in curve]
P_net = [p for _, p, _ in curve]
P_ambient = [q for _, _, q in curve]
cube1 = sweep("circle", 1, 1, 2, ks=range(1, 9))
print("slope of log P against log(1/eps): curve net", round(slope(eps, P_net), 3),
      " ambient grid of [0,1]^10", round(slope(eps, P_ambient), 3))

# %%
assert abs(slope(eps, P_net) - 1) < 0.1 and abs(slope(eps, P_ambient) - 10) < 0.2
fig1 = plot_loglog({"net of the curve (d = 1)": (eps, P_net),
                    r"grid of the ambient cube $[0,1]^{10}$": (eps, P_ambient),
                    r"grid of $[0,1]^2$ (the circle's ambient cube)": (eps, [q for _, _, q in cube1])},
                   r"$\varepsilon$", "tokens $P$", "P against accuracy")
save_figure(fig1, str(FIGURES / "size_manifold_vs_cube.png"))

# %% [markdown]
# ## The rate, measured

# %%
ns = [100, 316, 1000, 3162, 10000]
rates = {}
for key in ("cube-d1", "curve-10"):
    rows = measure(key, ns, reps=3)
    rates[key] = rows
    label, d, ambient, _, _ = CASES[key]
    print(f"{label}: fitted slope {fit_slope(rows):.3f}, theory -2/(2+d) = {-2 / (2 + d):.3f},"
          f" ambient -2/(2+D) = {-2 / (2 + ambient):.3f}")

# %%
assert all(fit_slope(rows) < -0.4 for rows in rates.values())
series = {CASES[k][0]: ([r["n"] for r in rows], [r["risk"] for r in rows]) for k, rows in rates.items()}
series[r"$n^{-2/3}$"] = (ns, [n ** (-2 / 3) for n in ns])
fig2 = plot_loglog(series, "$n$", "excess risk", "risk against sample size", styles={r"$n^{-2/3}$": "k--"})
save_figure(fig2, str(FIGURES / "risk_vs_n.png"))
