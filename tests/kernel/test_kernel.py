"""The checker kernel (symbounds_kernel, docs/checking.md): independence, soundness, verdicts.

Reference values come from code the kernel does not share: the mpmath evaluator of
``tests/byon_helpers.py`` (300 bits, straight from the model-file formulas), symbounds' own target
parser, and brute-force cover checks on a grid.
"""

import ast
import copy
import functools
import hashlib
import json
import pathlib
import re
import subprocess
import sys
from fractions import Fraction

import mpmath
import pytest
from flint import arb, ctx
from hypothesis import given, settings
from hypothesis import strategies as st

import symbounds_kernel
from symbounds_kernel import read, taylor, verify
from symbounds_kernel.network import Network, _ffn, parse_model
from symbounds_kernel.target import evaluate, parse

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from byon_helpers import as_fraction, reference  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
KERNEL = ROOT / "symbounds_kernel"
DATA = ROOT / "tests" / "data"
STORED = sorted((DATA / "certificates").glob("*.json"))
SMALL_PATH = DATA / "certificates" / "v0.1-d1-small.json"
SMALL = json.loads(SMALL_PATH.read_text())
MAX_LINES = 1900
CLASS_PATH = DATA / "class_certificates" / "d1-eps-1-2.json"
CLASS = json.loads(CLASS_PATH.read_text())


def _sources():
    return sorted(KERNEL.glob("*.py"))


def test_kernel_imports_nothing_but_the_standard_library_and_flint():
    seen = set()
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                seen |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                seen.add(node.module.split(".")[0])
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("__import__", "eval", "exec"):
                pytest.fail(f"{path.name}: calls {node.func.id}")
    assert "json" in seen and "flint" in seen  # the walk sees the imports at all
    assert not any(m.startswith("symbounds") for m in seen)
    assert seen - {"flint"} <= set(sys.stdlib_module_names)


def test_the_ast_check_catches_an_import_of_symbounds(tmp_path):
    tree = ast.parse("def f():\n    from symbounds.core import boxes\n")
    found = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert found == {"symbounds.core"}


def test_kernel_is_under_the_stated_line_count():
    lines = sum(len(p.read_text().splitlines()) for p in _sources())
    assert lines < MAX_LINES
    assert f"under {MAX_LINES} lines" in (ROOT / "docs" / "checking.md").read_text()


# ------------------------------------------------------------------------------------------
# verdicts


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.name)
def test_accepts_every_stored_certificate(path):
    ok, reason = symbounds_kernel.check_file(str(path))
    assert ok, reason
    cert = json.loads(path.read_text())
    assert f"{len(cert['boxes'])} boxes" in reason
    shown = Fraction(reason.split("<= ")[1].split(" ")[0])  # the largest bound, rounded up
    top = Fraction(cert["max_bound"])
    assert top <= shown <= top * (1 + Fraction(1, 10**5))


CORPUS = {  # file -> (exit code, words of the reason)
    "bound_infinite": (1, "box 3"),
    "bound_json_nan": (2, "NaN"),
    "bound_lowered_below_the_truth": (1, "box 17: the kernel cannot bound"),
    "bound_lowered_to_zero": (1, "box 63: the kernel cannot bound"),
    "bound_lowered_to_two_fifths_of_the_truth": (1, "box 17: the kernel cannot bound"),
    "bounds_scaled_by_3_5": (1, "the kernel cannot bound"),
    "box_below_the_domain": (1, "box 0 is not a non-empty box inside"),
    "box_dropped": (1, "do not cover"),
    "box_duplicated_in_place_of_another": (1, "do not cover"),
    "box_empty": (1, "box 5 is not a non-empty box"),
    "box_moved": (1, "do not cover"),
    "box_outside_the_domain": (1, "box 63 is not a non-empty box inside"),
    "box_shrunk": (1, "do not cover"),
    "dimension_changed": (1, "instance"),
    "eps_changed": (1, "is not in [0, eps]"),
    "eps_changed_in_the_claim_only": (1, "instance"),
    "eps_nan": (1, "eps"),
    "format_version_changed": (1, "unknown format 'symbounds-certificate/2'"),
    "json_float_bound": (2, "0.001"),
    "max_bound_lowered": (1, "max_bound"),
    "model_format_version_changed": (1, "symbounds-transformer/1"),
    "named_constant_changed": (1, "the kernel cannot bound"),
    "target_changed": (1, "the kernel cannot bound"),
    "target_changed_in_the_claim_only": (1, "instance"),
    "target_not_in_the_grammar": (1, "target"),
    "verdict_undecided": (1, "verdict"),
    "weight_changed_by_one_ulp": (1, "model_sha256"),
    "weight_nan": (1, "W_V"),
    # class certificates (tests/data/class_certificates/d1-eps-1-2.json edited)
    "class_alpha_changed": (1, "box 0: the kernel cannot bound E"),
    "class_bound_B_changed": (1, "box 0: the kernel cannot bound E"),
    "class_bound_lowered_below_the_truth": (1, "box 112: the kernel cannot bound E"),
    "class_box_dropped": (1, "do not cover"),
    "class_centre_moved": (1, "box 113: the kernel cannot bound E"),
    "class_eps_lowered": (1, "box 0: its bound 0.125034 is not in [0, eps]"),
    "class_format_version_changed": (1, "unknown format 'symbounds-class-certificate/2'"),
    "class_holder_changed": (1, "box 0: the kernel cannot bound E"),
    "class_value_row_weight_changed_by_one_unit": (1, "layer 2's query, keys or values"),
    "class_value_slot_not_zero": (1, "a value slot"),
    "class_weight_changed_by_one_ulp": (1, "model_sha256"),
}


def test_the_corpus_is_the_listed_edits():
    assert {p.stem for p in (DATA / "kernel_corpus").glob("*.json")} == set(CORPUS)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_rejects_every_edited_certificate(name):
    code, words = CORPUS[name]
    path = str(DATA / "kernel_corpus" / f"{name}.json")
    if code == 2:
        with pytest.raises(read.Unreadable, match=words):
            symbounds_kernel.check_file(path)
    else:
        ok, reason = symbounds_kernel.check_file(path)
        assert not ok and words in reason, reason


def _check(cert):
    return verify.check(copy.deepcopy(cert))


def test_boxes_in_any_order_with_duplicates_and_halves_are_accepted():
    cert = copy.deepcopy(SMALL)
    boxes = cert["boxes"][::-1] + cert["boxes"][:3]
    b = boxes.pop(5)
    mid = str((Fraction(b["lo"][0]) + Fraction(b["hi"][0])) / 2)
    boxes += [{"lo": b["lo"], "hi": [mid], "bound": b["bound"]}, {"lo": [mid], "hi": b["hi"], "bound": b["bound"]}]
    cert["boxes"] = boxes
    assert _check(cert).startswith(f"{len(boxes)} boxes")


def test_a_bound_below_one_enclosure_is_proved_on_halves(monkeypatch):
    """A box whose kernel enclosure misses its bound is bisected; with no bisection allowed the
    same certificate is rejected."""
    cert = copy.deepcopy(SMALL)
    b = cert["boxes"][20]
    lo, hi = [Fraction(b["lo"][0])], [Fraction(b["hi"][0])]
    with _prec():
        net = Network(cert["model"], 1)  # at the kernel's precision, as in the check
        one = verify._upper(abs(net.enclose(lo, hi) - evaluate(parse(cert["target"], 1), [verify._interval(lo[0], hi[0])])))
    halves = [verify._proves(net, parse(cert["target"], 1), lo, hi, one * Fraction(999, 1000), 1)]
    assert halves == [True]
    b["bound"] = str(one * Fraction(999, 1000))
    assert _check(cert)
    monkeypatch.setattr(verify, "SPLITS", 0)
    with pytest.raises(read.Rejected, match="box 20"):
        _check(cert)
    b["bound"] = str(one)  # exactly the kernel's own upper end: proved with no bisection
    assert _check(cert)


def test_every_box_is_evaluated_the_last_one_too():
    for i in (0, 31, 62, 63):
        cert = copy.deepcopy(SMALL)
        cert["boxes"][i]["bound"] = "0"
        with pytest.raises(read.Rejected, match=f"box {i}:"):
            _check(cert)


@pytest.mark.parametrize("edit, words", [
    (lambda c: c.update(construction="other"), "construction"),
    (lambda c: c.update(construction="model"), "instance of a model certificate"),
    (lambda c: c["instance"].update(paper="alcalde"), "instance"),
    (lambda c: c["instance"].update(d=2), "instance"),
    (lambda c: c.update(d=0, claim="sup over [0,1]^0 of |T(x) - g(x)| <= eps"), "'d'"),
    (lambda c: c.update(d=True), "certificate: 'd' is missing or not int"),
    (lambda c: c.update(claim="sup <= eps"), "wording"),
    (lambda c: c.update(eps="0") or c["instance"].update(eps="0"), "eps is not positive"),
    (lambda c: c.update(extra=1), "fields"),
    (lambda c: c.pop("seconds"), "fields"),
    (lambda c: c.update(counterexample={"x": ["0"], "error": "1"}), "counterexample"),
    (lambda c: c.update(undecided_boxes=[c["boxes"][0]]), "undecided"),
    (lambda c: c.update(boxes=[]), "no boxes"),
    (lambda c: c["boxes"][0].update(extra="1"), "box 0"),
    (lambda c: c["boxes"][0].update(lo=["0", "0"]), "box 0"),
    (lambda c: c["boxes"][0].update(bound="-1/2"), "box 0"),
    (lambda c: c["boxes"][0].update(bound="1/1000000", lo=["0"], hi=["0"]), "box 0 is not a non-empty"),
    (lambda c: c.update(model_sha256="0" * 64), "model_sha256"),
    (lambda c: c.update(eps="1/0"), "zero denominator"),
    (lambda c: c["boxes"][0].update(lo=["0.0"]), "box 0: '0.0' is not a rational string"),
    (lambda c: c["boxes"][0].update(hi=["1e-2"]), "box 0: '1e-2' is not a rational string"),
    (lambda c: c["boxes"][0].update(bound="0.1"), "box 0: '0.1' is not a rational string"),
])
def test_rejects_malformed_and_inconsistent_fields(edit, words):
    cert = copy.deepcopy(SMALL)
    edit(cert)
    with pytest.raises(read.Rejected, match=re.escape(words)):
        _check(cert)


def test_accepts_the_certificates_the_prover_writes(tmp_path):
    """Certificates written now by symbounds (fast and Arb-only [SL26], and a model file's)."""
    from symbounds.core.bound import certify
    from symbounds.core.boxes import CertifyOptions
    from symbounds.papers import shi_liao as sl
    from symbounds.papers.shi_liao.certificate import certify_instance

    small = dict(alpha="1/2", C_H="1/2", B="1/4", eps="1/2", target="sin(x1)/4")
    certs = [certify_instance(sl.Instance(**small), CertifyOptions(fast=f))[0] for f in (True, False)]
    model = json.loads((DATA / "residual_model.json").read_text())
    certs.append(certify(model, "-0.46 + 2.76*x1 + 0.42*x2 - 0.44*x1*x2", Fraction(1, 2))[0])
    for i, cert in enumerate(certs):
        assert cert["verdict"] == "proved"
        path = tmp_path / f"c{i}.json"
        path.write_text(json.dumps(cert))
        ok, reason = symbounds_kernel.check_file(str(path))
        assert ok, reason


# ------------------------------------------------------------------------------------------
# class certificates ([SL26]'s bound for every target of a Hoelder class)


def test_accepts_the_stored_class_certificate():
    ok, reason = symbounds_kernel.check_file(str(CLASS_PATH))
    assert ok, reason
    assert reason.startswith(f"{len(CLASS['boxes'])} boxes cover [0,1]^1; for every g of the class, sup |T_g - g| <= ")
    shown = Fraction(reason.split("<= ")[1].split(" ")[0])
    top = Fraction(CLASS["max_bound"])
    assert top <= shown <= top * (1 + Fraction(1, 10**5)) and reason.endswith("<= eps = 1/2")


@functools.lru_cache(maxsize=1)
def _class_nets_stored():
    return _class_nets(CLASS)


def _class_nets(cert):
    """The kernel's and symbounds' own reading of a class certificate's scores and leakage."""
    from symbounds.core.modelfile import model_from_json
    from symbounds.papers.shi_liao.class_bound import class_network

    from symbounds_kernel.holder import ClassNet

    d, cls = cert["instance"]["d"], cert["class"]
    a, C, B = (Fraction(cls[k]) for k in ("alpha", "holder", "bound"))
    P = len(cert["model"]["embedding"]["base"][0])
    m = round(P ** (1 / d))
    centres = [tuple(Fraction(2 * i + 1, 2 * m) for i in (k // m**(d - 1 - j) % m for j in range(d))) for k in range(P)]
    with _prec():
        mine = ClassNet(cert["model"], d, a, C, B)
    return mine, class_network(model_from_json(cert["model"]), d, centres, a, C, B, 256)


def test_class_scores_centres_and_leakage_agree_with_symbounds():
    """symbounds reads s_k and l_k by its own forward pass at x = 0 and x = e_i, and the
    leakage from the layer-1 attention weights of its trace."""
    mine, theirs = _class_nets(CLASS)
    assert [tuple(c) for c in mine.centres] == theirs.centres
    for k in range(len(theirs.b)):
        assert abs(float((mine.b[k] - theirs.b[k]).mid())) < 1e-30
        assert abs(float((mine.a[0][k] - theirs.A[k][0]).mid())) < 1e-30
        ell = Fraction(theirs.ell[k].mid().str(40, radius=False))
        B_ell = Fraction(mine.B_ell[k].str(40, radius=False))
        assert abs(B_ell - theirs.B * ell) < Fraction(1, 10**30) and ell > 0


@settings(max_examples=30, deadline=None)
@given(st.fractions(0, 1), st.sampled_from([Fraction(1, 2**k) for k in (4, 8, 16, 30)]), st.integers(0, 8))
def test_class_box_bound_contains_E_at_points_and_is_narrow(lo, width, t):
    """E at a point of the box (symbounds' point evaluation, 256 bits) is below the kernel's bound
    of the box, and on a narrow box that bound is within 64 w of it (E is about 30-Lipschitz here:
    C_H plus the scores' slope times the brackets)."""
    from symbounds.papers.shi_liao.class_bound import point_values

    mine, theirs = _class_nets_stored()
    lo = min(lo, 1 - width)
    x = lo + width * t / 8
    with _prec():
        up = Fraction(mine.upper([lo], [lo + width]).str(40, radius=False))
    E = point_values(theirs, [x])[0]
    assert Fraction(E.upper().str(40, radius=False)) <= up
    assert width > Fraction(1, 2**16) or up <= Fraction(E.lower().str(40, radius=False)) + 64 * width


@pytest.mark.parametrize("edit, words", [
    (lambda c: c.update(model=copy.deepcopy(SMALL["model"])), "model: a value slot (row 1, column d of W_V in layer 1) is not 0"),
    (lambda c: c["model"]["layers"].pop(), "model: not the two blocks of [SL26] on a grid of P = m^d tokens"),
    (lambda c: [c["model"]["layers"][0]["heads"].pop() for _ in range(3)], "model: not the two blocks of [SL26] on a grid of P = m^d tokens"),  # P - 1 heads
    (lambda c: c["model"]["layers"][2]["heads"].append(c["model"]["layers"][2]["heads"][0]), "model: not the two blocks of [SL26] on a grid of P = m^d tokens"),
    (lambda c: c["model"]["layers"][2].update(kind="hardmax"), "model: not the two blocks of [SL26] on a grid of P = m^d tokens"),
    (lambda c: [r.append("0") for r in c["model"]["embedding"]["E"]], "model: embedding.E has the wrong shape"),
    (lambda c: c["model"]["layers"][2].update(skip="1"), "model: not the two blocks of [SL26] on a grid of P = m^d tokens"),
    (lambda c: c["model"]["layers"][3]["b2"].__setitem__(0, "1e-57"), "model: FFN 2 does not pass the readout row linearly"),
    (lambda c: c["model"]["layers"][1]["W1"][8].__setitem__(0, "1e-57"), "model: a ReLU of FFN 1 reads an entry that depends on x or on the values"),
    (lambda c: c["model"]["layers"][2]["heads"][0]["W_Q"][0].__setitem__(0, "1e-57"), "model: layer 2's query, keys or values do not have the construction's form"),
    (lambda c: c["model"]["layers"][0]["heads"][0]["W_Q"][0].__setitem__(0, "1e-57"), "model: layer 1's scores or its constant row depend on x"),
    (lambda c: c["class"].update(alpha="3/2"), "eps, C_H and B must be positive and alpha in (0, 1]"),
    (lambda c: c["class"].update(target="0"), "the instance or the class has unknown or missing fields"),
    (lambda c: c["instance"].update(d=2), "the claim's wording is not the claim checked"),
    (lambda c: c.update(verdict="undecided"), "the verdict is not 'proved' for 'shi_liao' with no undecided box"),
])
def test_class_structure_and_fields_are_checked(edit, words):
    cert = copy.deepcopy(CLASS)
    edit(cert)
    cert["model_sha256"] = hashlib.sha256(json.dumps(cert["model"], sort_keys=True, separators=(",", ":")).encode()
                                          ).hexdigest()
    with pytest.raises(read.Rejected, match="^" + re.escape(words) + "$"):
        _check(cert)


@pytest.mark.slow
@pytest.mark.parametrize("argv", [[], ["--alpha", "1/2", "--eps", "1/2"], ["--d", "2", "--eps", "1/2"]])
def test_accepts_the_class_certificates_the_prover_writes(argv, tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "tests"))
    from cli_helpers import run_cli

    path = tmp_path / "class.json"
    code, _, _ = run_cli(capsys, "certify", "--holder-class", *argv, "--quiet", "--out", str(path))
    assert code == 0
    ok, reason = symbounds_kernel.check_file(str(path))
    assert ok, reason


# ------------------------------------------------------------------------------------------
# the command and the bounded read


def _run(*args):
    p = subprocess.run([sys.executable, "-m", "symbounds_kernel", *args], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    return p.returncode, p.stdout, p.stderr


def test_command_exit_codes(tmp_path):
    code, out, _ = _run(str(SMALL_PATH))
    assert code == 0 and out.startswith("accepted: ")
    code, out, _ = _run(str(DATA / "kernel_corpus" / "box_dropped.json"))
    assert code == 1 and out.startswith("rejected: ") and len(out.strip().splitlines()) == 1
    for bad in (tmp_path / "missing.json", tmp_path, "/dev/zero"):
        code, out, err = _run(str(bad))
        assert code == 2 and "unreadable" in err and "Traceback" not in err
    assert _run()[0] == 2


def test_main_in_process(tmp_path, capsys):
    from symbounds_kernel.__main__ import main

    assert main([str(SMALL_PATH)]) == 0
    assert main([str(DATA / "kernel_corpus" / "max_bound_lowered.json")]) == 1
    assert main([str(tmp_path)]) == 2
    assert main([]) == 2
    out, err = capsys.readouterr()
    assert "accepted" in out and "rejected" in out and "unreadable" in err and "usage" in err


def test_bounded_read(tmp_path, monkeypatch):
    path = tmp_path / "c.json"
    path.write_text('{"a": "1"}')
    assert read.read_json(str(path)) == {"a": "1"}
    monkeypatch.setattr(read, "LIMIT", 10)
    assert read.read_json(str(path)) == {"a": "1"}  # exactly the limit
    path.write_text('{"a": "12"}')
    with pytest.raises(read.Unreadable, match="larger than 10 bytes"):
        read.read_json(str(path))
    for text, words in [('{"a": "1", "a": "2"}', r"\(a duplicate key\)$"), ("[1.5]", "1.5"), ("[NaN]", "NaN"),
                        ("[Infinity]", "Infinity"), ("\xff", "JSON"), ("{", "JSON")]:
        path.write_bytes(text.encode("latin-1"))
        monkeypatch.setattr(read, "LIMIT", 100)
        with pytest.raises(read.Unreadable, match=words):
            read.read_json(str(path))
    with pytest.raises(read.Unreadable, match="not a regular file"):
        read.read_json("/dev/zero")


@pytest.mark.parametrize("text, exact, value", [
    ("3", True, Fraction(3)), ("-7/8", True, Fraction(-7, 8)), ("0.125", False, Fraction(1, 8)),
    ("4.8e-10", False, Fraction(48, 10**11)), ("-2E3", False, Fraction(-2000)), ("6/4", False, Fraction(3, 2)),
])
def test_numbers(text, exact, value):
    assert read.number(text, "n", exact) == value


@pytest.mark.parametrize("text, exact", [
    ("0.5", True), ("1e3", True), ("nan", False), ("inf", False), ("1/0", False), (" 1", False), ("1.", False),
    ("1e99999", False), (3, False), (None, True), ("0x10", False), ("1/-2", True), ("+1", False),
])
def test_bad_numbers(text, exact):
    with pytest.raises(read.Rejected):
        read.number(text, "n", exact)


# ------------------------------------------------------------------------------------------
# the cover of the cube, against a brute-force grid


def _grid_covered(boxes, d, k=8):
    """Every cell of the 1/k grid inside some box (boxes on that grid)."""
    import itertools

    return all(any(all(b[0][i] <= Fraction(c[i], k) and Fraction(c[i] + 1, k) <= b[1][i] for i in range(d))
                   for b in boxes) for c in itertools.product(range(k), repeat=d))


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 3).flatmap(lambda d: st.tuples(st.just(d), st.lists(
    st.lists(st.tuples(st.integers(0, 7), st.integers(1, 8)), min_size=d, max_size=d), min_size=1, max_size=14))))
def test_cover_matches_a_grid(case):
    d, raw = case
    boxes = [([Fraction(min(a, b - 1), 8) if a < b else Fraction(b - 1, 8) for a, b in bx],
              [Fraction(b, 8) for a, b in bx]) for bx in raw]
    whole = ([Fraction(0)] * d, [Fraction(1)] * d)
    assert verify.covers(boxes, d) == _grid_covered(boxes, d)
    assert verify.covers(boxes + [whole], d)


def test_cover_of_bisected_cube_and_a_gap_of_one_point_width():
    boxes = [([Fraction(0), Fraction(0)], [Fraction(1, 2), Fraction(1)]),
             ([Fraction(1, 2), Fraction(0)], [Fraction(1), Fraction(1, 3)]),
             ([Fraction(1, 2), Fraction(1, 3)], [Fraction(1), Fraction(1)])]
    assert verify.covers(boxes, 2)
    boxes[2] = ([Fraction(1, 2), Fraction(1, 3) + Fraction(1, 2**60)], [Fraction(1), Fraction(1)])
    assert not verify.covers(boxes, 2)
    assert not verify.covers([], 1)


# ------------------------------------------------------------------------------------------
# enclosures against the mpmath reference


class _prec:
    def __enter__(self):
        self.old, ctx.prec = ctx.prec, verify.PREC

    def __exit__(self, *exc):
        ctx.prec = self.old


def _contains(ball, value: Fraction) -> bool:
    return verify._upper(ball) >= value and -verify._upper(-ball) <= value


def _box(draw_lo, width):
    lo = Fraction(draw_lo, 1024)
    return lo, min(Fraction(1), lo + Fraction(1, width))


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 1023), st.sampled_from([16, 64, 256, 4096]), st.lists(st.integers(0, 8), min_size=3, max_size=3))
def test_network_enclosure_contains_the_reference_and_is_narrow(lo, width, ts):
    """[SL26]'s small network: the kernel's enclosure over a box holds the 300-bit values inside."""
    lo, hi = _box(lo, width)
    net = Network(SMALL["model"], 1)
    with _prec():
        T = net.enclose([lo], [hi])
    vals = [as_fraction(reference(SMALL["model"], [lo + (hi - lo) * t / 8])[0]) for t in sorted(set(ts)) + [0, 8]]
    assert all(_contains(T, v) for v in vals)
    if width >= 256:  # narrow boxes: first order, so the enclosure is near the sampled range
        assert verify._upper(T) - (-verify._upper(-T)) <= 4 * (max(vals) - min(vals)) + Fraction(1, 10**4)


MODEL = json.loads((DATA / "residual_model.json").read_text())


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 1023), st.integers(0, 1023), st.sampled_from([8, 64, 1024]))
def test_model_with_x_dependent_scores_is_enclosed(a, b, width):
    (lo1, hi1), (lo2, hi2) = _box(a, width), _box(b, width)
    net = Network(MODEL, 2)
    with _prec():
        T = net.enclose([lo1, lo2], [hi1, hi2])
    for s, t in [(0, 0), (1, 1), (0, 1), (1, 0), (Fraction(1, 2), Fraction(1, 3))]:
        v = as_fraction(reference(MODEL, [lo1 + (hi1 - lo1) * s, lo2 + (hi2 - lo2) * t])[0])
        assert _contains(T, v)
    assert verify._upper(T) + verify._upper(-T) < Fraction(40, width)


HARDMAX = {"format": "symbounds-transformer/1", "input": "vector", "precision_bits": 64,
           "embedding": {"base": [["0", "1/2"], ["1", "1"]], "E": [["1"], ["0"]], "column": 0},
           "layers": [{"type": "attention", "kind": "hardmax", "skip": "0", "heads": [
               {"W_Q": [["0", "1"]], "W_K": [["1", "0"]], "W_V": [["1", "0"]], "W_O": [["1"], ["0"]]}]}],
           "readout": {"row": 0, "column": 0}}


def test_hardmax_with_a_decided_winner_and_an_undecided_one():
    """T(x) = max(x, 1/2): the winner is token 0 above 1/2, token 1 below."""
    net = Network(HARDMAX, 1)
    with _prec():
        up = net.enclose([Fraction(3, 5)], [Fraction(7, 10)])
        down = net.enclose([Fraction(1, 10)], [Fraction(2, 5)])
        assert _contains(up, Fraction(3, 5)) and _contains(up, Fraction(7, 10)) and not _contains(up, Fraction(1, 2))
        assert _contains(down, Fraction(1, 2)) and verify._upper(down) < Fraction(51, 100)
        with pytest.raises(ArithmeticError):
            net.enclose([Fraction(2, 5)], [Fraction(3, 5)])


def test_the_affine_stage_is_used_only_for_constant_scores():
    assert Network(SMALL["model"], 1).start == 1  # [SL26]: the first layer's scores read positions only
    assert Network(MODEL, 2).start == 0
    assert Network(HARDMAX, 1).start == 0


def test_relu_pairs_are_rewritten_exactly():
    base, E, col, layers, _ = parse_model(SMALL["model"], 1)
    ffn = layers[1]
    assert len(ffn[3]) == 6  # 10 units: 4 pairs merged (the indicator's two units differ in b1)
    # the rewritten layer gives the original one's value at random inputs (exact)
    import random

    rnd = random.Random(1)
    L = SMALL["model"]["layers"][1]
    W1, W2 = [[Fraction(v) for v in r] for r in L["W1"]], [[Fraction(v) for v in r] for r in L["W2"]]
    b1, b2 = [Fraction(v) for v in L["b1"]], [Fraction(v) for v in L["b2"]]
    with _prec():
        for _ in range(20):
            z = [Fraction(rnd.randint(-99, 99), 37) for _ in range(5)]
            want = [sum(W2[r][k] * max(Fraction(0), sum(w * v for w, v in zip(W1[k], z)) + b1[k])
                        for k in range(10)) + b2[r] for r in range(5)]
            got = [t.c for t in _ffn(ffn, [taylor.const(arb(v.numerator) / v.denominator, 1) for v in z], [arb(0)], 1, set(range(5)))]
            assert all(_contains(g, w) for g, w in zip(got, want))


# ------------------------------------------------------------------------------------------
# Taylor models and the target, against mpmath and symbounds' parser


def _tm(c, g, r=0):
    return taylor.TM(arb(c), [arb(g)], arb(r))


@settings(max_examples=80, deadline=None)
@given(st.integers(-300, 300), st.integers(-300, 300), st.integers(1, 300), st.integers(-20, 20),
       st.sampled_from(["exp", "recip", "relu", "mul", "add"]))
def test_taylor_operations_contain_the_function(c, g, h, t, op):
    c, g, h = c / 100, g / 100, h / 1000  # floats: exact balls and exact mpf values
    delta = Fraction(h) * t / 20
    with _prec(), mpmath.workprec(300):
        a = _tm(c, g)
        hb = [arb(h)]
        x = mpmath.mpf(c) + mpmath.mpf(g) * mpmath.mpf(delta.numerator) / delta.denominator
        b = _tm(0.5, -0.25, 0.0)
        y = mpmath.mpf(0.5) - mpmath.mpf(0.25) * mpmath.mpf(delta.numerator) / delta.denominator
        if op == "recip" and abs(c) <= abs(g) * h * (1 + 1e-9):
            with pytest.raises(ArithmeticError):
                taylor.recip(a, hb)
            return
        if op == "recip" and abs(c) <= abs(g) * h * (1 + 1e-6):
            return  # too near the pole to call either way in float test arithmetic
        f = {"exp": lambda: (taylor.exp(a, hb), mpmath.exp(x)), "recip": lambda: (taylor.recip(a, hb), 1 / x),
             "relu": lambda: (taylor.relu(a, hb), max(x, 0)), "mul": lambda: (taylor.mul(a, b, hb), x * y),
             "add": lambda: (taylor.add(a, b), x + y)}[op]
        model, want = f()
        d = arb(delta.numerator) / delta.denominator
        value = model.c + model.g[0] * d
        assert _contains(value + arb(0).union(model.r) + (-model.r).union(arb(0)), as_fraction(mpmath.mpf(want)))
        assert _contains(taylor.enclosure(model, hb), as_fraction(mpmath.mpf(want)))


def test_taylor_remainders_are_second_order():
    with _prec():
        for h in (Fraction(1, 10), Fraction(1, 100)):
            hb = [arb(h.numerator) / h.denominator]
            a = _tm(0.3, 1.0)
            assert float(taylor.exp(a, hb).r.abs_upper()) <= 0.8 * float(h) ** 2
            assert float(taylor.recip(_tm(1.0, 1.0), hb).r.abs_upper()) <= 1.5 * float(h) ** 2
            assert float(taylor.mul(a, a, hb).r.abs_upper()) <= 1.01 * float(h) ** 2
            assert float(taylor.relu(_tm(0.0, 1.0), hb).r.abs_upper()) <= 0.51 * float(h)
            assert float(taylor.relu(_tm(0.0, 1.0), hb).g[0].mid()) == pytest.approx(0.5)
            assert taylor.relu(_tm(-0.5, 1.0), hb).c.is_zero() and taylor.relu(_tm(0.5, 1.0), hb).r.is_zero()


TARGETS = ["sin(x1)/4", "sin(2*x1)", "sin(x1+x2)/2", "-0.46 + 2.76*x1 + 0.42*x2 - 0.44*x1*x2", "-x1^2 + 2^-1",
           "x1**3 - 1.5e-1*x2", "exp(-x1)*cos(pi*x2)", "sqrt(x1 + 1) + log(2 + x2)", "abs(x1 - x2)",
           "max(x1, 0.3, x2) - min(x1, x2)", "(x1 + 1)^(1/2) / (1 + x2^2)", "+x1 - -x2"]


@pytest.mark.parametrize("text", TARGETS)
def test_target_parser_agrees_with_symbounds(text):
    import sympy

    from symbounds.core.expr import parse_target, variables

    expr = parse_target(text, 2)
    tree = parse(text, 2)
    with _prec():
        for x in [(Fraction(1, 3), Fraction(2, 7)), (Fraction(9, 10), Fraction(1, 20))]:
            ball = evaluate(tree, [arb(v.numerator) / v.denominator for v in x])
            want = sympy.N(expr.subs(dict(zip(variables(2), [sympy.Rational(v) for v in x]))), 60)
            assert _contains(ball, Fraction(str(want)).limit_denominator(10**50))
            assert float(ball.rad()) < 1e-30


@pytest.mark.parametrize("text", ["x3", "x0", "sin(x1", "sin()", "min(x1)", "sin(x1, x2)", "x1 x2", "1/", "tan(x1)",
                                  "__import__('os')", "x1; x2", "(" * 200 + "x1" + ")" * 200, "a" * 1001, "1e5000"])
def test_target_parser_refuses(text):
    with pytest.raises(read.Rejected):
        parse(text, 2)


def test_target_outside_its_domain_is_nan():
    with _prec():
        assert not evaluate(parse("sqrt(x1 - 1)", 1), [arb(0).union(arb(1, 0))]).is_finite()
        assert not evaluate(parse("log(x1)", 1), [arb(0).union(arb(1))]).is_finite()
        assert not evaluate(parse("x1^(1/2)", 1), [arb(-1)]).is_finite()
        assert evaluate(parse("x1^(-2)", 1), [arb(2)]) == arb(1) / 4


# ------------------------------------------------------------------------------------------
# symbounds check runs both


def test_symbounds_check_reports_both(capsys, monkeypatch):
    sys.path.insert(0, str(ROOT / "tests"))
    from cli_helpers import run_cli

    code, out, err = run_cli(capsys, "check", str(SMALL_PATH), "--quiet")
    assert code == 0 and "certificate valid" in out and "independent kernel: accepted" in out
    def reject(cert, progress=None, **_):
        raise read.Rejected("no")

    monkeypatch.setattr(symbounds_kernel, "check", reject)
    code, out, err = run_cli(capsys, "check", str(SMALL_PATH), "--quiet")
    assert code == 1 and "certificate valid" in out and "independent kernel: rejected: no" in out
    assert err.strip() == "symbounds: certificate rejected by the independent kernel: no"
    code, out, err = run_cli(capsys, "check", str(DATA / "kernel_corpus" / "box_dropped.json"), "--quiet")
    assert code == 1 and "independent kernel: rejected: no" in out and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------------
# found by mutation testing (docs/mutation-testing.md, "The checker kernel")

TIED = {"format": "symbounds-transformer/1", "input": "vector", "precision_bits": 64,
        "embedding": {"base": [["0", "1/2"], ["1", "1"], ["0", "1"]], "E": [["1"], ["0"], ["0"]], "column": 0},
        "layers": [{"type": "attention", "kind": "hardmax", "skip": "0", "heads": [
            {"W_Q": [["0", "1", "0"]], "W_K": [["1", "0", "0"]], "W_V": [["0", "0", "1"]],
             "W_O": [["1"], ["0"], ["0"]]}]}],
        "readout": {"row": 0, "column": 0}}


def test_hardmax_ranges_that_touch_are_not_a_decided_winner():
    """T(x) = 0 for x > 1/2 (token 0 wins), 1/2 at x = 1/2 (a tie: the average of 0 and 1): over
    [1/2, 3/4] the scores' ranges [1/2, 3/4] and {1/2} touch, so no winner is decided."""
    net = Network(TIED, 1)
    with _prec():
        with pytest.raises(ArithmeticError, match="^a hardmax row whose winner is not decided over the box$"):
            net.enclose([Fraction(1, 2)], [Fraction(3, 4)])
        assert _contains(net.enclose([Fraction(5, 8)], [Fraction(3, 4)]), Fraction(0))
    const = {**TIED, "embedding": {**TIED["embedding"], "base": [["1/2", "1/2"], ["1", "1"], ["0", "1"]],
                                   "E": [["0"], ["0"], ["0"]]}}
    with _prec(), pytest.raises(ArithmeticError, match="a hardmax row whose winner is not decided"):
        Network(const, 1)  # constant scores, an exact tie


def test_an_arithmetic_failure_inside_the_check_is_a_rejection(tmp_path):
    cert = copy.deepcopy(SMALL)
    const = {**TIED, "embedding": {**TIED["embedding"], "base": [["1/2", "1/2"], ["1", "1"], ["0", "1"]],
                                   "E": [["0"], ["0"], ["0"]]}}
    cert["model"] = const
    cert["model_sha256"] = __import__("hashlib").sha256(
        json.dumps(const, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cert))
    ok, reason = symbounds_kernel.check_file(str(path))
    assert not ok and reason.startswith("ArithmeticError: a hardmax row")


def test_check_file_reports_progress(tmp_path):
    seen = []
    ok, _ = symbounds_kernel.check_file(str(SMALL_PATH), lambda done, total: seen.append((done, total)))
    assert ok and seen[0] == (1, 64) and seen[-1] == (64, 64) and len(seen) == 64


def test_main_reads_its_arguments(monkeypatch, capsys):
    from symbounds_kernel.__main__ import main

    monkeypatch.setattr(sys, "argv", ["symbounds_kernel", str(SMALL_PATH)])
    assert main() == 0
    assert capsys.readouterr().out.startswith("accepted: 64 boxes cover [0,1]^1")
    monkeypatch.setattr(sys, "argv", ["symbounds_kernel"])
    assert main() == 2
    assert capsys.readouterr().err == "usage: python -m symbounds_kernel [--workers N (1..256)] CERT.json\n"
    assert main([str(DATA / "kernel_corpus" / "box_dropped.json")]) == 1
    assert capsys.readouterr().out == "rejected: the boxes do not cover [0,1]^1\n"
    assert main([str(DATA / "kernel_corpus" / "json_float_bound.json")]) == 2
    assert capsys.readouterr().err.startswith("symbounds_kernel: unreadable: ")


def test_a_json_float_is_named_in_the_message(tmp_path):
    path = tmp_path / "c.json"
    path.write_text("[1.234567890123456789012345]")
    with pytest.raises(read.Unreadable, match=r"the JSON number 1\.234567890123456789 is not a string"):
        read.read_json(str(path))


@pytest.mark.parametrize("error, reason", [
    (ValueError(), "ValueError: "), (ValueError("x" * 150 + "\nsecond line"), "ValueError: " + "x" * 100),
    (TypeError("one\ntwo"), "TypeError: one"), (RecursionError("deep"), "RecursionError: deep"),
])
def test_an_unexpected_error_is_a_one_line_rejection(monkeypatch, error, reason):
    def fail(cert, progress=None, **_):
        raise error

    monkeypatch.setattr(symbounds_kernel, "check", fail)
    assert symbounds_kernel.check_file(str(SMALL_PATH)) == (False, reason)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    """Opening a FIFO for reading blocks until a writer comes, unless it is opened non-blocking."""
    import os
    import threading

    fifo = tmp_path / "cert.json"
    os.mkfifo(fifo)
    result = []
    t = threading.Thread(target=lambda: result.append(pytest.raises(read.Unreadable, read.read_json, str(fifo))),
                         daemon=True)
    t.start()
    t.join(10)
    blocked = t.is_alive()
    if blocked:  # release the reader
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert not blocked and "not a regular file" in str(result[0].value)


def test_the_read_is_bounded_by_the_limit_plus_one_byte(tmp_path, monkeypatch):
    """A file far above the limit is read no further than LIMIT + 1 bytes (no size is trusted)."""
    path = tmp_path / "big.json"
    with open(path, "wb") as f:
        f.truncate(1 << 24)  # 16 MiB of zeros, sparse
    asked = []
    real = read.os.fdopen

    def fdopen(*args, **kw):
        f = real(*args, **kw)
        inner = f.read
        f.read = lambda n=-1: asked.append(n) or inner(n)
        return f

    monkeypatch.setattr(read.os, "fdopen", fdopen)
    monkeypatch.setattr(read, "LIMIT", 1000)
    with pytest.raises(read.Unreadable, match="larger than 1000 bytes"):
        read.read_json(str(path))
    assert asked == [1001]
    with pytest.raises(read.Unreadable, match=re.escape(f"{tmp_path / 'missing.json'}: No such file or directory")):
        read.read_json(str(tmp_path / "missing.json"))


def test_read_errors_name_the_file_and_are_cut_at_80_characters(tmp_path, monkeypatch):
    path = tmp_path / "c.json"
    path.write_bytes(b"[" + b" " * 200000 + b"\xc3(")  # a decoding error at position 200001
    with pytest.raises(read.Unreadable) as info:
        read.read_json(str(path))
    message = "'utf-8' codec can't decode byte 0xc3 in position 200001: invalid continuation byte"
    assert str(info.value) == f"{path}: not JSON of a certificate ({message[:80]})"

    def broken(fd):
        raise OSError(5, "Input/output error")

    with monkeypatch.context() as m:  # os.fstat itself: restored before pytest needs it again
        m.setattr(read.os, "fstat", broken)
        try:
            read.read_json(str(path))
            raised = None
        except read.Unreadable as e:
            raised = str(e)
    assert raised == f"{path}: Input/output error"


class _FakeNet:
    """Encloses T by 0 on boxes that ``ok`` accepts and by [+/- 100] elsewhere; records each box."""

    def __init__(self, ok):
        self.ok, self.seen = ok, []

    def enclose(self, lo, hi):
        self.seen.append((list(lo), list(hi)))
        return arb(0) if self.ok(lo, hi) else arb(0).union(arb(100))


def test_bisection_halves_the_widest_side_and_counts_its_depth():
    F = Fraction
    small = lambda lo, hi: all(b - a <= F(1, 4) for a, b in zip(lo, hi))
    zero = ("num", F(0))
    with _prec():
        net = _FakeNet(small)
        assert verify._proves(net, zero, [F(0), F(0)], [F(1), F(1, 2)], F(1), 1) is False
        assert net.seen == [([0, 0], [1, F(1, 2)]), ([0, 0], [F(1, 2), F(1, 2)])]
        net = _FakeNet(small)
        assert verify._proves(net, zero, [F(0), F(0)], [F(1), F(1, 2)], F(1), 2) is False
        net = _FakeNet(small)
        assert verify._proves(net, zero, [F(0), F(0)], [F(1), F(1, 2)], F(1), 3) is True
        assert net.seen[:4] == [([0, 0], [1, F(1, 2)]), ([0, 0], [F(1, 2), F(1, 2)]),
                                ([0, 0], [F(1, 4), F(1, 2)]), ([0, 0], [F(1, 4), F(1, 4)])]
        assert ([F(3, 4), F(1, 4)], [1, F(1, 2)]) in net.seen and len(net.seen) == 15
        # the left half passes at once, the right one needs two more levels
        net = _FakeNet(lambda lo, hi: small(lo, hi) or (hi[0] <= F(1, 2) and max(b - a for a, b in zip(lo, hi)) <= F(1, 2)))
        assert verify._proves(net, zero, [F(0), F(0)], [F(1), F(1, 2)], F(1), 1) is False
        assert net.seen[-1] == ([F(1, 2), 0], [1, F(1, 2)])


def test_no_boxes_is_named_exactly():
    cert = copy.deepcopy(SMALL)
    cert["boxes"] = []
    with pytest.raises(read.Rejected, match=r"^no boxes$"):
        _check(cert)


def test_a_bound_equal_to_eps_is_accepted():
    cert = copy.deepcopy(SMALL)
    cert["boxes"][0]["bound"] = cert["max_bound"] = cert["eps"]
    assert _check(cert).startswith("64 boxes")


def test_integer_powers_take_the_integer_path_and_others_the_real_one():
    """``t^n`` for an integer ``n`` (also ``-n``) with ``|n| <= 1000`` is a product, defined for a
    negative base; any other exponent is the real power, NaN (nothing proved) unless the base is
    positive."""
    half = [arb(1) / 2]
    assert evaluate(parse("(x1 - 1)^2", 1), half) == arb(1) / 4
    assert evaluate(parse("(x1 - 1)^(-2)", 1), half) == 4
    assert evaluate(parse("(x1 - 1)^(-3)", 1), half) == -8
    assert evaluate(parse("(x1 - 1)**3", 1), half) == -arb(1) / 8
    assert not evaluate(parse("(x1 - 1)^1002", 1), half).is_finite()
    assert not evaluate(parse("(x1 - 1)^(-1002)", 1), half).is_finite()
    assert not evaluate(parse("(x1 - 1)^2.5", 1), half).is_finite()
    assert evaluate(parse("(x1 - 1)^2.0", 1), half) == arb(1) / 4  # the number 2
    root = evaluate(parse("x1^0.5", 1), [arb(4)])
    assert root.contains(2) and root.rad() < 1e-30


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.update(format="x" * 50), f"unknown format {'x' * 40!r}"),
    (lambda c: c.update(format=None), "unknown format 'None'"),
    (lambda c: [c.update({k: 0}) for k in ("zz", "a", "b", "c")], "unknown or missing fields: ['a', 'b', 'c']"),
    (lambda c: c.pop("seconds"), "unknown or missing fields: ['seconds']"),
    (lambda c: c.update(counterexample=[]), "the verdict is not 'proved' with no undecided box and no counterexample"),
    (lambda c: c.update(claim=c["claim"].replace("<=", "<")), "the claim's wording is not the claim checked"),
    (lambda c: c.update(eps="0.5"), "eps: '0.5' is not a rational string"),
    (lambda c: c.update(eps="0"), "eps is not positive"),
    (lambda c: c.update(eps="-1/2"), "eps is not positive"),
    (lambda c: c.update(construction="model"), "instance of a model certificate is not {'inputs': d}"),
    (lambda c: c["instance"].update(eps="0.5"), "instance.eps: '0.5' is not a rational string"),
    (lambda c: c["instance"].update(paper="x"), "the instance's paper, d, eps or target is not the claim's"),
    (lambda c: c.update(construction="y" * 50), f"unknown construction {'y' * 40!r}"),
])
def test_field_messages_are_exact(edit, message):
    cert = copy.deepcopy(SMALL)
    edit(cert)
    with pytest.raises(read.Rejected, match="^" + re.escape(message) + "$"):
        _check(cert)
    with pytest.raises(read.Rejected, match=r"^unknown format 'None'$"):
        verify.check([SMALL])  # not an object


def _zero_model_certificate(d):
    """A certificate of the model T = 0 (one feed-forward layer, input weights 0) for g = 0 in d inputs."""
    model = {"format": "symbounds-transformer/1", "input": "vector", "precision_bits": 64,
             "embedding": {"base": [["0"]], "E": [["0"] * d], "column": 0},
             "layers": [{"type": "ffn", "skip": "1", "W1": [["1"]], "b1": ["0"], "W2": [["0"]], "b2": ["0"]}],
             "readout": {"row": 0, "column": 0}}
    cert = {k: v for k, v in copy.deepcopy(SMALL).items()}
    cert.update(construction="model", instance={"inputs": d}, d=d, target="0", model=model, max_bound="0",
                claim=f"sup over [0,1]^{d} of |T(x) - g(x)| <= eps",
                boxes=[{"lo": ["0"] * d, "hi": ["1"] * d, "bound": "0"}],
                model_sha256=hashlib.sha256(json.dumps(model, sort_keys=True, separators=(",", ":")).encode()).hexdigest())
    return cert


def test_the_largest_dimension_read_is_8():
    assert _check(_zero_model_certificate(8)) == "1 boxes cover [0,1]^8; sup |T - g| <= 0 <= eps = 1/2"
    with pytest.raises(read.Rejected, match=r"^'d' is not in 1\.\.8$"):
        _check(_zero_model_certificate(9))
    with pytest.raises(read.Rejected, match=r"^'d' is not in 1\.\.8$"):
        _check(_zero_model_certificate(0) | {"d": 0})


class _FakeClassNet(_FakeNet):
    """Bounds E by 1 on boxes that ``ok`` accepts and by 3 elsewhere; records each box."""

    def upper(self, lo, hi):
        self.seen.append((list(lo), list(hi)))
        return arb(1) if self.ok(lo, hi) else arb(3)


def test_class_bisection_halves_the_widest_side_and_counts_its_depth():
    from symbounds_kernel.holder import _proves

    F = Fraction
    small = lambda lo, hi: all(b - a <= F(1, 4) for a, b in zip(lo, hi))
    net = _FakeClassNet(lambda lo, hi: True)
    assert _proves(net, [F(0)], [F(1)], F(1), 0) is True and len(net.seen) == 1  # a bound equal to E's: <=
    assert _proves(_FakeClassNet(lambda lo, hi: True), [F(0)], [F(1)], F(1) - F(1, 10**30), 3) is False
    net = _FakeClassNet(small)
    assert _proves(net, [F(0), F(0)], [F(1), F(1, 2)], F(1), 1) is False
    assert net.seen == [([0, 0], [1, F(1, 2)]), ([0, 0], [F(1, 2), F(1, 2)])]
    net = _FakeClassNet(small)
    assert _proves(net, [F(0), F(0)], [F(1), F(1, 2)], F(1), 2) is False
    net = _FakeClassNet(small)
    assert _proves(net, [F(0), F(0)], [F(1), F(1, 2)], F(1), 3) is True
    assert net.seen[:4] == [([0, 0], [1, F(1, 2)]), ([0, 0], [F(1, 2), F(1, 2)]),
                            ([0, 0], [F(1, 4), F(1, 2)]), ([0, 0], [F(1, 4), F(1, 4)])]
    assert ([F(3, 4), F(1, 4)], [1, F(1, 2)]) in net.seen and len(net.seen) == 15


def _class_exact(edit):
    cert = copy.deepcopy(CLASS)
    edit(cert)
    return cert


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.update(extra=1, zz=2, aa=3, bb=4), "unknown or missing fields: ['aa', 'bb', 'extra']"),
    (lambda c: c.pop("worst"), "unknown or missing fields: ['worst']"),
    (lambda c: c.update(undecided_boxes=[CLASS["boxes"][0]]), "the verdict is not 'proved' for 'shi_liao' with no undecided box"),
    (lambda c: c.update(construction="model"), "the verdict is not 'proved' for 'shi_liao' with no undecided box"),
    (lambda c: c["instance"].update(target="0"), "the instance or the class has unknown or missing fields"),
    (lambda c: c["instance"].update(d="1"), "instance: 'd' is missing or not int"),
    (lambda c: c["instance"].update(d=9), "'d' is not in 1..8"),
    (lambda c: c["instance"].update(d=8), "the claim's wording is not the claim checked"),
    (lambda c: c["instance"].update(eps="x"), "instance.eps: 'x' is not a number string"),
    (lambda c: c["class"].update(alpha="x"), "class.alpha: 'x' is not a number string"),
    (lambda c: c["class"].update(bound="x"), "class.bound: 'x' is not a number string"),
    (lambda c: c["instance"].update(eps="0"), "eps, C_H and B must be positive and alpha in (0, 1]"),
    (lambda c: c["class"].update(alpha="0"), "eps, C_H and B must be positive and alpha in (0, 1]"),
    (lambda c: c["class"].update(holder="0"), "eps, C_H and B must be positive and alpha in (0, 1]"),
    (lambda c: c["class"].update(bound="0"), "eps, C_H and B must be positive and alpha in (0, 1]"),
    (lambda c: c.update(model_sha256="0" * 64), "the model does not match model_sha256"),
    (lambda c: c.update(max_bound="x"), "max_bound: 'x' is not a rational string"),
    (lambda c: c.update(max_bound="1/3"), "max_bound is not the largest box bound"),
])
def test_class_field_messages_are_exact(edit, message):
    with pytest.raises(read.Rejected, match="^" + re.escape(message) + "$"):
        _check(_class_exact(edit))


def test_class_max_bound_must_be_a_rational_string():
    import decimal

    top = Fraction(CLASS["max_bound"])  # a dyadic rational: its decimal is exact
    with decimal.localcontext(prec=200):
        text = str(decimal.Decimal(top.numerator) / decimal.Decimal(top.denominator))
    assert Fraction(text) == top
    with pytest.raises(read.Rejected, match="^" + re.escape(f"max_bound: {text[:30]!r} is not a rational string") + "$"):
        _check(_class_exact(lambda c: c.update(max_bound=text)))


def test_class_check_reports_progress():
    seen = []
    verify.check(copy.deepcopy(CLASS), lambda done, total: seen.append((done, total)))
    n = len(CLASS["boxes"])
    assert seen == [(i, n) for i in range(1, n + 1)]


def test_class_box_bound_with_more_tokens_than_the_heavy_set():
    """At the default instance (P = 40 > 8 heavy tokens) the heavy set is the box centre's: on
    narrow boxes the kernel's bound stays within 64 w of E at a point (symbounds' evaluation)."""
    from symbounds.papers.shi_liao.class_bound import class_network, point_values
    from symbounds.papers.shi_liao.class_certificate import class_model
    from symbounds.papers.shi_liao.constants import Instance

    from symbounds_kernel.holder import ClassNet

    mj, model, K = class_model(Instance())
    theirs = class_network(model, 1, K.centres, 1, 2, 2, 256)
    with _prec():
        mine = ClassNet(mj, 1, Fraction(1), Fraction(2), Fraction(2))
        assert len(mine.b) == 40
        w = Fraction(1, 2**20)
        for x in (Fraction(1, 7), Fraction(1, 2), Fraction(5, 6), Fraction(99, 100)):
            up = Fraction(mine.upper([x], [x + w]).str(40, radius=False))
            E = point_values(theirs, [x])[0]
            assert Fraction(E.upper().str(40, radius=False)) <= up <= Fraction(E.lower().str(40, radius=False)) + 64 * w


@pytest.mark.parametrize("prec", [20, 26])
def test_class_box_bound_is_rounded_outward_at_low_precision(prec):
    """Every rounding in the box bound is directed (upper ends of the brackets and distances,
    lower ends in the caps' denominators): at 20 bits the bound of a box of width 2^-40 still
    contains E (symbounds, 256 bits) at the worst point, where the caps are nearly exact and the
    bound is tight, and at points near it whose distances to the centres are not dyadic."""
    from symbounds.papers.shi_liao.class_bound import point_values

    mine, theirs = _class_nets_stored()
    x0 = Fraction(CLASS["worst"]["x"][0])
    for x in (x0, x0 - Fraction(1, 3 * 2**20), x0 + Fraction(1, 7 * 2**18)):
        E = Fraction(point_values(theirs, [x])[0].upper().str(40, radius=False))
        old = ctx.prec
        ctx.prec = prec
        try:
            up = Fraction(mine.upper([x], [x + Fraction(1, 2**40)]).str(40, radius=False))
        finally:
            ctx.prec = old
        assert E <= up <= E + Fraction(1, 10**3)


def test_class_bound_on_the_whole_cube_is_the_largest_bracket():
    """On [0,1] every cap is about 1, so the greedy pivot is the largest item and the bound is at
    most max_k A_k = C_H * 7/8 + B l_k (the centres are 1/8, 3/8, 5/8, 7/8), while a pivot taken
    further down would add every cap's excess."""
    mine, _ = _class_nets_stored()
    with _prec():
        up = Fraction(mine.upper([Fraction(0)], [Fraction(1)]).str(40, radius=False))
    top = Fraction(7, 8) + max(Fraction(v.str(40, radius=False)) for v in mine.B_ell)
    assert Fraction(7, 8) <= up <= top + Fraction(1, 10**30)


def test_class_centres_of_a_square_grid():
    """d = 2: P = m^2 tokens, centres in product order, the first coordinate slowest (symbounds'
    own construction at eps = 1/2, C_H = 2, B = 2)."""
    from symbounds.papers.shi_liao.class_certificate import class_model
    from symbounds.papers.shi_liao.constants import Instance

    from symbounds_kernel.holder import ClassNet

    mj, _, K = class_model(Instance(d=2, eps=Fraction(1, 2)))
    with _prec():
        mine = ClassNet(mj, 2, Fraction(1), Fraction(2), Fraction(2))
    assert [tuple(c) for c in mine.centres] == [tuple(Fraction(str(v)) for v in c) for c in K.centres]
    assert len(mine.centres) == len(mj["embedding"]["base"][0]) > 4


def test_class_shape_message_is_exact_and_p_heads_are_enough():
    cert = _class_exact(lambda c: c["model"]["layers"].pop())
    cert["model_sha256"] = hashlib.sha256(json.dumps(cert["model"], sort_keys=True, separators=(",", ":")).encode()
                                          ).hexdigest()
    with pytest.raises(read.Rejected, match=r"^model: not the two blocks of \[SL26\] on a grid of P = m\^d tokens$"):
        _check(cert)
    # exactly P heads in layer 1 (the indicator and position heads dropped) pass the shape check
    cert = _class_exact(lambda c: [c["model"]["layers"][0]["heads"].pop() for _ in range(2)])
    cert["model_sha256"] = hashlib.sha256(json.dumps(cert["model"], sort_keys=True, separators=(",", ":")).encode()
                                          ).hexdigest()
    with pytest.raises(read.Rejected) as e:
        _check(cert)
    assert "not the two blocks" not in str(e.value)


@pytest.mark.parametrize("edit", [
    lambda m: m["layers"][2].update(tau="2"),  # the layer-2 scores halved
    lambda m: m["layers"][0].update(tau="2"),  # layer 1's scores halved (its weights change)
    lambda m: m["layers"][1]["b2"].__setitem__(2, "1/1000"),  # the indicator row (the query) shifted
])
def test_class_scores_of_edited_models_agree_with_symbounds(edit):
    cert = copy.deepcopy(CLASS)
    edit(cert["model"])
    mine, theirs = _class_nets(cert)
    base, _ = _class_nets_stored()
    assert any(abs(float((x - y).mid())) > 1e-6 for x, y in zip(mine.b, base.b))  # the edit matters
    for k in range(len(theirs.b)):
        assert abs(float((mine.b[k] - theirs.b[k]).mid())) < 1e-30
        assert abs(float((mine.a[0][k] - theirs.A[k][0]).mid())) < 1e-30


def test_class_bracket_is_capped_at_2B():
    """With B = 1/4 the bracket min(C_H |x - c|, 2B) is capped at 1/2 < 7/8 on the whole cube."""
    from symbounds_kernel.holder import ClassNet

    with _prec():
        net = ClassNet(CLASS["model"], 1, Fraction(1), Fraction(1), Fraction(1, 4))
        up = Fraction(net.upper([Fraction(0)], [Fraction(1)]).str(40, radius=False))
    assert Fraction(1, 2) <= up <= Fraction(1, 2) + max(Fraction(v.str(40, radius=False)) for v in net.B_ell) + Fraction(1, 10**30)


def test_class_bracket_with_alpha_below_1():
    """alpha = 1/2: on the whole cube the bound is the largest bracket C_H (7/8)^(1/2) (+ B l_k)."""
    from symbounds_kernel.holder import ClassNet

    with _prec():
        net = ClassNet(CLASS["model"], 1, Fraction(1, 2), Fraction(1), Fraction(1))
        up = net.upper([Fraction(0)], [Fraction(1)])
    # the bound is C_H (7/8)^(1/2) + B l_k to within Arb's rounding: compare at 60 digits, not in
    # doubles (whose rounding of l_k decided the comparison either way)
    with mpmath.workdps(60):
        root = mpmath.sqrt(mpmath.mpf(7) / 8)
        ell = max(mpmath.mpf(v.upper().str(50, radius=False)) for v in net.B_ell)
        value = mpmath.mpf(up.str(50, radius=False))
        assert root <= value <= root + ell + mpmath.mpf(10) ** -30


def test_shown_is_six_digits_rounded_up():
    assert str(verify.shown(Fraction(1, 3))) == "0.333334"
    assert str(verify.shown(Fraction(2, 3))) == "0.666667"
    assert str(verify.shown(Fraction(5, 4))) == "1.25"


def test_taylor_rests_are_carried_and_reciprocal_ranges_checked():
    """Products carry both rests (``(1 +- 1/2)^2`` reaches 9/4); ``1/t`` on a negative range bounds
    its second derivative at the end nearest 0; a range touching 0 is refused by name."""
    h = [arb(1)]
    half = taylor.TM(arb(1), [arb(0)], arb(1) / 2)
    assert taylor.enclosure(taylor.mul(half, half, h), h).contains(arb(9) / 4)
    neg = taylor.TM(arb(-2), [arb(1)], arb(0))  # t in [-3, -1]
    inv = taylor.recip(neg, h)
    assert inv.c + inv.g[0] * 1 - inv.r <= -1 and taylor.enclosure(inv, h).contains(-1)
    for t in (taylor.TM(arb(1), [arb(1)], arb(0)), taylor.TM(arb(-1), [arb(1)], arb(0))):  # [0, 2], [-2, 0]
        with pytest.raises(ArithmeticError, match=r"^a reciprocal of a range containing 0$"):
            taylor.recip(t, h)


# ------------------------------------------------------------------------------------------
# worker processes (verify._first_failure)

@pytest.mark.parametrize("name", ["bound_lowered_below_the_truth", "bound_lowered_to_zero", "weight_changed_by_one_ulp"])
def test_worker_processes_reject_what_one_process_rejects(name):
    path = str(DATA / "kernel_corpus" / f"{name}.json")
    one = symbounds_kernel.check_file(path)
    two = symbounds_kernel.check_file(path, workers=2)
    assert not one[0] and not two[0]
    if name.startswith("bound"):  # found by a box's own check, in whichever process
        assert "the kernel cannot bound |T - g| by its recorded bound" in one[1] and two[1].startswith("box ")
        assert "the kernel cannot bound |T - g| by its recorded bound" in two[1]
    else:
        assert one[1] == two[1]


def test_symbounds_check_takes_workers(capsys):
    sys.path.insert(0, str(ROOT / "tests"))
    from cli_helpers import run_cli

    code, out, err = run_cli(capsys, "check", str(SMALL_PATH), "--quiet", "--workers", "2")
    assert code == 0 and "independent kernel: accepted" in out
    code, out, err = run_cli(capsys, "check", str(SMALL_PATH), "--quiet", "--workers", "0")
    assert code == 2 and err.strip() == "symbounds: error: --workers 0: use between 1 and 256"


def test_worker_processes_accept_and_report_progress_by_chunks():
    seen = []
    ok, reason = symbounds_kernel.check_file(str(SMALL_PATH), lambda done, total: seen.append((done, total)),
                                             workers=2)
    assert ok and reason.startswith("64 boxes cover [0,1]^1")
    assert sorted(seen) == [(32, 64), (64, 64)]


def test_main_takes_workers(capsys):
    from symbounds_kernel.__main__ import main

    assert main(["--workers", "2", str(SMALL_PATH)]) == 0
    assert capsys.readouterr().out.startswith("accepted: 64 boxes")
    for bad in (["--workers", "0", str(SMALL_PATH)], ["--workers", "x", str(SMALL_PATH)], ["--workers", str(SMALL_PATH)]):
        assert main(bad) == 2
        assert capsys.readouterr().err.startswith("usage: python -m symbounds_kernel [--workers N")
