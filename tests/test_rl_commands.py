"""The README's rl/ commands run from any folder, as written: `python rl/<script>.py` puts rl/ (not the repo) first
on sys.path, so they work only through the installed package (no sys.path edits), and `python -m rl.<module>`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parents[1]

# (command, a string its stdout must contain)
COMMANDS = [
    (["rl/train_taura.py", "+exp=7b", "--cfg", "job"], "adv_estimator: taura"),
    (["rl/train_sft.py", "+exp=tiny", "--cfg", "job"], "OmniTurnSFTDataset"),
    (["rl/synthesize.py", "teacher.kwargs.model=T", "teacher.kwargs.base_url=U", "--cfg", "job"], "model: T"),
    (["-m", "rl.sft.export", "--help"], "--kept"),
    (["-m", "rl.verl_ext.rl_dataset", "--help"], "--tasks"),
]


def test_readme_rl_commands_run_from_another_folder(tmp_path: Path) -> None:
    pytest.importorskip(
        "verl", reason="the training configs extend verl's (pip install 'verl[verl-core]==0.9.1')"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, *(str(REPO / a) if a.startswith("rl/") else a for a in args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        for args, _ in COMMANDS
    ]
    for proc, (args, expected) in zip(procs, COMMANDS, strict=True):
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, (args, stderr[-2000:])
        assert expected in stdout, args
        if "--cfg" in args:
            OmegaConf.create(stdout)  # a whole config was printed
