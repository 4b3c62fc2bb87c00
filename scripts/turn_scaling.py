"""Accuracy as a function of the turn budget K (hydra; config in conf/turn_scaling.yaml).

    python scripts/turn_scaling.py policy.name=random 'scaling.ks=[6,8,12,16,24,32,52]' 'scaling.seeds=[0,1,2]'

The sweep lives in :mod:`omniagent.eval.turn_scaling` (also installed as ``omniagent-turn-scaling``).
"""

from omniagent.eval.turn_scaling import main

if __name__ == "__main__":
    main()
