"""The omniagent environment: long media, a question, and turn-by-turn active perception.

Importing this package registers ``omniagent/OmniVideo-v0`` with Gymnasium. Nothing here imports
models or training code.
"""

from gymnasium.envs.registration import register, registry

ENV_ID = "omniagent/OmniVideo-v0"

if ENV_ID not in registry:
    register(id=ENV_ID, entry_point="envs.env:OmniVideoEnv")
