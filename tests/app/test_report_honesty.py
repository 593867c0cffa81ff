"""Output a careful reader can trust: what each printed side is, where it came from."""

import json

from symbounds.app.cli import main


def test_pou_prints_exact_sides_and_zero_claims(capsys):
    assert main(["pou", "--eps", "1/2", "--json"]) == 0
    claims = {c["id"]: c for c in json.loads(capsys.readouterr().out)["claims"]}
    # E2 holds with equality at the derived M_g: decided exactly, printed as the exact rationals
    assert claims["E2"]["context"] == "exact" and claims["E2"]["lhs"] == claims["E2"]["rhs"] == "1/8"
    assert claims["E2"]["enclosure"]["lhs"]["exact"] == "1/8"
    # an "= 0" claim shows its right side
    assert claims["L5.2"]["rhs"] == "0"
    # A2 is stated as the slack it measures (its lhs is negative when the assumption holds)
    assert claims["A2"]["statement"].startswith("max over") and claims["A2"]["rhs"] == "0"


def test_interp_text_says_what_the_guide_and_the_wide_ball_are(capsys):
    assert main(["interp", "--random", "3,6,3,2"]) == 0
    assert "not a claim" in capsys.readouterr().out
    assert main(["interp", "--random", "2,4,3,1", "--attention", "softmax"]) == 0
    out = capsys.readouterr().out
    assert "for refutation only" in out and "X1 and X2 are the proof" in out
