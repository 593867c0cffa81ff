"""The VNN-COMP workflow: ONNX in, the competition's result file out, certificates that check
re-verifies, the instances.csv runner, and its bad input (one line, exit 2)."""

import gzip
import json
import shutil
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from cli_helpers import run_cli

from symbounds.core.modelfile import model_from_json
from symbounds.core.onnx_export import export_onnx
from symbounds.core.vnncomp import VnncompError, read_instances, read_shipped, result_text
from symbounds.core.vnnlib import SpecError, parse_vnnlib

DATA = Path(__file__).resolve().parents[1] / "data"
HOLDS = DATA / "holds.vnnlib"  # -0.6 < Y_0 < 2.5 on [0,1]^2
FAILS = DATA / "fails.vnnlib"  # unsafe: 2.25 <= Y_0 <= 10 or Y_0 <= -5
#: just above the largest sampled value of the residual model on [0,1]^2: a long search
HARD = "(assert (>= Y_0 2.3002947863371))"


def _model_json(**tamper):
    m = json.loads((DATA / "residual_model.json").read_text())
    if tamper:
        m["layers"][-1]["b2"][0] = tamper["b2_0"]  # b2[0] is added to the readout Y_0 exactly
    return m


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    t = tmp_path_factory.mktemp("vnncomp")
    export_onnx(model_from_json(_model_json()), str(t / "res.onnx"))
    export_onnx(model_from_json(_model_json(b2_0="1/4")), str(t / "tampered.onnx"))
    shutil.copy(HOLDS, t / "holds.vnnlib")
    shutil.copy(FAILS, t / "fails.vnnlib")
    (t / "hard.vnnlib").write_text(HOLDS.read_text().rsplit("(assert (or", 1)[0] + HARD + "\n")
    return t


def _ort(path, x):
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = s.get_inputs()[0].name
    return s.run(None, {name: np.array(x, dtype=np.float64)})[0].ravel()


def _witness(text):
    """The result file's witness, read as the competition's checker reads it."""
    lines = text.split("\n", 1)
    body = lines[1].replace("\n", " ").strip()
    assert body[0] == "(" and body[-1] == ")"
    xs, ys = [], []
    for part in body[1:-1].split(")"):
        part = part.strip()
        if part:
            name, num = part[1:].split()
            (xs if name.startswith("X_") else ys).append(float(num))
    return xs, ys


def test_a_property_that_holds_is_unsat_with_a_certificate_check_accepts(capsys, folder):
    res, cert = folder / "r_holds.txt", folder / "r_holds.cert.json"
    code, out, err = run_cli(capsys, "certify", "--model", str(folder / "res.onnx"), "--spec", str(folder / "holds.vnnlib"),
                             "--timeout", "120", "--result", str(res))
    assert code == 0, err
    assert res.read_text() == "unsat\n"
    code, out, err = run_cli(capsys, "check", str(cert))
    assert code == 0 and "property certificate valid" in out, err
    assert "independent kernel: accepted: " in out and "unsat" in out.rsplit("independent kernel", 1)[1]
    # the certificate of the network re-checked against a tampered network: rejected
    c = json.loads(cert.read_text())
    from symbounds.core.boxes import digest

    c["model"] = _model_json(b2_0="1/4") | {"precision_bits": c["model"]["precision_bits"]}
    c["model_sha256"] = digest(c["model"])
    (folder / "tampered.cert.json").write_text(json.dumps(c))
    code, out, err = run_cli(capsys, "check", str(folder / "tampered.cert.json"))
    assert code == 1 and "rejected" in err
    # a gap in the cover: rejected
    c = json.loads(cert.read_text())
    c["leaves"].pop(len(c["leaves"]) // 2)
    (folder / "gap.cert.json").write_text(json.dumps(c))
    code, out, err = run_cli(capsys, "check", str(folder / "gap.cert.json"))
    assert code == 1 and "do not cover" in err


def test_a_property_that_fails_is_sat_with_a_witness_onnxruntime_confirms(capsys, folder):
    res = folder / "r_fails.txt"
    code, out, err = run_cli(capsys, "certify", "--model", str(folder / "res.onnx"), "--spec", str(folder / "fails.vnnlib"),
                             "--timeout", "120", "--result", str(res))
    assert code == 1, err
    text = res.read_text()
    assert text.startswith("sat\n(")
    xs, ys = _witness(text)
    assert len(xs) == 2 and len(ys) == 1 and all(0 <= v <= 1 for v in xs)
    y = _ort(folder / "res.onnx", xs)  # independent: the graph run by onnxruntime at the written point
    assert (2.25 <= y[0] <= 10) or y[0] <= -5
    assert abs(y[0] - ys[0]) < 1e-9
    assert "onnxruntime: confirms" in out


def test_a_tampered_network_whose_property_fails_is_never_unsat(capsys, folder):
    """Y_0 + 1/4 reaches 2.5 at (1, 1) (onnxruntime says so, independently): the property that
    held fails, and the answer is sat, never unsat."""
    assert _ort(folder / "tampered.onnx", [1.0, 1.0])[0] >= 2.5
    res = folder / "r_tampered.txt"
    code, out, err = run_cli(capsys, "certify", "--model", str(folder / "tampered.onnx"), "--spec",
                             str(folder / "holds.vnnlib"), "--timeout", "120", "--result", str(res))
    assert code == 1 and res.read_text().startswith("sat\n")
    assert not (folder / "r_tampered.cert.json").exists()


def test_the_timeout_is_honoured(capsys, folder):
    res = folder / "r_hard.txt"
    T = 4.0
    t0 = time.monotonic()
    code, out, err = run_cli(capsys, "certify", "--model", str(folder / "res.onnx"), "--spec", str(folder / "hard.vnnlib"),
                             "--timeout", str(T), "--result", str(res), "--json")
    elapsed = time.monotonic() - t0
    answer = res.read_text().strip()
    assert code == 3 and answer in ("timeout", "unknown"), err
    assert elapsed <= 1.1 * T + 0.5  # the child is ended at the timeout + 5% at the latest
    if answer == "timeout":
        assert elapsed >= 0.8 * T
    assert json.loads(out)["rows"][0]["answer"] == answer


def test_vnncomp_runs_an_instances_csv_with_gz_files(capsys, folder):
    (folder / "res.onnx.gz").write_bytes(gzip.compress((folder / "res.onnx").read_bytes()))
    (folder / "fails.vnnlib.gz").write_bytes(gzip.compress((folder / "fails.vnnlib").read_bytes()))
    (folder / "instances.csv").write_text("res.onnx,holds.vnnlib,120\nres.onnx.gz,fails.vnnlib.gz,120.0\n")
    out_dir = folder / "results"
    code, out, err = run_cli(capsys, "vnncomp", str(folder / "instances.csv"), "--results", str(out_dir), "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert [r["answer"] for r in summary["rows"]] == ["unsat", "sat"]
    assert summary["counts"]["unsat"] == 1 and summary["counts"]["sat"] == 1
    assert "[1/2]" in err and "[2/2]" in err
    files = sorted(p.name for p in out_dir.iterdir())
    assert len([f for f in files if f.endswith(".txt")]) == 2 and len([f for f in files if f.endswith(".cert.json")]) == 1
    code, out, err = run_cli(capsys, "check", summary["rows"][0]["certificate"])
    assert code == 0, err


@pytest.mark.parametrize("csv, why", [
    ("res.onnx,holds.vnnlib\n", "expected 'onnx,vnnlib,timeout'"),
    ("res.onnx,holds.vnnlib,soon\n", "is not a number"),
    ("res.onnx,holds.vnnlib,-1\n", "not in (0, 604800]"),
    ("missing.onnx,holds.vnnlib,10\n", "no such file"),
    ("", "no instances"),
])
def test_a_malformed_csv_or_a_missing_file_exits_2_with_one_line(capsys, folder, csv, why):
    (folder / "bad.csv").write_text(csv)
    code, out, err = run_cli(capsys, "vnncomp", str(folder / "bad.csv"), "--results", str(folder / "bad_results"))
    assert code == 2 and why in err and len(err.strip().splitlines()) == 1 and out == ""


def test_a_gzip_bomb_is_refused_with_one_line(capsys, folder):
    """1 GiB of zeros compressed to about a megabyte: refused after at most the limit is produced."""
    bomb = folder / "bomb.vnnlib.gz"
    z = gzip.compress(b"\0" * 2**24, compresslevel=9)
    bomb.write_bytes(z * 64)  # 64 concatenated members: 1 GiB decompressed
    t0 = time.monotonic()
    code, out, err = run_cli(capsys, "certify", "--model", str(folder / "res.onnx"), "--spec", str(bomb),
                             "--timeout", "60", "--result", str(folder / "r_bomb.txt"))
    assert code == 2 and "decompresses to more than" in err and len(err.strip().splitlines()) <= 2
    assert (folder / "r_bomb.txt").read_text() == "error\n"
    assert time.monotonic() - t0 < 30
    with pytest.raises(VnncompError, match="decompresses to more than 1 MiB"):
        read_shipped(str(bomb), VnncompError, 2**20)
    (folder / "bomb.csv").write_text("res.onnx,bomb.vnnlib.gz,60\n")
    code, out, err = run_cli(capsys, "vnncomp", str(folder / "bomb.csv"), "--results", str(folder / "bomb_results"),
                             "--quiet")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "decompresses to more than" in err


def test_bound_and_certify_take_onnx_and_name_a_file_that_is_neither(capsys, folder):
    code, out, err = run_cli(capsys, "bound", str(folder / "res.onnx"), "--box", "0:1,0:1", "--json")
    assert code == 0, err
    b = json.loads(out)
    y = _ort(folder / "res.onnx", [0.5, 0.5])[0]  # onnxruntime's value lies in the enclosure
    assert Fraction(b["lower_exact"]) <= Fraction(y) <= Fraction(b["upper_exact"])
    (folder / "noise.bin").write_bytes(b"\x00\x01hello")
    code, out, err = run_cli(capsys, "bound", str(folder / "noise.bin"), "--box", "0:1")
    assert code == 2 and "neither a model file" in err and len(err.strip().splitlines()) == 1
    (folder / "noise.onnx").write_bytes(b"\x08\x07garbage")
    code, out, err = run_cli(capsys, "certify", "--model", str(folder / "noise.onnx"), "--spec", str(HOLDS))
    assert code == 2 and "not an ONNX file" in err and len(err.strip().splitlines()) == 1


def test_result_text_follows_the_competition_format():
    assert result_text("unsat") == "unsat\n" and result_text("timeout") == "timeout\n"
    w = {"x": ["1/2", "3"], "y_value": ["1/3"]}
    text = result_text("sat", w)
    assert text.startswith("sat\n((X_0 0.5)\n(X_1 3.0)\n(Y_0 0.333")
    assert _witness(text)[0] == [0.5, 3.0]
    with pytest.raises(ValueError):
        result_text("holds")


def test_instances_paths_are_relative_to_the_csv(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "i.csv").write_text("onnx/a.onnx, vnnlib/p.vnnlib ,30\n\n/abs/b.onnx,q.vnnlib,1e1\n")
    inst = read_instances(str(tmp_path / "sub" / "i.csv"))
    assert inst[0].network == str(tmp_path / "sub" / "onnx" / "a.onnx")
    assert inst[0].spec == str(tmp_path / "sub" / "vnnlib" / "p.vnnlib") and inst[0].timeout == 30
    assert inst[1].network == "/abs/b.onnx" and inst[1].timeout == 10 and inst[1].line == 3


def test_vnnlib_conjunctions_may_nest_disjunctions():
    head = "(declare-const X_0 Real)(declare-const Y_0 Real)(declare-const Y_1 Real)"
    spec = parse_vnnlib(head + "(assert (and (>= X_0 0) (<= X_0 1) (or (and (>= Y_0 Y_1)) (<= Y_1 -1))))")
    assert spec.lo == (0,) and spec.hi == (1,) and len(spec.unsafe) == 2
    with pytest.raises(SpecError, match="several input regions"):
        parse_vnnlib(head + "(assert (or (and (>= X_0 0) (<= X_0 1) (>= Y_0 0)) (and (>= X_0 2) (<= X_0 3))))")
