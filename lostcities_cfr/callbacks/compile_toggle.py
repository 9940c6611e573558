"""Turn ``torch.compile`` on or off mid-run, for inference and/or training, keeping checkpoints."""

from __future__ import annotations

import time

import pytorch_lightning as pl
import torch

from lostcities_cfr.arguments import PositiveInt, checked
from lostcities_cfr.callbacks.base import TraversalCallback
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import feature_size
from lostcities_cfr.training.module import DeepCFR


class CompileToggle(TraversalCallback):
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
    - ``training``: every network that trains (``pl_module.networks()``) gets a
      ``torch.compile`` handle in ``pl_module.compiled_networks``, which its training
      steps call instead of the network (True), or loses it (False). The handle wraps
      the network and shares its parameters; the model holds it outside its modules, so
      ``state_dict`` keys are the same either way and a checkpoint saved with
      compilation on loads with it off, and the other way round. It compiles at its
      first training step, inside ``time/<kind>_train_s``.

    ``None`` leaves that side as it is.
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

    @checked
    def __init__(
        self,
        inference: bool | None = True,
        training: bool | None = None,
        from_iteration: PositiveInt = 1,
        mode: str | None = None,
        backend: str = "inductor",
        warmup: bool = True,
    ) -> None:
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

    def setup(self, trainer: pl.Trainer, pl_module: DeepCFR, stage: str) -> None:
        if self.training and pl_module.hparams.get("update_graphs"):
            # Both would replace the training forward; a graph of a compiled handle is untried.
            raise ConfigError(
                "CompileToggle training=True and DeepCFR update_graphs=True both replace the "
                "training forward; keep one (CompileToggle training=None, or update_graphs: "
                "false)"
            )

    def on_traversal_start(self, trainer: pl.Trainer, pl_module: DeepCFR) -> None:
        self.seconds = None
        if pl_module.iteration < self.from_iteration:
            return
        start = time.perf_counter()
        if self.training is not None:
            compiled = pl_module.compiled_networks
            for name, net in pl_module.networks().items():
                if not self.training:
                    compiled.pop(name, None)
                elif name not in compiled:
                    compiled[name] = torch.compile(net, mode=self.mode, backend=self.backend)
        if self.inference is not None:
            queue = pl_module.queue
            # Read when the compiled handles are built, at their first use.
            queue.compile_mode, queue.compile_backend = self.mode, self.backend
            queue.set_backend("compiled" if self.inference else "eager")
            if self.inference and self.warmup:
                self._warm_up(pl_module)
        self.seconds = time.perf_counter() - start

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: DeepCFR) -> None:
        queue_compiled = pl_module.queue.backend == "compiled"
        nets_compiled = pl_module.compiled_networks.keys() == pl_module.networks().keys()
        pl_module.log("compile/inference", float(queue_compiled), on_step=False, on_epoch=True)
        pl_module.log("compile/training", float(nets_compiled), on_step=False, on_epoch=True)
        if self.seconds is not None:
            pl_module.log("compile/seconds", self.seconds, on_step=False, on_epoch=True)

    @staticmethod
    def _warm_up(pl_module: DeepCFR) -> None:
        """One call per network and bucket size; the queue's counters are left as they were."""
        queue = pl_module.queue
        if queue.bucket_sizes is None:
            return  # every batch size is new: nothing to compile ahead
        n_features, n_actions = feature_size(pl_module.rules), pl_module.rules.n_actions
        with queue.uncounted():
            for name in queue.names:
                for size in queue.bucket_sizes:
                    features = torch.zeros(size, n_features, device=pl_module.device)
                    legal = torch.zeros(size, n_actions, dtype=torch.bool, device=pl_module.device)
                    legal[:, 0] = True  # a legal action, as in every real row
                    queue(name, features, legal)
