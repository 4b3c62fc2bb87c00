"""The trained tiny agent shipped in the package (``--model tiny``): it is what its manifest says,
a damaged or partial copy fails with a message naming what is wrong, it loads and plays an episode,
and ``tiny-random`` is still the random model the plumbing tests rely on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from omniagent import tiny_agent
from omniagent.tiny_agent import (
    ASSET_DIR,
    MANIFEST,
    ProvenanceError,
    ShippedAgentError,
    recipe_fingerprints,
    ship_agent,
    shipped_agent_dir,
    verify_recipe,
    verify_weights,
    write_manifest,
)


def _copy(tmp_path: Path, skip: str = "") -> Path:
    dest = tmp_path / "agent"
    dest.mkdir()
    for f in ASSET_DIR.iterdir():
        if f.name != skip:
            shutil.copyfile(f, dest / f.name)
    return dest


def _fake_recipe(root: Path, messages: list[str], losses: list[float]) -> Path:
    """The recipe outputs the fingerprints read: per-turn rows, the untrained agent's tokenizer and
    the SFT log (progress-bar noise included, as the real log has)."""
    import pandas as pd

    (root / "synth_train").mkdir(parents=True)
    (root / "synth_train" / "tasks.jsonl").write_text(
        "".join(json.dumps({"id": f"t{i}"}) + "\n" for i in range(3))
    )
    (root / "sft_data").mkdir()
    (root / "init").mkdir()
    (root / "logs").mkdir()
    frame = pd.DataFrame({"messages": messages, "blobs": [[b"\x00media"]] * len(messages)})
    frame.to_parquet(root / "sft_data" / "train.parquet")
    shutil.copyfile(ASSET_DIR / "tokenizer.json", root / "init" / "tokenizer.json")
    lines = ["+ python rl/train_sft.py ...", "Loading weights: 100%|####| 128/128"]
    lines += [json.dumps({"warmup_step": 25 * (i + 1), "loss": 6.0 - i, "s": i}) for i in range(3)]
    lines += [json.dumps({"step": 25 * (i + 1), "loss": x}) for i, x in enumerate(losses[::25])]
    lines += [json.dumps({"samples": len(messages), "params": {}, "losses": losses}), "Writing model shards"]
    (root / "logs" / "sft.log").write_text("\n".join(lines) + "\n")
    return root


ROWS = [
    json.dumps([{"role": "assistant", "content": [{"type": "text", "text": f"turn {i}"}]}]) for i in range(4)
]
LOSSES = [4.0 - 0.01 * i for i in range(100)]


def test_shipped_files_are_what_the_manifest_records() -> None:
    manifest = verify_weights(ASSET_DIR)
    assert shipped_agent_dir() == ASSET_DIR
    assert set(manifest["files"]) == {p.name for p in ASSET_DIR.iterdir()} - {MANIFEST}  # every file
    assert {"model.safetensors", "tokenizer.json", "config.json"} <= set(manifest["files"])
    for name, entry in manifest["files"].items():
        assert entry["bytes"] == (ASSET_DIR / name).stat().st_size and len(entry["sha256"]) == 64
    assert manifest["produced_by"] == "python -m recipes.tiny_agent" and "out" not in manifest["recipe_args"]
    assert manifest["recipe_args"]["steps"] > 0 and manifest["recipe_args"]["seed"] == 0
    prints = manifest["fingerprints"]
    assert prints["sft_data"]["rows"] == prints["sft_log"]["samples"] > 0  # one SFT sample per row
    # training does not change the tokenizer the build stage made
    assert prints["init"]["tokenizer_sha256"] == manifest["files"]["tokenizer.json"]["sha256"]


def test_a_tampered_copy_fails_verification(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    assert verify_weights(copy)["files"] == verify_weights(ASSET_DIR)["files"]
    data = bytearray((copy / "model.safetensors").read_bytes())
    data[-1] ^= 0x01  # one bit of one weight
    (copy / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ProvenanceError, match=r"model\.safetensors has sha256 .* the manifest says") as err:
        verify_weights(copy)
    assert len(err.value.mismatches) == 1  # the tokenizer still matches
    shutil.copyfile(ASSET_DIR / "model.safetensors", copy / "model.safetensors")
    (copy / "chat_template.jinja").write_text("{{ messages }}")  # behaviour without a weight changed
    with pytest.raises(ProvenanceError, match=r"chat_template\.jinja has sha256"):
        verify_weights(copy)
    (copy / "tokenizer.json").unlink()
    with pytest.raises(ProvenanceError, match=r"tokenizer\.json is missing"):
        verify_weights(copy)
    (copy / MANIFEST).unlink()
    with pytest.raises(ShippedAgentError, match="no manifest.json.*python -m recipes.tiny_agent"):
        verify_weights(copy)


def test_a_folder_without_tokenizer_names_it_and_the_command(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tiny_agent, "ASSET_DIR", _copy(tmp_path, skip="tokenizer.json"))
    with pytest.raises(ShippedAgentError) as err:
        shipped_agent_dir()
    msg = str(err.value)
    assert "tokenizer.json" in msg and "python -m recipes.tiny_agent --out runs/tiny_agent" in msg
    assert "--stages ship" in msg and "model.safetensors" not in msg  # names only what is missing
    assert isinstance(err.value, OSError)  # the CLI reports it as "backend could not start" (exit 3)


def test_manifest_fingerprints_a_rerun_reproduces(tmp_path: Path) -> None:
    out = _fake_recipe(tmp_path / "run", ROWS, LOSSES)
    agent = _copy(tmp_path)
    path = write_manifest(agent, out, {"out": out, "steps": 100, "durations": (60.0,), "stages": ["sft"]})
    manifest = json.loads(path.read_text())
    assert manifest["recipe_args"] == {"durations": [60.0], "steps": 100}
    log = manifest["fingerprints"]["sft_log"]
    assert log["warmup_losses"] == [[25, 6.0], [50, 5.0], [75, 4.0]] and log["steps"] == 100
    assert log["first_losses"] == LOSSES[:5] and log["final_mean_loss"] == pytest.approx(3.255, abs=1e-3)
    assert manifest["fingerprints"]["train_tasks"]["tasks"] == 3
    assert verify_recipe(agent, out) == ["init", "sft_data", "sft_log", "train_tasks"]

    # another row order, other media bytes, losses within float noise, a run that stopped early
    rerun = _fake_recipe(tmp_path / "rerun", ROWS[::-1], [x + 0.001 for x in LOSSES[:30]])
    assert verify_recipe(agent, rerun) == ["init", "sft_data", "sft_log", "train_tasks"]
    (rerun / "logs" / "sft.log").unlink()
    assert verify_recipe(agent, rerun) == ["init", "sft_data", "train_tasks"]  # stopped before SFT

    changed = _fake_recipe(tmp_path / "changed", [*ROWS[:3], ROWS[3].replace("turn 3", "turn 9")], LOSSES)
    with pytest.raises(ProvenanceError, match="sft_data") as err:
        verify_recipe(agent, changed)
    assert len(err.value.mismatches) == 1
    drifted = _fake_recipe(tmp_path / "drifted", ROWS, [x + 0.5 for x in LOSSES])
    with pytest.raises(ProvenanceError, match="sft_log.step_losses.*sft_log.first_losses"):
        verify_recipe(agent, drifted)
    with pytest.raises(ValueError, match="has none of"):
        verify_recipe(agent, tmp_path / "empty")

    # the event-caption phase (--event-steps) has its own log, compared the same way
    phase2 = "\n".join(json.dumps({"step": 50 * (i + 1), "loss": 1.0 - 0.1 * i}) for i in range(3))
    (out / "logs" / "sft_events.log").write_text(phase2 + "\n")
    agent2 = write_manifest(agent, out, {"steps": 100, "event_steps": 150}).parent
    assert verify_recipe(agent2, out) == ["events_log", "init", "sft_data", "sft_log", "train_tasks"]
    (rerun / "logs" / "sft_events.log").write_text(phase2.replace('"loss": 1.0', '"loss": 1.3') + "\n")
    with pytest.raises(ProvenanceError, match="events_log.step_losses"):
        verify_recipe(agent2, rerun)
    assert recipe_fingerprints(tmp_path / "empty") == {}


def test_ship_replaces_the_folder_with_the_recipe_agent_and_its_manifest(tmp_path: Path) -> None:
    out = _fake_recipe(tmp_path / "run", ROWS, LOSSES)
    shutil.copytree(ASSET_DIR, out / "agent", ignore=shutil.ignore_patterns(MANIFEST))
    dest = tmp_path / "pkg" / "tiny_agent"
    dest.mkdir(parents=True)
    (dest / "stale.bin").write_bytes(b"old")
    assert ship_agent(out, {"steps": 100}, dest) == dest
    assert not (dest / "stale.bin").exists() and verify_weights(dest)["recipe_args"] == {"steps": 100}
    assert sorted(p.name for p in dest.iterdir()) == sorted(p.name for p in ASSET_DIR.iterdir())
    (out / "agent" / "tokenizer.json").unlink()
    with pytest.raises(ShippedAgentError, match="tokenizer.json"):
        ship_agent(out, {"steps": 100}, dest)
    verify_weights(dest)  # a failed ship leaves the shipped folder as it was


@pytest.mark.slow
def test_model_tiny_is_the_shipped_agent_and_plays_an_episode(
    tmp_path: Path, video_path: Path, capsys
) -> None:
    from safetensors.torch import load_file

    from envs.env import OmniVideoEnv
    from omniagent import run as cli
    from omniagent.episode import run_episode
    from omniagent.policy import make_policy
    from omniagent.trajectory import Trajectory

    shipped = load_file(str(ASSET_DIR / "model.safetensors"))
    name = next(k for k in shipped if k.endswith("embed_tokens.weight"))
    agent = make_policy("transformers", model="tiny", device="cpu", max_new_tokens=12, seed=0)
    random = make_policy("transformers", model="tiny-random", tiny_dir=str(tmp_path / "rnd"), device="cpu")
    try:
        weights, noise = agent.model.state_dict(), random.model.state_dict()
        assert weights[name].equal(shipped[name])  # the shipped weights, not a fresh initialisation
        assert weights[name].shape != noise[name].shape or not weights[name].equal(noise[name])
        assert (tmp_path / "rnd" / "BUILD_OK").is_file()  # tiny-random: omniagent.tiny_model's build
        env = OmniVideoEnv(limits={"max_side": 64})
        options = {"media": str(video_path), "question": "Which beep is higher?", "task_type": "mcq",
                   "choices": ["first", "second"], "answer": "B", "max_turns": 1}  # fmt: skip
        traj = run_episode(env, agent, options)
        env.close()
    finally:
        agent.close()
        random.close()
    assert traj.num_turns == 1 and traj.stop_reason in ("answered", "turn_budget")
    turn = traj.turns[0]
    assert turn.raw_text is not None and 1 <= turn.completion_tokens <= 12 and turn.context_tokens > 100

    out = tmp_path / "t.json"
    code = cli.main([str(video_path), "Which beep is higher?", "--choices", "first|second",
                     "--model", "tiny", "--max-turns", "1", "--max-new-tokens", "12", "--device", "cpu",
                     "--out", str(out)])  # fmt: skip
    assert code == 0 and "shipped with the package" in capsys.readouterr().out
    assert Trajectory.load_json(out).meta["run"]["model"] == "tiny"


SCHEMA_RULES_OUT = ("format_", "action_", "time_out_of_range", "num_invalid", "no_")


@pytest.mark.slow
def test_constrained_decoding_makes_every_turn_of_the_shipped_agent_parse(tasks) -> None:
    """Under the env's turn schema the agent's turns never fail for a reason the schema rules out,
    and the last turn of the budget is an answer in the task's format (only a reversed interval,
    which JSON schema cannot express, may still be refused)."""
    from envs.env import OmniVideoEnv
    from omniagent.episode import run_episode
    from omniagent.policy import make_policy

    agent = make_policy("transformers", model="tiny", device="cpu", max_new_tokens=384, constrained=True)
    picked = {t.task_type: t for t in tasks if t.task_type in ("mcq", "num", "tr", "size")}
    env = OmniVideoEnv(limits={"max_frames": 8, "max_clip_s": 10, "max_audio_s": 30})
    try:
        trajs = [run_episode(env, agent, t.env_options(max_turns=3)) for t in picked.values()]
    finally:
        env.close()
        agent.close()
    assert len(trajs) == 4
    for traj in trajs:
        for rec in traj.turns:
            assert not (rec.error or "").startswith(SCHEMA_RULES_OUT), (traj.task_type, rec.error)
            if rec.error == "answer_invalid":
                assert traj.task_type == "tr" and "start <= end" in rec.error_message
        assert traj.turns[-1].action_type == "answer"
        assert traj.stop_reason == "answered" or traj.task_type == "tr"
