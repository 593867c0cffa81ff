"""The generalisation calculator (docs/shi_liao.md, Generalisation rate): how ``eps(n)`` turns the [SL26] network into a rate.

``symbounds rate --n N --d d --alpha a [--holder C_H] [--bound B] [--noise sigma] [--json]``

Chain of choices and bounds (every constant explicit, or named where it is quoted):

1. ``eps = n^{-alpha/(2 alpha + d)}`` (the constant in ``eps ≍ ...`` is 1), rounded *down* to a
   dyadic rational with 40 bits so that the construction's constants stay exact.
2. The cube construction (docs/shi_liao.md, Constants) at ``(d, alpha, C_H, B, eps)``: ``r_g = (eps/(4 C_H))^{1/alpha}``,
   ``m = ceil(sqrt(d)/(2 r_g))``, ``P = m^d``, ``D = d + 4``, dense parameter count
   ``N_p = 8D(P+2) + 4D + 2(4D^2 + 3D)``, ``M_g = log(8BP/eps)/(3 r_g^2)``,
   ``c = 1 - cos(2 pi/P)``, ``M = log(4(P-1)B(36 d M_g + 2)/eps)/c``.
3. Largest weight ``W = max(M, 2 M_g (2m-1)/(2m), d M_g ((2m-1)/(2m))^2, B, 2)``: the key scale
   ``M``, the value rows ``2 M_g c_h`` and ``-M_g |c_h|^2`` (``c_h`` in ``[1/(2m), 1-1/(2m)]^d``), the
   centre values ``g(c_h)``, and the FFN's ``1/eta, w_ind, 1/lambda`` (all ``< 2`` once the
   leakage claims hold).  The tests compare it with the largest weight of the built network.
4. Lipschitz constant in the parameters, ``|T_theta(x) - T_theta'(x)| <= Lam |theta - theta'|_inf``
   over the box ``|theta|_inf <= W`` (all weights free, dense), ``x in [0,1]^d``, by propagating a
   bound ``a`` on the entries and a perturbation ``Delta`` through the layers:

   - embedding ``Z_0 = base + E x``: ``a_0 = W(1 + d)``, ``Delta_0 = delta (1 + d)``;
   - attention, ``H`` heads of widths ``d_k, d_v`` (softmax is 2-Lipschitz from max-norm scores to
     l1 weights): ``a' = H d_v D W^2 a``,
     ``Delta' = H d_v [delta D W a + W (4 d_k D^3 W^2 a^2 + D)(delta a + W Delta)]``;
   - feed-forward of width ``f = 2D``: ``a' = f W (D W a + W) + W``,
     ``Delta' = f (delta (D W a + W) + W (D (delta a + W Delta) + delta)) + delta``;
   - layers: attention ``(P+2, 2, 2)``, FFN, attention ``(1, 1, 1)``, FFN; readout and the
     truncation ``pi_B`` are 1-Lipschitz.  ``Lam = Delta_final / delta``.
5. Covering number (sup norm) of the truncated class at radius ``rho``: a grid of spacing
   ``2 rho/Lam`` per coordinate, ``log N(rho) <= N_p log ceil(W Lam / rho)``; here
   ``rho = sigma/n``.
6. Risk: the oracle inequality for least squares over a class bounded by ``F >= 1``, with Gaussian
   noise of variance 1 (J. Schmidt-Hieber, Ann. Statist. 48 (2020), Lemma 4, quoted with its
   constants 18, 72, 32 and ``eps' = 1``; *not re-derived here*), applied to ``Y/sigma``:
   ``E|pi_B f_S - f_rho|^2 <= 4 sigma^2 [eps^2/sigma^2 + F^2 (18 log N + 72)/n + 32 F/n]``,
   ``F = max(1, B/sigma)``.  Since ``eps^2 = n^{-2alpha/(2alpha+d)}`` and
   ``N_p ≍ eps^{-d/alpha} = n^{d/(2alpha+d)}`` while ``log(W Lam n) = O(log n)``, the bound is
   ``C_4 n^{-2alpha/(2alpha+d)} log n``; ``C4`` is reported at the given ``n``.

Every real number is an Arb ball at 128 bits; the reported decimal is its upper endpoint.
"""

from __future__ import annotations

import decimal
import json
import math
from fractions import Fraction

import flint
import sympy

from ...core.contexts import BallContext
from ...core.exact import arb_to_fraction, decimal_up, parse_number
from .constants import SYM, M_g_of, M_of, grid_ratio, params_dense_of, r_g_of

__all__ = ["rate_report", "add_rate_arguments", "run_rate", "render_rate", "lipschitz_in_parameters",
           "MAX_N_DIGITS"]

MAX_N_DIGITS = 100  # --n up to 10^100
MAX_EXACT_CHARS = 24  # a rational value longer than this is written as its decimal upper bound
ORACLE = "Schmidt-Hieber (2020), Ann. Statist. 48(4), Lemma 4: constants 18, 72, 32 (quoted), eps' = 1"


def _frac(v, what: str) -> Fraction:
    if isinstance(v, float):
        raise ValueError(f"{what}: a float is not exact; pass a string or a Fraction")
    if isinstance(v, str):
        return parse_number(v, what)
    return Fraction(v)


def _arb(q: Fraction) -> flint.arb:
    return flint.arb(flint.fmpq(q.numerator, q.denominator))


def _up(x: flint.arb, exact=None) -> str:
    """Decimal string of an upper bound of ``x`` (12 significant digits, rounded up).  ``exact``, the
    value when it is known to be rational (a Fraction or a SymPy number), is written exactly instead
    when it is short (``"1/40"``, not ``"0.0250000000001"``; a 60-digit fraction stays a decimal)."""
    if exact is not None and (isinstance(exact, (Fraction, int)) or exact.is_Rational):
        q = Fraction(exact) if isinstance(exact, (Fraction, int)) else Fraction(int(exact.p), int(exact.q))
        if len(str(q)) <= MAX_EXACT_CHARS:
            return str(q)
    v = arb_to_fraction(x.upper())
    if v == 0:
        return "0"
    with decimal.localcontext() as dc:
        dc.prec, dc.rounding = 12, decimal.ROUND_CEILING
        q = decimal.Decimal(v.numerator) / decimal.Decimal(v.denominator)
    return f"{q:g}" if abs(q.adjusted()) < 12 else f"{q:.11e}"


def lipschitz_in_parameters(W: flint.arb, D: int, d: int, P: int) -> flint.arb:
    """``Lam`` of step 4 of the module docstring (a bound, as a ball)."""
    one = flint.arb(1)
    delta = one
    a = W * (1 + d)
    Dl = delta * (1 + d)
    f = 2 * D

    def att(a, Dl, H, dk, dv):
        a2 = H * dv * D * W * W * a
        Dl2 = H * dv * (delta * D * W * a + W * (4 * dk * D**3 * W * W * a * a + D) * (delta * a + W * Dl))
        return a2, Dl2

    def ffn(a, Dl):
        a2 = f * W * (D * W * a + W) + W
        Dl2 = f * (delta * (D * W * a + W) + W * (D * (delta * a + W * Dl) + delta)) + delta
        return a2, Dl2

    a, Dl = att(a, Dl, P + 2, 2, 2)
    a, Dl = ffn(a, Dl)
    a, Dl = att(a, Dl, 1, 1, 1)
    a, Dl = ffn(a, Dl)
    return Dl / delta


def rate_report(n: int, d: int, alpha="1", C_H="1", B="1", sigma="1") -> dict:
    """The numbers of the module docstring, as a dict (JSON-ready: exact integers and rationals as
    such, reals as decimal upper bounds)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"--n must be an integer >= 2, got {n!r}")
    if len(str(n)) > MAX_N_DIGITS:
        raise ValueError(f"--n is above 10^{MAX_N_DIGITS}")
    if isinstance(d, bool) or not isinstance(d, int) or not (1 <= d <= 64):
        raise ValueError(f"--d must be an integer between 1 and 64, got {d!r}")
    alpha, C_H, B, sigma = (_frac(v, w) for v, w in ((alpha, "--alpha"), (C_H, "--holder"), (B, "--bound"),
                                                      (sigma, "--noise")))
    if not (0 < alpha <= 1):
        raise ValueError(f"--alpha must lie in (0, 1], got {alpha}")
    for v, w in ((C_H, "--holder"), (B, "--bound"), (sigma, "--noise")):
        if v <= 0:
            raise ValueError(f"{w} must be positive, got {v}")
    ctx = BallContext(128)
    with ctx.scope():
        expo = alpha / (2 * alpha + d)  # eps = n^-expo
        rate_exponent = 2 * expo
        exact = sympy.Integer(n) ** (-sympy.Rational(expo.numerator, expo.denominator))
        if exact.is_Rational:  # n^-expo is rational (e.g. 10000^(-1/4) = 1/10): take it exactly
            eps = Fraction(int(exact.p), int(exact.q))
        else:  # a dyadic just below n^-expo
            eps_ball = flint.arb(n) ** (-_arb(expo))
            eps = Fraction(math.floor(arb_to_fraction(eps_ball.lower()) * 2**40), 2**40)
        if eps <= 0 or eps >= 1:
            raise ValueError("eps(n) is outside (0, 1); use a larger --n")
        E = _arb(eps)
        # the construction's formulas (constants.py), evaluated in Arb
        R = lambda q: sympy.Rational(q.numerator, q.denominator)  # noqa: E731
        r_g_expr = r_g_of(R(eps), R(C_H), R(alpha))
        r_g = ctx.from_sympy(r_g_expr)
        m = _ceil(ctx.from_sympy(grid_ratio(d, r_g_expr)))
        P = m**d
        if P < 2:
            raise ValueError(f"the grid has a single centre at n = {n}; use a larger --n or --holder")
        D = d + 4
        params = int(params_dense_of(D, P))
        Bb = _arb(B)
        M_g = ctx.from_sympy(M_g_of(R(B), P, R(eps), r_g_expr))
        s_ = (flint.arb.pi() / P).sin()
        c = 2 * s_ * s_  # = 1 - cos(2 pi/P), without the cancellation for large P
        M = ctx.from_sympy(M_of(P, R(B), d, SYM["M_g"], R(eps), SYM["c"]), env={SYM["M_g"]: M_g, SYM["c"]: c})
        frac_c = flint.arb(flint.fmpq(2 * m - 1, 2 * m))
        W = M.max(2 * M_g * frac_c).max(d * M_g * frac_c * frac_c).max(Bb).max(flint.arb(2))
        Lam = lipschitz_in_parameters(W, D, d, P)
        sig = _arb(sigma)
        rho = sig / n
        log_cov = params * (W * Lam / rho + 1).log()  # ceil(x) <= x + 1
        F = flint.arb(1).max(Bb / sig)
        approx = E * E
        estimation = 4 * sig * sig * (F * F * (18 * log_cov + 72) / n + 32 * F / n)
        bound = 4 * approx + estimation
        base = flint.arb(n) ** (-_arb(rate_exponent)) * flint.arb(n).log()
        C4 = bound / base
        max_weight_paper = E ** (-_arb(Fraction(2 * d) / alpha)) * (1 / E).log()
        return {
            "n": n, "d": d, "alpha": str(alpha), "holder": str(C_H), "bound_B": str(B), "noise": str(sigma),
            "rate_exponent": str(rate_exponent),
            "eps_exponent": str(expo),
            "eps": str(eps),
            "eps_decimal": decimal_up(eps, 12),
            "r_g": _up(r_g, r_g_expr),
            "m": m,
            "P": P,
            "P_order_eps^-d/alpha": _up(E ** (-_arb(Fraction(d) / alpha)),
                                        R(eps) ** (-R(Fraction(d) / alpha))),
            "D": D,
            "params": params,
            "M_g": _up(M_g),
            "M": _up(M),
            "max_weight": _up(W),
            "max_weight_paper_order": _up(max_weight_paper),
            "lipschitz_params": _up(Lam),
            "covering_radius": _up(rho, sigma / n),
            "log_covering": _up(log_cov),
            "approx_term": _up(4 * approx, 4 * eps * eps),
            "estimation_term": _up(estimation),
            "bound": _up(bound),
            "rate": _up(base),
            "C4": _up(C4),
            "oracle_inequality": ORACLE,
            # the excess risk of the truncated estimator never exceeds (2B)^2: a larger bound says nothing
            "trivial_bound": str(4 * B * B),
            "vacuous": bool(bound > 4 * Bb * Bb),
        }


def _ceil(x: flint.arb) -> int:
    """ceil(x) of a ball, refusing when the ball straddles an integer."""
    lo, hi = arb_to_fraction(x.lower()), arb_to_fraction(x.upper())
    a, b = math.ceil(lo), math.ceil(hi)
    if a != b:
        raise ValueError("cannot decide ceil(sqrt(d)/(2 r_g)) at 128 bits (eps sits on a grid boundary)")
    return a


def render_rate(rep: dict) -> str:
    """The text report: one row per quantity, in aligned columns (name, value, remark)."""
    rows = [
        (f"eps = n^-({rep['eps_exponent']})", rep["eps"], f"(= {rep['eps_decimal']})"),
        ("r_g = (eps/(4 C_H))^(1/alpha)", rep["r_g"], ""),
        (f"P = m^d (m = {rep['m']})", str(rep["P"]), f"(eps^(-d/alpha) = {rep['P_order_eps^-d/alpha']})"),
        (f"parameters (dense, D = {rep['D']})", str(rep["params"]), ""),
        ("M_g", rep["M_g"], ""),
        ("M", rep["M"], ""),
        ("largest weight W", rep["max_weight"],
         f"(paper order eps^(-2d/alpha) log(1/eps) = {rep['max_weight_paper_order']})"),
        ("Lipschitz in parameters Lam", rep["lipschitz_params"], ""),
        ("log N(sigma/n, class, sup)", rep["log_covering"], ""),
        ("risk bound", rep["bound"], f"= approx {rep['approx_term']} + estimation {rep['estimation_term']}"),
        (f"rate n^-({rep['rate_exponent']}) log n", rep["rate"], f"(C4 = bound / rate = {rep['C4']})"),
    ]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    lines = [
        "symbounds rate: Shi & Liao generalisation bound (ERM over the two-block Transformer class)",
        f"n = {rep['n']}  d = {rep['d']}  alpha = {rep['alpha']}  C_H = {rep['holder']}  B = {rep['bound_B']}  "
        f"sigma = {rep['noise']}",
        "",
    ]
    lines += [f"  {a:<{w0}}  {b:>{w1}}  {c}".rstrip() for a, b, c in rows]
    lines += ["", f"oracle inequality: {rep['oracle_inequality']}"]
    return "\n".join(lines)


def add_rate_arguments(p) -> None:
    """The options of ``symbounds rate`` on an argparse (sub)parser."""
    p.add_argument("--n", required=True, help="sample size n >= 2 (integer; '1e6' accepted)")
    p.add_argument("--d", type=int, default=1, help="(intrinsic) dimension d (default 1)")
    p.add_argument("--alpha", default="1", help="Hoelder exponent in (0, 1] (default 1)")
    p.add_argument("--holder", default="1", help="Hoelder constant C_H > 0 (default 1)")
    p.add_argument("--bound", default="1", help="sup-norm bound B > 0 (default 1)")
    p.add_argument("--noise", default="1", help="noise standard deviation sigma > 0 (default 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run_rate(args) -> int:
    """Print the report (text or JSON); 0 on success.  Bad input raises ValueError (one line)."""
    n = _frac(args.n, "--n")
    if n.denominator != 1:
        raise ValueError(f"--n must be an integer, got {args.n}")
    rep = rate_report(int(n), args.d, args.alpha, args.holder, args.bound, args.noise)
    print(json.dumps(rep, indent=2) if args.json else render_rate(rep))
    return 0
