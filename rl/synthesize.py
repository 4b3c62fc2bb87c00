"""Teacher-trajectory synthesis for agentic SFT (the entry script; the pipeline is :mod:`rl.synthesis.synthesize`).

python rl/synthesize.py data.tasks=/data/synth/tasks.jsonl out_dir=/data/sft-synth teacher.backend=openai ...
python rl/synthesize.py --cfg job                      # print the composed config

Large runs: ``workers=N`` keeps N tasks in flight against a teacher server (several endpoints:
``teacher.kwargs.base_url=[URL1,URL2]``); ``shard=I/N`` (or ``shard=auto`` under torchrun, accelerate,
SLURM) runs one part of the tasks into ``out_dir/shard-I-of-N``, on as many machines as there are
shards; then one command joins the parts into what one unsharded run would have written:

python rl/synthesize.py merge /data/sft-synth/shard-*-of-4 --out /data/sft-synth/merged

The merge refuses shards of different runs (other settings or task list), overlapping shards and
shards still running; it exits 3 and names what is missing when a shard is incomplete
(:mod:`rl.synthesis.folder`).
"""

from rl.synthesis.synthesize import main

if __name__ == "__main__":
    main()
