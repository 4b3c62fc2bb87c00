"""Run a Qwen2.5-Omni (thinker) with vLLM's offline engine, ``vllm.LLM``.

vLLM is an optional extra (``pip install omniagent[vllm]``) and is imported only when a
:class:`VLLMPolicy` is constructed; this module imports without it. The message -> request
conversion, :func:`build_vllm_request`, is pure and needs only a processor (for the chat template):

* ``prompt``: the chat template rendered with one placeholder per media item; vLLM expands them.
* ``multi_modal_data``: ``{"image": [HxWx3 uint8, ...], "video": [TxHxWx3 uint8, ...],
  "audio": [(float32 array, 16000), ...]}`` in placeholder order (only non-empty keys).
* ``mm_processor_kwargs``: ``fps`` of the videos and ``use_audio_in_video=True`` when a clip's own
  audio is interleaved (its audio is then listed in ``"audio"`` at the clip's position).

vLLM returns only the top-k log-probs per step (``max_logprobs``, default 20), so the entropy is a
truncated estimate (:func:`entropy_from_topk`) and the turn is marked ``entropy_is_estimate=True``.
Known vLLM issues with audio-in-video: Qwen2.5-Omni#372 (crash on a second request; use
``disable_mm_preprocessor_cache=True``), vllm#22268 (audio ignored under ``vllm serve``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import Any

from envs.messages import SAMPLE_RATE, Message
from omniagent.backends.convert import plan_messages, render_prompt
from omniagent.policy import Policy, TurnOutput, register_policy

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
    request: dict[str, Any] = {"prompt": prompt}
    if data:
        request["multi_modal_data"] = data
    if kwargs:
        request["mm_processor_kwargs"] = kwargs
    return request


def entropy_from_topk(logprobs: Iterable[float], vocab_size: int | None = None) -> float:
    """Estimate a step's entropy (nats) from its top-k log-probs.

    The top-k terms ``-p log p`` are exact; the unseen tail mass ``r = 1 - sum(p)`` is spread
    uniformly over the ``vocab_size - k`` other tokens when ``vocab_size`` is given (an upper bound on
    the tail's share), else counted as a single lump ``-r log r`` (a lower bound).
    """
    probs = [math.exp(lp) for lp in logprobs if lp > -math.inf]
    head = -sum(p * math.log(p) for p in probs if p > 0)
    rest = max(0.0, 1.0 - sum(probs))
    if rest <= 1e-12:
        return head
    if vocab_size is not None and vocab_size > len(probs):
        return head - rest * math.log(rest / (vocab_size - len(probs)))
    return head - rest * math.log(rest)


@register_policy("vllm")
class VLLMPolicy(Policy):
    """A Qwen2.5-Omni thinker on vLLM's offline engine.

    Args:
        model: a Hub id or local folder of a Qwen2.5-Omni checkpoint (vLLM runs its thinker).
        temperature / top_p / max_new_tokens / seed: sampling; ``temperature=0`` is greedy.
        logprobs: top-k log-probs requested per step (capped by vLLM's ``max_logprobs``, default 20).
        use_audio_in_video: interleave a clip's own audio with its frames.
        mm_processor_kwargs: extra processor options for every request (e.g. ``max_pixels``).
        limit_mm_per_prompt / max_model_len / gpu_memory_utilization / dtype: passed to ``vllm.LLM``.
        engine_kwargs: anything else for ``vllm.LLM``.
    """

    name = "vllm"

    def __init__(
        self,
        model: str,
        temperature: float = 0.0,
        top_p: float = 1.0,
        max_new_tokens: int = 256,
        seed: int = 0,
        logprobs: int = 20,
        use_audio_in_video: bool = True,
        mm_processor_kwargs: dict[str, Any] | None = None,
        limit_mm_per_prompt: dict[str, int] | None = None,
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.9,
        dtype: str = "auto",
        engine_kwargs: dict[str, Any] | None = None,
    ) -> None:
        try:
            import vllm
        except ImportError as err:
            raise ImportError(INSTALL_HINT) from err
        from transformers import AutoProcessor

        self.model_id = model
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.max_new_tokens = int(max_new_tokens)
        self.seed = int(seed)
        self.logprobs = int(logprobs)
        self.use_audio_in_video = use_audio_in_video
        self.mm_processor_kwargs = dict(mm_processor_kwargs or {})
        self.processor = AutoProcessor.from_pretrained(model)
        engine: dict[str, Any] = {
            "model": model,
            "seed": self.seed,
            "dtype": dtype,
            "gpu_memory_utilization": gpu_memory_utilization,
            "limit_mm_per_prompt": limit_mm_per_prompt or {"image": 64, "video": 4, "audio": 8},
        }
        if max_model_len is not None:
            engine["max_model_len"] = max_model_len
        engine.update(engine_kwargs or {})
        self._vllm = vllm
        self.llm = vllm.LLM(**engine)
        self.vocab_size = len(self.processor.tokenizer)

    def act(self, messages: list[Message]) -> TurnOutput:
        start = time.perf_counter()
        request = build_vllm_request(
            messages,
            self.processor,
            use_audio_in_video=self.use_audio_in_video,
            mm_processor_kwargs=self.mm_processor_kwargs,
        )
        params = self._vllm.SamplingParams(
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_new_tokens,
            logprobs=self.logprobs,
            seed=self.seed if self.temperature > 0 else None,
        )
        result = self.llm.generate([request], sampling_params=params, use_tqdm=False)[0]
        completion = result.outputs[0]
        token_logprobs: list[float] = []
        entropies: list[float] = []
        for token_id, step in zip(completion.token_ids, completion.logprobs or [], strict=False):
            chosen = step.get(token_id)
            token_logprobs.append(float(chosen.logprob) if chosen is not None else float("nan"))
            # top-k plus the sampled token when it fell outside them: every exactly known term counts
            entropies.append(entropy_from_topk([lp.logprob for lp in step.values()], self.vocab_size))
        return TurnOutput(
            text=completion.text,
            token_logprobs=token_logprobs or None,
            token_entropies=entropies or None,
            entropy=sum(entropies) / len(entropies) if entropies else None,
            entropy_is_estimate=True,
            prompt_tokens=len(result.prompt_token_ids or []),
            completion_tokens=len(completion.token_ids),
            model_seconds=time.perf_counter() - start,
        )

    def close(self) -> None:
        self.llm = None
