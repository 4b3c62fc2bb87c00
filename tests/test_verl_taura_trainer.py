"""The TAURA trainer override (rl/verl_ext/trainer.py) on CPU: the verl API it relies on, verl's estimator
registry, and its advantage step on hand-built batches shaped exactly as TransferQueue returns them (the
launcher's config: test_train_taura_config.py).

Needs verl 0.9.1 (`pip install "verl[verl-core]==0.9.1"`): the override subclasses its V1 sync trainer. End-to-end
training is not run here (it needs vLLM and a GPU).
"""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest
import torch
from testkit import compose_taura

pytest.importorskip("verl", reason="verl is not installed (pip install 'verl[verl-core]==0.9.1')")

from tensordict import TensorDict  # noqa: E402
from transfer_queue import KVBatchMeta  # noqa: E402
from verl.trainer.ppo import core_algos  # noqa: E402
from verl.trainer.ppo.v1 import PPOTrainerSync  # noqa: E402
from verl.utils.tensordict_utils import list_of_dict_to_tensordict  # noqa: E402

from rl.algo import taura  # noqa: E402
from rl.verl_ext import trainer as verl_trainer  # noqa: E402

# ------------------------------------------------------------------ verl's API that the override relies on


def test_verl_compute_advantage_signature_is_the_one_overridden():
    """verl's _compute_advantage and the helpers our copy of its body calls keep the signatures we use."""
    expected = {
        PPOTrainerSync._compute_advantage: ["self", "batch", "metrics"],
        verl_trainer.apply_kl_penalty: ["data", "kl_ctrl", "kl_penalty"],
        verl_trainer.compute_rollout_correction_and_add_to_batch: ["batch", "rollout_corr_config"],
        verl_trainer.response_to_nested: ["tensor", "response_mask"],
    }
    for fn, params in expected.items():
        assert list(inspect.signature(fn).parameters)[: len(params)] == params, fn
    ours = inspect.signature(verl_trainer.TauraPPOTrainer._compute_advantage)
    assert ours.parameters.keys() == inspect.signature(PPOTrainerSync._compute_advantage).parameters.keys()


def test_override_fetches_every_field_verls_method_fetches():
    """If verl's _compute_advantage starts reading a new field, our copy of it must read it too."""
    source = textwrap.dedent(inspect.getsource(PPOTrainerSync._compute_advantage))
    assigns = [
        n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Assign) and isinstance(n.value, ast.List)
    ]
    fields = next(
        [ast.literal_eval(e) for e in a.value.elts]
        for a in assigns
        if any(isinstance(t, ast.Name) and t.id == "fields" for t in a.targets)
    )
    assert "response_mask" in fields
    assert set(fields) <= set(verl_trainer.ADVANTAGE_FIELDS)


def test_taura_estimator_is_registered_and_refuses_verls_stock_call():
    from verl.protocol import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage

    assert core_algos.get_adv_estimator_fn(verl_trainer.TAURA_ESTIMATOR) is verl_trainer.taura_estimator
    data = DataProto.from_dict(
        tensors={"token_level_rewards": torch.ones(2, 3), "response_mask": torch.ones(2, 3)},
        non_tensors={"uid": ["a", "a"]},
    )
    with pytest.raises(ValueError, match="TauraPPOTrainer"):  # verl's generic path gives it no entropy
        compute_advantage(data, adv_estimator="taura", config=compose_taura("tiny").algorithm)


# ------------------------------------------------------------------ the advantage step on verl batches


# (session, turn, reward, token entropies, action); one prompt uid, rollout.n = 3 sessions.
TURNS = [
    (0, 0, 1.0, [1.0, 3.0], "frames"),
    (0, 1, 1.0, [0.0, 0.0, 0.0], "answer"),
    (1, 0, 0.0, [4.0], "audio"),
    (1, 1, 0.0, [2.0, 2.0], "answer"),
    (2, 0, 0.0, [0.5, 0.5, 0.5, 0.5], "answer"),
]
UID = "9f1c"


def _agent_loop_rows():
    """Rows as verl's AgentLoopWorkerTQ._agent_loop_postprocess writes them, plus the old-log-prob fields."""
    keys, fields = [], []
    for session, turn, reward, ent, action in TURNS:
        n = len(ent)
        rm_scores = torch.zeros(n)
        rm_scores[-1] = reward
        fields.append(
            {
                "prompts": torch.arange(6),
                "responses": torch.arange(n),
                "response_mask": torch.ones(n, dtype=torch.int64),
                "rm_scores": rm_scores,
                "rollout_log_probs": torch.full((n,), -1.0),
                "old_log_probs": torch.full((n,), -1.1),
                "entropy": torch.tensor(ent),
                "extra_fields": {"action_type": action, "turn_index": turn},
                "uid": UID,
                "session_id": session,
            }
        )
        keys.append(f"{UID}_{session}_{turn}")
    return keys, fields


def _expected_inputs():
    width = max(len(t[3]) for t in TURNS)
    entropy = torch.zeros(len(TURNS), width)
    mask = torch.zeros(len(TURNS), width, dtype=torch.long)
    for i, t in enumerate(TURNS):
        entropy[i, : len(t[3])] = torch.tensor(t[3])
        mask[i, : len(t[3])] = 1
    return dict(
        entropy=entropy,
        response_mask=mask,
        rewards=torch.tensor([t[2] for t in TURNS]),
        traj_index=torch.tensor([t[0] for t in TURNS]),
        group_index=torch.zeros(len(TURNS), dtype=torch.long),
        turn_index=torch.tensor([t[1] for t in TURNS]),
    )


def _expected_advantages():
    return taura.taura_advantages(**_expected_inputs())


def _check_output(output: TensorDict, metrics: dict):
    expected = _expected_advantages()
    assert set(output.keys()) >= {"advantages", "returns"}
    for i, t in enumerate(TURNS):
        n = len(t[3])
        torch.testing.assert_close(output["advantages"][i], expected.advantages[i, :n])
        torch.testing.assert_close(output["returns"][i], expected.advantages[i, :n])
    # group mean turn entropy = (2 + 0 + 4 + 2 + 0.5) / 5 = 1.7
    assert metrics["taura/weight/mean"] == pytest.approx(1.0)
    assert metrics["taura/weight/max"] == pytest.approx(4 / 1.7)
    assert metrics["taura/weight/min"] == pytest.approx(0.0)
    assert metrics["taura/turns_per_traj/mean"] == pytest.approx(5 / 3)
    assert metrics["taura/action/answer/turns"] == 3
    assert metrics["taura/action/frames/entropy_mean"] == pytest.approx(2.0)


def test_row_ids_from_keys():
    group, traj, turn = verl_trainer.row_ids_from_keys(["a_b_0_1", "a_b_0_0", "c_1_0", "a_b_1_0"])
    assert group.tolist() == [0, 0, 1, 0]  # uid "a_b" may itself contain underscores
    assert traj.tolist() == [0, 0, 2, 1]
    assert turn.tolist() == [1, 0, 0, 0]
    with pytest.raises(ValueError):
        verl_trainer.row_ids_from_keys(["no-underscores"])


def test_compute_taura_advantage_on_transfer_queue_shaped_batch():
    keys, fields = _agent_loop_rows()
    data = list_of_dict_to_tensordict(fields)  # jagged nested tensors + non-tensor stacks, as TQ returns
    output, metrics = verl_trainer.compute_taura_advantage(data, keys, compose_taura("tiny"))
    assert output["advantages"].is_nested
    _check_output(output, metrics)


def test_7b_rollout_importance_weights_are_written_back():
    """+exp=7b turns on token-level rollout IS: the step writes capped weights exp(old - rollout) per token,
    and the advantages stay TAURA's (the weights act in the loss)."""
    keys, fields = _agent_loop_rows()
    output, metrics = verl_trainer.compute_taura_advantage(
        list_of_dict_to_tensordict(fields), keys, compose_taura("7b", "taura.mode=taura")
    )
    _check_output(output, metrics)
    expected = torch.exp(torch.tensor(-1.1 + 1.0))  # old_log_probs - rollout_log_probs, under the cap of 2
    for i, t in enumerate(TURNS):
        torch.testing.assert_close(output["rollout_is_weights"][i], torch.full((len(t[3]),), expected.item()))


def test_compute_taura_advantage_grpo_mode_equals_verl_grpo():
    from verl.protocol import DataProto
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    keys, fields = _agent_loop_rows()
    output, _ = verl_trainer.compute_taura_advantage(
        list_of_dict_to_tensordict(fields), keys, compose_taura("tiny", "taura.mode=grpo")
    )
    padded = list_of_dict_to_tensordict(fields).select("rm_scores", "response_mask").to_padded_tensor()
    data = DataProto.from_dict(
        tensors={"token_level_rewards": padded["rm_scores"], "response_mask": padded["response_mask"]},
        non_tensors={"uid": [UID] * len(keys)},
    )
    verl_adv = compute_advantage_for_multi_trajectories(data, keys, "grpo", num_repeat=3).batch["advantages"]
    for i, t in enumerate(TURNS):
        torch.testing.assert_close(output["advantages"][i], verl_adv[i, : len(t[3])].float())


def test_hold_answer_turns_on_verl_batches():
    """taura.hold_answer_turns=true: answer rows keep weight 1 (their advantage is GRPO's) and the frame and
    audio turns (H 2 and 4) are weighted by their own mean, 3; also with per-action logging off."""
    keys, fields = _agent_loop_rows()
    outcome = taura.taura_advantages(**_expected_inputs(), mode="grpo").advantages
    weights = {"frames": 2 / 3, "audio": 4 / 3, "answer": 1.0}
    for by_action in (True, False):
        cfg = compose_taura("tiny", "taura.hold_answer_turns=true", f"taura.log_action_entropy={by_action}")
        output, metrics = verl_trainer.compute_taura_advantage(list_of_dict_to_tensordict(fields), keys, cfg)
        for i, t in enumerate(TURNS):
            torch.testing.assert_close(output["advantages"][i], weights[t[4]] * outcome[i, : len(t[3])])
        assert metrics["taura/weight/max"] == pytest.approx(4 / 3)
        assert ("taura/action/answer/turns" in metrics) is by_action  # logging follows its own setting
    with pytest.raises(ValueError, match="action type"):
        verl_trainer.taura_estimator(
            torch.ones(1, 1), torch.ones(1, 1), entropy=torch.ones(1, 1), row_keys=["u_0_0"],
            taura_config={"hold_answer_turns": True},
        )  # fmt: skip


def test_missing_entropy_is_a_clear_error():
    keys, fields = _agent_loop_rows()
    for f in fields:
        f.pop("entropy")
    with pytest.raises(KeyError, match="entropy"):
        verl_trainer.compute_taura_advantage(list_of_dict_to_tensordict(fields), keys, compose_taura("tiny"))


class _FakeTransferQueue:
    """kv_batch_get / kv_batch_put over a dict, with TransferQueue's signatures."""

    def __init__(self, keys, fields):
        self.rows = {k: dict(f) for k, f in zip(keys, fields, strict=True)}

    def kv_batch_get(self, keys, partition_id, select_fields=None):
        present = [f for f in select_fields if all(f in self.rows[k] for k in keys)]
        return list_of_dict_to_tensordict([{f: self.rows[k][f] for f in present} for k in keys])

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None):
        for i, key in enumerate(keys):
            for name in fields.keys():
                self.rows[key][name] = fields[name][i]
        return KVBatchMeta(keys=list(keys), tags=[{}] * len(keys), partition_id=partition_id)


def test_trainer_override_compute_advantage(monkeypatch):
    assert issubclass(verl_trainer.TauraPPOTrainer, PPOTrainerSync)
    assert "_compute_advantage" in verl_trainer.TauraPPOTrainer.__dict__
    keys, fields = _agent_loop_rows()
    fake = _FakeTransferQueue(keys, fields)
    monkeypatch.setattr(verl_trainer, "tq", fake)
    trainer = verl_trainer.TauraPPOTrainer.__new__(verl_trainer.TauraPPOTrainer)  # skip Ray/worker setup
    trainer.config = compose_taura("tiny")
    metrics: dict = {}
    batch = KVBatchMeta(keys=keys, tags=[{"status": "success"}] * len(keys), partition_id="train")
    out = trainer._compute_advantage(batch, metrics)
    assert out.keys == keys
    written = TensorDict(
        {
            "advantages": torch.nested.as_nested_tensor(
                [fake.rows[k]["advantages"] for k in keys], layout=torch.jagged
            )
        },
        batch_size=len(keys),
    )
    written["returns"] = written["advantages"]
    _check_output(written, metrics)


@pytest.mark.slow
def test_trainer_override_with_real_transfer_queue():
    """The override against a live TransferQueue on a local Ray (about 30 s on 2 cores)."""
    import ray
    import transfer_queue as tq

    keys, fields = _agent_loop_rows()
    ray.init(num_cpus=verl_trainer.MIN_RAY_CPUS, include_dashboard=False, log_to_driver=False)
    try:
        tq.init()
        tq.kv_batch_put(
            keys=keys, partition_id="train", fields=list_of_dict_to_tensordict(fields), tags=[{}] * len(keys)
        )
        trainer = verl_trainer.TauraPPOTrainer.__new__(verl_trainer.TauraPPOTrainer)
        trainer.config = compose_taura("tiny")
        metrics: dict = {}
        batch = KVBatchMeta(keys=keys, tags=[{}] * len(keys), partition_id="train")
        trainer._compute_advantage(batch, metrics)
        written = tq.kv_batch_get(keys=keys, partition_id="train", select_fields=["advantages", "returns"])
        _check_output(written, metrics)
    finally:
        tq.close()
        ray.shutdown()
