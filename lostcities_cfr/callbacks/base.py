"""What a callback of a Deep CFR run may rely on: the traversal hooks and the model's surface."""

from __future__ import annotations

import pytorch_lightning as pl

from lostcities_cfr.training.module import DeepCFR


class TraversalCallback(pl.Callback):
    """A Lightning callback that also sees each CFR iteration's traversal epoch.

    :class:`~lostcities_cfr.training.DeepCFR` runs the traversal epoch in its own
    ``on_train_epoch_start`` (which Lightning calls after the callbacks' one), where Lightning
    has no hook of its own, and calls these two on every callback of the trainer that defines
    them (a subclass overrides the ones it needs):

    - :meth:`on_traversal_start`: the inference queue holds this iteration's networks and no
      game has been dealt; a callback may switch the queue's backend and warm it up here.
    - :meth:`on_traversal_end`: both players' traversals have ended;
      ``pl_module.iteration_metrics`` holds the epoch's figures (``time/traversal_s``,
      ``traversal/nodes``, ...) and the reservoirs hold its rows.

    Besides Lightning's own, a callback may rely on these of ``pl_module`` (a
    :class:`~lostcities_cfr.training.DeepCFR`): ``iteration`` (1-based), ``rules``,
    ``iteration_metrics`` (this iteration's figures so far, by metric name),
    ``networks()`` and ``row_buffers()`` (by network name), ``queue`` (its
    :meth:`~lostcities_cfr.inference.InferenceQueue.stats` snapshot, ``set_backend``,
    ``uncounted``), ``compiled_networks``, ``policies`` and ``agent(policy, greedy, seed)``.
    Logging goes through ``pl_module.log`` in Lightning's epoch hooks, as usual.
    """

    def on_traversal_start(self, trainer: pl.Trainer, pl_module: DeepCFR) -> None:
        """Called before the traversal epoch of every iteration."""

    def on_traversal_end(self, trainer: pl.Trainer, pl_module: DeepCFR) -> None:
        """Called after the traversal epoch of every iteration."""
