"""The testbed's compact caption batches (recipes/testbed/captions.py) on SFT rows of the search level: the chats
keep the rows' media packed, and every item (single frames, whole looks, audio) encodes exactly as the decoded rows
would, so the batches do not depend on when the media is decoded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from encoded_items import same

from envs.env import OmniVideoEnv
from envs.limits import EnvLimits
from envs.synth import generate_benchmark
from omniagent.episode import run_episode
from omniagent.policy import make_policy
from recipes.testbed.captions import CompactCaptions, audio_chats, frame_chats
from recipes.tiny_agent.frame_captions import ROW_KEY, percept_chats
from rl.sft import export as sft_export


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """SFT rows of compact teacher episodes on one search-level video: one question of each template."""
    from transformers import AutoTokenizer

    from omniagent.tiny_model import build_tiny_thinker
    from omniagent.trajectory import save_trajectories
    from rl.sft.dataset import OmniTurnSFTDataset

    out = tmp_path_factory.mktemp("testbed_captions")
    tasks = generate_benchmark(
        out, seed=21, n_videos=1, durations=[60.0], config={"level": "search"}, split="train"
    )
    picked = {t.extra["template"]: t for t in tasks}
    limits = EnvLimits(max_turns=5)
    trajs = []
    for seed, task in enumerate(picked.values()):
        env = OmniVideoEnv(limits=limits)
        try:
            teacher = make_policy("synth_teacher", seed=seed, limits=limits, compact=True)
            traj = run_episode(env, teacher, task.env_options(5))
        finally:
            env.close()
        traj.meta.update(env_limits=env.limits.model_dump(), task_id=traj.id)
        trajs.append(traj)
    save_trajectories(trajs, out / "trajectories.jsonl")
    parquet = out / "train.parquet"
    assert sft_export.main(["--kept", str(out / "trajectories.jsonl"), "--out", str(parquet)]) == 0
    build_tiny_thinker(seed=0, out_dir=out / "thinker")
    tok = AutoTokenizer.from_pretrained(out / "thinker")
    return OmniTurnSFTDataset(
        str(parquet), tok, {"max_length": 8192, "pad_mode": "no_padding"}, processor=None
    )


def test_compact_caption_items_encode_as_the_decoded_rows(dataset: Any, tmp_path: Path) -> None:
    eager = [(str(dataset.row(i).get("media_path") or ""), dataset.messages(i)) for i in range(len(dataset))]
    captions = CompactCaptions(
        dataset, {"batch_size": 4, "event_share": 0.5, "percepts": 2, "audio": 1}, seed=3
    )
    kinds = {
        "frame": (frame_chats(eager), captions.chats),
        "percept": (percept_chats(eager), captions.whole),
        "audio": (audio_chats(eager), captions.sounds),
    }
    for kind, (chats, held) in kinds.items():
        assert chats and len(chats) == len(held), kind  # the episodes look at frames and listen
        for i, chat in enumerate(chats):
            stubs = [p for p in held[i][0]["content"] if p["type"] != "text"]
            assert stubs and all(
                ROW_KEY in p and "image" not in p and "audio" not in p for p in stubs
            )  # none decoded
            assert same(captions._item(kind, i), dataset.encode(chat)), (kind, i)
    a, b = captions.batch(2), captions.batch(2)
    assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["pixel_values"], b["pixel_values"])
    assert "input_features" in a  # the audio caption is in the batch
