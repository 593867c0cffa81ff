"""Whole-domain certificates: proved where they should be, never for a broken network or target,
and `symbounds check` rejects every kind of edit."""

import csv
import json
import math
from pathlib import Path
from fractions import Fraction as F

import pytest

from symbounds.app.cli import main
from symbounds.core.boxes import Box, CertifyOptions, boxes_cover_cube, certify_model
from symbounds.core.modelfile import model_to_json
from symbounds.papers import check_certificate
from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao.certificate import certify_instance

SMALL = dict(alpha="1/2", C_H="1/2", B="1/4", eps="1/2", target="sin(x1)/4")  # P = 8
SMALL_FLAGS = ["--alpha", "1/2", "--holder", "1/2", "--bound", "1/4", "--eps", "1/2", "--target", "sin(x1)/4"]


@pytest.fixture(scope="module")
def small_cert():
    cert, res = certify_instance(sl.Instance(**SMALL), CertifyOptions())
    return cert, res


def test_d1_certificate_at_the_default_instance_is_proved():
    cert, res = certify_instance(sl.Instance(), CertifyOptions())
    assert res.verdict == "proved" and not res.undecided and res.counterexample is None
    assert 0 < res.max_bound <= F(1, 10)
    # the boxes tile [0,1]: lengths add up to exactly 1, and each bound is at most eps
    assert sum(b.hi[0] - b.lo[0] for b, _ in res.boxes) == 1
    assert all(bd <= F(1, 10) for _, bd in res.boxes)
    # the certified bound is a bound: the error at every box centre (in balls) is below it
    from symbounds.core.boxes import point_error

    model = sl.build(sl.constants(sl.Instance()))
    g = sl.Instance().target_expr()
    for b, bd in res.boxes[::25]:
        err = point_error(model, g, 1, b.centre, 128)
        assert err.upper() <= float(bd) + 1e-30


def test_small_certificate_checks(small_cert):
    cert, res = small_cert
    assert res.verdict == "proved"
    info = check_certificate(cert)
    assert info["boxes"] == len(cert["boxes"]) and info["d"] == 1


def test_tampered_model_is_not_certified():
    inst = sl.Instance(**SMALL)
    K = sl.constants(inst)
    model = sl.build(K)
    mj = model_to_json(model, 192)
    # shift one centre's value g(c_h) by 1: the network is off by ~1 near that centre
    mj["layers"][0]["heads"][3]["W_V"][1][K.d] = str(F(mj["layers"][0]["heads"][3]["W_V"][1][K.d]) + 1)
    res = certify_model(mj, inst.target_text, 1, inst.eps, CertifyOptions())
    assert res.verdict == "refuted" and res.counterexample is not None


def test_violated_hoelder_constant_is_never_proved():
    # g = sin(8 x)/2 has Lipschitz constant 4 > C_H = 2: the grid check refutes the assumption
    cert, res = certify_instance(sl.Instance(target="sin(8*x1)/2"), CertifyOptions(max_boxes=3000))
    assert res.verdict in ("refuted", "undecided")
    assert {a["id"]: a["verdict"] for a in cert["assumptions"]}["A2"] == "refuted"


def test_workers_give_the_same_certificate(small_cert):
    cert, _ = small_cert
    cert2, res2 = certify_instance(sl.Instance(**SMALL), CertifyOptions(workers=2))
    assert res2.verdict == "proved"
    assert cert2["boxes"] == cert["boxes"] and cert2["max_bound"] == cert["max_bound"]


def test_dask_local_cluster_on_loopback(small_cert):
    import distributed  # the "dask" extra is part of the dev install: a missing one fails here

    cert, _ = small_cert
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        cert2, res2 = certify_instance(sl.Instance(**SMALL), CertifyOptions(scheduler=cluster.scheduler_address))
        # the batches ran on this scheduler (not in this process, nor on a cluster of their own):
        # its task prefixes keep the name of the batch function after the tasks are forgotten
        assert any(k.endswith("dask_batch") for k in cluster.scheduler.task_prefixes), list(cluster.scheduler.task_prefixes)
    assert res2.verdict == "proved"
    assert cert2["boxes"] == cert["boxes"]


def test_boxes_cover_cube():
    B = lambda lo, hi: Box(tuple(map(F, lo)), tuple(map(F, hi)))
    halves = [B((0, 0), (F(1, 2), 1)), B((F(1, 2), 0), (1, F(1, 3))), B((F(1, 2), F(1, 3)), (1, 1))]
    assert boxes_cover_cube(halves, 2)
    holed = [B((0, 0), (F(1, 2), 1)), B((F(1, 2), 0), (1, F(1, 3))), B((F(1, 2), F(1, 2)), (1, 1))]
    assert not boxes_cover_cube(holed, 2)
    overlapping = [B((0, 0), (F(2, 3), 1)), B((F(1, 3), 0), (1, 1))]
    assert boxes_cover_cube(overlapping, 2)
    assert not boxes_cover_cube([B((0,), (F(1, 2),)), B((F(3, 5),), (1,))], 1)
    assert boxes_cover_cube([B((0,), (F(3, 5),)), B((F(1, 2),), (1,))], 1)


# ------------------------------------------------------------------------------------------
# the command line: certify, then check an untouched and several edited certificates


@pytest.fixture(scope="module")
def cert_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cert") / "cert.json"
    assert main(["certify", *SMALL_FLAGS, "--quiet", "--out", str(path)]) == 0
    return path


def _edit(cert_file, tmp_path, edit):
    data = json.loads(cert_file.read_text())
    edit(data)
    out = tmp_path / "edited.json"
    out.write_text(json.dumps(data))
    return out


def _set_model_weight(c):
    row = c["model"]["layers"][0]["heads"][2]["W_V"][1]
    row[1] = str(F(row[1]) + F(1, 10**6))


@pytest.mark.parametrize("edit, reason", [
    (lambda c: c["boxes"][3].__setitem__("bound", "1/1000000"), "recomputed bound"),
    (lambda c: c["boxes"].pop(5), "do not cover"),
    (lambda c: c["boxes"][7]["hi"].__setitem__(0, c["boxes"][7]["lo"][0]), "not a non-empty box"),
    (lambda c: c.__setitem__("eps", "1/100"), "disagrees"),
    (lambda c: c.__setitem__("max_bound", "1/100"), "max_bound"),
    (_set_model_weight, "digest"),
    (lambda c: (c.__setitem__("target", "sin(x1)/4 + 1/1000"), c["instance"].__setitem__("target", c["target"])),
     "not the construction"),
    (lambda c: c.__setitem__("verdict", "undecided"), "verdict"),
])
def test_check_rejects_edited_certificates(cert_file, tmp_path, capsys, edit, reason):
    assert main(["check", str(cert_file)]) == 0
    capsys.readouterr()
    bad = _edit(cert_file, tmp_path, edit)
    code = main(["check", str(bad)])
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert len(err.splitlines()) == 1 and reason in err, err


# ------------------------------------------------------------------------------------------
# a certificate must describe the construction it names: its instance and its assumptions


@pytest.fixture(scope="module")
def model_cert_file(tmp_path_factory):
    """A ``construction: "model"`` certificate of T(x) = x against g = x/2 (|T - g| = x/2 <= 3/5)."""
    folder = tmp_path_factory.mktemp("model_cert")
    (folder / "identity.json").write_text(json.dumps(_identity_model_json()))
    path = folder / "cert.json"
    assert main(["certify", "--model", str(folder / "identity.json"), "--target", "x1/2", "--eps", "3/5", "--quiet",
                 "--out", str(path)]) == 0
    return path


def _sl26_instance_and_assumptions(c):
    sl26 = json.loads(OLD_CERTIFICATES[1].read_text())
    assert sl26["construction"] == "shi_liao" and sl26["assumptions"]
    return sl26


@pytest.mark.parametrize("edit, reason", [
    (lambda c: c.__setitem__("construction", "model"), "does not fit the construction 'model'"),
    (lambda c: c.update(construction="model", instance={"inputs": 1}), "not those of the construction 'model'"),
    (lambda c: c["assumptions"].pop(), "not those of the construction 'shi_liao'"),
    (lambda c: c["assumptions"].reverse(), "not those of the construction 'shi_liao'"),
    (lambda c: c["assumptions"].append(dict(c["assumptions"][0])), "not those of the construction"),
    (lambda c: c["assumptions"][0].__setitem__("statement", "|g| <= 10 B on a 3^1 grid"), "statement"),
    (lambda c: c["assumptions"][1].__setitem__("verdict", "proved"), "recorded verdict 'proved'"),
    (lambda c: c["instance"].__setitem__("d", True), "disagrees with the claim"),
    (lambda c: c["instance"].__setitem__("inputs", 1), "unknown field 'inputs'"),
    (lambda c: c["instance"].pop("Mg"), "instance: missing 'Mg'"),
])
def test_check_rejects_a_construction_certificate_describing_something_else(cert_file, tmp_path, capsys, edit, reason):
    """An [SL26] certificate whose construction, instance or assumptions were edited."""
    assert main(["check", str(cert_file)]) == 0
    capsys.readouterr()
    code = main(["check", str(_edit(cert_file, tmp_path, edit))])
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert len(err.splitlines()) == 1 and reason in err, err


@pytest.mark.parametrize("edit, reason", [
    (lambda c: c.__setitem__("instance", _sl26_instance_and_assumptions(c)["instance"]),
     "does not fit the construction 'model'"),
    (lambda c: c.__setitem__("assumptions", _sl26_instance_and_assumptions(c)["assumptions"]),
     "(A1, A2) are not those of the construction 'model' (none)"),
    (lambda c: c.update(instance=_sl26_instance_and_assumptions(c)["instance"],
                        assumptions=_sl26_instance_and_assumptions(c)["assumptions"]), "does not fit"),
    (lambda c: c.__setitem__("instance", {"inputs": 2}), "instance.inputs is not d"),
    (lambda c: c.__setitem__("instance", {"inputs": True}), "does not fit"),
    (lambda c: c.__setitem__("instance", {"inputs": "1"}), "does not fit"),
    (lambda c: c.__setitem__("instance", {"inputs": 1, "paper": "shi_liao"}), "does not fit"),
    (lambda c: c.__setitem__("instance", {}), "does not fit"),
    (lambda c: c.__setitem__("construction", "shi_liao"), "instance: unknown field 'inputs'"),
])
def test_check_rejects_a_model_certificate_describing_something_else(model_cert_file, tmp_path, capsys, edit,
                                                                     reason):
    """A user model's certificate (construction "model") carrying another construction's instance
    or assumptions, or an instance outside its schema ``{"inputs": d}``."""
    assert json.loads(model_cert_file.read_text())["instance"] == {"inputs": 1}
    assert main(["check", str(model_cert_file)]) == 0
    capsys.readouterr()
    code = main(["check", str(_edit(model_cert_file, tmp_path, edit))])
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert len(err.splitlines()) == 1 and reason in err, err


def test_check_at_another_precision_compares_assumptions_without_verdicts(cert_file):
    """Checked at another precision the grid checks are re-run there: the ids and statements must
    still be the construction's, the verdicts are not compared (they may depend on the precision)."""
    cert = json.loads(cert_file.read_text())
    assert check_certificate(cert, prec=256)["boxes"] == len(cert["boxes"])
    cert["assumptions"][0]["verdict"] = "proved"
    assert check_certificate(cert, prec=256)["boxes"] == len(cert["boxes"])
    from symbounds.core.certificate import CertificateError

    with pytest.raises(CertificateError, match="recorded verdict"):
        check_certificate(cert)
    cert["assumptions"][0]["statement"] += " "
    with pytest.raises(CertificateError, match="statement"):
        check_certificate(cert, prec=256)


def test_check_bad_file_is_bad_input(tmp_path, capsys):
    p = tmp_path / "x.json"
    p.write_text("{not json")
    assert main(["check", str(p)]) == 2
    assert main(["check", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("symbounds: error:") for line in err)


def test_certify_cli_refuted_exit_code(capsys):
    code = main(["certify", "--target", "sin(8*x1)/2", "--quiet", "--max-boxes", "2000"])
    assert code in (1, 3)
    assert "verdict: proved" not in capsys.readouterr().out


def test_sweep_writes_csv_and_json(tmp_path, capsys):
    out = tmp_path / "t.csv"
    code = main(["sweep", "--eps", "1/2,1/4", "--d", "1", "--holder", "1", "--bound", "1", "--target", "sin(x1)/2",
                 "--points", "1", "--certify", "--out", str(out), "--quiet"])
    assert code == 0
    rows = list(csv.DictReader(out.open()))
    data = json.loads((tmp_path / "t.json").read_text())
    assert [r["eps"] for r in rows] == ["1/2", "1/4"] == [r["eps"] for r in data["rows"]]
    for r in rows:
        eps = F(r["eps"])
        assert int(r["P"]) == math.ceil(1 / (2 * (eps / 4)))  # m = ceil(sqrt(d) / (2 r_g)), r_g = eps/(4 C_H)
        assert r["claims"] == "proved" and r["certificate"] == "proved"
        assert float(r["measured_max_error"]) <= float(r["certified_error"]) <= float(eps)


def test_sweep_workers_run_an_instance_lost_with_its_worker_again(monkeypatch, tmp_path):
    """sweep --workers: the worker running the eps = 1/4 instance is killed (SIGKILL, once); that
    instance runs again and the rows are those of one process, in order."""
    import os
    import signal

    from symbounds.papers.shi_liao import sweep as sw

    args = (["1/2", "1/4", "1/3"], [1], {1: ["sin(x1)/2"]})
    kw = dict(holder="1", bound="1", points=1)
    plain = sw.sweep(*args, **kw)
    flag, parent, real = str(tmp_path / "died"), os.getpid(), sw.run_instance

    def run_instance(spec):
        if os.getpid() != parent and spec["eps"] == "1/4":
            try:
                os.close(os.open(flag, os.O_CREAT | os.O_EXCL))
                os.kill(os.getpid(), signal.SIGKILL)
            except FileExistsError:
                pass
        return real(spec)

    monkeypatch.setattr(sw, "run_instance", run_instance)
    rows = sw.sweep(*args, **kw, workers=2)
    assert os.path.exists(flag)
    strip = lambda rs: [{k: v for k, v in r.items() if k != "seconds"} for r in rs]
    assert strip(rows) == strip(plain) and [r["eps"] for r in rows] == args[0]


# ------------------------------------------------------------------------------------------
# the float64 box pass and the Arb one: certificates made either way check, tampering is caught
# either way, and a bound below the truth is never accepted


@pytest.mark.parametrize("fast", [True, False])
def test_tampered_model_is_refuted_by_both_evaluators(fast):
    inst = sl.Instance(**SMALL)
    K = sl.constants(inst)
    mj = model_to_json(sl.build(K), 192)
    mj["layers"][0]["heads"][3]["W_V"][1][K.d] = str(F(mj["layers"][0]["heads"][3]["W_V"][1][K.d]) + 1)
    res = certify_model(mj, inst.target_text, 1, inst.eps, CertifyOptions(fast=fast))
    assert res.verdict == "refuted" and res.counterexample is not None
    # the counterexample is real: the error at that point, in 300-bit balls, exceeds eps
    from symbounds.core.boxes import point_error
    from symbounds.core.modelfile import model_from_json

    x = [F(v) for v in res.counterexample["x"]]
    err = point_error(model_from_json(mj), inst.target_expr(), 1, x, 300)
    assert err.lower() > float(inst.eps)


def test_certificates_made_either_way_check_either_way(monkeypatch):
    """A float certificate's bounds hold in Arb too unless Arb is looser (then check uses the
    floats); an Arb certificate checks with the float pass first.  Both check from scratch."""
    inst = sl.Instance(**SMALL)
    fast_cert, fast_res = certify_instance(inst, CertifyOptions(fast=True))
    arb_cert, arb_res = certify_instance(inst, CertifyOptions(fast=False))
    assert fast_res.verdict == arb_res.verdict == "proved"
    for cert in (fast_cert, arb_cert):
        assert check_certificate(cert)["boxes"] == len(cert["boxes"])
    # with the float pass switched off in check, the Arb certificate still checks
    import symbounds.core.certificate as certmod

    monkeypatch.setattr(certmod, "float_evaluator", lambda model, prec: None)
    assert check_certificate(arb_cert)["boxes"] == len(arb_cert["boxes"])


def test_check_refuses_a_bound_below_the_truth_with_the_float_pass():
    """Lower one recorded bound to just below the true error at its box's centre: neither the
    floats nor Arb can prove it, so check must refuse."""
    from symbounds.core.boxes import point_error
    from symbounds.core.certificate import CertificateError
    from symbounds.core.modelfile import model_from_json

    inst = sl.Instance(**SMALL)
    cert, _ = certify_instance(inst, CertifyOptions(fast=True))
    model = model_from_json(cert["model"])
    b = cert["boxes"][len(cert["boxes"]) // 2]
    centre = [(F(a) + F(z)) / 2 for a, z in zip(b["lo"], b["hi"])]
    true = point_error(model, inst.target_expr(), 1, centre, 300)
    from symbounds.core.exact import arb_to_fraction

    b["bound"] = str(arb_to_fraction(true.lower()) * F(999, 1000))
    cert["max_bound"] = str(max(F(x["bound"]) for x in cert["boxes"]))
    with pytest.raises(CertificateError, match="recomputed bound"):
        check_certificate(cert)


def test_certify_cli_arb_only_and_bisect_flags(tmp_path, capsys):
    path = tmp_path / "arb.json"
    assert main(["certify", *SMALL_FLAGS, "--quiet", "--arb-only", "--out", str(path)]) == 0
    assert main(["check", str(path), "--quiet"]) == 0
    assert main(["certify", *SMALL_FLAGS, "--quiet", "--bisect", "gradient", "--out", str(path)]) == 0
    assert main(["check", str(path), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["certify", *SMALL_FLAGS, "--quiet", "--bisect", "diagonal"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--bisect" in err[0]


OLD_CERTIFICATES = sorted((Path(__file__).parent.parent / "data" / "certificates").glob("v0.1-*.json"))


@pytest.mark.parametrize("path", OLD_CERTIFICATES, ids=lambda p: p.stem)
def test_certificates_written_by_version_0_1_still_check(path):
    """Certificates written by symbounds 0.1.0 (every box evaluated in Arb, the softmax shifted by
    one score's model) check with today's float-first re-evaluation; one of them records a largest
    bound of 0.49935 against eps = 1/2."""
    from symbounds.core.certificate import load_certificate

    assert len(OLD_CERTIFICATES) == 3
    cert = load_certificate(str(path))
    assert cert["symbounds"] == "0.1.0"
    assert check_certificate(cert)["boxes"] == len(cert["boxes"])
    # and an edit is still caught: the box with the largest bound recorded with a bound below its
    # true error at the centre (300-bit balls)
    from symbounds.core.boxes import point_error
    from symbounds.core.certificate import CertificateError
    from symbounds.core.exact import arb_to_fraction
    from symbounds.core.expr import parse_target
    from symbounds.core.modelfile import model_from_json

    i = max(range(len(cert["boxes"])), key=lambda k: F(cert["boxes"][k]["bound"]))
    box = cert["boxes"][i]
    centre = [(F(a) + F(z)) / 2 for a, z in zip(box["lo"], box["hi"])]
    err = point_error(model_from_json(cert["model"]), parse_target(cert["target"], cert["d"]), cert["d"], centre, 300)
    box["bound"] = str(arb_to_fraction(err.lower()) * F(999, 1000))
    cert["max_bound"] = str(max(F(b["bound"]) for b in cert["boxes"]))

    with pytest.raises(CertificateError, match=f"box {i}: the recomputed bound"):
        check_certificate(cert)


def test_gradient_split_certificate_covers_the_square_and_checks():
    """Boxes halved along the gradient's side (not always the widest) still tile the square, and
    the certificate checks; boxes stay within the aspect bound."""
    from symbounds.core.boxes import MAX_ASPECT

    inst = sl.Instance(d=2, C_H=1, B=1, eps="1/2", target="sin(2*x1)/2")
    # the plain pass from a 2 x 2 grid: its 16 x 16 one is proved without a split since the values
    # are centred, and the tight pass proves the 2 x 2 grid's boxes with few splits, none of them
    # along a narrower side (BENCHMARKS.md, "Fewer boxes")
    cert, res = certify_instance(inst, CertifyOptions(split="gradient", initial=2, tight=False))
    assert res.verdict == "proved"
    assert sum(b.volume() for b, _ in res.boxes) == 1
    widths = [(b.hi[0] - b.lo[0], b.hi[1] - b.lo[1]) for b, _ in res.boxes]
    # halving the widest side of squares never exceeds aspect 2: here some box was halved along
    # its narrower side
    assert any(max(w) > 2 * min(w) for w in widths)
    assert all(max(w) <= 2 * MAX_ASPECT * min(w) for w in widths)
    assert check_certificate(cert)["boxes"] == len(res.boxes)


# ------------------------------------------------------------------------------------------
# a target that varies across each box: it must be enclosed over the whole box


def _identity_model_json():
    """``T(x) = relu(x) = x`` on [0, 1] (one feed-forward layer), as a model file."""
    from symbounds.core.transformer import Embedding, FeedForward, Readout, Transformer

    ffn = FeedForward(W1=((1,),), b1=(0,), W2=((1,),), b2=(0,), skip=0)
    return model_to_json(Transformer((ffn,), Embedding(((0,),), ((1,),)), Readout(0, 0)), 128)


def test_a_target_varying_across_a_box_is_enclosed_over_the_box(tmp_path, capsys):
    """T(x) = x and g(x) = 3x/2: |T - g| = x/2, whose sup over [0, 1] is 1/2 (at x = 1) and over a
    box [lo, hi] is hi/2.  So eps = 0.495 is false and must never be proved (a target enclosed at
    one corner of each box, 3 lo/2, would give 1/2 - (hi - lo)/2 on the last box); with
    eps = 0.505 every recorded bound is at least its box's hi/2."""
    path = tmp_path / "identity.json"
    path.write_text(json.dumps(_identity_model_json()))
    code = main(["certify", "--model", str(path), "--target", "3*x1/2", "--eps", "0.495", "--quiet"])
    out = capsys.readouterr().out
    assert code == 1 and "verdict: refuted" in out, out
    for fast in (True, False):
        res = certify_model(_identity_model_json(), "3*x1/2", 1, F(495, 1000), CertifyOptions(fast=fast))
        assert res.verdict == "refuted", fast
        assert F(res.counterexample["x"][0]) / 2 > F(495, 1000)  # the error there is x/2, by hand
        res = certify_model(_identity_model_json(), "3*x1/2", 1, F(505, 1000), CertifyOptions(fast=fast))
        assert res.verdict == "proved", fast
        assert sum(b.hi[0] - b.lo[0] for b, _ in res.boxes) == 1
        assert all(bound >= b.hi[0] / 2 for b, bound in res.boxes), fast


# ------------------------------------------------------------------------------------------
# worker processes that die: their batches are re-run, or the run stops (exit 3), never hangs


@pytest.fixture
def deadline():
    """Fail (instead of hanging the suite) if the test is not done within 60 s."""
    import signal

    def expire(signum, frame):
        raise TimeoutError("the run did not end within 60 s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _killing_eval(monkeypatch, should_die):
    """Replace the worker's batch function (forked workers inherit the patch) by one that kills
    its own process with SIGKILL when ``should_die(boxes)``; never the test's own process."""
    import os
    import signal

    import symbounds.core.boxes as boxes_mod

    parent, real = os.getpid(), boxes_mod._worker_eval

    def evaluate(boxes):
        if os.getpid() != parent and should_die(boxes):
            os.kill(os.getpid(), signal.SIGKILL)
        return real(boxes)

    monkeypatch.setattr(boxes_mod, "_worker_eval", evaluate)


def test_a_worker_killed_from_outside_loses_no_box(small_cert, monkeypatch, deadline):
    """SIGKILL to one worker process after the first box comes back: the lost batches run
    again on fresh processes and the certificate is the one-process one.  (Each batch is slowed
    by 50 ms in the workers, so batches are still in flight when the worker dies: on an idle
    machine the run could otherwise be over before the pool notices, with no restart to count;
    the process killed is one this run started.)"""
    import multiprocessing
    import os
    import signal
    import time

    import symbounds.core.boxes as boxes_mod

    parent, real = os.getpid(), boxes_mod._worker_eval

    def slow(boxes):
        if os.getpid() != parent:
            time.sleep(0.05)
        return real(boxes)

    monkeypatch.setattr(boxes_mod, "_worker_eval", slow)
    before = {p.pid for p in multiprocessing.active_children()}
    killed = []

    def progress(done, evaluated):
        if not killed:
            pids = [p.pid for p in multiprocessing.active_children() if p.pid not in before]
            assert pids
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    cert, _ = small_cert
    cert2, res2 = certify_instance(sl.Instance(**SMALL), CertifyOptions(workers=2), progress)
    assert killed and res2.verdict == "proved"
    assert res2.extra["worker_restarts"] >= 1
    assert cert2["boxes"] == cert["boxes"] and cert2["max_bound"] == cert["max_bound"]


def test_a_worker_that_dies_once_loses_no_box(small_cert, monkeypatch, tmp_path, deadline):
    """The worker that takes the batch holding the box at 0 dies once (a flag file makes it
    once): one restart, the same certificate as one process makes."""
    import os

    flag = str(tmp_path / "died")

    def once(boxes):
        if boxes[0].lo != (F(0),):
            return False
        try:
            os.close(os.open(flag, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return False
        return True

    _killing_eval(monkeypatch, once)
    cert, _ = small_cert
    cert2, res2 = certify_instance(sl.Instance(**SMALL), CertifyOptions(workers=2))
    assert os.path.exists(flag)
    assert res2.verdict == "proved" and res2.extra["worker_restarts"] == 1
    assert cert2["boxes"] == cert["boxes"] and cert2["max_bound"] == cert["max_bound"]


def test_a_batch_that_always_kills_its_worker_stops_the_run(cert_file, monkeypatch, tmp_path, capsys, deadline):
    """Every try of the batch holding the box at 0 kills its worker: after the restarts the run
    stops with one line and exit 3 (undecided), and the certificate already at --out is kept."""
    from symbounds.core import boxes as boxes_mod

    _killing_eval(monkeypatch, lambda boxes: any(b.lo == (F(0),) for b in boxes))
    out = tmp_path / "cert.json"
    out.write_bytes(cert_file.read_bytes())
    code = main(["certify", *SMALL_FLAGS, "--workers", "2", "--quiet", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 3
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "undecided" in err[0] and "dying" in err[0], err
    assert "verdict: proved" not in captured.out
    assert out.read_bytes() == cert_file.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cert.json"]
    assert boxes_mod.MAX_RESTARTS >= 1


def test_dask_giving_up_on_a_batch_stops_the_run(monkeypatch):
    """When the Dask scheduler gives up on a task whose workers kept dying (KilledWorker), the box
    search stops with WorkersLost (exit 3 on the command line), not an internal error.  (A stub
    client: the scheduler's own re-running is the slow test below.)"""
    import types

    import distributed

    from symbounds.core import boxes as boxes_mod

    class Future:
        def result(self):
            raise distributed.KilledWorker("batch", types.SimpleNamespace(address="tcp://127.0.0.1:1"), 3)

    dm = object.__new__(boxes_mod._DaskMap)
    dm.client = types.SimpleNamespace(submit=lambda *a, **k: Future())
    dm.setup_future = None
    monkeypatch.setattr(distributed, "as_completed", lambda futures: iter(futures))
    with pytest.raises(boxes_mod.WorkersLost) as e:
        list(dm.imap([[Box((F(0),), (F(1),))]]))
    # the one line the command prints (exit 3), word for word: what happened and what was not written
    assert str(e.value) == ("Dask workers kept dying running a batch of boxes (the scheduler gave up re-running it): "
                            "stopped, undecided, no certificate written")


@pytest.mark.slow  # a process LocalCluster takes ~10 s to start on two cores
def test_dask_reruns_the_tasks_of_a_killed_worker(small_cert, deadline):
    """On a Dask cluster (two worker processes under nannies) one worker is killed with SIGKILL
    after the first box comes back: the scheduler re-runs its tasks elsewhere and the
    certificate is the one-process one."""
    import os
    import signal

    import distributed

    cert, _ = small_cert
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, protocol="tcp",
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            pids = sorted(client.run(os.getpid).values())
        killed = []

        def progress(done, evaluated):
            if not killed:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])

        cert2, res2 = certify_instance(sl.Instance(**SMALL), CertifyOptions(scheduler=cluster.scheduler_address),
                                       progress)
    assert killed and res2.verdict == "proved"
    assert cert2["boxes"] == cert["boxes"] and cert2["max_bound"] == cert["max_bound"]
