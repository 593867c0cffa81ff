"""Write the edit corpus of the checker kernel: ``python tests/kernel/make_corpus.py``.

Each file of ``tests/data/kernel_corpus/`` is ``tests/data/certificates/v0.1-d1-small.json`` with
one edit (named by the file) that makes it false or malformed; the kernel must reject every one
(``tests/kernel/test_kernel.py``).  An edit that lowers a bound is made only where the network,
evaluated exactly by symbounds at grid points of the box, exceeds the new bound: the edited
certificate claims something false, not merely something the prover did not show.
"""

import copy
import hashlib
import json
import pathlib
from fractions import Fraction

from symbounds.core.boxes import point_error
from symbounds.core.expr import parse_target
from symbounds.core.modelfile import model_from_json

ROOT = pathlib.Path(__file__).resolve().parents[1] / "data"
BASE = json.loads((ROOT / "certificates" / "v0.1-d1-small.json").read_text())


def redigest(c):
    text = json.dumps(c["model"], sort_keys=True, separators=(",", ":")).encode()
    c["model_sha256"] = hashlib.sha256(text).hexdigest()
    return c


def grid_max(cert, box, k=9):
    """The largest |T - g| at k points of a 1-d box (exact network, 128-bit balls): a lower end."""
    model, g = model_from_json(cert["model"]), parse_target(cert["target"], 1)
    lo, hi = Fraction(box["lo"][0]), Fraction(box["hi"][0])
    return max(Fraction(point_error(model, g, 1, [lo + (hi - lo) * i / (k - 1)], 128).lower().mid().str(30, radius=False))
               for i in range(k))


def edit(name, fn, dump=None, base=BASE):
    c = copy.deepcopy(base)
    c = fn(c) or c
    (ROOT / "kernel_corpus" / f"{name}.json").write_text(dump(c) if dump else json.dumps(c, indent=1) + "\n")


def lower_to(fraction):
    def fn(c):
        i = max(range(len(c["boxes"])), key=lambda i: Fraction(c["boxes"][i]["bound"]))
        j = 17 if i != 17 else 18
        new = grid_max(c, c["boxes"][j]) * fraction
        assert new < Fraction(c["boxes"][j]["bound"])
        c["boxes"][j]["bound"] = str(new)
    return fn


def scaled(c):
    assert any(grid_max(c, b) > Fraction(b["bound"]) * Fraction(3, 5) for b in c["boxes"])
    for b in c["boxes"]:
        b["bound"] = str(Fraction(b["bound"]) * Fraction(3, 5))
    c["max_bound"] = str(Fraction(c["max_bound"]) * Fraction(3, 5))


def last_in_batch_zero(c):
    c["boxes"][-1]["bound"] = "0"


def moved(c):
    b = c["boxes"][10]
    w = (Fraction(b["hi"][0]) - Fraction(b["lo"][0])) / 4
    b["lo"], b["hi"] = [str(Fraction(b["lo"][0]) + w)], [str(Fraction(b["hi"][0]) + w)]


def shrunk(c):
    b = c["boxes"][10]
    b["hi"] = [str(Fraction(b["hi"][0]) - Fraction(1, 2**40))]


def ulp(c):
    w = c["model"]["layers"][0]["heads"][0]["W_K"][0][3]
    c["model"]["layers"][0]["heads"][0]["W_K"][0][3] = w[:-1] + str((int(w[-1]) + 1) % 10)


def named_constant(c):
    """The attention scale M of the first layer (every W_K entry equal to it) divided by 4."""
    M = c["model"]["layers"][0]["heads"][0]["W_K"][0][3]
    for h in c["model"]["layers"][0]["heads"]:
        h["W_K"] = [[str(Fraction(v) / 4) if v == M else v for v in row] for row in h["W_K"]]
    redigest(c)


def target(text, instance=True):
    def fn(c):
        c["target"] = text
        if instance:
            c["instance"]["target"] = text
    return fn


def put(path, value, digest=False):
    def fn(c):
        obj = c
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value(obj[path[-1]]) if callable(value) else value
        if digest:
            redigest(c)
    return fn


EDITS = {
    "bound_lowered_to_zero": last_in_batch_zero,
    "bound_lowered_below_the_truth": lower_to(Fraction(99, 100)),
    "bound_lowered_to_two_fifths_of_the_truth": lower_to(Fraction(2, 5)),
    "bounds_scaled_by_3_5": scaled,
    "box_moved": moved,
    "box_shrunk": shrunk,
    "box_dropped": lambda c: c["boxes"].pop(10) and None,
    "box_duplicated_in_place_of_another": put(["boxes", 10], lambda b: copy.deepcopy(BASE["boxes"][11])),
    "eps_changed": lambda c: c.update(eps="1/5") or c["instance"].update(eps="1/5"),
    "eps_changed_in_the_claim_only": put(["eps"], "49/100"),
    "weight_changed_by_one_ulp": ulp,
    "named_constant_changed": named_constant,
    "target_changed": target("sin(x1)/2"),
    "target_changed_in_the_claim_only": target("sin(x1)/4 + 0", instance=False),
    "target_not_in_the_grammar": target("__import__('os').getcwd()"),
    "format_version_changed": put(["format"], "symbounds-certificate/2"),
    "model_format_version_changed": put(["model", "format"], "symbounds-transformer/2", digest=True),
    "box_outside_the_domain": put(["boxes", 63, "hi"], ["5/4"]),
    "box_below_the_domain": put(["boxes", 0, "lo"], ["-1/64"]),
    "box_empty": put(["boxes", 5, "hi"], lambda hi: BASE["boxes"][5]["lo"]),
    "bound_infinite": put(["boxes", 3, "bound"], "inf"),
    "eps_nan": put(["eps"], "nan"),
    "weight_nan": put(["model", "layers", 0, "heads", 0, "W_V", 0, 0], "nan", digest=True),
    "max_bound_lowered": put(["max_bound"], lambda m: str(Fraction(m) / 2)),
    "verdict_undecided": put(["verdict"], "undecided"),
    "dimension_changed": lambda c: c.update(d=2, claim="sup over [0,1]^2 of |T(x) - g(x)| <= eps"),
    "json_float_bound": put(["boxes", 3, "bound"], 0.001),
}

# --- class certificates ([SL26], every target of a Hoelder class): the edits start from
# tests/data/class_certificates/d1-eps-1-2.json and are written as class_*.json

CLASS = json.loads((ROOT / "class_certificates" / "d1-eps-1-2.json").read_text())


def class_lowered(c):
    """The bound of the box holding the worst point x* set to 99/100 of E(x*) (evaluated by symbounds'
    own class bound, 256-bit balls): below the truth, since that box's sup of E is at least E(x*)."""
    from symbounds.papers.shi_liao.class_bound import class_network, point_values

    x = Fraction(c["worst"]["x"][0])
    model = model_from_json(c["model"])
    P = len(c["model"]["embedding"]["base"][0])
    net = class_network(model, 1, [(Fraction(2 * i - 1, 2 * P),) for i in range(1, P + 1)], 1, 1, 1, 256)
    E = Fraction(point_values(net, [x])[0].lower().str(40, radius=False))
    i = next(i for i, b in enumerate(c["boxes"]) if Fraction(b["lo"][0]) <= x <= Fraction(b["hi"][0]))
    c["boxes"][i]["bound"] = str(E * Fraction(99, 100))
    c["max_bound"] = str(max(Fraction(b["bound"]) for b in c["boxes"]))


def class_centre_moved(c):
    """Head 2's affine score ``2 M_g c x - M_g c^2`` moved from its centre ``c = 5/(2P)`` to ``c + 1/(4P)``."""
    P = len(c["model"]["embedding"]["base"][0])
    WV = c["model"]["layers"][0]["heads"][2]["W_V"]
    centre = Fraction(5, 2 * P)
    Mg = Fraction(WV[0][0]) / (2 * centre)
    moved = centre + Fraction(1, 4 * P)
    WV[0][0], WV[0][1] = str(2 * Mg * moved), str(-Mg * moved**2)
    redigest(c)


CLASS_EDITS = {
    "class_bound_lowered_below_the_truth": class_lowered,
    "class_box_dropped": lambda c: c["boxes"].pop(10) and None,
    "class_eps_lowered": put(["instance", "eps"], "1/10"),
    "class_alpha_changed": put(["class", "alpha"], "1/2"),
    "class_holder_changed": put(["class", "holder"], "11/10"),
    "class_bound_B_changed": put(["class", "bound"], "100"),
    "class_weight_changed_by_one_ulp": put(["model", "layers", 0, "heads", 3, "W_K", 0, 3],
                                           lambda w: w[:-1] + str((int(w[-1]) + 1) % 10)),
    "class_value_row_weight_changed_by_one_unit": put(["model", "layers", 0, "heads", 0, "W_V", 1, 0], "1e-57",
                                                      digest=True),
    "class_value_slot_not_zero": put(["model", "layers", 0, "heads", 1, "W_V", 1, 1], "1e-57", digest=True),
    "class_centre_moved": class_centre_moved,
    "class_format_version_changed": put(["format"], "symbounds-class-certificate/2"),
}


if __name__ == "__main__":
    for name, fn in EDITS.items():
        edit(name, fn)
    for name, fn in CLASS_EDITS.items():
        edit(name, fn, base=CLASS)
    # a JSON NaN literal: not JSON the kernel reads (unreadable)
    edit("bound_json_nan", put(["boxes", 3, "bound"], float("nan")), dump=lambda c: json.dumps(c))
    print(f"wrote {len(EDITS) + len(CLASS_EDITS) + 1} files")
