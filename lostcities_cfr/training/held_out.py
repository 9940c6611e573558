"""Each network's loss on its buffer's held-out rows: does it learn, or memorise?"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import nn

from lostcities_cfr.cfr.reservoir import ReservoirBuffer
from lostcities_cfr.training import metrics

LossOf = Callable[[str], tuple[Callable[..., torch.Tensor], float]]
"""``loss_of(network) -> (loss function, exponent of its rows' iteration weights)``."""


def held_out_losses(
    networks: Mapping[str, nn.Module],
    buffers: Mapping[str, ReservoirBuffer],
    loss_of: LossOf,
    rows: int = 4096,
) -> dict[str, float]:
    """``loss/val_<network>``: each network's loss on (up to ``rows`` of) its buffer's
    held-out rows, and ``loss/val_zero_<network>``: the loss of the zero predictor on the same
    rows (zero advantages and values; for the strategy network, zero logits: the uniform
    strategy). A network that learns beats the zero predictor there; one that memorises its
    training rows does not. Buffers without held-out rows give none."""
    losses = {}
    with torch.no_grad():
        for name, net in networks.items():
            held_out = buffers[name].held_out
            if held_out is None or len(held_out) == 0:
                continue
            loss_fn, exponent = loss_of(name)
            n = min(rows, len(held_out))
            features = held_out.features[:n].float()
            legal, targets = held_out.legal[:n], held_out.targets[:n].float()
            iteration = held_out.iteration[:n]
            outputs = net(features)
            pair = torch.stack(
                [
                    loss_fn(outputs, legal, targets, iteration, exponent),
                    loss_fn(torch.zeros_like(outputs), legal, targets, iteration, exponent),
                ]
            ).tolist()  # one read for both
            losses[metrics.loss(f"val_{name}")] = pair[0]
            losses[metrics.loss(f"val_zero_{name}")] = pair[1]
    return losses
