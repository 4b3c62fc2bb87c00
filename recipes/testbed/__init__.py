"""The TAURA testbed's recipe: the search-level agent, its gates and the TAURA vs GRPO study (README.md)."""
