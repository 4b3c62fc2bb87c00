"""Evaluate a policy backend on a benchmark preset (hydra; config in conf/eval.yaml).

    python scripts/eval.py                                    # synthetic preset, uniform policy
    python scripts/eval.py benchmarks=videomme benchmark.annotations=/data/videomme/test.parquet \\
        benchmark.media_root=/data/videomme/data policy.name=openai \\
        +policy.kwargs.base_url=http://127.0.0.1:8000/v1 workers=8
    python scripts/eval.py mode=passive passive.match_run=runs/eval/synthetic-uniform-active

Writes results.jsonl (one row per task), trajectories.jsonl, summary.json/.csv and run.json into
out_dir; rerunning the same command resumes. The code is :func:`omniagent.eval.cli.eval_main`
(also installed as ``omniagent-eval``). Exit codes: 0 done; 2 bad annotations, config or
frozen-preset override; 3 train/eval overlap; 4 judge unreachable; 5 the policy backend cannot
start or failed many tasks in a row (rerun with retry_failed=true once fixed); 6 another process is writing into
out_dir (its PID is named); 7 no space left on the disk of out_dir (rerun with space to resume); 130
interrupted (rerun to resume).
"""

from omniagent.eval.cli import eval_main

if __name__ == "__main__":
    eval_main()
