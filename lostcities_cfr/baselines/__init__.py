"""Baselines trained in the same framework as Deep CFR: PPO by self-play, with an optional
behaviour-cloning warm start (``docs/baselines.md``).

Same engine, encoding, networks, inference queue, arena, callbacks and checkpoints as the
CFR code; ``fit --config configs/ppo.yaml`` trains one.
"""

from lostcities_cfr.baselines.behaviour_cloning import behaviour_cloning_loss, teacher_games
from lostcities_cfr.baselines.ppo import PPO
from lostcities_cfr.baselines.ppo_math import generalized_advantage_estimation, ppo_loss

__all__ = [
    "PPO",
    "behaviour_cloning_loss",
    "generalized_advantage_estimation",
    "ppo_loss",
    "teacher_games",
]
