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
# # Leakage and exact-zero thresholding: float64 against ball arithmetic
#
# In Shi & Liao's construction [SL26] every off-target attention weight is at most `e^{-cM}`
# (claim L3), and the feed-forward layer subtracts `2e^{-cM}` from the indicator before a ReLU so
# that the off-target indicator becomes **exactly** 0 (L5). This notebook runs `symbounds pou` at
# several attention scales `M`, in Arb ball arithmetic (the certificate) and in float64 beside it,
# and draws what happens when `cM` passes about 745 and `e^{-cM}` underflows float64.
# Every computation is an import from `symbounds`.

# %%
from fractions import Fraction

from symbounds.papers import shi_liao as sl
import os
from pathlib import Path

from symbounds.app.plot import leakage_rows, plot_leakage, save_figure

FIGURES = Path(os.environ.get("SYMBOUNDS_FIGURES", "figures"))
FIGURES.mkdir(parents=True, exist_ok=True)

inst = sl.Instance()  # d = 1, alpha = 1, C_H = 2, B = 2, eps = 1/10: P = 40 tokens
Ms = [Fraction(500), Fraction(1743), Fraction(10000), Fraction(100000)]
rows = leakage_rows(inst, Ms, context="fp", points=2)

# %% [markdown]
# ## The numbers
#
# `log10` of the certified `e^{-cM}` and of the largest off-target weight measured from the
# network's attention matrices, beside float64's values (`None`: float64 returned 0.0).

# %%
for r in rows:
    print(f"M = {r['M']:>6}  cM = {r['cM']:8.1f}  verdict {r['verdict']:8}"
          f"  log10 e^-cM: ball {r['log10_emcM']:9.2f}  float64 {r['fp_log10_emcM']}"
          f"  | log10 L3: ball {r['log10_L3']:9.2f}  float64 {r['fp_log10_L3']}")

# %% [markdown]
# ## How float64 decides each claim
#
# `agrees`: same verdict for the same reason; `vacuous`: same verdict, but only because a
# certified nonzero quantity underflowed to 0; `wrong`: the opposite verdict.

# %%
for r in rows:
    bad = {cid: s for cid, s in r["fp_claims"].items() if s != "agrees"}
    print(f"M = {r['M']:>6}: {bad}")

# %% [markdown]
# At `M = 10^5` (`cM ≈ 1231 > 745`) the strict inequality L5.1 (the pre-activation is strictly
# negative) is decided **wrongly** by float64 — it sees `0 < 0` — and the exact-zero result L5.2
# holds only vacuously, while the balls prove both. Below 745 float64 still represents `e^{-cM}`
# itself, but quantities computed as `1 − (1 − tiny)`, such as `1 − η` and `1 − λ`, read as 0 as
# soon as the tiny part falls below float64's 10^-16 (at `M = 10^4` the L2 claims are vacuous).
# At the derived `M ≈ 1743` only the budget E2, which holds with equality, is decided wrongly.

# %%
big = rows[-1]
assert big["cM"] > 745 and big["fp_log10_emcM"] is None
assert big["fp_claims"]["L5.1"] == "wrong" and big["fp_claims"]["L5.2"] == "vacuous"
assert big["verdict"] == "proved"
assert rows[1]["fp_log10_emcM"] is not None  # at the derived M float64 still has e^{-cM}
assert set(rows[1]["fp_claims"][c] for c in ("L3", "L5.1", "L5.2")) == {"agrees"}
assert rows[2]["fp_claims"]["L2.4"] == "vacuous"

# %% [markdown]
# On a linear `M` axis, each run a marker. Top panel: `log10 e^{-cM}`, certified and in float64,
# beside the exact line `−cM / ln 10` (`c` depends only on `P`, so `log10 e^{-cM}` is a straight
# line in `M`, and float64's range ends where it crosses `2^{-1022}`); middle: each claim's
# measured side relative to `e^{-cM}`; bottom: by how many orders of magnitude float64 misses the
# certified value, `log10(float64 / certified)` (0: they agree; crosses: float64 returned 0.0). The figure is saved as PNG in the folder `figures/` of the working directory (in Jupyter: next to
# this notebook, `notebooks/figures/`), or in the folder named by the environment variable
# `SYMBOUNDS_FIGURES`.

# %%
fig = plot_leakage(rows)
save_figure(fig, str(FIGURES / "leakage_fp.png"))
