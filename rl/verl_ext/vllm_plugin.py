"""vLLM plugin: serve thinker-only Qwen2.5-Omni checkpoints (what rl/train_sft.py and the tiny model save).

pyproject.toml declares :func:`register_vllm` as the ``vllm.general_plugins`` entry point ``omniagent``. vLLM
runs every general plugin in every process it creates, before that process does any work (API server, engine
core, GPU workers; also verl's rollout servers, which are vLLM engines inside Ray actors), as soon as this
package is installed (``pip install -e .``). So this module runs in *every* vLLM process, including a plain
``vllm serve`` for evaluation: it imports neither verl, Ray nor torch, and changes nothing at import. The
verl-side Qwen2.5-Omni support lives in :mod:`rl.verl_ext.omni_patches`, loaded only by training (``external_lib``).

What it registers: vLLM maps only the full ``Qwen2_5OmniForConditionalGeneration`` / ``Qwen2_5OmniModel``
layouts, reads ``hf_config.thinker_config`` and expects ``thinker.``-prefixed weights. A thinker-only checkpoint
declares ``model_type: qwen2_5_omni_thinker`` and the architecture :data:`VLLM_THINKER_ARCH`, which
:func:`register_vllm` maps to a lazily built subclass of vLLM's thinker (:data:`VLLM_THINKER_CLASS`, the
pattern vLLM itself uses for standalone-thinker embedding checkpoints): config self-reference, processing info
that accepts the thinker config, and a weight mapper for unprefixed names (also what verl's weight sync sends).
UNVERIFIED here: no vLLM on the CPU machines; ``scripts/gpu_smoke.sh`` is the check on a GPU.
"""

from __future__ import annotations

from typing import Any

# the architecture name a thinker-only checkpoint declares, and our class for it (built on first access)
VLLM_THINKER_ARCH = "Qwen2_5OmniThinkerForConditionalGeneration"
VLLM_THINKER_CLASS = "VllmQwen2_5OmniThinker"

_vllm_thinker_class: Any = None


def _build_vllm_thinker_class() -> Any:
    """vLLM's Qwen2.5-Omni thinker, taught to load a thinker-only checkpoint (imports vLLM)."""
    from vllm.model_executor.models import qwen2_5_omni_thinker as base
    from vllm.model_executor.models.utils import WeightsMapper
    from vllm.multimodal import MULTIMODAL_REGISTRY

    class StandaloneThinkerProcessingInfo(base.Qwen2_5OmniThinkerProcessingInfo):
        def get_hf_config(self):  # the base insists on a full Qwen2_5OmniConfig
            config = self.ctx.get_hf_config()
            return getattr(config, "thinker_config", config)

    @MULTIMODAL_REGISTRY.register_processor(
        base.Qwen2_5OmniThinkerMultiModalProcessor,
        info=StandaloneThinkerProcessingInfo,
        dummy_inputs=base.Qwen2_5OmniThinkerDummyInputsBuilder,
    )
    class VllmQwen2_5OmniThinker(base.Qwen2_5OmniThinkerForConditionalGeneration):
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

    VllmQwen2_5OmniThinker.__module__ = __name__
    return VllmQwen2_5OmniThinker


def __getattr__(name: str) -> Any:  # PEP 562: vLLM's lazy registry resolves "rl.verl_ext.vllm_plugin:<class>"
    global _vllm_thinker_class
    if name == VLLM_THINKER_CLASS:
        if _vllm_thinker_class is None:
            _vllm_thinker_class = _build_vllm_thinker_class()
        return _vllm_thinker_class
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register_vllm() -> None:
    """Map the thinker-only architecture to our class in vLLM's registry (idempotent, as vLLM asks of plugins).

    The class is named as ``"module:class"``, so vLLM imports it only when a checkpoint asks for it.
    """
    from vllm import ModelRegistry

    if VLLM_THINKER_ARCH not in ModelRegistry.get_supported_archs():
        ModelRegistry.register_model(VLLM_THINKER_ARCH, f"{__name__}:{VLLM_THINKER_CLASS}")
