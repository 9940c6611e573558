"""Deep DCFR+: advantage networks fitted to bootstrapped, discounted cumulative regrets.

Deep CFR fits each iteration's advantage network to every regret row sampled so far, weighted
by iteration (linear CFR): the network's output is the weighted *mean* of the instantaneous
regrets, and no rule can act on the sign of the *cumulative* regret a row falls into. So
DCFR's and CFR+'s treatment of negative regrets (Brown & Sandholm 2019; Tammelin 2014), which
is what makes them fast in tabular play, has no place in it.

Xu, Li, Liu, Fu, Fu, Xing & Cheng ("Deep (Predictive) Discounted Counterfactual Regret
Minimization", 2024) fit the cumulative regret itself: iteration ``T``'s network is trained
on iteration ``T``'s rows only, each target the previous network's prediction at the row's
information set, discounted and floored at 0 as DCFR+ does, plus the row's sampled regret:

    R_T(I, a) = d(T - 1) * max(R_{T-1}(I, a), 0) + r_T(I, a),   d(t) = t^alpha / (t^alpha + 1)

(``alpha = 1.5`` is DCFR's; ``alpha = inf`` keeps the whole positive part: CFR+'s flooring
alone). Regret matching is unchanged by a positive factor, so the networks here predict
``R_T / T``, a mean's scale, whatever ``T`` is; a network trained from scratch then fits
targets of the size Deep CFR's do.

:func:`bootstrap_targets` rewrites a buffer's rows in place, after the traversal wrote them
and before the network that predicted ``R_{T-1}`` is retrained; the training loop clears the
advantage buffer before each traversal (``DeepCFR(regret_targets="cumulative")``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from lostcities_cfr.cfr.reservoir import ReservoirBuffer

DCFR_ALPHA = 1.5  # Brown & Sandholm's, and Xu et al.'s default for Deep DCFR+


def discount(t: int, alpha: float) -> float:
    """DCFR's factor on the positive cumulative regret after iteration ``t``:
    ``t^alpha / (t^alpha + 1)``; 0 before the first iteration, 1 for ``alpha = inf``."""
    if t <= 0:
        return 0.0
    if math.isinf(alpha):
        return 1.0
    weight = float(t) ** alpha
    return weight / (weight + 1.0)


def cumulative_targets(
    previous: torch.Tensor,  # [n, A] R_{T-1} / (T - 1) at the rows' information sets
    regrets: torch.Tensor,  # [n, A] sampled instantaneous regrets r_T, 0 on illegal actions
    legal: torch.Tensor,  # [n, A] bool
    iteration: int,
    alpha: float,
) -> torch.Tensor:
    """``R_T / T`` [n, A] (module docstring), 0 on illegal actions."""
    before = iteration - 1
    carried = before * discount(before, alpha) * previous.float().clamp(min=0)
    return torch.where(legal, (carried + regrets.float()) / iteration, 0.0)


@torch.no_grad()
def bootstrap_targets(
    buffer: ReservoirBuffer,
    previous: nn.Module,
    iteration: int,
    alpha: float,
    chunk: int = 65_536,
) -> None:
    """Replace the targets of the rows ``buffer`` holds (and its held-out rows) by
    :func:`cumulative_targets`, ``previous`` being the network trained at ``iteration - 1``
    (at the first iteration its outputs are multiplied by 0).

    The rows are read ``chunk`` at a time, so that a large buffer costs no large activation.
    """
    dtype = next(previous.parameters()).dtype  # bfloat16 under precision="bf16-true"
    for held in (buffer, buffer.held_out):
        if held is None:
            continue
        for start in range(0, len(held), chunk):
            rows = slice(start, min(start + chunk, len(held)))
            targets = cumulative_targets(
                previous(held.features[rows].to(dtype)),
                held.targets[rows],
                held.legal[rows],
                iteration,
                alpha,
            )
            held.targets[rows] = targets.to(held.targets.dtype)
