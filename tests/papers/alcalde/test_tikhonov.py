"""Regularised training of [AFZ25] (``symbounds tikhonov``): the exact teacher, ``||theta*||^2``,
the penalty conventions of the trainer, the certified enclosures, and the command end to end.

Expected values come from independent computations (integer arithmetic on the floats' ratios,
PyTorch's own float64 evaluation, Adam run on an explicit penalty), never from captured output.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import replace
from fractions import Fraction as F

import pytest
import torch

from symbounds.app.cli import main
from symbounds.core.claims import Verdict
from symbounds.papers.alcalde import tikhonov as tk
from symbounds.papers.alcalde import tikhonov_train as tt


@pytest.fixture(scope="module")
def small():
    return tk.make_data(N=3, n=9, d=4, seed=5)


def test_teacher_interpolates_exactly(small):
    check = tk.check_teacher(small.dataset, small.teacher)
    assert check.verdict is Verdict.PROVED and check.failures == []
    # every token of every sequence maps to the sequence's target: a mean of tokens and a
    # residual ReLU layer; the targets are exact rationals, not floats
    assert all(isinstance(v, F) for Y in small.dataset.targets for v in Y[0])
    assert any(v.denominator % 9 == 0 for Y in small.dataset.targets for v in Y[0])  # the mean's 1/n


def test_tampered_teacher_weight_is_refuted(small):
    t = small.teacher
    W2 = tuple(tuple(v + F(1, 2**60) if (r, c) == (0, 0) else v for c, v in enumerate(row))
               for r, row in enumerate(t.W2))
    check = tk.check_teacher(small.dataset, replace(t, W2=W2))
    # every hidden unit is active (W1, b1 >= 0 and tokens in [0,1)), so row 0 of every output moves
    assert check.verdict is Verdict.REFUTED
    assert len(check.failures) == small.dataset.N * 9


def test_tampered_target_is_refuted(small):
    ds = small.dataset
    y = ds.targets[1][0]
    bad = replace(ds, targets=(ds.targets[0], ((y[0], y[1] + F(1, 2**70)) + y[2:],)) + ds.targets[2:])
    check = tk.check_teacher(bad, small.teacher)
    assert check.verdict is Verdict.REFUTED and {j for j, _ in check.failures} == {1}


def test_theta_star_norm_independently():
    data = tk.make_data(seed=0)  # the authors' sizes: d = 16, width 4
    t = data.teacher
    # integers: every weight is k / 2^53 (random.random()), so sum k^2 / 2^106 + ||V||^2 + eta^2
    total = 0
    for arr in (t.W1, t.b1, t.W2):
        for v in (x for row in arr for x in (row if isinstance(row, tuple) else (row,))):
            num, den = float(v).as_integer_ratio()
            assert 2**53 % den == 0
            total += (num * (2**53 // den)) ** 2
    expected = F(total, 2**106) + 16 + 1
    assert data.theta_star_sq == expected
    assert 55 < float(expected) < 75  # about 16 + 1 + (64 + 4 + 64) / 3
    # the convention is PyTorch's: the sum of squares of every trainable tensor, 422 of them
    p = {nm: torch.tensor([[float(x) for x in r] for r in v] if isinstance(v[0], tuple) else
                          [float(x) for x in v], dtype=torch.float64) if isinstance(v, tuple)
         else torch.tensor(float(v), dtype=torch.float64) for nm, v in t.params().items()}
    assert sum(x.numel() for x in p.values()) == tk.parameter_count(16) == 422
    assert math.isclose(float(sum((x ** 2).sum() for x in p.values())), float(expected), rel_tol=1e-14)


def test_coupled_decay_is_the_half_penalty(small):
    """Adam's weight_decay = eps steps exactly as Adam on loss + (eps/2)||theta||^2."""
    a = tt.train(small, F(1, 10), 15, "coupled", seed=3)
    b = tt.train(small, F(1, 20), 15, "decoupled", seed=3)
    c = tt.train(small, F(1, 10), 15, "decoupled", seed=3)
    assert all(math.isclose(x, y, rel_tol=1e-9) for x, y in zip(a.losses, b.losses))
    assert max(abs(x - y) for x, y in zip(a.losses, c.losses)) > 1e-9 * a.losses[-1]
    assert a.penalty == F(1, 20) and c.penalty == F(1, 10)


def test_warm_start_continues_from_the_previous_weights(small):
    runs = tt.experiment(small, [F(1, 10), F(1, 100)], [20, 20], "coupled", warm=True, seed=1)
    assert runs[1].losses[0] == runs[0].final_loss  # same weights, same float64 evaluation
    fresh = tt.experiment(small, [F(1, 10), F(1, 100)], [20, 20], "coupled", warm=False, seed=1)
    assert fresh[1].losses[0] == fresh[0].losses[0]  # both from the seeded initialisation


def test_certified_enclosures_contain_torch_values(small):
    run = tt.train(small, F(1, 100), 50, "coupled", seed=2)
    cert = tk.certify_trained(small, tk.params_from_floats(run.params), run.eps, run.penalty)
    lo, hi = cert.loss
    assert 0 < hi - lo < 1e-25 * hi
    # torch evaluates in float64 against float64-rounded targets: agreement to rounding
    assert lo * (1 - 1e-12) <= run.final_loss <= hi * (1 + 1e-12)
    X, Y = tt.tensors(small)
    p = {nm: torch.tensor(v, dtype=torch.float64) for nm, v in run.params.items()}
    with torch.no_grad():
        d = ((tt.block(p, X) - Y.unsqueeze(1)) ** 2).sum(-1).amax(-1).sqrt().tolist()
    for (hlo, hhi), dj in zip(cert.hausdorff, d):
        assert hlo * (1 - 1e-12) <= dj <= hhi * (1 + 1e-12)
    # the loss is the mean of the squared Hausdorff distances, enclosure against enclosure
    assert sum(h[0] ** 2 for h in cert.hausdorff) / 3 <= hi and sum(h[1] ** 2 for h in cert.hausdorff) / 3 >= lo
    assert cert.norm_sq == sum(F(x) ** 2 for v in run.params.values() for x in torch.tensor(v, dtype=torch.float64).flatten().tolist())


def test_teacher_certifies_with_zero_loss(small):
    cert = tk.certify_trained(small, small.teacher.params(), F(1, 10), F(1, 20))
    assert cert.loss[0] == 0 and cert.loss[1] < F(1, 10**50)
    assert cert.verdicts["loss_below_threshold"] is Verdict.PROVED
    assert cert.verdicts["norm_below_teacher"] is Verdict.PROVED  # equality


def test_command_end_to_end_json(tmp_path, capsys):
    png = tmp_path / "fig.png"
    rc = main(["tikhonov", "--eps", "1e-1,1e-2", "--epochs", "300", "--size", "3,12,4", "--seed", "2",
               "--json", "--quiet", "--plot", str(png)])
    out, err = capsys.readouterr()
    assert rc == 0 and err == f"written: {png}\n"  # the figure named on stderr, nothing else there
    res = json.loads(out)
    assert res["teacher"]["verdict"] == "proved"
    assert res["construction"]["verdict"] == "proved"
    star = tk.make_data(3, 12, 4, seed=2).theta_star_sq
    assert F(res["theta_star_sq"]) == star
    assert [r["eps"] for r in res["runs"]] == ["1/10", "1/100"]
    for r in res["runs"]:
        assert r["epochs"] == 300 and len(r["trace"]) == 300
        lo, hi = float(r["certified"]["loss"]["lower"]), float(r["certified"]["loss"]["upper"])
        assert lo * (1 - 1e-12) <= r["final_loss"] <= hi * (1 + 1e-12)
        assert r["min_loss"] == min([p[1] for p in r["trace"]] + [r["final_loss"]])
        assert math.isclose(r["threshold_float"], float(F(r["eps"]) * star), rel_tol=1e-15)
    m = [r["min_loss"] for r in res["runs"]]
    assert math.isclose(res["slope"], math.log10(m[1] / m[0]) / math.log10(1e-2 / 1e-1), rel_tol=1e-9)
    assert png.stat().st_size > 10_000


def test_command_text_and_progress_lines(capsys):
    rc = main(["tikhonov", "--eps", "1e-2", "--epochs", "20", "--size", "2,5,3", "--no-construction"])
    out, err = capsys.readouterr()
    assert rc == 0 and "teacher interpolates exactly (exact rationals): proved" in out
    assert "certified: loss in [" in out
    assert err.count("\n") == 1 and err.startswith("symbounds tikhonov: eps=0.01 epoch 20/20")  # off a terminal


@pytest.mark.parametrize("argv, msg", [
    (["--eps", "0"], "must be positive"),
    (["--eps=-1e-3"], "must be positive"),
    (["--eps", "abc"], "--eps"),
    (["--epochs", "0"], "between 1"),
    (["--epochs", "10,20"], "one per eps"),
    (["--size", "2,5,1"], "--size"),
    (["--plot", "fig.jpg"], ".png, .svg or .pdf"),
    (["--decay", "adamw"], "invalid choice"),
    (["--bogus"], "unrecognized arguments"),
])
def test_bad_input(argv, msg, capsys):
    assert main(["tikhonov", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("symbounds: error:") and msg in err


def test_missing_torch_names_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    assert main(["tikhonov", "--epochs", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "symbounds[train]" in err


def test_exact_softmax_of_zero_scores_is_the_uniform_average(small):
    """The teacher's attention: all scores are exact zeros, so the exact context gives every
    weight exactly 1/n (no exp is evaluated) and every token becomes the sequence mean."""
    from flint import fmpq

    from symbounds.core.contexts import ExactContext
    from symbounds.core.transformer import forward

    X = small.dataset.inputs[0]
    _, tr = forward(ExactContext(), tk.teacher_model(small.teacher), [list(c) for c in zip(*X)], trace=True)
    assert all(w == fmpq(1, 9) for row in tr.attention[0][0] for w in row)
    mean = [sum(x[r] for x in X) / 9 for r in range(4)]
    assert all(F(int(v.p), int(v.q)) == mean[r] for r in range(4) for v in tr.Z[1][r])
