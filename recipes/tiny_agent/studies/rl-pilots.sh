#!/usr/bin/env bash
# TAURA from earlier agents, pilots (before the shipped agent): a free-decoding pilot from the event-phase agent;
# constrained rollouts from it over three seeds (TAURA, GRPO; ig and oracle at seed 0; lr 1e-5); from the
# per-frame agent and from the agent whose warm-up was given the Observation; eight fixed tasks; and the turn
# budget after RL. Page: docs/experiments/rl-pilots.md. Needs the agents of event-phase-agent.sh.
set -euo pipefail

cd "$(dirname "$0")/../../.."

pilot() {  # pilot AGENT_DIR RUN_DIR [OVERRIDE...]: the local trainer from an earlier agent, its own tasks
    local agent=$1 dir=$2
    shift 2
    python rl/train_local.py --config-dir recipes/tiny_agent/conf +exp=tiny_agent \
        actor_rollout_ref.model.path=$agent/agent local.train_tasks=$agent/synth_train/tasks.jsonl \
        local.eval_tasks=$agent/synth_eval/tasks.jsonl local.run_dir=$dir "$@"
}
pilot_eval() {  # pilot_eval MODEL AGENT_DIR OUT [OVERRIDE...]: the pilot's held-out row, constrained
    local model=$1 agent=$2 out=$3
    shift 3
    python scripts/eval.py unfreeze=true benchmark.dataset=tasks benchmark.annotations=$agent/synth_eval/tasks.jsonl \
        benchmark.name=tiny-heldout policy.name=transformers out_dir=$out +policy.kwargs.model=$model \
        +policy.kwargs.max_new_tokens=384 +policy.kwargs.device=cpu +policy.kwargs.constrained=True \
        benchmark.limits.max_frames=8 benchmark.limits.max_clip_s=10.0 benchmark.limits.max_audio_s=30.0 "$@"
    python scripts/compare_runs.py $out $agent/eval/agent
}
EVENT=runs/tiny_event PER_FRAME=runs/tiny_per_frame OBS=runs/tiny_obs_given

# the free-decoding pilot, 6 iterations (GRPO was stopped after 2)
pilot $EVENT runs/taura_pilot local.iterations=6 local.eval_every=6 taura.mode=taura local.constrained=false
pilot $EVENT runs/grpo_pilot local.iterations=2 local.eval_every=6 taura.mode=grpo local.constrained=false

# constrained rollouts from the event-phase agent: three seeds per algorithm at lr 1e-4, 4 iterations
for SEED in 0 1 2; do
    for MODE in taura grpo; do
        pilot $EVENT runs/${MODE}_c_s$SEED local.iterations=4 local.eval_every=4 local.seed=$SEED taura.mode=$MODE
        pilot_eval runs/${MODE}_c_s$SEED/final $EVENT runs/eval_${MODE}_c_s$SEED
    done
done
for MODE in ig oracle; do
    pilot $EVENT runs/${MODE}_c local.iterations=4 local.eval_every=4 local.seed=0 taura.mode=$MODE
    pilot_eval runs/${MODE}_c/final $EVENT runs/eval_${MODE}_c
done
for MODE in taura grpo; do   # lr 1e-5, 6 iterations, the trainer's own 16-task eval
    pilot $EVENT runs/${MODE}_c_lr1e5 local.iterations=6 local.eval_every=6 local.seed=0 taura.mode=$MODE \
        actor_rollout_ref.actor.optim.lr=1e-5
done
python scripts/compare_runs.py --average runs/eval_taura_c_s0+runs/eval_taura_c_s1+runs/eval_taura_c_s2 $EVENT/eval/agent
python scripts/compare_runs.py --average runs/eval_grpo_c_s0+runs/eval_grpo_c_s1+runs/eval_grpo_c_s2 $EVENT/eval/agent
python scripts/compare_runs.py --average runs/eval_taura_c_s0+runs/eval_taura_c_s1+runs/eval_taura_c_s2 \
    runs/eval_grpo_c_s0+runs/eval_grpo_c_s1+runs/eval_grpo_c_s2
for PAIR in ig_c:taura_c_s0 ig_c:grpo_c_s0 oracle_c:taura_c_s0 oracle_c:grpo_c_s0 oracle_c:ig_c; do
    python scripts/compare_runs.py runs/eval_${PAIR%%:*} runs/eval_${PAIR#*:}
done

# from the per-frame agent: seed 0, 4 iterations; then 8 tasks an iteration, 6 iterations, lr 5e-5
for MODE in taura grpo; do
    pilot $PER_FRAME runs/${MODE}_pf local.iterations=4 local.eval_every=0 local.seed=0 taura.mode=$MODE
    pilot_eval runs/${MODE}_pf/final $PER_FRAME runs/eval_${MODE}_pf benchmark.limits.max_answer_chars=40
    pilot $PER_FRAME runs/${MODE}_pf_b8 local.iterations=6 local.eval_every=0 local.seed=0 taura.mode=$MODE \
        data.train_batch_size=8 actor_rollout_ref.actor.optim.lr=5e-5
    pilot_eval runs/${MODE}_pf_b8/final $PER_FRAME runs/eval_${MODE}_pf_b8 benchmark.limits.max_answer_chars=40
done
python scripts/compare_runs.py runs/eval_taura_pf runs/eval_grpo_pf
python scripts/compare_runs.py runs/eval_taura_pf_b8 runs/eval_grpo_pf_b8

# from the agent whose warm-up was given the Observation: seed 0, 4 iterations
for MODE in taura grpo; do
    pilot $OBS runs/${MODE}_og local.iterations=4 local.eval_every=0 local.seed=0 taura.mode=$MODE
    pilot_eval runs/${MODE}_og/final $OBS runs/eval_${MODE}_og benchmark.limits.max_answer_chars=40
done
python scripts/compare_runs.py runs/eval_taura_og runs/eval_grpo_og

# eight fixed training tasks (the first four width and the first four beep-pitch questions), all eight every
# iteration, 4 episodes each (then 8), greedy eval on the same eight every 2 iterations
python - $OBS/synth_train <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1] + "/tasks.jsonl")]
with open(sys.argv[1] + "/fixed8.jsonl", "w") as f:
    for k in ("shape_width_size", "beep_pitch_num"):
        f.writelines(json.dumps(r) + "\n" for r in [r for r in rows if r["id"].split("-")[-2] == k][:4])
PY
FIXED=(local.train_tasks=$OBS/synth_train/fixed8.jsonl local.eval_tasks=$OBS/synth_train/fixed8.jsonl
    local.iterations=8 local.eval_every=2 local.seed=0 data.train_batch_size=8 taura.mode=taura)
pilot $OBS runs/fixed8 "${FIXED[@]}"
pilot $OBS runs/fixed8_lr1e3 "${FIXED[@]}" actor_rollout_ref.actor.optim.lr=1e-3   # stopped in iteration 7
pilot $OBS runs/fixed8_n8 "${FIXED[@]}" actor_rollout_ref.rollout.n=8
python scripts/eval.py unfreeze=true benchmark.dataset=tasks benchmark.annotations=$OBS/synth_train/fixed8.jsonl \
    benchmark.name=tiny-fixed8 policy.name=transformers out_dir=runs/eval_fixed8_sft +policy.kwargs.model=$OBS/agent \
    +policy.kwargs.max_new_tokens=384 +policy.kwargs.device=cpu +policy.kwargs.constrained=True \
    benchmark.limits.max_frames=8 benchmark.limits.max_clip_s=10.0 benchmark.limits.max_audio_s=30.0 \
    benchmark.limits.max_answer_chars=40   # the SFT agent's 0.325 on them

# the turn budget after RL: TAURA seed 0 at K = 2, 4, 8, 16, paired with the event-phase agent's sweep
python scripts/turn_scaling.py unfreeze=true benchmark.dataset=tasks benchmark.annotations=$EVENT/synth_eval/tasks.jsonl \
    benchmark.name=tiny-heldout policy.name=transformers out_dir=runs/scaling_taura_c +policy.kwargs.model=runs/taura_c_s0/final \
    +policy.kwargs.max_new_tokens=384 +policy.kwargs.device=cpu +policy.kwargs.constrained=True benchmark.limits.max_frames=8 \
    benchmark.limits.max_clip_s=10.0 benchmark.limits.max_audio_s=30.0 benchmark.limits.max_answer_chars=40 \
    'scaling.ks=[2,4,8,16]' 'scaling.seeds=[0]'
for K in 002 004 008 016; do
    python scripts/compare_runs.py runs/scaling_taura_c/K$K-s0 $EVENT/scaling/K$K-s0
done
