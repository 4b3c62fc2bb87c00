"""The command-line entry points of evaluation, installed as console scripts (``pyproject.toml``) and
run by the thin files in ``scripts/``:

- ``omniagent-eval`` = ``python scripts/eval.py``: evaluate a policy on a benchmark preset (hydra).
- ``omniagent-compare-runs`` = ``python scripts/compare_runs.py`` (:mod:`omniagent.eval.compare`).
- ``omniagent-fidelity`` = ``python scripts/fidelity.py``: observation fidelity of a finished run.
- ``omniagent-overlap-guard`` = ``python scripts/overlap_guard.py``: train/eval overlap check.
- ``omniagent-turn-scaling`` = ``python scripts/turn_scaling.py`` (:mod:`omniagent.eval.turn_scaling`).

``omniagent-eval`` exit codes: 0 done; 2 bad annotations, config (e.g. a policy argument the backend
does not take) or frozen-preset override; 3 train/eval overlap; 4 judge unreachable; 5 the policy
backend cannot start, or failed many tasks in a row (rerun with retry_failed=true once fixed); 6 another process is writing into out_dir (its PID is named); 130
interrupted (rerun to resume).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from omegaconf.errors import MissingMandatoryValue

from envs.jsonl import NoSpaceError, write_atomic
from omniagent.datasets import DatasetError, load_dataset
from omniagent.eval.batch import FolderLockedError
from omniagent.eval.config import FrozenPresetError
from omniagent.eval.hydra_help import CONF_DIR
from omniagent.eval.judges import JudgeError
from omniagent.eval.overlap import OverlapError, check_overlap
from omniagent.eval.results import ConfigMismatchError
from omniagent.eval.runner import PolicyStreakError
from omniagent.eval.summary import (
    make_console,
)
from omniagent.policy import PolicyConfigError, PolicyError

# How scripts/eval.py ends on each kind of failure: (label, exit code).
EVAL_EXITS: list[tuple[type[BaseException], str, int]] = [
    (DatasetError, "error", 2),
    (FrozenPresetError, "error", 2),
    (ConfigMismatchError, "error", 2),
    (PolicyConfigError, "error", 2),
    (OverlapError, "overlap", 3),
    (JudgeError, "judge", 4),
    (PolicyStreakError, "policy", 5),
    (PolicyError, "policy", 5),
    (FolderLockedError, "busy", 6),
    (NoSpaceError, "disk full", 7),
]


@hydra.main(config_path=CONF_DIR, config_name="eval", version_base=None)
def eval_main(cfg: DictConfig) -> None:
    """Evaluate a policy backend on a benchmark preset (config in conf/eval.yaml)."""
    from omniagent.eval.pipeline import run_from_config

    console = make_console()
    try:
        run_from_config(cfg, overrides=list(HydraConfig.get().overrides.task), console=console)
    except MissingMandatoryValue as exc:
        console.print(f"[red]error:[/red] set {exc.full_key}=... on the command line (it has no default)")
        sys.exit(2)
    except KeyboardInterrupt:
        console.print("interrupted: finished tasks are saved; rerun the same command to resume")
        sys.exit(130)
    except Exception as exc:
        for kind, label, code in EVAL_EXITS:
            if isinstance(exc, kind):
                console.print(f"[red]{label}:[/red] {exc}", highlight=False)
                sys.exit(code)
        raise


FIDELITY_DOC = (
    "Observation fidelity of a finished run: can the agent's text notes answer what the media showed?"
)
OVERLAP_DOC = "Check a training set against an evaluation set for shared media and questions."


def fidelity_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=FIDELITY_DOC)
    ap.add_argument("run", help="a run folder (holding trajectories.jsonl) or a trajectories .jsonl")
    ap.add_argument("--policy", required=True, help="registered policy backend that answers the probes")
    ap.add_argument("--policy-kwargs", default="{}", help="JSON constructor kwargs")
    ap.add_argument("--limits", default="{}", help="JSON EnvLimits overrides (as in the run)")
    ap.add_argument("--max-probes", type=int, default=3, help="probes per episode")
    ap.add_argument("--limit", type=int, default=None, help="first N episodes only")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="write the report (with every probe) as JSON here")
    ap.add_argument(
        "--allow-scripted", action="store_true", help="probe a scripted policy anyway (gap 0 by construction)"
    )
    args = ap.parse_args(argv)
    from omniagent.eval.fidelity import ScriptedPolicyError, print_fidelity, run_fidelity
    from omniagent.policy import make_policy
    from omniagent.trajectory import load_trajectories

    path = Path(args.run)
    trajs = load_trajectories(path / "trajectories.jsonl" if path.is_dir() else path)
    trajs = [t for t in trajs if t.stop_reason != "media_error"][: args.limit]
    policy = make_policy(args.policy, **json.loads(args.policy_kwargs))
    try:
        report = run_fidelity(
            trajs, policy, limits=json.loads(args.limits), max_probes=args.max_probes, seed=args.seed,
            allow_scripted=args.allow_scripted,
        )  # fmt: skip
    except ScriptedPolicyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        policy.close()
    print_fidelity(report)
    if args.out:
        write_atomic(args.out, json.dumps(report.to_dict(), indent=1, default=str))
    return 0 if report.n_probes else 1


def overlap_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=OVERLAP_DOC)
    ap.add_argument("--train", required=True, help="training annotations (file or folder)")
    ap.add_argument("--train-dataset", default="tasks", help="dataset adapter for --train (default: tasks)")
    ap.add_argument("--train-media-root", default=None)
    ap.add_argument("--eval", required=True, help="evaluation annotations (file or folder)")
    ap.add_argument("--eval-dataset", default="tasks", help="dataset adapter for --eval (default: tasks)")
    ap.add_argument("--eval-media-root", default=None)
    ap.add_argument("--fail-on", default="media,pair", help="comma list of media, pair, question")
    ap.add_argument(
        "--allow-outside-media-root", action="store_true", help="accept media paths outside the media roots"
    )
    args = ap.parse_args(argv)
    allow = {"check": False, "allow_outside_media_root": args.allow_outside_media_root}
    train = load_dataset(args.train_dataset, args.train, args.train_media_root, **allow).tasks
    evaluation = load_dataset(args.eval_dataset, args.eval, args.eval_media_root, **allow).tasks
    report = check_overlap(train, evaluation)
    print(report.describe())
    kinds = report.kinds([k.strip() for k in args.fail_on.split(",") if k.strip()])
    if kinds:
        print(f"OVERLAP ({', '.join(kinds)}): {len(report.eval_ids(kinds))} eval task(s) affected")
        return 3
    print("no overlap")
    return 0
