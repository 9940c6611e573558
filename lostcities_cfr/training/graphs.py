"""A network's update as CUDA graphs: its forward, loss and backward replayed, not relaunched.

An update of a 128x3 network on a batch of rows is a few hundred small kernels (the forward,
the loss, their backward), each launched from Python; on a GPU those launches, not the
arithmetic, bound it (``docs/performance.md``, "On a GPU"). ``torch.cuda.make_graphed_callables``
records the forward and the backward of a module once, on sample inputs, as two CUDA graphs;
each later call copies its inputs into the recorded ones and replays the forward graph, and
autograd's backward replays the backward graph: two launches in place of hundreds, the same
kernels on the same memory.

:class:`NetworkLoss` is what is recorded: a network and its loss as one module, so that the
loss's kernels are in the graphs too. The batch's draw from the reservoir, gradient clipping
and Adam's step stay outside, as the eager update runs them: the draw uses the module's own
generator, the optimizer's step is Lightning's (its step count, its hooks), and fused Adam is
one kernel already. A graph holds its inputs' shapes and dtypes, so :class:`UpdateGraphs`
records one per network and batch shape; the parameters are updated in place (Adam's step,
``reinitialise``, loading a checkpoint), so the graphs stay valid for the whole run.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

LossFunction = Callable[..., torch.Tensor]  # (outputs, legal, targets, iteration, exponent)


class NetworkLoss(nn.Module):
    """``loss_fn(net(features), legal, targets, iteration, exponent)``: a training step's
    forward and loss as one module, what the graphs record (the eager update computes the
    same expression inline; ``tests/training/test_graphs.py`` holds the two routes equal).

    Args:
        net: the network (a compiled handle on it works as well, eagerly).
        loss_fn: ``advantage_loss`` or ``strategy_loss`` (``training/losses.py``).
        exponent: the exponent of the rows' iteration weights.
    """

    def __init__(
        self, net: Callable[[torch.Tensor], torch.Tensor], loss_fn: LossFunction, exponent: float
    ) -> None:
        super().__init__()
        self.net = net
        self.loss_fn = loss_fn
        self.exponent = exponent

    def forward(
        self,
        features: torch.Tensor,  # [n, F] in the network's dtype
        legal: torch.Tensor,  # [n, A] bool
        targets: torch.Tensor,  # [n, A] float32
        iteration: torch.Tensor,  # [n] int32
    ) -> torch.Tensor:
        return self.loss_fn(self.net(features), legal, targets, iteration, self.exponent)


class UpdateGraphs:
    """Each network's :class:`NetworkLoss` recorded as CUDA graphs, one per batch shape.

    The first call for a network and a shape records (``make_graphed_callables`` runs three
    warm-up passes on a side stream, then captures; they leave the parameters and their
    gradients as they were); every call then replays. Recording waits for the device, once
    per network and shape in a run.
    """

    def __init__(self) -> None:
        self._graphed: dict[tuple, nn.Module] = {}

    def __len__(self) -> int:
        """Graphed modules recorded so far (each is a forward and a backward graph)."""
        return len(self._graphed)

    def loss(
        self,
        name: str,
        net: nn.Module,
        loss_fn: LossFunction,
        exponent: float,
        inputs: tuple[torch.Tensor, ...],
    ) -> torch.Tensor:
        """Network ``name``'s loss on ``inputs`` (features, legal, targets, iteration), by
        replaying its graphs; a loss whose backward replays the backward graph."""
        key = (name, tuple((tuple(t.shape), t.dtype) for t in inputs))
        graphed = self._graphed.get(key)
        if graphed is None:
            # The sample inputs become the graphs' own input tensors: clones, so that no
            # later batch shares their memory.
            sample = tuple(t.clone() for t in inputs)
            graphed = torch.cuda.make_graphed_callables(NetworkLoss(net, loss_fn, exponent), sample)
            self._graphed[key] = graphed
        return graphed(*inputs)
