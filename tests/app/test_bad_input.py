"""Edge cases of the command line: bad input is exit 2 with exactly one line on stderr; verdicts
say what they rest on; certificates whose fields disagree with what they prove are rejected."""

import json
import time
from fractions import Fraction as F

import pytest

from symbounds.app.cli import main
from symbounds.core.claims import decide
from symbounds.core.contexts import BallContext

CERT_FLAGS = ["--alpha", "1/2", "--holder", "1/2", "--bound", "1/4", "--eps", "1/2", "--target", "sin(x1)/4"]


def _bad(capsys, argv, *words):
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, (argv, code, err)
    assert len(err) == 1 and err[0].startswith("symbounds: error:"), err
    for w in words:
        assert w in err[0], (w, err[0])
    return err[0]


# ---------------------------------------------------------------- singular points of targets

def test_holder_half_target_with_a_singular_point_is_decided_quickly(capsys):
    # |sqrt|a| - sqrt|b|| <= sqrt|a - b|: C_H = 1, alpha = 1/2 holds, and |g| <= sqrt(2/3) < 1
    t0 = time.perf_counter()
    code = main(["pou", "--target", "sqrt(abs(x1-1/3))", "--holder", "1", "--alpha", "1/2", "--bound", "1",
                 "--eps", "1/2", "--at", "1/3", "--json", "--quiet"])
    out = json.loads(capsys.readouterr().out)
    assert time.perf_counter() - t0 < 60
    assert code == 0 and out["verdict"] == "proved"
    assert out["prec"] == 128  # decided at the starting precision: no escalation
    assert out["assumptions"] == "grid evidence"
    point = out["points"][0]
    assert point["g"].startswith("[+/-")  # g(1/3) = 0 enclosed by a ball [0, r], not NaN


# ---------------------------------------------------------------- targets as written

@pytest.mark.parametrize("target, sub", [("x1/x1", "1/x1"), ("exp(log(x1))", "log(x1)"),
                                         ("log(x1) - log(x1)", "log(x1)"), ("x1^2/x1", "1/x1")])
def test_undefined_target_point_is_bad_input(capsys, target, sub):
    _bad(capsys, ["pou", "--target", target, "--at", "0", "--quiet"], "x1 = 0", sub)


def test_undefined_target_in_certify_is_bad_input(capsys):
    _bad(capsys, ["certify", "--target", "x1/x1", "--quiet"], "x1 = 0")


# ---------------------------------------------------------------- numbers and flags

@pytest.mark.parametrize("argv, word", [
    (["--eps", "1e-1000"], "eps"),
    (["--holder", "1e1000"], "holder"),
    (["--bound", "1e-200"], "bound"),
    (["--M", "1e1000"], "M"),
    (["--alpha", "1e-1000"], "alpha"),
    (["--alpha", "999999/1000000"], "alpha"),
    (["--eps", "1e-100"], "limit"),
    (["--eps", "\u0661"], "--eps"),  # ARABIC-INDIC DIGIT ONE
    (["--d", "\u0661"], "--d"),
    (["--prec", "\u0661\u0662\u0668"], "--prec"),
    (["--target", "x\u0661"], "--target"),
    (["--target", "\u0661"], "--target"),
])
def test_bad_numbers(capsys, argv, word):
    t0 = time.perf_counter()
    _bad(capsys, ["pou", *argv, "--quiet"], word)
    assert time.perf_counter() - t0 < 10


@pytest.mark.parametrize("argv", [
    ["interp", "--random", "2,3,\u0662,1"],
    ["sweep", "--d", "\u0661", "--out", "table.csv"],
    ["certify", "--workers", "\u0661"],
    ["latex", "interp", "--random", "2,3,\u0662,1", "--out", "x.tex"],
])
def test_integers_in_other_scripts_are_refused(capsys, tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    _bad(capsys, [*argv, "--quiet"] if argv[0] != "latex" else argv, "\u0662" if "--random" in argv else "\u0661")


def test_target_starting_with_minus(capsys):
    code = main(["pou", "--target", "-x1^2", "--eps", "0.2", "--json", "--quiet"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["instance"]["target"] == "-x1^2"
    # the same target through --target=...: the same instance
    assert main(["pou", "--target=-x1^2", "--eps", "0.2", "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["constants"] == out["constants"]


def test_certify_refuses_a_precision_that_decides_nothing(capsys):
    t0 = time.perf_counter()
    _bad(capsys, ["certify", "--prec", "24", "--quiet"], "--prec", "53")
    assert time.perf_counter() - t0 < 5


def test_proved_verdict_says_the_assumptions_are_grid_evidence(capsys):
    assert main(["pou", "--quiet", "--points", "2"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("verdict: proved") and "assumptions A1, A2 on g: grid evidence only" in last


# ---------------------------------------------------------------- certificates

@pytest.fixture(scope="module")
def cert_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cert") / "cert.json"
    assert main(["certify", *CERT_FLAGS, "--quiet", "--out", str(path)]) == 0
    return path


def test_printed_bounds_are_rounded_up(cert_file, capsys):
    cert = json.loads(cert_file.read_text())
    assert main(["certify", *CERT_FLAGS, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == "verdict: proved (assumptions A1, A2 on g: grid evidence only)"
    shown = next(line for line in out.splitlines() if "largest certified error bound" in line).split(":")[1]
    assert F(shown.strip()) >= F(cert["max_bound"])
    assert main(["check", str(cert_file), "--quiet"]) == 0
    out = capsys.readouterr().out
    shown = out.split("sup |T - g| <= ")[1].split(" ")[0]
    assert F(shown) >= F(cert["max_bound"])


def _write(tmp_path, data, name="edited.json"):
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(p)


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", json.dumps({"format": "other/1"}), "{}",
                                     json.dumps({"format": "symbounds-transformer/1", "layers": []})])
def test_check_not_a_certificate_is_bad_input(tmp_path, capsys, content):
    _bad(capsys, ["check", _write(tmp_path, content)])


def _set(path, value):
    def edit(c):
        obj = c
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value
    return edit


@pytest.mark.parametrize("edit, reason", [
    (_set(("instance", "target"), "sin(x1)/5"), "instance.target"),
    (_set(("undecided_boxes",), [{"lo": ["0"], "hi": ["1"]}]), "undecided_boxes"),
    (_set(("boxes", 0, "lo"), "0"), "lists"),
    (_set(("boxes",), "[]"), "'boxes' must be a list"),
    (_set(("assumptions",), "none"), "'assumptions' must be a list"),
    (_set(("extra",), "1"), "unknown field"),
    (_set(("instance", "extra"), "1"), "unknown field"),
    (_set(("counterexample",), {"x": ["0"]}), "counterexample"),
    (_set(("claim",), "sup over [0,1]^1 of |T(x) - g(x)| <= 1"), "claim"),
    (_set(("model_prec",), 10**6), "model_prec"),
    (_set(("model_prec",), True), "model_prec"),
    (_set(("prec",), 24), "prec"),
])
def test_check_rejects_disagreeing_fields(cert_file, tmp_path, capsys, edit, reason):
    data = json.loads(cert_file.read_text())
    edit(data)
    t0 = time.perf_counter()
    code = main(["check", _write(tmp_path, data), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and reason in err[0], (code, err)
    assert time.perf_counter() - t0 < 10  # rejected before anything is rebuilt


@pytest.mark.parametrize("field, value", [("eps", "1e-1000"), ("holder", "1e1000"), ("alpha", "1e-1000")])
def test_check_huge_numbers_are_rejected_not_crashes(cert_file, tmp_path, capsys, field, value):
    data = json.loads(cert_file.read_text())
    data["instance"][field] = value
    if field == "eps":
        data["eps"] = value
    code = main(["check", _write(tmp_path, data), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "rejected" in err[0], err


# ---------------------------------------------------------------- the whole-manifold check

def test_manifold_check_out_of_boxes_is_undecided():
    from symbounds.papers import shi_liao as sl
    from symbounds.papers.shi_liao.manifolds import manifold as mf
    from symbounds.papers.shi_liao.manifolds.certify import certify_on_manifold

    K = mf.manifold_instance("circle").constants()
    claim, info = certify_on_manifold(K, sl.build(K), max_boxes=1)
    assert info["status"] == "undecided" and info["counterexample_angles_over_pi"] is None
    assert decide(BallContext(128), claim).verdict == "undecided"


def test_sweep_upper_end_is_rounded_up():
    from symbounds.core.exact import arb_to_fraction
    from symbounds.papers import shi_liao as sl
    from symbounds.papers.shi_liao.run import PouOptions, run
    from symbounds.papers.shi_liao.sweep import run_instance

    spec = {"d": 1, "alpha": "1", "holder": "1", "bound": "1", "eps": "1/2", "target": "sin(x1)/2", "points": 2}
    row = run_instance(spec)
    res = run(sl.Instance(d=1, alpha="1", C_H="1", B="1", eps="1/2", target="sin(x1)/2"), PouOptions(points=2))
    upper = arb_to_fraction(res.max_error_value.upper())
    shown = F(row["measured_max_error"])
    assert upper <= shown <= upper * (1 + F(1, 10**5))  # rounded up, at 6 digits
