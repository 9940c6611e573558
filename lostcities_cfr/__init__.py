"""lostcities_cfr: Deep CFR agents for the card game Lost Cities, on PyTorch Lightning.

The names a notebook needs are importable from here. The game, agents and
arena load at once; the training names (``DeepCFR``, ``load_agent``) pull in
Lightning, so they load on first use.

    from lostcities_cfr import Rules, GameBatch, agent_from_spec, evaluate
    result = evaluate(agent_from_spec("heuristic:balanced"), agent_from_spec("random"), games=200)
"""

from importlib import import_module
from typing import Any

from lostcities_cfr.agents import (
    Agent,
    DiscardOnlyAgent,
    HeuristicAgent,
    NetworkAgent,
    RandomAgent,
    act_single,
    agent_from_spec,
)
from lostcities_cfr.arena import EvaluationResult, evaluate
from lostcities_cfr.errors import AgentSpecError, ConfigError, IllegalActionError
from lostcities_cfr.game import GameBatch, GameState, Rules

# name -> module, imported on first access (Lightning is slow to import)
_LAZY = {
    "DeepCFR": "lostcities_cfr.training",
    "load_agent": "lostcities_cfr.training.checkpoint",
}

__all__ = [
    "Agent",
    "AgentSpecError",
    "ConfigError",
    "DeepCFR",
    "DiscardOnlyAgent",
    "EvaluationResult",
    "GameBatch",
    "GameState",
    "HeuristicAgent",
    "IllegalActionError",
    "NetworkAgent",
    "RandomAgent",
    "Rules",
    "act_single",
    "agent_from_spec",
    "evaluate",
    "load_agent",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'lostcities_cfr' has no attribute {name!r}")
