"""JSON reports keep every key that version 0.1.0 wrote (new keys may be added, none removed or
renamed).  The key lists below are those of 0.1.0's output for the same commands."""

import json

import pytest

from symbounds.app.cli import main

CLAIM = ["id", "statement", "context", "prec", "verdict", "lhs", "rhs", "scope"]
POU = ["symbounds", "command", "instance", "constants", "claims", "verdict", "prec", "samples", "max_error",
       "points", "timings"]
POU_INSTANCE = ["d", "alpha", "holder", "bound", "eps", "target", "M", "Mg", "paper"]
POU_CONSTANTS = ["r_g", "m", "P", "P_paper", "M_g", "c", "M", "emcM", "eta", "lambda", "w_ind", "D", "d_ff",
                 "heads_1", "heads_2", "params_dense", "params_nonzero", "max_weight", "max_weight_paper_order"]
INTERP = ["symbounds", "command", "dataset", "attention", "variant", "blocks", "blocks_formula", "width",
          "params_dense", "params_nonzero", "params_bound", "max_numerator_bits", "max_denominator_bits",
          "resnet_blocks", "theta_norm_sq", "theta_norm_sq_decimal", "regularisation", "claims", "exact",
          "verdict", "timings"]
CERTIFY = ["verdict", "d", "eps", "target", "max_bound", "counterexample", "seconds", "boxes_evaluated", "boxes",
           "undecided_boxes", "assumptions"]
RATE = ["n", "d", "alpha", "holder", "bound_B", "noise", "eps", "eps_decimal", "eps_exponent", "r_g", "m", "P", "D",
        "params", "M_g", "M", "max_weight", "max_weight_paper_order", "lipschitz_params", "covering_radius",
        "log_covering", "approx_term", "estimation_term", "bound", "C4", "rate", "rate_exponent",
        "oracle_inequality", "P_order_eps^-d/alpha"]


def _json(argv, capsys):
    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


def test_pou_keys(capsys):
    code, j = _json(["pou", "--eps", "1/2", "--json", "--context", "fp"], capsys)
    assert code == 0 and set(POU) <= set(j) and set(POU_INSTANCE) <= set(j["instance"])
    assert set(POU_CONSTANTS) <= set(j["constants"])
    assert all(set(CLAIM) <= set(c) for c in j["claims"])
    assert {"claims", "quantities"} <= set(j["float64"])
    # the added structure: enclosures as numbers, lower <= upper
    enc = [c["enclosure"]["lhs"] for c in j["claims"] if "enclosure" in c and "lhs" in c["enclosure"]]
    assert enc and all(float(e["lower"]) <= float(e["upper"]) for e in enc)


@pytest.mark.parametrize("attention, extra", [("hardmax", []), ("softmax", ["tau", "tau_star", "prec",
                                                                           "final_ball_distance"])])
def test_interp_keys(attention, extra, capsys):
    code, j = _json(["interp", "--random", "3,6,3,2", "--attention", attention, "--json"], capsys)
    assert code == 0 and set(INTERP + extra) <= set(j)
    assert all(set(CLAIM) <= set(c) for c in j["claims"])


def test_certify_and_rate_keys(capsys, tmp_path):
    code, j = _json(["certify", "--eps", "1/2", "--json"], capsys)
    assert code == 0 and set(CERTIFY) <= set(j)
    code, j = _json(["rate", "--n", "10000", "--d", "2", "--json"], capsys)
    assert code == 0 and set(RATE) <= set(j)


def test_reports_written_with_the_umask(tmp_path, monkeypatch):
    import os
    import stat

    monkeypatch.chdir(tmp_path)
    old = os.umask(0o022)
    try:
        assert main(["pou", "--eps", "1/2", "--quiet", "--out", "r.txt", "--export", "m.json"]) == 0
        assert main(["certify", "--eps", "1/2", "--quiet", "--out", "c.json"]) == 0
        for f in ("r.txt", "m.json", "c.json"):
            assert stat.S_IMODE(os.stat(f).st_mode) == 0o644, f
    finally:
        os.umask(old)
