"""The inference layer: every forward pass made outside training goes through
one batched queue (:class:`InferenceQueue`), which pads to a few fixed batch
sizes, can run a compiled handle of each network and counts its own time.

Knows nothing of CFR: callers register a module with a head function.
"""

from lostcities_cfr.inference.queue import (
    Backend,
    Head,
    HeadedModule,
    InferenceQueue,
    QueueStats,
    Ticket,
    raw_outputs,
)

__all__ = [
    "Backend",
    "Head",
    "HeadedModule",
    "InferenceQueue",
    "QueueStats",
    "Ticket",
    "raw_outputs",
]
