"""Turn ``torch.compile`` on or off mid-run, for inference and/or training, keeping checkpoints."""

from __future__ import annotations

import time
from typing import Any

import pytorch_lightning as pl
import torch
from torch import nn

from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import feature_size


def set_module_compiled(module: nn.Module, on: bool, **compile_kwargs: Any) -> None:
    """Compile ``module``'s calls in place (``nn.Module.compile``), or return it to eager.

    In place means no wrapper module: parameters, buffers and ``state_dict``
    keys stay exactly as they are (no ``_orig_mod.`` prefix), so a checkpoint
    saved with compilation on loads with it off and the other way round.
    """
    compiled = getattr(module, "_compiled_call_impl", None) is not None
    if on and not compiled:
        module.compile(**compile_kwargs)
    elif not on and compiled:
        # nn.Module.compile stores the compiled call here and has no public inverse.
        module._compiled_call_impl = None


def training_networks(pl_module: pl.LightningModule) -> list[nn.Module]:
    """The networks that train: each player's advantage network and the strategy network."""
    return [*pl_module.advantage_nets, pl_module.strategy_net]


class CompileToggle(pl.Callback):
    """Switches ``torch.compile`` on (or off) from a chosen CFR iteration.

    Acts at ``on_traversal_start`` (the model calls it once the inference
    queue holds this iteration's networks) of iteration ``from_iteration`` and
    every later one, a resumed run included, since compilation is not part of
    a checkpoint:

    - ``inference``: the model's inference queue runs its ``"compiled"``
      backend (True) or its ``"eager"`` one (False). With ``warmup`` every
      registered network is then called once at each of the queue's bucket
      sizes, the only shapes the queue ever runs, so that compilation happens
      here rather than inside the traversal's timings; once compiled, the
      warm-up costs a few forwards.
    - ``training``: each training network (advantage networks and strategy
      network) is compiled in place (True) or returned to eager (False); see
      :func:`set_module_compiled`. It compiles at its first training step,
      inside ``time/advantage_train_s`` and ``time/strategy_train_s``.

    ``None`` leaves that side as it is. Checkpoint keys are the same either way.
    Logs, from ``from_iteration`` on, ``compile/seconds`` (the switch and the
    warm-up: large when something compiled, near zero when nothing had to)
    and, every iteration, ``compile/inference`` and ``compile/training`` (1 on,
    0 off).

    Args:
        inference: compile the inference queue's forwards (True), run them
            eagerly (False) or leave them (None).
        training: the same for the training networks.
        from_iteration: first CFR iteration (1-based) with the new setting.
        mode: ``torch.compile`` mode, e.g. ``"reduce-overhead"`` for CUDA graphs.
        backend: ``torch.compile`` backend: ``"inductor"`` generates kernels,
            ``"eager"`` only traces (quick, to check a setup).
        warmup: compile the inference shapes before the traversal and time them.
    """

    def __init__(
        self,
        inference: bool | None = True,
        training: bool | None = None,
        from_iteration: int = 1,
        mode: str | None = None,
        backend: str = "inductor",
        warmup: bool = True,
    ) -> None:
        if from_iteration < 1:
            raise ConfigError(
                f"CompileToggle from_iteration={from_iteration}; iterations count from 1"
            )
        if inference is None and training is None:
            raise ConfigError(
                "CompileToggle inference=None and training=None toggles nothing; set one of "
                "them to True (compile) or False (eager)"
            )
        self.inference = inference
        self.training = training
        self.from_iteration = from_iteration
        self.mode = mode
        self.backend = backend
        self.warmup = warmup
        self.seconds: float | None = None  # this iteration's switch and warm-up

    def on_traversal_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.seconds = None
        if pl_module.iteration < self.from_iteration:
            return
        start = time.perf_counter()
        if self.training is not None:
            for net in training_networks(pl_module):
                set_module_compiled(net, self.training, mode=self.mode, backend=self.backend)
        if self.inference is not None:
            queue = pl_module.queue
            # Read when the compiled handles are built, at their first use.
            queue.compile_mode, queue.compile_backend = self.mode, self.backend
            queue.set_backend("compiled" if self.inference else "eager")
            if self.inference and self.warmup:
                self._warm_up(pl_module)
        self.seconds = time.perf_counter() - start

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        queue_compiled = pl_module.queue.backend == "compiled"
        nets_compiled = all(
            getattr(net, "_compiled_call_impl", None) is not None
            for net in training_networks(pl_module)
        )
        pl_module.log("compile/inference", float(queue_compiled), on_step=False, on_epoch=True)
        pl_module.log("compile/training", float(nets_compiled), on_step=False, on_epoch=True)
        if self.seconds is not None:
            pl_module.log("compile/seconds", self.seconds, on_step=False, on_epoch=True)

    @staticmethod
    def _warm_up(pl_module: pl.LightningModule) -> None:
        """One call per network and bucket size; the queue's counters are left as they were."""
        queue = pl_module.queue
        if queue.bucket_sizes is None:
            return  # every batch size is new: nothing to compile ahead
        counters = (queue.calls, queue.rows, queue.padded_rows, queue.policy_network_seconds)
        n_features, n_actions = feature_size(pl_module.rules), pl_module.rules.n_actions
        for name in queue.names:
            for size in queue.bucket_sizes:
                features = torch.zeros(size, n_features, device=pl_module.device)
                legal = torch.zeros(size, n_actions, dtype=torch.bool, device=pl_module.device)
                legal[:, 0] = True  # a legal action, as in every real row
                queue(name, features, legal)
        queue.calls, queue.rows, queue.padded_rows, queue.policy_network_seconds = counters
