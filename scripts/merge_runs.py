"""Merge the shard folders of one evaluation into one run folder.

    python scripts/eval.py benchmarks=videomme ... shard=0/3     # and 1/3, 2/3 (or shard=auto under torchrun/SLURM)
    python scripts/merge_runs.py runs/eval/NAME/shard-*-of-3 --out runs/eval/NAME

The code is :func:`omniagent.eval.merge_runs.merge_main` (also installed as ``omniagent-merge-runs``).
"""

import sys

from omniagent.eval.merge_runs import merge_main

if __name__ == "__main__":
    sys.exit(merge_main())
