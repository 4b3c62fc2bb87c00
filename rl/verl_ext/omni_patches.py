"""Omni thinker support (Qwen2.5-Omni, Qwen3-Omni) for verl 0.9.1, loaded by verl as
``actor_rollout_ref.model.external_lib`` (verl itself is not forked or edited). Importing this module patches verl:
import it from training code only. What differs between the families (model types, processor class, tokens, the
class owning ``get_rope_index``, the text model) is read from :mod:`omniagent.families`; each family's
``patches.verl`` names the patches below (:data:`VERL_PATCHES`).

What verl 0.9.1 lacks for the omni thinkers, and what this module does about it:

1. **Processor acceptance.** ``verl.utils.tokenizer.hf_processor`` binds ``get_rope_index`` only for a fixed list
   of processor classes; for ``Qwen2_5OmniProcessor`` it raises inside a ``try``, warns, and returns ``None``, so
   every multimodal path silently degrades to text. :func:`omni_hf_processor` replaces it (in every module that
   holds a reference: ``verl.utils``, ``verl.utils.tokenizer``, ``verl.utils.tokenizer.tokenizer`` and
   ``verl.workers.config.model``, which calls it from ``HFModelConfig.__post_init__``). For an omni checkpoint
   (a ``model_type`` some family declares, thinker-only or full) it loads the processor and attaches the pieces
   below; for anything else it defers to verl's original function unchanged (``hf_processor_accepts_omni``).
2. **Rope indices.** verl's agent loop computes ``position_ids`` with ``processor.get_rope_index(input_ids=...,
   attention_mask=..., image_grid_thw=..., video_grid_thw=..., **processor.get_rope_index_kwargs(mm_inputs))``
   (``AgentLoopWorker._compute_position_ids``; the ``get_rope_index_kwargs`` hook exists in 0.9.1).
   :class:`OmniRopeIndex` runs the thinker's own ``get_rope_index`` on the thinker config, and
   :func:`rope_index_kwargs` supplies what the omni thinkers need beyond the grids: ``audio_seqlens`` (from
   ``feature_attention_mask``) and ``second_per_grids`` (from ``video_second_per_grid``). The processor output
   does not carry ``use_audio_in_video``, so it is read off the token ids: a vision start token followed by an
   audio start token is an interleaved clip (the block both families' processors write for it)
   (``omni_rope_index``).
3. **Audio features in batches.** The Omni processor returns ``input_features`` (n, 128, frames) and
   ``feature_attention_mask`` (n, frames); verl keeps them in each row's ``multi_modal_inputs`` and its collation
   (``verl.utils.model.extract_multi_modal_inputs``) already pads both on the last axis and concatenates them
   (they are in ``_VARLEN_MULTI_MODAL_KEYS``). :func:`install` checks that this is still so and adds the keys if
   a verl release drops them. ``video_second_per_grid`` is one value per video and concatenates as is.
4. **Never sampling media tokens.** verl's vLLM server masks the image/video placeholders out of the sampler
   (``get_vision_placeholder_token_ids``); :func:`omni_banned_token_ids` adds the audio placeholder and the
   media boundaries (:func:`rl.verl_ext.media_tokens.omni_media_token_ids`), any of which in a response breaks
   the training forward. The processor also gets the integer ``image/video/audio_token_id`` attributes verl
   reads (``ban_media_tokens``).
5. **Ulysses sequence parallelism.** With ``ulysses_sequence_parallel_size > 1`` verl's FSDP engine leaves a
   vision-language model's ids whole (its media are merged into the embeddings first) and relies on a wrapper of
   the text model that slices the embeddings, positions and Qwen3's DeepStack inputs (``visual_pos_masks``,
   ``deepstack_visual_embeds``) per rank; ``apply_monkey_patch`` installs that wrapper for Qwen-VL model types
   only. :func:`omni_apply_monkey_patch` installs verl's own wrapper on the omni thinkers' text models as well
   (``ulysses_input_slicing``).

vLLM serving the thinker-only checkpoint is not done here but by the ``vllm.general_plugins`` entry point
(:mod:`rl.verl_ext.vllm_plugin`), which vLLM runs in each of its processes.

Loading: ``actor_rollout_ref.model.external_lib: rl.verl_ext.omni_patches`` (conf/rl/taura.yaml). ``HFModelConfig.__post_init__``
imports it right before it builds the processor, in every process that builds a model config: trainer,
agent-loop workers, rollout servers, actor workers. Importing this module also imports :mod:`rl.verl_ext.agent_loop`,
which registers the ``omniagent`` agent loop in that process (verl resolves ``agent_name`` in the agent-loop
worker's registry).
"""

from __future__ import annotations

import importlib
import logging
import sys
import warnings
from typing import Any

import torch

from omniagent.families import FAMILIES, ModelFamily, family_for_model_type
from rl.verl_ext.media_tokens import omni_media_token_ids

logger = logging.getLogger(__name__)

OMNI_MODEL_TYPES = tuple(t for family in FAMILIES.values() for t in family.model_types)
# Modules that hold their own reference to verl's hf_processor (``from ... import hf_processor``).
HF_PROCESSOR_HOLDERS = (
    "verl.utils.tokenizer.tokenizer",
    "verl.utils.tokenizer",
    "verl.utils",
    "verl.workers.config.model",
)
AUDIO_FEATURE_KEYS = ("input_features", "feature_attention_mask")
# verl's "never sample these" list, and the modules that import it by name (the vLLM server)
BANNED_IDS_MODULE = "verl.workers.rollout.utils"
BANNED_IDS_HOLDERS = (BANNED_IDS_MODULE, "verl.workers.rollout.vllm_rollout.vllm_async_server")
# verl's model patcher, and the module that imports it by name (the FSDP engine, built in actor workers)
MONKEY_PATCH_MODULE = "verl.models.transformers.monkey_patch"
MONKEY_PATCH_HOLDERS = (
    MONKEY_PATCH_MODULE,
    "verl.models.transformers",
    "verl.workers.engine.fsdp.transformer_impl",
)

_original_hf_processor: Any = None
_original_banned_ids: Any = None
_original_monkey_patch: Any = None
_installed = False


# ------------------------------------------------------------------ rope indices


def thinker_config_of(config: Any) -> Any:
    """The thinker's config: ``config.thinker_config`` of a full omni config, else the config itself."""
    return getattr(config, "thinker_config", None) or config


def audio_in_video_from_ids(input_ids: torch.Tensor, config: Any) -> bool:
    """Whether the ids hold an interleaved audio-in-video block (a vision start, then an audio start)."""
    ids = torch.as_tensor(input_ids)
    if ids.dim() == 1:
        ids = ids.unsqueeze(0)
    if ids.shape[-1] < 2:
        return False
    follows = (ids[..., :-1] == config.vision_start_token_id) & (ids[..., 1:] == config.audio_start_token_id)
    return bool(follows.any())


class OmniRopeIndex:
    """``processor.get_rope_index``: the thinker's own ``get_rope_index`` without the model.

    The methods come from the class the config's family names (:meth:`ModelFamily.rope_index_class`). Accepts
    verl's keyword call (``input_ids``, ``attention_mask``, grids, plus the hook's kwargs) and returns
    ``(position_ids (3, batch, seq), mrope_position_deltas)`` exactly as the thinker computes them inside
    ``forward``. ``use_audio_in_video=None`` means: infer it from the ids. Picklable (Ray may ship it).
    """

    def __init__(self, config: Any) -> None:
        self.config = thinker_config_of(config)
        self.spatial_merge_size = self.config.vision_config.spatial_merge_size
        self.family_name = family_for_model_type(self.config.model_type).name

    def _base(self) -> Any:
        return FAMILIES[self.family_name].rope_index_class()

    # the thinker's get_rope_index calls these two on ``self``
    def get_llm_pos_ids_for_vision(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self._base().get_llm_pos_ids_for_vision(self, *args, **kwargs)

    def get_chunked_index(self, *args: Any, **kwargs: Any) -> list[tuple[int, int]]:
        return self._base().get_chunked_index(self, *args, **kwargs)

    def __call__(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        image_grid_thw: torch.Tensor | None = None,
        video_grid_thw: torch.Tensor | None = None,
        use_audio_in_video: bool | None = None,
        audio_seqlens: torch.Tensor | None = None,
        second_per_grids: torch.Tensor | None = None,
        **_ignored: Any,  # e.g. mm_token_type_ids, which the omni thinkers do not use
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if use_audio_in_video is None:
            use_audio_in_video = input_ids is not None and audio_in_video_from_ids(input_ids, self.config)
        if attention_mask is None and input_ids is not None:
            attention_mask = torch.ones_like(input_ids)
        return self._base().get_rope_index(
            self,
            input_ids,
            image_grid_thw,
            video_grid_thw,
            attention_mask,
            bool(use_audio_in_video),
            audio_seqlens,
            second_per_grids,
        )


def rope_index_kwargs(multi_modal_inputs: dict[str, Any]) -> dict[str, Any]:
    """``processor.get_rope_index_kwargs``: the omni thinkers' inputs of ``get_rope_index`` beyond the grids."""
    out: dict[str, Any] = {}
    mask = multi_modal_inputs.get("feature_attention_mask")
    if mask is not None:
        out["audio_seqlens"] = torch.as_tensor(mask).sum(-1)
    seconds = multi_modal_inputs.get("video_second_per_grid")
    if seconds is not None:
        out["second_per_grids"] = torch.as_tensor(seconds)
    return out


def attach_omni_support(processor: Any, config: Any) -> Any:
    """Give an omni processor what verl's agent loop, rollout servers and trainer look for; returns it."""
    thinker = thinker_config_of(config)
    family = family_for_model_type(thinker.model_type)
    processor.config = thinker
    processor.get_rope_index = OmniRopeIndex(thinker)
    processor.get_rope_index_kwargs = rope_index_kwargs
    tokenizer = processor.tokenizer
    for name in (
        "image",
        "video",
        "audio",
    ):  # verl reads <name>_token_id (vLLM server's dedup, banned tokens)
        if getattr(processor, f"{name}_token_id", None) is None:
            setattr(
                processor, f"{name}_token_id", tokenizer.convert_tokens_to_ids(getattr(family.tokens, name))
            )
    return processor


# ------------------------------------------------------------------ processor acceptance


def is_omni_checkpoint(name_or_path: str, trust_remote_code: bool = False) -> bool:
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(name_or_path, trust_remote_code=trust_remote_code)
    except Exception:  # not a local / reachable checkpoint: let verl's own function report it
        return False
    return getattr(config, "model_type", None) in OMNI_MODEL_TYPES


def omni_hf_processor(name_or_path: str, **kwargs: Any) -> Any:
    """verl's ``hf_processor`` that also accepts omni checkpoints (others go to the original)."""
    trust = bool(kwargs.get("trust_remote_code", False))
    if not is_omni_checkpoint(name_or_path, trust_remote_code=trust):
        original = _original_hf_processor or _verl_hf_processor()
        return original(name_or_path, **kwargs)
    from transformers import AutoConfig, AutoProcessor

    processor = AutoProcessor.from_pretrained(name_or_path, **kwargs)
    config = AutoConfig.from_pretrained(name_or_path, trust_remote_code=trust)
    return attach_omni_support(processor, config)


def _verl_hf_processor() -> Any:
    return importlib.import_module("verl.utils.tokenizer.tokenizer").hf_processor


# ------------------------------------------------------------------ install


def omni_banned_token_ids(processor: Any) -> list[int]:
    """verl's ``get_vision_placeholder_token_ids`` (tokens the rollout server must never sample) plus, for an
    omni processor, the audio placeholder and the media boundary tokens (:func:`omni_media_token_ids`)."""
    original = (
        _original_banned_ids or importlib.import_module(BANNED_IDS_MODULE).get_vision_placeholder_token_ids
    )
    return sorted(set(original(processor)) | set(omni_media_token_ids(processor)))


def _ensure_audio_collation() -> None:
    model_utils = importlib.import_module("verl.utils.model")
    keys = getattr(model_utils, "_VARLEN_MULTI_MODAL_KEYS", None)
    if keys is None:
        warnings.warn(
            "verl.utils.model has no _VARLEN_MULTI_MODAL_KEYS; audio features of different lengths may not collate",
            stacklevel=2,
        )
        return
    missing = [k for k in AUDIO_FEATURE_KEYS if k not in keys]
    if missing:
        model_utils._VARLEN_MULTI_MODAL_KEYS = set(keys) | set(missing)


def install_ulysses_slicing(model: Any) -> type | None:
    """Wrap the text model of an omni ``model`` with verl's Ulysses input slicing (idempotent); returns the
    wrapped class, or None for a model no family declares or whose family does not name the patch."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in OMNI_MODEL_TYPES:
        return None
    family: ModelFamily = family_for_model_type(model_type)
    if "ulysses_input_slicing" not in family.patches.verl:
        return None
    text_model = getattr(importlib.import_module(family.classes.modeling_module), family.classes.text_model)
    if not text_model.__dict__.get("_omni_ulysses_sliced", False):
        importlib.import_module(MONKEY_PATCH_MODULE).patch_vlm_for_ulysses_input_slicing(text_model)
        text_model._omni_ulysses_sliced = True
    return text_model


def omni_apply_monkey_patch(model: Any, *args: Any, **kwargs: Any) -> Any:
    """verl's ``apply_monkey_patch``, then, with Ulysses sequence parallelism, the input slicing of an omni
    thinker's text model that verl installs for the Qwen-VL model types only (:func:`install_ulysses_slicing`)."""
    original = _original_monkey_patch or importlib.import_module(MONKEY_PATCH_MODULE).apply_monkey_patch
    result = original(model, *args, **kwargs)
    if int(kwargs.get("ulysses_sp_size", args[0] if args else 1)) > 1:
        install_ulysses_slicing(model)
    return result


def _swap(module_name: str, name: str, holders: tuple[str, ...], value: Any, original: Any) -> Any:
    """Point ``name`` at ``value`` in ``module_name`` and every imported holder; returns verl's original."""
    original = original or getattr(importlib.import_module(module_name), name)
    _rebind(holders, name, value)
    return original


def _patch_hf_processor() -> None:
    global _original_hf_processor
    importlib.import_module("verl.workers.config.model")  # make sure its reference exists before patching
    _original_hf_processor = _swap(
        "verl.utils.tokenizer.tokenizer",
        "hf_processor",
        HF_PROCESSOR_HOLDERS,
        omni_hf_processor,
        _original_hf_processor,
    )


def _patch_banned_ids() -> None:
    global _original_banned_ids
    _original_banned_ids = _swap(
        BANNED_IDS_MODULE, "get_vision_placeholder_token_ids", BANNED_IDS_HOLDERS, omni_banned_token_ids,
        _original_banned_ids,
    )  # fmt: skip


def _patch_monkey_patch() -> None:  # later importers of apply_monkey_patch get ours too
    global _original_monkey_patch
    _original_monkey_patch = _swap(
        MONKEY_PATCH_MODULE, "apply_monkey_patch", MONKEY_PATCH_HOLDERS, omni_apply_monkey_patch,
        _original_monkey_patch,
    )  # fmt: skip


def _rebind(holders: tuple[str, ...], name: str, value: Any) -> None:
    """Point ``name`` at ``value`` in every already imported module of ``holders`` that has it."""
    for holder in holders:
        module = sys.modules.get(holder)
        if module is not None and hasattr(module, name):
            setattr(module, name, value)


# What each name in a family's ``patches.verl`` installs (omni_rope_index is attached to the processor by
# hf_processor_accepts_omni; its installer makes sure the audio lengths it reads collate per row).
VERL_PATCHES = {
    "hf_processor_accepts_omni": _patch_hf_processor,
    "omni_rope_index": _ensure_audio_collation,
    "ban_media_tokens": _patch_banned_ids,
    "ulysses_input_slicing": _patch_monkey_patch,
}


def install(register_agent_loop: bool = True) -> None:
    """Install every patch some family names (idempotent). Runs when verl imports this module as ``external_lib``."""
    global _installed
    if _installed:
        return
    wanted = {name for family in FAMILIES.values() for name in family.patches.verl}
    for name, patch in VERL_PATCHES.items():
        if name in wanted:
            patch()
    _installed = True
    if register_agent_loop:
        importlib.import_module("rl.verl_ext.agent_loop")  # @register("omniagent") in this process


install()
