"""Every construction in the catalogue passes the same checks (docs/adding-a-construction.md).

Parametrised over ``symbounds.papers.CATALOGUE`` plus a tiny construction defined here
(``tiny_paper.py``, registered for the test only).  For each construction:

1. across its examples every declared claim is measured, and every measured claim is declared;
2. each example proves (every claim proved; assumptions on the target: not violated; exit code 0);
3. each claim prints in LaTeX (``sympy.latex(claim)``) and the claims of a construction compile
   together in one pdflatex document;
4. the network round-trips through the model file: exact weights come back identical, the others
   within the file's precision, and the read model computes what the built one does (exact
   rationals for exact networks, overlapping 256-bit balls otherwise);
5. at one input per example, the value in an independent, more precise context (exact rationals
   where the network allows, else mpmath at 300 bits) lies inside the 128-bit ball.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from fractions import Fraction

import flint
import mpmath
import pytest
import sympy
import tiny_paper

from symbounds.core.contexts import BallContext, ExactContext, ExactUnsupported, MPContext
from symbounds.core.modelfile import model_from_json, model_to_json
from symbounds.core.transformer import forward
from symbounds.papers import CATALOGUE

KEYS = sorted(CATALOGUE) + [tiny_paper.PAPER.key]
HAVE_TEX = shutil.which("pdflatex") is not None


@pytest.fixture
def catalogue(monkeypatch):
    """The catalogue with the tiny construction registered (for this test only)."""
    assert tiny_paper.PAPER.key not in CATALOGUE
    monkeypatch.setitem(CATALOGUE, tiny_paper.PAPER.key, tiny_paper.PAPER)
    return CATALOGUE


# ------------------------------------------------------------------------------------------
# helpers


def _entries(v) -> list:
    """A forward() value as a flat list (a scalar readout, or the final token matrix)."""
    if isinstance(v, (list, tuple)):
        return [e for x in v for e in _entries(x)]
    return [v]


def _rational(v) -> Fraction | None:
    """An exact weight as a Fraction; None for an irrational (symbolic) one."""
    if isinstance(v, bool):
        raise TypeError("a bool is not a weight")
    if isinstance(v, (int, Fraction)):
        return Fraction(v)
    if isinstance(v, sympy.Basic) and v.is_Rational:
        return Fraction(int(v.p), int(v.q))
    return None


def _model_arrays(model):
    """``(name, flat list of entries)`` of every weight array, the embedding and the readout."""
    out = [(name, _entries(arr)) for name, arr in model.weight_arrays()]
    out += [(f"layer{i}.tau", [layer.tau]) for i, layer in enumerate(model.layers) if getattr(layer, "tau", None)]
    if model.embedding is not None:
        out += [("base", _entries(model.embedding.base)), ("E", _entries(model.embedding.E)),
                ("column", [model.embedding.column])]
    if model.readout is not None:
        out += [("readout", [model.readout.row, model.readout.column])]
    return out


def _fraction_of_mpf(v) -> Fraction:
    assert mpmath.isfinite(v), v
    sign, man, exp, _ = v._mpf_  # the exact binary value (sign, mantissa, exponent, bit count)
    q = Fraction(int(man)) * Fraction(2) ** int(exp)
    return -q if sign else q


def _balanced(tex: str) -> bool:
    depth = 0
    i = 0
    while i < len(tex):
        if tex[i] == "\\":
            i += 2  # \{ \} \\ and the first letter of a command
            continue
        depth += {"{": 1, "}": -1}.get(tex[i], 0)
        if depth < 0:
            return False
        i += 1
    return depth == 0


# ------------------------------------------------------------------------------------------
# the checks


def check_claims_covered(paper, proofs) -> None:
    declared = set(paper.claims)
    measured = set()
    for proof in proofs:
        for r in proof.results:
            assert r.claim is not None, f"{paper.key}: result {r.id} is not tied to a declared Claim"
            assert r.claim.id == r.id
            measured.add(r.claim)
    assert {c.id for c in measured - declared} == set(), f"{paper.key}: measured but not declared"
    assert {c.id for c in declared - measured} == set(), f"{paper.key}: declared but measured by no example"


def check_latex(paper, tmp_path) -> None:
    texs = []
    for c in paper.claims:
        tex = sympy.latex(c)
        assert tex == c.tex and tex.strip(), c.id
        assert _balanced(tex), f"{paper.key} {c.id}: unbalanced braces in {tex!r}"
        texs.append(tex)
    if not HAVE_TEX:
        assert not os.environ.get("CI"), "CI is set but pdflatex is missing"
        return  # braces checked above; compiled wherever pdflatex is installed
    body = "\n".join(rf"\item ${t}$" for t in texs)
    doc = (r"\documentclass{article}\usepackage{amsmath,amssymb}\begin{document}"
           "\n\\begin{itemize}\n" + body + "\n\\end{itemize}\n\\end{document}\n")
    (tmp_path / "claims.tex").write_text(doc)
    r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "claims.tex"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{paper.key}: the claims do not compile:\n" + r.stdout[-1500:]


def check_round_trip(paper, model, x) -> None:
    """The default file (decimals at 128 bits) keeps the weights; a file written at 512 bits also
    keeps the outputs to within 256-bit balls (a 128-bit weight error, amplified by the network's
    large scales, may exceed a 256-bit ball's radius)."""
    check_same_model(model, model_from_json(json.loads(json.dumps(model_to_json(model)))), x, outputs=False)
    check_same_model(model, model_from_json(json.loads(json.dumps(model_to_json(model, prec=512)))), x)


def check_same_model(model, back, x, outputs: bool = True) -> None:
    """``back`` (read from a file) has ``model``'s weights and computes what it does at ``x``."""
    assert back.input == model.input and len(back.layers) == len(model.layers)
    assert [type(a) for a in back.layers] == [type(a) for a in model.layers]
    assert [getattr(a, "kind", None) for a in back.layers] == [getattr(a, "kind", None) for a in model.layers]
    ctx = BallContext(256)
    env = model.definition_values(ctx)
    with ctx.scope():
        for (name, ws), (name2, ws2) in zip(_model_arrays(model), _model_arrays(back), strict=True):
            assert name == name2 and len(ws) == len(ws2), name
            for w, w2 in zip(ws, ws2):
                q = _rational(w)
                if q is not None:  # exact weights are written exactly
                    assert Fraction(w2) == q, name
                    continue
                # irrational weights: the file's decimal lies within 2^-120 (relative) of the weight
                ball = ctx.from_sympy(w, {}, env)
                err = ctx.abs(ball - ctx.convert(Fraction(w2)))
                tol = ctx.max(ctx.one, ctx.abs(ball)) * ctx.convert(Fraction(1, 2**120))
                assert ctx.le(err, tol) is True, name
    if not outputs:
        return
    try:
        a, b = forward(ExactContext(), model, x), forward(ExactContext(), back, x)
        assert _entries(a) == _entries(b)
        return
    except ExactUnsupported:  # softmax, or irrational weights
        pass
    a, b = forward(ctx, model, x), forward(ctx, back, x)
    for u, v in zip(_entries(a), _entries(b), strict=True):
        assert u.is_finite() and v.is_finite() and u.overlaps(v)


def check_inside_ball(paper, model, x) -> None:
    balls = _entries(forward(BallContext(128), model, x))
    try:
        ref = [(Fraction(int(v.p), int(v.q)), Fraction(0)) for v in _entries(forward(ExactContext(), model, x))]
    except ExactUnsupported:  # softmax, or irrational weights
        # mpmath at 300 bits is not exact: allow its own rounding, far below the 128-bit radius
        ref = [(q, abs(q) * Fraction(1, 2**250) + Fraction(1, 2**280))
               for q in map(_fraction_of_mpf, _entries(forward(MPContext(300), model, x)))]
    check_inside(paper.key, balls, ref)


def check_inside(key, balls, ref) -> None:
    """Each reference value ``q`` (give or take ``slack``) lies in its narrow 128-bit ball."""
    assert len(ref) == len(balls)
    for ball, (q, slack) in zip(balls, ref):
        lo, hi = BallContext(128).to_fraction_bounds(ball)
        assert hi - lo <= Fraction(1, 2**20) * max(1, abs(q)), f"{key}: the 128-bit ball is too wide"
        assert lo - slack <= q <= hi + slack, f"{key}: {float(q)} outside [{float(lo)}, {float(hi)}]"


@pytest.mark.parametrize("key", KEYS)
def test_construction(key, catalogue, tmp_path):
    paper = catalogue[key]
    assert paper.key == key and paper.examples and paper.example == paper.examples[0]
    proofs = []
    for values in paper.examples:
        inst = paper.instance(values)
        proof = paper.prove(inst)
        assert proof.exit_code == 0, (values, [(r.id, str(r.verdict)) for r in proof.results if r.verdict != "proved"])
        proofs.append(proof)
        model = paper.build(inst)
        x = paper.sample_input(inst)
        check_round_trip(paper, model, x)
        check_inside_ball(paper, model, x)
    check_claims_covered(paper, proofs)
    check_latex(paper, tmp_path)


# ------------------------------------------------------------------------------------------
# the checks fail when they should


def test_checks_catch_a_missing_claim_and_bad_latex(tmp_path):
    from dataclasses import replace

    from symbounds.core.claims import Claim

    paper = tiny_paper.PAPER
    proofs = [paper.prove(paper.instance(v)) for v in paper.examples]
    extra = Claim("T3", "never measured", r"x \le 1", "le")
    with pytest.raises(AssertionError, match="declared but measured by no example"):
        check_claims_covered(replace(paper, claims=paper.claims + (extra,)), proofs)
    with pytest.raises(AssertionError, match="measured but not declared"):
        check_claims_covered(replace(paper, claims=paper.claims[:1]), proofs)
    assert not _balanced(r"\frac{1}{2") and not _balanced(r"x}{") and _balanced(r"\{ a \} {b}")
    broken = Claim("T4", "bad tex", r"\frac{1}{2", "le")
    with pytest.raises(AssertionError, match="unbalanced"):
        check_latex(replace(paper, claims=(broken,)), tmp_path)
    if HAVE_TEX:
        undefined = Claim("T5", "undefined macro", r"\notamacro x \le 1", "le")
        with pytest.raises(AssertionError, match="do not compile"):
            check_latex(replace(paper, claims=(undefined,)), tmp_path)


def test_checks_catch_a_refuted_claim_a_changed_weight_and_a_value_outside():
    from dataclasses import replace

    from symbounds.core.transformer import Attention

    paper = tiny_paper.PAPER
    inst = paper.instance({"tokens": "1/3,-2,5/7,0"})
    model, x = paper.build(inst), paper.sample_input(inst)
    head = model.layers[0].heads[0]
    with_key = lambda wk: replace(model, layers=(Attention(heads=(replace(head, W_K=wk),), kind="hardmax", skip=0),))
    # a network that attends to the smallest token instead: T1 is refuted (exit code 1)
    smallest = with_key(((-1, 0),))
    assert [str(r.verdict) for r in tiny_paper.verdicts(smallest, inst)] == ["refuted", "proved"]
    assert tiny_paper.Proof(tiny_paper.verdicts(smallest, inst)).exit_code == 1
    # a changed weight is caught even when the outputs agree (W_K = (2 0) picks the same token) ...
    with pytest.raises(AssertionError):
        check_same_model(model, with_key(((2, 0),)), x)
    # ... and so are different outputs
    with pytest.raises(AssertionError):
        check_same_model(model, smallest, x)
    check_same_model(model, model_from_json(model_to_json(model)), x)
    # a value just outside the ball, and a ball too wide to mean anything
    balls = _entries(forward(BallContext(128), model, x))
    exact = [(Fraction(int(v.p), int(v.q)), Fraction(0)) for v in _entries(forward(ExactContext(), model, x))]
    check_inside("tiny", balls, exact)
    with pytest.raises(AssertionError, match="outside"):
        check_inside("tiny", balls, [(q + Fraction(1, 2**100), s) for q, s in exact])
    with pytest.raises(AssertionError, match="too wide"):
        check_inside("tiny", [b + flint.arb(0, 1) for b in balls], exact)


def test_shi_liao_parameters_match_the_command_line():
    """The catalogue's manifold parameters give the instance that ``pou --manifold`` builds."""
    from argparse import Namespace

    from symbounds.papers.shi_liao.manifolds.manifold import instance_from_args

    paper = CATALOGUE["shi_liao"]
    ours = paper.instance({"manifold": "sphere", "ambient": "4", "radius": "1/3", "eps": "1/2", "holder": "1"})
    cli = instance_from_args(Namespace(manifold="sphere", ambient=4, radius="1/3", eps="1/2", holder="1"))
    assert ours.label() == cli.label() and ours.inst.target == cli.inst.target
    assert ours.man.ambient == 4 and str(ours.man.radii[0]) == "1/3" and str(ours.inst.C_H) == "1"
    for bad in ({"ambient": "3"}, {"manifold": "circle", "ambient": "5/2"}, {"manifold": "blob"},
                {"manifold": "circle", "target": "x1+"}):
        with pytest.raises(ValueError) as e:
            paper.instance(bad)
        assert "\n" not in str(e.value)


# ------------------------------------------------------------------------------------------
# the command line reaches every construction through the Paper alone


@pytest.mark.parametrize("key", KEYS)
def test_prove_latex_and_plot_commands(key, catalogue, tmp_path, capsys):
    """``symbounds prove KEY``, ``latex KEY`` and (with figures) ``plot --kind paper`` work for every
    construction, the test-only one included, with nothing of it in ``symbounds.app``."""
    from symbounds.app.cli import main

    paper = catalogue[key]
    assert main(["prove", key, "--example", "0"]) == 0
    out = capsys.readouterr().out
    inst = paper.instance(paper.example)
    proof = paper.prove(inst)
    for r in proof.results:  # every claim, with its verdict, in the text
        assert f"{r.id:<5} {r.verdict:<9}" in out
    if paper.report is not None:
        assert paper.report(inst, proof).strip() in out
    tex = tmp_path / f"{key}.tex"
    assert main(["latex", key, "--example", "0", "--out", str(tex)]) == 0
    text = tex.read_text()
    assert paper.title.split()[0] in text and text.count(r"\item[\textbf{") == len(proof.results)
    for title, _ in (paper.latex(inst, proof) if paper.latex is not None else []):
        assert rf"\subsection*{{{title}}}" in text
    if HAVE_TEX:
        r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", tex.name], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout[-1500:]
    if paper.figures is not None:
        png = tmp_path / f"{key}.png"
        assert main(["plot", "--kind", "paper", "--construction", key, "--example", "0", "--out", str(png),
                     "--quiet"]) == 0
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_paper_commands_refuse_bad_input(catalogue, tmp_path, capsys):
    from symbounds.app.cli import main

    tex = tmp_path / "t.tex"
    for argv, words in ((["latex", "tiny", "tokens=1,x", "--out", str(tex)], "tokens"),
                        (["latex", "tiny", "--example", "9", "--out", str(tex)], "has 2 examples"),
                        (["latex", "tiny", "size=3", "--out", str(tex)], "unknown parameter"),
                        (["latex", "pou", "tokens=1", "--out", str(tex)], "NAME=VALUE"),
                        (["plot", "--kind", "paper", "--construction", "tiny", "--figure", "nope",
                          "--out", str(tmp_path / "f.png")], "draws tokens"),
                        (["plot", "--kind", "paper", "--out", str(tmp_path / "f.png")], "needs --construction")):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1, err
    assert not tex.exists() and not (tmp_path / "f.png").exists()
