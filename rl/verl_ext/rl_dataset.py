"""Tasks JSONL -> the parquet rows verl's RL dataset (``RLHFDataset``) reads, for the ``omniagent`` agent loop.

One row per task::

    data_source   "omniagent/<task.source>"
    agent_name    "omniagent"            (verl picks the agent loop per row by this column)
    prompt        [{"role": "user", "content": <question and choices>}]   -- a placeholder: the agent loop
                  builds every turn's real context from the environment; verl only uses it for logging and
                  its optional prompt-length filter
    ability       the task type
    reward_model  {"style": "rule", "ground_truth": <answer as JSON text>}  (informational; the reward is
                  the environment's, computed inside the agent loop)
    extra_info    {"index": i, "task_id": ..., "split": ..., "task": <the whole Task as JSON text>}

The task travels as JSON text because its ``answer`` is a letter, a number or a list of intervals depending on
the task type, and a parquet column needs one type. :func:`task_from_extra_info` turns it back into the dict
the environment's ``reset`` options are made of.

CLI::

    python -m rl.verl_ext.rl_dataset --tasks data/train/tasks.jsonl --out data/rl/train.parquet [--split train]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from envs.jsonl import write_parquet
from envs.tasks import LETTERS, Task, load_tasks_jsonl

AGENT_NAME = "omniagent"
DATA_SOURCE_PREFIX = "omniagent"
TASK_FIELDS = ("media", "question", "task_type", "choices", "answer")


def prompt_text(task: Task) -> str:
    """The question (with lettered choices) as plain text: the row's placeholder prompt."""
    lines = [task.question]
    for letter, choice in zip(LETTERS, task.choices or [], strict=False):
        lines.append(f"({letter}) {choice}")
    return "\n".join(lines)


def task_to_row(task: Task, index: int, agent_name: str = AGENT_NAME) -> dict[str, Any]:
    """One verl RL dataset row for ``task`` (media path made absolute)."""
    task = task.model_copy(update={"media": os.path.abspath(task.media)})
    return {
        "data_source": f"{DATA_SOURCE_PREFIX}/{task.source}",
        "agent_name": agent_name,
        "prompt": [{"role": "user", "content": prompt_text(task)}],
        "ability": task.task_type,
        "reward_model": {"style": "rule", "ground_truth": json.dumps(task.answer)},
        "extra_info": {"index": int(index), "task_id": task.id, "split": task.split, "task": task.to_json()},
    }


def tasks_to_rows(tasks: Iterable[Task], agent_name: str = AGENT_NAME) -> list[dict[str, Any]]:
    return [task_to_row(t, i, agent_name) for i, t in enumerate(tasks)]


def write_rl_parquet(
    tasks: Sequence[Task] | str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    split: str | None = None,
    agent_name: str = AGENT_NAME,
) -> Path:
    """Write the rows of ``tasks`` (a list, or a tasks JSONL path) to a parquet file; returns its path.

    ``split`` keeps only tasks of that split. Refuses to write an empty file.
    """
    import pandas as pd

    if isinstance(tasks, str | os.PathLike):
        tasks = load_tasks_jsonl(tasks)
    selected = [t for t in tasks if split is None or t.split == split]
    if not selected:
        raise ValueError(f"no tasks to write (split={split!r})")
    return write_parquet(out, pd.DataFrame(tasks_to_rows(selected, agent_name)))


def task_from_extra_info(extra_info: Mapping[str, Any] | None) -> Task:
    """The :class:`~envs.tasks.Task` a row's ``extra_info`` carries: the ``task`` JSON text of
    :func:`task_to_row` (or an equivalent dict), else task fields stored directly in ``extra_info``."""
    if not extra_info:
        raise ValueError("the row has no extra_info; build RL rows with rl.verl_ext.rl_dataset")
    raw = extra_info.get("task")
    if isinstance(raw, str):
        record = json.loads(raw)
    elif isinstance(raw, Mapping):
        record = dict(raw)
    else:
        record = {k: extra_info.get(k) for k in TASK_FIELDS if extra_info.get(k) is not None}
        record["id"] = str(extra_info.get("task_id") or f"row-{extra_info.get('index', 0)}")
    if isinstance(record.get("choices"), Sequence) and not isinstance(record["choices"], str):
        record["choices"] = [str(c) for c in record["choices"]]  # parquet may hand back numpy arrays
    try:
        return Task.model_validate(record)
    except ValidationError as exc:
        raise ValueError(
            f"extra_info does not hold a valid task ({exc.error_count()} errors): {exc}"
        ) from exc


EPILOG = """The RL parquet that `python rl/train_taura.py` reads (one row per question; every turn's context is built
by the omniagent agent loop, so a row holds only the task). Make one file for training and one for validation:

  python -m rl.verl_ext.rl_dataset --tasks data/train/tasks.jsonl --out data/rl/train.parquet
  python -m rl.verl_ext.rl_dataset --tasks data/val/tasks.jsonl --out data/rl/val.parquet
  python rl/train_taura.py +exp=7b data.train_files=data/rl/train.parquet data.val_files=data/rl/val.parquet ...

A tasks JSONL comes from `python -m envs.synth` (synthetic videos) or a benchmark adapter (envs.tasks format);
media paths are made absolute, so the parquet works from any folder."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rl.verl_ext.rl_dataset",
        description=__doc__.split("\n\n")[0],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--tasks", required=True, help="tasks JSONL (envs.tasks format), e.g. envs.synth's tasks.jsonl"
    )
    parser.add_argument(
        "--out", required=True, help="the parquet file to write (data.train_files or data.val_files)"
    )
    parser.add_argument("--split", default=None, help="keep only tasks of this split (default: every task)")
    parser.add_argument("--agent-name", default=AGENT_NAME, help="the verl agent loop every row names")
    args = parser.parse_args(argv)
    if not Path(args.tasks).is_file():
        raise SystemExit(f"rl_dataset: no tasks file at {args.tasks}")
    try:
        path = write_rl_parquet(args.tasks, args.out, split=args.split, agent_name=args.agent_name)
    except ValueError as exc:
        raise SystemExit(f"rl_dataset: {exc} in {args.tasks}") from exc
    import pyarrow.parquet as pq

    rows = pq.ParquetFile(path).metadata.num_rows
    print(f"wrote {rows} rows to {path.resolve()}; pass it as data.train_files= (or data.val_files=)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
