#!/usr/bin/env bash
# One-GPU smoke test of TAURA RL: a few real verl training steps on the tiny random Qwen2.5-Omni thinker,
# with the vLLM rollout and the omniagent agent loop on synthetic videos. Checks plumbing, not learning
# (the tiny model's outputs are noise, so rewards are ~0 and advantages mostly 0).
#
#   bash scripts/gpu_smoke.sh                       # 2 steps
#   STEPS=3 bash scripts/gpu_smoke.sh trainer.logger=[console,tensorboard]   # extra args: hydra overrides
#   bash scripts/gpu_smoke.sh --dry-run [overrides]  # print the training command it would run, and exit
#
# Needs: one CUDA GPU; verl 0.9.1 with its vLLM extra (pip install "verl[vllm]==0.9.1"); this repository
# installed (pip install -e .), which also installs the vLLM plugin (rl/verl_ext/vllm_plugin.py, entry point
# `vllm.general_plugins`) that lets every vLLM process serve the thinker-only checkpoint; ffmpeg or PyAV for
# the synthetic media. Everything goes to $OMNIAGENT_SMOKE_DIR (default /tmp/omniagent-gpu-smoke); the
# training log is $OMNIAGENT_SMOKE_DIR/train.log.
#
# What it does:
#   1. preflight: GPU, vLLM, verl versions, and the vLLM plugin's entry point;
#   2. builds the tiny thinker (omniagent/tiny_model.py) into a folder, passed as actor_rollout_ref.model.path;
#   3. makes 2 synthetic videos with tasks (envs/synth/) and turns them into verl RL parquet rows
#      (rl/verl_ext/rl_dataset.py; every row names the `omniagent` agent loop);
#   4. runs `python rl/train_taura.py +exp=tiny ...` for $STEPS steps and checks that every step logged its
#      TAURA metrics.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
PYTHON="${PYTHON:-python}"
WORK="${OMNIAGENT_SMOKE_DIR:-/tmp/omniagent-gpu-smoke}"
STEPS="${STEPS:-2}"
MODEL="$WORK/tiny-thinker-seed0"
DATA="$WORK/data"
LOG="$WORK/train.log"
DRY_RUN=0
if [[ "${1:-}" == "--dry-run" ]]; then
    DRY_RUN=1
    shift
fi

# flash-attn makes verl's packed (remove-padding) actor forward correct; without it, pad instead.
ATTN_ARGS=()
if ! "$PYTHON" -c "import flash_attn" 2>/dev/null; then
    ATTN_ARGS=(actor_rollout_ref.model.use_remove_padding=false
        +actor_rollout_ref.model.override_config.attn_implementation=sdpa)
fi
TRAIN_CMD=("$PYTHON" rl/train_taura.py +exp=tiny
    actor_rollout_ref.model.path="$MODEL"
    data.train_files="$DATA/train.parquet"
    data.val_files="$DATA/val.parquet"
    trainer.total_training_steps="$STEPS"
    trainer.val_before_train=false
    trainer.test_freq=-1
    trainer.save_freq=-1
    trainer.resume_mode=disable
    trainer.default_local_dir="$WORK/checkpoints"
    actor_rollout_ref.rollout.enforce_eager=true
    env.limits.max_frames=8
    ${ATTN_ARGS[@]+"${ATTN_ARGS[@]}"}
    "$@")
if [[ $DRY_RUN -eq 1 ]]; then
    printf '%q ' "${TRAIN_CMD[@]}"
    printf '\n'
    exit 0
fi
mkdir -p "$WORK" "$DATA"

echo "== 1/4 preflight"
"$PYTHON" - <<'PY'
import sys
from importlib.metadata import entry_points

import torch

if not torch.cuda.is_available():
    sys.exit("no CUDA GPU visible: this smoke test needs one (the CPU tests are `python -m pytest`)")
try:
    import vllm
except ImportError:
    sys.exit('vLLM is not installed: pip install "verl[vllm]==0.9.1"')
import transformers
import verl

plugins = [ep for ep in entry_points(group="vllm.general_plugins") if ep.name == "omniagent"]
if not plugins or not callable(plugins[0].load()):
    sys.exit("the omniagent vLLM plugin is not installed: pip install -e . (it declares the entry point)")
print(f"torch {torch.__version__}, GPU {torch.cuda.get_device_name(0)}, vllm {vllm.__version__}, "
      f"verl {verl.__version__}, transformers {transformers.__version__}, vLLM plugin {plugins[0].value}")
if verl.__version__ != "0.9.1":
    print(f"warning: written against verl 0.9.1, found {verl.__version__}", file=sys.stderr)
PY

echo "== 2/4 tiny thinker -> $MODEL"
OMNIAGENT_SMOKE_MODEL="$MODEL" "$PYTHON" -c '
import os
from omniagent.tiny_model import build_tiny_thinker
build_tiny_thinker(seed=0, out_dir=os.environ["OMNIAGENT_SMOKE_MODEL"])
'

echo "== 3/4 synthetic tasks -> $DATA"
"$PYTHON" -m envs.synth --out "$DATA/media" --seed 0 --n 2 --durations 30,60 --split train
"$PYTHON" -m rl.verl_ext.rl_dataset --tasks "$DATA/media/tasks.jsonl" --out "$DATA/train.parquet"
cp "$DATA/train.parquet" "$DATA/val.parquet"  # never read: validation is off below
if [[ ${#ATTN_ARGS[@]} -gt 0 ]]; then
    echo "flash-attn not installed: actor uses sdpa with padded batches"
fi

echo "== 4/4 train $STEPS steps (log: $LOG)"
set +e
"${TRAIN_CMD[@]}" 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
set -e
if [[ $status -ne 0 ]]; then
    echo "FAILED: rl/train_taura.py exited with $status (see $LOG)" >&2
    exit "$status"
fi

missing=0
for step in $(seq 1 "$STEPS"); do
    if ! grep -E "step:${step} - .*taura/weight/mean" "$LOG" >/dev/null; then
        echo "FAILED: no TAURA metrics logged for step $step (see $LOG)" >&2
        missing=1
    fi
done
[[ $missing -eq 0 ]] || exit 1
grep -Eo "step:${STEPS} - .*" "$LOG" | tr ' ' '\n' | grep -E "^(taura/|actor/pg_loss|response_length/mean|critic/score/mean)" || true
echo "OK: $STEPS TAURA steps on the tiny thinker with the vLLM rollout"
