# Shared set-up of the testbed's study scripts (sourced from the repository root, not run): one thread a job (two
# jobs share the two cores), and wait_all, which waits for each background job by its id so that a failed job
# stops the script (a bare `wait` returns 0).
export OMP_NUM_THREADS=1
PIDS=()
wait_all() { for PID in "${PIDS[@]}"; do wait "$PID"; done; PIDS=(); }

# warm_up DATA SEED FOLDER: the recipe's text warm-up (span_copy train) from $BASE/init on the SFT parquet DATA, warm-up
# seed SEED, into FOLDER (logged to FOLDER.log); skipped once FOLDER holds a model, resumed from its saved state else.
warm_up() {
    if [ ! -e "$3/model.safetensors" ]; then
        python -m recipes.testbed.span_copy train --init "$BASE/init" --data "$1" --seed "$2" --out "$3" >> "$3.log" 2>&1
    fi
}

# copy_model SRC DST: a warm-up's saved model (weights, config, tokenizer, loss curve; not its probes or scores) from
# the folder SRC to DST, when SRC holds one and DST does not.
copy_model() {
    if [ -e "$1/model.safetensors" ] && [ ! -e "$2/model.safetensors" ]; then
        mkdir -p "$2"
        cp "$1"/{config,generation_config,processor_config,tokenizer,tokenizer_config}.json \
            "$1"/{chat_template.jinja,model.safetensors,warmup_loss.json} "$2"/
    fi
}

# copy_probes SRC DST: a run's turns on a probe set (SRC/field_probe.json, span_copy measure) copied into the folder DST,
# when DST holds none; for a study that reuses another's greedy turns on the same probes.
copy_probes() {
    if [ ! -e "$2/field_probe.json" ]; then
        mkdir -p "$2"
        cp "$1/field_probe.json" "$2/"
    fi
}

# fresh_field_set SEED [FOLDER]: the fresh set of seed SEED (32 videos of random fields, runs/testbed/data/study_SEED),
# linked as FOLDER/fresh_data/train, and the teacher once per question on it in field clauses (FOLDER/fresh_teacher);
# FOLDER is $OUT when not given; each part skipped once done.
fresh_field_set() {
    local set=runs/testbed/data/study_$1 out=${2:-$OUT}
    [ -e $set/tasks.jsonl ] || python -m recipes.testbed.study make-set --data runs/testbed/data --seed $1 \
        --videos 32 --blind-videos 0
    mkdir -p $out/fresh_data
    ln -sfn "$(realpath $set)" $out/fresh_data/train
    python -m recipes.testbed --out $out/fresh_teacher --data $out/fresh_data --field-clauses 1 --n-samples 1 \
        --seed 0 --stages synth export
}

# measure_orders RUN ARM TRAIN: the model RUN's turns on a fresh set's probes ($SET) in the teacher's fixed clause order
# ($FIXED) into $OUT/ARM/ and shuffled ($SHUFFLED, clause_shuffle make) into $OUT/ARMx/ (ARM holds the seed:
# shuf3600_s0), once each; TRAIN, the model's rows, marks the probes they hold.
measure_orders() {
    local fixed=$OUT/$2 shuffled=$OUT/${2%_s*}x_s${2##*_s}
    mkdir -p $fixed $shuffled
    [ -e $fixed/field_probe.json ] || python -m recipes.testbed.span_copy measure --model $1 --probes $FIXED \
        --tasks $SET --train $3 --out $fixed/field_probe.json >> $1.log 2>&1
    [ -e $shuffled/field_probe.json ] || python -m recipes.testbed.span_copy measure --model $1 --probes $SHUFFLED \
        --tasks $SET --train $3 --out $shuffled/field_probe.json >> $1.log 2>&1
}

# names_of PREFIX: one labelled run a seed of $SEEDS for the analysis tools (--run s0=PREFIX_s0, one a line).
names_of() { for SEED in "${SEEDS[@]}"; do printf -- '--run s%s=%s_s%s\n' "$SEED" "$1" "$SEED"; done; }

# copy_measure MODEL PROBES: the model's greedy turns on copy-task probes (copy_task measure, MODEL/copy_probe.json),
# once; logged to MODEL.log.
copy_measure() {
    [ -e "$1/copy_probe.json" ] || python -m recipes.testbed.copy_task measure --model "$1" --probes "$2" >> "$1.log" 2>&1
}

# copy_pair SEED SRC CONTROL RUN ARGS...: a copy-task pair of runs for one seed, on $OUT/probes.parquet: the control's
# saved model copied from the folder SRC to CONTROL (copy_model) and measured; the warm-up of seed SEED from
# $BASE/init on the spaced rows $TASK/rows_spaced.parquet with span_copy train's ARGS (steps and settings) into RUN,
# logged to RUN.log, and measured. Each part is skipped once done; a warm-up stopped part-way goes on from its state.
copy_pair() {
    local seed=$1 src=$2 control=$3 run=$4
    shift 4
    copy_model $src $control
    copy_measure $control $OUT/probes.parquet
    [ -e $run/model.safetensors ] || python -m recipes.testbed.span_copy train --init $BASE/init \
        --data $TASK/rows_spaced.parquet --seed $seed "$@" --out $run >> $run.log 2>&1
    copy_measure $run $OUT/probes.parquet
}

# copy_analysis ARM CONTROL FIGURE TITLE: the copy-task runs $OUT/ARM_sN and $OUT/CONTROL_sN (N over $SEEDS) on the
# probes $OUT/probes.parquet: each arm's exact copies and cue leans (analyse) and where its spans' ends come from
# (copy_parts); ARM - CONTROL paired by seed (contrast), drawn to docs/figures/FIGURE.png; both arms' loss curves on
# an axis of turns seen (windows of 6,400 turns), drawn to docs/figures/FIGURE_loss.png under TITLE. Records in $OUT.
copy_analysis() {
    local arm curves=()
    for arm in $1 $2; do
        python -m recipes.testbed.copy_task analyse $(names_of $OUT/$arm) --probes $OUT/probes.parquet \
            --json $OUT/analysis_$arm.json | tee $OUT/analysis_$arm.md
        python -m recipes.testbed.copy_parts $(names_of $OUT/$arm) --probes $OUT/probes.parquet \
            --json $OUT/parts_$arm.json | tee $OUT/parts_$arm.md
    done
    python -m recipes.testbed.copy_task contrast --a $OUT/analysis_$1.json --b $OUT/analysis_$2.json \
        --json $OUT/contrast.json --figure docs/figures/$3.png --labels $1 $2 | tee $OUT/contrast.md
    for arm in $2 $1; do
        for SEED in "${SEEDS[@]}"; do curves+=(--run "$arm s$SEED=$OUT/${arm}_s$SEED"); done
    done
    python -m recipes.testbed.loss_curves "${curves[@]}" --window 6400 --below 0.1 --json $OUT/curves.json \
        --figure docs/figures/$3_loss.png --title "$4" | tee $OUT/curves.md
}
