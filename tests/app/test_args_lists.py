"""The one parser of comma-separated integer lists and the one precision range of the command line."""

from __future__ import annotations

import pytest

from symbounds.app.args import MAX_PREC, UsageError, int_list, precision, random_interp_dataset
from symbounds.app.cli import main


def test_int_list_reads_positive_ascii_integers():
    assert int_list("3, 6,2,2", "--random", "N,n,d,m") == [3, 6, 2, 2]
    assert int_list("4,8,16", "--size") == [4, 8, 16]
    assert int_list("7", "--epochs", count=3) == [7] and int_list("1,2,3", "--epochs", count=3) == [1, 2, 3]
    for bad, words in (("3,5", "four positive integers N,n,d,m"), ("3,6,2,0", "four"), ("3,6,2,-1", "four"),
                       ("3,6,2,２", "four"), ("3,,2,2", "four"), ("1,2,3,4,5", "four")):
        with pytest.raises(UsageError, match=words) as e:
            int_list(bad, "--random", "N,n,d,m")
        assert str(e.value).startswith("--random ") and "\n" not in str(e.value)
    with pytest.raises(UsageError, match="one per eps"):
        int_list("1,2", "--epochs", count=3, per="eps")


def test_random_dataset_limits():
    ds = random_interp_dataset("2,3,2,2", seed=0)
    assert (ds.N, ds.n, ds.d) == (2, [3, 3], 2)
    for bad in ("2,3,1,2", "2,3,2,4", "2,3,300,2", "2000,2000,2,2"):
        with pytest.raises(UsageError, match="need N, n >= 1"):
            random_interp_dataset(bad, seed=0)


def test_precision_range_is_one():
    from symbounds.core.contexts import MIN_PREC

    from symbounds.core.contexts import MAX_PREC as CORE_MAX

    assert MAX_PREC == CORE_MAX == 65536 and precision(MIN_PREC) == MIN_PREC and precision(MAX_PREC) == MAX_PREC
    for bits in (MIN_PREC - 1, MAX_PREC + 1, 0):
        with pytest.raises(UsageError, match=f"use between {MIN_PREC} and 65536 bits"):
            precision(bits)
    with pytest.raises(UsageError, match=r"--prec 60: use between 64 and 65536 bits \(a reason\)"):
        precision(60, lo=64, why="a reason")


@pytest.mark.parametrize("argv", [
    ["pou", "--prec", "10"],
    ["tighten", "--prec", "10"],
    ["tighten", "--what", "tau", "--random", "2,3,2,2", "--prec", "10"],
    ["bound", "--prec", "10", "--box", "0:1"],
    ["latex", "pou", "--prec", "10", "--out", "x.tex"],
])
def test_every_command_checks_the_same_range(argv, tmp_path, capsys, monkeypatch):
    from symbounds.core.contexts import MIN_PREC

    monkeypatch.chdir(tmp_path)
    if argv[0] == "bound":  # a valid model file, so that the precision is what is wrong
        import json

        from symbounds.core.modelfile import model_to_json
        from symbounds.core.transformer import Embedding, FeedForward, Readout, Transformer

        ffn = FeedForward(W1=((1, 0),), b1=(0,), W2=((1,), (0,)), b2=(0, 0), skip=1)
        model = Transformer((ffn,), Embedding(base=((0,), (1,)), E=((1,), (0,)), column=0), Readout(0, 0), "vector")
        (tmp_path / "m.json").write_text(json.dumps(model_to_json(model)))
        argv = argv[:1] + ["m.json"] + argv[1:]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and f"use between {MIN_PREC} and 65536 bits" in err, err
    assert not (tmp_path / "x.tex").exists()
