"""Deep CFR as one LightningModule: one ``Trainer.fit`` is one experiment, one epoch one iteration.

Deep CFR (Brown, Lerer, Gross & Sandholm, "Deep Counterfactual Regret Minimization", ICML
2019) runs CFR with networks in place of tables. Iteration ``t`` has two phases:

1. **Traversal epoch.** For each player ``p`` (the traverser), the sampler walks
   ``traversals_per_player`` games in which both players act by regret matching on their
   advantage networks. It writes ``p``'s sampled instantaneous regrets to ``p``'s advantage
   reservoir and the opponent's strategies to the strategy reservoir, every row tagged ``t``.
2. **Training epoch.** Each advantage network trains on its reservoir (retrained from scratch,
   as in the paper, or warm-started), and the strategy network on the strategy reservoir,
   each row weighted by ``t ** weight_exponent`` (linear CFR; :mod:`.losses`).

The strategy network's policy is the *average strategy*, Deep CFR's output; regret matching
on the advantage networks is the *current strategy*.

Mapping onto Lightning (``docs/architecture.md``): the traversal epoch runs in
``on_train_epoch_start``, before the epoch's steps; the training "dataloader" is a fixed-length
range of step indices and each step draws its own batches from the reservoirs with the
module's generator, so the loader never runs dry (a loader with no batch ends ``fit``) and
every DDP rank runs the same number of steps; optimization is manual, one Adam per network.
Checkpoints carry the reservoirs, the generators and the global torch RNG state besides
Lightning's own networks, optimizers and loop counters, so ``fit --ckpt_path last`` continues
a run where its last completed iteration left it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.trainer.states import TrainerFn
from torch import nn

from lostcities_cfr.agents import Agent, agent_from_spec
from lostcities_cfr.arena import EvaluationResult
from lostcities_cfr.cfr.budgeted_sampling import BudgetedSampling
from lostcities_cfr.cfr.exploitability import exploitability, game_tree
from lostcities_cfr.cfr.networks import NetworkConfig, masked_softmax
from lostcities_cfr.cfr.regret_matching import regret_matching, uniform_strategy
from lostcities_cfr.cfr.reservoir import ReservoirBuffer
from lostcities_cfr.cfr.traversal import (
    ADVANTAGE_NETWORKS,
    STRATEGY_NETWORK,
    Sampler,
    TraversalContext,
    TraversalStats,
)
from lostcities_cfr.errors import AgentSpecError, ConfigError, NonFiniteError
from lostcities_cfr.game import Rules, feature_size
from lostcities_cfr.inference import InferenceQueue
from lostcities_cfr.training import metrics
from lostcities_cfr.training.agents import POLICIES, policy_agent
from lostcities_cfr.training.checkpoint import MODEL_CLASS_KEY, class_path, plain_data
from lostcities_cfr.training.evaluation import evaluate_policy
from lostcities_cfr.training.losses import advantage_loss, strategy_loss

PLAYERS = (0, 1)


class DeepCFR(pl.LightningModule):
    """Deep CFR's networks, reservoirs and loop (module docstring).

    Args:
        rules: a preset name (``classic``, ``six-colors``, ``tiny``) or a :class:`Rules`.
        network: a preset name (``512x3``, ``1024x6``) or a :class:`NetworkConfig`; the
            shape of all three networks.
        sampler: walks the games of the traversal epoch (``None``: :class:`BudgetedSampling`
            with its defaults, which suits any rules; ``ExternalSampling`` is exact on tiny
            rules).
        traversals_per_player: games each player traverses per iteration, over all ranks.
        advantage_buffer_size: rows each player's advantage reservoir holds.
        strategy_buffer_size: rows the strategy reservoir holds.
        batch_size: rows per update (per rank).
        advantage_updates: updates of each advantage network per iteration.
        strategy_updates: updates of the strategy network per iteration that trains it.
        strategy_every: train the strategy network every this many iterations (and at the
            last one); it learns from the whole reservoir, so skipping iterations loses no
            data, only freshness of the average strategy between them.
        advantage_warm_start: continue training the advantage networks (and their Adam
            state) from the last iteration instead of retraining them from scratch.
        learning_rate: Adam's learning rate, all networks.
        gradient_clip: largest gradient norm per update; 0 turns clipping off.
        weight_exponent: a row of iteration ``t`` weighs ``t ** weight_exponent`` (1: linear
            CFR; 0: vanilla CFR's uniform average).
        inference_buckets: batch sizes the inference queue pads to where fixed shapes pay
            (the compiled backend, a CUDA device; eager CPU forwards run unpadded);
            ``None``: never pad.
        exploitability_every: log the exact exploitability of the average strategy every
            this many iterations; 0 never. Tiny rules only (the tree is walked whole).
        final_eval_games: duplicate games of the average strategy against
            ``eval_opponent`` at the end of ``fit`` (and in ``validate``); 0 skips them.
        eval_opponent: agent spec of that opponent (``docs/agents.md``).
        seed: seeds the module's generators (traversal, batches, reservoirs) and the
            evaluation deals. The CLI links it to ``seed_everything``.
    """

    def __init__(
        self,
        rules: str | Rules = "classic",
        network: str | NetworkConfig = "512x3",
        sampler: Sampler | None = None,
        traversals_per_player: int = 280,
        advantage_buffer_size: int = 2_000_000,
        strategy_buffer_size: int = 2_000_000,
        batch_size: int = 1024,
        advantage_updates: int = 512,
        strategy_updates: int = 512,
        strategy_every: int = 1,
        advantage_warm_start: bool = False,
        learning_rate: float = 1e-3,
        gradient_clip: float = 1.0,
        weight_exponent: float = 1.0,
        inference_buckets: Sequence[int] | None = (64, 256, 1024, 4096),
        exploitability_every: int = 0,
        final_eval_games: int = 1000,
        eval_opponent: str = "random",
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = False
        _check_arguments(self.hparams)
        self.rules = _resolve_rules(rules)
        self.network_config = _resolve_network(network)
        self.sampler = BudgetedSampling() if sampler is None else sampler
        if not isinstance(self.sampler, Sampler):
            raise ConfigError(
                f"DeepCFR sampler={sampler!r}; expected a Sampler such as BudgetedSampling()"
            )
        try:
            agent_from_spec(eval_opponent)
        except AgentSpecError as error:
            raise ConfigError(f"DeepCFR eval_opponent: {error}") from None
        if exploitability_every:
            try:
                game_tree(self.rules)  # built once and cached; refuses big rules at once
            except ConfigError as error:
                raise ConfigError(
                    f"DeepCFR exploitability_every={exploitability_every}: {error}"
                ) from None

        F, A = feature_size(self.rules), self.rules.n_actions
        self.advantage_nets = nn.ModuleList(self.network_config.build(F, A) for _ in PLAYERS)
        self.strategy_net = self.network_config.build(F, A)
        # The queue holds these very modules, so traversal always sees the latest weights.
        self.queue = InferenceQueue(bucket_sizes=inference_buckets)
        self._queue_head: Callable | None = None  # the advantage head registered in the queue
        # Built in setup("fit") on the training device (millions of rows: not for validate
        # or for loading an agent).
        self.advantage_buffers: list[ReservoirBuffer] = []
        self.strategy_buffer: ReservoirBuffer | None = None
        self.traversal_generator = torch.Generator().manual_seed(seed)
        self.batch_generator = torch.Generator().manual_seed(seed + 1)
        self.iteration_metrics: dict[str, float] = {}
        self._resume_state: dict[str, Any] | None = None
        self._uniform_exploitability: float | None = None

    # ---- properties -------------------------------------------------------------------------
    @property
    def iteration(self) -> int:
        """The CFR iteration running (1-based): the Lightning epoch plus one."""
        return self.current_epoch + 1

    @property
    def trains_strategy(self) -> bool:
        """Whether this iteration trains the strategy network."""
        last_iteration = self.trainer.max_epochs  # -1 or None: no last iteration
        last = last_iteration is not None and self.iteration == last_iteration
        return self.iteration % self.hparams.strategy_every == 0 or last

    policies = POLICIES

    def agent(
        self, policy: str = "average", greedy: bool = False, seed: int | None = None
    ) -> Agent:
        """A batched agent playing the ``"average"`` (strategy network) or ``"current"``
        (regret matching on the advantage networks) strategy."""
        return policy_agent(self.strategy_net, self.advantage_nets, policy, greedy, seed)

    def average_policy(self, features: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        """The average strategy [n, A] for features [n, F] and legal [n, A] bool."""
        with torch.inference_mode():
            logits = self.strategy_net(features.to(self.device, self.dtype)).float()
            return masked_softmax(logits, legal.to(self.device)).to(features.device)

    # ---- Lightning: setup -------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        if stage != TrainerFn.FITTING:
            return
        # During fit, evaluation belongs to callbacks and to the final evaluation; the
        # validation loop serves the ``validate`` command alone.
        self.trainer.limit_val_batches = 0
        if self.strategy_buffer is not None:
            return
        device = self.trainer.strategy.root_device
        rank = self.trainer.global_rank
        seed = self.hparams.seed + 1000 * rank  # every rank walks its own games
        F, A = feature_size(self.rules), self.rules.n_actions
        self.advantage_buffers = [
            ReservoirBuffer(self.hparams.advantage_buffer_size, F, A, device, seed=seed + 2 + p)
            for p in PLAYERS
        ]
        self.strategy_buffer = ReservoirBuffer(
            self.hparams.strategy_buffer_size, F, A, device, seed=seed + 4
        )
        self.traversal_generator = torch.Generator(device).manual_seed(seed)
        self.batch_generator = torch.Generator(device).manual_seed(seed + 1)

    def configure_optimizers(self) -> list[torch.optim.Optimizer]:
        # One Adam per network, in the order advantage_p0, advantage_p1, strategy.
        lr = self.hparams.learning_rate
        nets = [*self.advantage_nets, self.strategy_net]
        return [torch.optim.Adam(net.parameters(), lr=lr) for net in nets]

    def train_dataloader(self) -> range:
        # Step indices only: every step samples its batches from the reservoirs itself.
        return range(max(self.hparams.advantage_updates, self.hparams.strategy_updates))

    def val_dataloader(self) -> list[int]:
        return [0]  # ``validate`` plays one evaluation (``validation_step``)

    # ---- Lightning: one CFR iteration ---------------------------------------------------------
    def on_train_start(self) -> None:
        if self._resume_state is not None:
            self._restore_training_state(self._resume_state)
            self._resume_state = None

    def on_train_epoch_start(self) -> None:
        self.traversal_epoch()
        if not self.hparams.advantage_warm_start:
            # Deep CFR retrains the advantage networks from scratch on the whole reservoir:
            # a network fitted to last iteration's data would carry its errors forward.
            optimizers = self.optimizers()
            for p in PLAYERS:
                self.advantage_nets[p].reset_parameters()
                self._broadcast_from_rank_zero(self.advantage_nets[p])
                optimizers[p].optimizer.state.clear()
        self._train_seconds = {"advantage": 0.0, "strategy": 0.0}
        self._loss_sums: dict[str, float] = {}
        self._loss_counts: dict[str, int] = {}

    def traversal_epoch(self) -> list[TraversalStats]:
        """Walk ``traversals_per_player`` games for each player; fill ``iteration_metrics``."""
        head = uniform_strategy if self.iteration == 1 else regret_matching
        if head is not self._queue_head:
            # Only when the head changes: a registration replaces the queue's handles,
            # compiled ones included (dynamo's cache serves the new ones' graphs).
            for name, net in zip(ADVANTAGE_NETWORKS, self.advantage_nets, strict=True):
                self.queue.register(name, net, head)
            self.queue.register(STRATEGY_NETWORK, self.strategy_net, masked_softmax)
            self._queue_head = head
        # The queue is ready: a callback may switch its backend and warm it up here.
        self._call_callbacks("on_traversal_start")
        self.queue.reset_stats()
        n_traversals = -(-self.hparams.traversals_per_player // self.trainer.world_size)
        with torch.no_grad():
            stats = [
                self.sampler.traverse(self.traversal_context(p), n_traversals) for p in PLAYERS
            ]
        seconds = sum(s.seconds for s in stats)
        queue = self.queue.stats()
        nodes = sum(s.nodes for s in stats)
        self.iteration_metrics = {
            "time/traversal_s": seconds,
            "time/policy_network_s": queue["policy_network_seconds"],
            "time/memory_add_s": sum(s.memory_add_seconds for s in stats),
            "traversal/nodes": float(nodes),
            "traversal/nodes_per_s": nodes / seconds if seconds > 0 else 0.0,
            "inference/mean_batch": queue["mean_batch"],
            **{
                metrics.buffer_rows(name): float(len(buffer))
                for name, buffer in self.row_buffers().items()
            },
            "time/advantage_train_s": 0.0,
            "time/strategy_train_s": 0.0,
        }
        self._call_callbacks("on_traversal_end")
        return stats

    def row_buffers(self) -> dict[str, ReservoirBuffer]:
        """Every buffer of training rows, by the name its metrics use."""
        buffers = dict(zip(ADVANTAGE_NETWORKS, self.advantage_buffers, strict=True))
        buffers[STRATEGY_NETWORK] = self.strategy_buffer
        return buffers

    def traversal_context(self, traverser: int) -> TraversalContext:
        """What the sampler works with in ``traverser``'s traversal epoch of this iteration."""
        return TraversalContext(
            rules=self.rules,
            traverser=traverser,
            iteration=self.iteration,
            queue=self.queue,
            advantage_buffer=self.advantage_buffers[traverser],
            strategy_buffer=self.strategy_buffer,
            generator=self.traversal_generator,
        )

    def training_step(self, step: int, batch_idx: int) -> None:
        optimizers = self.optimizers()
        if batch_idx < self.hparams.advantage_updates:
            for p in PLAYERS:
                self._update(
                    ADVANTAGE_NETWORKS[p],
                    self.advantage_nets[p],
                    optimizers[p],
                    self.advantage_buffers[p],
                    advantage_loss,
                )
        if self.trains_strategy and batch_idx < self.hparams.strategy_updates:
            self._update(
                STRATEGY_NETWORK,
                self.strategy_net,
                optimizers[2],
                self.strategy_buffer,
                strategy_loss,
            )

    def _update(
        self,
        name: str,
        net: nn.Module,
        optimizer: pl.core.optimizer.LightningOptimizer,
        buffer: ReservoirBuffer,
        loss_fn: Callable[..., torch.Tensor],
    ) -> None:
        """One Adam step of ``net`` on a batch from ``buffer``; timed and its loss averaged."""
        if len(buffer) == 0:
            return
        start = time.perf_counter()
        rows = buffer.sample(self.hparams.batch_size, generator=self.batch_generator)
        # The rows come from the buffer, not from a dataloader, so Lightning never converts
        # them: under ``precision="bf16-true"`` the network's weights are bfloat16.
        outputs = net(self.trainer.precision_plugin.convert_input(rows.features))
        loss = loss_fn(
            outputs, rows.legal, rows.targets, rows.iteration, self.hparams.weight_exponent
        )
        optimizer.zero_grad()
        self._backward(loss, net)
        if self.hparams.gradient_clip > 0:
            self.clip_gradients(optimizer, gradient_clip_val=self.hparams.gradient_clip)
        optimizer.step()
        value = loss.item()  # also waits for the device, so the time below is the update's
        if not math.isfinite(value):
            # Before this iteration's checkpoint, so the last one on disk stays the last good one.
            before = self.iteration - 1
            kept = (
                f"the last checkpoint, iteration {before}'s, is kept"
                if before
                else "no iteration has ended, so there is no checkpoint"
            )
            raise NonFiniteError(
                f"{metrics.loss(name)}={value} at iteration {self.iteration}, update "
                f"{self._loss_counts.get(name, 0) + 1}: training stopped before this "
                f"iteration's checkpoint ({kept})"
            )
        kind = "strategy" if name == STRATEGY_NETWORK else "advantage"
        self._train_seconds[kind] += time.perf_counter() - start
        self._loss_sums[name] = self._loss_sums.get(name, 0.0) + value
        self._loss_counts[name] = self._loss_counts.get(name, 0) + 1
        # Kept current after every update: callbacks read these in on_train_epoch_end,
        # which Lightning calls before the module's own hook.
        self.iteration_metrics[metrics.loss(name)] = self._loss_sums[name] / self._loss_counts[name]
        self.iteration_metrics[metrics.phase_seconds(f"{kind}_train")] = self._train_seconds[kind]

    def on_train_epoch_end(self) -> None:
        every = self.hparams.exploitability_every
        if every and self.iteration % every == 0:
            self.iteration_metrics.update(self.exploitability_metrics())
        self.log(metrics.ITERATION, float(self.iteration))
        self.log_dict(self.iteration_metrics)

    def exploitability_metrics(self) -> dict[str, float]:
        """``exploitability`` of the average strategy, also as a share of the uniform policy's."""
        if self._uniform_exploitability is None:
            self._uniform_exploitability = exploitability(self.rules, uniform_strategy)
        value = exploitability(self.rules, self.average_policy)
        return {
            "exploitability": value,
            "exploitability/vs_uniform": value / self._uniform_exploitability,
        }

    def on_train_end(self) -> None:
        games = self.hparams.final_eval_games
        if not games or not self.trainer.is_global_zero:
            return
        result = self.evaluate_average(games)
        self.print(result.format_table())
        # Lightning has counted the last epoch as completed: current_epoch is its iteration.
        final = {metrics.ITERATION: float(self.current_epoch), **self._final_metrics(result)}
        for logger in self.loggers:
            logger.log_metrics(final, step=self.trainer.global_step)

    # ---- validate: one evaluation of the average strategy -------------------------------------
    def validation_step(self, batch: int, batch_idx: int) -> None:
        result = self.evaluate_average(self.hparams.final_eval_games or 1000)
        self.print(result.format_table())
        self.log_dict(self._final_metrics(result), batch_size=1)

    def evaluate_average(self, games: int) -> EvaluationResult:
        """The average strategy against ``eval_opponent`` in ``games`` duplicate games."""
        return evaluate_policy(
            self, "average", self.hparams.eval_opponent, games, self.hparams.seed
        )

    def _final_metrics(self, result: EvaluationResult) -> dict[str, float]:
        return metrics.eval_metrics("average", self.hparams.eval_opponent, result)

    # ---- checkpoints ---------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Plain data only, so that the file loads with torch.load(weights_only=True); the
        # class is named for the checkpoint loader's allow-list.
        checkpoint[MODEL_CLASS_KEY] = class_path(type(self))
        checkpoint["hyper_parameters"] = plain_data(dict(checkpoint.get("hyper_parameters", {})))
        if self.strategy_buffer is None:
            return
        checkpoint["deep_cfr"] = {
            "advantage_buffers": [buffer.state_dict() for buffer in self.advantage_buffers],
            "strategy_buffer": self.strategy_buffer.state_dict(),
            "traversal_generator": self.traversal_generator.get_state(),
            "batch_generator": self.batch_generator.get_state(),
            # Network re-initialisation (nn.init) draws from the global generators.
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # A resume may change the learning rate: this run's, not the saved optimizers' copy.
        for optimizer_state in checkpoint.get("optimizer_states", []):
            for group in optimizer_state["param_groups"]:
                group["lr"] = self.hparams.learning_rate
        # Applied in on_train_start, once the reservoirs exist on the training device;
        # loading weights alone (validate, an agent) never builds them.
        self._resume_state = checkpoint.get("deep_cfr")

    def _restore_training_state(self, state: dict[str, Any]) -> None:
        buffer_states = [*state["advantage_buffers"], state["strategy_buffer"]]
        for (name, buffer), buffer_state in zip(
            self.row_buffers().items(), buffer_states, strict=True
        ):
            try:
                buffer.load_state_dict(buffer_state)
            except NonFiniteError as error:
                raise NonFiniteError(
                    f"checkpoint {self.trainer.ckpt_path}: buffer {name}: {error}"
                ) from None
        self.traversal_generator.set_state(state["traversal_generator"])
        self.batch_generator.set_state(state["batch_generator"])
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])

    # ---- data parallel (DDP) ---------------------------------------------------------------------
    def _backward(self, loss: torch.Tensor, net: nn.Module) -> None:
        """``manual_backward``, then, across ranks, the mean of ``net``'s gradients.

        A training step runs one backward per network, and each backward reaches one
        network's parameters only: DDP's reducer, which expects a single backward over
        every parameter of the wrapped module, refuses that. So its automatic sync is
        blocked and each network's gradients are averaged here, in one all-reduce.
        """
        if self.trainer.world_size == 1:
            self.manual_backward(loss)
            return
        with self.trainer.strategy.block_backward_sync():
            self.manual_backward(loss)
        grads = [p.grad for p in net.parameters() if p.grad is not None]
        flat = torch.cat([g.flatten() for g in grads])
        mean = self.trainer.strategy.reduce(flat, reduce_op="mean")
        for grad, synced in zip(grads, mean.split([g.numel() for g in grads]), strict=True):
            grad.copy_(synced.view_as(grad))

    def _broadcast_from_rank_zero(self, net: nn.Module) -> None:
        """Give every rank rank 0's parameters of ``net`` (after a re-initialisation).

        Ranks draw their own games, so their global random streams need not stay in step;
        a network re-initialised from them would differ between ranks.
        """
        if self.trainer.world_size == 1:
            return
        for parameter in net.parameters():
            torch.distributed.broadcast(parameter.data, src=0)

    # ---- helpers ---------------------------------------------------------------------------------
    def _call_callbacks(self, hook: str) -> None:
        """Call ``hook(trainer, module)`` on every callback that defines it."""
        for callback in self.trainer.callbacks:
            method = getattr(callback, hook, None)
            if callable(method):
                method(self.trainer, self)


def _resolve_rules(rules: str | Rules) -> Rules:
    if isinstance(rules, Rules):
        return rules
    try:
        return Rules.preset(rules)
    except ConfigError as error:
        raise ConfigError(f"DeepCFR rules: {error} or a Rules mapping of its fields") from None


def _resolve_network(network: str | NetworkConfig) -> NetworkConfig:
    if isinstance(network, NetworkConfig):
        return network
    try:
        return NetworkConfig.preset(network)
    except ConfigError as error:
        raise ConfigError(f"DeepCFR network: {error}") from None


def _check_arguments(hparams: Any) -> None:
    """Refuse values that cannot work, naming the field, before anything is built."""
    at_least = {
        "traversals_per_player": 1,
        "advantage_buffer_size": 1,
        "strategy_buffer_size": 1,
        "batch_size": 1,
        "advantage_updates": 1,
        "strategy_updates": 1,
        "strategy_every": 1,
        "exploitability_every": 0,
        "final_eval_games": 0,
    }
    for name, low in at_least.items():
        value = hparams[name]
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ConfigError(f"DeepCFR {name}={value!r}; expected an int of at least {low}")
    for name, positive in (
        ("learning_rate", True),
        ("gradient_clip", False),
        ("weight_exponent", False),
    ):
        value = hparams[name]
        if not isinstance(value, int | float) or value < 0 or (positive and value == 0):
            raise ConfigError(
                f"DeepCFR {name}={value!r}; expected a number "
                + ("above 0" if positive else "of at least 0")
            )
