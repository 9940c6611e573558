"""The Deep CFR algorithm (Brown, Lerer, Gross & Sandholm, 2019): networks,
regret matching with the highest-advantage fallback, and reservoir buffers.
Traversal samplers: external, outcome and budgeted sampling.
"""

from lostcities_cfr.cfr.budgeted_sampling import BudgetedSampling
from lostcities_cfr.cfr.exploitability import (
    TinyGameTree,
    exploitability,
    game_tree,
    nash_conv,
)
from lostcities_cfr.cfr.external_sampling import ExternalSampling
from lostcities_cfr.cfr.networks import NetworkConfig, PolicyMLP, masked_softmax
from lostcities_cfr.cfr.outcome_sampling import OutcomeSampling
from lostcities_cfr.cfr.regret_matching import regret_matching, uniform_strategy
from lostcities_cfr.cfr.reservoir import (
    ReservoirBatch,
    ReservoirBuffer,
    reservoir_slots,
    surviving_slots,
)
from lostcities_cfr.cfr.traversal import Sampler, TraversalContext, TraversalStats

__all__ = [
    "BudgetedSampling",
    "ExternalSampling",
    "NetworkConfig",
    "OutcomeSampling",
    "PolicyMLP",
    "ReservoirBatch",
    "ReservoirBuffer",
    "Sampler",
    "TinyGameTree",
    "TraversalContext",
    "TraversalStats",
    "exploitability",
    "game_tree",
    "masked_softmax",
    "nash_conv",
    "regret_matching",
    "reservoir_slots",
    "surviving_slots",
    "uniform_strategy",
]
