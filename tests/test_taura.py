"""TAURA maths (rl/algo/taura.py) against hand-computed groups; no verl needed except for the parity test."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rl.algo import taura

SQRT_HALF = math.sqrt(0.5)  # GRPO advantage of rewards (1, 0): +-0.5 / std(1, 0) = +-0.5 / sqrt(0.5)


def _rows(spec):
    """Rows from (group, traj, turn, reward, token entropies, mask) tuples, right-padded to one width."""
    width = max(len(r[4]) for r in spec)
    entropy = torch.zeros(len(spec), width)
    mask = torch.zeros(len(spec), width, dtype=torch.long)
    for i, (*_, ent, m) in enumerate(spec):
        entropy[i, : len(ent)] = torch.tensor(ent, dtype=torch.float32)
        mask[i, : len(m)] = torch.tensor(m)
    col = list(zip(*spec, strict=True))
    return dict(
        entropy=entropy,
        response_mask=mask,
        group_index=torch.tensor(col[0]),
        traj_index=torch.tensor(col[1]),
        turn_index=torch.tensor(col[2]),
        rewards=torch.tensor(col[3], dtype=torch.float32),
    )


# group, traj, turn, reward, token entropies, response mask
HAND_BATCH = [
    # group 0: traj 0 has two turns (the second with zero entropy), traj 1 is single-turn. Mean H = (2+0+4)/3 = 2.
    (0, 0, 0, 1.0, [1.0, 3.0, 9.0], [1, 1, 0]),  # H = 2 (the masked 9 is ignored) -> w = 1
    (0, 0, 1, 1.0, [0.0, 0.0], [1, 1]),  # H = 0 -> w = 0
    (0, 1, 0, 0.0, [4.0], [1]),  # H = 4 -> w = 2
    # group 1: equal rewards -> advantage 0 whatever the weights.
    (1, 2, 0, 1.0, [1.0], [1]),
    (1, 3, 0, 1.0, [5.0], [1]),
    # group 2: all entropies zero -> weights 1; rewards (1, 0, 0), std = sqrt(1/3).
    (2, 4, 0, 1.0, [0.0, 0.0], [1, 1]),
    (2, 5, 0, 0.0, [0.0], [1]),
    (2, 6, 0, 0.0, [0.0], [1]),
    # group 3: single-turn trajectories, H = 1 and 3 -> w = 0.5 and 1.5.
    (3, 7, 0, 0.0, [1.0], [1]),
    (3, 8, 0, 1.0, [3.0, 3.0], [1, 1]),
]


def test_turn_mean_entropy_ignores_masked_tokens_and_empty_rows():
    entropy = torch.tensor([[1.0, 3.0, 100.0], [7.0, 7.0, 7.0]])
    mask = torch.tensor([[1, 1, 0], [0, 0, 0]])
    assert taura.turn_mean_entropy(entropy, mask).tolist() == [2.0, 0.0]


def test_grpo_outcome_advantage_hand_values():
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 5.0])
    groups = torch.tensor([0, 0, 1, 1, 2, 2, 2, 3])
    adv = taura.grpo_outcome_advantage(rewards, groups, eps=0.0)
    third = 1 / 3
    std2 = math.sqrt(((2 / 3) ** 2 + 2 * third**2) / 2)
    expected = [SQRT_HALF, -SQRT_HALF, 0.0, 0.0, (2 / 3) / std2, -third / std2, -third / std2, 5.0]
    torch.testing.assert_close(adv, torch.tensor(expected))
    # Dr.GRPO: centre only; the singleton group keeps mean 0 (verl's convention).
    centred = taura.grpo_outcome_advantage(rewards, groups, norm_by_std=False)
    torch.testing.assert_close(centred, torch.tensor([0.5, -0.5, 0, 0, 2 / 3, -third, -third, 5.0]))


def test_all_equal_rewards_give_zero_advantage():
    adv = taura.grpo_outcome_advantage(torch.full((4,), 0.7), torch.zeros(4, dtype=torch.long))
    assert torch.equal(adv, torch.zeros(4))


def test_turn_weights_edge_cases():
    turn_entropy = torch.tensor([2.0, 0.0, 4.0, 0.0, 0.0, 1.0, 3.0, 5.0])
    groups = torch.tensor([0, 0, 0, 1, 1, 2, 2, 3])
    weights = taura.taura_turn_weights(turn_entropy, groups)
    # group 0: mean 2; group 1: mean 0 -> ones; group 2: mean 2; group 3: a lone turn -> 1.
    assert weights.tolist() == [1.0, 0.0, 2.0, 1.0, 1.0, 0.5, 1.5, 1.0]


def test_turn_weights_leave_invalid_rows_out_of_the_mean():
    turn_entropy = torch.tensor([2.0, 4.0, 0.0])
    valid = torch.tensor([True, True, False])
    weights = taura.taura_turn_weights(turn_entropy, torch.zeros(3, dtype=torch.long), valid=valid)
    torch.testing.assert_close(weights, torch.tensor([2 / 3, 4 / 3, 1.0]))


def test_taura_advantages_hand_computed():
    out = taura.taura_advantages(**_rows(HAND_BATCH), std_eps=0.0)
    std2 = math.sqrt(1 / 3)
    expected_w = [1.0, 0.0, 2.0, 1 / 3, 5 / 3, 1.0, 1.0, 1.0, 0.5, 1.5]
    expected_a = [SQRT_HALF, SQRT_HALF, -SQRT_HALF, 0, 0, (2 / 3) / std2, -(1 / 3) / std2, -(1 / 3) / std2]
    expected_a += [-SQRT_HALF, SQRT_HALF]
    torch.testing.assert_close(out.weights, torch.tensor(expected_w))
    torch.testing.assert_close(out.outcome_advantage, torch.tensor(expected_a))
    torch.testing.assert_close(out.turn_entropy, torch.tensor([2.0, 0, 4, 1, 5, 0, 0, 0, 1, 3]))
    per_row = torch.tensor(expected_w) * torch.tensor(expected_a)
    torch.testing.assert_close(out.advantages[:, 0], per_row)
    # spot values: the zero-entropy turn gets nothing; the uncertain losing turn gets twice the penalty
    assert out.advantages[1].abs().sum() == 0
    torch.testing.assert_close(out.advantages[2, 0], torch.tensor(-2 * SQRT_HALF))
    torch.testing.assert_close(out.advantages[8, 0], torch.tensor(-0.5 * SQRT_HALF))


def test_per_token_broadcast_respects_response_mask():
    rows = _rows(HAND_BATCH)
    out = taura.taura_advantages(**rows)
    mask = rows["response_mask"].bool()
    assert torch.all(out.advantages[~mask] == 0)
    row_value = (out.weights * out.outcome_advantage).unsqueeze(-1).expand_as(out.advantages)
    torch.testing.assert_close(out.advantages[mask], row_value[mask])
    assert out.advantages[0, 2] == 0  # masked token with entropy 9


def test_final_turn_reward_is_used():
    # The earlier turn carries a stale reward; only the final turn's reward counts.
    rows = _rows([(0, 0, 0, 5.0, [1.0], [1]), (0, 0, 1, 1.0, [1.0], [1]), (0, 1, 0, 0.0, [1.0], [1])])
    out = taura.taura_advantages(**rows, std_eps=0.0)
    torch.testing.assert_close(out.outcome_advantage, torch.tensor([SQRT_HALF, SQRT_HALF, -SQRT_HALF]))


def test_padding_rows_get_zero_advantage_and_do_not_shift_weights():
    spec = HAND_BATCH[:3] + [(9, 99, 0, 0.0, [3.0], [0]), (0, 98, 0, 0.5, [0.0], [0])]
    out = taura.taura_advantages(**_rows(spec))
    assert out.valid.tolist() == [True, True, True, False, False]
    assert out.weights[:3].tolist() == [1.0, 0.0, 2.0]
    assert torch.all(out.advantages[3:] == 0)


@pytest.mark.parametrize("norm_by_std", [True, False])
def test_equal_turn_entropies_reduce_to_grpo(norm_by_std):
    gen = torch.Generator().manual_seed(0)
    rows, turns_per_traj = [], torch.randint(1, 5, (12,), generator=gen)
    for traj, turns in enumerate(turns_per_traj.tolist()):
        reward = float(torch.randint(0, 2, (1,), generator=gen))
        for k in range(turns):
            length = int(torch.randint(1, 6, (1,), generator=gen))
            rows.append((traj // 4, traj, k, reward, [0.8] * length, [1] * length))
    batch = _rows(rows)
    out_taura = taura.taura_advantages(**batch, norm_by_std=norm_by_std)
    out_grpo = taura.taura_advantages(**batch, mode="grpo", norm_by_std=norm_by_std)
    torch.testing.assert_close(out_taura.weights, torch.ones(len(rows)))
    torch.testing.assert_close(out_taura.advantages, out_grpo.advantages)


def test_unknown_mode_raises():
    with pytest.raises(ValueError, match="mode"):
        taura.taura_advantages(**_rows(HAND_BATCH), mode="ppo")


def test_grpo_mode_matches_verl_multi_trajectory_grpo():
    pytest.importorskip("verl", reason="verl is not installed (pip install 'verl[verl-core]==0.9.1')")
    from verl.protocol import DataProto
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    gen = torch.Generator().manual_seed(1)
    spec, keys = [], []
    for traj in range(10):
        group, session = traj // 5, traj % 5
        reward = float(torch.rand(1, generator=gen))
        for k in range(int(torch.randint(1, 4, (1,), generator=gen))):
            length = int(torch.randint(1, 5, (1,), generator=gen))
            spec.append((group, traj, k, reward, torch.rand(length, generator=gen).tolist(), [1] * length))
            keys.append(f"uid{group}_{session}_{k}")
    spec.append((2, 10, 0, 0.3, [0.5], [1]))  # a singleton group
    keys.append("uid2_0_0")
    rows = _rows(spec)
    token_rewards = torch.zeros_like(rows["entropy"])
    last = rows["response_mask"].sum(-1) - 1
    token_rewards[torch.arange(len(spec)), last] = rows["rewards"]
    data = DataProto.from_dict(
        tensors={"token_level_rewards": token_rewards, "response_mask": rows["response_mask"]},
        non_tensors={"uid": np.array([k.rsplit("_", 2)[0] for k in keys], dtype=object)},
    )
    verl_adv = compute_advantage_for_multi_trajectories(data, keys, "grpo", num_repeat=5).batch["advantages"]
    ours = taura.taura_advantages(**rows, mode="grpo").advantages
    torch.testing.assert_close(ours, verl_adv.float())


def test_weight_stats_and_entropy_by_action():
    weights = torch.tensor([1.0, 0.0, 2.0, 7.0])
    valid = torch.tensor([True, True, True, False])
    stats = taura.weight_stats(weights, valid)
    assert stats == pytest.approx({"mean": 1.0, "std": math.sqrt(2 / 3), "min": 0.0, "max": 2.0})
    assert taura.weight_stats(weights, torch.zeros(4, dtype=torch.bool)) == dict.fromkeys(
        ("mean", "std", "min", "max"), 0.0
    )

    turn_entropy = torch.tensor([1.0, 3.0, 2.0, 8.0, 4.0])
    actions = ["frames", "frames", "answer", None, "audio"]
    by_action = taura.entropy_by_action(turn_entropy, actions, torch.tensor([True, True, True, True, False]))
    assert by_action == {
        "answer": {"entropy_mean": 2.0, "turns": 1.0},
        "frames": {"entropy_mean": 2.0, "turns": 2.0},
        "unknown": {"entropy_mean": 8.0, "turns": 1.0},
    }


def test_held_answer_turns_keep_weight_one_and_leave_the_mean():
    """hold_answer_turns: the answer rows get 1 and the perceiving rows are weighted among themselves."""
    # group 0: two perceiving turns (H 1 and 3) and two answers (H 6 and 8); group 1: answers only.
    spec = [
        (0, 0, 0, 1.0, [1.0], [1]),
        (0, 0, 1, 1.0, [6.0], [1]),
        (0, 1, 0, 0.0, [3.0], [1]),
        (0, 1, 1, 0.0, [8.0], [1]),
        (1, 2, 0, 1.0, [2.0], [1]),
        (1, 3, 0, 0.0, [4.0], [1]),
    ]
    held = taura.answer_turns(["get_frames", "answer", "get_audio", "answer", "answer", "answer"])
    assert held.tolist() == [False, True, False, True, True, True]
    out = taura.taura_advantages(**_rows(spec), held=held, std_eps=0.0)
    # perceiving mean (1 + 3) / 2 = 2 -> 0.5 and 1.5; answers and the all-answer group stay at 1
    torch.testing.assert_close(out.weights, torch.tensor([0.5, 1.0, 1.5, 1.0, 1.0, 1.0]))
    torch.testing.assert_close(out.advantages[:, 0], out.weights * out.outcome_advantage)
    plain = taura.taura_advantages(**_rows(spec), std_eps=0.0)  # without holding, the mean is 4.5
    torch.testing.assert_close(plain.weights[:4], torch.tensor([1.0, 6.0, 3.0, 8.0]) / 4.5)
    # the oracle/ig path honours it too, and in grpo mode every weight is 1 whatever is held
    scores = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    oracle = taura.taura_advantages(**_rows(spec), mode="oracle", turn_scores=scores, held=held)
    torch.testing.assert_close(oracle.weights, torch.tensor([2 / 1.5, 1.0, 1 / 1.5, 1.0, 1.0, 1.0]))
    grpo = taura.taura_advantages(**_rows(spec), mode="grpo", held=held)
    assert grpo.weights.tolist() == [1.0] * 6
