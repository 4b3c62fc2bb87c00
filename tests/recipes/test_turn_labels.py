"""Ground-truth discovery labels, AUROC with a cluster bootstrap, and the ig / oracle TAURA weight modes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from omniagent.trajectory import Trajectory, TurnRecord
from recipes.tiny_agent.probes.turn_labels import (
    auroc,
    cluster_bootstrap_auroc,
    discovery_labels,
    entropy_auroc,
    evidence_reach,
    overlaps_evidence,
    score_by_reach,
    task_key,
    weights_by_discovery,
)
from rl.algo import taura

EVIDENCE = [[40.0, 42.0]]


def _turn(
    k: int, action: str | None, start: float = 0.0, end: float = 0.0, times=(), entropy=None, error=None
):
    act = {"type": action, "start": start, "end": end} if action and action != "answer" else None
    if action == "answer":
        act = {"type": "answer", "content": "A"}
    return TurnRecord(turn=k + 1, raw_text="x", action=act, action_type=action, timestamps=list(times),
                      entropy=entropy, error=error)  # fmt: skip


def _traj(turns: list[TurnRecord], tid: str = "t") -> Trajectory:
    return Trajectory(id=tid, media="m.mp4", question="q?", task_type="mcq", max_turns=8, turns=turns)


def test_frames_overlap_only_when_a_served_frame_lies_in_the_evidence():
    assert overlaps_evidence(_turn(0, "get_frames", 0, 60, times=[30.0, 41.0, 50.0]), EVIDENCE)
    assert overlaps_evidence(_turn(0, "get_frames", 0, 60, times=[42.0]), EVIDENCE)  # closed interval
    # the requested span covers the evidence, but no frame was served inside it
    assert not overlaps_evidence(_turn(0, "get_frames", 0, 60, times=[30.0, 45.0]), EVIDENCE)


def test_audio_and_clip_overlap_by_served_span_and_other_turns_never():
    assert overlaps_evidence(_turn(0, "get_audio", 35, 40.5), EVIDENCE)
    assert overlaps_evidence(_turn(0, "get_clip", 41, 41.5, times=[41.0, 41.5]), EVIDENCE)
    assert not overlaps_evidence(_turn(0, "get_audio", 30, 39.9), EVIDENCE)
    assert not overlaps_evidence(
        _turn(0, "get_clip", 10, 50, times=[43.0, 50.0]), EVIDENCE
    )  # served span wins
    assert not overlaps_evidence(_turn(0, "answer"), EVIDENCE)
    assert not overlaps_evidence(_turn(0, "get_audio", 40, 41, error="span_too_long"), EVIDENCE)


def test_discovery_is_the_first_overlapping_turn_only():
    turns = [
        _turn(0, "get_frames", 0, 60, times=[10.0, 30.0]),
        _turn(1, "get_audio", 39, 41),
        _turn(2, "get_frames", 40, 42, times=[40.5, 41.5]),
        _turn(3, "answer"),
    ]
    assert discovery_labels(_traj(turns), EVIDENCE) == [0, 1, 0, 0]
    assert discovery_labels(_traj(turns[:1] + turns[3:]), EVIDENCE) == [0, 0]


def test_auroc_hand_values():
    assert auroc([0.9, 0.8, 0.1, 0.2], [1, 1, 0, 0]) == 1.0
    assert auroc([0.1, 0.2, 0.9, 0.8], [1, 1, 0, 0]) == 0.0
    assert auroc([0.5, 0.5, 0.5], [1, 0, 0]) == 0.5  # ties count one half
    # positives (3, 1) vs negatives (2, 0): pairs won 3>2, 3>0, 1>0 -> 3 of 4
    assert auroc([3, 1, 2, 0], [1, 1, 0, 0]) == 0.75
    assert math.isnan(auroc([1.0, 2.0], [0, 0]))


def test_cluster_bootstrap_is_seeded_and_brackets_the_point():
    rng = np.random.default_rng(1)
    labels = np.tile([1, 0, 0, 0], 30)
    scores = labels * 1.0 + rng.normal(0, 1.0, size=labels.size)
    clusters = np.repeat(np.arange(30), 4)
    point, low, high = cluster_bootstrap_auroc(scores, labels, clusters, n_boot=300, seed=3)
    assert low <= point <= high and 0.5 < point < 1.0
    assert (point, low, high) == cluster_bootstrap_auroc(scores, labels, clusters, n_boot=300, seed=3)
    # four times the trajectories -> a narrower interval
    more = cluster_bootstrap_auroc(
        np.tile(scores, 4), np.tile(labels, 4), np.arange(480) // 4, n_boot=300, seed=3
    )
    assert more[2] - more[1] < high - low


def test_entropy_auroc_over_percept_turns_of_hand_built_trajectories():
    # In both trajectories the discovery turn has the highest entropy among percept turns: AUROC 1.
    a = _traj([_turn(0, "get_frames", 0, 60, times=[5.0], entropy=0.2),
               _turn(1, "get_audio", 39, 41, entropy=1.5),
               _turn(2, "answer", entropy=3.0)], "a")  # fmt: skip
    b = _traj([_turn(0, "get_frames", 0, 60, times=[41.0], entropy=0.9),
               _turn(1, "get_frames", 40, 42, times=[40.5], entropy=0.1),
               _turn(2, "answer", entropy=0.0)], "b")  # fmt: skip
    out = entropy_auroc([a, b], {task_key("m.mp4", "q?"): EVIDENCE}, n_boot=200)
    assert (
        out["auroc"] == 1.0 and out["turns"] == 4 and out["discovery_turns"] == 2 and out["trajectories"] == 2
    )
    # controls: position alone (discoveries on turns 2 and 1 against non-discoveries on 1 and 2), and
    # entropy over turns 2+ only (discovery 1.5 against the re-look 0.1)
    assert out["earliness"]["auroc"] == 0.5 and out["after_turn1"]["auroc"] == 1.0
    # answers are not percept turns: their high entropy does not count
    b.turns[1].entropy = 2.0  # a later re-look now outranks both discovery turns (1.5, 0.9); 0.2 does not
    assert entropy_auroc([a, b], {task_key("m.mp4", "q?"): EVIDENCE}, n_boot=50)["auroc"] == 0.5
    assert entropy_auroc([a, b], {}, n_boot=10)["turns"] == 0  # no evidence known: nothing labelled


def test_evidence_reach_counts_episodes_that_look_at_the_evidence_and_those_named_by_time():
    first = _traj([_turn(0, "get_frames", 41, 41, times=[41.0]), _turn(1, "answer")], "a")
    later = _traj([_turn(0, "get_frames", 0, 9, times=[5.0]), _turn(1, "get_audio", 39, 41)], "b")
    never = _traj([_turn(0, "get_frames", 0, 9, times=[5.0]), _turn(1, "answer")], "c")
    named = "Which digit is shown on screen at about 41 s?"
    first.question = later.question = named
    evidence = {task_key("m.mp4", named): EVIDENCE, task_key("m.mp4", "q?"): EVIDENCE}
    out = evidence_reach([first, later, never], evidence)
    assert (out["all"]["any"]["mean"], out["all"]["first"]["mean"]) == (0.667, 0.333)  # rounded to 3 places
    assert out["named"]["any"]["mean"] == 1.0 and out["named"]["first"]["mean"] == 0.5
    assert out["named"]["any"]["n"] == 2 and out["all"]["any"]["n"] == 3
    assert out["all"]["any"]["lo"] <= out["all"]["any"]["mean"] <= out["all"]["any"]["hi"]
    assert evidence_reach([never], {})["all"]["any"]["n"] == 0  # no evidence known: nothing counted

    first.reward, later.reward, never.reward = 1.0, 0.0, 1.0
    never.task_type = "num"  # the helper's trajectories are mcq tasks
    scores = score_by_reach([first, later, never], evidence)
    assert scores["all"] == {"touched": {"mean": 0.5, "n": 2}, "missed": {"mean": 1.0, "n": 1}}
    assert scores["num"] == {"touched": {"mean": None, "n": 0}, "missed": {"mean": 1.0, "n": 1}}
    assert scores["mcq"] == {"touched": {"mean": 0.5, "n": 2}, "missed": {"mean": None, "n": 0}}


def test_weights_by_discovery_reads_the_trainers_turn_weights():
    a = _traj([_turn(0, "get_frames", 0, 60, times=[5.0]),
               _turn(1, "get_audio", 39, 41),
               _turn(2, "answer")], "a")  # fmt: skip
    b = _traj([_turn(0, "get_frames", 0, 60, times=[41.0]),
               _turn(1, "get_frames", 0, 9, error="bad_action"),
               _turn(2, "answer")], "b")  # fmt: skip
    a.meta["turn_weights"], b.meta["turn_weights"] = [0.5, 2.0, 0.5], [1.0, 1.5, 0.5]
    evidence = {task_key("m.mp4", "q?"): EVIDENCE}
    out = weights_by_discovery([a, b], evidence, n_boot=100)
    # percept turns: discoveries 2.0 and 1.0 against the non-discovery 0.5 (the rejected turn has no percept)
    assert (out["turns"], out["discovery_turns"]) == (3, 2)
    assert (out["mean_weight_discovery"], out["mean_weight_other"], out["auroc"]) == (1.5, 0.5, 1.0)
    by_action = out["mean_weight_by_action"]
    assert by_action["answer"] == [0.5, 2] and by_action["rejected"] == [1.5, 1]
    assert by_action["get_frames"] == [0.75, 2] and by_action["get_audio"] == [2.0, 1]
    a.meta["turn_weights"] = [1.0]  # not one weight per turn: the trajectory is skipped
    assert weights_by_discovery([a], evidence) is None
    assert weights_by_discovery([b], {}) is None  # no evidence known


def _group():
    # one group, two trajectories of two turns; rewards 1 and 0
    return dict(
        entropy=torch.ones(4, 2),
        response_mask=torch.ones(4, 2, dtype=torch.long),
        rewards=torch.tensor([1.0, 1.0, 0.0, 0.0]),
        traj_index=torch.tensor([0, 0, 1, 1]),
        group_index=torch.tensor([0, 0, 0, 0]),
        turn_index=torch.tensor([0, 1, 0, 1]),
    )


def test_oracle_mode_weights_overlapping_turns_by_floor_plus_score_over_group_mean():
    scores = torch.tensor([1.0, 0.0, 0.0, 0.0])  # only traj 0's first turn saw the evidence
    out = taura.taura_advantages(**_group(), mode="oracle", turn_scores=scores, score_floor=1.0)
    # floor + score = (2, 1, 1, 1), group mean 1.25
    assert torch.allclose(out.weights, torch.tensor([1.6, 0.8, 0.8, 0.8]))
    adv = math.sqrt(0.5)  # GRPO advantage of rewards (1, 0)
    assert torch.allclose(out.advantages[:, 0], torch.tensor([1.6 * adv, 0.8 * adv, -0.8 * adv, -0.8 * adv]))


def test_ig_mode_clamps_negative_gains_and_equal_scores_reduce_to_grpo():
    ig = taura.taura_advantages(**_group(), mode="ig", turn_scores=torch.tensor([0.5, -2.0, 0.0, 0.5]))
    # max(IG, 0) + 1 = (1.5, 1, 1, 1.5), mean 1.25
    assert torch.allclose(ig.weights, torch.tensor([1.2, 0.8, 0.8, 1.2]))
    flat = taura.taura_advantages(**_group(), mode="ig", turn_scores=torch.full((4,), 0.3))
    grpo = taura.taura_advantages(**_group(), mode="grpo")
    assert torch.allclose(flat.advantages, grpo.advantages)


def test_score_modes_need_turn_scores():
    with pytest.raises(ValueError, match="turn_scores"):
        taura.taura_advantages(**_group(), mode="oracle")
    with pytest.raises(ValueError, match="turn_scores"):
        taura.taura_advantages(**_group(), mode="ig", turn_scores=torch.zeros(3))
