"""Every `symbounds` command in the README's shell blocks runs, with the exit code the README
promises (0 unless stated).  Commands that take more than a few seconds run as a small stand-in
of the same shape (listed in STAND_INS, and said next to the command in the README); the
full-size commands run under `-m slow`."""

import json
import re
import shlex
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from flint import fmpq

from symbounds import BallContext, forward, load_model
from symbounds.app.cli import main

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

#: README command -> the stand-in the default suite runs (same flags, a smaller instance).
STAND_INS = {
    "symbounds certify --eps 1/25 --workers 2": "symbounds certify --eps 1/4 --workers 2",
    "symbounds sweep --eps 1/2,1/4 --d 1,2 --holder 1 --bound 1 --target \"sin(x1)/2\" "
    "--target \"sin(x1+x2)/2\" --certify --out table.csv":
        "symbounds sweep --eps 1/2 --d 1,2 --holder 1 --bound 1 --target \"sin(x1)/2\" "
        "--target \"sin(x1+x2)/2\" --certify --out table.csv",
    "symbounds pou --manifold curve --ambient 10": "symbounds pou --manifold curve --ambient 10 --eps 1/2",
    "symbounds interp --random 20,50,16,3 --seed 1": "symbounds interp --random 4,10,16,3 --seed 1",
    "symbounds interp --random 10,100,16,1 --attention softmax":
        "symbounds interp --random 3,10,16,1 --attention softmax",
    "symbounds sweep --eps 1/2,1/4,1/8,1/16,1/32 --holder 1 --bound 1 --target \"sin(x1)/2\" --out table.csv":
        "symbounds sweep --eps 1/2,1/4 --holder 1 --bound 1 --target \"sin(x1)/2\" --out table.csv",
    "symbounds plot --kind leakage --M-values 500,1743,10000,100000 --context fp --out leakage.png":
        "symbounds plot --kind leakage --eps 1/2 --M-values 500,100000 --context fp --out leakage.png",
    "symbounds tighten --eps 1/2": "symbounds tighten --eps 1/2 --what M",
    "symbounds tikhonov --eps 1e-4 --epochs 50000 --plot fig1a.png":
        "symbounds tikhonov --eps 1e-4 --epochs 30 --size 3,10,4 --plot fig1a.png",
    "symbounds tikhonov --eps 1e-4 --epochs 2000 --size 3,10,4 --plot quick.png":
        "symbounds tikhonov --eps 1e-4 --epochs 30 --size 3,10,4 --plot quick.png",
    "symbounds tikhonov --warm-start --epochs 5000,10000,50000 --plot fig1b.png":
        "symbounds tikhonov --warm-start --epochs 10,20,30 --size 3,10,4 --plot fig1b.png",
}

#: exit codes the README states for a command (everything else: 0)
EXPECTED = {"symbounds chain": 1, "symbounds chain --json --out chain.json": 1}

DATASET = {"d": 2, "sequences": [{"input": [["0", "1"], ["1", "0"], ["1/2", "1/2"]], "target": [["3", "3"]]},
                                  {"input": [["0", "1"], ["2", "2"]], "target": [["-1", "4"], ["5", "5"]]}]}


def readme_commands() -> list[str]:
    """The `symbounds ...` lines of the README's ```sh blocks, in order, comments stripped."""
    text = README.read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = re.split(r"\s+#\s", line)[0].strip()
            m = re.search(r"(?:^|&& \.venv/bin/)(symbounds .*)$", line)
            if m:
                out.append(m.group(1).strip())
            elif line.startswith("symbounds"):
                out.append(line)
    return out


def _run(cmd: str, tmp_path, monkeypatch) -> int:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dataset.json").write_text(json.dumps(DATASET))
    (tmp_path / "docs").mkdir(exist_ok=True)  # the shipped example dataset, at the path the README names
    shutil.copy(ROOT / "docs" / "dataset.json", tmp_path / "docs" / "dataset.json")
    vnnlib = re.search(r"<!-- readme-snippet: own-network-vnnlib -->\s*```lisp\n(.*?)```", README.read_text(), re.S)
    (tmp_path / "prop.vnnlib").write_text(vnnlib.group(1))
    (tmp_path / "instances.csv").write_text("net.onnx,prop.vnnlib,60\n")  # the README's VNN-COMP folder
    _own_mlp(tmp_path)
    _own_encoder(tmp_path)
    argv = shlex.split(cmd)[1:]
    return main(argv)


def _own_mlp(folder: Path) -> None:
    """The README's PyTorch MLP (its snippet, run: mlp.onnx) and its property (mlp.vnnlib), once."""
    if (folder / "mlp.onnx").exists():
        return
    import warnings

    text = README.read_text()
    prop = re.search(r"<!-- readme-snippet: own-mlp-vnnlib -->\s*```lisp\n(.*?)```", text, re.S)
    (folder / "mlp.vnnlib").write_text(prop.group(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(_snippet("own-mlp"), "README.md", "exec"), {})  # our own README, written in folder


def _own_encoder(folder: Path) -> None:
    """The README's encoder block (its snippet, run: encoder.onnx) and its property, once."""
    if (folder / "encoder.onnx").exists():
        return
    import warnings

    text = README.read_text()
    prop = re.search(r"<!-- readme-snippet: own-encoder-vnnlib -->\s*```lisp\n(.*?)```", text, re.S)
    (folder / "encoder.vnnlib").write_text(prop.group(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(_snippet("own-encoder"), "README.md", "exec"), {})  # our own README, written in folder


def test_the_readme_has_its_commands():
    cmds = readme_commands()
    assert "symbounds pou" in cmds and any(c.startswith("symbounds check") for c in cmds)
    assert len(cmds) >= 15
    for c in STAND_INS:  # a stand-in for a command that is no longer in the README is stale
        assert c in cmds, c


def test_readme_commands_run_in_order(tmp_path, monkeypatch, capsys):
    """In README order (certify writes cert.json before check reads it; sweep writes table.json
    before plot reads it)."""
    for cmd in readme_commands():
        code = _run(STAND_INS.get(cmd, cmd), tmp_path, monkeypatch)
        err = capsys.readouterr().err
        assert code == EXPECTED.get(cmd, 0), f"{cmd}: exit {code}: {err[-300:]}"
    _readme_snippets_read_what_the_commands_wrote(tmp_path)


def _snippet(name: str) -> str:
    m = re.search(rf"<!-- readme-snippet: {name} -->\s*```python\n(.*?)```", README.read_text(), re.S)
    assert m, name
    return m.group(1)


def _readme_snippets_read_what_the_commands_wrote(folder: Path) -> None:
    """The mpmath snippet runs on the file the README's pou command exported, and the fractions
    snippet on the model the README's interp command exported from the shipped dataset, which it
    maps onto its targets exactly."""
    r = subprocess.run([sys.executable, "-c", _snippet("mpmath-reevaluation")], cwd=folder, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-300:]
    ctx = BallContext(128)  # T(0.3) of the exported network, again in Arb balls from the exact file
    T = forward(ctx, load_model(str(folder / "pou.json")), (Fraction(3, 10),))
    with ctx.scope():
        assert abs(T - ctx.convert(Fraction(r.stdout.strip()))) < fmpq(1, 10**20)
    namespace = {}
    exec(compile(_snippet("fractions-rerun"), "README.md", "exec"), namespace)  # our own README
    data = json.loads((ROOT / "docs" / "dataset.json").read_text())
    for seq in data["sequences"]:
        tokens = [[Fraction(v) for v in t] for t in seq["input"]]
        assert namespace["rerun"](str(folder / "interp.json"), tokens) == {tuple(Fraction(v) for v in t)
                                                                             for t in seq["target"]}


@pytest.mark.slow
def test_readme_commands_full_size(tmp_path, monkeypatch, capsys):
    for cmd in readme_commands():
        code = _run(cmd, tmp_path, monkeypatch)
        assert code == EXPECTED.get(cmd, 0), cmd


@pytest.mark.parametrize("cmd, code", [
    ("symbounds pou --M 500", 1),  # "symbounds pou --M 500 refutes the leakage budget E3"
    ("symbounds pou --eps 2", 2),
])
def test_readme_stated_exit_codes(cmd, code, tmp_path, monkeypatch):
    assert _run(cmd, tmp_path, monkeypatch) == code
