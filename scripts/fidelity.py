"""Observation fidelity of a finished run: can the agent's text notes answer what the media showed?

    python scripts/fidelity.py runs/eval/synthetic-openai-active --policy openai \\
        --policy-kwargs '{"base_url": "http://127.0.0.1:8000/v1"}' --max-probes 3

For every episode in RUN/trajectories.jsonl whose media is synthetic (a ``.meta.json`` sidecar), asks
follow-up questions about events inside the frames and audio the agent fetched, once from its notes
alone and once with the raw media shown again, and prints both accuracies and the gap (raw - memory)
with a 95% CI. ``--out`` saves every probe's answers as JSON.

The code is :func:`omniagent.eval.cli.fidelity_main` (also installed as ``omniagent-fidelity``).
"""

import sys

from omniagent.eval.cli import fidelity_main

if __name__ == "__main__":
    sys.exit(fidelity_main())
