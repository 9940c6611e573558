"""One CFR iteration as Lightning runs it: the traversal epoch, then the training epoch.

Deep CFR's iteration ``t`` (``module.py`` states the algorithm) is one Lightning epoch:

1. ``on_train_epoch_start`` runs the **traversal epoch**: for each player the sampler walks
   ``traversals_per_player`` games and writes rows tagged ``t`` into the reservoirs
   (:meth:`CFRIteration.traversal_epoch`); then, unless they are warm-started, the
   advantage networks are re-initialised.
2. The epoch's steps are the **training epoch**: each step updates one network on a batch of
   its reservoir (:meth:`CFRIteration.update_networks`), the networks one after another
   (:class:`~lostcities_cfr.training.updates.UpdateSchedule`); with ``alternate_updates``,
   player 1 traverses halfway, after player 0's network has trained.
3. The last step reads the iteration's losses (a diverged run stops there, before its
   checkpoint), the held-out losses, and stores SD-CFR's snapshot; ``on_train_epoch_end``
   logs the iteration's metrics.

The training "dataloader" is a fixed-length range of step indices: each step draws its own
batch from the reservoirs with the module's generator, so the loader never runs dry (a loader
with no batch ends ``fit``) and every DDP rank runs the same number of steps.

:class:`CFRIteration` is the part of :class:`~lostcities_cfr.training.module.DeepCFR` that
runs an iteration; the module owns what it works on (networks, reservoirs, generators, the
inference queue, the sampler) and its hyperparameters.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import pytorch_lightning as pl
import torch

from lostcities_cfr.cfr.cumulative_regret import DCFR_ALPHA, bootstrap_targets
from lostcities_cfr.cfr.networks import masked_softmax, reinitialise
from lostcities_cfr.cfr.regret_matching import regret_matching, uniform_strategy
from lostcities_cfr.cfr.traversal import (
    ADVANTAGE_NETWORKS,
    STRATEGY_NETWORK,
    TraversalContext,
    TraversalStats,
)
from lostcities_cfr.game.symmetry import permute_features, permute_rows
from lostcities_cfr.training import metrics
from lostcities_cfr.training.distributed import (
    average_gradients,
    backward_unsynced,
    broadcast_from_rank_zero,
    on_every_rank,
    reduce_over_ranks,
)
from lostcities_cfr.training.held_out import held_out_losses
from lostcities_cfr.training.losses import advantage_loss, strategy_loss
from lostcities_cfr.training.updates import UpdateLog, UpdateSchedule

PLAYERS = (0, 1)


class CFRIteration:
    """The hooks and steps of one CFR iteration (module docstring), mixed into ``DeepCFR``.

    What it uses of the module: ``hparams``, ``iteration``, ``trains_strategy``,
    ``networks()``, ``row_buffers()``, ``advantage_nets``, ``strategy_net``, ``value_net`` and
    ``value_name``, ``sampler``, ``queue``, ``rules``, the generators, ``compiled_networks``,
    ``update_graphs``, ``iteration_metrics``, and Lightning's own (``trainer``,
    ``optimizers()``, ``log``...).
    """

    def train_dataloader(self) -> range:
        # Step indices only: every step samples its batch from a reservoir itself.
        return range(len(self.update_schedule()))

    def update_schedule(self) -> UpdateSchedule:
        """Which network each step of this iteration's training epoch updates: each player's
        advantage network, the strategy network (when this iteration trains it) and the
        value network, one after another; with ``alternate_updates`` player 0's and the value
        network's first, then (after player 1's traversal) player 1's, the value network's and
        the strategy network's."""
        names = [*ADVANTAGE_NETWORKS, STRATEGY_NETWORK, self.value_name]
        phases = [None] if not self.hparams.alternate_updates else [0, 1]
        scheduled = [[(n, self._updates(n, phase)) for n in names if n] for phase in phases]
        longest = [
            [(n, self._updates(n, phase, every_iteration=True)) for n in names if n]
            for phase in phases
        ]
        # One rank runs the networks one after another; DDP ranks interleave them, to sync
        # a step's networks at once (UpdateSchedule).
        interleave = self.trainer.world_size > 1
        counts = [[u for _, u in phase] for phase in longest]
        lengths = [max(c, default=0) if interleave else sum(c) for c in counts]
        return UpdateSchedule(scheduled, lengths, interleave)

    # ---- Lightning: one CFR iteration ---------------------------------------------------------
    def on_train_start(self) -> None:
        if self._resume_state is not None:
            self._restore_training_state(self._resume_state)
            self._resume_state = None

    def on_train_epoch_start(self) -> None:
        self._epoch_stats = TraversalStats()
        self.iteration_metrics = {}
        self.queue.reset_stats()
        players = PLAYERS[:1] if self.hparams.alternate_updates else PLAYERS
        self.traversal_epoch(players)
        self.restart_advantage_networks(players)
        self.start_updates()

    def restart_advantage_networks(self, players: Sequence[int]) -> None:
        """Reinitialise ``players``' advantage networks and their Adam state, after their
        traversal and before their updates (unless ``advantage_warm_start``).

        Deep CFR retrains the advantage networks from scratch on the whole reservoir: a
        network fitted to last iteration's data would carry its errors forward. With
        alternating updates player 1's network waits for player 1's own traversal: that
        traversal weighs player 1's actions by its current strategy, which a network reset
        beforehand would replace by noise.
        """
        if self.hparams.advantage_warm_start:
            return
        optimizers = self.optimizers()
        for p in players:
            reinitialise(self.advantage_nets[p])
            broadcast_from_rank_zero(self.trainer, self.advantage_nets[p])
            optimizers[p].optimizer.state.clear()

    def start_updates(self) -> None:
        """Set up this iteration's training epoch: its schedule and its update log."""
        self._schedule = self.update_schedule()
        self._update_log = UpdateLog(self.device, {name: _kind(name) for name in self.networks()})
        self._filled: dict[str, bool] = {}  # buffers known to hold rows (or not) this phase

    def traversal_epoch(self, players: Sequence[int] = PLAYERS) -> list[TraversalStats]:
        """Walk ``traversals_per_player`` games for each of ``players``; the iteration's
        traversal metrics (over every traversal epoch of the iteration so far) go to
        ``iteration_metrics``."""
        head = uniform_strategy if self.iteration == 1 else regret_matching
        if head is not self._queue_head:
            # Only when the head changes: a registration replaces the queue's handles,
            # compiled ones included (dynamo's cache serves the new ones' graphs).
            for name, net in zip(ADVANTAGE_NETWORKS, self.advantage_nets, strict=True):
                self.queue.register(name, net, head)
            self.queue.register(STRATEGY_NETWORK, self.strategy_net, masked_softmax)
            if self.value_net is not None:
                self.queue.register(self.value_name, self.value_net)  # raw outputs: V(s)
            self._queue_head = head
        # The queue is ready: a callback may switch its backend and warm it up here.
        self._call_callbacks("on_traversal_start")
        n_traversals = self.rank_share(self.hparams.traversals_per_player)
        cumulative = self.hparams.regret_targets == "cumulative"
        with torch.no_grad():
            if cumulative:  # the buffers hold one iteration's rows (cfr/cumulative_regret.py)
                for p in players:
                    self.advantage_buffers[p].clear()
            stats = [
                self.sampler.traverse(self.traversal_context(p), n_traversals) for p in players
            ]
        if cumulative:  # before the networks that predict R_{T-1} are retrained
            alpha = self.hparams.discount_alpha
            for p in players:
                bootstrap_targets(
                    self.advantage_buffers[p],
                    self.advantage_nets[p],
                    self.iteration,
                    DCFR_ALPHA if alpha is None else alpha,
                )
        for buffer in self.row_buffers().values():
            buffer.check_finite()  # rows refused for non-finite targets stop the run here
        self._epoch_stats = total = sum(stats, self._epoch_stats)
        queue = self.queue.stats()
        self.iteration_metrics |= {
            "time/traversal_s": total.seconds,
            "time/policy_network_s": queue.policy_network_seconds,
            "time/memory_add_s": total.memory_add_seconds,
            "traversal/nodes": float(total.nodes),
            "traversal/nodes_per_s": total.nodes_per_s,
            "traversal/advantage_rows": float(total.advantage_rows),
            "traversal/advantage_rows_per_s": total.advantage_rows_per_s,
            "traversal/truncated_share": total.truncated / max(total.traversals, 1),
            "inference/mean_batch": queue.mean_batch,
            **{
                metrics.buffer_rows(name): float(len(buffer))
                for name, buffer in self.row_buffers().items()
            },
        }
        self._call_callbacks("on_traversal_end")
        return stats

    def traversal_context(self, traverser: int) -> TraversalContext:
        """What the sampler works with in ``traverser``'s traversal epoch of this iteration."""
        return TraversalContext(
            game=self.game,
            traverser=traverser,
            iteration=self.iteration,
            queue=self.queue,
            advantage_buffer=self.advantage_buffers[traverser],
            strategy_buffer=self.strategy_buffer,
            generator=self.traversal_generator,
            value_buffer=self.value_buffer,
            kernels=self.hparams.engine_kernels,
        )

    def training_step(self, step: int, batch_idx: int) -> None:
        schedule, log = self._schedule, self._update_log
        if self.hparams.alternate_updates and batch_idx == schedule.phase_starts[1]:
            # Player 1 traverses against player 0's advantage network trained just now.
            self.traversal_epoch(PLAYERS[1:])
            self.restart_advantage_networks(PLAYERS[1:])
            self._filled = {}
        names = schedule.networks(batch_idx)
        log.start(names)
        if names:
            self.update_networks(names, schedule.position(batch_idx))
        if batch_idx == len(schedule) - 1:
            # Here rather than at the epoch's end: callbacks log the iteration's metrics in
            # on_train_epoch_end, before the module's own hook runs. Reading the losses also
            # stops a diverged run before this iteration's checkpoint.
            self.iteration_metrics.update(log.read(self.iteration))
            self.iteration_metrics.update(log.phase_seconds())
            self.iteration_metrics.update(
                held_out_losses(self.networks(), self.row_buffers(), self._loss)
            )
            if self.hparams.snapshots:
                # This iteration's networks are trained: store them before its checkpoint.
                states = [
                    {k: v.detach().cpu().clone() for k, v in net.state_dict().items()}
                    for net in self.advantage_nets
                ]
                self._snapshots.append((self.iteration, states))

    def _updates(
        self, network: str, phase: int | None = None, every_iteration: bool = False
    ) -> int:
        """Updates of ``network`` in this iteration's training epoch, or with alternating
        updates in the half of it after player ``phase``'s traversal (its advantage network
        and the value network; the strategy network after the second). ``every_iteration``:
        as if this iteration trained the strategy network."""
        if network == STRATEGY_NETWORK:
            train = (every_iteration or self.trains_strategy) and phase in (None, 1)
            updates = self.hparams.strategy_updates if train else 0
        elif network == self.value_name:
            updates = self.hparams.value_updates
        elif phase is not None and network != ADVANTAGE_NETWORKS[phase]:
            updates = 0
        else:
            updates = self.hparams.advantage_updates
        if self.hparams.rank_scaling == "updates":  # N times the rows in 1/N of the updates
            return self.rank_share(updates)
        return updates

    def rows_per_update(self) -> int:
        """Rows this rank samples for an update: ``batch_size`` over all ranks (``rank_scaling``
        ``batch``: N ranks train what one would, each on 1/N of them), or on each rank
        (``updates``: N times the rows in 1/N of the updates, ``_updates``)."""
        if self.hparams.rank_scaling == "updates":
            return self.hparams.batch_size
        return self.rank_share(self.hparams.batch_size)

    def rank_share(self, count: int) -> int:
        """This rank's share of ``count`` (games, updates, rows) split over the DDP ranks,
        rounded up so that the ranks together do at least ``count``."""
        return -(-count // self.trainer.world_size)

    def _loss(self, network: str) -> tuple[Callable[..., torch.Tensor], float]:
        """``network``'s loss function and the exponent of its rows' iteration weights."""
        if network == STRATEGY_NETWORK:
            return strategy_loss, self.average_exponent
        if network == self.value_name:
            # The value buffer keeps the newest rows only: they weigh alike.
            return advantage_loss, 0.0
        loss = advantage_loss
        if self.hparams.predictive:  # this iteration's rows count twice (losses.py)
            loss = functools.partial(advantage_loss, newest=self.iteration)
        return loss, self.hparams.weight_exponent

    def update_networks(self, names: Sequence[str], positions: Sequence[tuple[int, int]]) -> None:
        """One optimizer step of each network of ``names`` (its ``(k, n)`` update of the
        phase in ``positions``) on a batch of its buffer; none while its buffer is empty on
        some rank. A DDP run averages the networks' gradients in one all-reduce. Nothing
        here reads a value back from the device: each loss goes to the iteration's
        :class:`~lostcities_cfr.training.updates.UpdateLog`."""
        if not self._filled:  # one read per phase; a network trains once every rank has rows
            buffers = self.row_buffers()
            filled = on_every_rank(self.trainer, [len(b) > 0 for b in buffers.values()])
            self._filled = dict(zip(buffers, filled, strict=True))
        optimizers, nets = self.optimizers(), self.networks()
        order = list(nets)
        updated = []
        for name, (done, total) in zip(names, positions, strict=True):
            if not self._filled[name]:
                continue
            optimizer = optimizers[order.index(name)]
            self._schedule_learning_rate(optimizer, done, total)
            loss = self._batch_loss(name)
            optimizer.zero_grad()
            backward_unsynced(self, loss)
            updated.append((name, optimizer, loss))
        average_gradients(self.trainer, [nets[name] for name, _, _ in updated])
        for name, optimizer, loss in updated:
            if self.hparams.gradient_clip > 0:
                self.clip_gradients(optimizer, gradient_clip_val=self.hparams.gradient_clip)
            optimizer.step()
            self._update_log.record(name, loss)

    def _batch_loss(self, name: str) -> torch.Tensor:
        """Network ``name``'s loss on a batch of its buffer's rows (this rank's share)."""
        buffer, net = self.row_buffers()[name], self.networks()[name]
        loss_fn, exponent = self._loss(name)
        rows = buffer.sample(self.rows_per_update(), generator=self.batch_generator)
        features, legal, targets = rows.features, rows.legal, rows.targets
        if self.hparams.color_augmentation:
            if name == self.value_name:  # one output, the state's value: only states move
                features = permute_features(features, self._history_layout, self.batch_generator)
            else:
                features, legal, targets = permute_rows(
                    features,
                    legal,
                    targets,
                    self._feature_layout,
                    self._action_layout,
                    self.batch_generator,
                )
        # The rows come from the buffer, not from a dataloader, so Lightning never converts
        # them: under ``precision="bf16-true"`` the network's weights are bfloat16.
        features = self.trainer.precision_plugin.convert_input(features)
        if self.hparams.update_graphs:
            inputs = (features, legal, targets, rows.iteration)
            return self.update_graphs.loss(name, net, loss_fn, exponent, inputs)
        # inline: a NetworkLoss built per update would cost ~17 us of Python
        outputs = self.compiled_networks.get(name, net)(features)
        return loss_fn(outputs, legal, targets, rows.iteration, exponent)

    def _schedule_learning_rate(
        self, optimizer: pl.core.optimizer.LightningOptimizer, done: int, total: int
    ) -> None:
        """Set the learning rate of a network's update ``done`` (0-based) of ``total`` in
        this phase (cosine: from ``learning_rate`` at the first to near 0 at the last)."""
        if self.hparams.learning_rate_schedule == "constant":
            return
        lr = self.hparams.learning_rate * 0.5 * (1 + math.cos(math.pi * done / total))
        for group in optimizer.optimizer.param_groups:
            group["lr"] = lr

    def on_train_epoch_end(self) -> None:
        every = self.hparams.exploitability_every
        if every and self.iteration % every == 0:
            self.iteration_metrics.update(self.exploitability_metrics())
        self.log(metrics.ITERATION, float(self.iteration))
        # Reduced by hand, so Lightning's own sync (one all-reduce per metric) stays off.
        summed = metrics.SUMMED_OVER_RANKS
        self.log_dict(reduce_over_ranks(self.trainer, self.iteration_metrics, summed))

    # ---- helpers ---------------------------------------------------------------------------------
    def _call_callbacks(self, hook: str) -> None:
        """Call ``hook(trainer, module)`` on every callback that defines it (the hooks of
        :class:`~lostcities_cfr.callbacks.TraversalCallback`)."""
        for callback in self.trainer.callbacks:
            method = getattr(callback, hook, None)
            if callable(method):
                method(self.trainer, self)


def _kind(network: str) -> str:
    """The training phase a network's updates count in: ``advantage``, ``strategy``, ``value``."""
    return "advantage" if network in ADVANTAGE_NETWORKS else network
