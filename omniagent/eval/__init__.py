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
"""
