"""The single-process TAURA trainer (rl/train_local.py) on the tiny thinker: the per-turn samples and the
update (the PPO clip loss, information gain, target KL, held answer turns, the KL term to the reference and
the SFT anchor)."""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import pytest
import torch
from testkit import TRAIN_LOCAL_SMALL as SMALL
from testkit import read_csv_rows

from rl.local.args import Args
from rl.local.info_gain import answer_entropy, information_gains
from rl.local.update import advantages, kl_to_reference, ppo_clip_loss, score_rows, update
from rl.train_local import compose_config, train


def test_ppo_clip_loss_matches_verl_vanilla_hand_values(cfg_tiny) -> None:
    args = Args.from_config(cfg_tiny)  # clip 0.2 / 0.28, dual clip 3
    old = torch.zeros(4)
    logp = torch.log(torch.tensor([1.5, 0.5, 1.1, 10.0]))
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0])
    loss, clipped, _ = ppo_clip_loss(logp, old, adv, args)
    # ratio 1.5 with A>0 is cut to 1.28; ratio 0.5 with A>0 is not (min is taken over -A*r);
    # ratio 1.1 with A<0 is inside; ratio 10 with A<0 is capped by the dual clip at 3
    assert torch.allclose(loss, torch.tensor([-1.28, -0.5, 1.1, 3.0]), atol=1e-5)
    assert clipped.tolist() == [1.0, 0.0, 0.0, 0.0]  # verl's clipfrac counts the PPO clip, not the dual clip


def test_turn_samples_train_exactly_the_turns_output(oracle_turns) -> None:
    policy, encoder, _, traj, rows = oracle_turns
    assert traj.answered and len(rows) >= 2 and rows[0].record.action_type == "get_frames"
    for row, turn in zip(rows, traj.turns, strict=True):
        ids, mask = row.item["input_ids"], row.item["loss_mask"].bool()
        assert encoder.tokenizer.decode(ids[mask]) == turn.raw_text + "<|im_end|>"
        assert not mask[: int(torch.nonzero(mask).min())].any()  # the context itself is never trained
    assert "pixel_values" in rows[1].item.get("multi_modal_inputs", {}) or "pixel_values_videos" in rows[
        1
    ].item.get("multi_modal_inputs", {})  # the turn after the frames request sees the frames


def test_information_gain_is_an_answer_entropy_difference(oracle_turns) -> None:
    policy, encoder, task, _, rows = oracle_turns
    before = answer_entropy(policy.model, encoder, rows[0].context, task)
    after = answer_entropy(policy.model, encoder, rows[1].context, task)
    assert 0.0 <= min(before, after) and max(before, after) <= math.log(len(task.choices)) + 1e-6
    gains = information_gains(policy.model, encoder, rows, task)
    assert gains[0] == pytest.approx(before - after) and gains[-1] == 0.0  # the answer turn has no percept


def test_target_kl_stops_the_update_before_the_step_that_would_pass_it(oracle_turns, cfg_tiny) -> None:
    """``local.target_kl``: no step once a mini-batch measures the policy past the bound; None never stops."""
    policy, encoder, _, _, turns = oracle_turns
    base = dataclasses.replace(Args.from_config(cfg_tiny), lr=0.5, mini_batch_rows=1)  # one row a step
    assert len(turns) >= 2 and base.local["target_kl"] is None and "target_kl" not in base.fingerprint()
    bounded = dataclasses.replace(base, local={**base.local, "target_kl": 0.02})
    assert bounded.fingerprint()["target_kl"] == 0.02  # a bounded run resumes only with its bound

    def run(target_kl: float | None) -> tuple[dict, float]:
        model = copy.deepcopy(policy.model)
        rows = [copy.copy(r) for r in turns]
        score_rows(model, rows, encoder.pad_id)
        adv = -torch.ones(len(rows), max(r.mask.shape[0] for r in rows))  # every sampled token made rarer
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=base.lr)
        before = [p.detach().clone() for p in model.parameters()]
        args = dataclasses.replace(base, local={**base.local, "target_kl": target_kl})
        stats = update(model, opt, rows, adv, args, encoder.pad_id)
        moved = sum(
            float((p.detach() - b).abs().sum()) for p, b in zip(model.parameters(), before, strict=True)
        )
        return stats, moved

    free, moved = run(None)
    assert (free["opt_steps"], free["kl_stop"]) == (len(turns), 0.0) and moved > 0
    assert free["approx_kl"] > 1e-3  # a step of lr 0.5 against every token moves the next row's log-probs
    stopped, moved = run(-1.0)  # the first mini-batch, before any step, already measures KL ~0 > -1
    assert (stopped["opt_steps"], stopped["kl_stop"], moved) == (0.0, 1.0, 0.0)
    one, moved = run(1e-3)  # the rollout policy itself (KL ~0) steps once; the moved policy stops
    assert (one["opt_steps"], one["kl_stop"]) == (1.0, 1.0) and moved > 0


def test_hold_answer_turns_keeps_the_answer_at_grpo_weight(oracle_turns, cfg_tiny) -> None:
    """taura.hold_answer_turns: the answer rows of a group keep weight 1 and the perceiving rows are weighted by
    their entropy over the perceiving rows' mean; the knob belongs to the resume fingerprint only when on."""
    policy, encoder, _, _, turns = oracle_turns
    off = Args.from_config(cfg_tiny)
    assert off.hold_answer_turns is False and "hold_answer_turns" not in off.fingerprint()
    on = dataclasses.replace(off, hold_answer_turns=True)
    assert on.fingerprint()["hold_answer_turns"] is True
    # two episodes of one group (the oracle's turns once more with another reward), so the advantage is not 0
    rows = [copy.copy(r) for r in turns] + [dataclasses.replace(r, traj=1, reward=0.0) for r in turns]
    score_rows(policy.model, rows, encoder.pad_id)
    answers = [r.record.action_type == "answer" for r in rows]
    assert any(answers) and not all(answers)
    held, plain = advantages(rows, on, None), advantages(rows, off, None)
    entropy = plain.turn_entropy
    looked = [not a for a in answers]
    expected = torch.where(torch.tensor(answers), 1.0, entropy / entropy[looked].mean())
    torch.testing.assert_close(held.weights, expected)
    torch.testing.assert_close(held.outcome_advantage, plain.outcome_advantage)
    assert not torch.allclose(held.weights, plain.weights)  # the entropy of the answer turn counts otherwise


def test_kl_estimates_to_the_reference_match_their_definitions() -> None:
    """verl's kl_loss_type names: k1 is the log ratio, k2 half its square, k3 = r - log r - 1 (r = p_ref / p)."""
    logp = torch.tensor([-1.0, -2.0, -0.5, -3.0])
    ref = torch.tensor([-1.0, -1.0, -2.5, -2.0])
    d = logp - ref
    assert torch.allclose(kl_to_reference(logp, ref, "k1"), d)
    assert torch.allclose(kl_to_reference(logp, ref, "kl"), d)
    assert torch.allclose(kl_to_reference(logp, ref, "abs"), d.abs())
    assert torch.allclose(kl_to_reference(logp, ref, "mse"), 0.5 * d**2)
    k3 = kl_to_reference(logp, ref, "low_var_kl")
    assert torch.allclose(k3, torch.exp(-d) + d - 1.0) and torch.allclose(
        k3, kl_to_reference(logp, ref, "k3")
    )
    assert float(k3[0]) == 0.0 and bool((k3 >= 0).all())  # zero only where the policy equals the reference
    assert float(kl_to_reference(torch.tensor([0.0]), torch.tensor([-60.0]), "k3")) == 10.0  # bounded as verl
    with pytest.raises(ValueError, match="kl_loss_type"):
        kl_to_reference(logp, ref, "forward")


def test_kl_loss_settings_come_from_verls_actor_keys(cfg_tiny) -> None:
    off = Args.from_config(cfg_tiny)
    assert (
        off.kl_coef == 0.0 and "kl_coef" not in off.fingerprint()
    )  # runs saved before the knob still resume
    on = compose_config([*SMALL, "actor_rollout_ref.model.path=tiny-random", "local.train_tasks=x.jsonl",
                         "actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.actor.kl_loss_coef=0.05"])  # fmt: skip
    args = Args.from_config(on)
    assert (args.kl_coef, args.kl_type) == (0.05, "low_var_kl")  # verl's default estimate
    assert args.fingerprint()["kl_coef"] == 0.05  # a run with the anchor resumes only with it
    with pytest.raises(ValueError, match="kl_loss_type"):
        dataclasses.replace(args, kl_type="forward")


def test_kl_loss_pulls_the_policy_toward_the_reference(oracle_turns, cfg_tiny) -> None:
    """With no advantage to follow, the KL term alone moves the policy, and toward the reference: a policy
    nudged away from its reference drifts back, step by step; at the reference there is no gradient at all."""
    policy, encoder, _, _, turns = oracle_turns
    base = dataclasses.replace(Args.from_config(cfg_tiny), lr=0.1, mini_batch_rows=len(turns), kl_coef=1.0)
    zero = torch.zeros(len(turns), max(8, *(int(r.item["input_ids"].shape[-1]) for r in turns)))

    def run(noise: float, steps: int) -> tuple[list[float], float]:
        model = copy.deepcopy(policy.model)
        with torch.no_grad():  # the policy as some RL steps might have left it
            for k, param in enumerate(model.parameters()):
                param += noise * torch.randn(param.shape, generator=torch.Generator().manual_seed(k))
        rows = [copy.copy(r) for r in turns]
        score_rows(model, rows, encoder.pad_id, ref_model=policy.model)
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=base.lr)  # plain descent
        before = [p.detach().clone() for p in model.parameters()]
        kls = [update(model, opt, rows, zero, base, encoder.pad_id)["ref_kl"] for _ in range(steps)]
        moved = sum(
            float((p.detach() - b).abs().sum()) for p, b in zip(model.parameters(), before, strict=True)
        )
        return kls, moved

    kls, moved = run(0.0, 1)
    assert kls == [pytest.approx(0.0, abs=1e-6)] and moved == 0.0  # k3 has zero gradient at the reference
    kls, moved = run(0.05, 5)
    assert kls[0] > 1e-3 and moved > 0
    assert all(b < a for a, b in zip(kls, kls[1:], strict=False))  # each step closer to the reference


def test_kl_anchor_is_the_starting_model_also_after_resume(
    train_tasks: Path, random_dir: Path, tmp_path: Path
) -> None:
    """metrics.csv `ref_kl`: ~0 in iteration 1 (the policy starts as the reference and takes one small step
    before its second mini-batch), large once it has moved (lr 0.01), and still measured against the starting
    model when a run resumes from a checkpoint."""
    over = [*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}",
            "actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.actor.kl_loss_coef=0.1",
            "actor_rollout_ref.actor.optim.lr=0.01", f"local.run_dir={tmp_path}"]  # fmt: skip
    rows = read_csv_rows(train(compose_config([*over, "local.iterations=2"])))
    assert float(rows[0]["ref_kl"]) == pytest.approx(0.0, abs=1e-5) and float(rows[1]["ref_kl"]) > 0.5
    rows = read_csv_rows(
        train(compose_config([*over, "local.iterations=3"]))
    )  # resumes from the iteration-2 checkpoint
    # from the start: ~5 (iteration 2: ~3.5); the iteration-2 checkpoint as anchor would give ~0.006 (one step)
    assert len(rows) == 3 and float(rows[2]["ref_kl"]) > 0.5


@pytest.fixture(scope="module")
def sft_parquet(oracle_turns, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The oracle's episode (frames, then the right answer) exported as SFT rows, as rl/sft_export writes them."""
    from rl.sft.export import export_parquet

    traj = oracle_turns[3]
    path = tmp_path_factory.mktemp("anchor") / "train.parquet"
    assert export_parquet([traj], path) == len(traj.turns) >= 2
    return path


def test_sft_anchor_alone_moves_the_policy_toward_the_sft_rows(
    oracle_turns, cfg_tiny, sft_parquet: Path
) -> None:
    """With zero advantages and no KL the PPO term has no gradient: the policy moves only with the anchor, and
    each step lowers the anchor rows' NLL (logged as sft_nll)."""
    from rl.local.sft_anchor import SFTAnchor

    policy, encoder, _, _, turns = oracle_turns
    base = dataclasses.replace(Args.from_config(cfg_tiny), lr=0.05, mini_batch_rows=len(turns), kl_coef=0.0)
    zero = torch.zeros(len(turns), max(8, *(int(r.item["input_ids"].shape[-1]) for r in turns)))
    anchor = SFTAnchor(str(sft_parquet), 1.0, 99, 0, encoder)  # every row, each step

    def run(with_anchor: SFTAnchor | None, steps: int) -> tuple[list[float], float]:
        model = copy.deepcopy(policy.model)
        rows = [copy.copy(r) for r in turns]
        score_rows(model, rows, encoder.pad_id)
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=base.lr)
        before = [p.detach().clone() for p in model.parameters()]
        nll = [
            update(model, opt, rows, zero, base, encoder.pad_id, with_anchor, k)["sft_nll"]
            for k in range(steps)
        ]
        moved = sum(
            float((p.detach() - b).abs().sum()) for p, b in zip(model.parameters(), before, strict=True)
        )
        return nll, moved

    nll, moved = run(None, 1)
    assert nll == [0.0] and moved == 0.0  # no anchor, no advantage: nothing to follow
    nll, moved = run(anchor, 4)
    assert moved > 0 and nll[0] > 1.0  # random weights: the oracle's turns are unlikely
    assert all(b < a for a, b in zip(nll, nll[1:], strict=False))  # each step makes the SFT rows likelier


def test_sft_anchor_rows_are_seeded_and_its_settings_are_checked(oracle_turns, sft_parquet: Path) -> None:
    from rl.local.sft_anchor import SFTAnchor

    encoder = oracle_turns[1]
    one, two = (SFTAnchor(str(sft_parquet), 0.5, 1, 7, encoder) for _ in range(2))
    # an anchor row is the rollout row of the same turn, token for token
    for k, turn in enumerate(oracle_turns[4]):
        row = one.item(k)
        assert torch.equal(row["input_ids"], turn.item["input_ids"])
        assert torch.equal(row["loss_mask"], turn.item["loss_mask"])
        assert torch.equal(row["position_ids"], turn.item["position_ids"])
    draws = [one.indices(it, step) for it in range(3) for step in range(4)]
    # resume draws the same rows, and every row gets drawn
    assert draws == [two.indices(it, step) for it in range(3) for step in range(4)]
    assert len({tuple(d) for d in draws}) == len(one)
    # capped at the set's size, without replacement
    every = SFTAnchor(str(sft_parquet), 0.5, 99, 7, encoder).indices(0, 0)
    assert sorted(every) == list(range(len(one)))
    assert SFTAnchor.from_local({"seed": 0, "sft_anchor": {"data": None}}, encoder) is None
    with pytest.raises(ValueError, match=r"sft_anchor\.coef"):
        SFTAnchor(str(sft_parquet), 0.0, 2, 0, encoder)
    with pytest.raises(ValueError, match=r"sft_anchor\.rows"):
        SFTAnchor(str(sft_parquet), 0.5, 0, 0, encoder)
    with pytest.raises(FileNotFoundError, match=r"python -m rl\.sft\.export"):
        SFTAnchor(str(sft_parquet) + ".missing", 0.5, 2, 0, encoder)


def test_sft_anchor_run_logs_its_nll_and_belongs_to_the_resume_fingerprint(
    train_tasks: Path, random_dir: Path, sft_parquet: Path, tmp_path: Path
) -> None:
    over = [*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}",
            f"local.run_dir={tmp_path}", f"local.sft_anchor.data={sft_parquet}", "local.iterations=1"]  # fmt: skip
    rows = read_csv_rows(train(compose_config(over)))
    assert len(rows) == 1 and math.isfinite(float(rows[0]["sft_nll"])) and float(rows[0]["sft_nll"]) > 0
    plain = read_csv_rows(train(compose_config([*SMALL, f"actor_rollout_ref.model.path={random_dir}",
                                        f"local.train_tasks={train_tasks}", f"local.run_dir={tmp_path / 'plain'}",
                                        "local.iterations=1"])))  # fmt: skip
    assert float(plain[0]["sft_nll"]) == 0.0  # off by default
    with pytest.raises(ValueError, match="other settings"):  # another anchor weight is another run
        train(compose_config([*over[:-1], "local.iterations=2", "local.sft_anchor.coef=0.25"]))
