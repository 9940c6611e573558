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

Mapping onto Lightning (``docs/architecture.md``): one ``Trainer.fit`` is one experiment and
one epoch one iteration; :mod:`.loop` runs an iteration (the traversal epoch in
``on_train_epoch_start``, then one network update per step, optimization manual, one Adam
per network). Checkpoints carry the reservoirs, the generators and the global torch RNG state
besides Lightning's own networks, optimizers and loop counters, so ``fit --ckpt_path last``
continues a run where its last completed iteration left it.

What stands apart from the model's state lives beside it: the iteration's loop, the updates'
schedule and log, the policies it plays (:mod:`.policies`), losses, held-out losses, metric
names, evaluation, agents and checkpoint loading.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import pytorch_lightning as pl
import torch
from pytorch_lightning.trainer.states import TrainerFn
from pytorch_lightning.utilities.warnings import PossibleUserWarning
from torch import nn

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.arguments import (
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    RightOpenUnitInterval,
    checked,
)
from lostcities_cfr.cfr.budgeted_sampling import BudgetedSampling
from lostcities_cfr.cfr.external_sampling import ExternalSampling
from lostcities_cfr.cfr.networks import NetworkConfig, NetworkFactory, NetworkPreset
from lostcities_cfr.cfr.reservoir import ReservoirBuffer
from lostcities_cfr.cfr.traversal import (
    ADVANTAGE_NETWORKS,
    STRATEGY_NETWORK,
    Sampler,
)
from lostcities_cfr.errors import AgentSpecError, ConfigError
from lostcities_cfr.evaluation.arena import EvaluationResult
from lostcities_cfr.game import Rules
from lostcities_cfr.game.lost_cities import LostCities, as_game
from lostcities_cfr.game.protocol import Game
from lostcities_cfr.game.symmetry import (
    action_layout,
    feature_layout,
)
from lostcities_cfr.inference import InferenceQueue
from lostcities_cfr.training import metrics
from lostcities_cfr.training.deep_cfr_arguments import (
    build_networks,
    check_regret_options,
    check_update_graphs,
    refuse_lost_cities_options,
)
from lostcities_cfr.training.evaluation import (
    check_exploitability_every,
    deployed_policy,
    evaluate_policy,
)
from lostcities_cfr.training.graphs import UpdateGraphs
from lostcities_cfr.training.loop import PLAYERS, CFRIteration
from lostcities_cfr.training.policies import DeepCFRPolicies
from lostcities_cfr.training.resume import ResumableState

# The policy an agent of the model plays by default (``deploy``): a policy, greedy or not.
Deployed = Literal[
    "average", "average:greedy", "current", "current:greedy", "sdcfr", "sdcfr:greedy"
]


class DeepCFR(CFRIteration, ResumableState, DeepCFRPolicies, pl.LightningModule):
    """Deep CFR's networks, reservoirs and loop (module docstring).

    Args:
        rules: the game: a Lost Cities preset name (``classic``, ``six-colors``, ``tiny``), a
            :class:`Rules`, or any :class:`~lostcities_cfr.game.protocol.Game` (in a config,
            its ``class_path``: ``lostcities_cfr.game.poker.LeducPoker``; ``docs/games.md``).
            Colour networks, colour augmentation, the budgeted sampler and the final
            duplicate games are Lost Cities' alone and refuse another game.
        network: a preset name (``512x3``, ``1024x6``), a :class:`NetworkConfig`, or an
            ``nn.Module`` class taking ``(n_features, n_actions)`` (in a config, its
            ``class_path``; ``docs/architecture.md``, "Extending"); the shape of all three
            networks.
        sampler: walks the games of the traversal epoch (``None``: :class:`BudgetedSampling`
            with its defaults in Lost Cities, which suits any rules; ``ExternalSampling`` in
            another game, and exact on tiny rules).
        traversals_per_player: games each player traverses per iteration, over all ranks.
        advantage_buffer_size: rows each player's advantage reservoir holds (on each rank:
            a DDP rank keeps the rows of its own games).
        strategy_buffer_size: rows the strategy reservoir holds.
        batch_size: rows per update, over all ranks (each of N DDP ranks samples
            ``batch_size / N`` of them, rounded up, and their gradients are averaged), or
            on each rank with ``rank_scaling="updates"``.
        rank_scaling: how N DDP ranks share an iteration's training: ``batch``, every update
            of one rank's schedule on ``batch_size / N`` rows a rank (the same updates as
            one rank, each cheaper in arithmetic only), or ``updates``, ``1/N`` of every
            network's updates (rounded up) on ``batch_size`` rows a rank: as many rows an
            iteration as one rank, in N times larger batches, so that the updates' fixed
            costs shrink with the ranks too (``docs/architecture.md``, "Choosing ranks").
            One rank trains alike under both.
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
        average_exponent: the average strategy's iteration weights, ``t ** average_exponent``
            (the strategy network's rows and SD-CFR's average; DCFR's gamma, 2 in the
            paper); None: ``weight_exponent``.
        predictive: the rows of the newest iteration weigh twice (``t ** weight_exponent``
            and ``(t + 1) ** weight_exponent``): regret matching then plays the regret plus
            its prediction, the last regret (predictive CFR, Farina et al. 2021; ``losses.py``).
        regret_targets: what the advantage networks fit: ``sampled``, every iteration's
            regret rows (Deep CFR), or ``cumulative``, this iteration's rows with the last
            network's discounted positive regret added (Deep DCFR+, Xu et al. 2024;
            ``cfr/cumulative_regret.py``): the advantage reservoirs then hold one iteration.
        discount_alpha: DCFR's alpha of ``cumulative`` targets (``.inf``: CFR+'s flooring
            alone); None: ``DCFR_ALPHA``, 1.5, the paper's.
        learning_rate_schedule: each iteration's learning rate: ``constant``, or ``cosine``
            from ``learning_rate`` down to 0 over each network's updates of the iteration, so
            that a network ends its iteration near the weighted mean of its targets rather than
            a few Adam steps of noise around it (``docs/games.md``, "Tuning").
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
        value_network: the history value network, named as ``network`` is, built when the
            sampler learns a value baseline (a sampler with a ``value_network`` queue name,
            such as ``ESCHERSampling``); None: the same as ``network``.
        value_buffer_size: rows of the value network's buffer, the newest kept (the value
            follows the current strategy, so old rows go stale).
        value_updates: updates of the value network per iteration (warm-started: it
            tracks the current strategy from one iteration to the next).
        holdout: share of every buffer's rows held out of training; each network's loss on
            them is logged as ``loss/val_<network>`` next to ``loss/val_zero_<network>``,
            the loss of predicting zeros. 0 holds out nothing.
        weight_decay: decoupled weight decay (AdamW) of every network; 0 is plain Adam.
        snapshots: keep every iteration's advantage networks (in memory and in checkpoints),
            for the ``"sdcfr"`` policy (SD-CFR, Steinberger 2019: the average strategy
            without the strategy network's approximation error).
        deploy: the policy an agent of this model plays unless asked for another (``ckpt:PATH``,
            ``evaluate``, ``play``): ``average``, ``current`` or ``sdcfr``, with ``:greedy``
            to play the most probable action (``docs/strength.md`` compares them).
        alternate_updates: traverse for player 0, train its advantage network (and the
            value network), then traverse for player 1 against it and train player 1's (and
            the value and strategy networks): each player's regrets then answer the other's
            newest strategy, as in alternating-update CFR. Off: both traverse, then all train.
        optimizer_kernel: how Adam updates a network's parameters: one tensor at a time
            (``for-loop``), all at once in a few batched calls (``foreach``) or in one
            fused kernel (``fused``); ``auto`` takes ``fused`` on a GPU and ``foreach`` on a
            CPU. The same arithmetic, in fewer operator calls.
        engine_kernels: how the traversal's games run the rules: ``eager`` torch calls, or
            ``compiled`` (``torch.compile``: the legal mask, the encoder and the step as a
            few generated kernels each, ``game/fused.py``; equal values, a few seconds to
            compile at the start). For a GPU, where each operator call is a kernel launch;
            on two CPU cores eager is faster (``docs/performance.md``).
        update_graphs: record each network's training forward, loss and backward as CUDA
            graphs at its first update and replay them at every later one (``graphs.py``):
            two launches an update instead of hundreds, the same kernels on the same
            memory. CUDA only; not with mixed precision or ``CompileToggle(training=True)``.
        color_augmentation: relabel the colours of every training row by a random
            permutation (``game/symmetry.py``): the rules treat colours alike, so each row
            stands for ``C!`` equal ones (120 in the classic game).
    """

    # The checkpoint entry holding what only a resumed fit uses (reservoirs, generators):
    # loading a model to play leaves it out (training/checkpoint.py).
    training_state_key = "deep_cfr"

    @checked
    def __init__(
        self,
        rules: Rules | Game | str = "classic",
        network: NetworkPreset | NetworkConfig | NetworkFactory = "512x3",
        sampler: Sampler | None = None,
        traversals_per_player: PositiveInt = 280,
        advantage_buffer_size: PositiveInt = 2_000_000,
        strategy_buffer_size: PositiveInt = 2_000_000,
        batch_size: PositiveInt = 1024,
        rank_scaling: Literal["batch", "updates"] = "batch",
        advantage_updates: PositiveInt = 512,
        strategy_updates: PositiveInt = 512,
        strategy_every: PositiveInt = 1,
        advantage_warm_start: bool = False,
        learning_rate: PositiveFloat = 1e-3,
        gradient_clip: NonNegativeFloat = 1.0,
        weight_exponent: NonNegativeFloat = 1.0,
        average_exponent: NonNegativeFloat | None = None,
        predictive: bool = False,
        regret_targets: Literal["sampled", "cumulative"] = "sampled",
        discount_alpha: NonNegativeFloat | None = None,
        learning_rate_schedule: Literal["constant", "cosine"] = "constant",
        inference_buckets: Sequence[PositiveInt] | None = (64, 256, 1024, 4096),
        exploitability_every: NonNegativeInt = 0,
        final_eval_games: NonNegativeInt = 1000,
        eval_opponent: str = "random",
        seed: int = 0,
        value_network: NetworkPreset | NetworkConfig | NetworkFactory | None = None,
        value_buffer_size: PositiveInt = 1_000_000,
        value_updates: NonNegativeInt = 256,
        holdout: RightOpenUnitInterval = 0.0,
        weight_decay: NonNegativeFloat = 0.0,
        color_augmentation: bool = False,
        snapshots: bool = False,
        deploy: Deployed = "average",
        alternate_updates: bool = False,
        optimizer_kernel: Literal["auto", "for-loop", "foreach", "fused"] = "auto",
        engine_kernels: Literal["eager", "compiled"] = "eager",
        update_graphs: bool = False,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.game = as_game(rules, "DeepCFR")
        # Lost Cities' rules, for the parts only it has; None in another game.
        self.rules = self.game.rules if isinstance(self.game, LostCities) else None
        if sampler is None:  # full-size Lost Cities needs a bounded walk; small games don't
            sampler = BudgetedSampling() if self.rules is not None else ExternalSampling()
        self.sampler = sampler
        if not isinstance(self.sampler, Sampler):
            raise ConfigError(
                f"DeepCFR sampler={sampler!r}; expected a Sampler such as BudgetedSampling()"
            )
        check_regret_options(regret_targets, discount_alpha, predictive, update_graphs)
        if deploy.startswith("sdcfr") and not snapshots:
            raise ConfigError(f"DeepCFR deploy={deploy!r} needs snapshots=True (stored iterations)")
        try:
            agent_from_spec(eval_opponent)
        except AgentSpecError as error:
            raise ConfigError(f"DeepCFR eval_opponent: {error}") from None
        if self.rules is None:
            refuse_lost_cities_options(
                self.game, self.sampler, final_eval_games, color_augmentation
            )
        check_exploitability_every("DeepCFR", exploitability_every, self.rules or self.game)

        F, A = self.game.feature_size, self.game.n_actions
        # The built spec, not hparams' copy: under LightningCLI that is the config's mapping.
        self._network = network
        self.advantage_nets = nn.ModuleList(
            build_networks(network, "network", F, A, self.game, len(PLAYERS))
        )
        (self.strategy_net,) = build_networks(network, "network", F, A, self.game)
        # The history value network, for samplers that learn a baseline (ESCHER).
        self.value_name: str | None = getattr(self.sampler, "value_network", None)
        self.value_net: nn.Module | None = None
        if self.value_name is not None:
            field = "network" if value_network is None else "value_network"
            # V(s): one output, the return of the player to move.
            (self.value_net,) = build_networks(
                value_network or network, field, self.game.history_feature_size, 1, self.game
            )
        if self.rules is not None:  # colour augmentation's relabelling tables
            self._feature_layout = feature_layout(self.rules)
            self._history_layout = feature_layout(self.rules, history=True)
            self._action_layout = action_layout(self.rules)
        # The queue holds these very modules, so traversal always sees the latest weights.
        self.queue = InferenceQueue(bucket_sizes=inference_buckets)
        self._queue_head: Callable | None = None  # the advantage head registered in the queue
        # What training steps call in place of the network of that name: a compiled handle
        # on the same parameters (CompileToggle), so state_dict keys never change.
        self.compiled_networks: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {}
        self.update_graphs = UpdateGraphs()  # used with update_graphs=True
        # Built in setup("fit") on the training device (millions of rows: not for validate
        # or for loading an agent).
        self.advantage_buffers: list[ReservoirBuffer] = []
        self.strategy_buffer: ReservoirBuffer | None = None
        self.value_buffer: ReservoirBuffer | None = None
        self.traversal_generator = torch.Generator().manual_seed(seed)
        self.batch_generator = torch.Generator().manual_seed(seed + 1)
        self.iteration_metrics: dict[str, float] = {}
        self._resume_state: dict[str, Any] | None = None
        # The file and save id a DDP checkpoint's shards go with, while RunCheckpoint saves.
        self.shard_target: tuple[Path, str] | None = None
        # SD-CFR: (iteration, advantage networks' weights per player) of every iteration.
        self._snapshots: list[tuple[int, list[dict[str, torch.Tensor]]]] = []

    # ---- properties -------------------------------------------------------------------------
    @property
    def iteration(self) -> int:
        """The CFR iteration running (1-based): the Lightning epoch plus one."""
        return self.current_epoch + 1

    @property
    def average_exponent(self) -> float:
        """The exponent of the average strategy's iteration weights."""
        gamma = self.hparams.average_exponent
        return self.hparams.weight_exponent if gamma is None else gamma

    @property
    def trains_strategy(self) -> bool:
        """Whether this iteration trains the strategy network."""
        last_iteration = self.trainer.max_epochs  # -1 or None: no last iteration
        last = last_iteration is not None and self.iteration == last_iteration
        return self.iteration % self.hparams.strategy_every == 0 or last

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
        if self.trainer.world_size > 1:
            # The iteration's figures are reduced over the ranks by hand (CFRIteration).
            warnings.filterwarnings(
                "ignore", "It is recommended to use `self.log", PossibleUserWarning
            )
        if self.hparams.update_graphs:
            check_update_graphs(device, str(self.trainer.precision))
        rank = self.trainer.global_rank
        seed = self.hparams.seed + 1000 * rank  # every rank walks its own games
        F, A = self.game.feature_size, self.game.n_actions
        holdout = self.hparams.holdout
        self.advantage_buffers = [
            ReservoirBuffer(
                self.hparams.advantage_buffer_size, F, A, device, seed=seed + 2 + p, holdout=holdout
            )
            for p in PLAYERS
        ]
        self.strategy_buffer = ReservoirBuffer(
            self.hparams.strategy_buffer_size, F, A, device, seed=seed + 4, holdout=holdout
        )
        if self.value_net is not None:
            self.value_buffer = ReservoirBuffer(
                self.hparams.value_buffer_size,
                self.game.history_feature_size,
                1,
                device,
                seed=seed + 5,
                target_dtype=torch.float32,  # regression targets, not probabilities
                fifo=True,
                holdout=holdout,
            )
        self.traversal_generator = torch.Generator(device).manual_seed(seed)
        self.batch_generator = torch.Generator(device).manual_seed(seed + 1)

    def networks(self) -> dict[str, nn.Module]:
        """Every trained network by its name in metrics and the queue: ``advantage_p0``,
        ``advantage_p1``, ``strategy`` and, with a value-baseline sampler, ``value``."""
        nets = dict(zip(ADVANTAGE_NETWORKS, self.advantage_nets, strict=True))
        nets[STRATEGY_NETWORK] = self.strategy_net
        if self.value_net is not None:
            nets[self.value_name] = self.value_net
        return nets

    def row_buffers(self) -> dict[str, ReservoirBuffer]:
        """Every buffer of training rows, by the name of the network it trains."""
        buffers = dict(zip(ADVANTAGE_NETWORKS, self.advantage_buffers, strict=True))
        buffers[STRATEGY_NETWORK] = self.strategy_buffer
        if self.value_buffer is not None:
            buffers[self.value_name] = self.value_buffer
        return buffers

    def configure_optimizers(self) -> list[torch.optim.Optimizer]:
        # One optimizer per network, in the order of ``networks()``.
        lr, decay = self.hparams.learning_rate, self.hparams.weight_decay
        kernel = self.hparams.optimizer_kernel
        if kernel == "auto":  # measured in docs/performance.md, "Fixed costs per step"
            kernel = "fused" if self.device.type == "cuda" else "foreach"
        options = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}}
        options["fused"] = {"fused": True}
        return [
            torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=decay, **options[kernel])
            if decay
            else torch.optim.Adam(net.parameters(), lr=lr, **options[kernel])
            for net in self.networks().values()
        ]

    def val_dataloader(self) -> list[int]:
        return [0]  # ``validate`` plays one evaluation (``validation_step``)

    def on_train_end(self) -> None:
        games = self.hparams.final_eval_games
        if not games or not self.trainer.is_global_zero:
            return
        # Lightning has counted the last epoch as completed: current_epoch is its iteration.
        iteration = self.current_epoch
        # The networks-only file of the run's end (callbacks.RunCheckpoint, which fit adds).
        saved = next(
            (
                c.final_path
                for c in self.trainer.checkpoint_callbacks
                if getattr(c, "final_path", None)
            ),
            None,
        )
        where = f"saved in {saved}" if saved else "in no file: the trainer has no RunCheckpoint"
        self.print(f"Final evaluation of iteration {iteration}'s networks ({where}):")
        result = self.evaluate_deployed(games)
        self.print(result.format_table())
        final = {metrics.ITERATION: float(iteration), **self._final_metrics(result)}
        for logger in self.loggers:
            logger.log_metrics(final, step=self.trainer.global_step)

    # ---- validate: one evaluation of the deployed policy ---------------------------------------
    def validation_step(self, batch: int, batch_idx: int) -> None:
        result = self.evaluate_deployed(self.hparams.final_eval_games or 1000)
        self.print(result.format_table())
        self.log_dict(self._final_metrics(result), batch_size=1)

    def evaluate_deployed(self, games: int) -> EvaluationResult:
        """The deployed policy (``deploy``) against ``eval_opponent`` in ``games`` duplicate
        games."""
        policy, greedy = deployed_policy(self)
        return evaluate_policy(
            self, policy, self.hparams.eval_opponent, games, self.hparams.seed, greedy
        )

    def _final_metrics(self, result: EvaluationResult) -> dict[str, float]:
        return metrics.eval_metrics(self.hparams.deploy, self.hparams.eval_opponent, result)
