"""Several networks in one DDP run: gradients averaged by hand, metrics reduced over the
ranks, and the checks and messages of a run over several processes or hosts."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Collection, Sequence

import pytorch_lightning as pl
import torch
from torch import nn

from lostcities_cfr.errors import ConfigError


def backward_unsynced(module: pl.LightningModule, loss: torch.Tensor) -> None:
    """``manual_backward(loss)`` with DDP's automatic gradient sync blocked.

    A training step runs one backward per network, and each backward reaches one network's
    parameters only: DDP's reducer, which expects a single backward over every parameter of
    the wrapped module, refuses that. So its sync is blocked, and :func:`average_gradients`
    averages the step's networks' gradients in one all-reduce.
    """
    if module.trainer.world_size == 1:
        module.manual_backward(loss)
        return
    with module.trainer.strategy.block_backward_sync():
        module.manual_backward(loss)


def average_gradients(trainer: pl.Trainer, nets: Sequence[nn.Module]) -> None:
    """Across ranks, the mean of ``nets``' gradients, in one all-reduce for all of them.

    torch's all-reduce itself: Lightning's ``strategy.reduce`` runs a barrier before it, a
    second collective. Each collective is a wait for the slowest rank plus 1 to 2 ms on two
    CPU ranks (docs/performance.md), so a step that updates several networks syncs them once.
    """
    if trainer.world_size == 1 or not nets:
        return
    grads = [p.grad for net in nets for p in net.parameters() if p.grad is not None]
    flat = torch.cat([g.flatten() for g in grads])
    torch.distributed.all_reduce(flat)
    flat /= trainer.world_size
    for grad, synced in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
        grad.copy_(synced.view_as(grad))


def on_every_rank(trainer: pl.Trainer, flags: Sequence[bool]) -> list[bool]:
    """Each flag, true only where it holds on every rank (one all-reduce)."""
    if trainer.world_size == 1:
        return list(flags)
    held = torch.tensor(flags, dtype=torch.int32, device=trainer.strategy.root_device)
    torch.distributed.all_reduce(held, op=torch.distributed.ReduceOp.MIN)
    return [bool(v) for v in held.tolist()]


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

    One all-reduce of one vector, in the names' sorted order (every rank logs the same names).
    One rank's values are returned as they are.
    """
    if trainer.world_size == 1 or not values:
        return values
    names = sorted(values)
    device = trainer.strategy.root_device
    total = torch.tensor([values[n] for n in names], dtype=torch.float64, device=device)
    torch.distributed.all_reduce(total)
    mean = total / trainer.world_size
    return {n: float(total[i] if n in summed else mean[i]) for i, n in enumerate(names)}


# What gloo and the rendezvous store say when the process at the other end is gone.
_LOST_PEER = ("Connection reset by peer", "Connection closed by peer", "Broken pipe")


def lost_peer(error: BaseException) -> bool:
    """Whether ``error`` is a collective or the store failing because another rank died."""
    text = str(error)
    return isinstance(error, torch.distributed.DistNetworkError) or (
        isinstance(error, RuntimeError) and any(mark in text for mark in _LOST_PEER)
    )


def lost_peer_message(error: BaseException, rank: int, world_size: int) -> str:
    """One line for a rank whose peers stopped: who stopped, what to do."""
    others = [r for r in range(world_size) if r != rank]
    who = f"rank {others[0]}" if len(others) == 1 else f"one of ranks {others}"
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    # gloo's text opens with its source line and closes with advice that fits no one here.
    reason = re.sub(r"^\[[^\]]*\.cc:\d+\] ", "", text).split(". This is typically")[0]
    return (
        f"rank {rank} of {world_size}: {who} stopped, so the run stops ({reason[:200]}); "
        "resume it with --ckpt_path last: its last checkpoint holds every rank's rows"
    )


def check_master_port(trainer: pl.Trainer) -> None:
    """On the host of rank 0, refuse a ``MASTER_PORT`` that another process listens on:
    rank 0's store could not take it, or (listening on another address of the host) the
    ranks would meet the other process there and wait for it."""
    port = os.environ.get("MASTER_PORT")
    # The first process of node 0 only: the ranks it launches inherit the port it took.
    first = os.environ.get("NODE_RANK", "0") == "0" and os.environ.get("LOCAL_RANK", "0") == "0"
    if trainer.world_size == 1 or port is None or not first:
        return
    address = os.environ.get("MASTER_ADDR", "127.0.0.1")
    with socket.socket() as probe:
        try:
            probe.bind((address, int(port)))
        except OSError as error:
            raise ConfigError(
                f"MASTER_PORT={port}: rank 0 cannot listen on {address}:{port} ({error.strerror}); "
                "choose a free port, the same on every node"
            ) from None


# What a run over several hosts needs from its environment when no cluster manager (SLURM,
# torchelastic, MPI...) provides it: Lightning's plain environment would otherwise default
# to 127.0.0.1 and node 0 on every host, and wait for the others for half an hour.
NODE_ENVIRONMENT = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK")


def check_cluster_environment(trainer: pl.Trainer) -> None:
    """Refuse ``num_nodes > 1`` on plain hosts that do not say where rank 0 listens and which
    node each one is, and a ``MASTER_PORT`` taken on rank 0's host."""
    environment = getattr(trainer.strategy, "cluster_environment", None)
    plain_hosts = type(environment).__name__ == "LightningEnvironment"
    missing = [name for name in NODE_ENVIRONMENT if name not in os.environ]
    if trainer.num_nodes > 1 and plain_hosts and missing:
        raise ConfigError(
            f"trainer.num_nodes={trainer.num_nodes} needs {', '.join(missing)} in the "
            "environment of every node (MASTER_ADDR and MASTER_PORT: where rank 0 listens; "
            "NODE_RANK: 0 to num_nodes - 1), or a cluster manager such as SLURM that sets "
            "them (docs/architecture.md, 'Several processes')"
        )
    check_master_port(trainer)
