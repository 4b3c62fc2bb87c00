"""The pure quality-control filters of SFT synthesis (rl/synthesis/filters.py): outcome thresholds, hindsight
leakage, and parsing the judge's audit reply."""

from __future__ import annotations

from typing import Any

import pytest

from omniagent.trajectory import Trajectory, TurnRecord
from rl.synthesis import filters as F


def _traj(turns: list[TurnRecord], **kw: Any) -> Trajectory:
    base = dict(id="t", media="m.mp4", question="q", task_type="num", max_turns=8, turns=turns)
    return Trajectory(**{**base, **kw})


def test_outcome_thresholds() -> None:
    th = F.OutcomeThresholds()
    tr = dict(task_type="tr", ground_truth=[[10.0, 20.0]], stop_reason="answered")
    assert F.outcome_check(_traj([], answer=[[10.0, 20.0]], **tr), th).passed
    assert F.outcome_check(_traj([], answer=[[10.0, 15.0]], **tr), th).passed  # IoU exactly 0.5
    assert F.outcome_check(_traj([], answer=[[10.0, 14.9]], **tr), th).reason == "wrong_answer"
    num = dict(ground_truth=10.0, stop_reason="answered")
    assert F.outcome_check(_traj([], answer=12.0, **num), th).passed  # MRA 0.6
    assert not F.outcome_check(_traj([], answer=13.0, **num), th).passed  # MRA 0.4
    assert F.outcome_check(_traj([], answer=None, stop_reason="turn_budget"), th).reason == "no_answer"
    ff = _traj([], task_type="ff", answer="x", ground_truth="y", stop_reason="answered", reward=1.0)
    assert F.outcome_check(ff, th).reason == "unverifiable"


def test_leak_check_respects_fetched_media() -> None:
    look = TurnRecord(turn=1, raw_text="", observation="none", thought="scan", timestamps=[0.0, 10.0, 20.0],
                      action={"type": "get_frames", "start": 0, "end": 20, "num": 3})  # fmt: skip
    after = TurnRecord(turn=2, raw_text="", observation="at 12.5 s a beep", thought="ends at 12.5")
    early = TurnRecord(turn=1, raw_text="", observation="none", thought="jump to 12.5 s",
                       action={"type": "get_frames", "start": 12, "end": 13, "num": 2})  # fmt: skip
    ev = [[12.0, 12.5]]
    assert F.find_leaks(_traj([look, after]), ev) == []
    assert F.find_leaks(_traj([early]), ev) == [
        "turn 1: names evidence time 12.5 s before fetching media covering it"
    ]
    assert F.find_leaks(_traj([early]), ev, allowed_numbers=[12.5]) == []  # the question says 12.5
    hinted = TurnRecord(turn=1, raw_text="", observation="none", thought="The HINT helps")
    assert F.find_leaks(_traj([hinted]), ev) == ["turn 1: mentions 'hint'"]


def test_audit_reply_parsing() -> None:
    r = F.parse_audit_reply('```json\n{"turns": [{"turn": 1, "score": 4}, {"turn": 2, "score": 2}]}\n```', 2)
    assert r.aggregate == 2 and not r.passed(3)
    assert F.parse_audit_reply(
        '{"turns": [{"turn": 1, "score": 4}, {"turn": 2, "score": 2}]}', 2, "mean"
    ).passed(3)
    for bad in (
        '{"turns": [{"turn": 1, "score": 4}]}',
        '{"turns": [{"turn": 1, "score": 9}]}',
        "no json",
        "{}",
    ):
        with pytest.raises(F.AuditParseError):
            F.parse_audit_reply(bad, 2 if "4}]" in bad else 1)


def test_outcome_score_accepts_an_option_text_only_when_the_episodes_env_did() -> None:
    mcq = dict(
        task_type="mcq", choices=["red", "green"], ground_truth="B", stop_reason="answered", answer="green"
    )
    assert F.outcome_score(_traj([], **mcq, meta={"env_limits": {"mcq_option_text": True}})) == 1.0
    assert F.outcome_score(_traj([], **mcq)) == 0.0  # a format error under the letter-only scorer
