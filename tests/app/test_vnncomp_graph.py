"""The VNN-COMP workflow on layer graphs: PyTorch MLPs exported by ``torch.onnx.export`` (and the
``symbounds-graph/1`` file they import to), a property that holds answered ``unsat`` with a
certificate ``check`` re-verifies and the independent kernel accepts (a tampered one rejected), one that fails answered ``sat`` with a
witness PyTorch and onnxruntime confirm, and ``--timeout`` honoured on a property no box search
can finish."""

import io
import json
import warnings
from fractions import Fraction

import numpy as np
import onnxruntime as ort
import pytest
import torch
from cli_helpers import run_cli

from symbounds.core.bound import bound
from symbounds.core.boxes import digest
from symbounds.core.graph_file import export_graph
from symbounds.core.onnx_graph import import_onnx_network

BOX = (("0", "1/10"), ("0", "1/10"))
HEAD = ("(declare-const X_0 Real)\n(declare-const X_1 Real)\n{ys}"
        "(assert (>= X_0 0))\n(assert (<= X_0 0.1))\n(assert (>= X_1 0))\n(assert (<= X_1 0.1))\n")


def _export(net, path, double):
    net = net.eval()
    x = torch.zeros(1, 2)
    if double:
        net, x = net.double(), x.double()
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (x,), f, opset_version=17, dynamo=False)
    path.write_bytes(f.getvalue())
    return net


def _nets():
    torch.manual_seed(3)
    L = torch.nn.Linear
    relu = torch.nn.Sequential(L(2, 8), torch.nn.ReLU(), L(8, 1))
    gelu = torch.nn.Sequential(L(2, 6), torch.nn.LayerNorm(6), torch.nn.GELU(), L(6, 2))
    # Y_0 = relu(X_0 - X_1) - relu(X_0 - X_1) = 0: an enclosure of the two ReLUs over a box that
    # crosses the diagonal is as wide as the box, and nothing cancels the two remainders
    absdiff = torch.nn.Sequential(L(2, 2), torch.nn.ReLU(), L(2, 1, bias=False))
    with torch.no_grad():
        absdiff[0].weight.copy_(torch.tensor([[1.0, -1.0], [1.0, -1.0]]))
        absdiff[0].bias.zero_()
        absdiff[2].weight.copy_(torch.tensor([[1.0, -1.0]]))
    return relu, gelu, absdiff


def _property(constraint, outputs=1):
    ys = "".join(f"(declare-const Y_{j} Real)\n" for j in range(outputs))
    return HEAD.format(ys=ys) + constraint + "\n"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    t = tmp_path_factory.mktemp("vnncomp_graph")
    relu, gelu, absdiff = _nets()
    # the ReLU MLP in float64; the GELU one in float32 (onnxruntime has no float64 Erf kernel)
    nets = {"relu": _export(relu, t / "relu.onnx", True), "gelu": _export(gelu, t / "gelu.onnx", False),
            "absdiff": _export(absdiff, t / "absdiff.onnx", True)}
    export_graph(import_onnx_network(str(t / "relu.onnx")), str(t / "relu.graph.json"))
    fails = {}
    rng = np.random.default_rng(0)
    xs = rng.uniform(0, 0.1, (3000, 2))
    for name, out in (("relu", 0), ("gelu", 1)):
        # holds: above the rigorous upper end of `bound` by a margin; fails: a third of inputs violate
        # (one box: the whole box's Taylor-model enclosure, rigorous if wide)
        upper = bound(str(t / f"{name}.onnx"), [a for a, _ in BOX], [b for _, b in BOX], split=0).upper[out]
        net = nets[name]
        with torch.no_grad():
            ys = net(torch.tensor(xs, dtype=next(net.parameters()).dtype)).double().numpy()[:, out]
        assert ys.max() <= upper  # the enclosure holds at sampled points (an independent evaluation)
        k = 2 if name == "gelu" else 1
        y = f"Y_{out}"
        (t / f"{name}_holds.vnnlib").write_text(_property(f"(assert (>= {y} {float(upper) + 0.05!r}))", k))
        q = fails[name] = float(np.quantile(ys, 2 / 3))
        (t / f"{name}_fails.vnnlib").write_text(_property(f"(assert (>= {y} {q!r}))", k))
    (t / "absdiff_hard.vnnlib").write_text(_property("(assert (>= Y_0 0.000000001))"))
    return t, nets, fails


def _certify(capsys, t, net, prop, timeout=60, *extra):
    out = t / f"{net.split('.')[0]}_{prop.split('.')[0]}.txt"  # the certificate beside it: .cert.json
    code, so, se = run_cli(capsys, "certify", "--model", str(t / net), "--spec", str(t / prop),
                           "--timeout", str(timeout), "--result", str(out), *extra)
    return code, so, se, out


def _witness(text):
    """The result file's witness ``((X_i v) ... (Y_j v))``, read as the competition's checker does."""
    body = text.split("\n", 1)[1].replace("\n", " ").strip()[1:-1]
    vals = {}
    for part in body.split(")"):
        part = part.strip().lstrip("(")
        if part:
            name, v = part.split()
            vals[name] = float(v)
    xs = [vals[f"X_{i}"] for i in range(2)]
    ys = [vals[k] for k in sorted(k for k in vals if k.startswith("Y_"))]
    return xs, ys


def _check(capsys, path):
    return run_cli(capsys, "check", str(path))


@pytest.mark.parametrize("name", ["relu", "gelu"])
def test_holds_unsat_certificate_checked(capsys, folder, name):
    t, _, _ = folder
    code, so, se, out = _certify(capsys, t, f"{name}.onnx", f"{name}_holds.vnnlib")
    assert code == 0, se
    assert out.read_text() == "unsat\n"
    cert_path = t / f"{name}_{name}_holds.cert.json"
    cert = json.loads(cert_path.read_text())
    assert cert["model"]["format"] == "symbounds-graph/1"
    code, so, se = _check(capsys, cert_path)
    assert "property certificate valid" in so and "certificate rejected" not in se
    # the independent kernel reads the layer graph too (tests/kernel/test_kernel_graph.py)
    assert "independent kernel: accepted: " in so
    assert code == 0


def test_tampered_certificate_rejected(capsys, folder, tmp_path):
    t, _, _ = folder
    code, _, se, _ = _certify(capsys, t, "relu.onnx", "relu_holds.vnnlib")
    assert code == 0, se
    cert = json.loads((t / "relu_relu_holds.cert.json").read_text())

    def rejected(c, why):
        p = tmp_path / "bad.json"
        p.write_text(json.dumps(c))
        code, so, se = _check(capsys, p)
        assert code == 1 and "property certificate valid" not in so, so
        assert why in se, se

    # a leaf's bound moved: the leaves no longer cover the box (or are no cell of its bisection)
    c = json.loads(json.dumps(cert))
    c["leaves"][0][1][0] = str(Fraction(c["leaves"][0][1][0]) - Fraction(1, 8))
    rejected(c, "certificate rejected")
    # a weight changed, the digest left: refused by the digest
    c = json.loads(json.dumps(cert))
    last = c["model"]["nodes"][-1]
    last["b"][0] = str(Fraction(last["b"][0]) + 10)
    rejected(c, "does not match its digest")
    # the same weight change with its digest renewed: the re-evaluation refutes the leaves
    c["model_sha256"] = digest(c["model"])
    rejected(c, "not shown unreachable")


@pytest.mark.parametrize("name", ["relu", "gelu"])
def test_fails_sat_witness_confirmed(capsys, folder, name):
    t, nets, fails = folder
    code, so, se, out = _certify(capsys, t, f"{name}.onnx", f"{name}_fails.vnnlib")
    assert code == 1, se
    text = out.read_text()
    assert text.startswith("sat\n")
    assert "onnxruntime: confirms" in so
    xs, ys = _witness(text)
    assert 0 <= xs[0] <= 0.1 and 0 <= xs[1] <= 0.1
    out_j = 1 if name == "gelu" else 0
    thr = fails[name]
    net = nets[name]
    dtype = next(net.parameters()).dtype
    with torch.no_grad():
        y_torch = net(torch.tensor([xs], dtype=dtype)).double().numpy().ravel()
    sess = ort.InferenceSession(str(t / f"{name}.onnx"), providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0].name
    y_ort = sess.run(None, {inp: np.array([xs], dtype=np.float64 if dtype == torch.float64 else np.float32)})[0]
    assert y_torch[out_j] >= thr and float(y_ort.ravel()[out_j]) >= thr
    assert abs(ys[out_j] - y_torch[out_j]) < 1e-5  # the written outputs are the network's there


def test_graph_file_certify_spec(capsys, folder, tmp_path):
    """certify --spec (no --result) on the symbounds-graph/1 file: proved, certificate written."""
    t, _, _ = folder
    cert = tmp_path / "c.json"
    code, so, se = run_cli(capsys, "certify", "--model", str(t / "relu.graph.json"),
                           "--spec", str(t / "relu_holds.vnnlib"), "--out", str(cert))
    assert code == 0, se
    assert "verdict: proved" in so
    code, so, _ = _check(capsys, cert)
    assert "property certificate valid" in so and "independent kernel: accepted" in so and code == 0
    code, so, _ = run_cli(capsys, "certify", "--model", str(t / "relu.graph.json"),
                          "--spec", str(t / "relu_fails.vnnlib"))
    assert code == 1 and "verdict: refuted" in so


def test_timeout_honoured(capsys, folder):
    """Y_0 = 0 everywhere, the threshold 10^-9 above it: every box that crosses the diagonal must be
    narrower than about 10^-9 to decide, so the search runs into its timeout."""
    t, _, _ = folder
    T = 3.0
    code, so, se, out = _certify(capsys, t, "absdiff.onnx", "absdiff_hard.vnnlib", T, "--json")
    assert code == 3, se
    assert out.read_text() == "timeout\n"
    row = json.loads(so)["rows"][0]
    assert row["answer"] == "timeout"
    # the instance's own clock (from the worker's start, loading included): within 10% of T
    assert 0.9 * T <= row["seconds"] <= 1.1 * T + 1.0


def test_vnncomp_csv_on_graphs(capsys, folder, tmp_path):
    t, _, _ = folder
    csv = t / "instances.csv"
    csv.write_text("relu.onnx,relu_holds.vnnlib,60\nrelu.onnx,relu_fails.vnnlib,60\n"
                   "relu.graph.json,relu_holds.vnnlib,60\n")
    res = tmp_path / "res"
    code, so, se = run_cli(capsys, "vnncomp", str(csv), "--results", str(res), "--json", "--quiet")
    assert code == 0, se
    rows = json.loads(so)["rows"]
    assert [r["answer"] for r in rows] == ["unsat", "sat", "unsat"]
    assert rows[1]["onnxruntime"]["confirms"] and rows[1]["witness"]["checked"] == "exact"
    for r in (rows[0], rows[2]):
        code, so, _ = _check(capsys, r["certificate"])
        assert "property certificate valid" in so
