"""The ``omniagent`` verl agent loop (rl/verl_ext/agent_loop.py) on CPU (verl's Omni support itself: test_verl_omni.py;
its settings and rewards without a worker: test_agent_loop_settings.py).

Everything real except the rollout server: the tiny random Qwen2.5-Omni thinker and its processor, the
environment on generated media, verl 0.9.1's own agent-loop worker (``AgentLoopWorkerTQ._run_agent_loop``:
registry lookup, hydra instantiation, ``run``, then its TransferQueue ``_agent_loop_postprocess`` with only the
final ``kv_batch_put`` captured), and our TAURA advantage step on the rows it writes. The fake server answers
either with scripted JSON turns tokenised by the tiny tokenizer or with a real greedy generate of the tiny model
on the request it received (re-processed the way vLLM would: unexpanded ids + raw media).
"""

from __future__ import annotations

import asyncio
import json
import math
from types import SimpleNamespace

import pytest
import torch
from testkit import verl_tiny_thinker

pytest.importorskip("verl", reason="verl is not installed (pip install 'verl[verl-core]==0.9.1')")

from verl.trainer.ppo.v1 import agent_loop_tq  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402
from verl.utils.model import extract_multi_modal_inputs  # noqa: E402
from verl.utils.tensordict_utils import list_of_dict_to_tensordict  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from envs.tasks import Task  # noqa: E402
from omniagent.tiny_model import MAX_PIXELS, MIN_PIXELS  # noqa: E402
from rl.verl_ext import agent_loop as al  # noqa: E402
from rl.verl_ext import (  # noqa: E402
    media_tokens,
    rl_dataset,
)
from rl.verl_ext import omni_patches as verl_omni  # noqa: E402  (patches verl as external_lib would)
from rl.verl_ext import trainer as verl_trainer  # noqa: E402

UID = "prompt-7"
SIZE = {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS}
SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}
MAX_NEW_TOKENS = 12

FRAMES = {"type": "get_frames", "start": 0.0, "end": 20.0, "num": 4}
AUDIO = {"type": "get_audio", "start": 2.0, "end": 14.0}
CLIP = {"type": "get_clip", "start": 2.0, "end": 5.0}
GENERATE = "generate"  # the fake server runs the tiny model on the request
# session -> its turns; the 20 s test video gives the budget min(5 + 20 // 60, 10) = 5
SCRIPTS = {
    0: [GENERATE, FRAMES, AUDIO, CLIP, {"type": "answer", "content": "B"}],  # correct: reward 1
    1: [FRAMES, GENERATE, {"type": "answer", "content": "A"}],  # wrong: reward 0
}
INVALID = al.INVALID_ACTION  # the random model's real generations never parse
ACTIONS = {
    0: [INVALID, "get_frames", "get_audio", "get_clip", "answer"],
    1: ["get_frames", INVALID, "answer"],
}


def turn_text(action: dict) -> str:
    return json.dumps({"observation": "I looked.", "thought": "Next step.", "action": action})


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return verl_tiny_thinker(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def task(video_path):
    return Task(
        id="synth-1",
        media=str(video_path),
        question="Which tone is higher, the first or the second?",
        task_type="mcq",
        choices=["the first", "the second"],
        answer="B",
        duration=20.0,
    )


class FakeServerManager:
    """``LLMServerClient.generate``'s signature; scripted JSON turns or a real tiny-model generate."""

    def __init__(self, tiny, script):
        self.tiny, self.script, self.calls = tiny, list(script), []

    async def generate(
        self,
        request_id,
        *,
        prompt_ids,
        sampling_params,
        image_data=None,
        video_data=None,
        audio_data=None,
        mm_processor_kwargs=None,
        **kwargs,
    ):
        step = self.script[len(self.calls)]
        call = {
            "request_id": request_id,
            "prompt_ids": list(prompt_ids),
            "image_data": image_data,
            "video_data": video_data,
            "audio_data": audio_data,
            "mm_processor_kwargs": mm_processor_kwargs,
            "sampling_params": sampling_params,
        }
        self.calls.append(call)
        if step == GENERATE:
            ids, logprobs = self._generate(call)
        else:
            ids = self.tiny.tokenizer.encode(turn_text(step), add_special_tokens=False)
            ids, logprobs = ids + [self.tiny.tokenizer.eos_token_id], [-0.5] * (len(ids) + 1)
        return TokenOutput(token_ids=ids, log_probs=logprobs, extra_fields={"global_steps": 1})

    def _generate(self, call):
        """What a vLLM server does with the request: expand the unexpanded ids with the raw media, generate."""
        tok, processor = self.tiny.tokenizer, self.tiny.processor
        kwargs = {"text": [tok.decode(call["prompt_ids"])], "return_tensors": "pt"}
        if call["image_data"]:
            kwargs.update(images=call["image_data"], images_kwargs={"size": SIZE})
        if call["video_data"]:
            mm = call["mm_processor_kwargs"] or {}
            kwargs.update(
                videos=call["video_data"],
                videos_kwargs={
                    "size": SIZE,
                    "fps": mm["fps"],
                    "use_audio_in_video": mm.get("use_audio_in_video", False),
                },
            )
        if call["audio_data"]:
            kwargs["audio"] = [samples for samples, _ in call["audio_data"]]
        batch = processor(**kwargs)
        call["expanded_ids"] = batch["input_ids"][0].tolist()
        with torch.no_grad():
            out = self.tiny.model.generate(
                **batch,
                max_new_tokens=MAX_NEW_TOKENS,
                do_sample=False,
                output_logits=True,
                return_dict_in_generate=True,
                suppress_tokens=verl_omni.omni_banned_token_ids(processor),  # as verl's vLLM server does
            )
        new = out.sequences[0, batch["input_ids"].shape[1] :]
        logits = torch.stack(out.logits)[:, 0].float()
        logprobs = torch.log_softmax(logits, -1).gather(-1, new[:, None]).squeeze(-1)
        return new.tolist(), logprobs.tolist()


def _row(task: Task, session: int) -> dict:
    row = rl_dataset.task_to_row(task, 0)
    return {
        "raw_prompt": row["prompt"],
        "extra_info": row["extra_info"],
        "data_source": row["data_source"],
        "index": 0,
        "uid": UID,
        "session_id": session,
        "global_steps": 1,
    }


@pytest.fixture(scope="module")
def rollout(tiny, taura_cfg, task):
    """Both sessions through verl's own worker code; returns the outputs, the TQ puts and the fake servers."""
    worker = object.__new__(agent_loop_tq.AgentLoopWorkerTQ.__ray_actor_class__)  # no Ray, no TQ init
    worker.config = taura_cfg
    worker.tokenizer, worker.processor = tiny.tokenizer, tiny.processor
    worker.hf_model_type, worker.dataset_cls, worker.tools = "qwen2_5_omni_thinker", RLHFDataset, []
    worker.reward_loop_worker_handles = None  # the agent loop sets the reward itself
    worker.distillation_enabled, worker.mm_processor_kwargs = False, {}

    outputs, puts, servers = {}, [], {}
    postprocess = worker._agent_loop_postprocess

    async def spy(output, validate, **kwargs):
        outputs[kwargs["session_id"]] = output
        return await postprocess(output, validate, **kwargs)

    async def kv_batch_put(keys, fields, tags, partition_id):
        puts.append(SimpleNamespace(keys=keys, fields=fields, tags=tags, partition_id=partition_id))

    worker._agent_loop_postprocess = spy
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(agent_loop_tq, "tq", SimpleNamespace(async_kv_batch_put=kv_batch_put))
        for session, script in SCRIPTS.items():
            worker.llm_client = servers[session] = FakeServerManager(tiny, script)
            trajectory = {"step": 1, "sample_index": 0, "rollout_n": session, "validate": False}
            asyncio.run(
                worker._run_agent_loop(
                    dict(SAMPLING), trajectory, agent_name="omniagent", trace=False, **_row(task, session)
                )
            )
    # the rows as TransferQueue holds them: one put per session, in key order
    keys = [k for put in puts for k in put.keys]
    rows = [put.fields[i] for put in puts for i in range(len(put.keys))]
    return SimpleNamespace(outputs=outputs, puts=puts, servers=servers, keys=keys, rows=rows)


def _media_blocks(ids: list[int], tiny) -> dict[str, int]:
    """Media items in a token sequence: images, videos (with interleaved audio counted once), audios."""
    tok = tiny.tokenizer
    conv = tok.convert_tokens_to_ids
    vbos, abos, image, video = (
        conv("<|vision_bos|>"),
        conv("<|audio_bos|>"),
        conv("<|IMAGE|>"),
        conv("<|VIDEO|>"),
    )
    counts = {"images": 0, "videos": 0, "audios": 0}
    for i, t in enumerate(ids):
        nxt = ids[i + 1] if i + 1 < len(ids) else None
        prev = ids[i - 1] if i > 0 else None
        if t == vbos and nxt == image:
            counts["images"] += 1
        elif t == vbos and nxt in (video, abos):
            counts["videos"] += 1
        elif t == abos and prev != vbos:
            counts["audios"] += 1
    return counts


# ------------------------------------------------------------------ responses


def test_responses_are_cut_before_media_tokens(tiny):
    conv = tiny.tokenizer.convert_tokens_to_ids
    fake_self = SimpleNamespace(
        media_token_ids=frozenset(media_tokens.omni_media_token_ids(tiny.processor)), response_length=6
    )
    clean = al.OmniAgentLoop._clean_response
    out = TokenOutput(token_ids=[11, 12, conv("<|AUDIO|>"), 13], log_probs=[-1.0, -2.0, -3.0, -4.0])
    assert clean(fake_self, out) == ([11, 12], [-1.0, -2.0], True)
    out = TokenOutput(token_ids=list(range(20, 30)), log_probs=None)
    assert clean(fake_self, out) == (list(range(20, 26)), None, False)  # capped at response_length


# ------------------------------------------------------------------ the agent loop under verl's worker


@pytest.mark.slow
def test_one_output_per_turn_with_at_most_one_percept(rollout, tiny):
    for session, script in SCRIPTS.items():
        outputs = rollout.outputs[session]
        assert isinstance(outputs, list) and len(outputs) == len(script)
        assert [o.extra_fields["action_type"] for o in outputs] == ACTIONS[session]
        previous = [None, *script[:-1]]  # the percept in turn k's prompt comes from turn k-1's action
        for output, before in zip(outputs, previous, strict=True):
            blocks = _media_blocks(output.prompt_ids, tiny)
            data = output.multi_modal_data or {}
            if before == FRAMES:
                assert blocks == {"images": FRAMES["num"], "videos": 0, "audios": 0}
                assert len(data["images"]) == FRAMES["num"] and set(data) == {"images"}
            elif before == AUDIO:
                assert blocks == {"images": 0, "videos": 0, "audios": 1} and set(data) == {"audios"}
            elif before == CLIP:
                assert blocks == {"images": 0, "videos": 1, "audios": 0}  # audio interleaved in the clip
                assert set(data) == {"videos", "audios"}
                assert output.mm_processor_kwargs["videos_kwargs"]["use_audio_in_video"] is True
            else:  # first turn, or after a turn that brought no percept
                assert blocks == {"images": 0, "videos": 0, "audios": 0} and not data
        # earlier percepts survive only as text stubs
        last = tiny.tokenizer.decode(outputs[-1].prompt_ids)
        if session == 0:
            assert last.count("[MEDIA REMOVED") == 2 and "Clip 2.00s-5.00s" in last


@pytest.mark.slow
def test_requests_to_the_server_reproduce_the_training_prompts(rollout, tiny):
    for session, server in rollout.servers.items():
        outputs = rollout.outputs[session]
        assert len({c["request_id"] for c in server.calls}) == 1  # one sticky session per trajectory
        for call, output in zip(server.calls, outputs, strict=True):
            blocks = _media_blocks(call["prompt_ids"], tiny)
            assert blocks["images"] == len(call["image_data"] or [])
            assert blocks["videos"] == len(call["video_data"] or [])
            if "expanded_ids" in call:  # the real generations: vLLM-style expansion == the training prompt
                assert call["expanded_ids"] == output.prompt_ids
    frames_turn = rollout.servers[1].calls[1]  # session 1 generated for real right after its frames
    assert len(frames_turn["image_data"]) == FRAMES["num"] and "expanded_ids" in frames_turn
    clip_turn = rollout.servers[0].calls[4]
    # second_per_grid_ts: vLLM orders the clip's frames and audio by it (omniagent.backends.vllm_backend)
    assert clip_turn["mm_processor_kwargs"] == {
        "fps": 2.0,
        "use_audio_in_video": True,
        "second_per_grid_ts": [1.0],
    }
    assert [sr for _, sr in clip_turn["audio_data"]] == [16000]


@pytest.mark.slow
def test_masks_rewards_and_extra_fields(rollout):
    expected_reward = {0: 1.0, 1: 0.0}
    for session, outputs in rollout.outputs.items():
        for turn, output in enumerate(outputs):
            n = len(output.response_ids)
            assert n >= 1 and len(output.response_logprobs) == n
            assert output.response_mask == [1] * n or (output.response_mask == [0] and n == 1)
            assert output.reward_score == expected_reward[session]
            extra = output.extra_fields
            assert extra["turn_index"] == turn and extra["session_id"] == session
            assert extra["turn_budget"] == 5 and extra["task_id"] == "synth-1"
            assert extra["action_type"] == ACTIONS[session][turn]
            assert extra["reward_extra_info"]["acc"] == expected_reward[session]
            assert extra["reward_extra_info"]["evidence_seen"] is True  # the task has no evidence to gate on
            assert extra["stop_reason"] == "answered"
            assert (extra["min_global_steps"], extra["max_global_steps"]) == (1, 1)
        frames = [o.extra_fields["frames_used"] for o in outputs]
        assert frames == sorted(frames) and frames[-1] >= FRAMES["num"]
    generated = rollout.outputs[0][0].extra_fields
    assert generated["action_type"] == al.INVALID_ACTION and generated["error"] is not None
    assert rollout.outputs[0][1].extra_fields["error"] is None


@pytest.mark.slow
def test_verl_postprocess_rows_positions_and_forward(rollout, tiny):
    assert rollout.keys == [f"{UID}_{s}_{i}" for s, script in SCRIPTS.items() for i in range(len(script))]
    assert {put.partition_id for put in rollout.puts} == {"train"}
    model = tiny.model
    checked = 0
    for key, row, tag in zip(
        rollout.keys, rollout.rows, [t for p in rollout.puts for t in p.tags], strict=True
    ):
        session = int(key.rsplit("_", 2)[1])
        assert row["rm_scores"][-1] == {0: 1.0, 1: 0.0}[session] and row["rm_scores"][:-1].abs().sum() == 0
        assert tag["status"] == "success" and row["extra_fields"]["action_type"]
        input_ids = row["input_ids"][None]
        mm = dict(row["multi_modal_inputs"])
        positions = row["position_ids"]
        assert positions.shape == (4, input_ids.shape[1])
        if "image_grid_thw" not in mm and "video_grid_thw" not in mm and "input_features" not in mm:
            continue
        interleaved = verl_omni.audio_in_video_from_ids(input_ids, model.config)
        ones = torch.ones_like(input_ids)
        audio_len = mm["feature_attention_mask"].sum(-1) if "feature_attention_mask" in mm else None
        expected, _ = model.get_rope_index(
            input_ids,
            mm.get("image_grid_thw"),
            mm.get("video_grid_thw"),
            ones,
            interleaved,
            audio_len,
            mm.get("video_second_per_grid"),
        )
        assert torch.equal(positions[1:], expected[:, 0])
        assert torch.equal(positions[0], torch.arange(input_ids.shape[1]))
        # the row is consumable as verl's actor feeds it (packed: no mask, 4-row positions, its mm inputs)
        with torch.no_grad():
            reference = model(
                input_ids=input_ids, attention_mask=ones, use_audio_in_video=interleaved, **mm
            ).logits
            packed = model(
                input_ids=input_ids, attention_mask=None, position_ids=positions[:, None], **mm
            ).logits
        torch.testing.assert_close(packed, reference)
        checked += 1
    assert checked == 4  # frames, audio, clip (session 0) and frames (session 1)


@pytest.mark.slow
def test_audio_features_survive_collation(rollout):
    stored = list_of_dict_to_tensordict(rollout.rows)  # as TransferQueue stores and returns them
    per_row = [dict(r["multi_modal_inputs"]) for r in rollout.rows]
    audio_rows = [m for m in per_row if "input_features" in m]
    assert len(audio_rows) == 2  # the audio turn and the clip turn of session 0
    collated = extract_multi_modal_inputs(stored["multi_modal_inputs"])
    features, mask = collated["input_features"], collated["feature_attention_mask"]
    assert features.shape[0] == mask.shape[0] == 2 and features.shape[1] == 128
    torch.testing.assert_close(
        features[1, :, : audio_rows[1]["input_features"].shape[-1]], audio_rows[1]["input_features"][0]
    )
    assert mask.sum(-1).tolist() == [int(m["feature_attention_mask"].sum()) for m in audio_rows]
    assert collated["pixel_values"].shape[0] == sum(
        int(m["image_grid_thw"].prod(-1).sum()) for m in per_row if "image_grid_thw" in m
    )
    assert collated["video_second_per_grid"].tolist() == [1.0]


@pytest.mark.slow
def test_taura_advantages_on_agent_loop_rows(rollout, taura_cfg):
    fields, entropies = [], []
    for i, row in enumerate(rollout.rows):
        n = row["responses"].shape[0]
        h = 0.5 + 0.25 * i  # a distinct mean entropy per turn
        entropies.append(h)
        selected = {k: row[k] for k in verl_trainer.ADVANTAGE_FIELDS if k in row}
        selected.update(entropy=torch.full((n,), h), old_log_probs=torch.full((n,), -1.0))
        fields.append(selected)
    output, metrics = verl_trainer.compute_taura_advantage(
        list_of_dict_to_tensordict(fields), rollout.keys, taura_cfg
    )

    valid = [bool(r["response_mask"].sum() > 0) for r in rollout.rows]
    mean_h = sum(h for h, v in zip(entropies, valid, strict=True) if v) / sum(valid)
    outcome = 0.5 / (math.sqrt(0.5) + 1e-6)  # two trajectories, rewards 1 and 0: unbiased std sqrt(0.5)
    for i, (key, row) in enumerate(zip(rollout.keys, rollout.rows, strict=True)):
        sign = 1.0 if key.split("_")[-2] == "0" else -1.0
        weight = entropies[i] / mean_h if valid[i] else 1.0
        expected = sign * outcome * weight * row["response_mask"].float()
        torch.testing.assert_close(output["advantages"][i], expected)
    assert metrics["taura/weight/mean"] == pytest.approx(1.0)
    assert metrics["taura/action/get_frames/turns"] == 2
    assert metrics["taura/turns_per_traj/mean"] == pytest.approx(sum(valid) / 2)


# ------------------------------------------------------------------ dataset rows, smoke script


def test_rl_rows_load_in_verls_dataset(tiny, taura_cfg, task, tmp_path):
    path = rl_dataset.write_rl_parquet(
        [task, task.model_copy(update={"id": "synth-2", "answer": "A"})], tmp_path / "t.parquet"
    )
    dataset = RLHFDataset([str(path)], tiny.tokenizer, taura_cfg.data, tiny.processor)
    item = dataset[1]
    assert item["agent_name"] == "omniagent" and item["index"] == 1
    assert item["raw_prompt"][0]["content"].startswith(task.question)
    restored = rl_dataset.task_from_extra_info(item["extra_info"])
    assert restored == task.model_copy(update={"id": "synth-2", "answer": "A"})
    assert restored.env_options(7) == {**task.env_options(7), "answer": "A"}
    with pytest.raises(ValueError):
        rl_dataset.task_from_extra_info({"index": 0})
    fields = {"index": 3, "media": task.media, "question": "Q?", "task_type": "num", "answer": 2.0}
    assert rl_dataset.task_from_extra_info(fields).id == "row-3"
