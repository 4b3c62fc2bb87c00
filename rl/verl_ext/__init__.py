"""What plugs omniagent into upstream verl and vLLM: the agent loop, Omni patches, the trainer, the RL parquet."""
