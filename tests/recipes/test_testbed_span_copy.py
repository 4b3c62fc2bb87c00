"""The span copy probe (recipes/testbed/span_copy.py): which teacher turns become probes, how a written turn is
scored, a tiny agent warmed up and measured end to end, and the analysis paired by seed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from testkit import search_teacher_parquet

from envs.jsonl import read_jsonl
from recipes.testbed.probe_analysis import analyse, end_loss, figure, table
from recipes.testbed.span_copy import (
    SETTINGS,
    breakdown,
    load_probes,
    main,
    parse_reply,
    probe_of,
    score,
    span_parts,
)


@pytest.fixture(scope="module")
def teacher_set(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A one-video search-level set and the compact teacher's kept episodes on it, exported as SFT rows."""
    from envs.synth import generate_benchmark

    root = tmp_path_factory.mktemp("span_copy")
    generate_benchmark(
        root / "set", seed=12, n_videos=1, durations=[60.0], config={"level": "search"}, split="test"
    )
    return root / "set", search_teacher_parquet(root / "set", root / "synth")


def test_probes_are_second_turns_of_cue_questions_after_a_look_over_the_file(teacher_set: tuple) -> None:
    tasks_dir, parquet = teacher_set
    tasks = {t["id"]: t for t in read_jsonl(tasks_dir / "tasks.jsonl")}
    probes = load_probes(parquet, tasks_dir)
    assert probes and {p["template"] for p in probes} <= {"cue_digit_mcq", "cue_pitch_mcq"}
    for p in probes:
        assert p["id"].endswith("/t2") and p["cue"] in tasks[p["task"]]["question"]
        assert (
            p["reply"].startswith('{"observation": ') and p["latest"]
        )  # the percept header of the first look
        assert tasks[p["task"]]["question"] in p["task_text"]
    # the teacher aims its second look at the cued field: its own turns score (nearly) all three measures
    teacher = [score(*parse_reply(p["reply"]), p) for p in probes]
    assert all(t["cue"] == 1 for t in teacher)
    assert sum(t["span"] for t in teacher) >= 0.8 * len(teacher)
    assert sum(t["look"] for t in teacher) >= 0.8 * len(teacher)


def test_a_turn_is_scored_on_its_cue_span_and_look() -> None:
    probe = {"cue": "green", "evidence": [[30.0, 31.5]]}
    look = {"type": "get_frames", "start": 26, "end": 43, "num": 8}
    assert score("green 26-43.", look, probe) == {"cue": 1, "span": 1, "look": 1}
    assert score("green 32-43.", look, probe) == {
        "cue": 1,
        "span": 0,
        "look": 1,
    }  # the span misses the evidence
    assert score("red 26-43.", {"type": "get_frames", "start": 40, "end": 50}, probe) == {
        "cue": 0,
        "span": 0,
        "look": 0,
    }
    assert score("green 26-43.", {"type": "answer", "content": "A"}, probe)["look"] == 0
    assert parse_reply('{"observation": "x", "thought": "green 26-43.", "action": {"type"') == (
        "",
        {},
    )  # cut short
    assert parse_reply('["not a turn"]') == ("", {})


def test_a_row_that_is_not_a_probe_is_passed_over(teacher_set: tuple) -> None:
    tasks_dir, _ = teacher_set
    task = next(t for t in read_jsonl(tasks_dir / "tasks.jsonl") if t["extra"]["template"] == "cue_digit_mcq")

    def row(turn: int, first: dict[str, Any]) -> dict[str, Any]:
        reply = json.dumps({"observation": "none", "thought": "look.", "action": first})
        messages = [{"role": "user", "content": [{"type": "text", "text": task["question"]}]},
                    {"role": "assistant", "content": [{"type": "text", "text": reply}]},
                    {"role": "user", "content": [{"type": "text", "text": "Frames:"}]},
                    {"role": "assistant", "content": [{"type": "text", "text": reply}]}]  # fmt: skip
        return {"id": "x/t2", "turn": turn, "messages": json.dumps(messages)}

    wide = {"type": "get_frames", "start": 0, "end": 60, "num": 8}
    assert probe_of(row(2, wide), task) is not None
    assert probe_of(row(3, wide), task) is None  # not the second turn
    assert probe_of(row(2, {"type": "get_frames", "start": 0, "end": 20, "num": 8}), task) is None  # narrow
    assert probe_of(row(2, {"type": "get_audio", "start": 0, "end": 30}), task) is None  # not a frame look
    pitch = next(
        t for t in read_jsonl(tasks_dir / "tasks.jsonl") if t["extra"]["template"] == "pitch_color_mcq"
    )
    assert probe_of(row(2, wide), pitch) is None  # no colour cue to search for


def test_a_tiny_agent_is_warmed_up_and_measured(teacher_set: tuple, tmp_path: Path, capsys) -> None:
    from recipes.testbed.model import build_testbed_agent
    from recipes.tiny_agent.model import corpus_texts

    tasks_dir, parquet = teacher_set
    init = build_testbed_agent(tmp_path / "init", corpus_texts([parquet]), seed=0, width=64, layers=1)
    out = tmp_path / "w_s0"
    assert main(["train", "--init", str(init), "--data", str(parquet), "--seed", "0", "--steps", "2",
                 "--out", str(out)]) == 0  # fmt: skip
    curve = json.loads((out / "warmup_loss.json").read_text())
    assert len(curve["loss"]) == 2 and curve["seed"] == 0
    assert not (out / "warmup_state.pt").exists()  # the resumable state goes once the model is saved
    assert end_loss(out) == pytest.approx(sum(curve["loss"]) / 2) and end_loss(tmp_path) is None
    assert main(["measure", "--model", str(out), "--probes", str(parquet), "--tasks", str(tasks_dir),
                 "--max-new", "4", "--train", str(parquet)]) == 0  # fmt: skip
    res = json.loads((out / "probe.json").read_text())
    assert res["seen"] == res["probes"]  # measured on its own training rows, every Observation was seen
    probes = load_probes(parquet, tasks_dir)
    assert res["probes"] == len(probes) == len(res["rows"])
    for row, probe in zip(res["rows"], probes, strict=True):
        observation = probe["reply"][: probe["reply"].index('", "thought":')]
        assert row["written"].startswith(
            observation
        )  # the teacher's Observation is given, then the model writes
    assert res["teacher"]["span holds"]["mean"] >= 0.8
    assert set(res["rates"]) == {"cue named", "span holds", "look meets"}
    capsys.readouterr()
    assert main(["train", "--init", str(init), "--data", str(parquet), "--seed", "0", "--out", str(out)]) == 0
    assert "done" in capsys.readouterr().out  # a finished run is not trained again


def _probe_file(folder: Path, spans: dict[str, list[int]]) -> None:
    rows = [{"video": v, "template": "cue_digit_mcq", "cue": 1, "span": s, "look": s}
            for v, ss in spans.items() for s in ss]  # fmt: skip
    from recipes.testbed.search_step import MEASURES, rate

    rates = {name: rate(rows, key) for name, key in MEASURES.items()}
    folder.mkdir(parents=True)
    (folder / "probe.json").write_text(json.dumps({"rows": rows, "rates": rates, "teacher": rates}))


def test_the_analysis_pairs_the_arms_by_seed(tmp_path: Path) -> None:
    for s, (a, b) in enumerate(
        [([1, 1, 0, 1], [0, 0, 0, 1]), ([1, 0, 1, 1], [1, 0, 0, 0]), ([1, 1, 1, 1], [0, 0, 0, 0])]
    ):
        _probe_file(tmp_path / f"many_s{s}", {"v1": a[:2], "v2": a[2:]})
        _probe_file(tmp_path / f"few_s{s}", {"v1": b[:2], "v2": b[2:]})
    res = analyse({"many": tmp_path / "many", "few": tmp_path / "few"}, [0, 1, 2], ("many", "few"))
    d = res["many - few: span holds"]
    assert d["per_seed"] == pytest.approx([0.5, 0.5, 1.0])
    t = d["t"]
    assert (
        t["mean"] == pytest.approx(2 / 3) and t["n"] == 3 and t["lo"] < t["mean"] < t["hi"]
    )  # seeds are the unit
    assert d["bootstrap"]["videos"] == 2 and d["bootstrap"]["lo"] <= d["t"]["mean"] <= d["bootstrap"]["hi"]
    assert res["rows"]["few"][1]["span holds"]["mean"] == 0.25
    assert res["floor"] == pytest.approx(
        0.25 * 0.75
    )  # the teacher rate is read from the first arm's first seed
    assert res["many - floor: span holds"]["mean"] == pytest.approx((0.75 + 0.75 + 1.0) / 3 - 0.25 * 0.75)
    # each arm's floor is read from its own teacher (here each file's teacher is its own rates)
    assert res["floors"] == pytest.approx({"many": 0.25 * 0.75, "few": 0.25 * 0.25})
    assert res["few - floor: span holds"]["mean"] == pytest.approx((0.25 + 0.25 + 0.0) / 3 - 0.25 * 0.25)
    figure(res, tmp_path / "fig.png")
    assert (tmp_path / "fig.png").stat().st_size > 1000
    text = table(res)
    assert (
        "| many | 0 | 1.000 [1.000, 1.000] | 0.750" in text
        and "| — |" in text
        and "+0.500, +0.500, +1.000" in text
    )
    assert "| teacher (many) | — | 1.000" in text and "| teacher (few) | — |" in text
    assert "a colour at random): many 0.188, few 0.062" in text


def test_a_span_is_compared_end_by_end_with_the_teachers() -> None:
    reply = json.dumps({"observation": "0-12 yellow, 24 red, 36 blue 2, 48-59 green", "thought": "red 12-36.",
                        "action": {"type": "get_frames", "start": 12, "end": 36, "num": 8}})  # fmt: skip
    probe = {"cue": "red", "reply": reply, "duration": 60.0}

    def turn(thought: str, action: dict[str, Any] | None = None) -> str:
        return json.dumps(
            {"observation": "x", "thought": thought, "action": action or {"type": "get_frames"}}
        )

    assert span_parts(reply, probe) == {"answers": 0, "left": 1, "right": 1, "exact": 1, "from_obs": 1}
    assert span_parts(turn("red 12-48."), probe) == {
        "answers": 0,
        "left": 1,
        "right": 0,
        "exact": 0,
        "from_obs": 1,
    }
    assert span_parts(turn("red 0-60."), probe)["from_obs"] == 1  # the file's edges count as known
    assert span_parts(turn("red 15-33."), probe)["from_obs"] == 0  # numbers the Observation never wrote
    assert span_parts(turn("blue 12-36."), probe) == {"answers": 0}  # not the cue: no span to compare
    assert (
        span_parts(turn("red 12-36, digit 2 at 36: D.", {"type": "answer", "content": "D"}), probe)["answers"]
        == 1
    )


def test_the_breakdown_tables_each_run_beside_the_teacher(teacher_set: tuple, tmp_path: Path) -> None:
    tasks_dir, parquet = teacher_set
    probes = load_probes(parquet, tasks_dir)
    run = tmp_path / "copy_s0"
    run.mkdir()
    rows = [{"id": p["id"], "written": p["reply"]} for p in probes]  # a run that writes the teacher's turns
    (run / "probe.json").write_text(json.dumps({"rows": rows}))
    text = breakdown({"copy": run}, probes)
    teacher, copy = (line for line in text.splitlines() if line.startswith(("| teacher", "| copy")))
    assert teacher.replace("teacher", "copy") == copy
    assert "| 1.000 | 1.000 | 1.000 | 1.000 |" in copy


def test_the_rope_base_is_set_without_changing_the_drawn_weights(teacher_set: tuple, tmp_path: Path) -> None:
    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig

    from recipes.testbed.model import build_testbed_agent
    from recipes.testbed.span_copy import load_agent, train
    from recipes.tiny_agent.model import corpus_texts

    _, parquet = teacher_set
    init = build_testbed_agent(tmp_path / "init", corpus_texts([parquet]), seed=0, width=64, layers=1)
    base = train(init, [parquet], 3, tmp_path / "base", steps=0)
    short = train(init, [parquet], 3, tmp_path / "short", steps=0, rope_theta=1e4)
    assert AutoConfig.from_pretrained(short).text_config.rope_parameters["rope_theta"] == 1e4
    assert AutoConfig.from_pretrained(base).text_config.rope_parameters["rope_theta"] == 1e6  # the init's
    a, b = (load_file(str(d / "model.safetensors")) for d in (base, short))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # the same seed, the same weights
    inv = load_agent(short)[0].model.rotary_emb.inv_freq
    head = 64 // AutoConfig.from_pretrained(short).text_config.num_attention_heads
    assert torch.allclose(inv, 1e4 ** (-torch.arange(0, head, 2, dtype=torch.float) / head))
    assert json.loads((short / "warmup_loss.json").read_text())["rope_theta"] == 1e4


def test_a_longer_warm_up_goes_on_from_a_kept_state(teacher_set: tuple, tmp_path: Path) -> None:
    import torch
    from safetensors.torch import load_file

    from recipes.testbed.model import build_testbed_agent
    from recipes.testbed.span_copy import kept_state, train
    from recipes.tiny_agent.model import corpus_texts

    _, parquet = teacher_set
    init = build_testbed_agent(tmp_path / "init", corpus_texts([parquet]), seed=0, width=64, layers=1)
    through = train(init, [parquet], 5, tmp_path / "through", steps=6, save_every=0)
    short = train(init, [parquet], 5, tmp_path / "short", steps=3, save_every=0, keep_state=True)
    assert kept_state(short).is_file() and not kept_state(through).exists()
    long = train(init, [parquet], 5, tmp_path / "long", steps=6, save_every=0, start_from=short)
    a, b = (load_file(str(d / "model.safetensors")) for d in (through, long))
    # the same steps as one run through
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    losses = {d: json.loads((d / "warmup_loss.json").read_text())["loss"] for d in (through, short, long)}
    assert losses[long] == losses[through] and losses[short] == losses[through][:3]
    assert kept_state(short).is_file() and not kept_state(long).exists()
    assert not [p for d in (through, short, long) for p in d.glob("*.pt")]  # no state left in a model folder
    with pytest.raises(ValueError, match="seed 5"):  # another seed's warm-up is refused
        train(init, [parquet], 6, tmp_path / "other", steps=6, start_from=short)
    with pytest.raises(FileNotFoundError, match="--keep-state"):
        train(init, [parquet], 5, tmp_path / "other", steps=6, start_from=through)
    # the settings are recorded with the curve, and a run with other settings does not go on from it
    assert {k: json.loads((short / "warmup_loss.json").read_text())[k] for k in SETTINGS} == {
        "batch_size": 16, "lr": 2e-3, "lr_warmup": 0, "cosine": False,
    }  # fmt: skip
    with pytest.raises(ValueError, match="lr 0.002"):
        train(init, [parquet], 5, tmp_path / "other", steps=6, start_from=short, settings={"lr": 1e-3})
    with pytest.raises(ValueError, match="cosine decay"):
        train(init, [parquet], 5, tmp_path / "other", steps=6, start_from=short, settings={"cosine": True})
    with pytest.raises(ValueError, match="unknown warm-up settings"):
        train(init, [parquet], 5, tmp_path / "other", steps=6, settings={"batch": 4})
    # a curve saved before the settings were options ran at their defaults: a run at the defaults goes on from it
    record = json.loads((short / "warmup_loss.json").read_text())
    (short / "warmup_loss.json").write_text(
        json.dumps({k: v for k, v in record.items() if k not in SETTINGS})
    )
    again = train(init, [parquet], 5, tmp_path / "again", steps=6, save_every=0, start_from=short)
    assert json.loads((again / "warmup_loss.json").read_text())["loss"] == losses[through]


def test_the_warm_up_settings_are_options_and_recorded(
    teacher_set: tuple, tmp_path: Path, warmup_rates: list[float]
) -> None:
    from recipes.testbed.model import build_testbed_agent
    from recipes.tiny_agent.model import corpus_texts
    from rl.sft.local import lr_at

    rates = warmup_rates

    _, parquet = teacher_set
    init = build_testbed_agent(tmp_path / "init", corpus_texts([parquet]), seed=0, width=64, layers=1)
    base = ["train", "--init", str(init), "--data", str(parquet), "--seed", "2", "--steps", "5"]
    assert main([*base, "--out", str(tmp_path / "default")]) == 0
    assert rates == [2e-3] * 5
    rates.clear()
    args = ["--batch-size", "2", "--lr", "1e-3", "--lr-warmup", "2", "--cosine"]
    assert main([*base, "--out", str(tmp_path / "set"), *args]) == 0
    assert rates == [lr_at(s, 5, 1e-3, 2, True) for s in range(5)] and rates[4] < rates[3] < rates[2]
    default, changed = (
        json.loads((tmp_path / d / "warmup_loss.json").read_text()) for d in ("default", "set")
    )
    assert {k: changed[k] for k in SETTINGS} == {"batch_size": 2, "lr": 1e-3, "lr_warmup": 2, "cosine": True}
    assert {k: default[k] for k in SETTINGS} == {
        "batch_size": 16,
        "lr": 2e-3,
        "lr_warmup": 0,
        "cosine": False,
    }
    assert changed["loss"][0] != default["loss"][0]  # a batch of 2 turns, not 16
