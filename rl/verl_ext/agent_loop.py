"""The ``omniagent`` verl agent loop: one environment episode per trajectory, one ``AgentLoopOutput`` per turn.

verl 0.9.1 (``verl/experimental/agent_loop/agent_loop.py``) instantiates the class registered under a row's
``agent_name`` for every trajectory and awaits ``run(sampling_params, **row)``. The V1 trainer's worker
(``verl/trainer/ppo/v1/agent_loop_tq.py::AgentLoopWorkerTQ._agent_loop_postprocess``) accepts a *list* of
outputs: each becomes its own training row keyed ``{uid}_{session_id}_{i}``, is re-processed with its own
prompt and media, and gets the final output's reward copied onto it. That is what TAURA
(:mod:`rl.verl_ext.trainer`) expects: one row per turn.

Per turn:

1. the environment's current context (:class:`envs.env.OmniVideoEnv` purges earlier media into text stubs, so
   it holds at most one raw percept) goes through the model family's processor
   (:func:`omniagent.backends.convert.build_model_inputs`): the expanded ``prompt_ids`` the trainer scores,
   the media in ``multi_modal_data`` and the processor kwargs (frame sizes, fps, audio-in-video) that make
   verl's re-processing reproduce exactly those tokens and features;
2. the rollout server gets the *unexpanded* prompt ids (one placeholder per media item, the form vLLM expands
   itself) with the media in vLLM's format (:func:`omniagent.backends.vllm_backend.build_vllm_request`):
   ``await server_manager.generate(request_id=..., prompt_ids=..., sampling_params=..., image_data=...,
   video_data=..., audio_data=..., mm_processor_kwargs=...)``;
3. the sampled tokens are decoded and stepped through the environment; a thinking variant's reasoning block
   (the family's ``thinking`` format, e.g. ``<think>...</think>``) is cut off the text first, while its tokens
   stay in the turn's response (trained on, and counted in the turn's entropy).

The output of turn ``k`` holds that turn's prompt and its generated tokens only (``response_mask`` all ones,
``response_logprobs`` the server's; generation stops short of any media token, and a turn left with no tokens
-- an aborted request -- carries one masked EOS so that verl still gets a well-formed row). The reward -- the
environment's verifiable score minus optional format penalties, optionally gated on the evidence having been
served (``env.reward``, :mod:`rl.algo.reward`) -- is written on every output, and ``extra_fields`` carry ``turn_index``,
``action_type`` (``taura.action_field``), ``error``, ``frames_used``, ``audio_seconds_used``, ``session_id``
and the episode's ``turn_budget``/``stop_reason``.

Turn budget (``env.turns``): ``dynamic_by_duration`` gives ``min(min + floor(duration / seconds_per_extra_turn),
max)``; otherwise ``sample_uniform`` draws it uniformly from ``[min, max]`` per episode, else it is ``max``
(:mod:`rl.algo.turn_budget`, shared with the local trainer).
Per-call limits come from ``env.limits``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)

from envs.env import OmniVideoEnv
from envs.limits import EnvLimits
from envs.messages import Message
from envs.tasks import Task
from omniagent.backends.convert import build_model_inputs, model_video_kwargs
from omniagent.backends.vllm_backend import build_vllm_request
from omniagent.families import family_for_processor
from rl.algo.reward import (
    ReadingScope,
    RewardConfig,
    TurnText,
    answer_closeness,
    percept_spans,
    prior_score,
    reading_rate,
    shaped_reward,
    touches_evidence,
)
from rl.algo.turn_budget import TurnBudgetConfig, turn_budget
from rl.verl_ext.media_tokens import omni_media_token_ids
from rl.verl_ext.rl_dataset import task_from_extra_info

logger = logging.getLogger(__name__)

AGENT_NAME = "omniagent"
INVALID_ACTION = "invalid"  # action_type of a turn whose output did not parse


# ------------------------------------------------------------------ settings (the config's `env:` block)


@dataclass
class EnvSettings:
    turns: TurnBudgetConfig = field(default_factory=TurnBudgetConfig)
    limits: EnvLimits = field(default_factory=EnvLimits)
    reward: RewardConfig = field(default_factory=RewardConfig)

    @classmethod
    def from_config(cls, env: Mapping[str, Any] | None) -> EnvSettings:
        """From the config's ``env:`` block (a DictConfig or dict; missing parts take the defaults)."""
        env = _plain(env) or {}
        unknown = set(env) - {"turns", "limits", "reward"}
        if unknown:
            raise ValueError(f"unknown env settings {sorted(unknown)}; expected turns, limits, reward")
        return cls(
            turns=TurnBudgetConfig(**(env.get("turns") or {})),
            limits=EnvLimits(**(env.get("limits") or {})),  # unknown limit names are refused
            reward=RewardConfig(**(env.get("reward") or {})),
        )


def _plain(value: Any) -> Any:
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, DictConfig | ListConfig):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf comes with verl
        pass
    return dict(value) if isinstance(value, Mapping) else value


def episode_rng(*parts: Any) -> random.Random:
    """A generator seeded from the trajectory's ids (uid, session, step): reproducible budgets per rollout."""
    return random.Random(zlib.crc32(":".join(str(p) for p in parts).encode()))


# ------------------------------------------------------------------ one turn's prompt


@dataclass
class TurnPrompt:
    """A context as the trainer scores it (expanded ids + HF media) and as the rollout server receives it."""

    prompt_ids: list[int]  # placeholders expanded, as the processor gives them: the training row's prompt
    multi_modal_data: dict[str, list[Any]] | None  # {"images", "videos", "audios"} for verl's re-processing
    mm_processor_kwargs: dict[str, Any] | None  # processor kwargs that reproduce prompt_ids and the features
    request_ids: list[int]  # one placeholder per media item: what vLLM expands itself
    image_data: list[Any] | None = None
    video_data: list[Any] | None = None
    audio_data: list[Any] | None = None  # (samples, 16000) pairs
    server_mm_kwargs: dict[str, Any] | None = None  # vLLM's mm_processor_kwargs (fps, use_audio_in_video)
    media_counts: dict[str, int] = field(default_factory=dict)


def build_turn_prompt(
    messages: list[Message],
    processor: Any,
    tokenizer: Any,
    base_mm_kwargs: Mapping[str, Any] | None = None,
) -> TurnPrompt:
    """Both forms of one context (pure; runs the processor once)."""
    # the model-config values the family's processor must share (Qwen3-Omni: position_id_per_seconds, which
    # orders an interleaved clip); omni_patches sets processor.config to the thinker config
    video_kwargs = model_video_kwargs(processor, getattr(processor, "config", None))
    batch, prepared = build_model_inputs(messages, processor, video_kwargs=video_kwargs)
    prompt_ids = [int(t) for t in batch["input_ids"][0].tolist()]
    call = prepared.call_kwargs
    mm_data: dict[str, list[Any]] = {}
    if call.get("images"):
        mm_data["images"] = list(call["images"])
    if call.get("videos"):
        mm_data["videos"] = list(call["videos"])
    if call.get("audio"):
        mm_data["audios"] = list(call["audio"])
    hf_kwargs = {
        **dict(base_mm_kwargs or {}),
        **{k: call[k] for k in ("images_kwargs", "videos_kwargs") if k in call},
    }

    request = build_vllm_request(messages, processor, use_audio_in_video=prepared.use_audio_in_video)
    if request["prompt"] != prepared.text:
        raise RuntimeError("the rollout prompt and the training prompt were rendered differently")
    server_data = request.get("multi_modal_data", {})
    counts = {k: len(v) for k, v in mm_data.items()}
    server_counts = {
        {"image": "images", "video": "videos", "audio": "audios"}[k]: len(v) for k, v in server_data.items()
    }
    server_kwargs = request.get("mm_processor_kwargs")
    if (
        counts != server_counts
        or bool((server_kwargs or {}).get("use_audio_in_video")) != prepared.use_audio_in_video
    ):
        raise RuntimeError(f"rollout and training media differ: {server_counts} vs {counts}")
    return TurnPrompt(
        prompt_ids=prompt_ids,
        multi_modal_data=mm_data or None,
        mm_processor_kwargs=hf_kwargs or None,
        request_ids=[int(t) for t in tokenizer.encode(request["prompt"], add_special_tokens=False)],
        image_data=server_data.get("image"),
        video_data=server_data.get("video"),
        audio_data=server_data.get("audio"),
        server_mm_kwargs=server_kwargs,
        media_counts=counts,
    )


@dataclass
class TurnResponse:
    """One turn's generated tokens as trained on, and their text as the environment reads it."""

    ids: list[int]  # every sampled token, a reasoning block's included (they are trained on)
    mask: list[int]
    logprobs: list[float] | None
    text: str  # what the environment parses: the decoded text with any reasoning block cut off
    cut: bool  # cut before a media token
    thinking: str | None = None  # the reasoning block of a thinking model (kept out of env.step)


@dataclass
class EpisodeTally:
    """What an episode has produced so far: the outcome, format errors, the server's staleness tags."""

    budget: int
    env_reward: float = 0.0
    answered: bool = False
    format_errors: int = 0
    stop_reason: str | None = None
    global_steps: list[int] = field(default_factory=list)
    evidence: list[list[float]] | None = None  # the task's evidence intervals, when it knows them
    spans: list[tuple[float, float]] = field(default_factory=list)  # what its percepts covered so far
    media: str = ""  # the task's media: its ground truth, when synthetic, scores the Observations
    turns: list[TurnText] = field(default_factory=list)  # what each turn wrote and was served
    prior: float | None = None  # what the no-look prior earns on the task (env.reward.prior_tasks), else None
    task_type: str = ""  # with the truth, what env.reward.num_credit grades the answer against
    truth: Any = None
    answer: Any = None  # the parsed answer, once the episode has answered

    def step(self, reward: float, terminated: bool, info: dict[str, Any], server_extra: Any) -> None:
        parsed = info.get("parsed") or {}
        self.turns.append(
            TurnText(
                parsed.get("observation"),
                parsed.get("action"),
                info.get("timestamps") or [],
                info.get("error"),
            )
        )
        if info.get("error"):
            self.format_errors += 1
        else:
            self.spans += percept_spans(info.get("action_type"), info.get("timestamps") or [])
        if terminated:
            self.env_reward, self.answered = float(reward), True
            self.answer = info.get("answer")
        for key in ("min_global_steps", "max_global_steps", "global_steps"):
            value = (server_extra or {}).get(key)
            if value is not None:
                self.global_steps.append(int(value))

    @property
    def evidence_seen(self) -> bool:
        """Whether a percept touched the evidence (True for a task without evidence: nothing to gate)."""
        return not self.evidence or touches_evidence(self.spans, self.evidence)

    def reading(self, scope: ReadingScope = "all") -> float | None:
        """The share of served frames and audio (in ``scope``) the Observations read exactly (None: no ground truth)."""
        return reading_rate(self.media, self.turns, scope) if self.media else None


# ------------------------------------------------------------------ the agent loop


@register(AGENT_NAME)
class OmniAgentLoop(AgentLoopBase):
    """Runs one :class:`~envs.env.OmniVideoEnv` episode and returns one output per turn (see module docs)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.response_length = int(self.rollout_config.response_length)
        self.settings = EnvSettings.from_config(self.config.get("env"))
        if self.processor is None:
            raise ValueError(
                "the omniagent agent loop needs the omni processor; load rl.verl_ext.omni_patches "
                "(actor_rollout_ref.model.external_lib=rl.verl_ext.omni_patches) so verl accepts it"
            )
        self.media_token_ids = frozenset(omni_media_token_ids(self.processor))
        # a thinking variant's <think>...</think> block is cut off before env.step (a model that writes none is
        # left as is); its tokens stay in the response ids, so they are trained on and TAURA's turn entropy
        # averages over them too
        self.thinking = family_for_processor(self.processor).thinking
        self.eos_token_id = int(self.tokenizer.eos_token_id)

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Blocking work (media decoding, the processor) off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args, **kwargs))

    def _clean_response(self, token_output: Any) -> tuple[list[int], list[float] | None, bool]:
        """The sampled ids (and log-probs) capped at response_length and cut before any media token.

        Media tokens should never be sampled (rl.verl_ext.omni_patches bans them in vLLM); if one is anyway, only the
        prefix before it is kept, so the row still matches its features. Returns (ids, logprobs, was_cut).
        """
        ids = [int(t) for t in token_output.token_ids][: self.response_length]
        logprobs = [float(x) for x in token_output.log_probs][: len(ids)] if token_output.log_probs else None
        cut = next((i for i, t in enumerate(ids) if t in self.media_token_ids), None)
        if cut is not None:
            ids = ids[:cut]
            logprobs = logprobs[:cut] if logprobs is not None else None
        return ids, logprobs, cut is not None

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> list[AgentLoopOutput]:
        task = task_from_extra_info(kwargs.get("extra_info"))
        uid, session_id = kwargs.get("uid", ""), int(kwargs.get("session_id", 0))
        env = OmniVideoEnv(limits=self.settings.limits)
        try:
            return await self._episode(env, task, sampling_params, uid, session_id, kwargs)
        finally:
            env.close()

    async def _episode(
        self,
        env: OmniVideoEnv,
        task: Task,
        sampling_params: dict[str, Any],
        uid: str,
        session_id: int,
        row: dict[str, Any],
    ) -> list[AgentLoopOutput]:
        # the first reset opens the media: its duration sets the turn budget K
        _, info = await self._call(env.reset, options=task.env_options())
        rng = episode_rng(uid, session_id, row.get("global_steps", ""))
        budget = turn_budget(info["media"]["duration"], self.settings.turns, rng)
        obs, info = await self._call(env.reset, options=task.env_options(budget))

        request_id = uuid4().hex  # one sticky session per trajectory (prefix caching on the same server)
        generate_extra = {"priority": int(row["priority"])} if "priority" in row else {}
        tally = EpisodeTally(
            budget=budget,
            evidence=task.evidence,
            media=task.media,
            prior=prior_score(self.settings.reward, task),
            task_type=task.task_type,
            truth=task.answer,
        )
        episode_fields = {"session_id": session_id, "task_id": task.id, "turn_budget": budget}
        outputs: list[AgentLoopOutput] = []
        for turn in range(budget):
            prompt: TurnPrompt = await self._call(
                build_turn_prompt, obs, self.processor, self.tokenizer, self.mm_processor_kwargs
            )
            if len(prompt.prompt_ids) >= self.prompt_length:
                if not outputs:
                    raise ValueError(
                        f"the first turn's prompt has {len(prompt.prompt_ids)} tokens, at or over "
                        f"rollout.prompt_length={self.prompt_length}; raise data.max_prompt_length"
                    )
                tally.stop_reason = "context_overflow"
                break
            started = time.perf_counter()
            token_output = await self.server_manager.generate(
                request_id=request_id,
                prompt_ids=prompt.request_ids,
                sampling_params=dict(sampling_params),
                image_data=prompt.image_data,
                video_data=prompt.video_data,
                audio_data=prompt.audio_data,
                mm_processor_kwargs=prompt.server_mm_kwargs,
                **generate_extra,
            )
            generate_s = time.perf_counter() - started
            response = self._response(token_output)
            started = time.perf_counter()
            obs, reward, terminated, truncated, info = await self._call(env.step, response.text)
            metrics = AgentLoopMetrics(
                generate_sequences=generate_s,
                tool_calls=time.perf_counter() - started,
                num_preempted=-1 if token_output.num_preempted is None else token_output.num_preempted,
            )
            tally.step(reward, terminated, info, token_output.extra_fields)
            outputs.append(
                self._turn_output(turn, prompt, response, token_output, info, metrics, episode_fields)
            )
            if terminated or truncated:
                tally.stop_reason = info.get("stop_reason")
                break
        return self._finish(outputs, tally)

    def _response(self, token_output: Any) -> TurnResponse:
        """The turn's training tokens and its decoded text; an empty turn becomes one masked EOS."""
        ids, logprobs, cut = self._clean_response(token_output)
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        thinking, text = self.thinking.split(text) if self.thinking is not None else (None, text)
        mask = [1] * len(ids)
        if not ids:  # aborted request, or a media token first: one masked EOS, nothing to learn
            ids, mask = [self.eos_token_id], [0]
            logprobs = [0.0] if logprobs is not None else None
        return TurnResponse(ids=ids, mask=mask, logprobs=logprobs, text=text, cut=cut, thinking=thinking)

    def _turn_output(
        self,
        turn: int,
        prompt: TurnPrompt,
        response: TurnResponse,
        token_output: Any,
        info: dict[str, Any],
        metrics: AgentLoopMetrics,
        episode_fields: dict[str, Any],
    ) -> AgentLoopOutput:
        """One training row: this turn's prompt, its tokens, and what the environment said about it."""
        extra = {
            **dict(token_output.extra_fields or {}),
            "turn_index": turn,
            "action_type": info.get("action_type") or INVALID_ACTION,
            "error": info.get("error"),
            "frames_used": int(info.get("frames_used", 0)),
            "audio_seconds_used": float(info.get("audio_seconds_used", 0.0)),
            **episode_fields,  # session_id, task_id, turn_budget
            "media_in_prompt": dict(prompt.media_counts),
            "response_cut_at_media_token": response.cut,
            "thinking_chars": len(response.thinking or ""),  # the reasoning block kept out of env.step
            "turn_scores": [],
            "tool_rewards": [],
        }
        return AgentLoopOutput(
            prompt_ids=prompt.prompt_ids,
            response_ids=response.ids,
            response_mask=response.mask,
            response_logprobs=response.logprobs,
            multi_modal_data=prompt.multi_modal_data,
            mm_processor_kwargs=prompt.mm_processor_kwargs,
            num_turns=2 * (turn + 1),  # user + assistant messages so far (verl's count)
            metrics=metrics,
            extra_fields=extra,
        )

    def _finish(self, outputs: list[AgentLoopOutput], tally: EpisodeTally) -> list[AgentLoopOutput]:
        """The episode's shaped reward and outcome on every turn's row."""
        seen = tally.evidence_seen if tally.evidence else None  # None: no evidence to test
        reward_cfg = self.settings.reward
        # the reading credit: synthetic media only, and only computed when it is paid
        reading = tally.reading(reward_cfg.reading_scope) if reward_cfg.reading_credit else None
        # the number credit's closeness: None unless num_credit is set and the task asks for a number
        close = answer_closeness(reward_cfg, tally.task_type, tally.answer, tally.truth)
        final = shaped_reward(
            tally.env_reward,
            tally.format_errors,
            tally.answered,
            reward_cfg,
            seen,
            reading,
            tally.prior,
            close,
        )
        reward_info = {
            "acc": tally.env_reward,
            "evidence_seen": tally.evidence_seen,
            "answered": tally.answered,
            "format_errors": tally.format_errors,
            "turns": len(outputs),
            "turn_budget": tally.budget,
        }
        for output in outputs:
            output.reward_score = final
            output.extra_fields["reward_extra_info"] = dict(reward_info)
            output.extra_fields["stop_reason"] = tally.stop_reason
            output.extra_fields["env_reward"] = tally.env_reward
            if tally.global_steps:  # staleness tags span the whole trajectory
                output.extra_fields["min_global_steps"] = min(tally.global_steps)
                output.extra_fields["max_global_steps"] = max(tally.global_steps)
        return outputs
