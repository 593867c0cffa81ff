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
# # How tight are the constructions?
#
# Both papers prove their networks work with constants chosen for the proof, not for the network.
# `symbounds tighten` asks the converse question: how much smaller (or, for a temperature, larger)
# could each constant be while the network is *still certified*?  Every answer is a certified
# pass, and the value one resolution step beyond it is evaluated too: a certified failure there
# (a refuted claim or a counterexample point) makes the answer tight; an undecided value is never
# counted as a pass.
#
# Shi & Liao [SL26] (docs/shi_liao.md): the attention scale `M`, the partition scale `M_g` and
# the grid `m`, each by two criteria — *proof* (every lemma and budget claim still proved) and
# *domain* (`sup |T − g| ≤ ε` still certified over the whole cube, box by box).
# Alcalde, Fantuzzi & Zuazua [AFZ25] (docs/alcalde.md): the softmax temperature `τ` of the
# interpolation network, and the hardmax block count against the paper's.
#
# The instances are small so the notebook runs in seconds; the benchmarks run the large ones.

# %%
import json
from fractions import Fraction
from pathlib import Path

import sympy

import symbounds
from symbounds.app import tighten_figures as tf
from symbounds.app.report import tau_text
from symbounds.papers import alcalde as al
from symbounds.papers import shi_liao as sl
from symbounds.papers.alcalde import tighten as tt
from symbounds.papers.alcalde.dataset import random_dataset
from symbounds.papers.shi_liao import tighten as tg

# %% [markdown]
# ## 1. One instance of [SL26]: ε = 1/2, d = 1, α = 1
#
# The derived `M` is about 49.4.  The proof needs nearly all of it (the budget claim E3, the
# leakage term, binds); the network itself is certified over the cube with a far smaller `M`.

# %%
inst = sl.Instance(eps=sympy.Rational(1, 2))
opts = tg.TightenOptions(resolution=Fraction(1, 10), scan=2)
results = [tg.tighten(inst, "M", crit, opts) for crit in ("proof", "domain")] + [tg.tighten(inst, "grid", "domain", opts)]
for r in results:
    below = "-" if r.below_outcome is None else f"{r.below_outcome.status} at {tg.exact_text(r.below)}"
    print(f"{r.constant:5} {r.criterion:7} paper {float(r.paper):9.4g}  minimum {tg.exact_text(r.minimum):>6}  "
          f"slack {float(r.slack):6.3g}  step below: {below}  {r.note}")

# %%
m_proof, m_domain, grid = results
assert m_proof.paper_outcome.status == "pass" and m_domain.paper_outcome.status == "pass"
assert m_proof.below_outcome.status == "fail" and m_proof.below_outcome.evidence["claim"] == "E3"
assert m_domain.below_outcome.status == "fail" and "x" in m_domain.below_outcome.evidence
# the proof's minimum is at least the domain's: the claims imply the domain bound
assert m_proof.minimum >= m_domain.minimum
print("a counterexample one step below the domain minimum:", m_domain.below_outcome.evidence)

# %% [markdown]
# ## 2. Across instances: the slack against ε
#
# `benchmarks/bench_tighten_sweep.py` runs the same search for ε = 1/2 … 1/32, d ∈ {1, 2} and
# α ∈ {1, 1/2}, as far as the token limit and the time allow; its table is committed beside it.
# The proof needs `M` and `M_g` almost exactly (slack ≈ 1); the network is certified with `M`
# several times and `M_g` about a hundred times smaller, and with a grid four times coarser.

# %%
root = Path(symbounds.__file__).resolve().parents[1]
table = tf.load_tighten_table(str(root / "benchmarks" / "tighten_sweep.json"))
for f in tf.exponent_fits(table["rows"]):
    show = lambda v: "-" if v is None else f"{v:.2f}"
    print(f"d={f['d']} alpha={f['alpha']} {f['constant']:4}: paper's exponent {f['paper_exponent']:g} "
          f"({f['paper_exponent_text']}), fitted: paper {show(f['paper_fitted'])}, proof minimum "
          f"{show(f['proof_fitted'])}, domain minimum {show(f['domain_fitted'])}")
print("not run:", sorted({s["reason"] for s in table["skipped"]}))

# %% [markdown]
# ## 3. The feasible region of (M_g, M) at ε = 1/2
#
# A small grid of pairs, each certified or refuted over the cube.  The paper's point (the star)
# sits in the corner of a large certified region.

# %%
Mg_values = [Fraction(473), Fraction(16), Fraction(2)]
M_values = [Fraction(49), Fraction(9), Fraction(3)]
cells = tg.tighten_map(inst, Mg_values, M_values, opts)
report = {"instance": {"d": 1, "eps": "1/2"},
          "results": [{"constant": c, "criterion": "domain", "paper": str(float(tg.paper_value(inst, c)[0])),
                       "minimum": None} for c in ("M", "Mg")],
          "map": {"cells": cells}}
Path("tighten_map.json").write_text(json.dumps(report))
grid_map = tf.load_map("tighten_map.json")
status = {(c["Mg"], c["M"]): c["status"] for c in cells}
print(status)
assert status[("473", "49")] == "pass" and status[("2", "3")] == "fail"
fig = tf.plot_tighten(table, grid_map)

# %% [markdown]
# ## 4. [AFZ25]: the largest temperature of the softmax interpolation
#
# The construction uses τ = 1/64.  Its tokens live in an integer frame with coordinates in the
# thousands to millions, so the attention scores `⟨A x_i, x_l⟩ / τ` stay decisive far above it:
# on this small dataset τ* is larger by a factor of about 10⁹, and one percent above τ* a token
# certainly misses its cluster's segment (claim X1 refuted).

# %%
ds = random_dataset(2, 4, 2, 2, seed=0)
res = tt.tighten_tau(ds, tt.TauOptions(resolution=Fraction(1, 100)))
print(tau_text(ds, res, tt.TauOptions(), "random 2,4,2,2"))
assert res.tight and res.star_outcome.x1 == "proved" and res.above_outcome.x1 == "refuted"

# %% [markdown]
# ## 5. [AFZ25]: the hardmax block count
#
# The paper counts `2M + 2N + 1` blocks; this construction uses `K + 2M` (plain) or
# `K + M + ⌈M/4⌉` (compressed), `K ≤ N − 1` separation blocks.  A lower reference is the number of
# distinct output points: every one must be written by some feed-forward unit.

# %%
ds = random_dataset(6, 20, 4, 3, seed=0)
for variant in ("plain", "compressed"):
    con = al.build(ds, variant)
    claims, exact = al.verify(con)
    distinct = len({y for Y in ds.targets for y in Y})
    print(f"{variant:10} L = {con.blocks:3}  paper 2M+2N+1 = {al.paper_blocks(ds)}  M = {ds.M}  "
          f"distinct outputs = {distinct}  exact interpolation: {exact}")
    assert exact and con.blocks <= al.paper_blocks(ds)
