"""Check a training set against an evaluation set for shared media and questions.

    python scripts/overlap_guard.py --train data/sft/tasks.jsonl --eval data/synthetic/tasks.jsonl
    python scripts/overlap_guard.py --train train.jsonl --eval /data/videomme/test.parquet \\
        --eval-dataset videomme --eval-media-root /data/videomme/data

Media are compared by content fingerprint (size + first and last MiB), questions by normalised text.
Exit code 0 when there is no overlap of the --fail-on kinds, 3 when there is.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from omniagent.datasets import load_dataset  # noqa: E402
from omniagent.overlap import check_overlap  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", required=True, help="training annotations (file or folder)")
    ap.add_argument("--train-dataset", default="tasks", help="dataset adapter for --train (default: tasks)")
    ap.add_argument("--train-media-root", default=None)
    ap.add_argument("--eval", required=True, help="evaluation annotations (file or folder)")
    ap.add_argument("--eval-dataset", default="tasks", help="dataset adapter for --eval (default: tasks)")
    ap.add_argument("--eval-media-root", default=None)
    ap.add_argument("--fail-on", default="media,pair", help="comma list of media, pair, question")
    args = ap.parse_args(argv)
    train = load_dataset(args.train_dataset, args.train, args.train_media_root, check=False).tasks
    evaluation = load_dataset(args.eval_dataset, args.eval, args.eval_media_root, check=False).tasks
    report = check_overlap(train, evaluation)
    print(report.describe())
    kinds = report.kinds([k.strip() for k in args.fail_on.split(",") if k.strip()])
    if kinds:
        print(f"OVERLAP ({', '.join(kinds)}): {len(report.eval_ids(kinds))} eval task(s) affected")
        return 3
    print("no overlap")
    return 0


if __name__ == "__main__":
    sys.exit(main())
