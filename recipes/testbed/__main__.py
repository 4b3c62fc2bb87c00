"""``python -m recipes.testbed``: the testbed agent's recipe (:mod:`recipes.testbed.recipe`)."""

from recipes.testbed.recipe import main

if __name__ == "__main__":
    raise SystemExit(main())
