"""Run an omni thinker (Qwen2.5-Omni, Qwen3-Omni) with vLLM's offline engine, ``vllm.LLM``.

vLLM is an optional extra (``pip install omniagent[vllm]``) and is imported only when a
:class:`VLLMPolicy` is constructed; this module imports without it. The message -> request
conversion, :func:`build_vllm_request`, is pure and needs only a processor (for the chat template):

* ``prompt``: the chat template rendered with one placeholder per media item; vLLM expands them.
* ``multi_modal_data``: ``{"image": [HxWx3 uint8, ...], "video": [TxHxWx3 uint8, ...],
  "audio": [(float32 array, 16000), ...]}`` in placeholder order (only non-empty keys).
* ``mm_processor_kwargs``: ``fps`` of the videos and ``use_audio_in_video=True`` when a clip's own
  audio is interleaved (its audio is then listed in ``"audio"`` at the clip's position), with
  ``second_per_grid_ts``: vLLM's Qwen-Omni thinkers order an interleaved clip's frames and audio by
  that value, read from these kwargs, and assume 1 s (2 s in some releases) per temporal grid without
  it; the Hugging Face processor ignores the key.

The chat template and placeholders are the checkpoint's own, so the same builder serves every family
of :mod:`omniagent.families`; a thinking variant's reasoning block is cut off the text the environment
parses and returned as ``TurnOutput.thinking``.

vLLM returns only the top-k log-probs per step (``max_logprobs``, default 20), so the entropy is the
shared top-k estimate of :mod:`omniagent.backends.entropy` (a lower bound), recorded as
``entropy_estimator="topk_lump"``.
Known vLLM issues with audio-in-video: Qwen2.5-Omni#372 (crash on a second request; use
``disable_mm_preprocessor_cache=True``), vllm#22268 (audio ignored under ``vllm serve``).
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field

from envs.messages import SAMPLE_RATE, Message
from omniagent.backends.constrained import ConstraintUnavailable, TurnSchemas
from omniagent.backends.convert import plan_messages, render_prompt
from omniagent.backends.entropy import TOPK_ESTIMATOR, topk_entropy
from omniagent.families import family_for_processor
from omniagent.policy_base import Policy, PolicyParams, TurnOutput, register_policy

INSTALL_HINT = "vLLM is not installed; install the extra with `pip install omniagent[vllm]`"


def build_vllm_request(
    messages: list[Message],
    processor: Any,
    *,
    use_audio_in_video: bool = True,
    add_generation_prompt: bool = True,
    mm_processor_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Turn chat messages into one ``vllm.LLM.generate`` prompt dict (pure; no vLLM needed).

    Interleaving follows :func:`omniagent.backends.convert.plan_messages`, with one extra rule: vLLM
    matches audio items to videos when ``use_audio_in_video`` is set, so standalone audio parts next
    to an interleaved clip turn interleaving off (the clip audio then goes as its own audio part).
    """
    plan = plan_messages(messages, allow_audio_in_video=use_audio_in_video)
    if plan.use_audio_in_video and len(plan.audios) != len(plan.videos):
        plan = plan_messages(messages, allow_audio_in_video=False)
        plan.notes.append(
            "standalone audio next to a clip with audio: vLLM gets them as separate audio items"
        )
    prompt = render_prompt(processor, plan.conversation, add_generation_prompt=add_generation_prompt)

    data: dict[str, list[Any]] = {}
    if plan.images:
        data["image"] = list(plan.images)
    if plan.videos:
        data["video"] = [v.frames for v in plan.videos]
    if plan.audios:
        data["audio"] = [(a, SAMPLE_RATE) for a in plan.audios]

    kwargs: dict[str, Any] = dict(mm_processor_kwargs or {})
    if plan.videos:
        kwargs.setdefault("fps", plan.video_fps)
        if not plan.fps_uniform:  # vLLM hands the HF processor one fps per request
            plan.notes.append(f"videos have different frame rates; vLLM gets fps={kwargs['fps']} for all")
        if plan.use_audio_in_video:
            kwargs["use_audio_in_video"] = True
            patch = getattr(processor.video_processor, "temporal_patch_size", 2)
            kwargs["second_per_grid_ts"] = [patch / v.fps for v in plan.videos]
    request: dict[str, Any] = {"prompt": prompt}
    if data:
        request["multi_modal_data"] = data
    if kwargs:
        request["mm_processor_kwargs"] = kwargs
    return request


class VLLMParams(PolicyParams):
    """Parameters of :class:`VLLMPolicy`."""

    model: str = Field(
        description="Hub id or local folder of a Qwen2.5-Omni or Qwen3-Omni checkpoint (vLLM runs its thinker)"
    )
    temperature: float = Field(0.0, ge=0, description="0 decodes greedily")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus mass when sampling")
    max_new_tokens: int = Field(256, ge=1, description="cap on generated tokens per turn")
    seed: int = Field(0, description="engine seed; also the sampling seed when temperature > 0")
    logprobs: int = Field(20, ge=0, description="top-k log-probs per step (vLLM caps it at max_logprobs)")
    use_audio_in_video: bool = Field(True, description="interleave a clip's own audio with its frames")
    mm_processor_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="extra processor options for every request (e.g. max_pixels)"
    )
    limit_mm_per_prompt: dict[str, int] = Field(
        default_factory=lambda: {"image": 64, "video": 4, "audio": 8}, description="passed to vllm.LLM"
    )
    max_model_len: int | None = Field(None, description="passed to vllm.LLM")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="passed to vllm.LLM")
    dtype: str = Field("auto", description="passed to vllm.LLM")
    engine_kwargs: dict[str, Any] = Field(default_factory=dict, description="anything else for vllm.LLM")
    constrained: bool = Field(
        False,
        description="decode every turn under the environment's JSON schema of a valid turn (vLLM "
        "structured outputs); the last turn of the budget may only answer",
    )
    thinking: bool | None = Field(
        None,
        description="the model writes a reasoning block before each turn (a thinking variant); default: "
        "from the checkpoint name (e.g. Qwen3-Omni-30B-A3B-Thinking)",
    )


def structured_output_kwargs(vllm: Any, schema: dict[str, Any]) -> dict[str, Any]:
    """The ``SamplingParams`` keyword that constrains one request to ``schema``, in the API of the
    vLLM installed: ``structured_outputs=StructuredOutputsParams(json=...)`` from 0.12 on (where
    the older field was removed), ``guided_decoding=GuidedDecodingParams(json=...)`` before."""
    module = getattr(vllm, "sampling_params", None)
    if (cls := getattr(module, "StructuredOutputsParams", None)) is not None:
        return {"structured_outputs": cls(json=schema)}
    if (cls := getattr(module, "GuidedDecodingParams", None)) is not None:
        return {"guided_decoding": cls(json=schema)}
    raise ConstraintUnavailable(
        "this vLLM has neither StructuredOutputsParams nor GuidedDecodingParams; set constrained=false"
    )


@register_policy("vllm")
class VLLMPolicy(Policy):
    """An omni thinker on vLLM's offline engine; parameters in :class:`VLLMParams`."""

    name = "vllm"
    Params = VLLMParams

    def __init__(self, **kwargs: Any) -> None:
        p: VLLMParams = self._init_params(kwargs)
        try:
            import vllm
        except ImportError as err:
            raise ImportError(INSTALL_HINT) from err
        from transformers import AutoProcessor

        self.model_id = p.model
        self.temperature, self.top_p, self.seed = p.temperature, p.top_p, p.seed
        self.max_new_tokens, self.logprobs = p.max_new_tokens, p.logprobs
        self.use_audio_in_video = p.use_audio_in_video
        self.mm_processor_kwargs = dict(p.mm_processor_kwargs)
        self.processor = AutoProcessor.from_pretrained(p.model)
        family = family_for_processor(self.processor)
        self.thinking = family.thinking if family.variant(p.model, p.thinking).thinking else None
        engine: dict[str, Any] = {
            "model": p.model,
            "seed": p.seed,
            "dtype": p.dtype,
            "gpu_memory_utilization": p.gpu_memory_utilization,
            "limit_mm_per_prompt": dict(p.limit_mm_per_prompt),
        }
        if p.max_model_len is not None:
            engine["max_model_len"] = p.max_model_len
        engine.update(p.engine_kwargs)
        self._vllm = vllm
        self.episode = TurnSchemas() if p.constrained else None
        if self.episode is not None:
            structured_output_kwargs(vllm, {"type": "object"})  # fail now, not on the first turn
        self.llm = vllm.LLM(**engine)

    def reset(self, info: dict[str, Any]) -> None:
        if self.episode is not None:
            self.episode.reset(info)

    def act(self, messages: list[Message]) -> TurnOutput:
        start = time.perf_counter()
        request = build_vllm_request(
            messages,
            self.processor,
            use_audio_in_video=self.use_audio_in_video,
            mm_processor_kwargs=self.mm_processor_kwargs,
        )
        constraint: dict[str, Any] = {}
        if self.episode is not None:  # the last turn of the budget decodes under the answer-only schema
            constraint = structured_output_kwargs(self._vllm, self.episode.current())
            self.episode.advance()
        params = self._vllm.SamplingParams(
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_new_tokens,
            logprobs=self.logprobs,
            seed=self.seed if self.temperature > 0 else None,
            **constraint,
        )
        result = self.llm.generate([request], sampling_params=params, use_tqdm=False)[0]
        completion = result.outputs[0]
        token_logprobs, entropies = step_stats(completion.token_ids, completion.logprobs or [])
        text = completion.text
        thinking, text = self.thinking.split(text) if self.thinking is not None else (None, text)
        return TurnOutput(
            text=text,
            thinking=thinking,
            token_logprobs=token_logprobs or None,
            token_entropies=entropies or None,
            entropy=sum(entropies) / len(entropies) if entropies else None,
            entropy_estimator=TOPK_ESTIMATOR if entropies else None,
            prompt_tokens=len(result.prompt_token_ids or []),
            completion_tokens=len(completion.token_ids),
            model_seconds=time.perf_counter() - start,
        )

    def close(self) -> None:
        self.llm = None


def step_stats(token_ids: Any, steps: Any) -> tuple[list[float], list[float]]:
    """Chosen-token log-probs and per-step entropy estimates from vLLM's per-step log-prob dicts.

    Each step maps token id -> Logprob for the top-k plus the sampled token when it fell outside
    them: every exactly known term counts.
    """
    token_logprobs: list[float] = []
    entropies: list[float] = []
    for token_id, step in zip(token_ids, steps, strict=False):
        chosen = step.get(token_id)
        token_logprobs.append(float(chosen.logprob) if chosen is not None else float("nan"))
        entropies.append(topk_entropy([lp.logprob for lp in step.values()]))
    return token_logprobs, entropies
