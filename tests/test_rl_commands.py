"""The documented rl/ and recipe commands run from any folder, as written: `python rl/<script>.py` puts rl/ (not the
repo) first on sys.path, so they work only through the installed package (no sys.path edits), and `python -m
rl.<module>`; every module and script the README, docs and recipe READMEs name exists."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from doc_texts import doc_text
from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parents[1]

# (command, a string its stdout must contain)
COMMANDS = [
    (["rl/train_taura.py", "+exp=7b", "--cfg", "job"], "adv_estimator: taura"),
    (["rl/train_sft.py", "+exp=tiny", "--cfg", "job"], "OmniTurnSFTDataset"),
    (["rl/synthesize.py", "teacher.kwargs.model=T", "teacher.kwargs.base_url=U", "--cfg", "job"], "model: T"),
    (["-m", "rl.sft.export", "--help"], "--kept"),
    (["-m", "rl.verl_ext.rl_dataset", "--help"], "data.train_files"),
    (["-m", "rl.checkpoint", "--help"], "{check,complete}"),
    (["-m", "recipes.tiny_agent", "--help"], "--stages"),
    (["rl/train_sft.py", "--config-dir", "recipes/tiny_agent/conf/sft", "+exp=tiny_agent", "--cfg", "job"],
     "recipes.tiny_agent.frame_captions.sft_caption_batches"),
    (["rl/train_local.py", "--config-dir", "recipes/tiny_agent/conf", "+exp=tiny_agent", "local.train_tasks=t.jsonl",
      "actor_rollout_ref.model.path=x", "--cfg", "job"], "run_dir: runs/taura_tiny_agent"),
]  # fmt: skip
IN_REPO = ("rl/", "recipes/")  # arguments that name a file or folder of the repository


def test_readme_rl_commands_run_from_another_folder(tmp_path: Path) -> None:
    pytest.importorskip(
        "verl", reason="the training configs extend verl's (pip install 'verl[verl-core]==0.9.1')"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, *(str(REPO / a) if a.startswith(IN_REPO) else a for a in args)],
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


def test_every_documented_module_and_script_exists() -> None:
    """``python -m <module>`` and ``python <script>.py`` of ours, wherever the README, docs or a recipe's README
    name them, are there under that name (a module moved without its docs fails here)."""
    text = doc_text(with_scripts=True)
    modules = set(re.findall(r"python3? -m ((?:rl|recipes|omniagent|envs|scripts)(?:\.\w+)*)", text))
    scripts = set(re.findall(r"python3? ((?:rl|scripts|recipes)/[\w/]+\.py)", text))
    assert "recipes.tiny_agent" in modules and "rl/train_taura.py" in scripts  # the scan sees the docs
    assert [m for m in sorted(modules) if importlib.util.find_spec(m) is None] == []
    assert [s for s in sorted(scripts) if not (REPO / s).is_file()] == []


def test_the_rl_parquet_command_says_what_it_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m rl.verl_ext.rl_dataset`` prints the rows it wrote, the absolute path and the key that reads it;
    a missing tasks file is one clear line."""
    from rl.verl_ext.rl_dataset import main

    tasks = tmp_path / "tasks.jsonl"
    rows = [{"id": f"t{i}", "media": f"v{i}.mp4", "question": "How many?", "task_type": "num", "answer": 2.0}
            for i in range(3)]  # fmt: skip
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "rl" / "train.parquet"
    assert main(["--tasks", str(tasks), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"wrote 3 rows to {out.resolve()}" in said and "data.train_files=" in said
    with pytest.raises(SystemExit, match="no tasks file at"):
        main(["--tasks", str(tmp_path / "missing.jsonl"), "--out", str(out)])
