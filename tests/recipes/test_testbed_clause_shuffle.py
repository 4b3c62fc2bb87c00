"""The clause shuffle (recipes/testbed/clause_shuffle.py): probes whose Observation lists the same field clauses in an
order that moves the cue's, and which clause a run's span then follows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from testkit import search_teacher_parquet

from recipes.testbed.clause_shuffle import FOLLOWS, main, shuffled_observation
from recipes.testbed.field_clauses import field_spans
from recipes.testbed.field_grid import WRITTEN
from recipes.testbed.span_copy import load_probes, observation_of_row

OBSERVATION = "red 8-34, yellow 42-60, green 25-51, blue 0-17"


def _spans(observation: str) -> dict:
    return field_spans(json.dumps({"observation": observation}))


def test_a_shuffle_keeps_every_clause_and_moves_the_cues() -> None:
    rng = np.random.default_rng(0)
    places = []
    for _ in range(60):
        new = shuffled_observation(OBSERVATION, "blue", rng)
        assert sorted(new.split(", ")) == sorted(OBSERVATION.split(", "))
        places.append(list(_spans(new)).index("blue"))
    # never where it stood (last), and each other place drawn
    assert set(places) == {0, 1, 2}
    # a cue the look has no clause for may stay anywhere
    stays = {shuffled_observation(OBSERVATION, "purple", rng).split(", ")[0] for _ in range(60)}
    assert stays == set(OBSERVATION.split(", "))
    with pytest.raises(ValueError, match="not the look's field clauses"):
        shuffled_observation("0-17 blue, 25 yellow, 34-42 red", "blue", rng)
    with pytest.raises(ValueError, match="single clause"):
        shuffled_observation("blue 0-17", "blue", rng)


@pytest.fixture(scope="module")
def teacher(tmp_path_factory) -> tuple[Path, Path]:
    from envs.synth import generate_benchmark

    root = tmp_path_factory.mktemp("shuffle")
    generate_benchmark(
        root / "set", seed=16, n_videos=2, durations=[60.0], config={"level": "search"}, split="test"
    )
    return search_teacher_parquet(root / "set", root / "fields", field_clauses=True), root / "set"


def test_make_rewrites_only_the_probes_observations(teacher, tmp_path: Path) -> None:
    fixed, tasks = teacher
    for seed, out in ((0, "a"), (0, "b"), (1, "c")):
        main(
            [
                "make",
                "--probes",
                str(fixed),
                "--tasks",
                str(tasks),
                "--seed",
                str(seed),
                "--out",
                str(tmp_path / out),
            ]
        )
    before, after = load_probes(fixed, tasks), load_probes(tmp_path / "a", tasks)
    assert len(after) == len(before) >= 4
    for b, a in zip(before, after, strict=True):
        assert {k: v for k, v in a.items() if k != "reply"} == {k: v for k, v in b.items() if k != "reply"}
        assert field_spans(a["reply"]) == field_spans(b["reply"])  # the same clauses
        assert list(field_spans(a["reply"])).index(a["cue"]) != list(field_spans(b["reply"])).index(b["cue"])
        assert json.loads(a["reply"])["thought"] == json.loads(b["reply"])["thought"]
    probe_ids = {p["id"] for p in before}
    old, new = (pq.read_table(str(p)).to_pylist() for p in (fixed, tmp_path / "a"))
    # every row that is not a probe is left as it was
    assert [r for r in old if r["id"] not in probe_ids] == [r for r in new if r["id"] not in probe_ids]
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()  # one seed, one draw
    assert [p["reply"] for p in load_probes(tmp_path / "c", tasks)] != [p["reply"] for p in after]


def test_follow_says_which_clause_each_span_copies(teacher, tmp_path: Path, capsys) -> None:
    fixed, tasks = teacher
    shuffled = tmp_path / "shuffled.parquet"
    main(["make", "--probes", str(fixed), "--tasks", str(tasks), "--seed", "0", "--out", str(shuffled)])
    by_id = {p["id"]: p for p in load_probes(fixed, tasks)}
    rows, kinds, leans = [], [], []
    for i, p in enumerate(load_probes(shuffled, tasks)):
        now, before = field_spans(p["reply"]), list(field_spans(by_id[p["id"]]["reply"]))
        place = list(now)[before.index(p["cue"])]
        third = next(c for c in now if c not in (p["cue"], place))
        span = [now[p["cue"]], now[place], now[third], ("1", "2")][i % 4]
        thought = f"{p['cue']} {'-'.join(span)}."
        rows.append({"id": p["id"], "written": json.dumps({**json.loads(p["reply"]), "thought": thought})})
        kinds.append(FOLLOWS[i % 4])
        if i % 4 in (1, 2):
            leans.append((i % 4 == 1) - 1 / (len(now) - 1))
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / WRITTEN).write_text(json.dumps({"rows": rows}))
    common = ["--probes", str(shuffled), "--fixed", str(fixed), "--tasks", str(tasks)]
    out_json = tmp_path / "f.json"
    assert main(["follow", "--run", f"a={tmp_path / 'r'}", "--run", f"b={tmp_path / 'r'}", *common,
                 "--json", str(out_json)]) == 0  # fmt: skip
    got = json.loads(out_json.read_text())["rows"]["a"]
    assert [got[k] for k in FOLLOWS] == pytest.approx([kinds.count(k) / len(kinds) for k in FOLLOWS])
    assert got["other-field copies"] == len(leans) and got["place lean"] == pytest.approx(np.mean(leans))
    assert (
        got["place lean"] > 0
    )  # half of the other-field copies are at the old place, against a third by chance
    assert "Place lean over 2 names" in capsys.readouterr().out
    # the fixed probes given as the shuffled ones: the cue's old place is its own, never another field's
    main(["follow", "--run", f"a={tmp_path / 'r'}", "--probes", str(fixed), "--fixed", str(fixed), "--tasks",
          str(tasks), "--json", str(out_json)])  # fmt: skip
    assert json.loads(out_json.read_text())["rows"]["a"]["the cue's old place"] == 0


def test_all_rows_shuffles_every_field_clause_observation_in_any_order(
    teacher, tmp_path: Path, capsys
) -> None:
    fixed, _ = teacher
    out = tmp_path / "rows.parquet"
    assert main(["make", "--probes", str(fixed), "--all-rows", "--seed", "1", "--out", str(out)]) == 0
    old, new = (pq.read_table(str(p)).to_pylist() for p in (fixed, out))
    changed = fields = 0
    for a, b in zip(old, new, strict=True):
        before, after = (json.loads(_reply(r)) for r in (a, b))
        assert observation_of_row(b) == after["observation"]
        assert {k: v for k, v in before.items() if k != "observation"} == {
            k: v for k, v in after.items() if k != "observation"
        }
        clauses = before["observation"].split(", ")
        if len(_spans(before["observation"])) == len(clauses) > 1:  # field clauses: the same, in some order
            assert sorted(after["observation"].split(", ")) == sorted(clauses)
            changed += after["observation"] != before["observation"]
            fields += 1
        else:  # "none", or any Observation that is not field clauses, is left
            assert a == b
    assert changed > len(old) // 3
    counts = json.loads(capsys.readouterr().out)
    assert (counts["rows"], counts["shuffled"]) == (len(old), fields)
    for both_or_neither in ([], ["--tasks", str(tmp_path), "--all-rows"]):
        with pytest.raises(SystemExit):
            main(["make", "--probes", str(fixed), "--seed", "1", "--out", str(out), *both_or_neither])


def _reply(row: dict) -> str:
    return json.loads(row["messages"])[-1]["content"][0]["text"]
