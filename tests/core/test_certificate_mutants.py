"""The certificate file's helpers, each against a hand-worked case (docs/mutation-testing.md,
"Fifth pass").

What ``check_certificate`` reads before any box (``_check_fields``, ``_check_assumptions``), what
``certify`` writes (``make_certificate``, ``write_certificate``) and the rule that a failed run
never replaces a proved certificate (``holds_proved_certificate``, ``certificate_destination``,
``beside``).  Every expected value below is written out by hand: the field names and types of
the format, the one-line reasons word for word, the file's text, its mode under a umask, the
file a run of each verdict writes to.
"""

import hashlib
import json
import os
import stat
from fractions import Fraction as F
from types import SimpleNamespace

import pytest

from symbounds.core.boxes import Box, CertifyResult
from symbounds.core.certificate import (
    CERT_FORMAT,
    FIELDS,
    CertificateError,
    NotACertificate,
    _check_assumptions,
    _check_fields,
    _req,
    beside,
    certificate_destination,
    holds_proved_certificate,
    load_certificate,
    make_certificate,
    write_certificate,
)

CLAIM_1 = "sup over [0,1]^1 of |T(x) - g(x)| <= eps"


def _fields(**change):
    """A dict with every field of the format, each of its JSON type, as a proved certificate
    holds them (the numbers are not checked here, only the fields)."""
    c = {"format": CERT_FORMAT, "symbounds": "9.9", "claim": CLAIM_1, "construction": "model",
         "instance": {}, "d": 1, "eps": "1/2", "target": "x1", "prec": 128, "model_prec": 128,
         "model_sha256": "0" * 64, "model": {}, "verdict": "proved", "max_bound": "1/4",
         "boxes": [{"lo": ["0"], "hi": ["1"], "bound": "1/4"}], "undecided_boxes": [],
         "counterexample": None, "assumptions": [{"id": "A1"}], "seconds": "0.010", "boxes_evaluated": 1}
    c.update(change)
    return c


def _reason(cert):
    with pytest.raises(CertificateError) as info:
        _check_fields(cert)
    return str(info.value)


# ------------------------------------------------------------------------------------------
# make_certificate


def test_make_certificate_writes_every_field_of_the_format():
    """A result made by hand (two proved boxes, one undecided, 2.5 s): each field as the format
    says, the model's digest the SHA-256 of its canonical JSON text."""
    model = {"layers": [], "b": "1/3"}
    res = CertifyResult(verdict="undecided", boxes=[(Box((F(0),), (F(1, 2),)), F(1, 8)),
                                                    (Box((F(1, 2),), (F(3, 4),)), F(3, 16))],
                        max_bound=F(3, 16), counterexample=None, undecided=[Box((F(3, 4),), (F(1),))],
                        seconds=2.5, evaluated=7)
    grid = SimpleNamespace(as_json=lambda: {"id": "A1", "verdict": "proved"})
    cert = make_certificate(version="0.9", construction="model", instance={"inputs": 1}, d=1, eps=F(1, 5),
                            target="x1/2", prec=96, model_prec=64, model_json=model, res=res, assumptions=[grid])
    sha = hashlib.sha256(b'{"b":"1/3","layers":[]}').hexdigest()
    assert cert == {
        "format": "symbounds-certificate/1", "symbounds": "0.9", "claim": CLAIM_1, "construction": "model",
        "instance": {"inputs": 1}, "d": 1, "eps": "1/5", "target": "x1/2", "prec": 96, "model_prec": 64,
        "model_sha256": sha, "model": model, "verdict": "undecided", "max_bound": "3/16",
        "boxes": [{"lo": ["0"], "hi": ["1/2"], "bound": "1/8"}, {"lo": ["1/2"], "hi": ["3/4"], "bound": "3/16"}],
        "undecided_boxes": [{"lo": ["3/4"], "hi": ["1"]}], "counterexample": None,
        "assumptions": [{"id": "A1", "verdict": "proved"}], "seconds": "2.500", "boxes_evaluated": 7}
    assert set(cert) == set(FIELDS)


def test_make_certificate_of_a_run_without_a_bound_records_null():
    """No proved box: ``max_bound`` is JSON null, not the text "None"; a counterexample is kept."""
    ce = {"x": ["1/2"], "error": "0.7"}
    res = CertifyResult(verdict="refuted", boxes=[], max_bound=None, counterexample=ce, undecided=[],
                        seconds=0.0004, evaluated=1)
    cert = make_certificate(version="0.9", construction="model", instance={}, d=2, eps=F(1, 2), target="x1",
                            prec=128, model_prec=128, model_json={}, res=res, assumptions=[])
    assert cert["max_bound"] is None and cert["boxes"] == [] and cert["counterexample"] == ce
    assert cert["claim"] == "sup over [0,1]^2 of |T(x) - g(x)| <= eps" and cert["seconds"] == "0.000"
    assert cert["model_sha256"] == hashlib.sha256(b"{}").hexdigest()


# ------------------------------------------------------------------------------------------
# _req, load_certificate


def test_a_missing_field_is_named():
    assert _req({"d": 3}, "d") == 3
    for obj, key, what, message in [({}, "d", "certificate", "certificate: missing 'd'"),
                                    ({"lo": []}, "hi", "boxes[2]", "boxes[2]: missing 'hi'"),
                                    (["lo"], "lo", "boxes[0]", "boxes[0]: missing 'lo'")]:
        with pytest.raises(CertificateError) as info:
            _req(obj, key, what)
        assert str(info.value) == message
    with pytest.raises(CertificateError) as info:
        _req({}, "eps")
    assert str(info.value) == "certificate: missing 'eps'"


def _file(tmp_path, text, name="c.json"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_load_certificate_reads_a_certificate_and_refuses_the_rest(tmp_path):
    path = _file(tmp_path, '{"format": "symbounds-certificate/1", "d": 2, "eps": "1/2"}')
    assert load_certificate(path) == {"format": CERT_FORMAT, "d": 2, "eps": "1/2"}
    cases = [
        ('{"format": "symbounds-certificate/0"}', f"{{p}}: not a certificate (no 'format': '{CERT_FORMAT}')"),
        ('["symbounds-certificate/1"]', f"{{p}}: not a certificate (no 'format': '{CERT_FORMAT}')"),
        ('{"format": "symbounds-certificate/1", "eps": 0.5}', "JSON number '0.5': numbers must be strings"),
        ('{"format": "symbounds-certificate/1", "eps": NaN}', "JSON number 'NaN': numbers must be strings"),
        ('{"format": ', "{p}: not valid JSON (Expecting value: line 1 column 12 (char 11))"),
    ]
    for text, message in cases:
        p = _file(tmp_path, text, "bad.json")
        with pytest.raises(NotACertificate) as info:
            load_certificate(p)
        assert str(info.value) == message.format(p=p), text
    missing = str(tmp_path / "none.json")
    with pytest.raises(NotACertificate) as info:
        load_certificate(missing)
    assert str(info.value) == f"{missing}: No such file or directory"


# ------------------------------------------------------------------------------------------
# _check_fields


def test_the_fields_of_a_proved_certificate_pass():
    _check_fields(_fields())
    _check_fields(_fields(model_prec=24, assumptions=[]))
    _check_fields(_fields(model_prec=4096, boxes=[]))


def test_an_unknown_field_is_named_the_first_in_sorted_order_cut_to_40_characters():
    assert _reason(_fields(zz="1", ab="2")) == "unknown field 'ab'"
    assert _reason(_fields(**{"k" * 50: "1"})) == f"unknown field '{'k' * 40}'"


@pytest.mark.parametrize("key, value, want", [
    ("target", 3, "a string"), ("d", "1", "an integer"), ("d", True, "an integer"),
    ("boxes_evaluated", False, "an integer"), ("prec", 128.0, "an integer"), ("model", [], "an object"),
    ("boxes", {}, "a list"), ("assumptions", "A1", "a list"), ("counterexample", {"x": ["0"]}, "null"),
    ("counterexample", "", "null"),
])
def test_a_field_of_another_type_is_named_with_its_type(key, value, want):
    assert _reason(_fields(**{key: value})) == f"'{key}' must be {want}"


def test_a_missing_field_of_the_format_is_named():
    c = _fields()
    del c["seconds"]
    assert _reason(c) == "certificate: missing 'seconds'"


def test_what_contradicts_a_proved_verdict_or_the_claim_is_named():
    assert _reason(_fields(undecided_boxes=[{"lo": ["0"], "hi": ["1"]}])) == \
        "'undecided_boxes' is not empty beside the verdict 'proved'"
    assert _reason(_fields(claim="sup over [0,1]^2 of |T(x) - g(x)| <= eps")) == f"'claim' must read {CLAIM_1!r}"
    assert _reason(_fields(d=3)) == "'claim' must read 'sup over [0,1]^3 of |T(x) - g(x)| <= eps'"


@pytest.mark.parametrize("model_prec", [23, 4097, 0, -128])
def test_model_precision_outside_24_to_4096_is_refused(model_prec):
    assert _reason(_fields(model_prec=model_prec)) == "'model_prec' must be an integer number of bits in 24..4096"


NOT_A_BOX = "boxes[1] must be an object with exactly 'lo', 'hi' and 'bound'"


@pytest.mark.parametrize("box, message", [
    ({"lo": ["0"], "hi": ["1"], "bound": "1/4", "note": "x"}, NOT_A_BOX),
    ({"lo": ["0"], "hi": ["1"]}, NOT_A_BOX),
    (["0", "1", "1/4"], NOT_A_BOX),
    ("lo hi bound", NOT_A_BOX),
    ({"lo": "0", "hi": ["1"], "bound": "1/4"}, "boxes[1]: 'lo' and 'hi' must be lists, 'bound' a string"),
    ({"lo": ["0"], "hi": "1", "bound": "1/4"}, "boxes[1]: 'lo' and 'hi' must be lists, 'bound' a string"),
    ({"lo": ["0"], "hi": ["1"], "bound": 1}, "boxes[1]: 'lo' and 'hi' must be lists, 'bound' a string"),
])
def test_a_box_that_is_not_lo_hi_bound_is_named(box, message):
    good = {"lo": ["0"], "hi": ["1"], "bound": "1/4"}
    assert _reason(_fields(boxes=[good, box, good])) == message


def test_assumptions_that_are_not_objects_are_refused():
    assert _reason(_fields(assumptions=[{"id": "A1"}, "A2"])) == "'assumptions' must be a list of objects"


# ------------------------------------------------------------------------------------------
# _check_assumptions


def _grid(id_, statement="s", verdict="proved"):
    return SimpleNamespace(id=id_, statement=statement, verdict=verdict)


def _recorded(*items, construction="paper"):
    return {"construction": construction,
            "assumptions": [{"id": i, "statement": s, "verdict": v} for i, s, v in items]}


def _assumption_reason(cert, rebuilt, same_prec=True):
    with pytest.raises(CertificateError) as info:
        _check_assumptions(cert, rebuilt, same_prec)
    return str(info.value)


def test_the_recorded_assumptions_of_the_construction_pass():
    _check_assumptions(_recorded(), [], True)
    _check_assumptions(_recorded(("A1", "s1", "proved"), ("A2", "s2", "undecided")),
                       [_grid("A1", "s1"), _grid("A2", "s2", "undecided")], True)
    # re-run at another precision: the verdicts may differ, the ids and statements may not
    _check_assumptions(_recorded(("A1", "s1", "proved")), [_grid("A1", "s1", "undecided")], False)


def test_other_assumption_ids_are_named_with_both_lists():
    long_id, long_name = "A-" + "x" * 30, "c" * 50
    cert = _recorded(("A1", "s", "proved"), (long_id, "s", "proved"), construction=long_name)
    assert _assumption_reason(cert, [_grid("A1"), _grid("A2")]) == (
        f"the recorded assumptions (A1, {long_id[:20]}) are not those of the construction "
        f"'{long_name[:40]}' (A1, A2)")
    assert _assumption_reason(_recorded(construction="shi_liao"), [_grid("A1")]) == (
        "the recorded assumptions (none) are not those of the construction 'shi_liao' (A1)")
    assert _assumption_reason(_recorded(("A1", "s", "proved")), []) == (
        "the recorded assumptions (A1) are not those of the construction 'paper' (none)")


def test_another_statement_or_verdict_is_named():
    assert _assumption_reason(_recorded(("A1", "s1", "proved"), ("A2", "other", "proved")),
                              [_grid("A1", "s1"), _grid("A2", "s2")]) == \
        "assumption A2: the recorded statement is not the construction's"
    assert _assumption_reason(_recorded(("A1", "s1", "proved")), [_grid("A1", "s1", "refuted")]) == \
        "assumption A1: the recorded verdict 'proved' is not the recomputed 'refuted'"
    v = "proved-" + "y" * 30
    assert _assumption_reason(_recorded(("A1", "s1", v)), [_grid("A1", "s1")]) == \
        f"assumption A1: the recorded verdict {v[:20]!r} is not the recomputed 'proved'"
    cert = {"construction": "paper", "assumptions": [{"id": "A1", "statement": "s1"}]}
    assert _assumption_reason(cert, [_grid("A1", "s1")]) == \
        "assumption A1: the recorded verdict 'None' is not the recomputed 'proved'"


# ------------------------------------------------------------------------------------------
# write_certificate: the file's text, its mode, no partial file


def test_write_certificate_writes_indented_json_and_a_newline(tmp_path):
    path = str(tmp_path / "c.json")
    write_certificate(path, {"a": "1", "b": ["x", {"c": None}]})
    with open(path) as f:
        assert f.read() == '{\n "a": "1",\n "b": [\n  "x",\n  {\n   "c": null\n  }\n ]\n}\n'


def test_write_certificate_honours_the_umask_and_keeps_the_earlier_file_on_failure(tmp_path):
    path = str(tmp_path / "c.json")
    old = os.umask(0o027)
    try:
        write_certificate(path, {"verdict": "proved"})
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    with pytest.raises(TypeError):  # a Fraction is not JSON: nothing is written
        write_certificate(path, {"verdict": "refuted", "eps": F(1, 2)})
    with open(path) as f:
        assert json.load(f) == {"verdict": "proved"}
    assert sorted(os.listdir(tmp_path)) == ["c.json"]


# ------------------------------------------------------------------------------------------
# a proved certificate is never replaced by a run that is not proved


@pytest.mark.parametrize("path, verdict, want", [
    ("good.json", "refuted", "good.refuted.json"), ("out/good.json", "undecided", "out/good.undecided.json"),
    ("/tmp/a.b/cert", "refuted", "/tmp/a.b/cert.refuted.json"), ("cert.JSON", "refuted", "cert.JSON.refuted.json"),
    ("x.json.json", "undecided", "x.json.undecided.json"), (".json", "refuted", ".refuted.json"),
])
def test_beside_drops_json_once_and_adds_the_verdict(path, verdict, want):
    assert beside(path, verdict) == want


def _write(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)


def test_only_a_file_saying_proved_holds_a_proved_certificate(tmp_path):
    p = str(tmp_path / "c.json")
    assert holds_proved_certificate(p) is False  # no file
    _write(p, {"format": CERT_FORMAT, "verdict": "proved"})
    assert holds_proved_certificate(p) is True
    for held in ({"format": CERT_FORMAT, "verdict": "refuted"}, {"format": CERT_FORMAT},
                 {"format": "other", "verdict": "proved"}, ["proved"]):
        _write(p, held)
        assert holds_proved_certificate(p) is False, held
    with open(p, "w") as f:
        f.write("not json")
    assert holds_proved_certificate(p) is False
    assert holds_proved_certificate(str(tmp_path)) is False  # a folder


def test_a_run_that_is_not_proved_goes_beside_a_proved_certificate(tmp_path):
    p = str(tmp_path / "c.json")
    for verdict in ("proved", "refuted", "undecided"):  # nothing there: written where asked
        assert certificate_destination(p, verdict) == p
    _write(p, {"format": CERT_FORMAT, "verdict": "refuted"})
    for verdict in ("proved", "refuted", "undecided"):  # a certificate not proved is replaced
        assert certificate_destination(p, verdict) == p
    _write(p, {"format": CERT_FORMAT, "verdict": "proved"})
    assert certificate_destination(p, "proved") == p
    assert certificate_destination(p, "refuted") == str(tmp_path / "c.refuted.json")
    assert certificate_destination(p, "undecided") == str(tmp_path / "c.undecided.json")
    assert certificate_destination(p, "refuted", force=True) == p
    assert certificate_destination(p, "refuted", False) == str(tmp_path / "c.refuted.json")
