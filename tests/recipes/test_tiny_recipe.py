"""The tiny agent's recipe: sizing helpers, the blind control's media, and a minutes-sized run of the
whole pipeline (synthetic data -> offline teacher -> per-turn export -> agent build -> SFT on a fixed
seed) whose loss falls and whose saved folder loads and plays an episode."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from recipes.tiny_agent.model import mrope_section
from recipes.tiny_agent.recipe import (
    _eval_cmd,
    events_command,
    parse_args,
    read_command,
    run_parallel,
    run_rows,
    run_stages,
    scaling_command,
    sft_command,
    synth_command,
    turn_token_stats,
)
from recipes.tiny_agent.results import results_markdown, well_formed
from recipes.tiny_agent.sets import blank_media
from recipes.tiny_agent.sets import main as synth_sets_main
from rl.sft.local import lr_at, sample_indices

OLD = ["--preset", "event-phase"]  # the agent shipped before, whose recipe left these options off


def test_sample_order_is_a_per_epoch_permutation() -> None:
    n, bs = 7, 2
    order = [i for step in range(7) for i in sample_indices(step, bs, n, seed=3, repeat=False)]
    assert sorted(order[:7]) == list(range(7)) and sorted(order[7:14]) == list(range(7))
    assert order[:7] != order[7:14]  # reshuffled each epoch
    assert order == [i for step in range(7) for i in sample_indices(step, bs, n, seed=3, repeat=False)]
    assert sample_indices(5, 3, n, seed=0, repeat=True) == [0, 1, 2]


def test_lr_schedule_and_rope_split() -> None:
    assert lr_at(0, 100, 1.0, 10, True) == pytest.approx(0.1)
    assert lr_at(10, 100, 1.0, 10, True) == pytest.approx(1.0)
    assert lr_at(99, 100, 1.0, 10, True) == pytest.approx(0.1, abs=1e-3)
    assert lr_at(99, 100, 1.0, 10, False) == 1.0
    assert mrope_section(32) == [4, 6, 6] and mrope_section(128) == [16, 24, 24]  # Qwen2.5-Omni-7B's
    assert sum(mrope_section(16)) == 8


def _probe(path: Path, what: str) -> list[str]:
    cmd = ["ffprobe", "-v", "error", "-show_entries", what, "-of", "csv=p=0", str(path)]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()


def test_blind_media_are_black_and_silent_with_the_same_timeline(video_path: Path, tmp_path: Path) -> None:
    from envs.media import MediaSource

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "a", "media": str(video_path), "question": "q", "task_type": "num",
                                 "answer": 2.0}) + "\n")  # fmt: skip
    out = blank_media(tasks, tmp_path / "blind")
    row = json.loads(out.read_text())
    blind = Path(row["media"])
    assert row["id"] == "a" and blind.parent == tmp_path / "blind"
    src_d = float(_probe(video_path, "format=duration")[0])
    assert float(_probe(blind, "format=duration")[0]) == pytest.approx(src_d, abs=0.1)
    with MediaSource(str(blind)) as media:
        frames = media.frames(1.0, 12.0, 4)
        audio = media.audio(2.0, 14.0)
    assert len(frames) == 4 and all(int(f.image.max()) <= 16 for f in frames)  # black (codec noise allowed)
    assert float(np.abs(audio).max()) < 1e-3  # the tone bursts at 3 s and 12 s are gone
    with MediaSource(str(video_path)) as media:
        assert float(np.abs(media.audio(2.0, 14.0)).max()) > 0.05
        assert int(media.frames(1.0, 12.0, 4)[0].image.max()) > 50


def test_pool_command_copies_a_runs_pool_tasks_with_absolute_media(tmp_path: Path) -> None:
    train = tmp_path / "train"
    train.mkdir()
    rows = [{"id": f"t{i}", "media": f"v{i % 2}.mp4", "question": "q", "task_type": "num", "answer": float(i)}
            for i in range(4)]  # fmt: skip
    (train / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "run"
    run.mkdir()
    (run / "task_pool.json").write_text(json.dumps(["t3", "t0"]))
    assert (
        synth_sets_main(["pool", str(run), str(train / "tasks.jsonl"), "--out", str(tmp_path / "pool")]) == 0
    )
    got = [json.loads(line) for line in (tmp_path / "pool" / "tasks.jsonl").read_text().splitlines()]
    assert [r["id"] for r in got] == ["t3", "t0"]  # the pool's order, nothing else
    assert got[0] == {**rows[3], "media": str((train / "v1.mp4").resolve())}
    (run / "task_pool.json").write_text(json.dumps(["t0", "gone"]))
    with pytest.raises(SystemExit, match="1 pool tasks are not in"):
        synth_sets_main(["pool", str(run), str(train / "tasks.jsonl"), "--out", str(tmp_path / "pool2")])
    with pytest.raises(SystemExit, match="no task_pool.json"):
        synth_sets_main(["pool", str(train), str(train / "tasks.jsonl"), "--out", str(tmp_path / "pool3")])


def test_well_formed_and_markdown(tmp_path: Path) -> None:
    turns = [{"error": None, "action_type": "get_frames"}, {"error": "format_not_json", "action_type": None},
             {"error": "video_out_of_range", "action_type": "get_clip"}, {"error": None, "action_type": "answer"}]  # fmt: skip
    stuck = [{"error": "answer_invalid", "action_type": "answer"}] * 2  # never recovers
    (tmp_path / "trajectories.jsonl").write_text(
        json.dumps({"turns": turns}) + "\n" + json.dumps({"turns": stuck})
    )
    rates = well_formed(tmp_path)
    assert rates == {"turns_total": 6, "well_formed_rate": 5 / 6, "percept_turn_rate": 2 / 6,
                     "recovery_rate": 1 / 3, "first_answer_valid": 0.5}  # fmt: skip
    ci = {"mean": 0.5, "lo": 0.25, "hi": 0.75}
    res = {"table": {"agent": {"n": 4, "score": ci, "answer_rate": ci, "frames_used": 3.0, "turns": 2.0,
                               "by_task_type": {"mcq": ci}, **rates}},
           "paired": {"agent - uniform": {"n_shared": 4, "diff": {**ci, "resolved": True}}}}  # fmt: skip
    md = results_markdown(res)
    assert "| agent | 4 | 0.500 [0.250, 0.750] | 0.833 | 0.500 | 0.500 | 0.333 | 3.0 | 2.00 |" in md
    assert "| agent - uniform | 4 | 0.500 [0.250, 0.750] | True |" in md and "| mcq |" in md


def test_synthesis_and_eval_share_caps_the_agent_can_take_in(tmp_path: Path) -> None:
    from omniagent.tiny_model import build_processor, train_tokenizer

    args = parse_args(["--out", str(tmp_path)])
    heard = build_processor(train_tokenizer(["a b c"], vocab_size=300)).feature_extractor.chunk_length
    assert args.max_audio_s <= heard  # the teacher never describes sound the student cannot hear
    synth = [x for x in synth_command(args) if x.startswith("+env.limits.")]
    evals = [
        x for x in _eval_cmd(args, tmp_path / "t.jsonl", tmp_path / "run", "uniform", {}) if ".limits." in x
    ]
    assert len(synth) == 4 and [x.replace("+env.", "") for x in synth] == [
        x.replace("benchmark.", "") for x in evals
    ]
    assert f"+env.limits.max_audio_s={args.max_audio_s}" in synth
    assert f"+env.limits.max_answer_chars={args.max_answer_chars}" in synth  # one-word ff answers


def test_scaling_runs_the_agent_on_the_held_out_set_and_ship_only_when_asked(tmp_path: Path) -> None:
    args = parse_args(["--out", str(tmp_path / "r"), "--scaling-ks", "2,8"])
    assert "ship" not in args.stages and "scaling" not in args.stages  # a 15-minute sweep: when named
    cmd = scaling_command(args)
    assert cmd[1].endswith("scripts/turn_scaling.py") and "scaling.ks=[2,8]" in cmd
    assert f"benchmark.annotations={args.out / 'synth_eval' / 'tasks.jsonl'}" in cmd
    assert f"+policy.kwargs.model={args.out / 'agent'}" in cmd and "policy.name=transformers" in cmd
    assert f"out_dir={args.out / 'scaling'}" in cmd
    untrained = run_rows(args)["random_weights"][3]  # the same model before training, decoded alike
    assert untrained == {**run_rows(args)["agent"][3], "model": str(args.out / "init")}


def test_the_agent_rows_decode_under_the_turn_schema_and_free_decoding_is_a_row_of_its_own(
    tmp_path: Path,
) -> None:
    rows = run_rows(parse_args(["--out", str(tmp_path)]))
    assert rows["agent"][3]["constrained"] is True and rows["agent_blind"][3] == rows["agent"][3]
    assert rows["agent_free"][3]["constrained"] is False and rows["agent_free"][0] == rows["agent"][0]
    assert (
        rows["agent_free_blind"][3] == rows["agent_free"][3]
        and rows["agent_free_blind"][0] == rows["agent_blind"][0]
    )
    assert "+policy.kwargs.constrained=True" in scaling_command(parse_args(["--out", str(tmp_path)]))
    free = run_rows(parse_args(["--out", str(tmp_path), "--constrained", "0"]))
    assert free["agent"][3]["constrained"] is False


def test_the_prior_row_answers_the_held_out_set_from_the_training_set_alone(tmp_path: Path) -> None:
    args = parse_args(["--out", str(tmp_path)])
    tasks_file, run_dir, policy, kwargs = run_rows(args)["prior"]
    assert (tasks_file, run_dir, policy) == (run_rows(args)["agent"][0], tmp_path / "eval" / "prior", "prior")
    assert kwargs == {
        "train_tasks": str(tmp_path / "synth_train" / "tasks.jsonl")
    }  # the agent's own training set
    cmd = _eval_cmd(args, tasks_file, run_dir, policy, kwargs)
    assert "policy.name=prior" in cmd and f"+policy.kwargs.train_tasks={kwargs['train_tasks']}" in cmd


def test_event_phase_and_teacher_mistakes_are_options(tmp_path: Path) -> None:
    """The teacher's mistakes are off unless asked; with ``--event-steps 0`` phase 1 saves the agent
    itself, else it saves ``agent_sft`` and phase 2 continues from it into ``agent``."""
    plain = parse_args([*OLD, "--out", str(tmp_path), "--event-steps", "0"])
    assert not any("error_rate" in x for x in synth_command(plain))
    assert f"omni_sft.local.save_dir={tmp_path / 'agent'}" in sft_command(plain)
    args = parse_args(
        [*OLD, "--out", str(tmp_path), "--event-steps", "7", "--error-rate", "0.3", "--min-turns", "4"]
    )
    synth = synth_command(args)
    assert "+teacher.kwargs.error_rate=0.3" in synth and "turn_budget.min=4" in synth
    assert not any("look_error_rate" in x for x in synth)
    assert f"omni_sft.local.save_dir={tmp_path / 'agent_sft'}" in sft_command(args)
    events = events_command(args)
    assert (
        f"model.path={tmp_path / 'agent_sft'}" in events
        and f"omni_sft.local.save_dir={tmp_path / 'agent'}" in events
    )
    assert "omni_sft.local.steps=7" in events and "omni_sft.local.captions.event_share=0.5" in events
    assert f"trainer.seed={args.seed + 1}" in events
    assert "omni_sft.local.captions.percepts=0" in events  # the shipped agent's recipe: single frames
    assert not any("percepts" in x for x in sft_command(args))  # phase 1 captions single frames only
    assert not any("per_frame" in x for x in synth)  # the shipped agent's teacher observes runs
    both = parse_args([*OLD, "--out", str(tmp_path), "--event-percepts", "8", "--per-frame", "1"])
    assert "omni_sft.local.captions.percepts=8" in events_command(both)
    assert "+teacher.kwargs.per_frame=true" in synth_command(both)
    assert not any("named_frame" in x for x in synth)  # the shipped agent's teacher looks at a window
    named = parse_args([*OLD, "--out", str(tmp_path), "--named-frame", "1"])
    assert "+teacher.kwargs.named_frame=true" in synth_command(named)
    assert not any("option_thought" in x for x in synth + synth_command(named))
    option = parse_args([*OLD, "--out", str(tmp_path), "--option-thought", "1"])
    assert "+teacher.kwargs.option_thought=true" in synth_command(option)
    unit = parse_args([*OLD, "--out", str(tmp_path), "--unit-thought", "1"])
    assert "+teacher.kwargs.unit_thought=true" in synth_command(unit)
    assert not any("unit_thought" in x for x in synth_command(option))
    assert "omni_sft.local.text_warmup.observation_loss=True" in sft_command(plain)
    given = parse_args([*OLD, "--out", str(tmp_path), "--warmup-observation-loss", "0"])
    assert "omni_sft.local.text_warmup.observation_loss=False" in sft_command(given)
    assert "omni_sft.local.text_warmup.option_shuffles=0" in sft_command(plain)
    shuffled = parse_args([*OLD, "--out", str(tmp_path), "--option-shuffles", "8"])
    assert "omni_sft.local.text_warmup.option_shuffles=8" in sft_command(shuffled)
    shipped = parse_args(["--out", str(tmp_path)])  # the defaults: the shipped (glyph-read) agent
    synth = synth_command(shipped)
    for flag in ("per_frame", "named_frame", "option_thought"):
        assert f"+teacher.kwargs.{flag}=true" in synth
    assert not any("unit_thought" in x for x in synth)  # not (yet) in the shipped recipe
    assert "omni_sft.local.captions.percepts=8" in events_command(shipped)
    sft = sft_command(shipped)
    assert "omni_sft.local.text_warmup.option_shuffles=8" in sft
    assert "omni_sft.local.text_warmup.observation_loss=False" in sft
    later = parse_args([*OLD, "--out", str(tmp_path), "--steps", "7"])  # a flag overrides a preset
    assert (later.steps, later.event_steps, later.preset) == (7, 1000, "event-phase")


def test_caption_pool_and_vision_size_are_options_on_in_the_shipped_recipe(tmp_path: Path) -> None:
    """A caption pool reaches both phases' captions, is built from its own seed, and never from the
    training or held-out seed; the vision size reaches the agent's config. The defaults are the
    shipped agent's (pool, glyph and read stages on); the earlier agent's preset has none."""
    from recipes.tiny_agent.model import AgentSize, agent_thinker_config
    from recipes.tiny_agent.sets import make_caption_pool

    plain = parse_args([*OLD, "--out", str(tmp_path)])
    assert not any("captions.pool" in x for x in sft_command(plain) + events_command(plain))
    pooled = parse_args([*OLD, "--out", str(tmp_path), "--caption-pool", "2"])
    flag = f"omni_sft.local.captions.pool={tmp_path / 'caption_pool'}"
    assert flag in sft_command(pooled) and flag in events_command(pooled)
    no_captions = parse_args([*OLD, "--out", str(tmp_path), "--caption-pool", "2", "--caption-batch", "0"])
    assert not any("captions.pool" in x for x in sft_command(no_captions))
    assert f"model.path={tmp_path / 'init'}" in sft_command(pooled)  # no read stage unless asked
    read = parse_args([*OLD, "--out", str(tmp_path), "--caption-pool", "2", "--read-steps", "9"])
    assert f"model.path={tmp_path / 'init_read'}" in sft_command(read)
    cmd = read_command(read)
    assert cmd[cmd.index("--steps") + 1] == "9" and cmd[cmd.index("--pool") + 1] == str(
        tmp_path / "caption_pool"
    )
    assert cmd[cmd.index("--model") + 1] == str(tmp_path / "init")
    assert cmd[cmd.index("--save") + 1] == str(tmp_path / "init_read")
    with pytest.raises(SystemExit, match="needs --caption-pool"):
        read_command(parse_args([*OLD, "--out", str(tmp_path), "--read-steps", "9"]))
    for seed in (pooled.train_seed, pooled.eval_seed):
        bad = parse_args(
            [*OLD, "--out", str(tmp_path), "--caption-pool", "1", "--caption-pool-seed", str(seed)]
        )
        with pytest.raises(SystemExit, match="training or the held-out seed"):
            make_caption_pool(bad)
    from transformers import AutoTokenizer

    from omniagent.tiny_model import build_tiny_thinker

    build_tiny_thinker(seed=0, out_dir=tmp_path / "tiny")
    tok = AutoTokenizer.from_pretrained(tmp_path / "tiny")
    default = agent_thinker_config(tok, 0, AgentSize()).vision_config
    assert (default.hidden_size, default.depth) == (plain.vision_width, plain.vision_depth) == (32, 2)
    shipped = parse_args(["--out", str(tmp_path)])  # the shipped agent: a wider encoder, glyphs, a read
    assert shipped.vision_width == 64 and shipped.caption_pool == 200 and flag in sft_command(shipped)
    assert f"model.path={tmp_path / 'init_read'}" in sft_command(shipped)
    assert "omni_sft.freeze=[visual]" in sft_command(shipped)
    wide = agent_thinker_config(tok, 0, AgentSize(vision_hidden_size=128, vision_depth=4)).vision_config
    assert (wide.hidden_size, wide.depth, wide.num_heads, wide.intermediate_size) == (128, 4, 4, 256)
    assert wide.fullatt_block_indexes == [3] and wide.out_hidden_size == AgentSize().hidden_size


def test_a_vision_read_after_sft_trains_the_last_phases_encoder_into_the_agent_folder(tmp_path: Path) -> None:
    """``--vision-read-steps N`` adds a phase after the event phase: the event phase then saves
    ``agent_events``, and the vision read trains its encoder alone from there into ``agent``."""
    args = parse_args([*OLD, "--out", str(tmp_path), "--caption-pool", "2", "--vision-read-steps", "9"])
    events = events_command(args)
    assert f"model.path={tmp_path / 'agent_sft'}" in events
    assert f"omni_sft.local.save_dir={tmp_path / 'agent_events'}" in events
    cmd = read_command(args, vision=True)
    arg = {
        k: cmd[cmd.index(k) + 1] for k in ("--model", "--save", "--steps", "--train-part", "--out", "--lr")
    }
    assert arg == {"--model": str(tmp_path / "agent_events"), "--save": str(tmp_path / "agent"), "--steps": "9",
                   "--train-part": "vision", "--out": str(tmp_path / "reading_vision.json"),
                   "--lr": str(args.vision_read_lr)}  # fmt: skip
    no_events = parse_args([*OLD, "--out", str(tmp_path), "--caption-pool", "2", "--vision-read-steps", "9",
                            "--event-steps", "0"])  # fmt: skip
    assert f"omni_sft.local.save_dir={tmp_path / 'agent_sft'}" in sft_command(no_events)
    vision = read_command(no_events, vision=True)
    assert vision[vision.index("--model") + 1] == str(tmp_path / "agent_sft")
    assert (
        read_command(parse_args([*OLD, "--out", str(tmp_path), "--caption-pool", "2", "--read-steps", "3"]))[
            -1
        ]
        == "all"
    )
    with pytest.raises(SystemExit, match="needs --caption-pool"):
        read_command(parse_args([*OLD, "--out", str(tmp_path), "--vision-read-steps", "9"]), vision=True)


def test_read_keep_vision_grafts_the_read_encoder_into_the_untrained_agent_and_freezes_it(
    tmp_path: Path,
) -> None:
    """``--read-keep vision``: SFT starts from ``init_read_vision`` (the untrained agent with the read
    stage's encoder) with ``visual`` frozen in both phases; the graft copies exactly those tensors."""
    from safetensors.torch import load_file

    from omniagent.tiny_model import build_tiny_thinker
    from rl.checkpoint import graft_weights

    args = parse_args(
        [*OLD, "--out", str(tmp_path), "--caption-pool", "2", "--read-steps", "9", "--read-keep", "vision"]
    )
    assert f"model.path={tmp_path / 'init_read_vision'}" in sft_command(args)
    assert "omni_sft.freeze=[visual]" in sft_command(args) and "omni_sft.freeze=[visual]" in events_command(
        args
    )
    whole = parse_args([*OLD, "--out", str(tmp_path), "--caption-pool", "2", "--read-steps", "9"])
    assert "omni_sft.freeze=[]" in sft_command(
        whole
    ) and f"model.path={tmp_path / 'init_read'}" in sft_command(whole)
    with pytest.raises(SystemExit):
        parse_args([*OLD, "--out", str(tmp_path), "--read-keep", "text"])
    build_tiny_thinker(seed=0, out_dir=tmp_path / "a")
    build_tiny_thinker(seed=1, out_dir=tmp_path / "b")
    names = graft_weights(tmp_path / "a", tmp_path / "b", "visual.", tmp_path / "ab")
    a, b, ab = (load_file(tmp_path / d / "model.safetensors") for d in ("a", "b", "ab"))
    assert names and set(names) == {n for n in a if n.startswith("visual.")}
    assert all(torch.equal(ab[n], b[n] if n in names else a[n]) for n in a)
    assert any(not torch.equal(a[n], b[n]) for n in names)  # the two seeds differ, so the graft shows
    with pytest.raises(ValueError, match="no tensor"):
        graft_weights(tmp_path / "a", tmp_path / "b", "nothing.", tmp_path / "x")


def test_turn_token_stats_flag_targets_longer_than_the_generation_limit(tmp_path: Path) -> None:
    import pandas as pd

    from omniagent.tiny_model import train_tokenizer

    tok = train_tokenizer(["observation thought action frames seconds"] * 4, vocab_size=300)
    tok.save_pretrained(str(tmp_path / "tok"))
    short, long = '{"observation": "none"}', '{"observation": "' + "frames seconds " * 40 + '"}'
    n_short, n_long = len(tok(short)["input_ids"]), len(tok(long)["input_ids"])
    rows = [[{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "text", "text": t}]}]
            for t in (short, long)]  # fmt: skip
    pd.DataFrame({"messages": [json.dumps(r) for r in rows]}).to_parquet(tmp_path / "train.parquet")
    stats = turn_token_stats(
        tmp_path / "train.parquet", tmp_path / "tok", max_new_tokens=(n_short + n_long) // 2
    )
    assert stats["turns"] == 2 and stats["max"] == n_long and stats["over_limit"] == 0.5
    assert stats["mean"] == (n_short + n_long) / 2


@pytest.mark.slow
def test_minutes_sized_recipe_trains_and_the_folder_plays(tmp_path: Path) -> None:
    from envs.env import OmniVideoEnv
    from omniagent.checkpoint import check_checkpoint
    from omniagent.episode import run_episode
    from omniagent.policy import make_policy

    args = parse_args(["--out", str(tmp_path / "r"), "--train-videos", "1", "--durations", "60",
                       "--n-samples", "2", "--steps", "12", "--warmup-steps", "2", "--save-every", "6",
                       "--text-warmup-steps", "3", "--text-warmup-batch", "2", "--caption-batch", "4",
                       "--event-steps", "3", "--error-rate", "0.5", "--look-error-rate", "0.2",
                       "--lr", "3e-3", "--caption-pool", "2", "--glyph-steps", "3", "--read-steps", "3",
                       "--eval-videos", "1", "--stages", "data", "synth", "export", "build", "glyphs", "read",
                       "sft", "events"])  # fmt: skip
    run_stages(args)  # the shipped recipe's stages, each a few steps: glyphs, read, SFT, events
    assert json.loads((args.out / "glyphs.json").read_text())["steps"] == 3
    assert json.loads((args.out / "reading.json").read_text())["train_part"] == "text"  # after glyphs
    kept = [json.loads(x) for x in (args.out / "sft_data" / "kept.jsonl").read_text().splitlines()]
    staged = [t["error"] for k in kept for t in k["turns"] if t["scripted_error"]]  # the teacher's mistakes
    summary = json.loads((args.out / "sft_data" / "summary.json").read_text())
    assert staged and sum(summary["kept_scripted_errors"].values()) == len(staged)
    log = (args.out / "logs" / "sft.log").read_text()
    losses = [json.loads(x)["losses"] for x in log.splitlines() if x.startswith('{"samples"')][0]
    assert len(losses) == 12 and np.mean(losses[-4:]) < np.mean(losses[:4])
    events = (args.out / "logs" / "sft_events.log").read_text()
    assert [len(json.loads(x)["losses"]) for x in events.splitlines() if x.startswith('{"samples"')] == [3]
    assert "event_share" in events and check_checkpoint(args.out / "agent_sft")
    agent = check_checkpoint(args.out / "agent")
    task = json.loads((args.out / "synth_train" / "tasks.jsonl").read_text().splitlines()[0])
    task["media"] = str(args.out / "synth_train" / task["media"])
    policy = make_policy("transformers", model=str(agent), max_new_tokens=48, device="cpu")
    env = OmniVideoEnv(limits={"max_side": 128})
    try:
        traj = run_episode(env, policy, {**task, "max_turns": 2})
    finally:
        env.close()
        policy.close()
    assert len(traj.turns) >= 1 and all(t.raw_text is not None for t in traj.turns)
    assert traj.turns[0].completion_tokens and traj.turns[0].context_tokens


def test_every_readme_recipe_command_parses() -> None:
    """The `python -m recipes.tiny_agent ...` commands of the README, the docs and the study scripts name only flags
    and stages the recipe has (continuation lines joined; each command ends at `&&`, `|`, `;`, a backtick or a comment)."""
    import shlex

    from doc_texts import doc_text

    text = doc_text(with_scripts=True)
    commands = []
    for line in text.replace("\\\n", " ").splitlines():
        for part in line.split("python -m recipes.tiny_agent ")[1:]:
            for end in ("#", "&&", "|", "`", ";"):
                part = part.split(end)[0]
            commands.append(shlex.split(part))
            assert parse_args(commands[-1]).out.name, commands[-1]
    assert len(commands) >= 30
    assert sum("--preset" in w for w in commands) >= 25  # the earlier agents' runs name their preset


WAIT_FOR_THE_OTHER = """import os, pathlib, sys, time
here, mine, other = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
(here / mine).write_text(os.environ.get("OMP_NUM_THREADS", "-"))
start = time.monotonic()
while not (here / other).exists():
    if time.monotonic() - start > 60:
        sys.exit("the other row never started")
    time.sleep(0.05)
"""


def test_eval_rows_run_at_once_with_the_threads_split(tmp_path: Path) -> None:
    """``--eval-jobs 2``: both rows run together (each waits until the other has started, so one at a
    time could not finish), each with half the CPU's threads; a failing row names its log, and the
    other row still runs to its end."""
    import os
    import sys

    def row(mine: str, other: str) -> tuple[list[str], Path]:
        cmd = [sys.executable, "-c", WAIT_FOR_THE_OTHER, str(tmp_path), mine, other]
        return cmd, tmp_path / f"{mine}.log"

    assert parse_args(["--out", str(tmp_path)]).eval_jobs == 1  # in turn unless asked
    run_parallel({"agent": row("a", "b"), "agent_blind": row("b", "a")}, at_once=2)
    threads = str(max(1, (os.cpu_count() or 1) // 2))
    assert (tmp_path / "a").read_text() == (tmp_path / "b").read_text() == threads
    assert (tmp_path / "a.log").read_text().startswith("+ ")
    bad = ([sys.executable, "-c", "import sys; sys.exit(3)"], tmp_path / "bad.log")
    ok = ([sys.executable, "-c", "open(r'%s', 'w').write('done')" % (tmp_path / "ok")], tmp_path / "ok.log")
    with pytest.raises(SystemExit, match=r"exit 3.*bad\.log"):
        run_parallel({"bad": bad, "ok": ok}, at_once=2)
    assert (tmp_path / "ok").read_text() == "done"
