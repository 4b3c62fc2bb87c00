"""Observation fidelity of a finished run: can the agent's text notes answer what the media showed?

    python scripts/fidelity.py runs/eval/synthetic-openai-active --policy openai \\
        --policy-kwargs '{"base_url": "http://127.0.0.1:8000/v1"}' --max-probes 3

For every episode in RUN/trajectories.jsonl whose media is synthetic (a ``.meta.json`` sidecar), asks
follow-up questions about events inside the frames and audio the agent fetched, once from its notes
alone and once with the raw media shown again, and prints both accuracies and the gap (raw - memory)
with a 95% CI. ``--out`` saves every probe's answers as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from omniagent.fidelity import print_fidelity, run_fidelity  # noqa: E402
from omniagent.policy import make_policy  # noqa: E402
from omniagent.trajectory import load_trajectories, write_atomic  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a run folder (holding trajectories.jsonl) or a trajectories .jsonl")
    ap.add_argument("--policy", required=True, help="registered policy backend that answers the probes")
    ap.add_argument("--policy-kwargs", default="{}", help="JSON constructor kwargs")
    ap.add_argument("--limits", default="{}", help="JSON EnvLimits overrides (as in the run)")
    ap.add_argument("--max-probes", type=int, default=3, help="probes per episode")
    ap.add_argument("--limit", type=int, default=None, help="first N episodes only")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="write the report (with every probe) as JSON here")
    args = ap.parse_args(argv)
    path = Path(args.run)
    trajs = load_trajectories(path / "trajectories.jsonl" if path.is_dir() else path)
    trajs = [t for t in trajs if t.stop_reason != "media_error"][: args.limit]
    policy = make_policy(args.policy, **json.loads(args.policy_kwargs))
    try:
        report = run_fidelity(
            trajs, policy, limits=json.loads(args.limits), max_probes=args.max_probes, seed=args.seed
        )
    finally:
        policy.close()
    print_fidelity(report)
    if args.out:
        write_atomic(args.out, json.dumps(report.to_dict(), indent=1, default=str))
    return 0 if report.n_probes else 1


if __name__ == "__main__":
    sys.exit(main())
