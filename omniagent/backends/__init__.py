"""Built-in policy backends. Each module registers itself; heavy imports stay inside the classes."""

# "transformers" and "vllm" register on import; torch / vllm load only when a policy is built.
import omniagent.backends.transformers_backend  # noqa: F401
import omniagent.backends.vllm_backend  # noqa: F401

# "openai" (any OpenAI-compatible server) and the scripted policies: uniform, oracle, random, replay,
# synth_teacher (the perceiving teacher for the synthetic benchmark, omniagent/backends/teacher.py) and
# prior (the training set's best answer given without looking, omniagent/backends/prior.py).
from omniagent.backends import openai_backend, prior, scripted, teacher  # noqa: F401, E402
