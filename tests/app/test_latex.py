"""symbounds.latex: formulas agree with SymPy, numbers agree with independent computations, and the
documents compile with a real pdflatex (whose PDF text is read back with pdftotext).

In CI (the environment variable CI is set) the compile tests must run: `.ci/run` installs
texlive and poppler-utils.  They skip only when CI is unset AND pdflatex/pdftotext are missing.
"""

import argparse
import re
import subprocess

import mpmath
import pytest

from symbounds.app import latex as lx
from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao import notation as nt

from latex_helpers import HAVE_TEX, compile_tex, needs_tex  # noqa: E402


@pytest.fixture(scope="module")
def pou_result():
    from symbounds.papers.shi_liao.run import PouOptions, run

    return run(sl.Instance(), PouOptions(points=2))


def _args(*argv):
    p = argparse.ArgumentParser()
    lx.add_latex_arguments(p)
    return p.parse_args(list(argv))


_compile = compile_tex


# --- formulas and numbers, independently ------------------------------------------------------


def test_notation_formulas_are_sympys_formulas():
    agree = nt.formulas_agree()
    assert set(agree) >= {"r_g", "m", "P", "M_g", "c", "S", "eta", "lambda", "M", "w_ind", "D", "d_ff"}
    assert all(agree.values()), agree


def test_formulas_agree_can_fail(monkeypatch):
    good = nt.notation_formulas()
    bad = dict(good)
    bad["M_g"] = good["M_g"] * 2  # a wrong factor must be caught
    monkeypatch.setattr(nt, "notation_formulas", lambda: bad)
    assert nt.formulas_agree()["M_g"] is False


def test_the_paper_latex_hook_prints_every_formula():
    text = nt.formulas_latex()
    assert text.startswith(r"\begin{align*}") and text.endswith(r"\end{align*}")
    for name, expr in nt.notation_formulas().items():  # each constant, with the formula pou prints
        assert f"{nt.NAMES[name]} &= {nt.tex_formula(expr)}" in text
    assert text.count(r" \\") == len(nt.notation_formulas()) - 1
    [(title, body)] = nt.latex_sections(None, None)
    assert "notation" in title and body == text


def test_log_prints_without_base_quirk():
    text = nt.tex_formula(nt.notation_formulas()["M_g"])
    assert r"\log" in text and r"\log{\left(2" not in text


def test_decimal_and_ball_formatting():
    assert lx.decimal_tex("4.76187385918459742455952423274295e-10") == r"4.76187385918460\times 10^{-10}"
    assert lx.decimal_tex("1743.48631369633020605527646810529") == "1743.48631369633"
    assert lx.ball_tex("40") == "40"
    assert lx.ball_tex("1/80") == r"\tfrac{1}{80}"
    b = lx.ball_tex("[1.1725313805472678894e-11 +/- 3.77e-31]")
    assert b.startswith(r"[1.172531381\times 10^{-11} \pm")
    # the re-rounded ball still encloses the original value (Arb widens the radius)
    import flint

    m = re.match(r"\[(.*)\\times 10\^\{(-?\d+)\} \\pm (.*)\\times 10\^\{(-?\d+)\}\]", b)
    mid, rad = flint.arb(f"{m.group(1)}e{m.group(2)}"), flint.arb(f"{m.group(3)}e{m.group(4)}")
    assert abs(flint.arb("1.1725313805472678894e-11") - mid) <= rad


def test_text_is_escaped():
    assert lx.text_tex("a_b & 50% [x]") == r"a\_b \& 50\% {[}x{]}"


def test_order_tex():
    assert lx.order_tex("O(eps^{-d/alpha} poly log(1/eps))") == \
        r"$O(\varepsilon^{-d/\alpha} \operatorname{poly}\log (1/\varepsilon))$"


def test_pou_document_numbers_match_independent_mpmath(pou_result):
    text = lx.pou_latex(pou_result)
    assert text.startswith(r"\documentclass") and text.rstrip().endswith(r"\end{document}")
    # M and M_g of the default instance, from the formulas of docs/shi_liao.md (Constants) in mpmath (not symbounds)
    mpmath.mp.dps = 40
    d, C_H, B, eps = 1, 2, 2, mpmath.mpf(1) / 10
    r_g = eps / (4 * C_H)
    m = int(mpmath.ceil(mpmath.sqrt(d) / (2 * r_g)))
    P = m**d
    M_g = mpmath.log(8 * B * P / eps) / (3 * r_g**2)
    c = 1 - mpmath.cos(2 * mpmath.pi / P)
    M = mpmath.log(4 * (P - 1) * B * (36 * d * M_g + 2) / eps) / c
    assert P == 40
    assert mpmath.nstr(M, 15) in text  # 1743.48631369633
    assert mpmath.nstr(M_g, 15) in text
    assert mpmath.nstr(c, 15) in text
    for cid in ("L1", "L2.2", "L3", "L5.1", "L6.1", "L7", "E0", "E1", "E2", "E3", "L8.1"):
        assert rf"\textbf{{{cid}}}" in text
    assert text.count(r"\textsc{proved}") == sum(c.verdict == "proved" for c in pou_result.claims)
    frag = lx.pou_latex(pou_result, fragment=True)
    assert r"\documentclass" not in frag and r"\begin{document}" not in frag


def test_claim_statement_covers_every_id(pou_result):
    assert all(c.claim is not None and c.claim.tex for c in pou_result.claims)


def test_run_latex_bad_input_is_one_line_value_error(tmp_path):
    with pytest.raises(ValueError, match="eps"):
        lx.run_latex(_args("pou", "--eps", "2", "--out", str(tmp_path / "a.tex")))
    with pytest.raises(ValueError, match="does not exist"):
        lx.run_latex(_args("tables", "--out", str(tmp_path / "nope" / "a.tex")))
    with pytest.raises(ValueError, match="N,n,d,m"):
        lx.run_latex(_args("interp", "--random", "1,2", "--out", str(tmp_path / "a.tex")))
    assert not (tmp_path / "a.tex").exists()


def test_tables_uses_the_data_module():
    from symbounds.papers.shi_liao import tables as T

    text = lx.tables_latex(fragment=True)
    assert r"\toprule" in text and r"\midrule" in text and r"\bottomrule" in text
    for r in T.COMPARISON:
        assert lx.text_tex(r["work"]) in text
    for row in T.ABLATION:
        assert str(row[5]) in text  # P_net (small integers, printed whole)
        # P_cube reaches 5e17: the column is scientific with 3 significant digits throughout
        mant, exp = f"{row[8]:.2e}".split("e")
        assert rf"${mant}\times 10^{{{int(exp)}}}$" in text


# --- compiled with pdflatex -------------------------------------------------------------------


@needs_tex
def test_pou_pdf_shows_the_certified_numbers(tmp_path, pou_result):
    assert HAVE_TEX, "CI is set but pdflatex/pdftotext are missing: .ci/run should install them"
    pdf_text = _compile(tmp_path, "pou", lx.pou_latex(pou_result))
    flat = re.sub(r"\s+", " ", pdf_text)
    mpmath.mp.dps = 40
    eps, P = mpmath.mpf(1) / 10, 40
    r_g = eps / 8
    M_g = mpmath.log(8 * 2 * P / eps) / (3 * r_g**2)
    c = 1 - mpmath.cos(2 * mpmath.pi / P)
    M = mpmath.log(4 * (P - 1) * 2 * (36 * M_g + 2) / eps) / c
    for value in (M, M_g):
        assert mpmath.nstr(value, 15) in flat, mpmath.nstr(value, 15)
    # the number of tokens and the parameter count of the built network
    dense, _ = pou_result.model.count_parameters()
    assert str(dense) in flat
    # L7's certified max error, as printed (10 digits of the ball's midpoint)
    l7 = next(c for c in pou_result.claims if c.id == "L7")
    mid = re.match(r"\[([0-9.]+)", lx.ball_tex(l7.lhs)).group(1)
    assert mid in flat and abs(float(mid) - float(pou_result.max_error.strip("[").split()[0])) < 1e-9
    assert "PROVED" in flat.upper()


@needs_tex
def test_interp_and_tables_pdfs(tmp_path):
    from symbounds.papers.alcalde import paper_blocks
    from symbounds.papers.alcalde.dataset import random_dataset
    from symbounds.papers.alcalde.run import InterpOptions, run

    ds = random_dataset(3, 6, 2, 2, seed=0)
    res = run(ds, InterpOptions())
    flat = re.sub(r"\s+", " ", _compile(tmp_path, "interp", lx.interp_latex(res)))
    assert f"blocks, paper {2 * ds.M + 2 * ds.N + 1}" in flat and paper_blocks(ds) == 2 * ds.M + 2 * ds.N + 1
    assert f"blocks L {len(res.model.layers) // 2}" in flat
    tflat = re.sub(r"\s+", " ", _compile(tmp_path, "tables", lx.tables_latex()))
    from symbounds.papers.shi_liao import tables as T

    for row in T.ABLATION:
        assert str(row[5]) in tflat
    assert "Takakura" in tflat and "sinusoidal" in tflat


@needs_tex
def test_cli_function_writes_a_compilable_fragment(tmp_path):
    out = tmp_path / "frag.tex"
    assert lx.run_latex(_args("tables", "--fragment", "--out", str(out))) == 0
    body = out.read_text()
    assert r"\documentclass" not in body
    wrapper = lx._PREAMBLE + r"\input{frag.tex}" + "\n\\end{document}\n"
    flat = _compile(tmp_path, "wrap", wrapper)
    assert "Gurevych" in flat


def test_readme_latex_snippet_is_current_output(pou_result):
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- readme-snippet: latex-pou -->\s*```latex\n(.*?)```", readme, re.S)
    assert m, "README lost its LaTeX snippet"
    text = lx.pou_latex(pou_result)
    for line in m.group(1).strip().splitlines():
        assert line in text, line


# --- what a reader sees ------------------------------------------------------------------------


def test_no_raw_ascii_statements(pou_result):
    text = lx.pou_latex(pou_result)
    # every claim's plain statement was printed (escaped) beside its display; now only the display,
    # with the statement's words as a caption when they add something
    for c in pou_result.claims:
        assert lx.text_tex(c.statement) not in text, c.id
    body = text[text.index(r"\begin{description}"):]
    for bad in ("<=", r"\textless{}", r"\textasciicircum{}", r"\_"):
        assert bad not in body, bad
    assert not re.search(r"(?<!\\)\b(eps|alpha|lambda)\b", body)
    assert r"\item[\textbf{A1}] \textsc{evidence} (ball, 128 bits): on a $257^{1}$ grid" in text


def test_caption_text():
    assert lx.caption_text("|g| <= B on a 257^1 grid") == "on a $257^{1}$ grid"
    assert lx.caption_text("1 - lambda(M) <= 2(P-1) e^{-cM}") == ""  # a formula only: no caption
    assert lx.caption_text("far tail: 2 B P exp(-3 M_g r_g^2) <= eps/4") == "far tail"
    assert lx.caption_text("position head output is parallel to p_j (|cross product| <= tol)") == \
        "position head output is parallel to $p_{j}$"


def test_tol_is_defined_where_it_appears(pou_result):
    from flint import arb

    from symbounds.core.contexts import BallContext
    from symbounds.papers.shi_liao.claims import tolerance

    text = lx.pou_latex(pou_result)
    assert r"\mathrm{tol}" in text
    assert r"$\mathrm{tol} = 2^{-\lfloor p/2 \rfloor}$ is the tolerance" in text
    # the value printed beside L4.2 is the tolerance the claim was measured with
    l42 = next(c for c in pou_result.claims if c.id == "L4.2")
    assert tolerance(BallContext(l42.prec)) == arb(2) ** -(l42.prec // 2)
    assert rf"\mathrm{{tol}} = 2^{{-{l42.prec // 2}}}" in text
    assert l42.rhs_value is None or abs(float(l42.rhs_value.mid()) - 2.0 ** -(l42.prec // 2)) < 1e-30


def test_a_constant_prints_once(pou_result):
    text = lx.pou_latex(pou_result)
    assert not re.search(r"= (\S+) = \1(?!\S)", text), re.search(r"= (\S+) = \1(?!\S)", text).group(0)
    assert "H^2 &= 1" in text and "= 1 = 1" not in text


def test_column_formats():
    # one format per column: a column reaching 10^6 is all scientific with 3 significant digits
    assert lx.column_cells([36, 137858491849]) == [r"$3.60\times 10^{1}$", r"$1.38\times 10^{11}$"]
    assert lx.column_cells([512, 1.1e17]) == [r"$5.12\times 10^{2}$", r"$1.10\times 10^{17}$"]
    assert lx.column_cells([26, 128]) == ["26", "128"]
    assert lx.column_cells([0.9995, 2.0]) == ["0.9995", "2.0000"]
    text = lx.tables_latex(fragment=True)
    assert "e16" not in text and "e17" not in text and "e23" not in text


def test_captions_cite_papers_or_docs_only():
    for text in (lx.tables_latex(), ):
        for cap in re.findall(r"\\caption\{(.*?)\}\n", text, re.S):
            assert "[SL26]" in cap or "docs/" in cap, cap
            assert "SPEC" not in cap and "DESIGN" not in cap


@pytest.fixture(scope="module")
def interp_result():
    from symbounds.papers.alcalde.dataset import random_dataset
    from symbounds.papers.alcalde.run import InterpOptions, run

    return run(random_dataset(3, 6, 2, 2, seed=0), InterpOptions())


@needs_tex
@pytest.mark.parametrize("what", ["pou", "interp", "tables", "chain"])
def test_fragment_compiles_in_a_plain_article_without_overfull_boxes(what, tmp_path, pou_result, interp_result):
    assert HAVE_TEX, "CI is set but pdflatex/pdftotext are missing: .ci/run should install them"
    frag = {"pou": lambda: lx.pou_latex(pou_result, fragment=True),
            "chain": lambda: lx.chain_latex(_chain_rows(), fragment=True),
            "interp": lambda: lx.interp_latex(interp_result, fragment=True),
            "tables": lambda: lx.tables_latex(fragment=True)}[what]()
    # the first lines say which packages the fragment needs; load exactly those
    m = re.match(r"%[^\n]*\n% (\\usepackage\{[a-z,]+\})\n", frag)
    assert m, frag[:200]
    assert set(m.group(1)[12:-1].split(",")) == set(lx.PACKAGES[what])
    (tmp_path / "frag.tex").write_text(frag)
    (tmp_path / "doc.tex").write_text("\\documentclass{article}\n" + m.group(1) + "\n\\begin{document}\n"
                                      "\\input{frag.tex}\n\\end{document}\n")
    r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    log = (tmp_path / "doc.log").read_text(errors="replace")
    assert r.returncode == 0, log[-3000:]
    assert "Overfull \\hbox" not in log, log[log.index("Overfull \\hbox"):][:400]


def _chain_rows():
    from symbounds.papers.shi_liao.parametric import chain

    return chain()


@needs_tex
def test_chain_pdf_is_a_lemma_list_with_regions(tmp_path):
    """symbounds latex chain: one lemma per claim, its verdict and region; E3's refutation point."""
    assert HAVE_TEX, "CI is set but pdflatex/pdftotext are missing: .ci/run should install them"
    rows = _chain_rows()
    text = compile_tex(tmp_path, "chain", lx.chain_latex(rows))
    flat = " ".join(text.split())
    for r in rows:
        assert f"Lemma {r.id} ({r.verdict}" in flat, r.id
    assert "proved on the region with B ≥ ε/16" in flat and "Refuted at d = 1" in flat and "P = 40" in flat
    assert flat.count("For every parameter of the whole region") == 3  # E0, E1, E2
