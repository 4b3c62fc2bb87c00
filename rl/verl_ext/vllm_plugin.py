"""vLLM plugin: serve thinker-only omni checkpoints (what rl/train_sft.py and the tiny models save).

pyproject.toml declares :func:`register_vllm` as the ``vllm.general_plugins`` entry point ``omniagent``. vLLM
runs every general plugin in every process it creates, before that process does any work (API server, engine
core, GPU workers; also verl's rollout servers, which are vLLM engines inside Ray actors), as soon as this
package is installed (``pip install -e .``). So this module runs in *every* vLLM process, including a plain
``vllm serve`` for evaluation: it imports neither verl, Ray nor torch, and changes nothing at import. The
verl-side omni support lives in :mod:`rl.verl_ext.omni_patches`, loaded only by training (``external_lib``).

What it registers, for each family whose ``patches.vllm`` names ``register_standalone_thinker``
(:mod:`omniagent.families`): vLLM maps only the full architectures (``Qwen2_5OmniForConditionalGeneration``,
``Qwen3OmniMoeForConditionalGeneration``) to its thinkers, whose processing info and ``__init__`` read
``hf_config.thinker_config`` (Qwen3's insists on a ``Qwen3OmniMoeConfig``) and whose weight mappers expect
``thinker.``-prefixed names. A thinker-only checkpoint declares the thinker architecture
(``Qwen2_5OmniThinkerForConditionalGeneration``, ``Qwen3OmniMoeThinkerForConditionalGeneration``; the family's
``classes.thinker``), which :func:`register_vllm` maps to a lazily built subclass of vLLM's thinker (the
pattern vLLM itself uses for standalone-thinker embedding checkpoints): config self-reference, processing info
that accepts the thinker config, and a weight mapper for unprefixed names (``model.``, ``lm_head.``, ``visual.``,
``audio_tower.``; also what verl's weight sync sends).
UNVERIFIED here: no vLLM on the CPU machines; ``scripts/gpu_smoke.sh`` is the check on a GPU.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from omniagent.families import FAMILIES


class StandaloneThinker(NamedTuple):
    """vLLM's thinker of one family, and the name of our class serving its thinker-only checkpoints."""

    arch: str  # what a thinker-only config.json declares (the family's classes.thinker)
    vllm_module: str  # vLLM's module of that family's thinker
    vllm_prefix: str  # the name prefix of its classes there (ProcessingInfo, MultiModalProcessor, ...)
    our_class: str  # the attribute of this module vLLM's lazy registry resolves


_VLLM_THINKERS = {  # vLLM's names per family (vllm/model_executor/models/)
    "qwen2.5-omni": ("qwen2_5_omni_thinker", "Qwen2_5OmniThinker", "VllmQwen2_5OmniThinker"),
    "qwen3-omni": ("qwen3_omni_moe_thinker", "Qwen3OmniMoeThinker", "VllmQwen3OmniMoeThinker"),
}
THINKERS = tuple(
    StandaloneThinker(FAMILIES[name].classes.thinker, *_VLLM_THINKERS[name])
    for name, family in FAMILIES.items()
    if "register_standalone_thinker" in family.patches.vllm
)
# the Qwen2.5-Omni names, as earlier releases of this module spelled them
VLLM_THINKER_ARCH, VLLM_THINKER_CLASS = THINKERS[0].arch, THINKERS[0].our_class

_built: dict[str, Any] = {}


def _build_vllm_thinker_class(spec: StandaloneThinker) -> Any:
    """vLLM's thinker of ``spec``, taught to load a thinker-only checkpoint (imports vLLM)."""
    import importlib

    from vllm.model_executor.models.utils import WeightsMapper
    from vllm.multimodal import MULTIMODAL_REGISTRY

    base = importlib.import_module(f"vllm.model_executor.models.{spec.vllm_module}")
    info_base = getattr(base, f"{spec.vllm_prefix}ProcessingInfo")
    thinker_base = getattr(base, f"{spec.vllm_prefix}ForConditionalGeneration")

    class StandaloneThinkerProcessingInfo(info_base):
        def get_hf_config(self):  # the base insists on a full config
            config = self.ctx.get_hf_config()
            return getattr(config, "thinker_config", config)

    @MULTIMODAL_REGISTRY.register_processor(
        getattr(base, f"{spec.vllm_prefix}MultiModalProcessor"),
        info=StandaloneThinkerProcessingInfo,
        dummy_inputs=getattr(base, f"{spec.vllm_prefix}DummyInputsBuilder"),
    )
    class VllmStandaloneThinker(thinker_base):
        # full-model names first (WeightsMapper applies every matching rule in order), then thinker-only ones
        hf_to_vllm_mapper = WeightsMapper(
            orig_to_new_prefix={
                "thinker.lm_head.": "language_model.lm_head.",
                "thinker.model.": "language_model.model.",
                "thinker.": "",
                "lm_head.": "language_model.lm_head.",
                "model.": "language_model.model.",
            }
        )

        def __init__(self, *, vllm_config: Any, prefix: str = "") -> None:
            hf_config = vllm_config.model_config.hf_config
            if not hasattr(hf_config, "thinker_config"):  # the base (and its mrope code) read this
                hf_config.thinker_config = hf_config
            super().__init__(vllm_config=vllm_config, prefix=prefix)

    VllmStandaloneThinker.__name__ = VllmStandaloneThinker.__qualname__ = spec.our_class
    VllmStandaloneThinker.__module__ = __name__
    return VllmStandaloneThinker


def __getattr__(name: str) -> Any:  # PEP 562: vLLM's lazy registry resolves "rl.verl_ext.vllm_plugin:<class>"
    spec = next((t for t in THINKERS if t.our_class == name), None)
    if spec is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _built:
        _built[name] = _build_vllm_thinker_class(spec)
    return _built[name]


def register_vllm() -> None:
    """Map each thinker-only architecture to our class in vLLM's registry (idempotent, as vLLM asks of
    plugins). The class is named as ``"module:class"``, so vLLM imports it only when a checkpoint asks for it."""
    from vllm import ModelRegistry

    supported = set(ModelRegistry.get_supported_archs())
    for spec in THINKERS:
        if spec.arch not in supported:
            ModelRegistry.register_model(spec.arch, f"{__name__}:{spec.our_class}")
