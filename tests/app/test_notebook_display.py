"""What a notebook shows of the objects people hold: short reprs (at most MAX_REPR characters, no
40-digit fractions), ``_repr_latex_`` that pdflatex compiles (and that shows the certified numbers
and verdicts), and ``_repr_html_`` tables whose text is escaped."""

import re
from fractions import Fraction
from html.parser import HTMLParser
from pathlib import Path

import pytest
from latex_helpers import HAVE_TEX, compile_tex, needs_tex

from symbounds import bound, certify_model, load_model, model_to_json
from symbounds.core.boxes import CertifyOptions
from symbounds.core.display import MAX_REPR, claims_html, short, tex_text
from symbounds.papers import shi_liao as sl
from symbounds.papers.alcalde.dataset import random_dataset
from symbounds.papers.alcalde.run import run as interp_run
from symbounds.papers.shi_liao.run import PouOptions
from symbounds.papers.shi_liao.run import run as pou_run

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def held():
    """The objects of a notebook session: constants, a pou result and its claims, the network, an
    interpolation result, a bound of a token model and of the pou network, a certificate summary."""
    inst = sl.Instance(eps="1/2")
    K = sl.constants(sl.Instance())  # the default instance: P = 40, M ~ 1743
    pou = pou_run(inst, PouOptions(points=1))
    tokens = load_model(str(DATA / "token_model.json"))
    vector = pou.model
    cert = certify_model(model_to_json(vector), "sin(2*x1)", 1, Fraction(1, 2), CertifyOptions())
    return {
        "constants": K,
        "pou": pou,
        "claim_result": next(c for c in pou.claims if c.id == "L3"),
        "claim": next(c for c in pou.claims if c.id == "L3").claim,
        "transformer": sl.build(K),
        "interp": interp_run(random_dataset(3, 5, 2, 2, seed=1)),
        "bound_tokens": bound(tokens, [Fraction(0)] * 4, [Fraction(1, 4)] * 4),
        "bound": bound(vector, [Fraction(0)], [Fraction(1, 8)]),
        "certificate": cert,
    }


@pytest.mark.parametrize("name", ["constants", "pou", "claim_result", "claim", "transformer", "interp",
                                  "bound_tokens", "bound", "certificate"])
def test_reprs_are_short(held, name):
    text = repr(held[name])
    assert len(text) <= MAX_REPR, (name, len(text), text[:200])
    assert "\n" not in text
    assert not re.search(r"\d{25}", text), text  # no 40-digit Fraction or weight


def test_reprs_say_what_matters(held):
    assert repr(held["pou"]).startswith("PouResult(proved: ") and "P=8" in repr(held["pou"])
    assert "M~1743.49" in repr(held["constants"]) and "P=40" in repr(held["constants"])
    t = repr(held["transformer"])
    assert "attention softmax x42" in t and "D=5" in t  # P + 2 = 42 layer-1 heads, width d + 4
    assert repr(held["claim_result"]).startswith("ClaimResult(L3 proved by ball")
    assert repr(held["certificate"]).startswith(f"CertifyResult({held['certificate'].verdict}: ")


def _intervals(text):
    return [(Fraction(a), Fraction(b)) for a, b in re.findall(r"\[(-?[\d.e+-]+), (-?[\d.e+-]+)\]", text)]


def test_bound_repr_rounds_outward(held):
    """The repr's 12-digit decimals enclose the exact ends (a cut never narrows an enclosure)."""
    for key in ("bound", "bound_tokens"):
        b = held[key]
        lows = b.lower if isinstance(b.lower, tuple) else (b.lower,)
        highs = b.upper if isinstance(b.upper, tuple) else (b.upper,)
        shown = _intervals(repr(b))
        assert shown
        for (a, c), lo, hi in zip(shown, lows, highs):
            assert a <= lo <= hi <= c and c - a < (hi - lo) + Fraction(1, 10**9)


def test_short_marks_the_cut():
    assert short("x" * 10, 20) == "x" * 10
    cut = short("Thing(" + "y" * 500 + ")", 50)
    assert len(cut) == 50 and cut.endswith("...)")


@needs_tex
def test_repr_latex_compiles_and_shows_the_numbers(held, tmp_path):
    assert HAVE_TEX, "CI is set but pdflatex/pdftotext are missing: .ci/run should install them"
    names = ["constants", "pou", "claim_result", "interp", "bound", "bound_tokens", "certificate"]
    body = "\n\n".join(f"% {n}\n" + held[n]._repr_latex_() for n in names)
    doc = ("\\documentclass{article}\n\\usepackage[margin=1cm,paperwidth=60cm,paperheight=120cm]{geometry}\n"
           "\\usepackage{amsmath,amssymb}\n\\begin{document}\n" + body + "\n\\end{document}\n")
    text = compile_tex(tmp_path, "display", doc)
    flat = re.sub(r"\s+", " ", text)
    assert "1743.486314" in flat  # the constant M of the default instance, 10 digits
    assert "SL26" in flat and "proved" in flat and "refuted" not in flat.replace("refuted:", "")
    assert "AFZ25" in flat
    b = held["bound"]
    assert str(b.boxes) in flat


def test_claims_latex_holds_every_claim_and_verdict(held):
    latex = held["pou"]._repr_latex_()
    for c in held["pou"].claims:
        assert rf"\text{{{tex_text(c.id)}}}" in latex
    assert latex.count(r"\text{proved}") == sum(str(c.verdict) == "proved" for c in held["pou"].claims)


class _Cells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self.stack = [], []

    def handle_starttag(self, tag, attrs):
        self.stack.append(tag)
        if tag == "tr":
            self.rows.append([])
        if tag == "td":
            self.rows[-1].append("")

    def handle_endtag(self, tag):
        assert self.stack and self.stack.pop() == tag, tag  # well nested

    def handle_data(self, data):
        if "td" in self.stack:
            self.rows[-1][-1] += data


def test_claims_html_is_a_table_with_verdicts(held):
    pou = held["pou"]
    parser = _Cells()
    parser.feed(pou._repr_html_())
    body = [r for r in parser.rows if r]
    assert [r[0] for r in body] == [c.id for c in pou.claims]
    assert [r[2] for r in body] == [str(c.verdict) for c in pou.claims]
    assert not parser.stack


def test_html_escapes_the_text():
    class R:
        id, statement, verdict, context, prec, lhs, rhs = "X<1>", "a <b> & c", "proved", "exact", None, "<", ">"

    out = claims_html([R()])
    assert "<b>" not in out.replace("<b style", "") and "&lt;b&gt; &amp; c" in out and "X&lt;1&gt;" in out


def test_transformer_html_lists_every_layer(held):
    m = held["transformer"]
    parser = _Cells()
    parser.feed(m._repr_html_())
    body = [r for r in parser.rows if r]
    assert [r[0] for r in body] == [str(i) for i in range(len(m.layers))]
    dense, nonzero = m.count_parameters()
    assert f"{dense} parameters ({nonzero} nonzero)" in m._repr_html_()


def test_html_table_escapes_body_cells_but_not_markup():
    from symbounds.core.display import bold, html_table

    out = html_table(["a<", "b"], [["x < y & z", bold("p<q", "red")]], "cap <i>")
    assert "<td style='text-align:left'>x &lt; y &amp; z</td>" in out
    assert "<b style='color:red'>p&lt;q</b>" in out
    assert "a&lt;" in out and "cap &lt;i&gt;" in out and "<i>" not in out
    parser = _Cells()
    parser.feed(out)
    assert [r for r in parser.rows if r] == [["x < y & z", "p<q"]]


def test_certificate_html_escapes_a_counterexample():
    from symbounds.core.boxes import CertifyResult

    r = CertifyResult(verdict="refuted", boxes=[], max_bound=None, counterexample={"x": ["1/2", "<script>"]},
                      undecided=[], seconds=0.5, evaluated=3)
    out = r._repr_html_()
    assert "<script>" not in out and "&lt;script&gt;" in out and "<b>refuted</b>" in out
