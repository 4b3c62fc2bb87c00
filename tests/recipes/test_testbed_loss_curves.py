"""Warm-up loss curves on an axis of turns seen (recipes/testbed/loss_curves.py): windows of whole steps for each
run's batch size, the first crossing of a level, the table, the figure and the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recipes.testbed.loss_curves import curve, first_below, main


def _run(folder: Path, losses: list[float], batch_size: int | None) -> Path:
    folder.mkdir(parents=True)
    record = {"loss": losses, "seed": 0, **({} if batch_size is None else {"batch_size": batch_size})}
    (folder / "warmup_loss.json").write_text(json.dumps(record))
    return folder


def test_runs_of_different_batches_are_read_on_turns_seen(tmp_path: Path, capsys) -> None:
    big = _run(
        tmp_path / "big", [4.0, 2.0, 1.0, 0.5, 0.25, 0.05, 0.03, 0.01, 9.0], 64
    )  # the last step: no whole window
    old = _run(
        tmp_path / "old", [float(i) for i in range(32, 0, -1)], None
    )  # before the batch was recorded: 16
    a = curve(big, 128)
    assert a == {"batch size": 64, "turns": [128, 256, 384, 512], "loss": [3.0, 0.75, 0.15, 0.02]}
    b = curve(old, 128)
    assert b["batch size"] == 16 and b["turns"] == [128, 256, 384, 512]
    assert b["loss"] == [28.5, 20.5, 12.5, 4.5]  # the mean of 8 steps each: 32..25, 24..17, ...
    assert first_below(a, 0.1) == 512 and first_below(a, 1.0) == 256 and first_below(b, 1.0) is None
    assert first_below(a, 0.75) == 384  # strictly below
    with pytest.raises(ValueError, match="not a whole number of its 64-turn steps"):
        curve(big, 96)
    args = ["--run", f"arm s0={big}", "--run", f"control s0={old}", "--window", "128", "--below", "1",
            "--json", str(tmp_path / "c.json"), "--figure", str(tmp_path / "c.png")]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| arm s0 | 64 | 3.000 | 0.750 | 0.150 | 0.020 | 256 |" in out
    assert "| control s0 | 16 | 28.500 | 20.500 | 12.500 | 4.500 | — |" in out
    assert json.loads((tmp_path / "c.json").read_text())["arm s0"]["loss"][-1] == pytest.approx(0.02)
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
