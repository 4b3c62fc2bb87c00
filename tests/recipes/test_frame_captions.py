"""Single-frame captions interleaved with SFT (recipes/tiny_agent/frame_captions.py): the samples are the teacher's
sentence for each distinct served frame, batches are a function of the seed and step, captions make
the model's loss depend on the image, and media without a synthetic sidecar fail clearly. Also the
check of an agent's own Observations against the world (recipes/tiny_agent/probes/observations.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from encoded_items import same

from envs.env import OmniVideoEnv
from envs.synth import generate_benchmark
from omniagent.backends.synth_world import Percept, SynthWorld, describe, frame_sentences
from omniagent.episode import run_episode
from omniagent.policy import make_policy
from recipes.tiny_agent.frame_captions import CaptionBatches, caption_chats, percept_chats, pool_chats
from rl.sft import export as sft_export
from rl.sft.step import collate, sft_loss

RECIPE_SFT = Path(__file__).resolve().parents[2] / "recipes" / "tiny_agent" / "conf" / "sft"


@pytest.fixture(scope="module")
def teacher_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder with two teacher episodes on one synthetic video (trajectories.jsonl)."""
    from omniagent.trajectory import save_trajectories

    out = tmp_path_factory.mktemp("captions")
    tasks = generate_benchmark(out, seed=3, n_videos=1, durations=[40], config={"max_tasks_per_template": 1})
    visual = [t for t in tasks if t.extra.get("template") in ("shape_tr", "flash_tr", "digit_mcq")] or tasks
    trajs = []
    for seed, task in enumerate(visual[:2]):
        env = OmniVideoEnv()
        try:
            traj = run_episode(env, make_policy("synth_teacher", seed=seed), task.env_options(8))
        finally:
            env.close()
        traj.meta.update(env_limits=env.limits.model_dump(), task_id=traj.id)
        trajs.append(traj)
    save_trajectories(trajs, out / "trajectories.jsonl")
    return out


@pytest.fixture(scope="module")
def synth_parquet(teacher_run: Path) -> Path:
    """Per-turn SFT rows of the teacher episodes."""
    kept = teacher_run / "trajectories.jsonl"
    assert sft_export.main(["--kept", str(kept), "--out", str(teacher_run / "train.parquet")]) == 0
    return teacher_run / "train.parquet"


@pytest.fixture(scope="module")
def dataset(synth_parquet: Path) -> Any:
    from transformers import AutoTokenizer

    from omniagent.tiny_model import build_tiny_thinker
    from rl.sft.dataset import OmniTurnSFTDataset

    path = synth_parquet.parent / "thinker"
    build_tiny_thinker(seed=0, out_dir=path)
    tok = AutoTokenizer.from_pretrained(path)
    ds = OmniTurnSFTDataset(
        str(synth_parquet), tok, {"max_length": 8192, "pad_mode": "no_padding"}, processor=None
    )
    ds.model_dir = path
    return ds


def test_captions_are_the_teachers_sentence_for_each_distinct_frame(dataset: Any) -> None:
    rows = [(str(dataset.row(i)["media_path"]), dataset.messages(i)) for i in range(len(dataset))]
    chats = caption_chats(rows + rows)  # every frame twice: captions are distinct
    assert len(chats) >= 4
    served = set()
    for media, messages in rows:
        content = messages[-2]["content"]
        parts = content if isinstance(content, list) else []
        served |= {(media, float(p["timestamp"])) for p in parts if p.get("type") == "image"}
    assert len(chats) == len(served)
    world = SynthWorld.for_media(rows[0][0])
    for chat in chats:
        label, image = chat[0]["content"]
        t = float(image["timestamp"])
        assert image["type"] == "image" and label["text"] == f"Frame at {t:.2f}s:"
        assert chat[1]["content"][0]["text"] == frame_sentences(world, [t])[0]
        assert chat[1]["content"][0]["text"].startswith(f"Frame {t:.2f}s: ")
    assert any("background" in c[1]["content"][0]["text"] for c in chats)


def test_batches_are_seeded_by_step_and_training_reads_the_image(dataset: Any) -> None:
    from transformers import Qwen2_5OmniThinkerForConditionalGeneration

    captions = CaptionBatches(dataset, batch_size=4, seed=1)
    a, b = captions.batch(5), captions.batch(5)
    assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["pixel_values"], b["pixel_values"])
    assert a["input_ids"].shape[0] == 4 and int(a["image_grid_thw"].shape[0]) == 4
    assert not torch.equal(captions.batch(6)["input_ids"], a["input_ids"]) or len(captions.chats) <= 4

    model = Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained(dataset.model_dir, dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    held = collate([captions._item("frame", i) for i in range(min(4, len(captions.chats)))], captions.pad_id)
    with torch.no_grad():
        before = float(sft_loss(model.eval(), held)[0])
    model.train()
    for step in range(40):
        opt.zero_grad()
        sft_loss(model, captions.batch(step))[0].backward()
        opt.step()
    with torch.no_grad():
        after = float(sft_loss(model.eval(), held)[0])
    assert after < before - 0.5
    rolled = dict(held)
    per = held["pixel_values"].shape[0] // held["image_grid_thw"].shape[0]
    rolled["pixel_values"] = torch.roll(held["pixel_values"], per, 0)  # each caption gets another frame
    with torch.no_grad():
        assert float(sft_loss(model, rolled)[0]) > after + 0.2  # measured: 1.75 vs 1.20


def test_captions_hold_no_media_and_encode_as_the_decoded_rows(dataset: Any) -> None:
    """The chats keep each SFT row's media packed (their memory does not grow with the data); an item decodes them
    on demand into exactly what the decoded rows give, so every batch is the one eager decoding would make."""
    from recipes.tiny_agent.frame_captions import ROW_KEY, decoded, stub_rows

    eager = [(str(dataset.row(i).get("media_path") or ""), dataset.messages(i)) for i in range(len(dataset))]
    media = [
        p
        for chat in stub_rows(dataset)
        for m in chat[1]
        if not isinstance(m["content"], str)
        for p in m["content"]
    ]
    media = [p for p in media if p["type"] != "text"]
    assert media and all(ROW_KEY in p and "image" not in p and "audio" not in p for p in media)

    captions = CaptionBatches(dataset, batch_size=4, seed=1, event_share=0.5, percepts=2)
    assert all(ROW_KEY in p for chat in captions.chats for p in chat[0]["content"] if p["type"] == "image")
    for kind, chats, held in (
        ("frame", caption_chats(eager), captions.chats),
        ("percept", percept_chats(eager), captions.whole),
    ):
        assert len(chats) == len(held)
        for i in range(len(chats)):
            assert same(captions._item(kind, i), dataset.encode(chats[i]))
            assert json.dumps(decoded(dataset, held[i]), default=repr) == json.dumps(chats[i], default=repr)


def test_event_share_oversamples_frames_that_show_an_event(dataset: Any) -> None:
    plain = CaptionBatches(dataset, batch_size=8, seed=2)
    assert plain.events and plain.plain  # the fixture's episodes zoom in on shapes, flashes, digits
    assert set(plain.events).isdisjoint(plain.plain)
    assert len(plain.events) + len(plain.plain) == len(plain.chats)
    for i in plain.events:
        assert (
            plain.chats[i][1]["content"][0]["text"].count(",")
            or "background" not in plain.chats[i][1]["content"][0]["text"]
        )
    only = CaptionBatches(dataset, batch_size=8, seed=2, event_share=1.0)
    assert all(i in only.events for step in range(5) for i in only.picked(step))
    none = CaptionBatches(dataset, batch_size=8, seed=2, event_share=0.0)
    assert all(i in none.plain for step in range(5) for i in none.picked(step))
    assert only.picked(3) == CaptionBatches(dataset, batch_size=8, seed=2, event_share=1.0).picked(3)


def test_percept_captions_are_the_served_frames_and_the_observations_frame_text(dataset: Any) -> None:
    rows = [(str(dataset.row(i)["media_path"]), dataset.messages(i)) for i in range(len(dataset))]
    chats = percept_chats(rows + rows)
    runs = set()
    for media, messages in rows:
        parts = messages[-2]["content"] if isinstance(messages[-2]["content"], list) else []
        times = tuple(float(p["timestamp"]) for p in parts if p.get("type") == "image")
        if len(times) >= 2:
            runs.add((media, times))
    assert chats and len(chats) == len(runs)  # one per distinct served run of frames
    world = SynthWorld.for_media(rows[0][0])
    for chat in chats:
        prompt, target = chat[0]["content"], chat[1]["content"][0]["text"]
        times = [float(p["timestamp"]) for p in prompt if p["type"] == "image"]
        assert target == describe(world, Percept("frames", times=times))
        assert not any("[Turn" in p.get("text", "") for p in prompt)  # the turn notice is not a percept
        assert any(p.get("text", "").strip() == f"Frame at {times[0]:.2f}s:" for p in prompt)
    # The same text is what the teacher wrote in that turn's Observation.
    for _media, messages in rows:
        parts = messages[-2]["content"] if isinstance(messages[-2]["content"], list) else []
        times = [float(p["timestamp"]) for p in parts if p.get("type") == "image"]
        if len(times) >= 2 and not any(p.get("type") == "video" for p in parts):
            observation = json.loads(messages[-1]["content"][0]["text"])["observation"]
            assert observation == describe(world, Percept("frames", times=times))


def test_percepts_join_each_batch_without_changing_its_single_frames(dataset: Any) -> None:
    singles = CaptionBatches(dataset, batch_size=4, seed=1, event_share=0.5)
    both = CaptionBatches(dataset, batch_size=4, seed=1, event_share=0.5, percepts=2)
    assert both.whole and [singles.picked(s) for s in range(6)] == [both.picked(s) for s in range(6)]
    assert both.picked_percepts(3) == both.picked_percepts(3) and len(both.picked_percepts(3)) == 2
    batch = both.batch(3)
    images = sum(
        len([p for p in both.whole[i][0]["content"] if p["type"] == "image"]) for i in both.picked_percepts(3)
    )
    assert batch["input_ids"].shape[0] == 6 and int(batch["image_grid_thw"].shape[0]) == 4 + images
    only = CaptionBatches(dataset, batch_size=4, seed=1, event_share=1.0, percepts=3)
    assert all(i in only.whole_events for step in range(5) for i in only.picked_percepts(step))


def test_media_without_a_synthetic_sidecar_fail_with_the_switch(dataset: Any, tmp_path: Path) -> None:
    class Rows:
        def column(self, name: str) -> list[Any]:
            if name == "media_path":
                return [str(tmp_path / "real_video.mp4")] * len(dataset)
            return dataset.rows.column(name)

    class Other:
        pad_id = 0
        rows = Rows()

        def __len__(self) -> int:
            return len(dataset)

        def row(self, i: int) -> dict[str, Any]:
            return {**dataset.row(i), "media_path": str(tmp_path / "real_video.mp4")}

        def messages(self, i: int) -> list[dict[str, Any]]:
            return dataset.messages(i)

        encode = dataset.encode

    with pytest.raises(ValueError, match="captions.batch_size=0"):
        CaptionBatches(Other(), batch_size=4, seed=0)
    assert json.dumps(caption_chats([(str(tmp_path / "x.mp4"), dataset.messages(0))])) == "[]"


def test_observation_check_counts_true_and_false_frame_claims(teacher_run: Path, tmp_path: Path) -> None:
    from recipes.tiny_agent.probes.observations import claim_accuracy, main

    honest = claim_accuracy(teacher_run)
    assert honest["turns"] >= 2 and honest["hue_claims"] >= 2 and honest["hue_true"] == 1.0
    assert honest["event_true"] in (None, 1.0)
    assert honest["frames_served"] >= 2 and honest["frames_named"] == 1.0  # every served frame, at its time
    assert honest["event_frames"] >= 1 and honest["event_recall"] == 1.0  # the fixture zooms in on events
    assert honest["episodes_read"] >= 1 and honest["reading"] == 1.0  # the teacher describes exactly
    assert 1 <= honest["episodes_read_events"] <= honest["episodes_read"] and honest["reading_events"] == 1.0

    hues = ("red", "green", "blue", "yellow", "cyan", "magenta")
    lines = []
    for line in (teacher_run / "trajectories.jsonl").read_text().splitlines():
        row = json.loads(line)
        for turn in row["turns"]:
            obs = turn.get("observation") or ""
            for hue in hues:  # every hue claim becomes a wrong one, and each frame gains a flash
                obs = obs.replace(f"{hue} background", f"{hue.upper()}_ background")
            for hue, wrong in zip(hues, hues[1:] + hues[:1], strict=True):
                obs = obs.replace(f"{hue.upper()}_ background", f"{wrong} background, white flash")
            turn["observation"] = obs
        row["media"] = str(tmp_path / "blank" / Path(row["media"]).name)  # a blind copy: no sidecar
        lines.append(json.dumps(row))
    (tmp_path / "trajectories.jsonl").write_text("\n".join(lines) + "\n")
    wrong = claim_accuracy(tmp_path, world_dir=teacher_run)
    assert wrong["hue_claims"] == honest["hue_claims"] and wrong["hue_true"] == 0.0
    assert wrong["event_claims"] >= wrong["hue_claims"] and wrong["event_true"] < 0.5
    assert wrong["frames_named"] == 1.0 and wrong["event_recall"] == 1.0  # the right times and events, still
    assert wrong["episodes_read"] == honest["episodes_read"]
    assert wrong["reading"] < 0.1  # no frame is read exactly now (only sounds described as served still are)
    assert wrong["reading_events"] < 0.1

    silent = [json.loads(line) for line in lines]
    for row in silent:
        for turn in row["turns"]:
            turn["observation"] = "none" if turn.get("observation") else turn.get("observation")
    (tmp_path / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in silent))
    mute = claim_accuracy(tmp_path, world_dir=teacher_run)
    assert mute["frames_served"] == honest["frames_served"] and mute["frames_named"] == 0.0
    assert mute["event_recall"] == 0.0 and mute["hue_claims"] == 0 and mute["hue_true"] is None
    assert mute["reading"] == 0.0 and mute["reading_events"] == 0.0
    assert main([str(teacher_run)]) == 0


@pytest.mark.slow
def test_a_resumed_run_with_captions_equals_an_uninterrupted_one(
    synth_parquet: Path, dataset: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Caption batches are a function of the seed and step, so a run stopped after 3 steps and
    started again for 6 ends with the losses and weights of one 6-step run."""
    pytest.importorskip("verl")
    from safetensors.torch import load_file

    from rl.train_sft import compose, launch

    def run(run_dir: Path, steps: int, share: float = 0.5) -> list[float]:
        cfg = compose(["+exp=tiny_agent", f"model.path={dataset.model_dir}", f"data.train_files={synth_parquet}",
                       "omni_sft.tiny.build=false", f"omni_sft.run_dir={run_dir}", f"omni_sft.local.steps={steps}",
                       "omni_sft.local.save_every=1", "omni_sft.local.repeat_batch=false",
                       f"omni_sft.local.save_dir={run_dir / 'final'}", "omni_sft.local.captions.batch_size=4",
                       f"omni_sft.local.captions.event_share={share}", "omni_sft.local.captions.percepts=2"],
                      config_dirs=[RECIPE_SFT])  # fmt: skip
        return launch(cfg)

    root = synth_parquet.parent
    whole = run(root / "whole", 6)
    assert len(run(root / "split", 3)) == 3
    with pytest.raises(
        ValueError, match="caption.settings.event_share"
    ):  # other caption batches: not the same run
        run(root / "split", 6, share=0.25)
    capsys.readouterr()
    resumed = run(root / "split", 6)
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert [x["step"] for x in lines if "resumed_from" in x] == [3]  # it did resume, not start over
    assert resumed == pytest.approx(whole, rel=1e-4)
    a = load_file(str(root / "whole" / "final" / "model.safetensors"))
    b = load_file(str(root / "split" / "final" / "model.safetensors"))
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)


@pytest.fixture(scope="module")
def pool_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two short synthetic videos that no SFT row comes from: a caption pool."""
    out = tmp_path_factory.mktemp("pool")
    generate_benchmark(out, seed=17, n_videos=2, durations=[20.0], config={"n_events": 3}, split="train")
    return out


def _pool_keys(chats: list[list[dict[str, Any]]]) -> list[tuple[float, str]]:
    return [(float(c[0]["content"][1]["timestamp"]), c[1]["content"][0]["text"]) for c in chats]


def test_pool_captions_are_true_to_the_world_and_seeded(pool_dir: Path) -> None:
    chats = pool_chats(pool_dir, seed=5)
    assert _pool_keys(chats) == _pool_keys(pool_chats(pool_dir, seed=5))
    assert _pool_keys(chats) != _pool_keys(pool_chats(pool_dir, seed=6))
    worlds = [SynthWorld.for_media(p) for p in sorted(pool_dir.glob("*.mp4"))]
    visual = [[e for e in w.events if e["kind"] in ("shape", "digit", "word", "flash")] for w in worlds]
    assert len(chats) == 4 * sum(map(len, visual))  # two frames inside each event, as many at random times
    first = 4 * len(visual[0])  # the first video's chats come first (folders are read sorted)
    named = 0
    for i, chat in enumerate(chats):
        label, image = chat[0]["content"]
        t, target = float(image["timestamp"]), chat[1]["content"][0]["text"]
        assert label["text"] == f"Frame at {t:.2f}s:" and image["image"].shape == (90, 160, 3)
        assert target == frame_sentences(worlds[0 if i < first else 1], [t])[0]
        named += any(word in target for word in ("shape", "digit", "word", "white flash", "px wide"))
    assert named >= sum(map(len, visual))  # every event frame names its event
    with pytest.raises(ValueError, match="no synthetic video"):
        pool_chats(pool_dir / "missing", seed=0)


def test_a_pool_adds_its_frames_to_the_caption_batches(dataset: Any, pool_dir: Path) -> None:
    own = CaptionBatches(dataset, batch_size=4, seed=1, event_share=0.5)
    pooled = CaptionBatches(dataset, batch_size=4, seed=1, event_share=0.5, pool=pool_dir)
    assert len(pooled.chats) == len(own.chats) + len(pool_chats(pool_dir, seed=1))
    assert json.dumps(pooled.chats[: len(own.chats)], default=str) == json.dumps(own.chats, default=str)
    assert len(pooled.events) > len(own.events)
    batch = pooled.batch(0)
    assert batch["input_ids"].shape[0] == 4 and int(batch["loss_mask"].sum()) > 0


def test_reading_probe_scores_the_worlds_own_sentence_perfectly_and_a_misread_value_as_named(
    pool_dir: Path,
) -> None:
    from recipes.tiny_agent.probes.reading import held_out_frames, score_caption

    frames = held_out_frames([pool_dir])
    worlds = [SynthWorld.for_media(p) for p in sorted(pool_dir.glob("*.mp4"))]
    n_read = sum(1 for w in worlds for e in w.events if e["kind"] in ("shape", "digit", "word"))
    assert len(frames) == n_read + sum(
        len([e for e in w.events if e["kind"] in ("shape", "digit", "word")]) // 2 for w in worlds
    )
    hits: dict[str, list[int]] = {}
    widths: list[float] = []
    for t, _, truth in frames:
        caption = f"Frame {t:.2f}s: " + ", ".join(item.phrase() for item in truth) + "."
        score_caption(caption, truth, hits, widths)
    assert len(hits["hue"]) >= len(frames) - 2 and all(all(v) for v in hits.values())
    assert widths and max(widths) == 0.0
    digit = next(truth for _, _, truth in frames if any(i.kind == "digit" for i in truth))
    true_digit = next(i for i in digit if i.kind == "digit")
    wrong = str((int(true_digit.value) + 1) % 10)
    hits = {}
    score_caption(f"Frame 1.00s: red background, the digit {wrong}.", digit, hits, [])
    assert hits["digit_named"] == [1] and hits["digit_value"] == [0]


def test_reading_probe_trains_captions_and_reports_every_measure(
    dataset: Any, synth_parquet: Path, pool_dir: Path, tmp_path: Path
) -> None:
    from recipes.tiny_agent.probes.reading import main

    out = tmp_path / "reading.json"
    assert main(["--model", str(dataset.model_dir), "--eval-dir", str(pool_dir), "--train-data",
                 str(synth_parquet), "--pool", str(pool_dir), "--steps", "3", "--batch-size", "2",
                 "--out", str(out)]) == 0  # fmt: skip
    res = json.loads(out.read_text())
    assert res["steps"] == 3 and res["caption_frames"] > len(pool_chats(pool_dir, seed=0))
    assert {"hue", "shape_named", "shape_value", "digit_named", "digit_value"} <= set(res)
    assert all(0.0 <= res[k] <= 1.0 for k in res["frames"]) and res["frames"]["hue"] > 0
    assert all(lo <= res[k] <= hi for k, (lo, hi) in res["ci95"].items())


def test_vision_only_reading_changes_the_encoder_and_not_one_text_weight(
    dataset: Any, synth_parquet: Path, pool_dir: Path, tmp_path: Path
) -> None:
    from transformers import Qwen2_5OmniThinkerForConditionalGeneration as Thinker

    from recipes.tiny_agent.probes.reading import main, trainable_params

    before = Thinker.from_pretrained(dataset.model_dir, dtype=torch.float32)
    assert main(["--model", str(dataset.model_dir), "--eval-dir", str(pool_dir), "--train-data",
                 str(synth_parquet), "--pool", str(pool_dir), "--steps", "3", "--batch-size", "2",
                 "--train-part", "vision", "--save", str(tmp_path / "read")]) == 0  # fmt: skip
    after = dict(Thinker.from_pretrained(tmp_path / "read", dtype=torch.float32).named_parameters())
    changed = {n for n, p in before.named_parameters() if not torch.equal(p, after[n])}
    assert changed and all(n.startswith("visual.") for n in changed)
    assert any(n.startswith("visual.merger") for n in changed)  # the projection into the text model too
    with pytest.raises(ValueError, match="not one of"):
        trainable_params(before, "audio")
    text = {id(p) for p in trainable_params(before, "text")}  # the reverse: all but the encoder
    assert text == {id(p) for n, p in before.named_parameters() if not n.startswith("visual.")}


def test_the_caption_cache_is_bounded_and_gives_the_same_batches(dataset: Any, monkeypatch: Any) -> None:
    import recipes.tiny_agent.frame_captions as fc

    unbounded = CaptionBatches(dataset, batch_size=4, seed=2)
    expected = [unbounded.batch(step) for step in range(6)]
    monkeypatch.setattr(fc, "CACHE_ITEMS", 3)
    bounded = CaptionBatches(dataset, batch_size=4, seed=2)
    for step in range(6):
        got = bounded.batch(step)
        assert len(bounded._items) <= 3
        assert torch.equal(got["input_ids"], expected[step]["input_ids"])
        assert torch.equal(got["pixel_values"], expected[step]["pixel_values"])
