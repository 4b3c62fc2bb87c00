"""verl 0.9.1 with the tiny random Qwen3-Omni thinker on CPU (rl/verl_ext/omni_patches.py, the agent loop).

The patches are the Qwen2.5-Omni ones read from the family spec (test_verl_omni.py covers Qwen2.5), plus the
Ulysses input slicing of the thinker's text model, DeepStack inputs included. The agent loop runs through verl's
own worker code (``AgentLoopWorkerTQ``) with a scripted rollout server whose turns start with a reasoning block,
as a Thinking variant's do.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import pickle
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from testkit import verl_tiny_thinker

pytest.importorskip("verl", reason="verl is not installed (pip install 'verl[verl-core]==0.9.1')")

from verl.trainer.ppo.v1 import agent_loop_tq  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from envs.tasks import Task  # noqa: E402
from omniagent.backends.convert import build_model_inputs, model_video_kwargs  # noqa: E402
from omniagent.families import FAMILIES, get_family  # noqa: E402
from rl.verl_ext import omni_patches as verl_omni  # noqa: E402  (patches verl as external_lib would)
from rl.verl_ext import rl_dataset  # noqa: E402

FAMILY = get_family("qwen3-omni")
RNG = np.random.default_rng(3)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return verl_tiny_thinker(tmp_path_factory.mktemp("tiny3"), family="qwen3-omni")


def clip_message() -> list[dict[str, Any]]:
    clip = {
        "type": "video", "video": RNG.integers(0, 255, (4, 64, 64, 3), dtype=np.uint8),
        "timestamps": [0.0, 0.5, 1.0, 1.5], "fps": 2.0,
        "audio": (0.1 * RNG.standard_normal(16000 * 2)).astype(np.float32), "sampling_rate": 16000,
    }  # fmt: skip
    image = {"type": "image", "image": RNG.integers(0, 255, (64, 64, 3), dtype=np.uint8)}
    return [{"role": "user", "content": [{"type": "text", "text": "Look:"}, image, clip]}]


# ------------------------------------------------------------------ the patches


def test_every_patch_a_family_names_is_installed_in_verl() -> None:
    from verl.models.transformers import monkey_patch
    from verl.utils import tokenizer
    from verl.workers.engine.fsdp import transformer_impl
    from verl.workers.rollout import utils as rollout_utils

    for family in FAMILIES.values():
        assert set(family.patches.verl) <= set(verl_omni.VERL_PATCHES), family.name
        assert set(family.model_types) <= set(verl_omni.OMNI_MODEL_TYPES)
    assert tokenizer.hf_processor is verl_omni.omni_hf_processor
    assert rollout_utils.get_vision_placeholder_token_ids is verl_omni.omni_banned_token_ids
    # the FSDP engine imports apply_monkey_patch by name; it gets ours wherever it was imported from
    assert monkey_patch.apply_monkey_patch is transformer_impl.apply_monkey_patch
    assert transformer_impl.apply_monkey_patch is verl_omni.omni_apply_monkey_patch


def test_verl_accepts_the_qwen3_processor_and_bans_its_media_tokens(tiny) -> None:
    from verl.workers.config import HFModelConfig
    from verl.workers.rollout import utils as rollout_utils

    with pytest.warns(UserWarning, match="Unsupported processor type"):
        assert verl_omni._original_hf_processor(str(tiny.path)) is None  # the gap the patch closes
    processor = HFModelConfig(path=str(tiny.path), external_lib="rl.verl_ext.omni_patches").processor
    assert type(processor).__name__ == "Qwen3OmniMoeProcessor"
    assert isinstance(processor.get_rope_index, verl_omni.OmniRopeIndex)
    assert pickle.loads(pickle.dumps(processor.get_rope_index)).family_name == "qwen3-omni"
    conv = tiny.tokenizer.convert_tokens_to_ids
    assert processor.audio_token_id == conv("<|audio_pad|>") and processor.video_token_id == conv(
        "<|video_pad|>"
    )
    banned = rollout_utils.get_vision_placeholder_token_ids(processor)  # what the vLLM server masks out
    assert (
        set(banned) == {conv(t) for t in FAMILY.tokens.all()} == set(FAMILY.media_token_ids(tiny.tokenizer))
    )


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_rope_index_through_verls_call_matches_the_qwen3_thinker(tiny) -> None:
    """verl's agent-loop call (keywords + the kwargs hook) gives the thinker's own positions for an image and a
    clip with its audio interleaved in the order of the model config's positions per second."""
    model, processor = tiny.model, tiny.processor
    kwargs = model_video_kwargs(processor, processor.config)
    assert kwargs == {"position_id_per_seconds": 13}
    batch, prepared = build_model_inputs(clip_message(), processor, video_kwargs=kwargs)
    assert prepared.use_audio_in_video
    mm = {k: v for k, v in batch.items() if k not in ("input_ids", "attention_mask", "use_audio_in_video")}
    ours, _ = processor.get_rope_index(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
        image_grid_thw=batch["image_grid_thw"], video_grid_thw=batch["video_grid_thw"],
        **verl_omni.rope_index_kwargs(mm),
    )  # fmt: skip
    theirs, _ = model.get_rope_index(
        batch["input_ids"], batch["image_grid_thw"], batch["video_grid_thw"], batch["attention_mask"], True,
        batch["feature_attention_mask"].sum(-1), batch["video_second_per_grid"],
    )  # fmt: skip
    assert torch.equal(ours, theirs)
    assert verl_omni.audio_in_video_from_ids(batch["input_ids"], model.config)  # read off the ids


# ------------------------------------------------------------------ Ulysses slicing, DeepStack inputs


def _spy_text_model(monkeypatch: pytest.MonkeyPatch) -> tuple[type, list[dict[str, Any]]]:
    """The Qwen3 text model with its forward recording the keyword arguments it gets (restored after)."""
    text_model = getattr(
        __import__(FAMILY.classes.modeling_module, fromlist=["_"]), FAMILY.classes.text_model
    )
    original, seen = text_model.forward, []

    def recording(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(text_model, "forward", recording)
    monkeypatch.setattr(text_model, "_omni_ulysses_sliced", False, raising=False)
    return text_model, seen


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_ulysses_slicing_splits_the_deepstack_inputs_with_the_sequence(tiny, monkeypatch) -> None:
    """With sequence parallelism verl slices the merged embeddings inside the text model: the wrapper installed
    on the Qwen3 text model hands each rank its share of the DeepStack features, in sequence order. Breaks when
    the thinker stops passing these keywords or verl's wrapper stops reading them."""
    from verl.models.transformers import monkey_patch
    from verl.utils import ulysses

    params = inspect.signature(tiny.model.model.__class__.forward).parameters
    assert {"inputs_embeds", "position_ids", "visual_pos_masks", "deepstack_visual_embeds"} <= set(params)
    wrapper_source = inspect.getsource(monkey_patch.patch_vlm_for_ulysses_input_slicing)
    assert 'kwargs.get("deepstack_visual_embeds")' in wrapper_source
    text_model, seen = _spy_text_model(monkeypatch)
    for pad in ("", ".", "..", " 1", " 12", " 123"):  # two ranks: an even length, as verl pads it
        messages = clip_message()
        messages[0]["content"][0]["text"] += pad
        batch, _ = build_model_inputs(messages, tiny.processor, video_kwargs={"position_id_per_seconds": 13})
        if batch["input_ids"].shape[1] % 2 == 0:
            break
    assert batch["input_ids"].shape[1] % 2 == 0
    with torch.no_grad():
        tiny.model(**batch)
    whole = seen.pop()
    mask, embeds = whole["visual_pos_masks"], whole["deepstack_visual_embeds"]
    assert len(embeds) == len(tiny.model.config.vision_config.deepstack_visual_indexes)
    assert embeds[0].shape[0] == int(mask.sum()) > 0

    calls = []

    def call_with(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return None

    assert verl_omni.omni_apply_monkey_patch.__name__ == "omni_apply_monkey_patch"
    monkeypatch.setattr(verl_omni, "_original_monkey_patch", call_with)
    verl_omni.omni_apply_monkey_patch(tiny.model, ulysses_sp_size=1, use_remove_padding=True)
    assert calls == [1] and not text_model.__dict__.get("_omni_ulysses_sliced")  # sp=1: verl's patch only
    verl_omni.omni_apply_monkey_patch(tiny.model, ulysses_sp_size=2, use_remove_padding=True)
    assert calls == [1, 1] and text_model._omni_ulysses_sliced
    assert verl_omni.install_ulysses_slicing(tiny.model) is text_model  # idempotent: wrapped once

    def on_rank(rank: int) -> dict[str, Any]:
        half = lambda x, dim, padding=True: x.narrow(dim, rank * (x.size(dim) // 2), x.size(dim) // 2)  # noqa: E731
        monkeypatch.setattr(monkey_patch, "get_ulysses_sequence_parallel_world_size", lambda: 2)
        monkeypatch.setattr(monkey_patch, "slice_input_tensor", half)
        monkeypatch.setattr(ulysses, "get_ulysses_sequence_parallel_rank", lambda: rank)
        with torch.no_grad():
            tiny.model(**batch)
        return seen.pop()

    ranks = [on_rank(0), on_rank(1)]
    for got in ranks:
        assert got["inputs_embeds"].shape[1] == batch["input_ids"].shape[1] // 2
        assert [e.shape[0] for e in got["deepstack_visual_embeds"]] == [int(got["visual_pos_masks"].sum())]
    joined = torch.cat([r["deepstack_visual_embeds"][0] for r in ranks])
    torch.testing.assert_close(joined, embeds[0])
    assert torch.equal(torch.cat([r["visual_pos_masks"] for r in ranks], dim=1), mask)


# ------------------------------------------------------------------ the agent loop, a thinking model

FRAMES = {"type": "get_frames", "start": 0.0, "end": 20.0, "num": 2}
CLIP = {"type": "get_clip", "start": 2.0, "end": 4.0}
ANSWER = {"type": "answer", "content": "B"}
SCRIPT = [FRAMES, CLIP, ANSWER]


def thinking_turn(action: dict[str, Any]) -> str:
    body = json.dumps({"observation": "I looked.", "thought": "Next step.", "action": action})
    return FAMILY.thinking.join(f"I should call {action['type']} now.", body)


class ScriptedServer:
    """``LLMServerClient.generate``'s signature: each call answers the next scripted turn, reasoning first."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer, self.calls = tokenizer, []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kwargs: Any):
        self.calls.append(kwargs)
        ids = self.tokenizer.encode(thinking_turn(SCRIPT[len(self.calls) - 1]), add_special_tokens=False)
        ids = [*ids, self.tokenizer.convert_tokens_to_ids("<|im_end|>")]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), extra_fields={"global_steps": 1})


@pytest.fixture(scope="module")
def episode(tiny, video_path):
    from hydra import compose, initialize_config_dir

    from rl.train_taura import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = compose(config_name="taura", overrides=["+exp=tiny", "data.max_response_length=256"])
    task = Task(id="t", media=str(video_path), question="Which tone is higher?", task_type="mcq",
                choices=["first", "second"], answer="B", duration=20.0)  # fmt: skip
    worker = object.__new__(agent_loop_tq.AgentLoopWorkerTQ.__ray_actor_class__)  # no Ray, no TQ init
    worker.config, worker.tokenizer, worker.processor = cfg, tiny.tokenizer, tiny.processor
    worker.hf_model_type, worker.dataset_cls, worker.tools = FAMILY.thinker_model_type, RLHFDataset, []
    worker.reward_loop_worker_handles, worker.distillation_enabled, worker.mm_processor_kwargs = (
        None,
        False,
        {},
    )
    worker.llm_client = server = ScriptedServer(tiny.tokenizer)
    outputs, puts = [], []
    postprocess = worker._agent_loop_postprocess

    async def spy(output: Any, validate: bool, **kwargs: Any) -> Any:
        outputs.extend(output)
        return await postprocess(output, validate, **kwargs)

    async def kv_batch_put(keys, fields, tags, partition_id):
        puts.append(fields)

    worker._agent_loop_postprocess = spy
    row = rl_dataset.task_to_row(task, 0)
    row = {"raw_prompt": row["prompt"], "extra_info": row["extra_info"], "data_source": row["data_source"],
           "index": 0, "uid": "u", "session_id": 0, "global_steps": 1}  # fmt: skip
    sampling = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(agent_loop_tq, "tq", SimpleNamespace(async_kv_batch_put=kv_batch_put))
        trajectory = {"step": 1, "sample_index": 0, "rollout_n": 0, "validate": False}
        asyncio.run(worker._run_agent_loop(sampling, trajectory, agent_name="omniagent", trace=False, **row))
    return SimpleNamespace(outputs=outputs, rows=[r for put in puts for r in put], server=server)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_a_thinking_turn_is_parsed_without_its_reasoning_and_trained_with_it(episode, tiny) -> None:
    outputs = episode.outputs
    assert [o.extra_fields["action_type"] for o in outputs] == ["get_frames", "get_clip", "answer"]
    assert all(o.extra_fields["error"] is None for o in outputs)  # the environment never saw <think>
    assert outputs[-1].reward_score == 1.0
    for output, action in zip(outputs, SCRIPT, strict=True):
        text = tiny.tokenizer.decode(output.response_ids)
        assert text.startswith("<think>\nI should call") and output.response_mask == [1] * len(
            output.response_ids
        )
        assert output.extra_fields["thinking_chars"] == len(f"I should call {action['type']} now.")
    # the clip turn: vLLM orders the interleaved clip by second_per_grid_ts; the trainer's re-processing gets
    # the model config's positions per second, so both sides build the sequence the model's positions expect
    clip_call = episode.server.calls[2]
    assert clip_call["mm_processor_kwargs"]["second_per_grid_ts"] == [1.0]
    assert outputs[2].mm_processor_kwargs["videos_kwargs"]["position_id_per_seconds"] == 13


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_qwen3_rows_carry_the_thinkers_positions_and_forward_packed(episode, tiny) -> None:
    model, checked = tiny.model, 0
    for row in episode.rows:
        input_ids, mm, positions = (
            row["input_ids"][None],
            dict(row["multi_modal_inputs"]),
            row["position_ids"],
        )
        if "pixel_values" not in mm and "pixel_values_videos" not in mm:
            continue
        interleaved = verl_omni.audio_in_video_from_ids(input_ids, model.config)
        ones = torch.ones_like(input_ids)
        audio_len = mm["feature_attention_mask"].sum(-1) if "feature_attention_mask" in mm else None
        expected, _ = model.get_rope_index(
            input_ids, mm.get("image_grid_thw"), mm.get("video_grid_thw"), ones, interleaved, audio_len,
            mm.get("video_second_per_grid"),
        )  # fmt: skip
        assert torch.equal(positions[1:], expected[:, 0])
        with (
            torch.no_grad()
        ):  # as verl's actor feeds a row: no mask, 4-row positions (DeepStack computed inside)
            reference = model(input_ids=input_ids, attention_mask=ones, use_audio_in_video=interleaved, **mm)
            packed = model(input_ids=input_ids, attention_mask=None, position_ids=positions[:, None], **mm)
        torch.testing.assert_close(packed.logits, reference.logits)
        checked += 1
    assert checked == 2  # the frames turn's answer (turn 2) and the clip turn's (turn 3)
