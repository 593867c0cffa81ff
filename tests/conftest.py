"""Shared test fixtures."""

import flint
import pytest


@pytest.fixture(autouse=True)
def _guard_flint_prec():
    """Every test starts at a known global flint precision and cannot leak a change to the next."""
    saved = flint.ctx.prec
    flint.ctx.prec = 53
    try:
        yield
    finally:
        flint.ctx.prec = saved


@pytest.fixture(autouse=True)
def _no_timed_progress_lines(monkeypatch):
    """Off a terminal, a command prints a progress line once a run passes ``Bar.INTERVAL`` (5 s).
    On a loaded machine an ordinary check can pass that mark, and the extra stderr line would fail
    the tests that read exactly one line of error.  In-process runs therefore print no timed
    progress lines; the tests of the progress lines set their own interval (or monkeypatch it)."""
    from symbounds.app.args import Bar

    monkeypatch.setattr(Bar, "INTERVAL", float("inf"))


@pytest.fixture(autouse=True)
def _fused_kernel_at_every_size(monkeypatch):
    """The compiled box kernel is used from ``fused_boxes.MIN_TOKENS`` tokens on (smaller models do
    not repay numba's start-up); the tests' models are small, and must still run through it."""
    from symbounds.core import fused_boxes

    monkeypatch.setattr(fused_boxes, "MIN_TOKENS", 0)
