"""Summarise one eval run, or compare two: do their 95% intervals overlap?

    python scripts/compare_runs.py runs/eval/synthetic-openai-active
    python scripts/compare_runs.py runs/eval/synthetic-openai-active runs/eval/synthetic-openai-passive

A run is a folder holding results.jsonl (the summary is recomputed from it, with the same seeded
bootstrap) or a summary.json.

The code is :func:`omniagent.eval.compare.compare_main` (also installed as ``omniagent-compare-runs``).
"""

import sys

from omniagent.eval.compare import compare_main

if __name__ == "__main__":
    sys.exit(compare_main())
