"""Baselines trained in the same framework as Deep CFR: PPO by self-play, with an optional
behaviour-cloning warm start (``docs/baselines.md``), and expert iteration, a search's
values distilled into a network (``docs/expert_iteration.md``).

Same engine, encoding, networks, inference queue, arena, callbacks and checkpoints as the
CFR code; ``fit --config configs/ppo.yaml`` trains one, ``fit --config
configs/expert_iteration.yaml`` the other.
"""

from lostcities_cfr.baselines.behaviour_cloning import behaviour_cloning_loss, teacher_games
from lostcities_cfr.baselines.expert_iteration import ExpertIteration
from lostcities_cfr.baselines.expert_labels import label_games, soft_cross_entropy, soft_targets
from lostcities_cfr.baselines.ppo import PPO
from lostcities_cfr.baselines.ppo_math import generalized_advantage_estimation, ppo_loss

__all__ = [
    "PPO",
    "ExpertIteration",
    "behaviour_cloning_loss",
    "generalized_advantage_estimation",
    "label_games",
    "ppo_loss",
    "soft_cross_entropy",
    "soft_targets",
    "teacher_games",
]
