"""The testbed commands' shared command-line values (recipes/testbed/cli_args.py): a labelled folder is split at its
first ``=`` and refused, with the option's name, when its label or folder is missing."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from recipes.testbed.cli_args import labelled, maybe_labelled
from recipes.testbed.search_step import main as search_step_main
from recipes.testbed.span_quote import main as span_quote_main


def test_a_labelled_folder_splits_at_its_first_equals_sign() -> None:
    assert labelled("seed 0=runs/a") == ("seed 0", Path("runs/a"))
    assert labelled("x=runs/lr=2e-3") == ("x", Path("runs/lr=2e-3"))
    for bad in ("runs/a", "=runs/a", "x="):
        with pytest.raises(argparse.ArgumentTypeError, match="expected LABEL=DIR"):
            labelled(bad)
    assert maybe_labelled("runs/quote_s0") == ("quote_s0", Path("runs/quote_s0"))
    assert maybe_labelled("q=runs/quote_s0") == ("q", Path("runs/quote_s0"))
    with pytest.raises(argparse.ArgumentTypeError):
        maybe_labelled("=runs/quote_s0")


def test_commands_refuse_an_unlabelled_folder_before_reading_anything(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        search_step_main(["--set", str(tmp_path), "--eval", str(tmp_path / "eval")])
    assert exc.value.code == 2 and "--eval" in capsys.readouterr().err
    argv = ["analyse", "--arm", str(tmp_path / "a"), "--seeds", "0", "--primary", "a-b"]
    with pytest.raises(SystemExit) as exc:
        span_quote_main(argv)
    assert exc.value.code == 2 and "--arm" in capsys.readouterr().err
