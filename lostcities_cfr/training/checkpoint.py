"""Agents from Deep CFR checkpoints (the ``ckpt:PATH[:current][:greedy]`` agent spec).

A checkpoint written by ``fit`` holds the model's hyperparameters and all three networks;
:func:`load_agent` rebuilds the model from them (never its reservoirs, which only training
needs) and returns the agent of :meth:`DeepCFR.agent`.
"""

from __future__ import annotations

from pathlib import Path

from lostcities_cfr.agents import Agent
from lostcities_cfr.training.module import DeepCFR


def load_model(path: str | Path) -> DeepCFR:
    """The :class:`DeepCFR` saved at ``path``, on the CPU, in eval mode.

    The file is unpickled in full (hyperparameters may hold objects such as a sampler), so
    load only checkpoints you trust.
    """
    model = DeepCFR.load_from_checkpoint(path, map_location="cpu", weights_only=False)
    return model.eval()


def load_agent(
    path: str | Path, policy: str = "average", greedy: bool = False, seed: int | None = None
) -> Agent:
    """The agent playing a checkpoint's ``"average"`` or ``"current"`` strategy.

    Args:
        path: a checkpoint written by ``fit`` (e.g. ``runs/quickstart/checkpoints/last.ckpt``).
        policy: ``"average"`` (the strategy network, Deep CFR's output) or ``"current"``
            (regret matching on the advantage networks).
        greedy: play the most probable action instead of sampling.
        seed: seeds sampling.
    """
    return load_model(path).agent(policy, greedy=greedy, seed=seed)
