"""Agents: anything that maps a :class:`~lostcities_cfr.game.batched.GameBatch` to one
action per game, named by spec strings (``docs/agents.md``).

This layer sits just above ``game``: it imports no CFR or training code, so a
network agent takes its network and policy head as arguments, and the training
layer registers the ``ckpt`` spec kind itself (:func:`register_agent_kind`).
"""

from lostcities_cfr.agents.base import (
    Agent,
    AgentRandomness,
    Explainer,
    act_and_explain,
    act_single,
    agent_name,
    explain_actions,
)
from lostcities_cfr.agents.basic import DiscardOnlyAgent, NoisyAgent, RandomAgent
from lostcities_cfr.agents.heuristic import HEURISTIC_PRESETS, HeuristicAgent, HeuristicParams
from lostcities_cfr.agents.network import NetworkAgent, PolicyHead
from lostcities_cfr.agents.random_actions import random_legal_actions
from lostcities_cfr.agents.specs import (
    agent_from_spec,
    agent_kinds,
    describe_agent_specs,
    expect_arguments,
    register_agent_kind,
)

__all__ = [
    "HEURISTIC_PRESETS",
    "Agent",
    "AgentRandomness",
    "DiscardOnlyAgent",
    "Explainer",
    "HeuristicAgent",
    "HeuristicParams",
    "NetworkAgent",
    "NoisyAgent",
    "PolicyHead",
    "RandomAgent",
    "act_and_explain",
    "act_single",
    "agent_from_spec",
    "agent_kinds",
    "agent_name",
    "describe_agent_specs",
    "expect_arguments",
    "explain_actions",
    "random_legal_actions",
    "register_agent_kind",
]
