"""Files that never end: every command that reads a user's file refuses a device, a FIFO, a pipe
or a folder with one line and exit 2, within seconds and without growing, and reads a regular
file only up to its limit plus one byte.

The commands run in one child process per kind of file (address space limited, wall clock
limited), so a reader that hangs or grows fails the test instead of the test run."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"

#: every command that reads a user's file; FILE is replaced by the hostile path
COMMANDS = [
    ["check", "FILE"],
    ["bound", "FILE", "--box", "0:1"],
    ["certify", "--model", "FILE", "--target", "x1", "--eps", "1/2"],
    ["certify", "--model", str(DATA / "residual_model.json"), "--spec", "FILE"],
    ["export", "FILE", "--onnx", "OUT/net.onnx"],
    ["import", "FILE", "--out", "OUT/net.json"],
    ["interp", "--data", "FILE"],
    ["tighten", "--what", "tau", "--data", "FILE"],
    ["latex", "interp", "--data", "FILE", "--out", "OUT/i.tex"],
    ["latex", "tighten", "--table", "FILE", "--out", "OUT/t.tex"],
    ["plot", "--kind", "error", "--table", "FILE", "--out", "OUT/e.png"],
    ["plot", "--kind", "tighten", "--table", "FILE", "--out", "OUT/t.png"],
]

_CHILD = r"""
import contextlib, io, json, resource, sys, time
limit = 3 << 30
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from symbounds.app.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    t0 = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    results.append({"argv": argv, "code": code, "out": out.getvalue(), "err": err.getvalue(),
                    "seconds": time.monotonic() - t0})
sys.__stdout__.write(json.dumps(results))
"""


def _run_all(path: str, out_dir: Path, stdin=None, timeout=240):
    argvs = [[str(out_dir) + a[3:] if a.startswith("OUT/") else (path if a == "FILE" else a) for a in c]
             for c in COMMANDS]
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    env.pop("SYMBOUNDS_DEBUG", None)
    p = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(argvs)], env=env, stdin=stdin,
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


def _assert_refused(results, fragment):
    assert len(results) == len(COMMANDS)
    for r in results:
        lines = r["err"].splitlines()
        assert r["code"] == 2, r
        assert len(lines) == 1 and lines[0].startswith("symbounds: error: ") and fragment in lines[0], r
        assert r["seconds"] < 10, r


def test_dev_zero_is_refused_by_every_reader(tmp_path):
    _assert_refused(_run_all("/dev/zero", tmp_path), "not a regular file (a character device)")
    assert os.listdir(tmp_path) == []  # nothing written


def test_fifo_without_a_writer_is_refused(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    out.mkdir()
    _assert_refused(_run_all(str(fifo), out), "not a regular file (a FIFO or pipe)")


def _release(fifo: Path, writer: threading.Thread):
    """Unblock a writer thread stuck in open(): open the read end once, then close it (the writer
    then fails with a broken pipe and ends)."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    os.close(fd)
    writer.join(10)


def test_fifo_with_a_writer_that_never_stops_is_refused(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    out.mkdir()

    def write_forever():
        try:
            with open(fifo, "wb") as f:
                while True:
                    f.write(b"[" * 65536)
        except (BrokenPipeError, OSError):
            return

    writer = threading.Thread(target=write_forever, daemon=True)
    writer.start()
    try:
        _assert_refused(_run_all(str(fifo), out), "not a regular file (a FIFO or pipe)")
    finally:
        _release(fifo, writer)
    assert not writer.is_alive()


def test_a_pipe_from_an_endless_generator_is_refused(tmp_path):
    gen = subprocess.Popen([sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('0' * 65536)"],
                           stdout=subprocess.PIPE)
    try:
        _assert_refused(_run_all("/dev/stdin", tmp_path, stdin=gen.stdout), "not a regular file (a FIFO or pipe)")
    finally:
        gen.kill()
        gen.wait(10)
        gen.stdout.close()


def test_a_folder_is_refused(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    _assert_refused(_run_all(str(folder), out), "not a regular file (a folder)")


# ------------------------------------------------------------------------------------------
# the reader itself


class Bad(ValueError):
    pass


def test_reads_up_to_the_limit_and_refuses_one_byte_more(tmp_path):
    from symbounds.core.files import read_user_file, read_user_text

    p = tmp_path / "f"
    p.write_bytes(b"x" * 100)
    assert read_user_file(str(p), Bad, 100) == b"x" * 100
    with pytest.raises(Bad, match="file too large"):
        read_user_file(str(p), Bad, 99)
    assert read_user_text(str(p), Bad, 100) == "x" * 100
    p.write_bytes(b"\xff\xfe")
    with pytest.raises(Bad, match="not a UTF-8 text file"):
        read_user_text(str(p), Bad)
    with pytest.raises(Bad, match="No such file"):
        read_user_file(str(tmp_path / "absent"), Bad)


def test_a_regular_file_that_keeps_growing_stops_at_the_limit(tmp_path):
    """A regular file appended to without end (another process writing a log, say): the reader
    stops at the limit plus one byte; its size when opened says nothing."""
    from symbounds.core.files import read_json_file

    p = tmp_path / "growing.json"
    p.write_bytes(b"")
    stop = threading.Event()

    def grow():
        with open(p, "ab") as f:
            while not stop.is_set():
                f.write(b" " * 65536)
                f.flush()

    t = threading.Thread(target=grow, daemon=True)
    t.start()
    try:
        while p.stat().st_size < 2**20:
            time.sleep(0.01)
        t0 = time.monotonic()
        with pytest.raises(Bad, match=r"file too large \(more than 1 MiB\)"):
            read_json_file(str(p), Bad, max_size=2**20)
        assert time.monotonic() - t0 < 5
    finally:
        stop.set()
        t.join(10)


_LIBRARY_CHILD = r"""
import json, resource, sys
limit = 3 << 30
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from symbounds import load_model
from symbounds.core.certificate import load_certificate
from symbounds.core.vnnlib import load_vnnlib
from symbounds.papers.alcalde.dataset import load_dataset
out = []
for load in (load_model, load_certificate, load_vnnlib, load_dataset):
    try:
        load(sys.argv[1])
        out.append(None)
    except Exception as e:
        out.append([type(e).__name__, str(e)])
print(json.dumps(out))
"""


def test_library_readers_refuse_devices():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", _LIBRARY_CHILD, "/dev/zero"], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout)
    assert [g[0] for g in got] == ["ModelFileError", "NotACertificate", "SpecError", "DatasetError"]
    assert all(g[1] == "/dev/zero: not a regular file (a character device)" for g in got)
