"""Teacher-trajectory synthesis for agentic SFT: the pipeline, its quality-control filters and auditors."""
