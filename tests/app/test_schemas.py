"""docs/schemas: every JSON document symbounds reads or writes validates against its schema
(draft 2020-12, checked with the ``jsonschema`` library on real output), and a broken document
(a required key removed, a JSON number where a string is required) does not."""

import argparse
import contextlib
import copy
import io
import json
from pathlib import Path

import jsonschema
import pytest

from symbounds.app.cli import main
from symbounds.papers.alcalde.dataset import dataset_to_json, load_dataset, random_dataset

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schemas"
DATA = Path(__file__).resolve().parents[1] / "data"
SMALL = ["--alpha", "1/2", "--holder", "1/2", "--bound", "1/4", "--eps", "1/2", "--target", "sin(x1)/4",
         "--quiet", "--points", "2"]
DATASET = {"d": 2, "sequences": [{"input": [["0", "1"], [1, 0], [0.5, "1/2"]], "target": [["3", "3"]]},
                                  {"input": [["0", "1"], ["2", "2"]], "target": [[-1, "4"], ["5", "5e0"]]}]}


def schema(name):
    s = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(s)
    return jsonschema.Draft202012Validator(s)


def _json_of(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    """Real output of every command that writes JSON (small instances)."""
    t = tmp_path_factory.mktemp("schemas")
    (t / "dataset.json").write_text(json.dumps(DATASET))
    docs = {
        "pou": _json_of("pou", *SMALL, "--json", "--context", "all", "--at", "1/3", "--export", str(t / "m.json")),
        "pou-manifold": _json_of("pou", "--manifold", "circle", "--eps", "1/2", "--points", "2", "--quiet", "--json"),
        "interp": _json_of("interp", "--data", str(t / "dataset.json"), "--json", "--export", str(t / "mi.json")),
        "interp-softmax": _json_of("interp", "--random", "3,6,4,1", "--attention", "softmax", "--json",
                                   "--export", str(t / "ms.json")),
        "certify": _json_of("certify", *SMALL[:-2], "--json", "--out", str(t / "cert.json")),
        "rate": _json_of("rate", "--n", "10000", "--d", "2", "--json"),
        "tighten": _json_of("tighten", "--eps", "1/2", "--what", "M", "--criterion", "proof", "--quiet", "--json"),
    }
    m = str(t / "m.json")  # the pou export: a vector-input model with a readout
    tokens = str(DATA / "token_model.json")  # a token-set model without a readout
    residual = str(DATA / "residual_model.json")  # two inputs, the properties' model
    docs["bound"] = _json_of("bound", m, "--box", "0:1/8", "--json")
    docs["bound-tokens"] = _json_of("bound", tokens, "--box", ",".join(["0:1/4"] * 4), "--json")
    docs["certify-spec"] = _json_of("certify", "--model", residual, "--spec", str(DATA / "holds.vnnlib"), "--json")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["certify", "--model", residual, "--spec", str(DATA / "fails.vnnlib"), "--json"]) == 1
    docs["certify-spec-refuted"] = json.loads(out.getvalue())
    _vnncomp_documents(t, docs, residual)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["chain", "--json"]) == 1  # E3 is refuted at a parameter point
    docs["chain"] = json.loads(out.getvalue())
    docs["prove-shi_liao"] = _json_of("prove", "shi_liao", "eps=1/2", "--json")
    docs["prove-alcalde"] = _json_of("prove", "alcalde", "N=2", "n=3", "d=2", "m=1", "--json")
    docs["tikhonov"] = _json_of("tikhonov", "--size", "3,5,2", "--epochs", "5", "--eps", "1/10,1/100", "--json",
                                "--quiet")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["sweep", "--eps", "1/2", "--holder", "1", "--bound", "1", "--target", "sin(x1)/2",
                     "--quiet", "--out", str(t / "table.csv")]) == 0
    docs["sweep"] = json.loads((t / "table.json").read_text())
    docs["sweep-docs"] = json.loads((SCHEMAS.parent / "sweep_table.json").read_text())
    for name in ("m", "mi", "ms", "cert"):
        docs[name] = json.loads((t / f"{name}.json").read_text())
    docs["dataset"] = DATASET
    docs["dataset-random"] = dataset_to_json(random_dataset(3, 5, 3, 2, seed=1))
    load_dataset(str(t / "dataset.json"))  # the hand-written dataset is one the program accepts
    return docs


def _vnncomp_documents(t, docs, residual):
    """``vnncomp --json`` on an unsat and a sat instance (ONNX), its unsat's certificate, and
    ``certify --result --json``."""
    from symbounds.core.modelfile import load_model
    from symbounds.core.onnx_export import export_onnx

    export_onnx(load_model(residual), str(t / "res.onnx"))
    for name in ("holds", "fails"):
        (t / f"{name}.vnnlib").write_text((DATA / f"{name}.vnnlib").read_text())
    (t / "instances.csv").write_text("res.onnx,holds.vnnlib,120\nres.onnx,fails.vnnlib,120\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["vnncomp", str(t / "instances.csv"), "--results", str(t / "results"), "--json"]) == 0
    docs["vnncomp"] = json.loads(out.getvalue())
    docs["property-certificate"] = json.loads(Path(docs["vnncomp"]["rows"][0]["certificate"]).read_text())
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["certify", "--model", str(t / "res.onnx"), "--spec", str(t / "fails.vnnlib"), "--timeout", "120",
                     "--result", str(t / "one.txt"), "--json"]) == 1
    docs["certify-result"] = json.loads(out.getvalue())


#: document -> (schema, a path to a value that must be a string, or for the dataset an integer)
CASES = {
    "pou": ("pou", ("constants", "M_g")),
    "pou-manifold": ("pou", ("whole_manifold", "max_bound")),
    "interp": ("interp", ("theta_norm_sq",)),
    "interp-softmax": ("interp", ("tau",)),
    "certify": ("certify", ("eps",)),
    "rate": ("rate", ("eps",)),
    "tighten": ("tighten", ("resolution",)),
    "sweep": ("sweep", ("rows", 0, "M")),
    "sweep-docs": ("sweep", ("rows", 0, "eps")),
    "m": ("model", ("layers", 0, "skip")),
    "mi": ("model", ("layers", 0, "W1", 0, 0)),
    "ms": ("model", ("layers", 1, "tau")),
    "cert": ("certificate", ("boxes", 0, "bound")),
    "dataset": ("dataset", ("d",)),
    "dataset-random": ("dataset", ("d",)),
    "bound": ("bound", ("lower",)),
    "bound-tokens": ("bound", ("upper_exact", 0)),
    "certify-spec": ("certify-spec", ("verdict",)),
    "certify-spec-refuted": ("certify-spec", ("counterexample", "x", 0)),
    "vnncomp": ("vnncomp", ("rows", 1, "witness", "x", 0)),
    "certify-result": ("vnncomp", ("rows", 0, "answer")),
    "property-certificate": ("property-certificate", ("leaves", 0, 0, 0)),
    "prove-shi_liao": ("prove", ("claims", 0, "statement")),
    "chain": ("chain", ("claims", 3, "refuted_at", "alpha")),
    "prove-alcalde": ("prove", ("parameters", "N")),
    "tikhonov": ("tikhonov", ("theta_star_sq",)),
}

#: every command with a --json flag -> the documents above that hold its --json output
JSON_COMMANDS = {
    "pou": ["pou", "pou-manifold"], "interp": ["interp", "interp-softmax"],
    "certify": ["certify", "certify-spec", "certify-spec-refuted", "certify-result"], "vnncomp": ["vnncomp"], "rate": ["rate"], "tighten": ["tighten"],
    "bound": ["bound", "bound-tokens"], "prove": ["prove-shi_liao", "prove-alcalde"], "tikhonov": ["tikhonov"],
    "chain": ["chain"],
}


def _errors(validator, doc):
    return [f"{e.json_path}: {e.message[:120]}" for e in validator.iter_errors(doc)]


@pytest.mark.parametrize("doc", list(CASES))
def test_real_output_validates(documents, doc):
    name, _ = CASES[doc]
    assert _errors(schema(name), documents[doc]) == []


@pytest.mark.parametrize("doc", list(CASES))
def test_a_missing_required_key_fails(documents, doc):
    name, _ = CASES[doc]
    v = schema(name)
    for key in v.schema["required"]:
        broken = copy.deepcopy(documents[doc])
        del broken[key]
        assert not v.is_valid(broken), key


@pytest.mark.parametrize("doc", list(CASES))
def test_a_wrongly_typed_value_fails(documents, doc):
    name, path = CASES[doc]
    v = schema(name)
    broken = copy.deepcopy(documents[doc])
    parent = broken
    for k in path[:-1]:
        parent = parent[k]
    old = parent[path[-1]]
    if name == "dataset":
        assert type(old) is int
        parent[path[-1]] = str(old)  # a string where an integer (a count) is required
    else:
        assert isinstance(old, str) and old
        parent[path[-1]] = 0.5  # a JSON number where a number string is required
    assert not v.is_valid(broken)


def _json_commands() -> set[str]:
    """The sub-commands whose parser has a ``--json`` flag (read from the parser itself)."""
    from symbounds.app.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = set()
    for name, p in sub.choices.items():
        p.format_help()  # a sub-command's flags are added when it is first used
        if "--json" in p._option_string_actions:
            found.add(name)
    return found


def test_every_json_output_has_a_schema():
    """A command that gains --json must gain a schema and a real document in CASES here."""
    assert _json_commands() == set(JSON_COMMANDS)
    for command, docs in JSON_COMMANDS.items():
        assert docs and all(d in CASES for d in docs), command


def test_durations_are_numbers_in_reports(documents):
    """docs/schemas/README.md: ``seconds`` is a JSON number in the reports (bound, the property
    check, tighten) and a decimal string in the certificate and the summary copied from it."""
    for doc in ("bound", "certify-spec", "tighten"):
        seconds = documents[doc]["seconds"] if doc != "tighten" else documents[doc]["results"][0]["seconds"]
        assert isinstance(seconds, (int, float)) and seconds >= 0, doc
    assert isinstance(documents["certify"]["seconds"], str)


def test_bound_ends_enclose_the_exact_ends(documents):
    """The 30-digit decimals are the exact ends rounded outward."""
    from fractions import Fraction

    for doc in ("bound", "bound-tokens"):
        d = documents[doc]
        lows, highs = d["lower"], d["upper"]
        lows, highs = ([lows], [highs]) if isinstance(lows, str) else (lows, highs)
        ex_lo = [d["lower_exact"]] if isinstance(d["lower_exact"], str) else d["lower_exact"]
        ex_hi = [d["upper_exact"]] if isinstance(d["upper_exact"], str) else d["upper_exact"]
        for a, ea, b, eb in zip(lows, ex_lo, highs, ex_hi):
            assert Fraction(a) <= Fraction(ea) <= Fraction(eb) <= Fraction(b)


def test_counts_are_integers_and_numbers_strings(documents):
    """The convention of docs/schemas/README.md on the outliers it fixed, against the values the
    program computed (P = m^d, the constants' own counts)."""
    pou = documents["pou"]
    c = pou["constants"]
    assert type(c["P"]) is int and c["P"] == c["m"] ** pou["instance"]["d"]
    assert c["D"] == pou["instance"]["d"] + 4 and c["d_ff"] == 2 * c["D"] and c["heads_1"] == c["P"] + 2
    assert all(isinstance(c[k], str) for k in ("M_g", "M", "c", "eta", "P_paper"))
    for row in documents["sweep"]["rows"]:
        assert type(row["P"]) is int and type(row["d"]) is int
    assert type(documents["rate"]["P"]) is int == type(documents["rate"]["m"])
    whole = documents["pou-manifold"]["whole_manifold"]
    assert isinstance(whole["max_bound"], str)


def test_every_schema_is_listed_in_the_readme():
    readme = (SCHEMAS / "README.md").read_text()
    files = sorted(p.name for p in SCHEMAS.glob("*.schema.json"))
    assert len(files) == 20
    for f in files:
        assert f"]({f})" in readme, f
    assert "schemas/README.md" in (SCHEMAS.parent / "README.md").read_text()
