"""Whole-look caption training (recipes/testbed/time_copy.py): the looks it draws are served by the environment and
captioned with the truth, the run trains the text model only, records its learning curve, and resumes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from envs.jsonl import read_jsonl
from omniagent.backends.synth_compact import describe_compact, parse_compact
from omniagent.backends.synth_world import Percept, SynthWorld
from recipes.testbed import time_copy
from recipes.testbed.digit_looks import cue_digit_items, forced_look


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from envs.synth import generate_benchmark

    root = tmp_path_factory.mktemp("time_copy")
    for name, seed in (("pool", 21), ("probe", 22)):
        generate_benchmark(root / name, seed=seed, n_videos=1, durations=[60.0], config={"level": "search"})
    rows = []
    for index, item in enumerate(cue_digit_items(root / "probe" / "tasks.jsonl")):
        world = SynthWorld.for_media(item["task"].media)
        for n in time_copy.EVAL_SIZES:
            look = forced_look(world, item["field"], n, np.random.default_rng([0, index, n]))
            if look is not None:
                rows.append({"id": item["task"].id, "media": Path(item["task"].media).name, "condition": "caption",
                             "n": n, "look": look})  # fmt: skip
    (root / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"root": root, "pool": root / "pool", "probe": root / "probe", "rows": root / "rows.jsonl"}


def test_pool_looks_are_served_frames_captioned_with_the_truth(sets: dict[str, Path]) -> None:
    from envs.env import OmniVideoEnv
    from envs.limits import EnvLimits

    env = OmniVideoEnv(limits=EnvLimits(max_frames=8, max_turns=5))
    pool = time_copy.PoolLooks(sets["pool"], env)
    kinds = set()
    for step in range(12):
        prompt, target = pool.chat(np.random.default_rng([0, step]))
        parts = prompt["content"]
        at = [k for k, p in enumerate(parts) if p["type"] == "image"]
        images = [parts[k] for k in at]
        assert 2 <= len(images) <= 8 and parts[0]["text"].startswith("Frames ")
        for k in at:  # each frame is labelled with its time just before it
            assert parts[k - 1]["text"] == f"\nFrame at {float(parts[k]['timestamp']):.2f}s:"
        world = SynthWorld.for_media(pool.items[0]["task"].media)
        text = target["content"][0]["text"]
        assert text == describe_compact(
            world, Percept("frames", times=[float(i["timestamp"]) for i in images])
        )
        kinds |= {i.kind for c in parse_compact(text) for i in c.items}
    env.close()
    assert "digit" in kinds  # the forced half holds digits


def test_a_short_run_trains_the_text_model_records_its_curve_and_resumes(
    sets: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch

    from omniagent.tiny_model import build_tiny_thinker
    from rl.sft.local import load_model

    monkeypatch.setattr(time_copy, "STEPS", 4)
    monkeypatch.setattr(time_copy, "EVAL_AT", (2, 4))
    monkeypatch.setattr(time_copy, "SAVE_EVERY", 2)
    build_tiny_thinker(seed=0, out_dir=tmp_path / "agent")
    pq.write_table(pa.table({"messages": pa.array([], pa.string())}), tmp_path / "empty.parquet")
    argv = ["--model", str(tmp_path / "agent"), "--sft-data", str(tmp_path / "empty.parquet"), "--pool",
            str(sets["pool"]), "--probe-set", str(sets["probe"]), "--probe-rows", str(sets["rows"]),
            "--out", str(tmp_path / "out")]  # fmt: skip
    assert time_copy.main(argv) == 0
    looks = len(list(read_jsonl(sets["rows"])))
    curve = list(read_jsonl(tmp_path / "out" / "curve.jsonl"))
    assert sorted({r["step"] for r in curve}) == [2, 4] and len(curve) == 2 * looks
    assert all(r["at_frame"] in (0, 1) and isinstance(r["text"], str) for r in curve)
    before, after = load_model(str(tmp_path / "agent")), load_model(str(tmp_path / "out" / "final"))
    changed = {n for n, p in after.named_parameters() if not torch.equal(p, before.get_parameter(n))}
    assert changed and not any(n.startswith("visual") for n in changed)  # the vision encoder stays frozen
    # a run stopped after step 2 resumes there: the same final weights, no curve row twice
    import shutil

    first = load_model(str(tmp_path / "out" / "final"))
    for name in ("step4", "final"):
        shutil.rmtree(tmp_path / "out" / name)
    kept = [r for r in curve if r["step"] == 2]
    (tmp_path / "out" / "curve.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    assert time_copy.main(argv) == 0
    again = load_model(str(tmp_path / "out" / "final"))
    assert all(torch.allclose(p, again.get_parameter(n)) for n, p in first.named_parameters())
    assert len(list(read_jsonl(tmp_path / "out" / "curve.jsonl"))) == 2 * looks


def test_the_curve_pairs_each_step_with_the_starting_agent_by_field() -> None:
    look = {"type": "get_frames", "start": 10, "end": 24, "num": 8}
    before = [{"id": f"q{i}", "media": f"v{i % 3}", "condition": "caption", "n": 8, "look": look, "text": "10 red",
               "at_frame": int(i == 0), "read": 1} for i in range(6)]  # fmt: skip
    after = [
        {**r, "step": 100, "at_frame": int(i < 3), "text": "10 red, 12 red 9"} for i, r in enumerate(before)
    ]
    res = time_copy.curve(after, before + [{"id": "x", "left_out": "first look hit the digit"}])
    assert res["step 0 n=8"]["at_frame"]["mean"] == round(1 / 6, 3)
    step = res["step 100 n=8"]
    assert step["at_frame"]["mean"] == 0.5 and step["copied"] == 1.0
    assert (
        step["at_frame_minus_before"]["mean"] == round(2 / 6, 3) and step["at_frame_minus_before"]["n"] == 6
    )
