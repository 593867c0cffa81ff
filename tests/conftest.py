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
