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
# # Exact sequence interpolation, stage by stage
#
# Alcalde, Fantuzzi & Zuazua [AFZ25] build a Transformer that maps each input sequence `X^j` onto
# its target set `Y^j` exactly. This notebook builds the paper's construction (docs/alcalde.md) for a small 2-D
# dataset and draws the token cloud after each stage, like the paper's Figure 5: input,
# separation, leader selection (leaders beyond the box, the other chosen points on a sphere in the
# negative orthant), the hardmax collapse, and the final interpolation onto the targets (stars).
# Every computation is an import from `symbounds`; the clouds are exact rationals.

# %%
from symbounds.papers.alcalde.run import InterpOptions, run
from symbounds.papers.alcalde.dataset import random_dataset
import os
from pathlib import Path

from symbounds.app.plot import plot_stages, save_figure
from symbounds.papers.alcalde.stages import STAGES, stage_clouds

FIGURES = Path(os.environ.get("SYMBOUNDS_FIGURES", "figures"))
FIGURES.mkdir(parents=True, exist_ok=True)

ds = random_dataset(3, 8, 2, 2, seed=1)  # N = 3 sequences of up to 8 tokens in R^2, up to 2 targets
res = run(ds, InterpOptions(variant="plain"))
print(f"N = {ds.N}, M = sum m_j = {ds.M}, blocks L = {res.sizes['blocks']}"
      f" (paper: {res.sizes['blocks_formula']['paper']}), exact: {res.exact}")

# %%
clouds = stage_clouds(res.construction)
for name in STAGES:
    print(f"{name:11} distinct tokens per sequence: {[len(s) for s in clouds[name]]}")

# %% [markdown]
# After the collapse each sequence is reduced to exactly `m_j` points, and the final output set
# of each sequence equals its target set, in exact arithmetic.

# %%
assert [len(s) for s in clouds["collapse"]] == list(ds.m)
assert all(set(out) == set(Y) for out, Y in zip(clouds["final"], ds.targets))
assert res.exit_code == 0

# %% [markdown]
# The figure is saved as PNG in the folder `figures/` of the working directory (in Jupyter: next to
# this notebook, `notebooks/figures/`), or in the folder named by the environment variable
# `SYMBOUNDS_FIGURES`.

# %%
fig = plot_stages(res.construction, clouds)
save_figure(fig, str(FIGURES / "interpolation_stages.png"))
