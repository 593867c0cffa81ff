"""``certify``'s memory estimate of its one-off setup (model file, float setup): by hand, and the
refusal of a huge grid before anything P^2 is built."""

import time

import pytest

from symbounds.core.boxes import CertifyOptions
from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao import certificate as slc


def test_estimate_by_hand():
    """``400 MiB + SETUP_BYTES_PER_P2 P^2``, with the constant fitted in BENCHMARKS.md (one-off
    setup section): 400 MiB + 320 * 1024^2 bytes = 720 MiB at P = 1024."""
    assert slc.SETUP_BYTES_PER_P2 == 320
    assert slc.setup_memory_estimate(1024, 2) == 400 * 2**20 + 320 * 2**20
    assert slc.setup_memory_estimate(0, 2) == slc.SETUP_BASE_BYTES


def test_a_huge_grid_is_refused_before_it_is_built(monkeypatch):
    """P = 16129 (eps = 223/10000): the estimate is 0.4 GiB + 320 * 16129^2 bytes (about 78 GiB);
    with 16 GiB available it is refused in one message, without building the network (``build``
    and the model file are never reached) and within seconds (before the constants, whose P centres
    are SymPy work); with 128 GiB it goes on to build."""
    inst = sl.Instance(d=2, C_H=1, B=1, eps="223/10000", target="sin(x1+x2)/2")
    need = slc.setup_memory_estimate(16129, 2)
    assert need == 400 * 2**20 + 320 * 16129**2 and 77 * 2**30 < need < 79 * 2**30

    def no_build(*a, **k):
        raise AssertionError("the network was built")

    monkeypatch.setattr(slc, "build", no_build)
    monkeypatch.setattr(slc, "model_to_json", no_build)
    monkeypatch.setattr(slc, "available_memory", lambda: 16 * 2**30)
    t = time.process_time()
    with pytest.raises(ValueError, match=r"P = 16129 tokens: the certificate's setup needs about 77\.\d GiB, more than "
                                         r"the 16\.0 GiB of memory available; raise eps"):
        slc.certify_instance(inst, CertifyOptions())
    assert time.process_time() - t < 5
    # with enough memory the same instance goes on to its constants and the network
    monkeypatch.setattr(slc, "constants", lambda inst, max_tokens: sl.constants(
        sl.Instance(d=2, C_H=1, B=1, eps="1/2", target="sin(x1+x2)/2"), max_tokens=max_tokens))
    monkeypatch.setattr(slc, "available_memory", lambda: 128 * 2**30)
    with pytest.raises(AssertionError, match="the network was built"):
        slc.certify_instance(inst, CertifyOptions())
