"""Write the property-certificate edit corpus of the checker kernel:
``python tests/kernel/make_property_corpus.py``.

``tests/data/kernel_corpus/property/accepted.json`` is the certificate ``symbounds certify --model
tests/data/residual_model.json --spec tests/data/holds.vnnlib --out ...`` writes (the property
``-0.6 < Y_0 < 2.5`` on ``[0,1]^2``); every other file of that folder is it with one edit (named by
the file) that the kernel must reject (``tests/kernel/test_kernel_property.py``, which also applies
the edits to a certificate it writes afresh).  The edits that keep the digests consistent make the
claim false, not merely unproved: the residual model reaches ``Y_0 >= 2.25`` (``tests/data/fails.vnnlib``
is sat) and ``Y_0 + 1/4 >= 2.5`` at ``(1, 1)``.
"""

import copy
import hashlib
import json
import pathlib
import subprocess
import sys
import tempfile
from fractions import Fraction

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
FOLDER = DATA / "kernel_corpus" / "property"


def redigest(c):
    c["model_sha256"] = hashlib.sha256(json.dumps(c["model"], sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    c["property_sha256"] = hashlib.sha256(c["property"].encode("utf-8")).hexdigest()


def _widest(c):
    """The index of the largest leaf (by volume)."""
    def vol(leaf):
        v = Fraction(1)
        for a, b in zip(*leaf):
            v *= Fraction(b) - Fraction(a)
        return v
    return max(range(len(c["leaves"])), key=lambda i: vol(c["leaves"][i]))


def dropped(c):
    c["leaves"].pop(_widest(c))


def shrunk(c):
    leaf = c["leaves"][_widest(c)]
    leaf[1][0] = str(Fraction(leaf[1][0]) - Fraction(1, 2**40))


def outside(c):
    c["leaves"].append([["1", "0"], ["5/4", "1"]])


def weight_digit(c):
    """The last digit of a weight changed, the digest left: a different network than was hashed."""
    w = c["model"]["layers"][0]["heads"][0]["W_Q"][0][1]
    c["model"]["layers"][0]["heads"][0]["W_Q"][0][1] = w[:-1] + str((int(w[-1]) + 1) % 10)


def bias_raised(c):
    """``b2[0]``, added to ``Y_0`` exactly, raised by 1/4 (digest updated): ``Y_0 >= 2.5`` at (1, 1)."""
    layer = c["model"]["layers"][-1]
    layer["b2"][0] = str(Fraction(layer["b2"][0]) + Fraction(1, 4))
    redigest(c)


def threshold(c):
    """The unsafe bound ``Y_0 >= 2.5`` lowered to 2.25, which the model reaches (digest updated)."""
    assert "(>= Y_0 2.5)" in c["property"]
    c["property"] = c["property"].replace("(>= Y_0 2.5)", "(>= Y_0 2.25)")
    redigest(c)


def sha_edited(c):
    h = c["property_sha256"]
    c["property_sha256"] = ("0" if h[0] != "0" else "1") + h[1:]


def model_sha_edited(c):
    h = c["model_sha256"]
    c["model_sha256"] = ("0" if h[0] != "0" else "1") + h[1:]


EDITS = {  # name -> (edit, words of the kernel's reason)
    "leaf_dropped": (dropped, "do not cover"),
    "leaf_shrunk": (shrunk, "do not cover"),
    "leaf_outside_the_box": (outside, "is not a box inside the property's input box"),
    "weight_changed_in_its_last_digit": (weight_digit, "model_sha256"),
    "bias_raised_so_the_property_fails": (bias_raised, "the kernel cannot show every unsafe alternative"),
    "threshold_lowered_so_the_property_fails": (threshold, "the kernel cannot show every unsafe alternative"),
    "property_sha256_edited": (sha_edited, "property_sha256"),
    "model_sha256_edited": (model_sha_edited, "model_sha256"),
    "format_version_changed": (lambda c: c.update(format="symbounds-property-certificate/2"),
                               "unknown format 'symbounds-property-certificate/2'"),
    "verdict_undecided": (lambda c: c.update(verdict="undecided"), "verdict"),
    "property_input_unbounded": (lambda c: (c.update(property=c["property"].replace("(assert (<= X_0 1.0))", ""))
                                            or redigest(c)), "bounded from both sides"),
}


def edited(base, name):
    c = copy.deepcopy(base)
    EDITS[name][0](c)
    return c


def write_accepted(path):
    """``symbounds certify`` of the residual model against holds.vnnlib (in a scratch folder, so
    that the certificate's source names are the files' names)."""
    with tempfile.TemporaryDirectory() as t:
        for f in ("residual_model.json", "holds.vnnlib"):
            (pathlib.Path(t) / f).write_text((DATA / f).read_text())
        subprocess.run([sys.executable, "-m", "symbounds", "certify", "--model", "residual_model.json", "--spec",
                        "holds.vnnlib", "--out", str(path), "--timeout", "120"], cwd=t, check=True)


if __name__ == "__main__":
    FOLDER.mkdir(exist_ok=True)
    write_accepted(FOLDER / "accepted.json")
    base = json.loads((FOLDER / "accepted.json").read_text())
    for name in EDITS:
        (FOLDER / f"{name}.json").write_text(json.dumps(edited(base, name), indent=1) + "\n")
    print(f"wrote accepted.json and {len(EDITS)} edits")
