"""The sweep's text table: two rows of the same d and eps with different targets are told apart by
their target column (without it they read as contradictory results)."""

from symbounds.app.cli import main
from symbounds.papers.shi_liao.sweep import table_text


def test_two_targets_of_one_instance_are_told_apart(tmp_path, capsys):
    targets = ["sin(x1)/2", "x1/2"]
    argv = ["sweep", "--eps", "1/2", "--holder", "1", "--bound", "1", "--points", "1", "--quiet",
            "--out", str(tmp_path / "t.csv")]
    for t in targets:
        argv += ["--target", t]
    assert main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    header, rows = lines[0].split(), [line.split() for line in lines[1:]]
    assert header[:3] == ["d", "eps", "target"]
    assert len(rows) == 2 and sorted(r[2] for r in rows) == sorted(targets)
    assert all(r[:2] == ["1", "1/2"] for r in rows)  # the same d and eps: only the target differs


def test_a_target_with_spaces_keeps_its_columns_aligned():
    base = {"d": 1, "eps": "1/2", "P": 3, "M_g": "1", "M": "2", "max_weight": "2", "measured_max_error": "0.1",
            "claims": "proved", "certified_error": "", "seconds": "0.1"}
    text = table_text([dict(base, target="sin(x1) / 2"), dict(base, target="x1")])
    lines = text.splitlines()
    starts = {line.index("proved") for line in lines[1:]}
    assert len(starts) == 1 and lines[0].index("claims") == starts.pop()
