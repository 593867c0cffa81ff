"""The installed `symbounds` command points at the real entry point (the README's first command
runs it by name)."""

import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path


def test_console_script_entry_point_loads():
    (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "symbounds"]
    assert callable(ep.load())


def test_console_script_runs():
    script = Path(sys.executable).parent / "symbounds"
    out = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("symbounds ")
