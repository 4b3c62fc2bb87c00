"""Sampling and training agree (local.masked_stats, rl/local/sampling.py): a constrained rollout's rows train the
token ids the policy sampled, and their log-probs, PPO ratios and TAURA entropies are computed under the same
grammar-masked distribution, at the rollout temperature, that sampled them."""

from __future__ import annotations

import copy
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from envs.env import OmniVideoEnv
from envs.tasks import load_tasks_jsonl, save_tasks_jsonl
from rl.local.args import Args
from rl.local.bookkeeping import load_policy
from rl.local.groups import play_group
from rl.local.rollout import TurnEncoder, forward_stats
from rl.local.sampling import Allowed, masked_logits, replay_bitmask, token_stats, unpack
from rl.local.update import mini_batch_backward, score_rows
from rl.sft.step import collate
from rl.train_local import compose_config

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["+exp=tiny", "data.train_batch_size=1", "actor_rollout_ref.rollout.n=2", "data.max_response_length=40",
         "actor_rollout_ref.actor.ppo_mini_batch_size=1", "env.turns.min=2", "env.turns.max=2",
         "local.progress=false", "local.constrained=true"]  # fmt: skip


@pytest.fixture(scope="module")
def mcq_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("masked")
    cmd = [
        sys.executable,
        "-m",
        "envs.synth",
        "--out",
        str(out / "s"),
        "--seed",
        "1",
        "--n",
        "1",
        "--durations",
        "30",
    ]
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, timeout=300)
    tasks = [t for t in load_tasks_jsonl(out / "s" / "tasks.jsonl") if t.task_type == "mcq"]
    save_tasks_jsonl(tasks, out / "mcq.jsonl")
    return out / "mcq.jsonl"


def _args(tasks: Path, model: Path, *extra: str) -> Args:
    return Args.from_config(compose_config([*SMALL, f"actor_rollout_ref.model.path={model}",
                                            f"local.train_tasks={tasks}", *extra]))  # fmt: skip


@pytest.fixture(scope="module")
def played(mcq_tasks: Path, tiny_dir: Path):
    """One group of two constrained episodes of the tiny random thinker, sampled at temperature 0.7."""
    args = _args(mcq_tasks, tiny_dir, "actor_rollout_ref.rollout.temperature=0.7")
    policy = load_policy(str(tiny_dir), args)
    encoder = TurnEncoder(policy.processor, policy.model.config, policy.use_audio_in_video)
    env = OmniVideoEnv()
    torch.manual_seed(0)
    recorded = []
    inner_act = policy.act

    def act(messages):  # keep what the backend returned, to compare with the rows
        out = inner_act(messages)
        recorded.append(out)
        return out

    policy.act = act
    trajs, rows = play_group(policy, encoder, env, load_tasks_jsonl(mcq_tasks)[0], args, 0, seed=3)
    env.close()
    return args, policy, encoder, rows, recorded


def test_masked_stats_follow_constrained_and_are_in_the_resume_fingerprint(
    mcq_tasks: Path, tiny_dir: Path
) -> None:
    on = _args(mcq_tasks, tiny_dir)
    off = _args(mcq_tasks, tiny_dir, "local.constrained=false")
    assert on.masked_stats and on.stats_temperature == 1.0 and on.fingerprint()["masked_stats"] is True
    assert not off.masked_stats and off.stats_temperature is None and "masked_stats" not in off.fingerprint()
    assert not _args(mcq_tasks, tiny_dir, "local.masked_stats=false").masked_stats
    with pytest.raises(ValueError, match="top_p"):
        _args(mcq_tasks, tiny_dir, "actor_rollout_ref.rollout.top_p=0.9")


def test_rows_train_the_sampled_ids_with_the_grammar_of_each_turn(played) -> None:
    args, policy, _, rows, recorded = played
    assert len(rows) == len(recorded) >= 2
    for row, out in zip(rows, recorded, strict=True):
        ids = row.item["input_ids"]
        trained = ids[row.item["loss_mask"].bool()].tolist()
        assert trained == out.token_ids and ids[-len(out.token_ids) :].tolist() == out.token_ids
        assert row.allowed is not None and row.allowed.bitmask.shape[0] == len(out.token_ids)
        assert row.allowed.at == len(ids) - len(out.token_ids) - 1
        bits = unpack(row.allowed.bitmask, policy.model.config.text_config.vocab_size)
        assert all(bool(bits[j, t]) for j, t in enumerate(out.token_ids))  # every sampled id was allowed
        assert all(0 < int(bits[j].sum()) for j in range(bits.shape[0]))


def test_log_probs_and_entropies_are_those_the_sampler_used(played) -> None:
    """The backend records log-probs of the masked logits at temperature 1; the trainer's masked statistics at
    temperature 1 reproduce them, and at 0.7 they are the sampled tokens' probabilities under logits / 0.7."""
    args, policy, encoder, rows, recorded = played
    model, gaps = policy.model, []
    for row, out in zip(rows, recorded, strict=True):
        batch = collate([row.item], encoder.pad_id)
        with torch.no_grad():
            logp1, ent1, mask = forward_stats(model, batch, allowed=row.allowed, temperature=1.0)
        at = torch.nonzero(mask).squeeze(-1)
        assert torch.allclose(logp1[at], torch.tensor(out.token_logprobs), atol=1e-4)
        assert torch.allclose(ent1[at], torch.tensor(out.token_entropies), atol=1e-4)
        with torch.no_grad():
            logits = model(**{k: v for k, v in batch.items() if k != "loss_mask"}, use_cache=False).logits[0]
            logp07, ent07, _ = forward_stats(model, batch, allowed=row.allowed, temperature=0.7)
            full, full_ent, _ = forward_stats(model, batch)
        bits = unpack(row.allowed.bitmask, logits.shape[-1])
        for j, pos in enumerate(at.tolist()):
            scaled = (logits[pos] / 0.7).masked_fill(~bits[j], float("-inf"))
            want = torch.log_softmax(scaled, -1)[out.token_ids[j]]
            assert abs(float(logp07[pos]) - float(want)) < 1e-4
            assert (
                float(logp1[pos]) >= float(full[pos]) - 1e-6
            )  # renormalised over a subset holding the token
            assert float(ent1[pos]) <= math.log(int(bits[j].sum())) + 1e-5
        gaps.append(float((logp1 - full)[at].max()))
    assert (
        max(gaps) > 1e-3
    )  # the random model puts mass outside the grammar: masked and full log-probs differ


def test_the_ppo_ratio_is_one_before_an_update_under_masked_stats(played) -> None:
    args, policy, encoder, rows, _ = played
    rows = copy.deepcopy(rows)
    score_rows(policy.model, rows, encoder.pad_id, temperature=args.stats_temperature)
    adv = [torch.ones(r.mask.shape[0]) for r in rows]
    policy.model.train()
    done = mini_batch_backward(policy.model, rows, adv, args, encoder.pad_id)
    policy.model.zero_grad(set_to_none=True)
    policy.model.eval()
    assert abs(done["approx_kl"]) < 1e-6 and done["clipfrac"] == 0.0
    # scored over the full vocabulary instead, the same rows would show a ratio away from 1
    for row in rows:
        row.allowed = None
    score_rows(policy.model, rows, encoder.pad_id, temperature=None)
    policy.model.train()
    mismatch = mini_batch_backward(policy.model, rows, adv, args, encoder.pad_id)
    policy.model.zero_grad(set_to_none=True)
    policy.model.eval()
    assert abs(mismatch["approx_kl"]) > 1e-4


def test_a_forced_token_has_probability_one_and_a_rejected_one_is_refused(played) -> None:
    _, policy, _, _, _ = played
    logits = torch.randn(4, 70)
    bitmask = torch.zeros(1, 3, dtype=torch.int32)
    bitmask[0, 1] = 1 << 3  # only token 35 allowed at position 1
    out = masked_logits(logits, Allowed(1, bitmask), 1.0)
    ids = torch.tensor([0, 5, 35, 3])  # the logits at position 1 predict the token at position 2
    logp, ent = token_stats(out, ids)
    assert float(logp[1]) == 0.0 and float(ent[1]) == 0.0 and torch.isfinite(ent).all()
    assert float(logp[0]) < 0.0 and float(ent[0]) > 0.0
    assert torch.equal(out[0], logits[0]) and torch.equal(out[2:], logits[2:])
    with_grad = masked_logits(logits.clone().requires_grad_(True), Allowed(1, bitmask), 1.0)
    assert torch.equal(torch.isinf(with_grad), torch.isinf(out))
    compiled = policy.grammar.current_grammar()
    letter = policy.processor.tokenizer.convert_tokens_to_ids("A")  # a turn opens with '{', never with 'A'
    with pytest.raises(ValueError, match="rejects sampled token"):
        replay_bitmask(compiled, [letter])
    assert replay_bitmask(compiled, []).shape[0] == 0


def test_unconstrained_rows_re_encode_the_text_with_full_vocabulary_stats(
    mcq_tasks: Path, tiny_dir: Path
) -> None:
    args = _args(mcq_tasks, tiny_dir, "local.constrained=false")
    policy = load_policy(str(tiny_dir), args)
    encoder = TurnEncoder(policy.processor, policy.model.config, policy.use_audio_in_video)
    env = OmniVideoEnv()
    torch.manual_seed(0)
    _, rows = play_group(policy, encoder, env, load_tasks_jsonl(mcq_tasks)[0], args, 0, seed=3)
    env.close()
    row = rows[0]
    assert row.allowed is None
    batch = collate([row.item], encoder.pad_id)
    with torch.no_grad():
        logp, ent, _ = forward_stats(policy.model, batch)
        logits = (
            policy.model(**{k: v for k, v in batch.items() if k != "loss_mask"}, use_cache=False)
            .logits[0]
            .float()
        )
    logp_all = torch.log_softmax(logits, -1)
    ids = batch["input_ids"][0]
    want = logp_all.gather(-1, torch.roll(ids, -1).unsqueeze(-1)).squeeze(-1)
    assert torch.equal(logp[:-1], want[:-1]) and torch.equal(ent, -(logp_all.exp() * logp_all).sum(-1))
