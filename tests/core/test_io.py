"""Model files: export, exact re-reading, the README's mpmath re-evaluation, hostile files."""

import json
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from flint import fmpq

from symbounds.core.contexts import BallContext, ExactContext
from symbounds.core.files import atomic_write
from symbounds.core.modelfile import ModelFileError, export_model, load_model, model_to_json, parse_number
from symbounds.core.transformer import Attention, FeedForward, Head, Transformer, forward
from symbounds.papers import shi_liao as sl

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture(scope="module")
def small():
    inst = sl.Instance(alpha="1/2", C_H="1/2", B="1/4", eps="1/2", target="sin(x1)/4")
    K = sl.constants(inst)
    return K, sl.build(K)


def test_numbers_are_strings_never_json_floats(small, tmp_path):
    _, model = small
    path = tmp_path / "m.json"
    export_model(model, str(path), 128)
    text = path.read_text()
    data = json.loads(text, parse_float=lambda s: pytest.fail(f"JSON float {s}"))
    assert data["format"] == "symbounds-transformer/1"
    assert data["embedding"]["column"] == 0 and data["readout"] == {"row": 0, "column": 0}
    assert len(data["layers"]) == 4 and data["layers"][0]["type"] == "attention"
    assert len(data["layers"][0]["heads"]) == 8 + 2
    # exact weights stay exact: the FFN1 input matrix is +-1 and 0
    assert {v for row in data["layers"][1]["W1"] for v in row} == {"1", "-1", "0"}


def test_reloaded_model_agrees_with_the_exact_one(small, tmp_path):
    _, model = small
    path = tmp_path / "m.json"
    export_model(model, str(path), 160)
    again = load_model(str(path))
    ctx = BallContext(160)
    x = (Fraction(3, 10),)
    a, b = forward(ctx, model, x), forward(ctx, again, x)
    with ctx.scope():
        assert abs(a - b) < fmpq(1, 10**30)


def test_readme_mpmath_snippet_reevaluates_an_exported_model(small, tmp_path):
    text = README.read_text()
    m = re.search(r"<!-- readme-snippet: mpmath-reevaluation -->\s*```python\n(.*?)```", text, re.S)
    assert m, "README lost its mpmath snippet"
    snippet = m.group(1)
    assert len(snippet.strip().splitlines()) <= 25
    _, model = small
    export_model(model, str(tmp_path / "pou.json"), 128)
    r = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    value = Fraction(r.stdout.strip())
    ctx = BallContext(128)
    T = forward(ctx, model, (Fraction(3, 10),))
    with ctx.scope():
        assert abs(T - ctx.convert(value)) < fmpq(1, 10**25)


def test_hardmax_token_model_round_trips_exactly(tmp_path):
    one, zero = 1, 0
    head = Head(((one, zero), (zero, one)), ((one, zero), (zero, one)), ((one, zero), (zero, one)),
                ((Fraction(1, 2), zero), (zero, one)))
    ffn = FeedForward(((1, -1),), (Fraction(-1, 3),), ((2,), (0,)), (0, Fraction(5, 7)), 1)
    model = Transformer((Attention((head,), "hardmax", 1), ffn), input="tokens")
    path = tmp_path / "tok.json"
    export_model(model, str(path))
    data = json.loads(path.read_text())
    assert data["input"] == "tokens" and "embedding" not in data
    assert data["layers"][0]["heads"][0]["W_O"][0][0] == "1/2"
    again = load_model(str(path))
    X = [[Fraction(1), Fraction(-2), Fraction(3)], [Fraction(2), Fraction(1, 2), Fraction(0)]]
    ctx = ExactContext()
    assert forward(ctx, again, X) == forward(ctx, model, X)


@pytest.mark.parametrize("content, fragment", [
    ("not json", "not valid JSON"),
    ("[]", "top level"),
    ('{"format": "other/1"}', "format"),
    ('{"format": "symbounds-transformer/1", "input": "tokens", "layers": []}', "layers"),
    ('{"format": "symbounds-transformer/1", "input": "tokens", "layers": [{"type": "ffn", "skip": 0.5}]}',
     "numbers must be strings"),
    ('{"format": "symbounds-transformer/1", "input": "tokens", "layers": [{"type": "ffn", "skip": "0", '
     '"W1": [["1"]], "b1": ["0"], "W2": [["1", "2"]], "b2": ["0"]}]}', "W2"),
    ('{"format": "symbounds-transformer/1", "input": "tokens", "layers": [{"type": "ffn", "skip": "__import__", '
     '"W1": [["1"]], "b1": ["0"], "W2": [["1"]], "b2": ["0"]}]}', "not a number"),
    ('{"format": "symbounds-transformer/1", "input": "tokens", "layers": [{"type": "ffn", "skip": "1e99999", '
     '"W1": [["1"]], "b1": ["0"], "W2": [["1"]], "b2": ["0"]}]}', "exponent"),
    ('{"format": "symbounds-transformer/1", "input": "tokens", "layers": [{"type": "magic"}]}', "type"),
    ('{"format": "symbounds-transformer/1", "input": "tokens", "layers": [{"type": "attention", "kind": "softmax", '
     '"tau": "-1", "heads": []}]}', "tau"),
    ('{"format": "symbounds-transformer/1", "input": "vector", "layers": []}', "embedding"),
    ("[" * 100000 + "]" * 100000, "nested"),
], ids=lambda v: v[:30] if isinstance(v, str) else None)
def test_hostile_model_files_give_one_line_errors(tmp_path, content, fragment):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ModelFileError) as e:
        load_model(str(path))
    msg = str(e.value)
    assert "\n" not in msg and fragment in msg


def test_missing_file(tmp_path):
    with pytest.raises(ModelFileError, match="No such file"):
        load_model(str(tmp_path / "absent.json"))


def test_parse_number_is_exact():
    assert parse_number("0.1") == Fraction(1, 10)
    assert parse_number("-7/8") == Fraction(-7, 8)
    assert parse_number("1.5e-3") == Fraction(3, 2000)
    for bad in ("1/0", "0x10", "1_000", "nan", "inf", "", " ", "1/2e3", "1e5000"):
        with pytest.raises(ModelFileError):
            parse_number(bad)


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path):
    path = tmp_path / "f.txt"
    atomic_write(str(path), "good\n")

    class Boom(str):
        pass

    with pytest.raises(TypeError):
        atomic_write(str(path), 12345)  # not text: the write fails midway
    assert path.read_text() == "good\n"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_model_json_weights_keep_precision(small):
    _, model = small
    lo = model_to_json(model, 64)["layers"][0]["heads"][0]["W_K"]
    hi = model_to_json(model, 256)["layers"][0]["heads"][0]["W_K"]
    nz_lo = [v for row in lo for v in row if v != "0"]
    nz_hi = [v for row in hi for v in row if v != "0"]
    assert len(nz_hi[0]) > len(nz_lo[0]) + 40  # more digits at higher precision
    assert abs(Fraction(nz_lo[0]) - Fraction(nz_hi[0])) < Fraction(1, 10**15)
