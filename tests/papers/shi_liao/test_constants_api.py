"""Constants from Python: K.formula, K.expr, K.value, K.latex (README, As a library)."""

from fractions import Fraction

import flint
import mpmath
import sympy

from symbounds.papers import shi_liao as sl


def test_value_encloses_the_formula_evaluated_independently():
    """The general formula with the instance substituted, evaluated by mpmath at 60 digits, lies in
    the Arb ball K.value gives; and sympy.N of the closed form K.expr agrees."""
    inst = sl.Instance(eps=Fraction(1, 4))
    K = sl.constants(inst)
    subs = {sympy.Symbol("d", positive=True, integer=True): 1, sympy.Symbol("alpha", positive=True): 1,
            sympy.Symbol("C_H", positive=True): 2, sympy.Symbol("B", positive=True): 2,
            sympy.Symbol("varepsilon", positive=True): sympy.Rational(1, 4),
            sympy.Symbol("P", positive=True, integer=True): K.P}
    for name in ("r_g", "M_g", "c"):
        general = K.formula(name).xreplace(subs)
        assert not general.free_symbols, name
        with mpmath.workdps(60):
            approx = sympy.N(general, 60)
        ball = K.value(name, prec=200)
        with flint.ctx.workprec(400):
            assert abs(ball - flint.arb(str(approx))).upper() < flint.arb("1e-50"), name
        assert abs(sympy.N(K.expr(name), 40) - approx) < sympy.Float("1e-30") * max(1, abs(approx))
    # M through its formula in M_g and c: the formula's M symbol is absent, P and the rest substituted
    M_general = K.formula("M").xreplace(subs)
    assert abs(sympy.N(M_general, 40) - sympy.N(K.expr("M"), 40)) < 1e-25


def test_expr_is_a_number_and_N_works():
    K = sl.constants(sl.Instance())
    assert isinstance(K.M, sympy.Symbol)  # the weights keep the symbol
    e = K.expr("M")
    assert not e.free_symbols
    v = K.value("M", prec=128)
    n = sympy.N(e, 40)  # mpmath through SymPy, against Arb: agree to far below the 40th digit
    with flint.ctx.workprec(256):
        assert abs(v - flint.arb(str(n))).upper() < flint.arb("1e-30")
    assert 1743 < float(n) < 1744
    emcM = sympy.N(K.expr("emcM"), 20)  # exp(-cM) with c and M substituted
    assert abs(emcM - sympy.exp(-sympy.N(K.expr("c"), 40) * sympy.N(K.expr("M"), 40))) < 1e-25


def test_latex_and_names():
    K = sl.constants(sl.Instance())
    assert {"r_g", "P", "M_g", "M", "c", "eta", "lambda", "w_ind", "emcM"} <= set(K.names())
    assert K.latex("M_g").startswith("M_g = ") and r"\log" in K.latex("M_g")
    assert K.latex("c") == r"c = 1 - \cos{\left(\frac{2 \pi}{P} \right)}"
    try:
        K.value("nope")
    except KeyError as e:
        assert "unknown constant" in str(e)
    else:
        raise AssertionError("an unknown name must raise KeyError")
