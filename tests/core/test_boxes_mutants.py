"""Tests written for the fifth mutation pass over ``symbounds/core/boxes.py`` (docs/mutation-testing.md,
"Fifth pass: the rest of boxes.py"): each compares a piece of the box search with a hand-worked
case or an independent computation (exact rationals, a canonical JSON text written out, the SHA-256
of Python's ``hashlib``), so that an edit of the piece fails here."""

import hashlib
import re
from fractions import Fraction as F

import pytest

from symbounds.core.boxes import Box, CertifyResult, _initial_boxes, _split_axis, digest


def B(lo, hi):
    return Box(tuple(map(F, lo)), tuple(map(F, hi)))


# ------------------------------------------------------------------------------------------
# Box


def test_a_box_splits_at_the_middle_of_its_widest_side_the_first_of_equals():
    box = B((0, F(1, 4)), (F(1, 2), 1))  # widths 1/2 and 3/4: the second is the widest
    assert box.split() == (B((0, F(1, 4)), (F(1, 2), F(5, 8))), B((0, F(5, 8)), (F(1, 2), 1)))
    assert box.split(0) == (B((0, F(1, 4)), (F(1, 4), 1)), B((F(1, 4), F(1, 4)), (F(1, 2), 1)))
    square = B((0, 0, 0), (F(1, 2), F(1, 2), F(1, 4)))  # the first two are equally wide: the first
    assert square.split() == (B((0, 0, 0), (F(1, 4), F(1, 2), F(1, 4))), B((F(1, 4), 0, 0), (F(1, 2), F(1, 2), F(1, 4))))
    third = B((0, 0, 0), (F(1, 4), F(1, 4), F(1, 2)))  # the last is the widest
    assert third.split() == (B((0, 0, 0), (F(1, 4), F(1, 4), F(1, 4))), B((0, 0, F(1, 4)), (F(1, 4), F(1, 4), F(1, 2))))
    assert third.split(1) == (B((0, 0, 0), (F(1, 4), F(1, 8), F(1, 2))), B((0, F(1, 8), 0), (F(1, 4), F(1, 4), F(1, 2))))
    for b in (box, square, third):  # the halves tile the box: their volumes add up
        left, right = b.split()
        assert left.volume() + right.volume() == b.volume()


def test_a_box_knows_its_width_volume_and_json():
    box = B((F(1, 3), 0), (F(1, 2), F(1, 4)))
    assert box.width() == F(1, 4)  # the widest side, not the first (1/6)
    assert B((0, 0), (F(1, 2), F(1, 8))).width() == F(1, 2)
    assert box.volume() == F(1, 6) * F(1, 4)
    assert isinstance(box.volume(), F)
    assert B((0, 0, 0), (1, 1, 1)).volume() == 1
    assert box.as_json() == {"lo": ["1/3", "0"], "hi": ["1/2", "1/4"]}


def test_the_initial_boxes_are_the_grid_of_the_cube():
    third = [F(0), F(1, 3), F(2, 3), F(1)]
    assert _initial_boxes(1, 3) == [Box((third[i],), (third[i + 1],)) for i in range(3)]
    h = [F(0), F(1, 2), F(1)]
    assert _initial_boxes(2, 2) == [Box((h[0], h[0]), (h[1], h[1])), Box((h[0], h[1]), (h[1], h[2])),
                                    Box((h[1], h[0]), (h[2], h[1])), Box((h[1], h[1]), (h[2], h[2]))]
    assert _initial_boxes(3, 1) == [B((0, 0, 0), (1, 1, 1))]
    assert len(_initial_boxes(3, 4)) == 64 and sum(b.volume() for b in _initial_boxes(3, 4)) == 1


def test_the_side_to_halve_is_the_gradients_unless_far_narrower_than_the_widest():
    box = B((0, 0), (F(1, 2), F(1, 8)))  # the widest side is exactly 4 times the second
    assert _split_axis(box, 1, "gradient") == 1
    assert _split_axis(box, 0, "gradient") == 0
    assert _split_axis(B((0, 0), (F(1, 2), F(1, 9))), 1, "gradient") is None  # more than 4 times
    assert _split_axis(B((0, F(15, 16)), (F(1, 2), 1)), 1, "gradient") is None  # widths, not ends: 1/2, 1/16
    assert _split_axis(B((F(1, 2), F(15, 16)), (1, 1)), 0, "gradient") == 0
    assert _split_axis(box, None, "gradient") is None
    assert _split_axis(box, 1, "widest") is None


def test_the_digest_is_the_sha256_of_the_canonical_json_text():
    obj = {"b": [1, F(1, 2).numerator], "a": {"z": "x", "y": 2.5}}
    text = '{"a":{"y":2.5,"z":"x"},"b":[1,1]}'  # keys sorted, no spaces
    assert digest(obj) == hashlib.sha256(text.encode()).hexdigest()
    assert digest({"a": 1}) != digest({"a": 2})


# ------------------------------------------------------------------------------------------
# the result's reprs


def _result(verdict="proved", max_bound=F(1, 3), counterexample=None, undecided=0):
    boxes = [(B((0,), (F(1, 2),)), F(1, 3)), (B((F(1, 2),), (1,)), F(1, 4))]
    return CertifyResult(verdict, boxes, max_bound, counterexample, [B((0,), (1,))] * undecided, 1.26, 7)


def test_the_result_repr_is_one_line_with_the_counts_and_the_bound_rounded_up():
    assert repr(_result()) == ("CertifyResult(proved: 2 boxes proved, 0 undecided, 7 evaluated, "
                               "sup |T - g| <= 0.33333334, 1.3 s)")
    assert repr(_result("undecided", None, undecided=3)) == (
        "CertifyResult(undecided: 2 boxes proved, 3 undecided, 7 evaluated, sup |T - g| <= -, 1.3 s)")
    refuted = _result("refuted", F(1, 4), {"x": ["1/2", "3/4"], "error": "[0.5 +/- 1e-20]"})
    assert repr(refuted) == ("CertifyResult(refuted: 2 boxes proved, 0 undecided, 7 evaluated, "
                             "sup |T - g| <= 0.25, counterexample at x = (1/2, 3/4), 1.3 s)")
    long = repr(_result("refuted", F(1, 4), {"x": ["12345678901234567/98765432109876543"] * 20, "error": ""}))
    assert len(long) == 300 and long.endswith("...)")  # cut to the display limit


def test_the_result_latex_and_html_show_the_verdict_counts_and_bound():
    assert _result()._repr_latex_() == (r"$$\sup_{x} |T(x) - g(x)| \le 0.33333334 \quad "
                                        r"\text{proved: 2 boxes proved, 0 undecided}$$")
    assert _result("undecided", None, undecided=1)._repr_latex_() == (
        r"$$\sup_{x} |T(x) - g(x)| \le \text{-} \quad \text{undecided: 2 boxes proved, 1 undecided}$$")

    def table(html):
        caption = re.findall(r"<caption[^>]*>(.*?)</caption>", html)
        head = re.findall(r"<th [^>]*>(.*?)</th>", html)
        rows = [re.findall(r"<td [^>]*>(.*?)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", html)]
        return caption, head, [r for r in rows if r]

    assert table(_result()._repr_html_()) == (["whole-domain certificate"], ["", ""], [
        ["verdict", "<b>proved</b>"], ["boxes proved", "2"], ["undecided boxes", "0"], ["boxes evaluated", "7"],
        ["largest certified bound", "0.33333334"], ["time", "1.3 s"]])
    refuted = _result("refuted", None, {"x": ["1/2", "3/4"], "error": "[0.5 +/- 1e-20]"}, undecided=2)
    assert table(refuted._repr_html_()) == (["whole-domain certificate"], ["", ""], [
        ["verdict", "<b>refuted</b>"], ["boxes proved", "2"], ["undecided boxes", "2"], ["boxes evaluated", "7"],
        ["largest certified bound", "-"], ["time", "1.3 s"], ["counterexample x", "1/2, 3/4"]])


@pytest.mark.parametrize("ce", [None, {}])
def test_no_counterexample_is_shown_when_there_is_none(ce):
    r = _result("proved", F(1, 3), ce)
    assert "counterexample" not in repr(r) and "counterexample" not in r._repr_html_()


# ------------------------------------------------------------------------------------------
# the verdicts at the centres of boxes


def identity_model(d=1, scale=1):
    """``T(x) = scale relu(x_1) = scale x_1`` on ``[0, 1]^d`` (one feed-forward layer)."""
    from symbounds.core.transformer import Embedding, FeedForward, Readout, Transformer

    ffn = FeedForward(W1=((1,),), b1=(0,), W2=((scale,),), b2=(0,), skip=0)
    return Transformer(layers=(ffn,), embedding=Embedding(((0,),), ((1,) + (0,) * (d - 1),)), readout=Readout(0, 0))


def _midpoint(text):
    """The midpoint of Arb's ``[m +/- r]``."""
    return float(text.strip("[]").split(" +/- ")[0])


def test_centre_verdicts_at_the_limit_between_the_ends_and_where_floats_overflow():
    """``_centre_verdicts`` with ``g = 3 x / 2`` at ``c = 1/2`` (``g(c) = 3/4``): ``T(c) = 1/2`` is
    ``1/4`` away, which the float upper end of that distance (just above 1/4) as the limit proves
    (False, not undecided); ``T(c)`` in ``[1/4, 3/4]`` is
    between 0 and 1/2 away: undecided at the limit 1/5 (None, not False).  ``g = exp(1000 x)``
    overflows float64 at ``c = 1`` (the float target gives NaN): balls decide that ``T(c) = 0`` is
    ``e^1000 ~ 1.97e434`` away, and the estimate is unknown (None, not NaN)."""
    from symbounds.core import outward as fo
    from symbounds.core.boxes import _centre_verdicts
    from symbounds.core.contexts import BallContext
    from symbounds.core.expr import parse_target, variables
    from symbounds.core.float_target import compile_target

    ball, xs = BallContext(64), variables(1)
    g = parse_target("3*x1/2", 1)
    gt = compile_target(g, 1)
    (glo,), (ghi,) = gt.enclose_boxes([B((F(1, 2),), (F(1, 2),))])
    assert glo <= 0.75 <= ghi and ghi - glo < 1e-15
    top = F(max(fo.up(0.5 - glo), fo.up(ghi - 0.5)))  # the float upper end of |T(c) - g(c)|, just above 1/4
    assert F(1, 4) < top < F(1, 4) + F(1, 2**50)
    verdicts, est = _centre_verdicts(ball, g, xs, gt, [(F(1, 2),)] * 3, [0.5, 0.25, 0.5], [0.5, 0.75, 0.5],
                                     [top, F(1, 5), F(1, 4)])
    assert verdicts[0] is False and verdicts[1] is None
    assert verdicts[2] is None  # 1/4 exactly: the floats cannot tell, balls are not asked
    assert est == [0.25, 0.25, 0.25]
    big = parse_target("exp(1000*x1)", 1)
    verdicts, est = _centre_verdicts(ball, big, xs, compile_target(big, 1), [(F(1),)], [0.0], [0.0], [F(1, 2)])
    assert verdicts[0].startswith("[1.97007111401704699") and "e+434 +/- " in verdicts[0]  # e^1000 = 1.97007111401704699388...e434
    assert est == [None]


class _Ranges:
    """The float evaluator of a model, with the boxes at ``fail`` marked as not enclosed."""

    def __init__(self, fast, fail=()):
        self.fast, self.fail = fast, set(fail)

    def ranges(self, lo, hi):
        lo, hi, ok = self.fast.ranges(lo, hi)
        ok = ok.copy()
        ok[list(self.fail)] = False
        return lo, hi, ok


def test_centre_refutes_decides_each_centre_in_floats():
    """``centre_refutes`` for ``T(x) = x`` against ``g = 3 x / 2``: at a centre ``c`` the error is
    ``c / 2``.  With ``eps = 1/5`` the centre 1/2 of ``[0, 1]`` refutes (``1/4 > 1/5``, the error's
    enclosure as text), the centre 1/4 of ``[0, 1/2]`` does not (``1/8``, False), a box whose centre
    the floats cannot enclose is undecided (None), and so is every box without a float evaluator."""
    from symbounds.core.boxes import centre_refutes, float_evaluator
    from symbounds.core.expr import parse_target

    model, g = identity_model(), parse_target("3*x1/2", 1)
    fast = float_evaluator(model, 128)
    assert fast is not None
    boxes = [B((0,), (1,)), B((0,), (F(1, 2),)), B((F(1, 2),), (1,)), B((0,), (F(1, 8),))]
    out = centre_refutes(model, g, 1, boxes, 128, _Ranges(fast, fail=[2]), F(1, 5))
    assert isinstance(out[0], str) and abs(_midpoint(out[0]) - 0.25) < 1e-15
    assert out[1:] == [False, None, False]
    out = centre_refutes(model, g, 1, boxes[:2], 128, fast, F(1, 9))  # 1/8 > 1/9: both refute
    assert all(isinstance(v, str) for v in out) and abs(_midpoint(out[1]) - 0.125) < 1e-15
    assert centre_refutes(model, g, 1, boxes, 128, None, F(1, 5)) == [None] * 4
    assert centre_refutes(model, g, 1, [], 128, fast, F(1, 5)) == []


# ------------------------------------------------------------------------------------------
# the box search


def _odd_bits(q):
    """The number of significant bits of a dyadic rational (None if not dyadic)."""
    if q.denominator & (q.denominator - 1):
        return None
    m = q.numerator
    while m and m % 2 == 0:
        m //= 2
    return m.bit_length()


def test_certified_bounds_are_upper_bounds_recorded_to_30_bits():
    """``certify_model`` for ``T(x) = x`` against ``g = 3 x / 2`` (``|T - g| = x / 2``, at most 1/2)
    at ``eps = 3/5``: proved on the 64 boxes of the first grid; each box's bound is at least the
    exact ``sup |T - g| = hi / 2`` over it, at most ``eps``, and recorded rounded up to 30 bits
    (a dyadic number with at most 31 significant bits, or ``eps`` itself)."""
    from symbounds import model_to_json
    from symbounds.core.boxes import CertifyOptions, certify_model

    res = certify_model(model_to_json(identity_model()), "3*x1/2", 1, F(3, 5), CertifyOptions(initial=64))
    assert res.verdict == "proved" and res.evaluated == 64 and len(res.boxes) == 64
    assert [b for b, _ in res.boxes] == [B((F(i, 64),), (F(i + 1, 64),)) for i in range(64)]
    for box, bound in res.boxes:
        assert box.hi[0] / 2 <= bound <= F(3, 5), (box, bound)
        assert bound == F(3, 5) or _odd_bits(bound) <= 31, (box, bound)
    assert res.max_bound == max(b for _, b in res.boxes) >= F(1, 2)


# ------------------------------------------------------------------------------------------
# the local worker pool


class _Executor:
    """A stand-in for ``ProcessPoolExecutor`` whose futures are decided when submitted:
    ``plan(batch)`` is "ok" (the task's result), "broken" (``BrokenProcessPool``: its worker died),
    "cancelled", or "refuse" (``submit`` itself raises ``BrokenProcessPool``, once)."""

    def __init__(self, plan, log):
        from concurrent.futures.process import BrokenProcessPool

        self.plan, self.log, self.refused, self.down = plan, log, False, None
        self._processes = {}
        self._broken = BrokenProcessPool

    def submit(self, task, batch):
        from concurrent.futures import Future

        kind = self.plan(batch)
        if kind == "refuse" and not self.refused:
            self.refused = True
            raise self._broken("a worker died while the pool was idle")
        self.log.append(batch)
        fut = Future()
        fut.batch = batch
        if kind == "broken":
            fut.set_exception(self._broken("a worker died"))
        elif kind == "cancelled":
            fut.cancel()
        else:
            fut.set_result(task(batch))
        return fut

    def shutdown(self, wait=True, cancel_futures=False):
        self.down = (wait, cancel_futures)


def _pool(monkeypatch, plans):
    """A LocalPool that starts the stand-in executors of ``plans`` in turn; ``wait`` reports first
    only the first failed future (the others are found done when the pool breaks)."""
    from symbounds.core import boxes as boxes_mod

    def wait(fs, return_when=None):
        failed = [f for f in fs if f.done() and not f.cancelled() and f.exception() is not None]
        done = {min(failed, key=lambda f: f.batch)} if failed else {f for f in fs if f.done()}
        return done, set(fs) - done

    monkeypatch.setattr(boxes_mod, "wait", wait)
    log: list = []
    started = []
    pool = boxes_mod.LocalPool(2, (), task=lambda b: 10 * b)
    plans = iter(plans)

    def start():
        pool.ex = _Executor(next(plans), log)
        started.append(pool.ex)

    pool._start = start
    return pool, log, started


def test_a_broken_pool_keeps_the_results_it_has_and_runs_the_rest_again(monkeypatch):
    """Batches 0..3: 0 and 2 lose their worker, 1 has its result, 3 was cancelled.  The pool keeps
    1's result, runs 0, 2 and 3 again on a fresh pool (once), and yields each result once."""
    first = {0: "broken", 1: "ok", 2: "broken", 3: "cancelled"}
    pool, log, started = _pool(monkeypatch, [first.get, lambda b: "ok"])
    assert sorted(pool.imap([0, 1, 2, 3])) == [0, 10, 20, 30]
    assert log == [0, 1, 2, 3, 0, 2, 3] and pool.restarts == 1
    assert started[0].down is not None  # the broken pool was shut down


def test_a_pool_broken_while_idle_is_replaced(monkeypatch):
    """``submit`` raising ``BrokenProcessPool`` (a worker died between two runs): a fresh pool
    runs every batch, counted as one restart."""
    pool, log, started = _pool(monkeypatch, [lambda b: "refuse", lambda b: "ok"])
    assert sorted(pool.imap([1, 2])) == [10, 20]
    assert pool.restarts == 1 and len(started) == 2 and started[0].down is not None
    assert log == [1, 2]


def test_a_pool_gives_up_after_max_restarts_breaks_and_not_before(monkeypatch):
    """A pool may break MAX_RESTARTS times in one run and still finish; once more stops the run
    with WorkersLost."""
    from symbounds.core.boxes import MAX_RESTARTS, WorkersLost

    broken = lambda b: "broken"
    pool, log, _ = _pool(monkeypatch, [broken] * MAX_RESTARTS + [lambda b: "ok"])
    assert list(pool.imap([3])) == [30] and pool.restarts == MAX_RESTARTS
    pool, log, _ = _pool(monkeypatch, [broken] * (MAX_RESTARTS + 1) + [lambda b: "ok"])
    with pytest.raises(WorkersLost, match=f"broke {MAX_RESTARTS + 1} times"):
        list(pool.imap([3]))


class _Process:
    def __init__(self, alive):
        self.alive, self.events = alive, []

    def is_alive(self):
        return self.alive

    def terminate(self):
        self.events.append("terminate")
        self.alive = False

    def join(self):
        self.events.append("join")


def test_closing_a_pool_ends_its_running_workers_first():
    """``close`` terminates the workers still alive (a running batch is abandoned), joins every
    worker, then shuts the executor down; a pool not started closes as a no-op."""
    from symbounds.core.boxes import LocalPool

    pool = LocalPool(2, ())
    pool.close()  # never started
    ex = _Executor(lambda b: "ok", [])
    running, ended = _Process(True), _Process(False)
    ex._processes = {1: running, 2: ended}
    pool.ex = ex
    pool.close()
    assert running.events == ["terminate", "join"] and ended.events == ["join"]
    assert ex.down is not None and pool.ex is None


_INIT = None


def _set_init(value):
    global _INIT
    _INIT = value


def _read_init(batch):
    return _INIT, batch


def test_a_local_pool_forks_as_many_workers_as_asked_each_initialised():
    """``LocalPool(1, (7,), task, initializer)``: one worker process (forked at the first batch),
    whose initializer ran with the set-up arguments before its tasks."""
    import multiprocessing

    from symbounds.core.boxes import LocalPool

    pool = LocalPool(1, (7,), task=_read_init, initializer=_set_init)
    try:
        out = []
        for r in pool.imap([1, 2, 3]):
            out.append(r)
            children = multiprocessing.active_children()
        assert sorted(out) == [(7, 1), (7, 2), (7, 3)]
        assert len(children) == 1
    finally:
        pool.close()
    assert _INIT is None  # the initializer ran in the worker, not here


def test_certify_model_refutes_at_a_centre_where_the_error_exceeds_eps():
    """``|T - g| = x / 2`` exceeds ``eps = 1/5`` for ``x > 2/5``: refuted, the counterexample a
    box centre ``x > 2/5`` with the error ``x / 2`` (its enclosure as text); no box proved past it."""
    import time

    from symbounds import model_to_json
    from symbounds.core.boxes import CertifyOptions, certify_model

    t0 = time.perf_counter()
    res = certify_model(model_to_json(identity_model()), "3*x1/2", 1, F(1, 5), CertifyOptions())
    wall = time.perf_counter() - t0
    assert res.verdict == "refuted" and res.undecided == [] and res.extra == {}
    x = F(res.counterexample["x"][0])
    assert x > F(2, 5) and abs(_midpoint(res.counterexample["error"]) - float(x / 2)) < 1e-15
    assert all(b.hi[0] / 2 <= bound <= F(1, 5) for b, bound in res.boxes)
    assert res.max_bound == max(bound for _, bound in res.boxes)
    assert 0 <= res.seconds <= wall


def test_certify_model_leaves_undecided_what_it_cannot_split_or_afford():
    """At ``eps = 1/2`` the error ``x / 2`` reaches eps at ``x = 1`` only, and an upper bound over
    a box ending at 1 is never below it: the boxes next to 1 are split down to ``min_width`` and
    left undecided, the rest proved; proved and undecided boxes tile the cube.  With a budget of
    64 boxes, the second round (the boxes the first could not prove, halved) is not evaluated."""
    from symbounds import model_to_json
    from symbounds.core.boxes import CertifyOptions, boxes_cover_cube, certify_model

    mj = model_to_json(identity_model())
    res = certify_model(mj, "3*x1/2", 1, F(1, 2), CertifyOptions(min_width=F(1, 2**10), initial=64))
    assert res.verdict == "undecided" and res.counterexample is None
    assert res.undecided and all(b.width() / 2 < F(1, 2**10) and b.lo[0] >= F(63, 64) for b in res.undecided)
    assert any(b.hi == (F(1),) for b in res.undecided)
    tiles = [b for b, _ in res.boxes] + res.undecided
    assert boxes_cover_cube(tiles, 1) and sum(b.volume() for b in tiles) == 1
    assert res.evaluated == len(tiles) + (len(tiles) - 64)  # each split box was evaluated, then halved
    small = certify_model(mj, "3*x1/2", 1, F(1, 2), CertifyOptions(max_boxes=64, initial=64))
    assert small.verdict == "undecided" and small.evaluated == 64
    tiles = [b for b, _ in small.boxes] + small.undecided
    assert boxes_cover_cube(tiles, 1) and sum(b.volume() for b in tiles) == 1
    assert len(small.undecided) == 2 * (64 - len(small.boxes))


@pytest.mark.parametrize("d, tight, boxes", [(1, False, 64), (2, False, 16**2), (3, False, 4**3),
                                             (1, True, 8), (2, True, 4**2), (3, True, 2**3)])
def test_the_first_grid_has_16_boxes_per_side_in_two_dimensions_and_4_above(d, tight, boxes):
    """``T(x) = x_1`` against ``g = x_1`` is proved on the first grid of boxes (at ``eps = 1``):
    for the plain pass 64 boxes in one dimension, ``16^2`` in two, ``4^d`` from three on; for the
    tight pass (the default: fewer, wider boxes decide) 8, ``4^2`` and ``2^d``."""
    from symbounds import model_to_json
    from symbounds.core.boxes import CertifyOptions, certify_model

    res = certify_model(model_to_json(identity_model(d)), "x1", d, F(1), CertifyOptions(tight=tight))
    assert res.verdict == "proved" and res.evaluated == boxes == len(res.boxes)
    assert all(b.width() == F(1, round(boxes ** (1 / d))) for b, _ in res.boxes)


def test_the_worker_set_up_is_kept_for_its_key_and_rebuilt_for_another():
    """``_worker_init`` without a key: the same model, target, dimension, precision, eps and
    float choice keep this process's set-up (the very objects); another model or target rebuilds it."""
    from symbounds import model_to_json
    from symbounds.core import boxes as boxes_mod

    one, two = model_to_json(identity_model(1)), model_to_json(identity_model(2))
    W = boxes_mod._W
    saved = dict(W)
    try:
        boxes_mod._worker_init(one, "x1/2", 1, 128, F(1, 4))
        model, g = W["model"], W["g"]
        boxes_mod._worker_init(one, "x1/2", 1, 128, F(1, 4))
        assert W["model"] is model and W["g"] is g
        boxes_mod._worker_init(one, "x1/3", 1, 128, F(1, 4))
        assert str(W["g"]) == "x1/3" and W["model"] is not model
        boxes_mod._worker_init(model_to_json(identity_model(1, 2)), "x1/3", 1, 128, F(1, 4))
        assert W["model"].layers[0].W2 == ((2,),)  # another model, all else equal
        boxes_mod._worker_init(two, "x1/3", 2, 128, F(1, 4))
        assert len(W["model"].embedding.E[0]) == 2 and W["d"] == 2
        boxes_mod._worker_init(one, "x1/3", 1, 128, F(1, 4), fast=False)
        assert W["fast"] is None and W["eps"] == F(1, 4)
    finally:
        W.clear()
        W.update(saved)


class _WideCentres:
    """The float evaluator of a model, with the enclosure of ``T`` at each box's centre widened by
    1 (still an enclosure): the box's own model can no longer tell the centre's verdict."""

    def __init__(self, fast):
        self.fast = fast

    def enclose(self, lo, hi):
        a, b, ok, clo, chi, axis = self.fast.enclose(lo, hi)
        return a, b, ok, clo - 1.0, chi + 1.0, axis

    def ranges(self, lo, hi):
        return self.fast.ranges(lo, hi)


def test_a_worker_asks_the_centre_again_when_the_box_model_cannot_tell():
    """``_worker_eval`` for ``T(x) = x`` against ``g = 3 x / 2`` at ``eps = 1/5``, with centre
    enclosures too wide to decide: the centre 1/2 of ``[0, 1]`` (error 1/4, estimate above eps) is
    evaluated again in floats and refutes; the centre 1/4 of ``[0, 1/2]`` (error 1/8, estimate below
    eps) is not asked again and stays undecided; a box proved there has no centre verdict."""
    from symbounds import model_to_json
    from symbounds.core import boxes as boxes_mod

    W = boxes_mod._W
    saved = dict(W)
    try:
        boxes_mod._worker_init(model_to_json(identity_model()), "3*x1/2", 1, 128, F(1, 5))
        W["fast"] = _WideCentres(W["fast"])
        boxes = [B((0,), (1,)), B((0,), (F(1, 2),)), B((0,), (F(1, 16),))]
        out = boxes_mod._worker_eval(boxes)
        assert [r[0] for r in out] == boxes
        assert out[0][1] > F(1, 5) and out[1][1] > F(1, 5) and out[2][1] <= F(1, 5)
        assert isinstance(out[0][2], str) and abs(_midpoint(out[0][2]) - 0.25) < 1e-15
        assert out[1][2] is None and out[2][2] is None
    finally:
        W.clear()
        W.update(saved)


def test_a_float_bound_missing_its_limit_by_rounding_is_recomputed_in_balls():
    """``T(x) = x`` against ``g = 1000 e^x`` on a box of width ``2^-30`` at 1/2: the float target's
    relative rounding (``2^-44`` of ~1650) leaves the float bound ~``7e-11`` above the bound with
    ``g`` enclosed in 128-bit balls.  With that ball bound as the box's limit, ``box_bounds``
    recomputes ``g`` in balls (the miss is within rounding) and proves the box at its limit; the
    limit is above the exact ``sup |T - g| = 1000 e^hi - hi`` (a 300-bit evaluation)."""
    import flint

    from symbounds.core.boxes import _float_box_bound, box_bounds, float_evaluator
    from symbounds.core.contexts import BallContext
    from symbounds.core.expr import parse_target, variables

    model, g = identity_model(), parse_target("1000*exp(x1)", 1)
    fast = float_evaluator(model, 128)
    box = B((F(1, 2),), (F(1, 2) + F(1, 2**30),))
    lo, hi, ok, _, _, _ = fast.enclose([box.lo], [box.hi])
    lim = _float_box_bound(BallContext(128), g, variables(1), box, lo[0], hi[0])
    (floats,) = box_bounds(model, g, 1, [box], 128, fast)
    assert lim < floats < lim + F(1, 10**9)  # the floats alone miss it
    assert box_bounds(model, g, 1, [box], 128, fast, limits=[lim]) == [lim]
    assert box_bounds(model, g, 1, [box], 128, fast, limits=[lim], arb=False) == [lim]  # no Arb model needed
    prec = flint.ctx.prec
    flint.ctx.prec = 300
    try:
        h = flint.arb(flint.fmpq(box.hi[0].numerator, box.hi[0].denominator))
        assert 1000 * h.exp() - h < flint.arb(flint.fmpq(lim.numerator, lim.denominator))
    finally:
        flint.ctx.prec = prec


def _sigint_state(batch):
    import signal

    return signal.getsignal(signal.SIGINT) == signal.SIG_IGN, signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_pool_workers_ignore_ctrl_c_and_do_not_keep_it_blocked():
    """A worker initialised with ``ignore_sigint`` ignores SIGINT (the parent alone reports an
    interrupt), and no longer blocks it: it was forked with SIGINT blocked, and ``ignore_sigint``
    unblocks it once it is ignored."""
    from symbounds.core.boxes import LocalPool, ignore_sigint

    pool = LocalPool(1, (), task=_sigint_state, initializer=ignore_sigint)
    try:
        assert list(pool.imap([0])) == [(True, False)]
    finally:
        pool.close()


def test_box_bounds_reports_centre_verdicts_and_estimates_of_the_boxes_that_miss():
    """``box_bounds`` for ``T(x) = x`` against ``g = 3 x / 2`` with the limit 1/5 on each box:
    ``[1/4, 3/4]`` and ``[1/8, 3/8]`` miss it; the model's own enclosure at their centres (1/2,
    1/4) refutes the first (error 1/4, its text) and clears the second (1/8: False), and the
    estimates are the errors 1/4 and 1/8; the proved box ``[1/32, 1/16]`` gets neither."""
    from symbounds.core.boxes import box_bounds, float_evaluator
    from symbounds.core.expr import parse_target

    model, g = identity_model(), parse_target("3*x1/2", 1)
    fast = float_evaluator(model, 128)
    boxes = [B((F(1, 4),), (F(3, 4),)), B((F(1, 8),), (F(3, 8),)), B((F(1, 32),), (F(1, 16),))]
    centres, estimates, axes = [], [], []
    out = box_bounds(model, g, 1, boxes, 128, fast, [F(1, 5)] * 3, centres=centres, estimates=estimates, axes=axes)
    assert out[0] > F(1, 5) and out[1] > F(1, 5) and F(1, 32) <= out[2] <= F(1, 5)
    assert isinstance(centres[0], str) and abs(_midpoint(centres[0]) - 0.25) < 1e-15
    assert centres[1:] == [False, None]
    assert abs(estimates[0] - 0.25) < 1e-15 and abs(estimates[1] - 0.125) < 1e-15 and estimates[2] is None
    assert axes == [0, 0, 0]


def test_a_recorded_bound_equal_to_the_recomputed_one_is_kept():
    """With ``recheck`` (as the check runs it) a limit equal to the float bound itself is met: the
    bound is returned as it is, not sent to Arb."""
    from symbounds.core.boxes import box_bounds, float_evaluator
    from symbounds.core.expr import parse_target

    model, g = identity_model(), parse_target("3*x1/2", 1)
    fast = float_evaluator(model, 128)
    boxes = [B((0,), (1,)), B((F(1, 3),), (F(1, 2),))]
    floats = box_bounds(model, g, 1, boxes, 128, fast)
    assert floats[0] >= F(3, 2) and floats[1] >= F(5, 12)  # max(3 hi / 2 - lo, hi - 3 lo / 2)
    assert box_bounds(model, g, 1, boxes, 128, fast, floats, recheck=True) == floats


def test_a_centre_the_floats_leave_undecided_is_decided_in_balls_once_the_box_is_the_last():
    """Three boxes that cannot be split (``min_width = 1``), ``eps = 1/4``, ``|T - g| = x / 2``:
    the centre 1/2 of ``[1/3, 2/3]`` is exactly ``eps`` away, which floats cannot tell and balls
    clear (undecided, not refuted); the centre 5/6 of ``[2/3, 1]`` refutes with the error 5/12."""
    from symbounds import model_to_json
    from symbounds.core.boxes import CertifyOptions, certify_model

    res = certify_model(model_to_json(identity_model()), "3*x1/2", 1, F(1, 4),
                        CertifyOptions(initial=3, min_width=F(1), max_boxes=None))
    assert res.verdict == "refuted" and res.counterexample["x"] == ["5/6"]
    assert abs(_midpoint(res.counterexample["error"]) - 5 / 12) < 1e-13
    assert res.boxes == [] and res.undecided == [B((0,), (F(1, 3),)), B((F(1, 3),), (F(2, 3),))]


def test_a_scheduler_map_without_its_extra_or_its_scheduler_is_bad_input(monkeypatch):
    """``--scheduler`` without the optional dependency, or with a scheduler that cannot be reached
    (a closed port on the loopback), is a ValueError naming what to do or the address."""
    import sys

    from symbounds.core.boxes import _DaskMap

    setup = ({}, "x1", 1, 128, F(1, 4), True, None)
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "distributed", None)  # as if not installed
        with pytest.raises(ValueError) as e:
            _DaskMap("tcp://127.0.0.1:9", *setup)
        assert str(e.value) == "--scheduler needs the optional dependency: pip install 'symbounds[dask]'"
    import distributed

    monkeypatch.setattr(distributed, "Client", _refusing_client)
    with pytest.raises(ValueError) as e:
        _DaskMap("tcp://127.0.0.1:9", *setup)
    assert str(e.value) == ("cannot reach the Dask scheduler at tcp://127.0.0.1:9: "
                            "Timed out trying to connect to tcp://127.0.0.1:9 after 10 s")


def _refusing_client(address, timeout=None):
    """A stand-in for ``distributed.Client`` whose scheduler never answers (as ``Client`` raises
    after its timeout: an OSError whose first line says so)."""
    assert timeout == "10s"
    raise OSError(f"Timed out trying to connect to {address} after 10 s\nmore detail")


class _NoFloats:
    """A float evaluator that encloses nothing (as for a model whose float pass cannot divide)."""

    def enclose(self, lo, hi):
        import numpy as np

        n = len(lo)
        nan = np.full(n, np.nan)
        return nan, nan, np.zeros(n, bool), nan, nan, np.full(n, -1)

    def ranges(self, lo, hi):
        return self.enclose(lo, hi)[:3]


def test_boxes_the_floats_cannot_enclose_are_decided_in_arb_once_they_cannot_be_split(monkeypatch):
    """With a float evaluator that encloses nothing and boxes that cannot be split (four of width
    1/4, ``min_width = 1``), ``certify_model`` bounds each box in Arb: at ``eps = 4/5`` every box is
    proved (each bound at least the exact sup ``hi / 2``; interval arithmetic gives ``hi / 2 + 1/4``);
    at ``eps = 1/5`` the centres are decided in balls, and 5/8 (error 5/16) refutes after 1/8 and
    3/8 (1/16, 3/16) are cleared."""
    from symbounds import model_to_json
    from symbounds.core import boxes as boxes_mod

    monkeypatch.setattr(boxes_mod, "float_evaluator", lambda model, prec: _NoFloats())
    saved = dict(boxes_mod._W)
    boxes_mod._W.clear()  # no set-up left by another test under the same key
    try:
        mj, opts = model_to_json(identity_model()), boxes_mod.CertifyOptions(initial=4, min_width=F(1))
        res = boxes_mod.certify_model(mj, "3*x1/2", 1, F(4, 5), opts)
        assert res.verdict == "proved" and [b for b, _ in res.boxes] == boxes_mod._initial_boxes(1, 4)
        assert all(b.hi[0] / 2 <= bound <= F(4, 5) for b, bound in res.boxes)
        res = boxes_mod.certify_model(mj, "3*x1/2", 1, F(1, 5), opts)
        assert res.verdict == "refuted" and res.counterexample["x"] == ["5/8"]
        assert abs(_midpoint(res.counterexample["error"]) - 0.3125) < 1e-15 and res.boxes == []
        assert res.undecided == [B((0,), (F(1, 4),)), B((F(1, 4),), (F(1, 2),))]
    finally:
        boxes_mod._W.clear()
        boxes_mod._W.update(saved)


def _overflowing_prefix_model() -> dict:
    """T(x) = x through an affine prefix float64 cannot hold: two constant-score attention layers
    (one token, so each softmax weight is 1) scale by 10^200 * 10^200 = 10^400, beyond the largest
    double, and back by 10^-400; an FFN with W2 = 0 and skip 1 after them.  Exactly, T(x) = x."""
    def att(wv, wo):
        return {"type": "attention", "kind": "softmax", "skip": "0",
                "heads": [{"W_Q": [["0"]], "W_K": [["0"]], "W_V": [[wv]], "W_O": [[wo]]}]}

    return {"format": "symbounds-transformer/1", "input": "vector", "precision_bits": 128,
            "embedding": {"base": [["0"]], "E": [["1"]], "column": 0},
            "layers": [att("1e200", "1e200"), att("1e-200", "1e-200"),
                       {"type": "ffn", "skip": "1", "W1": [["1"]], "b1": ["0"], "W2": [["0"]], "b2": ["0"]}],
            "readout": {"row": 0, "column": 0}}


def test_a_prefix_float64_cannot_enclose_falls_back_to_arb_for_every_box():
    """float_evaluator runs the one-off set-up at once, so a prefix whose float64 enclosure
    overflows gives no float evaluator (every box in Arb balls) instead of an error at the first
    box (float_evaluator mutant 6, the set-up deferred)."""
    import numpy as np

    from symbounds.core.boxes import CertifyOptions, certify_model, float_evaluator
    from symbounds.core.modelfile import model_from_json

    mj = _overflowing_prefix_model()
    with np.errstate(all="ignore"):
        assert float_evaluator(model_from_json(mj), 128) is None
        res = certify_model(mj, "x1", 1, F(1, 10), CertifyOptions())
    # |T - g| = |x - x| = 0 exactly; each box's Arb enclosure (no Taylor model) is about its width
    assert res.verdict == "proved" and res.max_bound <= F(1, 10) and len(res.boxes) >= 1
