"""recipes.testbed.seed_contrast: paired span-holds contrasts over seeds from probe files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recipes.testbed import seed_contrast


def _run(
    root: Path, arm: str, seed: int, spans: list[int], seen: list[int], ids: list[str] | None = None
) -> None:
    folder = root / f"{arm}_s{seed}"
    folder.mkdir(parents=True)
    ids = ids or [f"p{i}" for i in range(len(spans))]
    rows = [{"id": i, "span": s, "seen": n} for i, s, n in zip(ids, spans, seen, strict=True)]
    (folder / "field_probe.json").write_text(json.dumps({"rows": rows}))


def test_a_contrast_is_the_paired_difference_per_seed(tmp_path: Path) -> None:
    # arm a holds 3, 2, 4 of four probes in seeds 0-2; arm b 1, 2, 1
    for seed, (a, b) in enumerate(
        [([1, 1, 1, 0], [1, 0, 0, 0]), ([1, 1, 0, 0], [0, 1, 0, 1]), ([1] * 4, [0, 0, 1, 0])]
    ):
        _run(tmp_path, "a", seed, a, [0] * 4)
        _run(tmp_path, "b", seed, b, [0] * 4)
    res = seed_contrast.contrast(tmp_path / "a", tmp_path / "b", [0, 1, 2])
    assert res["per_seed"] == pytest.approx([0.5, 0.0, 0.75])
    assert res["t"]["mean"] == pytest.approx(1.25 / 3)
    assert res["t"]["lo"] < res["t"]["mean"] < res["t"]["hi"]
    assert res["probes"] == 4
    row = seed_contrast.table_row(res)
    assert row.startswith("| a − b: span holds | +0.500, +0.000, +0.750 |")


def test_unseen_only_drops_every_probe_either_arm_has_seen(tmp_path: Path) -> None:
    # p0 is seen by arm a's seed 1 only, p3 by arm b's seed 0 only: both leave every run's score
    _run(tmp_path, "a", 0, [1, 1, 0, 1], [0, 0, 0, 0])
    _run(tmp_path, "a", 1, [1, 1, 0, 1], [1, 0, 0, 0])
    _run(tmp_path, "b", 0, [0, 1, 0, 0], [0, 0, 0, 1])
    _run(tmp_path, "b", 1, [0, 1, 0, 0], [0, 0, 0, 0])
    res = seed_contrast.contrast(tmp_path / "a", tmp_path / "b", [0, 1], unseen_only=True)
    # left: p1 and p2 in every run; a holds 1 of 2, b holds 1 of 2
    assert res["probes"] == 2
    assert res["per_seed"] == pytest.approx([0.0, 0.0])
    whole = seed_contrast.contrast(tmp_path / "a", tmp_path / "b", [0, 1])
    assert whole["per_seed"] == pytest.approx([0.5, 0.5])
    assert "(2 probes no run has seen)" in seed_contrast.table_row(res)


def test_misuse_is_refused_with_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _run(tmp_path, "a", 0, [1, 0], [0, 0])
    _run(tmp_path, "a", 1, [1, 1], [0, 0])
    _run(tmp_path, "b", 0, [1, 0], [0, 0], ids=["q0", "q1"])
    _run(tmp_path, "b", 1, [0, 0], [0, 0], ids=["q0", "q1"])
    with pytest.raises(ValueError, match="do not hold the same probes"):
        seed_contrast.contrast(tmp_path / "a", tmp_path / "b", [0, 1], unseen_only=True)
    # another probe set is fine without --unseen-only (fresh against training-video probes)
    assert seed_contrast.contrast(tmp_path / "a", tmp_path / "b", [0, 1])["per_seed"] == pytest.approx(
        [0.0, 1.0]
    )
    with pytest.raises(SystemExit):
        seed_contrast.main(["--a", str(tmp_path / "a"), "--b", str(tmp_path / "c"), "--seeds", "0", "1"])
    assert "c_s0/field_probe.json: no probe file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        seed_contrast.main(["--a", str(tmp_path / "a"), "--b", str(tmp_path / "b"), "--seeds", "0"])
    assert "at least two" in capsys.readouterr().err


def test_the_command_prints_the_row_and_writes_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for seed, b in enumerate([[0, 1], [1, 1]]):
        _run(tmp_path, "a", seed, [1, 1], [0, 0])
        _run(tmp_path, "b", seed, b, [0, 0])
    out = tmp_path / "c.json"
    assert seed_contrast.main(["--a", str(tmp_path / "a"), "--b", str(tmp_path / "b"), "--seeds", "0", "1",
                               "--out", str(out)]) == 0  # fmt: skip
    assert capsys.readouterr().out.startswith("| a − b: span holds | +0.500, +0.000 | +0.250 [")
    assert json.loads(out.read_text())["per_seed"] == [0.5, 0.0]
