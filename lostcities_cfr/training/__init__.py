"""Deep CFR on Lightning: the LightningModule and its loop, losses, agents and checkpoints."""

from lostcities_cfr.training.agents import SeatAgent, policy_agent
from lostcities_cfr.training.checkpoint import load_agent, load_model
from lostcities_cfr.training.losses import advantage_loss, iteration_weights, strategy_loss
from lostcities_cfr.training.module import DeepCFR

__all__ = [
    "DeepCFR",
    "SeatAgent",
    "advantage_loss",
    "iteration_weights",
    "load_agent",
    "load_model",
    "policy_agent",
    "strategy_loss",
]
