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
# # The constants of Shi & Liao's softmax partition of unity, derived and certified
#
# Shi & Liao [SL26] build a two-block Transformer that approximates an α-Hölder function `g` on
# `[0,1]^d` to within ε. This notebook derives every constant of the construction symbolically,
# evaluates it at one instance, and certifies the inequalities the proof needs, in Arb ball
# arithmetic. Every computation is an import from `symbounds`; this file is a Jupyter notebook in
# jupytext's percent format (open it with Jupyter, or run it as a script).

# %%
import sympy

from symbounds import BallContext
from symbounds.app.show import Claims, show, show_math
from symbounds.papers import shi_liao as sl

# %% [markdown]
# ## 1. The constants as formulas
#
# Each constant (docs/shi_liao.md, Constants) as a SymPy expression in `(d, α, C_H, B, ε)`, with the token count `P`
# and the attention scale `M` as symbols where the grid and the circulant scores enter.

# %%
formulas = sl.symbolic_constants()
K = sl.constants(sl.Instance())
for name in ("r_g", "P", "P_paper", "M_g", "c", "M", "w_ind"):
    show_math(K.latex(name), f"{name:8} = {formulas[name]}")  # SymPy's LaTeX printer

# %% [markdown]
# ## 2. The key identity (L1)
#
# `exp(M_g(r_g² − ‖x − c_i‖²))` factors as `exp(M_g(r_g² − ‖x‖²)) · exp(2M_g⟨x, c_i⟩ − M_g‖c_i‖²)`:
# the first factor does not depend on the centre, so it cancels in the softmax, and the partition
# of unity is a softmax of *affine* scores — exactly what one attention head computes.

# %%
for d in (1, 2, 3):
    print(f"d = {d}: cancellation identity proved by SymPy:", sl.cancellation_identity(d))

# %% [markdown]
# ## 3. One instance: d = 1, α = 1, C_H = 2, B = 2, ε = 1/10
#
# Rational constants stay exact; the transcendental ones (`M_g`, `M`, `e^{−cM}`, `η`, `λ`, `w_ind`)
# are symbols with definitions, evaluated once per context.

# %%
show(K)  # every constant: its formula and its value at the instance
show_math(rf"r_g = {sympy.latex(K.r_g)},\quad m = {K.m},\quad P = {K.P},\quad P_{{\mathrm{{paper}}}} = "
          rf"{sympy.latex(K.P_paper)}", f"r_g = {K.r_g}  m = {K.m}  P = {K.P}  paper's bound on P = {K.P_paper}")
for sym, definition in K.defs.items():
    text, tex = str(definition), sympy.latex(definition)
    if len(tex) < 200:
        show_math(rf"{sympy.latex(sym)} := {tex}", f"{str(sym):6} := {text}")
    else:  # eta and lambda are sums over all P tokens: the start is enough
        print(f"{str(sym):6} := {text[:87]}...")

# %%
model = sl.build(K)
ctx = BallContext(128)
values = model.definition_values(ctx)
with ctx.scope():
    for sym, v in values.items():
        print(f"{str(sym):6} ∈ {v.str(25, radius=True)}")

# %% [markdown]
# ## 4. The ε budget, certified
#
# ε/2 for the Hölder error near the centres, ε/4 for the far tail, ε/4 for the leakage of the
# layer-1 attention. At the derived constants the first two hold *with equality*, which no ball of
# positive radius can decide; symbounds then decides them exactly with SymPy.

# %%
from symbounds.core.claims import escalate  # noqa: E402

points = sl.sample_points(1, 5, 3)
results, _, prec = escalate(lambda c: sl.measure(c, K, model, points), 128, 4096,
                            exact=lambda cid: sl.decide_exactly(K, model, cid))
show(Claims(r for r in results if r.id.startswith("E")))

# %% [markdown]
# ## 5. Every claim of the lemma chain
#
# Measured from the network's own attention matrices and pre-activations at the sample points.

# %%
show(Claims(results))
assert all(r.verdict in ("proved", "evidence") for r in results)

# %% [markdown]
# The size claim behind the `O(ε^{-d/α})`: the measured parameter counts and largest weight.

# %%
dense, nonzero = model.count_parameters()
print(f"P = {K.P}, parameters: {dense} dense, {nonzero} nonzero")
print("paper's order of the largest weight, ε^(-2d/α) log(1/ε) =",
      sympy.N(K.inst.eps ** (-2 * K.d / K.inst.alpha) * sympy.log(1 / K.inst.eps), 6))
