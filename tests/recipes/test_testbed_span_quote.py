"""The span quote probe (recipes/testbed/span_quote.py): a written turn scored against the quote-form teacher (exact
span, quote exact, and span_copy's three measures), runs scored from their written turns, and the paired analysis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testkit import search_teacher_parquet

from recipes.testbed.span_copy import load_probes
from recipes.testbed.span_quote import (
    QUOTE_MEASURES,
    main,
    overlap,
    quote_of,
    rescore,
    same_turns,
    score_turn,
)

OBS = "0-12 yellow, 24 red, 36 blue 2, 48-59 green"


def _turn(thought: str, start: int = 12, end: int = 36) -> str:
    return json.dumps({"observation": OBS, "thought": thought,
                       "action": {"type": "get_frames", "start": start, "end": end, "num": 8}})  # fmt: skip


PROBE = {
    "cue": "red",
    "evidence": [[26.0, 27.5]],
    "reply": _turn("0-12 yellow, 24 red, 36 blue 2; red 12-36."),
}


@pytest.fixture(scope="module")
def quote_set(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A two-video search-level set and the teacher's episodes on it with and without the quote, as SFT rows."""
    from envs.synth import generate_benchmark

    root = tmp_path_factory.mktemp("span_quote")
    generate_benchmark(
        root / "set", seed=12, n_videos=2, durations=[60.0], config={"level": "search"}, split="test"
    )
    teacher = search_teacher_parquet(root / "set", root / "teacher", n_samples=2, span_quote=True)
    plain = search_teacher_parquet(root / "set", root / "plain", n_samples=2, span_quote=False)
    return root / "set", teacher, plain


def test_the_quote_form_teacher_keeps_the_same_turns_and_observations(
    quote_set: tuple, tmp_path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    _, quote, plain = quote_set
    n = same_turns(plain, quote)
    assert n == pq.read_metadata(str(quote)).num_rows > 0
    rows = pq.read_table(str(quote)).to_pylist()
    messages = json.loads(rows[1]["messages"])
    reply = json.loads(messages[-1]["content"][0]["text"])
    messages[-1]["content"][0]["text"] = json.dumps({**reply, "observation": "0 red"})
    rows[1]["messages"] = json.dumps(messages)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "changed.parquet")
    with pytest.raises(ValueError, match="Observations differ"):
        same_turns(plain, tmp_path / "changed.parquet")
    pq.write_table(pa.Table.from_pylist(rows[1:]), tmp_path / "fewer.parquet")
    with pytest.raises(ValueError, match="different turns"):
        same_turns(plain, tmp_path / "fewer.parquet")


def test_a_turn_is_scored_on_its_exact_span_and_its_quote() -> None:
    assert (
        quote_of("0-12 yellow, 24 red; red 12-36.") == "0-12 yellow, 24 red" and quote_of("red 12-36.") == ""
    )
    assert score_turn(PROBE["reply"], PROBE) == {"cue": 1, "span": 1, "look": 1, "exact": 1, "quote": 1}
    # today's Thought: the span without the quote
    assert score_turn(_turn("red 12-36."), PROBE) == {"cue": 1, "span": 1, "look": 1, "exact": 1, "quote": 0}
    # a quote that drops a clause, then the right span
    assert score_turn(_turn("24 red, 36 blue 2; red 12-36."), PROBE)["quote"] == 0
    # the right quote, then a span one end off: it still holds the evidence, but it is not the teacher's
    off = score_turn(_turn("0-12 yellow, 24 red, 36 blue 2; red 12-48."), PROBE)
    assert off == {"cue": 1, "span": 1, "look": 1, "exact": 0, "quote": 1}
    # the teacher's span under another colour is not exact
    assert score_turn(_turn("0-12 yellow, 24 red, 36 blue 2; blue 12-36."), PROBE)["exact"] == 0
    assert score_turn("not json", PROBE) == {"cue": 0, "span": 0, "look": 0, "exact": 0, "quote": 0}


def _write(run: Path, rows: list[dict]) -> None:
    run.mkdir(parents=True)
    (run / "quote_probe.json").write_text(json.dumps({"model": str(run), "seen": 0, "rows": rows}))


def _rows(probes: list[dict], copy: int) -> list[dict]:
    """Written turns: the first ``copy`` probes' as the teacher wrote them, the rest without the quote."""
    out = []
    for i, p in enumerate(probes):
        reply = json.loads(p["reply"])
        if i >= copy:
            reply["thought"] = reply["thought"].rpartition("; ")[2]
        out.append(
            {"id": p["id"], "video": p["video"], "template": p["template"], "written": json.dumps(reply)}
        )
    return out


def test_runs_are_scored_and_the_arms_paired_by_seed(quote_set: tuple, tmp_path: Path, capsys) -> None:
    tasks_dir, parquet, _ = quote_set
    probes = load_probes(parquet, tasks_dir)
    assert len(probes) >= 4 and all("; " in json.loads(p["reply"])["thought"] for p in probes)

    n = len(probes)
    for s, copy in enumerate((n, n - 2)):
        _write(tmp_path / f"quote_s{s}", _rows(probes, copy))
        _write(tmp_path / f"plain_s{s}", _rows(probes, 0))
    runs = [a for s in (0, 1) for arm in ("quote", "plain") for a in ("--run", str(tmp_path / f"{arm}_s{s}"))]
    assert main(["score", *runs, "--probes", str(parquet), "--tasks", str(tasks_dir)]) == 0
    scored = json.loads((tmp_path / "quote_s0" / "quote.json").read_text())
    assert set(scored["rates"]) == set(QUOTE_MEASURES)
    assert scored["teacher"]["quote exact"]["mean"] == 1.0 and scored["teacher"]["exact span"]["mean"] == 1.0
    assert scored["rates"]["quote exact"]["mean"] == 1.0
    plain = json.loads((tmp_path / "plain_s1" / "quote.json").read_text())
    assert plain["rates"]["quote exact"]["mean"] == 0.0 and plain["rates"]["exact span"]["mean"] == 1.0
    capsys.readouterr()
    fig = tmp_path / "fig.png"
    assert main(["analyse", "--arm", f"quote={tmp_path / 'quote'}", "--arm", f"plain={tmp_path / 'plain'}",
                 "--seeds", "0", "1", "--primary", "quote-plain", "--figure", str(fig), "--plot", "quote exact"]) == 0  # fmt: skip
    text = capsys.readouterr().out
    assert "quote - plain: quote exact | +1.000, " in text and f"{(n - 2) / n:+.3f}" in text
    assert "quote - plain: exact span | +0.000, +0.000" in text and fig.stat().st_size > 1000
    # written turns that are not the probes' are refused
    _write(tmp_path / "short_s0", _rows(probes, 0)[1:])
    with pytest.raises(ValueError, match="not the probes"):
        rescore(tmp_path / "short_s0", probes)


def test_overlap_counts_what_a_run_takes_from_its_own_observation(quote_set: tuple) -> None:
    tasks_dir, parquet, _ = quote_set
    probes = load_probes(parquet, tasks_dir)
    assert len({json.loads(p["reply"])["observation"] for p in probes}) >= 2
    copied = overlap([{"id": p["id"], "written": p["reply"]} for p in probes], probes)
    assert copied["quote clauses"]["own"] == 1.0 and copied["quote numbers"]["own"] == 1.0
    assert copied["quote clauses"]["other"] < 1.0 and copied["quote clauses"]["n"] >= len(probes)
    # every probe written as the next one: the quote is someone else's, so its own Observation holds fewer parts
    shifted = [
        {"id": p["id"], "written": probes[(i + 1) % len(probes)]["reply"]} for i, p in enumerate(probes)
    ]
    moved = overlap(shifted, probes)
    assert moved["quote clauses"]["own"] < copied["quote clauses"]["own"]
    plain = [{"id": p["id"], "written": _turn("red 12-36.")} for p in probes]
    assert overlap(plain, probes)["quote numbers"] == {"own": None, "other": None, "n": 0}


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def _same(a: dict, b: dict) -> bool:
    import torch

    return a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_a_long_warmup_keeps_the_models_shorter_warmups_end_with(quote_set: tuple, tmp_path: Path) -> None:
    from recipes.testbed import long_warmup
    from recipes.testbed.model import build_testbed_agent
    from recipes.testbed.span_copy import train
    from recipes.tiny_agent.model import corpus_texts

    _, parquet, _ = quote_set
    init = build_testbed_agent(tmp_path / "init", corpus_texts([parquet]), seed=0, width=64, layers=1)
    straight = {k: _weights(train(init, [parquet], 1, tmp_path / f"straight{k}", steps=k)) for k in (2, 4)}
    out = tmp_path / "long_s1"
    folders = long_warmup.train(init, [parquet], 1, out, steps=4, keep_every=2)
    assert [f.name for f in folders] == ["step_2", "step_4"] and long_warmup.kept_steps(out) == [2, 4]
    assert _same(_weights(folders[0]), straight[2]) and _same(_weights(folders[1]), straight[4])
    curves = [json.loads((f / "warmup_loss.json").read_text())["loss"] for f in folders]
    assert len(curves[0]) == 2 and curves[1][:2] == curves[0] and len(curves[1]) == 4
    # a run stopped after its first kept model goes on from its saved state
    again = tmp_path / "again_s1"
    long_warmup.train(init, [parquet], 1, again, steps=2, keep_every=2)
    long_warmup.train(init, [parquet], 1, again, steps=4, keep_every=2, save_every=1)
    assert _same(_weights(long_warmup.kept(again, 4)), straight[4])
    # a kept model lost after the state was saved is written again from that state, without a step
    for f in long_warmup.kept(again, 4).iterdir():
        f.unlink()
    long_warmup.kept(again, 4).rmdir()
    long_warmup.train(init, [parquet], 1, again, steps=4, keep_every=2)
    assert _same(_weights(long_warmup.kept(again, 4)), straight[4])
    # a state past a missing kept model is refused, and so is a step count the kept models do not divide
    (long_warmup.kept(again, 2) / "warmup_loss.json").unlink()
    with pytest.raises(RuntimeError, match="past step 2"):
        long_warmup.train(init, [parquet], 1, again, steps=4, keep_every=2)
    with pytest.raises(ValueError, match="must divide"):
        long_warmup.train(init, [parquet], 1, again, steps=5, keep_every=2)


def test_the_curve_gives_each_seeds_rates_at_each_kept_step(quote_set: tuple, tmp_path: Path, capsys) -> None:
    from recipes.testbed import long_warmup

    tasks_dir, parquet, _ = quote_set
    probes = load_probes(parquet, tasks_dir)
    n = len(probes)
    copies = {0: {1200: 0, 2400: n}, 1: {1200: 1, 2400: n - 1}}
    for seed, by_step in copies.items():
        for step, copy in by_step.items():
            folder = long_warmup.kept(tmp_path / f"long_s{seed}", step)
            _write(folder, _rows(probes, copy))
            (folder / "warmup_loss.json").write_text(json.dumps({"loss": [1.0] * (step - 100) + [0.5] * 100}))
            assert (
                main(["score", "--run", str(folder), "--probes", str(parquet), "--tasks", str(tasks_dir)])
                == 0
            )
    capsys.readouterr()
    fig = tmp_path / "curve.png"
    assert long_warmup.main(["curve", "--prefix", str(tmp_path / "long"), "--seeds", "0", "1",
                             "--figure", str(fig), "--out", str(tmp_path / "curve.json")]) == 0  # fmt: skip
    text = capsys.readouterr().out
    assert "| 0 | 1200 | 0.000 [0.000, 0.000] | 1.000 [1.000, 1.000] |" in text
    assert "| 0 | 2400 | 1.000 [1.000, 1.000] |" in text and f"| 1 | 2400 | {(n - 1) / n:.3f} " in text
    assert text.count("| 0.500 |") == 4 and fig.stat().st_size > 1000
    res = json.loads((tmp_path / "curve.json").read_text())
    assert res["steps"] == [1200, 2400] and res["teacher"]["quote exact"]["mean"] == 1.0
    # seeds that kept different steps are not put on one curve
    _write(long_warmup.kept(tmp_path / "long_s1", 3600), _rows(probes, 0))
    main(["score", "--run", str(long_warmup.kept(tmp_path / "long_s1", 3600)), "--probes", str(parquet),
          "--tasks", str(tasks_dir)])  # fmt: skip
    with pytest.raises(ValueError, match="different steps"):
        long_warmup.curve(tmp_path / "long", [0, 1])


def test_the_seen_split_parts_the_probes_the_training_rows_hold(
    quote_set: tuple, tmp_path: Path, capsys
) -> None:
    from recipes.testbed import long_warmup

    tasks_dir, parquet, _ = quote_set
    probes = load_probes(parquet, tasks_dir)
    n = len(probes)
    for name, held in (("two", 2), ("none", 0)):
        rows = _rows(probes, 2)  # the first two quote the teacher's Observation, the rest do not
        for i, row in enumerate(rows):
            row["seen"] = int(i < held)
        _write(tmp_path / name, rows)
        assert (
            main(
                ["score", "--run", str(tmp_path / name), "--probes", str(parquet), "--tasks", str(tasks_dir)]
            )
            == 0
        )
    split = long_warmup.seen_split(tmp_path / "two")
    assert split["seen"] == {"probes": 2, "exact span": 1.0, "quote exact": 1.0}
    assert split["unseen"] == {"probes": n - 2, "exact span": 1.0, "quote exact": 0.0}
    capsys.readouterr()
    assert (
        long_warmup.main(["seen", "--run", f"held={tmp_path / 'two'}", "--run", str(tmp_path / "none")]) == 0
    )
    text = capsys.readouterr().out
    assert f"| held | 2 / {n - 2} | 1.000 / 1.000 | 1.000 / 0.000 |" in text
    assert f"| none | 0 / {n} | — / 1.000 | — / {2 / n:.3f} |" in text
