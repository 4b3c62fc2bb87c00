"""Check a training set against an evaluation set for shared media and questions.

    python scripts/overlap_guard.py --train data/sft/tasks.jsonl --eval data/synthetic/tasks.jsonl
    python scripts/overlap_guard.py --train train.jsonl --eval /data/videomme/test.parquet \\
        --eval-dataset videomme --eval-media-root /data/videomme/data

Media are compared by content fingerprint (size + first and last MiB), questions by normalised text.
Exit code 0 when there is no overlap of the --fail-on kinds, 3 when there is.

The code is :func:`omniagent.eval.cli.overlap_main` (also installed as ``omniagent-overlap-guard``).
"""

import sys

from omniagent.eval.cli import overlap_main

if __name__ == "__main__":
    sys.exit(overlap_main())
