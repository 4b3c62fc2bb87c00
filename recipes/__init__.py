"""Recipes built on the framework (envs/, omniagent/, rl/); the framework never imports them."""
