"""The RL algorithm both trainers share: TAURA advantages, the shaped reward, the turn budget."""
