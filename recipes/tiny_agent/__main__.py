"""``python -m recipes.tiny_agent``: the tiny agent's whole recipe (:mod:`recipes.tiny_agent.recipe`)."""

from recipes.tiny_agent.recipe import main

if __name__ == "__main__":
    raise SystemExit(main())
