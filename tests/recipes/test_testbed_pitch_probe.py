"""The testbed's pitch probe (recipes/testbed/pitch_probe.py): looks that hold the beep, the probe's fit, and a
run on a tiny agent's encoder that reads each beep from the audio the environment serves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from recipes.testbed.pitch_probe import PITCHES, WINDOW_S, beeps, fit_probe, main, window


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from envs.synth import generate_benchmark

    root = tmp_path_factory.mktemp("pitch")
    for name, seed in (("train", 21), ("test", 22)):
        generate_benchmark(root / name, seed=seed, n_videos=1, durations=[60.0], config={"level": "search"},
                           split="test")  # fmt: skip
    return root / "train", root / "test"


def test_every_beep_is_found_once_and_its_look_holds_it(sets: tuple[Path, Path]) -> None:
    found = beeps(sets[0] / "tasks.jsonl")
    assert len(found) == 4 and sorted(b["pitch"] for b in found) == sorted(PITCHES)  # one tone per field
    for beep in found:
        start, end = window(beep, 60.0)
        assert isinstance(start, int) and 0 <= start and end <= 60 and end - start == WINDOW_S
        assert start <= beep["start"] and beep["end"] <= end
    assert window({"start": 0.2, "end": 0.7}, 60.0) == (0, 4) and window(
        {"start": 59.1, "end": 59.6}, 60.0
    ) == (56, 60)


def test_the_probe_learns_separable_classes_and_not_noise() -> None:
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(len(PITCHES)), 50)
    centres = rng.normal(size=(len(PITCHES), 16)) * 3
    x = centres[y] + rng.normal(size=(len(y), 16))
    predict = fit_probe(x[::2], y[::2])
    assert (predict(x[1::2]) == y[1::2]).mean() > 0.95
    noise = rng.normal(size=(len(y), 16))
    held = (fit_probe(noise[::2], y[::2])(noise[1::2]) == y[1::2]).mean()
    assert held < 0.5  # four classes: chance is 0.25


def test_a_tiny_agents_audio_tokens_are_probed_on_served_looks(
    sets: tuple[Path, Path], tmp_path: Path
) -> None:
    import json

    from omniagent.tiny_model import build_tiny_thinker

    build_tiny_thinker(seed=0, out_dir=tmp_path / "agent")
    out = tmp_path / "out"
    args = [
        "--model",
        str(tmp_path / "agent"),
        "--train",
        str(sets[0]),
        "--test",
        str(sets[1]),
        "--out",
        str(out),
    ]
    assert main(args) == 0
    res = json.loads((out / "result.json").read_text())
    assert res["train_beeps"] == 4 and res["test"]["n"] == 4 and res["test"]["videos"] == 1
    assert res["train_accuracy"] == 1.0  # four beeps, 4 classes: a linear probe fits them
    assert {r["pitch"] for r in res["rows"]} == set(PITCHES) and set(res["by_pitch"]) == set(PITCHES)
    assert main(["--table", f"tiny={out}"]) == 0
    assert main(args) == 0  # a second call reads the result back
