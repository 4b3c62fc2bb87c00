"""Agentic SFT: per-turn export, the dataset verl loads, the training step, and the resumable CPU loop."""
