"""Several networks in one DDP run: gradients averaged by hand, one network at a time."""

from __future__ import annotations

from collections.abc import Collection

import pytorch_lightning as pl
import torch
from torch import nn


def backward_averaged(module: pl.LightningModule, loss: torch.Tensor, net: nn.Module) -> None:
    """``manual_backward(loss)``, then, across ranks, the mean of ``net``'s gradients.

    A training step runs one backward per network, and each backward reaches one network's
    parameters only: DDP's reducer, which expects a single backward over every parameter of
    the wrapped module, refuses that. So its automatic sync is blocked and each network's
    gradients are averaged here, in one all-reduce.
    """
    trainer = module.trainer
    if trainer.world_size == 1:
        module.manual_backward(loss)
        return
    with trainer.strategy.block_backward_sync():
        module.manual_backward(loss)
    grads = [p.grad for p in net.parameters() if p.grad is not None]
    flat = torch.cat([g.flatten() for g in grads])
    mean = trainer.strategy.reduce(flat, reduce_op="mean")
    for grad, synced in zip(grads, mean.split([g.numel() for g in grads]), strict=True):
        grad.copy_(synced.view_as(grad))


def broadcast_from_rank_zero(trainer: pl.Trainer, net: nn.Module) -> None:
    """Give every rank rank 0's parameters of ``net`` (after a re-initialisation).

    Ranks draw their own games, so their global random streams need not stay in step; a
    network re-initialised from them would differ between ranks.
    """
    if trainer.world_size == 1:
        return
    for parameter in net.parameters():
        torch.distributed.broadcast(parameter.data, src=0)


def reduce_over_ranks(
    trainer: pl.Trainer, values: dict[str, float], summed: Collection[str]
) -> dict[str, float]:
    """``values`` over every rank: the sum for the names in ``summed``, else the mean.

    Two all-reduces in all, of one vector each, in the names' sorted order (every rank logs
    the same names). One rank's values are returned as they are.
    """
    if trainer.world_size == 1 or not values:
        return values
    names = sorted(values)
    device = trainer.strategy.root_device
    local = torch.tensor([values[n] for n in names], dtype=torch.float64, device=device)
    total = trainer.strategy.reduce(local.clone(), reduce_op="sum")
    mean = total / trainer.world_size
    return {n: float(total[i] if n in summed else mean[i]) for i, n in enumerate(names)}
