# Shared by the study scripts in this folder: `source` it after `cd` to the repository root; it runs nothing.
# Each study script names its own parameters at its top and calls these helpers; every helper is one command
# of the records (docs/experiments/), written once.

# The shipped agent (`--model tiny`) as the RL studies start from it: the recipe's training and held-out
# tasks (its data stage) and a copy of the shipped weights.
SHIP=runs/tiny_ship

# ship_data: runs/tiny_ship with the recipe's tasks and the shipped weights (the RL studies' starting point)
ship_data() {
    python -m recipes.tiny_agent --out runs/tiny_ship --stages data
    [ -d "$SHIP/agent" ] || cp -r omniagent/assets/tiny_agent "$SHIP/agent"
}

# copy_agent DIR: a folder holding the shipped weights and training tasks, for the recipe's eval stage on
# another held-out seed (the recipe reuses what the folder holds and builds only the new set)
copy_agent() {
    mkdir -p "$1" && cp -r "$SHIP/agent" "$SHIP/synth_train" "$1/"
}

# The per-call caps the tiny agent is trained and evaluated under.
LIMITS=(benchmark.limits.max_frames=8 benchmark.limits.max_clip_s=10.0 benchmark.limits.max_audio_s=30.0
    benchmark.limits.max_answer_chars=40)

# heldout MODEL TASKS OUT [OVERRIDE...]: one held-out row as every RL study evaluated it: greedy, constrained,
# the recipe's caps, one thread, overlap-guarded against the shipped agent's training tasks.
heldout() {
    local model=$1 tasks=$2 out=$3
    shift 3
    OMP_NUM_THREADS=1 python scripts/eval.py unfreeze=true benchmark.dataset=tasks \
        benchmark.annotations="$tasks" benchmark.name=tiny-heldout 'benchmark.dataset_kwargs={}' \
        policy.name=transformers out_dir="$out" workers=1 progress=false \
        overlap_guard.train_set="$SHIP/synth_train/tasks.jsonl" +policy.kwargs.model="$model" \
        +policy.kwargs.max_new_tokens=384 +policy.kwargs.device=cpu +policy.kwargs.constrained=True \
        "${LIMITS[@]}" "$@"
}

# media_and_blind MODEL SETDIR OUT: MODEL on a held-out set's media (OUT) and on its blind copy, black frames
# and silence of the same durations (OUT_blind); SETDIR is a folder the recipe's eval stage wrote
media_and_blind() {
    heldout "$1" "$2/synth_eval/tasks.jsonl" "$3"
    heldout "$1" "$2/synth_blind/tasks.jsonl" "$3_blind"
}

# circular MODEL SETDIR OUT: MODEL on the set's multiple-choice questions under every rotation of their options
circular() {
    heldout "$1" "$2/synth_eval/tasks.jsonl" "$3" circular=true 'benchmark.task_types=[mcq]'
}

# train RUN_DIR [OVERRIDE...]: the local trainer from the shipped agent, 8 tasks x 8 episodes an iteration,
# 16 iterations unless an override says otherwise, one thread (two runs share a 2-core machine)
train() {
    local dir=$1
    shift
    OMP_NUM_THREADS=1 python rl/train_local.py --config-dir recipes/tiny_agent/conf +exp=tiny_agent \
        actor_rollout_ref.model.path="$SHIP/agent" local.train_tasks="$SHIP/synth_train/tasks.jsonl" \
        local.iterations=16 data.train_batch_size=8 actor_rollout_ref.rollout.n=8 local.run_dir="$dir" "$@"
}

# The settings the RL studies added one by one (each study's script names the ones it ran).
EVAL_TASKS=(local.eval_tasks="$SHIP/synth_eval/tasks.jsonl")
DRGRPO=(actor_rollout_ref.actor.optim.lr=2.5e-4 algorithm.norm_adv_by_std_in_grpo=false)
GATE=(env.reward.evidence_gate=true)
BONUS=(env.reward.evidence_bonus=0.2)
READING=(env.reward.reading_credit=0.5)
EVENTS=(env.reward.reading_scope=events)
KL=(actor_rollout_ref.actor.use_kl_loss=true actor_rollout_ref.actor.kl_loss_coef=0.2
    actor_rollout_ref.actor.kl_loss_type=low_var_kl)
# the KL-anchor study's settings, the base of every later RL study
ANCHORED=(local.eval_every=0 "${DRGRPO[@]}" local.shuffle_options=true "${GATE[@]}" "${BONUS[@]}"
    "${READING[@]}" "${EVENTS[@]}" "${KL[@]}" local.progress=false)
# the held TAURA recipe of the 32-iteration study (its GRPO twin: the same with taura.mode=grpo and no hold)
HELD=("${ANCHORED[@]}" taura.mode=taura taura.hold_answer_turns=true local.iterations=32)
GRPO_KL=("${ANCHORED[@]}" taura.mode=grpo local.iterations=32)

# in_parallel FUNCTION...: run each function in the background and wait for all; fails when any fails
in_parallel() {
    local pids=() f p
    for f in "$@"; do
        "$f" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
}

# training_ends RUN...: a run's metrics.csv columns averaged over its first and last four iterations
training_ends() {
    python - "$@" <<'PY'
import csv, sys
for run in sys.argv[1:]:
    rows = list(csv.DictReader(open(run + "/metrics.csv")))
    for col in ("reading", "turns", "frames", "seconds", "ref_kl"):
        if col in rows[0]:
            v = [float(x[col]) for x in rows]
            print(run, len(v), col, "first four", round(sum(v[:4]) / 4, 3), "last four", round(sum(v[-4:]) / 4, 3))
PY
}

# answers_by_category RUN...: score, commonest answers and commonest truths of each number category
answers_by_category() {
    python - "$@" <<'PY'
import collections, json, sys
cats = ("beep_count_num", "scene_change_num", "beep_pitch_num", "flash_count_num", "shape_width_size")
for run in sys.argv[1:]:
    rows = [json.loads(line) for line in open(run + "/results.jsonl")]
    for cat in cats:
        got = [r for r in rows if r["category"] == cat]
        if got:
            print(run, cat, len(got), "score", round(sum(r["reward"] or 0 for r in got) / len(got), 3),
                  "answers", collections.Counter(str(r["prediction"]) for r in got).most_common(3),
                  "truth", collections.Counter(str(r["ground_truth"]) for r in got).most_common(3))
PY
}

# mcq_letters RUN...: a held-out run's multiple-choice answers by letter, the right letters, and the letters of
# its right answers
mcq_letters() {
    python - "$@" <<'PY'
import collections, json, sys
for run in sys.argv[1:]:
    rows = [r for r in map(json.loads, open(run + "/trajectories.jsonl")) if r["choices"]]
    print(run, "answered", collections.Counter(str(r["answer"]) for r in rows), "right letters",
          collections.Counter(str(r["ground_truth"]) for r in rows), "right answers",
          collections.Counter(str(r["answer"]) for r in rows if r["reward"] == 1))
PY
}
