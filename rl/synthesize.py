"""Teacher-trajectory synthesis for agentic SFT (the entry script; the pipeline is :mod:`rl.synthesis.synthesize`).

python rl/synthesize.py data.tasks=/data/synth/tasks.jsonl out_dir=/data/sft-synth teacher.backend=openai ...
python rl/synthesize.py --cfg job                      # print the composed config
"""

from rl.synthesis.synthesize import main

if __name__ == "__main__":
    main()
