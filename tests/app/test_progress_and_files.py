"""What a user sees around the results: --version, `written: PATH` for every file written,
progress off a terminal (a short line every few seconds, nothing under --quiet), Ctrl-C with
worker processes, --digits and aligned text tables."""

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from fractions import Fraction
from pathlib import Path

import flint
import pytest
from cli_helpers import run_cli  # noqa: E402

from symbounds.app import args as app_args
from symbounds.app.args import Bar
from symbounds.app.report import _table, enclosure_text, interp_json, interp_text, pou_json, pou_text
from symbounds.core.exact import parse_number
from symbounds.core.version import __version__

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--alpha", "1/2", "--holder", "1/2", "--bound", "1/4", "--eps", "1/2", "--target", "sin(x1)/4"]


# ------------------------------------------------------------------------------------------
# --version


def test_version_matches_the_package_metadata(capsys):
    code, out, err = run_cli(capsys, "--version")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert code == 0 and err == ""
    assert out == f"symbounds {project['version']}\n" and project["version"] == __version__


# ------------------------------------------------------------------------------------------
# written: PATH


def _written(err: str) -> list[str]:
    return [line[len("written: "):] for line in err.splitlines() if line.startswith("written: ")]


def test_every_written_file_is_named_on_stderr(tmp_path, capsys):
    t = tmp_path
    runs = [
        (["pou", *SMALL, "--quiet", "--points", "2", "--out", str(t / "r.txt"), "--export", str(t / "m.json")],
         [t / "m.json", t / "r.txt"]),
        (["interp", "--random", "3,6,2,2", "--quiet", "--out", str(t / "i.json"), "--json",
          "--export", str(t / "mi.json")], [t / "mi.json", t / "i.json"]),
        (["certify", *SMALL, "--quiet", "--out", str(t / "c.json")], [t / "c.json"]),
        (["sweep", "--eps", "1/2", "--quiet", "--out", str(t / "s.csv")], [t / "s.csv", t / "s.json"]),
        (["latex", "tables", "--out", str(t / "tables.tex")], [t / "tables.tex"]),
        (["plot", "--kind", "size", "--table", str(t / "s.json"), "--out", str(t / "size.png")], [t / "size.png"]),
        (["tighten", "--eps", "1/2", "--what", "M", "--criterion", "proof", "--quiet", "--out", str(t / "t.txt")],
         [t / "t.txt"]),
    ]
    for argv, files in runs:
        code, out, err = run_cli(capsys, *argv)
        assert code == 0, (argv[0], err)
        assert _written(err) == [str(f) for f in files], (argv[0], err)
        assert all(f.is_file() and f.stat().st_size > 0 for f in files)
        assert "written:" not in out  # stdout keeps only the report (JSON stays parseable)


def test_model_commands_name_their_files_on_stderr(tmp_path, capsys):
    """export, import and certify --model --out: ``written: PATH`` on stderr, never on stdout."""
    t = tmp_path
    model = str(Path(__file__).resolve().parents[1] / "data" / "residual_model.json")
    runs = [
        (["pou", *SMALL, "--quiet", "--points", "2", "--export", str(t / "m.json")], [t / "m.json"]),
        (["export", str(t / "m.json"), "--onnx", str(t / "m.onnx")], [t / "m.onnx"]),
        (["import", str(t / "m.onnx"), "--out", str(t / "back.json")], [t / "back.json"]),
        (["certify", "--model", str(t / "m.json"), "--target", "sin(x1)/4", "--eps", "1/2", "--quiet",
          "--out", str(t / "c.json")], [t / "c.json"]),
        (["certify", "--model", model, "--spec", str(Path(model).parent / "holds.vnnlib")], []),
    ]
    for argv, files in runs:
        code, out, err = run_cli(capsys, *argv)
        assert code == 0, (argv[0], err)
        assert _written(err) == [str(f) for f in files], (argv[0], err)
        assert all(f.is_file() and f.stat().st_size > 0 for f in files)
        assert "written:" not in out


@pytest.mark.parametrize("argv", [
    ["pou", *SMALL, "--quiet", "--points", "2", "--json"],
    ["interp", "--random", "3,6,2,2", "--quiet", "--json"],
    ["tighten", "--eps", "1/2", "--what", "M", "--criterion", "proof", "--quiet", "--json"],
])
def test_out_takes_the_report_off_stdout(tmp_path, capsys, argv):
    """One convention for every report: ``--out FILE`` writes it to FILE instead of stdout (with
    --json as without), and stderr names the file; without --out the same report is on stdout."""
    code, printed, _ = run_cli(capsys, *argv)
    assert code == 0
    report = tmp_path / "report.json"
    code, out, err = run_cli(capsys, *argv, "--out", str(report))
    assert code == 0 and out == "" and _written(err) == [str(report)]
    keep = lambda doc: {k: v for k, v in doc.items() if k not in ("timings", "seconds", "results")}  # noqa: E731
    assert keep(json.loads(report.read_text())) == keep(json.loads(printed))


def test_nothing_written_means_no_written_line(capsys):
    code, _, err = run_cli(capsys, "pou", *SMALL, "--quiet", "--points", "2")
    assert code == 0 and _written(err) == []


# ------------------------------------------------------------------------------------------
# progress


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


class Args:
    quiet = False
    command = "certify"


def test_off_a_terminal_a_line_at_most_every_interval():
    clock, stream = FakeClock(), io.StringIO()
    bar = Bar(Args(), "box", stream=stream, clock=clock, interval=5)
    assert bar.bar is None  # a StringIO is no terminal: no tqdm bar
    for step in range(1, 26):  # one call per simulated second, 25 s
        clock.t += 1
        bar.volume(Fraction(step, 25), 10 * step)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 5  # at 5, 10, 15, 20, 25 s
    assert lines[0] == "symbounds: certify: 20% of the cube's volume certified, 50 boxes, 5 s"
    assert lines[-1] == "symbounds: certify: 100% of the cube's volume certified, 250 boxes, 25 s"


def test_the_estimate_of_the_volume_and_time_left():
    """One second per call, 1/25 of the volume each: at 5 s (4 s after the first call, 4/25 more
    proved) 80% is left, 20 s at that rate; at 100% nothing is estimated."""
    clock, stream = FakeClock(), io.StringIO()
    bar = Bar(Args(), "box", stream=stream, clock=clock, interval=5)
    for step in range(1, 26):
        clock.t += 1
        bar.volume(Fraction(step, 25), 10 * step, estimate=True)
    lines = stream.getvalue().splitlines()
    assert lines[0] == ("symbounds: certify: 20% of the cube's volume certified, 50 boxes, 80% left "
                        "(about 20 s more at this rate), 5 s")
    assert lines[-1] == "symbounds: certify: 100% of the cube's volume certified, 250 boxes, 25 s"


def test_the_percentage_is_rounded_down():
    clock, stream = FakeClock(), io.StringIO()
    bar = Bar(Args(), "box", stream=stream, clock=clock, interval=0)
    bar.volume(Fraction(999, 1000), 7)  # 99.9 %: never shown as 100 %
    bar(3, 8, "128 bits")
    bar.stage("placing tokens")
    assert stream.getvalue().splitlines() == [
        "symbounds: certify: 99% of the cube's volume certified, 7 boxes, 0 s",
        "symbounds: certify: 3 of 8 boxes (128 bits), 0 s",
        "symbounds: certify: placing tokens, 0 s",
    ]


def test_quiet_prints_nothing():
    class Quiet(Args):
        quiet = True

    stream = io.StringIO()
    bar = Bar(Quiet(), "box", stream=stream, interval=0)
    bar.volume(Fraction(1, 2), 3)
    bar(1, 2)
    bar.stage("x")
    assert stream.getvalue() == ""


def _progress_lines(err, command):
    return [line for line in err.splitlines() if line.startswith(f"symbounds: {command}: ")]


@pytest.fixture
def every_call(monkeypatch):
    """Progress lines on every call (the real interval is 5 s; these runs take less)."""
    monkeypatch.setattr(Bar, "INTERVAL", 0.0)


def test_certify_reports_the_certified_volume(capsys, every_call):
    code, _, err = run_cli(capsys, "certify", *SMALL)
    assert code == 0
    lines = _progress_lines(err, "certify")
    pcts = [int(re.search(r": (\d+)% of the cube's volume certified, (\d+) boxes(, \d+% left.*)?, \d+ s$", x).group(1))
            for x in lines]
    assert len(pcts) >= 5 and pcts == sorted(pcts) and pcts[-1] == 100 and all(0 <= p <= 100 for p in pcts)
    code, _, err = run_cli(capsys, "certify", *SMALL, "--quiet")
    assert code == 0 and err == ""


def test_certify_model_passes_the_exact_proved_volume():
    """progress(fraction, evaluated): the fraction is the sum of the proved boxes' volumes, computed
    here again from the boxes the run returns."""
    from symbounds.core.boxes import CertifyOptions
    from symbounds.papers import shi_liao as sl
    from symbounds.papers.shi_liao.certificate import certify_instance

    seen = []
    inst = sl.Instance(d=2, alpha=1, C_H=1, B=1, eps=Fraction(1, 2), target="sin(x1+x2)/2")
    _, res = certify_instance(inst, CertifyOptions(initial=2, tight=False), lambda f, n: seen.append((f, n)))
    assert res.verdict == "proved"
    total = sum(((b.hi[0] - b.lo[0]) * (b.hi[1] - b.lo[1]) for b, _ in res.boxes), Fraction(0))
    assert total == 1 and seen[-1] == (total, res.evaluated)
    assert [n for _, n in seen] == list(range(1, res.evaluated + 1))
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))
    assert res.evaluated > len(res.boxes)  # some boxes were bisected: a count had no fixed total


def test_long_runs_without_a_bar_report_progress(tmp_path, capsys, every_call):
    code, _, err = run_cli(capsys, "plot", "--kind", "leakage", "--eps", "1/2", "--M-values", "500,100000",
                           "--out", str(tmp_path / "leakage.png"))
    assert code == 0
    assert _progress_lines(err, "plot")[-1].startswith("symbounds: plot: 2 of 2 runs (M = 100000)")
    code, _, err = run_cli(capsys, "interp", "--random", "3,10,16,1", "--attention", "softmax")
    assert code == 0
    steps = _progress_lines(err, "interp")
    assert any("placing tokens at 256 bits" in s for s in steps) and any("segments, exactly" in s for s in steps)
    code, _, err = run_cli(capsys, "pou", "--manifold", "circle", "--eps", "1/2", "--points", "2")
    assert code == 0
    whole = [x for x in _progress_lines(err, "pou") if "parameter domain" in x]
    assert whole and whole[-1].startswith("symbounds: pou: 100% of the manifold's parameter domain certified")


def test_ci_runs_stay_quiet_enough():
    """Under CI (no terminal) a short run prints no progress at all: the first line comes after 5 s."""
    r = subprocess.run([sys.executable, "-m", "symbounds", "rate", "--n", "1000"], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "CI": "true"})
    assert r.returncode == 0 and r.stderr == ""
    assert Bar.INTERVAL >= 5 and app_args.show_progress(type("A", (), {"quiet": False})()) is False


# ------------------------------------------------------------------------------------------
# Ctrl-C with worker processes


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


@pytest.mark.parametrize("delay", [0.0, 0.3, 0.9])
def test_ctrl_c_with_workers_is_one_line_and_exit_130(tmp_path, delay):
    """Ctrl-C reaches the whole process group; without workers ignoring it, each worker that was
    hit prints its own traceback (or dies mid-message and the parent fails on the broken pipe),
    depending on when the interrupt lands: hence several moments.  (Arb boxes: a run long enough
    to be interrupted.)"""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CI": "true"}
    p = subprocess.Popen([sys.executable, "-m", "symbounds", "certify", "--eps", "1/20", "--workers", "2", "--quiet",
                          "--arb-only"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                         start_new_session=True)
    deadline = time.monotonic() + 60
    while len(_children(p.pid)) < 2 and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # wait for the pool: an interrupt before that would test nothing
    time.sleep(delay)
    assert p.poll() is None, "finished before the interrupt"
    os.killpg(p.pid, signal.SIGINT)  # as Ctrl-C does: to the whole process group, workers included
    out, err = p.communicate(timeout=60)
    assert err.splitlines() == ["symbounds: interrupted"], err
    assert p.returncode == 130


def test_kill_9_of_a_worker_does_not_hang_certify(tmp_path):
    """``kill -9`` of one worker process a second into ``certify --workers 2`` (as the kernel's
    OOM killer would): the lost boxes are evaluated again, the run ends proved, and the
    certificate it writes checks.  (Arb boxes at P = 100: about 10 s on an idle 2-core machine, so
    the kill lands while the workers run; at P = 40 an idle machine finished first.)"""
    from symbounds.core.certificate import load_certificate
    from symbounds.papers import check_certificate

    env = {**os.environ, "PYTHONPATH": str(ROOT), "CI": "true"}
    out = tmp_path / "cert.json"
    p = subprocess.Popen([sys.executable, "-m", "symbounds", "certify", "--eps", "1/25", "--workers", "2", "--quiet",
                          "--arb-only", "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(_children(p.pid)) < 2 and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(1)
        kids = _children(p.pid)
        assert p.poll() is None and kids, "finished before the kill"
        os.kill(kids[0], signal.SIGKILL)
        stdout, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 0, err
    assert "verdict: proved" in stdout
    cert = load_certificate(str(out))
    assert check_certificate(cert)["boxes"] == len(cert["boxes"])


# ------------------------------------------------------------------------------------------
# --digits and aligned tables


def test_enclosure_text_widens_never_narrows():
    for text in ["[1.1725313805472678894e-11 +/- 3.77e-31]", "[-0.7 +/- 0.0661]", "[+/- 9.58e-34]",
                 "[0.024997396391743641215 +/- 1.71e-22]", "3.14159265358979323846264338327950288"]:
        for digits in (3, 6, 12):
            short = enclosure_text(text, digits)
            with flint.ctx.workprec(400):
                assert flint.arb(short).contains(flint.arb(text)), (text, digits, short)
            mid = short.strip("[]").split(" +/- ")[0]
            assert len(re.sub(r"e.*|[^0-9]", "", mid).lstrip("0")) <= digits + 1
    assert enclosure_text("40.000000000000000000", 12) == "40"  # exact: printed exactly
    assert enclosure_text("1/80", 3) == "1/80" and enclosure_text("", 5) == ""


@pytest.fixture(scope="module")
def pou_result():
    from symbounds.papers import shi_liao as sl
    from symbounds.papers.shi_liao.run import PouOptions, run

    return run(sl.Instance(eps=Fraction(1, 2)), PouOptions(points=2, at=((Fraction(1, 3),),)))


def test_pou_text_digits_enclose_the_json_values(pou_result):
    """Each claim side in the text (--digits 6) contains the side written with every digit in the
    JSON report."""
    text = pou_text(pou_result, digits=6)
    sides = re.findall(r"^\s+lhs (.*?)   rhs (.*)$", text, re.M)
    full = [c for c in pou_json(pou_result)["claims"] if c["lhs"] or c["rhs"]]
    assert len(sides) == len(full) > 10
    with flint.ctx.workprec(400):
        for (lhs, rhs), c in zip(sides, full):
            for short, long in ((lhs, c["lhs"]), (rhs, c["rhs"])):
                if long:
                    assert flint.arb(short).contains(flint.arb(long)), (c["id"], short, long)
    for ball in re.findall(r"\[[^\]]*\]", text):
        mid = ball.strip("[]").split(" +/- ")[0]
        assert len(re.sub(r"e.*|[^0-9]", "", mid).lstrip("0")) <= 7, ball
    assert "digits" not in pou_text.__name__ and pou_text(pou_result) != text  # default 12 differs from 6


def test_digits_flag(capsys):
    code, out, _ = run_cli(capsys, "pou", *SMALL, "--quiet", "--points", "2", "--digits", "5")
    assert code == 0
    m = re.search(r"^\s+L7 .*\n\s+lhs (\[.*?\])", out, re.M)
    assert m and len(m.group(1).split(" +/- ")[0].strip("[").replace(".", "").lstrip("0")) <= 6
    code, _, err = run_cli(capsys, "pou", "--digits", "0")
    assert code == 2 and err.startswith("symbounds: error: --digits 0")


def test_interp_text_rounds_loss_bounds_up():
    from symbounds.papers.alcalde.dataset import random_dataset
    from symbounds.papers.alcalde.run import run

    res = run(random_dataset(3, 6, 2, 2, seed=0))
    text = interp_text(res, digits=4)
    shown = re.findall(r"^\s+eps = \S+\s+loss <= (\S+)$", text, re.M)
    exact = [parse_number(t["loss_bound"]) for t in interp_json(res)["regularisation"]]
    assert len(shown) == len(exact) and all(parse_number(s) >= q for s, q in zip(shown, exact))


def _right_edges(lines, values):
    return {line.index(v, 2) + len(v) for line, v in zip(lines, values)}


def test_rate_text_has_aligned_columns():
    from symbounds.papers.shi_liao.rate import rate_report, render_rate

    rep = rate_report(10000, 2)
    body = render_rate(rep).split("\n\n")[1].splitlines()
    values = [rep["eps"], rep["r_g"], str(rep["P"]), str(rep["params"]), rep["M_g"], rep["M"], rep["max_weight"],
              rep["lipschitz_params"], rep["log_covering"], rep["bound"], rep["rate"]]
    assert len(body) == len(values)
    assert len(_right_edges(body, values)) == 1  # every value ends in the same column


def test_table_helper_aligns():
    rows = [("a", "1", "x"), ("long name", "12345", "y y")]
    lines = _table(rows, "<><")
    assert lines == ["  a              1  x", "  long name  12345  y y"]
