"""lostcities_cfr: Deep CFR agents for the card game Lost Cities, on PyTorch Lightning.

The names a notebook needs are importable from here. The game, agents and
arena load at once; the training names (``DeepCFR``, ``PPO``, ``load_agent``) pull in
Lightning, so they load on first use. For the same reason the ``ckpt`` agent
kind starts as a stand-in that imports the training layer, which registers the
real kind, on the first ``ckpt:`` spec; every ``agent_from_spec`` sees it, since
this file runs before any module of the package; so does ``best`` (the shipped agent).

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
    register_agent_kind,
)
from lostcities_cfr.agents.specs import BEST_HELP, BEST_USAGE, CKPT_HELP, CKPT_USAGE, AgentFactory
from lostcities_cfr.errors import AgentSpecError, ConfigError, IllegalActionError
from lostcities_cfr.evaluation.arena import EvaluationResult, evaluate
from lostcities_cfr.game import GameBatch, GameState, Rules
from lostcities_cfr.search import SearchAgent  # and registers the ``search`` agent kind

# name -> module, imported on first access (Lightning is slow to import)
_LAZY = {
    "DeepCFR": "lostcities_cfr.training",
    "PPO": "lostcities_cfr.baselines",
    "load_agent": "lostcities_cfr.training.checkpoint",
}

__all__ = [
    "PPO",
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
    "SearchAgent",
    "act_single",
    "agent_from_spec",
    "evaluate",
    "load_agent",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'lostcities_cfr' has no attribute {name!r}")


def _on_first_use(factory: str) -> AgentFactory:
    """A stand-in factory: importing the training layer registers the real one in its place."""

    def build(args: list[str], options: dict[str, str], seed: int | None) -> Agent:
        checkpoint = import_module("lostcities_cfr.training.checkpoint")
        return getattr(checkpoint, factory)(args, options, seed)

    return build


register_agent_kind("ckpt", _on_first_use("checkpoint_agent"), CKPT_USAGE, CKPT_HELP)
register_agent_kind("best", _on_first_use("best_agent"), BEST_USAGE, BEST_HELP)
