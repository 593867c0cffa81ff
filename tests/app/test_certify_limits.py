"""``certify``'s limits: grids above 1024 tokens when their setup fits in memory, the box budget
scaled to the instance, and the refusal (one line, exit 2) when the estimated memory exceeds what
is available."""

import pytest
from cli_helpers import run_cli

from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao import certificate as slc

SMALL = ["--alpha", "1/2", "--holder", "1/2", "--bound", "1/4", "--eps", "1/2", "--target", "sin(x1)/4"]


def test_default_box_budget_by_hand():
    """max(200000, 8 d P^1.5): 200000 below P = 2^12 / 8... at d = 2, P = 256 (8*2*4096 = 65536);
    at d = 2, P = 4096: 8 * 2 * 262144; at d = 3, P = 1000: 8 * 3 * 31623 (P^1.5 = 31622.8)."""
    assert slc.default_max_boxes(256, 2) == 200_000
    assert slc.default_max_boxes(4096, 2) == 4_194_304
    assert slc.default_max_boxes(1000, 3) == 8 * 3 * 31623


def test_memory_estimate_grows_like_p_squared():
    a, b = slc.setup_memory_estimate(1024, 2), slc.setup_memory_estimate(2048, 2)
    base = slc.SETUP_BASE_BYTES
    assert (b - base) == 4 * (a - base)


def test_grids_above_1024_tokens_reach_certify_only():
    """Other commands keep the 1024-token limit; certify's limit is CERTIFY_MAX_TOKENS (refused
    from a coarse enclosure, before any grid is built)."""
    inst = sl.Instance(d=2, C_H=1, B=1, eps="1/100", target="sin(x1+x2)/2")
    with pytest.raises(ValueError, match="above the limit (of )?1024"):
        sl.constants(inst)
    tiny = sl.Instance(d=2, C_H=1, B=1, eps="1/10000", target="sin(x1+x2)/2")
    with pytest.raises(ValueError, match=f"above the limit (of )?{sl.CERTIFY_MAX_TOKENS}"):
        sl.constants(tiny, max_tokens=sl.CERTIFY_MAX_TOKENS)


def test_refused_in_one_line_when_the_setup_does_not_fit(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(slc, "available_memory", lambda: 2**20)  # 1 MiB available
    out = tmp_path / "cert.json"
    code, stdout, err = run_cli(capsys, "certify", *SMALL, "--quiet", "--out", str(out))
    assert code == 2 and stdout == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "GiB of memory available" in lines[0] and "Traceback" not in err
    assert not out.exists()


def test_certify_runs_with_the_scaled_budget(capsys, monkeypatch):
    seen = {}
    real = slc.certify_model

    def spy(mj, target, d, eps, opts, progress=None):
        seen["max_boxes"] = opts.max_boxes
        return real(mj, target, d, eps, opts, progress)

    monkeypatch.setattr(slc, "certify_model", spy)
    code, _, _ = run_cli(capsys, "certify", *SMALL, "--quiet")
    assert code == 0 and seen["max_boxes"] == 200_000
    code, _, _ = run_cli(capsys, "certify", *SMALL, "--quiet", "--max-boxes", "5000")
    assert code == 0 and seen["max_boxes"] == 5000


def test_timeout_ends_the_whole_cube_search_undecided_and_keeps_a_proved_certificate(capsys, tmp_path):
    """``--timeout`` on the whole-cube search: a run that cannot finish in 0.001 s of search (d = 2, P = 256: 200
    boxes in several steps, some tens of milliseconds; the timeout is read between steps) ends
    undecided, says why, exits 3, and leaves the proved certificate already at ``--out`` as it was
    (this run's partial one is written beside it)."""
    import json

    out = tmp_path / "c.json"
    code, _, err = run_cli(capsys, "certify", "--quiet", "--out", str(out))
    assert code == 0, err
    good = out.read_bytes()
    code, text, err = run_cli(capsys, "certify", "--d", "2", "--holder", "1", "--bound", "1", "--eps", "9/50",
                              "--target", "sin(x1+x2)/2", "--timeout", "0.001", "--json", "--out", str(out))
    summary = json.loads(text)
    assert code == 3, err
    assert summary["verdict"] == "undecided" and summary["stopped"] == "timeout"
    assert summary["undecided_boxes"] > 0
    assert out.read_bytes() == good
    assert json.loads((tmp_path / "c.undecided.json").read_text())["verdict"] == "undecided"
    code, text, _ = run_cli(capsys, "certify", "--d", "2", "--holder", "1", "--bound", "1", "--eps", "9/50",
                            "--target", "sin(x1+x2)/2", "--timeout", "0.001")
    assert code == 3 and "stopped by the timeout" in text


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1e9"])
def test_a_bad_timeout_is_one_line_exit_2(capsys, value):
    code, _, err = run_cli(capsys, "certify", "--timeout", value)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--timeout" in err, err
