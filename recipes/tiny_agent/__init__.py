"""The tiny agent's recipe (``python -m recipes.tiny_agent``) and its probes."""
