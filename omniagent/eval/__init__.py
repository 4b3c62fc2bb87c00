"""Evaluation: run a policy over a benchmark, keep every result, and say what the numbers mean.

Modules (import from them directly; this package re-exports nothing):

- :mod:`~omniagent.eval.config`: :class:`EvalConfig` from the hydra config; frozen-preset checks.
- :mod:`~omniagent.eval.runner`: :func:`run_eval`, a resumable thread pool over tasks.
- :mod:`~omniagent.eval.batch`: the resumable JSONL batch (commit marker, error streak, resume lock),
  shared with ``rl/synthesize.py``.
- :mod:`~omniagent.eval.results`: the run folder (``results.jsonl`` rows, ``run.json`` fingerprint).
- :mod:`~omniagent.eval.pipeline`: what ``scripts/eval.py`` runs (tasks, guard, judge, run, summary).
- :mod:`~omniagent.eval.judges`: judges of free-form answers.
- :mod:`~omniagent.eval.summary`: scores with bootstrap intervals, comparisons of runs.
- :mod:`~omniagent.eval.passive`: the one-turn passive baseline and harness.
- :mod:`~omniagent.eval.fidelity`: observation fidelity (memory vs raw media).
- :mod:`~omniagent.eval.overlap`: the train/eval overlap guard.
- :mod:`~omniagent.eval.shards`: ``shard=I/N`` / ``auto``: a disjoint part of the tasks by task id, and
  the shard folder's manifest.
- :mod:`~omniagent.eval.merge`: merging shard folders of any resumable batch (eval runs, synthesis);
  :mod:`~omniagent.eval.merge_runs` is ``omniagent-merge-runs`` for eval runs.
- :mod:`~omniagent.eval.protocols`: ``protocol=greedy`` / ``official`` (decoding and turn budget).
- :mod:`~omniagent.eval.samples`: ``samples=k`` (k runs per question, mean with a CI, pass@k).
- :mod:`~omniagent.eval.accounting`: tokens, media and time per question and per run.
- :mod:`~omniagent.eval.headline`: the one-line summary a run ends with.
- :mod:`~omniagent.eval.hydra_help`: the config folder and ``--help`` of the eval commands.
"""
