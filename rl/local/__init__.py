"""The pieces of the single-process trainer (``rl/train_local.py``): rollout, update, task draws, turn scores."""
