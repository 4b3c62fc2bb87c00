"""Evaluate a policy backend on a benchmark preset (hydra; config in conf/eval.yaml).

    python scripts/eval.py                                    # synthetic preset, uniform policy
    python scripts/eval.py benchmarks=videomme benchmark.annotations=/data/videomme/test.parquet \\
        benchmark.media_root=/data/videomme/data policy.name=openai \\
        policy.kwargs.base_url=http://127.0.0.1:8000/v1 workers=8
    python scripts/eval.py mode=passive passive.match_run=runs/eval/synthetic-uniform-active

Writes results.jsonl (one row per task), trajectories.jsonl, summary.json/.csv and run.json into
out_dir; rerunning the same command resumes. Exit codes: 0 done; 2 bad annotations, config or
frozen-preset override; 3 train/eval overlap; 4 judge unreachable; 5 the policy backend failed
many tasks in a row (rerun with retry_failed=true once fixed); 130 interrupted (rerun to resume).
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from omegaconf.errors import MissingMandatoryValue

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from omniagent.datasets import DatasetError  # noqa: E402
from omniagent.evaluate import (  # noqa: E402
    ConfigMismatchError,
    FrozenPresetError,
    JudgeError,
    PolicyStreakError,
    run_from_config,
)
from omniagent.overlap import OverlapError  # noqa: E402
from omniagent.summary import make_console  # noqa: E402


@hydra.main(config_path="../conf", config_name="eval", version_base=None)
def main(cfg: DictConfig) -> None:
    console = make_console()
    try:
        run_from_config(cfg, overrides=list(HydraConfig.get().overrides.task), console=console)
    except (DatasetError, FrozenPresetError, ConfigMismatchError) as exc:
        console.print(f"[red]error:[/red] {exc}", markup=True, highlight=False)
        sys.exit(2)
    except MissingMandatoryValue as exc:
        console.print(
            f"[red]error:[/red] set {exc.full_key}=... on the command line (it has no default)",
            highlight=False,
        )
        sys.exit(2)
    except OverlapError as exc:
        console.print(f"[red]overlap:[/red] {exc}", highlight=False)
        sys.exit(3)
    except JudgeError as exc:
        console.print(f"[red]judge:[/red] {exc}", highlight=False)
        sys.exit(4)
    except PolicyStreakError as exc:
        console.print(f"[red]policy:[/red] {exc}", highlight=False)
        sys.exit(5)
    except KeyboardInterrupt:
        console.print("interrupted: finished tasks are saved; rerun the same command to resume")
        sys.exit(130)


if __name__ == "__main__":
    main()
