"""Running the `symbounds` command in-process from tests."""

from symbounds.app.cli import main


def run_cli(capsys, *argv):
    """``(exit code, stdout, stderr)`` of ``symbounds ARGV``."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
