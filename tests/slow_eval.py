"""An eval run with a slow oracle policy, run as a separate process by tests that kill it or race it.

    python tests/slow_eval.py TASKS.jsonl OUT_DIR [--go FILE] [--workers N] [--limit K]

Each act waits 0.15 s, or with ``--go`` until FILE exists (so the test decides when the run may go on).
Exits 7, with the message on stderr, when another process holds OUT_DIR.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from envs.tasks import load_tasks_jsonl
from omniagent.eval.batch import FolderLockedError
from omniagent.eval.config import EvalConfig
from omniagent.eval.runner import run_eval
from omniagent.policy import make_policy


class Slow:
    """The oracle, slowed down so that a test can act while the run is in progress."""

    name = "oracle"

    def __init__(self, go: str | None) -> None:
        self.inner, self.go = make_policy("oracle"), go

    def reset(self, info: dict[str, Any]) -> None:
        self.inner.reset(info)

    def act(self, messages: Any) -> Any:
        if self.go is None:
            time.sleep(0.15)
        else:
            deadline = time.time() + 120
            while not os.path.exists(self.go) and time.time() < deadline:
                time.sleep(0.05)  # hold the folder until the test says go
        return self.inner.act(messages)

    def close(self) -> None:
        pass


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("tasks")
    p.add_argument("out")
    p.add_argument("--go", default=None)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--limit", type=int, default=None)
    args = p.parse_args()
    tasks = load_tasks_jsonl(args.tasks)[: args.limit]
    cfg = EvalConfig(
        out_dir=args.out, policy="oracle", workers=args.workers, progress=False, limits={"max_turns": 8}
    )
    try:
        run_eval(tasks, cfg, policy_factory=lambda: Slow(args.go))
    except FolderLockedError as exc:
        print(exc, file=sys.stderr)
        return 7
    return 0


if __name__ == "__main__":
    sys.exit(main())
