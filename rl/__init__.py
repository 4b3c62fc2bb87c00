"""Training: agentic SFT data and TAURA reinforcement learning on verl."""
