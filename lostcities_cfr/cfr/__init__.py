"""The Deep CFR algorithm (Brown, Lerer, Gross & Sandholm, 2019): networks,
regret matching with the highest-advantage fallback, and reservoir buffers.
"""

from lostcities_cfr.cfr.networks import (
    NetworkConfig,
    PolicyMLP,
    masked_advantages,
    masked_softmax,
)
from lostcities_cfr.cfr.regret_matching import regret_matching
from lostcities_cfr.cfr.reservoir import (
    ReservoirBatch,
    ReservoirBuffer,
    last_writers,
    reservoir_slots,
)

__all__ = [
    "NetworkConfig",
    "PolicyMLP",
    "ReservoirBatch",
    "ReservoirBuffer",
    "last_writers",
    "masked_advantages",
    "masked_softmax",
    "regret_matching",
    "reservoir_slots",
]
