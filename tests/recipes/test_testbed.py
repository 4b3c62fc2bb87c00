"""The testbed recipe (recipes/testbed/): its settings and commands, the agent's turn-frame tokens, the gates'
flat-group count, and the study's statistics (paired t over seeds, the two-level bootstrap, Holm, power)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from recipes.testbed import analysis
from recipes.testbed.gates import flat_summary
from recipes.testbed.model import FRAME_TOKENS
from recipes.testbed.options import level_config, parse_args
from recipes.testbed.recipe import episode_token_stats, eval_command, synth_command

ROOT = Path(__file__).resolve().parents[2]


def test_the_recipe_sets_up_the_search_level_and_its_caps(tmp_path: Path) -> None:
    args = parse_args(["--out", str(tmp_path / "sft_s1"), "--seed", "1", "--digit-seconds", "1.5,2.5"])
    assert args.data == (tmp_path / "data").resolve() and args.eval_set == args.data / "dev"
    assert level_config(args) == {
        "level": "search",
        "search_digit_seconds": [1.5, 2.5],
        "search_fields": "random",
    }
    grid = parse_args(["--out", str(tmp_path / "sft_s1"), "--search-fields", "grid"])
    assert level_config(grid)["search_fields"] == "grid"
    with pytest.raises(SystemExit):
        parse_args(["--out", str(tmp_path / "sft_s1"), "--search-fields", "equal"])
    synth = " ".join(synth_command(args))
    assert "+teacher.kwargs.compact=true" in synth and "turn_budget.min=5" in synth and "seed=1" in synth
    assert "option_thought" not in synth
    echo = parse_args(["--out", str(tmp_path / "sft_s1"), "--option-echo", "1"])
    assert "+teacher.kwargs.option_thought=true" in synth_command(echo)
    assert not any("answer_text" in x or "mcq_option_text" in x for x in synth_command(args))
    text = parse_args(["--out", str(tmp_path / "sft_s1"), "--option-text", "1"])
    assert {"+teacher.kwargs.answer_text=true", "+env.limits.mcq_option_text=True"} <= set(
        synth_command(text)
    )
    assert "benchmark.limits.mcq_option_text=True" in eval_command(
        text, args.data, tmp_path / "e", "prior", {}
    )
    cmd = eval_command(args, args.data / "dev" / "tasks.jsonl", tmp_path / "e", "prior", {"train_tasks": "t"})
    assert "benchmark.max_turns=5" in cmd and "benchmark.limits.max_frames=8" in cmd
    assert (
        f"overlap_guard.train_set={args.data / 'train' / 'tasks.jsonl'}" in cmd
        and "+policy.kwargs.train_tasks=t" in cmd
    )
    with pytest.raises(ValueError):
        parse_args(["--digit-seconds", "x"])


def test_the_help_runs_and_names_every_stage() -> None:
    out = subprocess.run([sys.executable, "-m", "recipes.testbed", "--help"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)  # fmt: skip
    assert out.returncode == 0
    for stage in ("data", "synth", "export", "build", "glyphs", "sft", "eval"):
        assert stage in out.stdout


def test_frame_tokens_cut_a_turn_and_episode_stats_count_them(tmp_path: Path) -> None:
    from omniagent.tiny_model import TOKENIZER_CORPUS, train_tokenizer

    turn = ('{"observation": "0-17 blue, 26 yellow 9", "thought": "yellow 17-43, digit 9 at 26: D.", '
            '"action": {"type": "answer", "content": "D"}}')  # fmt: skip
    plain = train_tokenizer([*TOKENIZER_CORPUS, turn], vocab_size=600)
    framed = train_tokenizer([*TOKENIZER_CORPUS, turn], vocab_size=600)
    framed.add_tokens(list(FRAME_TOKENS))
    before, after = len(plain(turn)["input_ids"]), len(framed(turn)["input_ids"])
    assert after <= before - 8, (before, after)
    assert framed.decode(framed(turn)["input_ids"]) == turn  # the frame tokens decode to the same text
    framed.save_pretrained(tmp_path / "tok")
    kept = tmp_path / "kept.jsonl"
    kept.write_text(json.dumps({"turns": [{"raw_text": turn}, {"raw_text": turn}]}) + "\n")
    stats = episode_token_stats(kept, tmp_path / "tok", max_new_tokens=after)
    assert stats["episodes"] == 1 and stats["turns"] == 2 and stats["episode_mean"] == 2 * (after + 1)
    assert stats["over_limit"] == 1.0  # each turn is its tokens plus <|im_end|>, one over the limit


def test_the_text_model_is_built_at_the_asked_width_and_depth(tmp_path: Path) -> None:
    from transformers import AutoConfig

    from omniagent.tiny_model import TOKENIZER_CORPUS
    from recipes.testbed.model import build_testbed_agent, text_size
    from recipes.testbed.options import parse_args

    assert text_size() == {"hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
                           "num_key_value_heads": 2, "intermediate_size": 256}  # the tiny agent's  # fmt: skip
    folder = build_testbed_agent(tmp_path / "wide", TOKENIZER_CORPUS, seed=0, width=256, layers=2)
    text = AutoConfig.from_pretrained(folder).text_config
    assert (text.hidden_size, text.num_hidden_layers, text.num_attention_heads, text.intermediate_size) == (
        256,
        2,
        8,
        512,
    )
    assert parse_args(["--text-width", "256"]).text_width == 256
    for bad in (["--text-width", "100"], ["--text-width", "32"], ["--text-layers", "0"]):
        with pytest.raises(SystemExit):
            parse_args(bad)


def test_flat_groups_are_counted_with_a_wilson_interval() -> None:
    rows = [{"scores": [1.0] * 8, "flat": True}, {"scores": [0.0] * 8, "flat": True}]
    rows += [{"scores": [1.0, 0.0] * 4, "flat": False} for _ in range(8)]
    out = flat_summary(rows)
    assert (out["groups"], out["flat"], out["all_right"], out["all_wrong"]) == (10, 2, 1, 1)
    assert out["share"] == 0.2 and out["wilson95"][0] < 0.2 < out["wilson95"][1] < 0.6
    assert out["episode_score"] == pytest.approx((8 + 32) / 80)


def test_paired_t_over_seeds_holm_and_power() -> None:
    t = analysis.t_interval([0.01, 0.03, 0.02, 0.04, 0.0])
    assert t["mean"] == pytest.approx(0.02) and t["lo"] > 0 and t["p"] < 0.05
    assert analysis.holm({"a": 0.01, "b": 0.04}) == {"a": True, "b": True}
    assert analysis.holm({"a": 0.03, "b": 0.04}) == {"a": False, "b": False}  # 0.03 > 0.025: both fail
    assert analysis.holm({"a": 0.001, "b": 0.2}) == {"a": True, "b": False}
    # the plan's numbers: 10 seeds detect 1.0 x SD(d_s) at 80% power (two-sided 0.05)
    assert analysis.detectable(0.02, 10) == pytest.approx(0.0199, abs=0.001)
    # two seeds leave one degree of freedom: the detectable difference is far beyond 4 SD, and still found
    two = analysis.detectable(1.0, 2)
    assert 4.0 < two < 20.0 and analysis.detectable(0.5, 2) == pytest.approx(two / 2, rel=1e-3)


def test_t_over_runs_keeps_every_run_and_tests_those_with_a_value() -> None:
    each = {"s0": 0.1, "s1": None, "s2": 0.3, "s3": 0.2}
    out = analysis.t_over_runs(each)
    assert out["per_run"] == each  # the run without a value is kept, as None
    assert out["t"] == analysis.t_interval([0.1, 0.3, 0.2])
    assert out["t"]["n"] == 3 and out["t"]["mean"] == pytest.approx(0.2)
    assert analysis.t_over_runs({"s0": None})["t"] == {"n": 0, "mean": None}


def test_the_two_level_bootstrap_resamples_seeds_then_videos() -> None:
    rng = np.random.default_rng(0)
    spread = [
        {f"v{v}": 0.05 + s_off + rng.normal(0, 0.2) for v in range(40)} for s_off in (-0.04, 0.0, 0.04) * 3
    ]
    out = analysis.two_level_bootstrap(spread)
    assert out["videos"] == 40 and out["lo"] < out["mean"] < out["hi"]
    same = [dict(spread[0]) for _ in range(9)]  # no seed spread: only the videos vary
    narrow = analysis.two_level_bootstrap(same)
    assert narrow["hi"] - narrow["lo"] < out["hi"] - out["lo"] + 0.05
    a = {
        "x-cue_digit_mcq-00": (1.0, "m1", "cue_digit_mcq"),
        "x-cue_digit_mcq-01": (0.0, "m2", "cue_digit_mcq"),
    }
    b = {
        "x-cue_digit_mcq-00": (0.0, "m1", "cue_digit_mcq"),
        "x-cue_digit_mcq-01": (0.0, "m2", "cue_digit_mcq"),
    }
    assert analysis.per_video_diff(a, b) == {"m1": 1.0, "m2": 0.0}


def test_compare_pairs_the_arms_by_seed_and_each_with_sft() -> None:
    def run(right: list[int]) -> dict:
        return {
            f"v{i // 4}-cue_digit_mcq-{i}": (float(i in right), f"v{i // 4}", "cue_digit_mcq")
            for i in range(16)
        }

    arms = {
        "taura": {s: run(list(range(8 + s % 2))) for s in range(4)},
        "grpo": {s: run(list(range(8))) for s in range(4)},
    }
    primary = analysis.compare(arms, "taura", "grpo", None)
    assert primary["per_seed"] == {0: 0.0, 1: 1 / 16, 2: 0.0, 3: 1 / 16}
    assert primary["t"]["mean"] == pytest.approx(1 / 32) and "bootstrap" in primary
    versus_sft = analysis.compare(arms, "grpo", None, run(list(range(4))))
    assert all(v == pytest.approx(4 / 16) for v in versus_sft["per_seed"].values())


def test_compact_captions_name_what_each_pool_frame_shows(tmp_path: Path) -> None:
    from envs.synth import generate_benchmark
    from omniagent.backends.synth_compact import parse_compact
    from omniagent.backends.synth_world import SynthWorld
    from recipes.testbed.captions import pool_chats, shows_digit

    tasks = generate_benchmark(tmp_path, seed=3, n_videos=1, durations=[60.0], config={"level": "search"})
    world = SynthWorld.for_media(tasks[0].media)
    chats = pool_chats(tmp_path, seed=0, per_event=2)
    assert len(chats) == 16  # 2 frames in each of the 4 digits, and as many at random times
    digits = [c for c in chats if shows_digit(c)]
    assert len(digits) >= 8
    for chat in chats:
        label = float(chat[0]["content"][0]["text"].removeprefix("Frame at ").rstrip("s:"))
        (claim,) = parse_compact(chat[1]["content"][0]["text"])
        truth = {(i.kind, i.value) for i in world.frame(label)}
        assert claim.first == int(label) and {(i.kind, i.value) for i in claim.items} == truth


def _eval_folder(root: Path, agent_rewards: list[float]) -> Path:
    """A recipe eval folder: results.json with every row, and the agent's per-question results."""
    from recipes.testbed.calibration import ROWS

    mean = sum(agent_rewards) / len(agent_rewards)
    table = {
        name: {
            "n": len(agent_rewards),
            "score": {"mean": mean if name == "agent" else 0.25, "lo": 0.0, "hi": 1.0},
        }
        for name in ROWS
    }
    (root / "agent").mkdir(parents=True)
    (root / "results.json").write_text(json.dumps({"table": table, "paired": []}))
    templates = ["cue_digit_mcq", "cue_pitch_mcq"]
    lines = [
        json.dumps({"id": f"v{i}-{templates[i % 2]}-0", "reward": r}) for i, r in enumerate(agent_rewards)
    ]
    (root / "agent" / "results.jsonl").write_text("\n".join(lines) + "\n")
    return root


def test_the_calibration_record_tables_each_attempt_by_row_and_template(tmp_path: Path, capsys) -> None:
    from recipes.testbed.calibration import main

    a = _eval_folder(tmp_path / "a", [1.0, 0.0, 1.0, 1.0])  # digit 1.0 (two), pitch 0.5
    b = _eval_folder(tmp_path / "b", [0.0, 0.0])
    png = tmp_path / "fig" / "cal.png"
    main(["--eval", f"one={a}", "--eval", f"two={b}", "--figure", str(png)])
    out = capsys.readouterr().out
    assert "| one | agent | 4 | 0.750 [0.000, 1.000] |" in out and "| two | agent | 2 | 0.000" in out
    assert "| one | 1.000 | 0.500 |" in out and "| two | 0.000 | 0.000 |" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from recipes.testbed.calibration import figure, load_attempt

    attempts = {"one": load_attempt(a)}
    assert figure(attempts, tmp_path / "dev.png") == "score on the development set"
    assert (
        figure(attempts, tmp_path / "fresh.png", "fresh set (seed 5306)")
        == "score on the fresh set (seed 5306)"
    )
    with pytest.raises(FileNotFoundError, match="no results.json"):
        main(["--eval", f"gone={tmp_path / 'missing'}"])
    with pytest.raises(SystemExit):
        main(["--eval", "no-equals-sign"])


def test_the_calibration_record_checks_observations_against_the_video(tmp_path: Path, capsys) -> None:
    from recipes.testbed.calibration import main, reads, truth

    tasks = tmp_path / "tasks.jsonl"
    question = "Which digit is shown on screen while the background is {}?"
    rows = [
        {"id": f"v0-cue_digit_mcq-0{i}", "media": "v0.mp4", "question": question.format(colour),
         "choices": ["2", "4", "7", "9"], "answer": answer, "evidence": [evidence],
         "extra": {"template": "cue_digit_mcq", "field": field}}
        for i, (colour, answer, evidence, field) in enumerate(
            [("red", "A", [5.2, 6.4], [0.0, 20.0]), ("blue", "D", [30.1, 31.5], [20.0, 60.0])]
        )
    ]  # fmt: skip
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    videos = truth(tasks)
    assert videos["v0.mp4"]["fields"] == {"red": (0.0, 20.0), "blue": (20.0, 60.0)}
    assert videos["v0.mp4"]["digits"] == [(5.2, 6.4, "2"), (30.1, 31.5, "9")]

    look = {"action": {"type": "get_frames", "start": 0, "end": 60, "num": 8}}
    # "0-19 red" right twice, "25 red" wrong; "5 red 2" right colour and digit; "30 blue 4" a wrong digit; "50 blue 7"
    # names a digit where none is shown; the answer turn's Observation follows no look and is not counted
    observed = {
        "observation": "0-19 red, 25 red, 5 red 2, 30 blue 4, 50 blue 7",
        "action": {"type": "answer"},
    }
    after_answer = {"observation": "59 red 9"}
    folder = _eval_folder(tmp_path / "eval", [1.0])
    (folder / "agent" / "trajectories.jsonl").write_text(
        json.dumps({"media": "/somewhere/v0.mp4", "turns": [look, observed, after_answer]}) + "\n"
    )
    got = reads(folder / "agent", videos)
    assert got == {"times": 6, "colour_right": 5, "digits_named": 3, "digit_shown": 2, "digit_right": 1}
    main(["--eval", f"one={folder}", "--tasks", str(tasks)])
    assert "| one | agent | 5 / 6 (0.83) | 3 | 2 | 1 |" in capsys.readouterr().out


def test_the_timecopy_stage_trains_after_the_glyphs_and_sft_starts_from_it(tmp_path: Path) -> None:
    from recipes.testbed.recipe import run_stages, sft_command, sft_init, time_copy_command

    plain = parse_args(["--out", str(tmp_path / "sft_s0")])
    assert sft_init(plain) == plain.out / "init_glyphs"
    args = parse_args(["--out", str(tmp_path / "sft_s0"), "--seed", "1", "--time-copy-steps", "3000"])
    assert sft_init(args) == args.out / "timecopy" / "final"
    assert f"model.path={args.out / 'timecopy' / 'final'}" in sft_command(args)
    cmd = time_copy_command(args)
    assert cmd[cmd.index("--model") + 1] == str(args.out / "init_glyphs")
    assert cmd[cmd.index("--steps") + 1] == "3000" and cmd[cmd.index("--seed") + 1] == "1"
    no_glyphs = parse_args(["--out", str(tmp_path / "s"), "--time-copy-steps", "10", "--glyph-steps", "0",
                            "--stages", "timecopy"])  # fmt: skip
    with pytest.raises(SystemExit, match="glyph"):
        run_stages(no_glyphs)


def test_the_answer_weight_reaches_full_sft_and_the_text_warmup(tmp_path: Path) -> None:
    pytest.importorskip("verl")
    from recipes.testbed.recipe import CONF, sft_command
    from rl.train_sft import compose

    args = parse_args(["--out", str(tmp_path / "sft_s0"), "--answer-weight", "10"])
    cmd = sft_command(args)
    assert "data.omni.answer_weight=10.0" in cmd
    plain = sft_command(parse_args(["--out", str(tmp_path / "sft_s0")]))
    assert "data.omni.answer_weight=1.0" in plain  # the plain loss by default
    overrides = [x for x in cmd[cmd.index("+exp=testbed") :] if x.startswith(("+exp", "data.omni"))]
    cfg = compose(overrides, config_dirs=[CONF / "sft"])
    assert cfg.data.omni.answer_weight == 10.0 and cfg.omni_sft.local.text_warmup.answer_weight == 10.0
