"""Expert iteration: a search's choices trained back into the network it searches over.

Anthony, Tian and Barber, "Thinking Fast and Slow with Deep Learning and Tree Search" (NIPS
2017): an *expert* (a search) improves on an *apprentice* (a network policy); the apprentice
learns to imitate the expert; the next expert searches over the better apprentice. AlphaZero
(Silver et al., Science 2018) is the same loop with MCTS visit counts as targets and the
game's outcome as the value network's target. Here the expert is
:class:`~lostcities_cfr.search.SearchAgent` (perfect-information Monte Carlo over sampled
worlds, rollouts of the apprentice, ``docs/search.md``) and its target is *soft*: the
softmax of its mean action values over a temperature (:func:`~lostcities_cfr.baselines.
expert_labels.soft_targets`), not only the action it plays.

**Start.** ``base`` is an agent spec of a network policy (``best``, the shipped PPO agent;
``ckpt:PATH`` of a PPO run or of a Deep CFR run's deployed average strategy): its policy
network is copied as the apprentice, and its value network where it has one over the
information state (PPO's), else a fresh ``value_network``.

**One round is one Lightning epoch:**

1. *label* (``on_train_epoch_start``): ``games_per_round`` self-play games of the apprentice
   in lockstep; at every decision the search takes (``label``: ``late``, those with at most
   ``max_deck`` cards in the deck, as ``search:`` plays; ``all``, every decision with a
   choice) all games' decisions go to the search in one batched call
   (:func:`~lostcities_cfr.baselines.expert_labels.label_games`), which plays its action;
   the network's sample plays the rest. Each labelled decision becomes a row of a reservoir
   (:class:`~lostcities_cfr.cfr.reservoir.ReservoirBuffer`): the mover's features, its
   legal mask, the policy target (``target``: the soft target, or the network's own
   probabilities moved to the search's move where it deviated), and the game's final score
   difference for the mover; with ``anchor``, so does every other decision with a choice,
   its target the network's own probabilities;
2. *self-play for PPO* (with ``ppo_games``, also ``on_train_epoch_start``): that many
   games of the apprentice against itself, without search
   (:func:`~lostcities_cfr.baselines.rollout.learner_rollout`), one seat of each recorded,
   with GAE advantages of the game's outcome (the policy gradient between rounds of
   "policy gradient plus expert iteration": it checks what the search taught against the
   game's outcome);
3. *update* (the epoch's training steps): ``updates_per_round`` Adam steps on minibatches
   drawn from the reservoir, the policy by cross-entropy to the targets
   (``loss/expert``), the value network by squared error to the outcomes over
   ``reward_scale`` (``loss/value``); with ``ppo_games``, each step adds ``ppo_coef``
   times PPO's clipped loss (:func:`~lostcities_cfr.baselines.ppo_math.ppo_loss`) on the
   next of ``updates_per_round`` shuffled slices of the self-play rows (one pass).

The next round's search runs over the updated networks (the search holds the apprentice
itself, not a copy). A checkpoint holds the networks, the optimizer, the reservoir and the
generators, so a resumed run continues as if never stopped; a resume that changes a search
or target setting (``worlds``, ``top``, ``z``, ``max_deck``, ``depth``, ``label``,
``target``, ``temperature``, ``played_weight``, ``anchor``, ``base``) is refused by ``fit``
in one line naming the field. Loading a checkpoint as an agent rebuilds the networks from
``base``'s shape, so the base must still load.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Literal

import pytorch_lightning as pl
import torch

from lostcities_cfr.agents import Agent, NetworkAgent
from lostcities_cfr.arguments import (
    ClosedUnitInterval,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    checked,
)
from lostcities_cfr.baselines.expert_iteration_arguments import build_value_net, load_base
from lostcities_cfr.baselines.expert_labels import (
    Labels,
    deviation_targets,
    label_games,
    mixed_targets,
    soft_cross_entropy,
)
from lostcities_cfr.baselines.ppo_arguments import policy_name
from lostcities_cfr.baselines.ppo_math import episode_advantages, explained_variance, ppo_loss
from lostcities_cfr.baselines.rollout import LEARNER, Decisions, learner_rollout
from lostcities_cfr.cfr.networks import NetworkConfig, masked_softmax
from lostcities_cfr.cfr.reservoir import ReservoirBuffer
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import GameBatch
from lostcities_cfr.game.lost_cities import as_game
from lostcities_cfr.inference import InferenceQueue
from lostcities_cfr.search import Rollouts, SearchAgent, StateValue
from lostcities_cfr.training import metrics
from lostcities_cfr.training.checkpoint import MODEL_CLASS_KEY, class_path, plain_data

# Deals and label streams come from seeds below this (as PPO's rollouts).
_SEED_RANGE = 2**62
BUFFER = "expert"  # the reservoir's name in metrics (buffer/expert, buffer/expert_fill)
# PPO's shape in configs/ppo.yaml, for a base without a value network over the information state
DEFAULT_VALUE_NETWORK = NetworkConfig(width=64, depth=2, architecture="colors")


class ExpertIteration(pl.LightningModule):
    """Expert iteration from a network agent, with a search as the expert (module docstring).

    Args:
        base: agent spec of the network policy to start from (``best``, ``ckpt:PATH``).
        games_per_round: self-play games labelled per round.
        label: which decisions the search labels and plays: ``late`` (at most ``max_deck``
            cards in the deck) or ``all`` (every decision with more than one legal action).
        worlds: the search's worlds per round of successive halving.
        top: its candidates, the network's most probable actions (at least 2); None: every
            legal action.
        z: standard errors by which a challenger must beat the network's own choice to be
            played (the soft target does not depend on it).
        max_deck: ``late`` labels decisions with at most this many cards in the deck.
        depth: rollouts stop after this many decisions and the value network values the
            state; None plays them out (the default of ``search:``, which measured best).
        chunk: rollouts played in one lockstep batch.
        target: what a labelled row's policy target is. ``soft``: the search's values
            through ``temperature``, with ``played_weight`` on its move
            (:func:`~lostcities_cfr.baselines.expert_labels.mixed_targets`). ``deviations``:
            the network's own probabilities when it was labelled, except where the search
            played another action than its most probable, which gets ``played_weight`` of
            the mass (:func:`~lostcities_cfr.baselines.expert_labels.deviation_targets`):
            the search's values move the network only where its test found evidence.
        temperature: points: the soft target is ``softmax(values / temperature)`` over the
            valued actions (``target: soft``).
        played_weight: share of the target put on the action the search played (which beat
            the network's choice by ``z`` standard errors, or is that choice), the rest
            being the soft target (``soft``: 0, the soft target alone; 1, the search's moves
            alone) or the network's probabilities (``deviations``, where it deviated).
        anchor: also keep the decisions with a choice that the search does not take (with
            ``label: late``, the early ones), their target the network's own probabilities
            when played: a KL term that holds the decisions the search never labels where
            they were, since one network plays them all.
        max_turns: the self-play games and the search's rollouts end after this many
            decisions, or the base's rules' own cap if lower (a capped round scores as it
            stands): a network that learns to trade discard piles would otherwise play
            rounds of thousands of decisions; None: the base's rules' cap (10,000 in the
            classic game).
        buffer_capacity: rows the reservoir holds (a uniform sample of all rows labelled).
        updates_per_round: Adam steps per round.
        minibatch_size: rows per step.
        learning_rate: Adam's step size, both networks.
        value_coef: weight of the value loss.
        reward_scale: the value network learns the score difference over this (the base's
            value network's scale, where it has one).
        max_grad_norm: largest gradient norm per step; 0 turns clipping off.
        ppo_games: self-play games of the apprentice per round for PPO (at least 2, one seat
            of each recorded); 0: no PPO, the updates learn the reservoir alone.
        ppo_coef: weight of PPO's loss beside the expert's.
        clip: PPO's clip range of the probability ratio.
        entropy_coef: PPO's entropy bonus.
        gae_lambda: GAE's lambda (gamma is 1: only a round's end counts, as in PPO's
            config).
        value_network: the value network's shape where the base has none (a Deep CFR run);
            None: :data:`DEFAULT_VALUE_NETWORK`.
        seed: seeds the deals, the search's streams and the minibatches. The CLI links it to
            ``seed_everything``.
    """

    policies = (LEARNER,)
    # The checkpoint entry only a resumed fit uses (the reservoir, the generators).
    training_state_key = "expert_iteration"

    @checked
    def __init__(
        self,
        base: str = "best",
        games_per_round: PositiveInt = 64,
        label: Literal["late", "all"] = "late",
        worlds: PositiveInt = 16,
        top: PositiveInt | None = 4,
        z: NonNegativeFloat = 1.0,
        max_deck: PositiveInt = 20,
        depth: NonNegativeInt | None = None,
        chunk: PositiveInt = 1024,
        target: Literal["soft", "deviations"] = "soft",
        temperature: PositiveFloat = 2.0,
        played_weight: ClosedUnitInterval = 0.0,
        anchor: bool = False,
        max_turns: PositiveInt | None = 300,
        buffer_capacity: PositiveInt = 100_000,
        updates_per_round: PositiveInt = 50,
        minibatch_size: PositiveInt = 256,
        learning_rate: PositiveFloat = 1e-3,
        value_coef: NonNegativeFloat = 0.5,
        reward_scale: PositiveFloat = 100.0,
        max_grad_norm: NonNegativeFloat = 0.5,
        ppo_games: NonNegativeInt = 0,
        ppo_coef: NonNegativeFloat = 1.0,
        clip: PositiveFloat = 0.2,
        entropy_coef: NonNegativeFloat = 0.01,
        gae_lambda: ClosedUnitInterval = 0.95,
        value_network: NetworkConfig | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = False
        if ppo_games == 1:
            raise ConfigError(
                "ExpertIteration ppo_games=1; expected 0 (no PPO) or at least 2 "
                "(a game from each seat)"
            )
        start = load_base(base, seed)
        self.rules = start.rules
        if max_turns is not None:  # the features do not depend on it (plays_rules)
            cap = min(max_turns, self.rules.max_turns)
            self.rules = dataclasses.replace(self.rules, max_turns=cap)
        self.game = as_game(self.rules)
        self.policy_net = start.policy_net
        shape = DEFAULT_VALUE_NETWORK if value_network is None else value_network
        self.value_net = build_value_net(start, shape, reward_scale)
        value = StateValue(self.value_net, history=False, scale=reward_scale)
        try:
            # the apprentice itself, so that each round searches over the latest networks;
            # its draws come from the labels' streams, never from these seeds
            apprentice = NetworkAgent(self.policy_net, masked_softmax, seed=seed, name=LEARNER)
            rollouts = Rollouts(apprentice, value if depth is not None else None, depth, chunk)
            self.search = SearchAgent(
                rollouts, worlds, top, z=z, max_deck=None if label == "all" else max_deck
            )
        except ValueError as error:
            raise ConfigError(f"ExpertIteration {error}") from None
        # PPO's self-play asks the apprentice through the queue, as PPO's rollouts do
        self.queue = InferenceQueue(bucket_sizes=None)
        self.queue.register(LEARNER, self.policy_net, masked_softmax)
        self.buffer: ReservoirBuffer | None = None  # made in setup, on the training device
        # this round's self-play rows, their advantages and value targets [N]; None without PPO
        self._ppo_rows: tuple[Decisions, torch.Tensor, torch.Tensor] | None = None
        self._order = torch.empty(0, dtype=torch.int64)
        self.rollout_generator = torch.Generator().manual_seed(seed)
        self.batch_generator = torch.Generator().manual_seed(seed + 1)
        self._resume_state: dict[str, Any] | None = None
        self.iteration_metrics: dict[str, float] = {}
        self._sums: dict[str, float] = {}

    @property
    def iteration(self) -> int:
        """The round running (1-based): the Lightning epoch plus one."""
        return self.current_epoch + 1

    def agent(
        self, policy: str | None = None, greedy: bool = False, seed: int | None = None
    ) -> Agent:
        """A batched agent playing the apprentice's masked softmax (``None``: the same)."""
        return NetworkAgent(
            self.policy_net, masked_softmax, greedy=greedy, seed=seed, name=policy_name(policy)
        )

    def state_value(self) -> StateValue:
        """The value network in points, for a search over this checkpoint to cut rollouts."""
        return StateValue(self.value_net, history=False, scale=self.hparams.reward_scale)

    def row_buffers(self) -> dict[str, ReservoirBuffer]:
        """The reservoir by name, for ``PhaseTimer``'s ``buffer/expert_fill``."""
        return {} if self.buffer is None else {BUFFER: self.buffer}

    # ---- Lightning: setup ---------------------------------------------------------------------
    def configure_optimizers(self) -> torch.optim.Optimizer:
        parameters = [*self.policy_net.parameters(), *self.value_net.parameters()]
        return torch.optim.Adam(parameters, lr=self.hparams.learning_rate)

    def train_dataloader(self) -> range:
        # Step indices only: each step draws its minibatch from the reservoir.
        return range(self.hparams.updates_per_round)

    def setup(self, stage: str) -> None:
        seed = self.hparams.seed
        self.rollout_generator = torch.Generator(self.device).manual_seed(seed)
        self.batch_generator = torch.Generator(self.device).manual_seed(seed + 1)
        if self.buffer is None:
            # One more column than actions in the targets: the soft target [A], then the
            # outcome in points (exact in float16: integers below 2048); the legal mask's
            # extra column is never set.
            A = self.game.n_actions
            self.buffer = ReservoirBuffer(
                self.hparams.buffer_capacity, self.game.feature_size, A + 1, self.device, seed
            )

    def on_train_start(self) -> None:
        if self._resume_state is not None:
            self.buffer.load_state_dict(self._resume_state["buffer"])
            self.rollout_generator.set_state(self._resume_state["rollout_generator"])
            self.batch_generator.set_state(self._resume_state["batch_generator"])
            self._resume_state = None

    # ---- Lightning: one round -----------------------------------------------------------------
    def on_train_epoch_start(self) -> None:
        start = time.perf_counter()
        deal_seed, label_seed = torch.randint(
            _SEED_RANGE, (2,), generator=self.rollout_generator, device=self.device
        ).tolist()
        games = self.hparams.games_per_round
        batch = GameBatch.new(self.rules, games, seed=deal_seed, device=self.device)
        with torch.no_grad():
            labels, decisions = label_games(
                self.search, batch, label_seed, anchor=self.hparams.anchor
            )
        seconds = time.perf_counter() - start
        self.add_rows(labels)
        searched = int(labels.searched.sum())
        deviations = int(labels.deviated.sum())
        ppo_metrics = self.self_play() if self.hparams.ppo_games else {}
        self.iteration_metrics = {
            metrics.phase_seconds("rollout"): time.perf_counter() - start,
            metrics.phase_seconds("update"): 0.0,
            "rollout/games": float(games),
            "rollout/decisions": float(decisions),
            "rollout/decisions_per_s": decisions / seconds,
            "rollout/game_length": decisions / games / 2,
            "expert/labels": float(searched),
            "expert/labels_per_s": searched / seconds,
            "expert/deviation_share": deviations / searched if searched else 0.0,
            metrics.buffer_rows(BUFFER): float(len(self.buffer)),
            **ppo_metrics,
        }
        self._sums = {}

    def self_play(self) -> dict[str, float]:
        """Play ``ppo_games`` games of the apprentice against itself for this round's PPO
        rows (one seat a game), with their advantages; returns the self-play's metrics."""
        start = time.perf_counter()
        games = self.hparams.ppo_games
        # drawn after the labels' seeds, so that a run without PPO draws as before
        deal_seed, sample_seed = torch.randint(
            _SEED_RANGE, (2,), generator=self.rollout_generator, device=self.device
        ).tolist()
        sampler = torch.Generator(self.device).manual_seed(sample_seed)
        with torch.no_grad():
            decisions, n_decisions = learner_rollout(
                self.game, self.queue, [LEARNER], games, deal_seed, sampler, self.device
            )
            values = self.value_net(decisions.features).squeeze(1)  # [N]
        reward = decisions.returns / self.hparams.reward_scale  # [N]
        advantages, returns = episode_advantages(
            decisions.game, reward, values, games, 1.0, self.hparams.gae_lambda
        )
        self._ppo_rows = (decisions, advantages, returns)
        seconds = time.perf_counter() - start
        return {
            "ppo/games": float(games),
            "ppo/decisions": float(n_decisions),
            "ppo/decisions_per_s": n_decisions / seconds,
            "ppo/explained_variance": explained_variance(values, returns),
        }

    def add_rows(self, labels: Labels) -> None:
        """Offer ``labels``' rows to the reservoir: features, legal mask, policy target and
        outcome, under this round's number."""
        n = len(labels)
        weight = self.hparams.played_weight
        if self.hparams.target == "deviations":
            targets = deviation_targets(labels.prior, labels.played, labels.deviated, weight)
        else:
            targets = mixed_targets(labels.values, labels.played, self.hparams.temperature, weight)
            # anchor rows have no values (their soft target is NaN)
            targets = torch.where(labels.searched[:, None], targets, labels.prior)  # [n, A]
        packed = torch.cat([targets, labels.returns[:, None]], 1)  # [n, A + 1]
        legal = torch.cat([labels.legal, labels.legal.new_zeros(n, 1)], 1)  # [n, A + 1]
        self.buffer.add(labels.features, legal, packed, self.iteration)

    def training_step(self, step: int, batch_idx: int) -> None:
        start = time.perf_counter()
        A = self.game.n_actions
        rows = self.buffer.sample(self.hparams.minibatch_size, self.batch_generator)
        legal, targets, outcome = rows.legal[:, :A], rows.targets[:, :A], rows.targets[:, A]
        logits = self.policy_net(rows.features)  # [n, A]
        values = self.value_net(rows.features).squeeze(1)  # [n]
        policy_loss = soft_cross_entropy(logits, legal, targets)
        value_loss = 0.5 * (values - outcome / self.hparams.reward_scale).square().mean()
        loss = policy_loss + self.hparams.value_coef * value_loss
        ppo_stats: dict[str, torch.Tensor] = {}
        if self._ppo_rows is not None:
            ppo_stats = self.ppo_terms(batch_idx)
            loss = loss + self.hparams.ppo_coef * ppo_stats.pop("loss")
        optimizer = self.optimizers()
        optimizer.zero_grad()
        self.manual_backward(loss)
        if self.hparams.max_grad_norm > 0:
            self.clip_gradients(optimizer, gradient_clip_val=self.hparams.max_grad_norm)
        optimizer.step()
        chosen = logits.detach().masked_fill(~legal, -torch.inf).argmax(1)
        stats = {
            metrics.loss("expert"): policy_loss.item(),
            metrics.loss("value"): value_loss.item(),
            "expert/agreement": float((chosen == targets.argmax(1)).float().mean()),
            **{name: value.item() for name, value in ppo_stats.items()},
        }
        # Means over the round's steps, kept current: callbacks read them in
        # on_train_epoch_end, which Lightning calls before the module's own hook.
        steps = batch_idx + 1
        for name, value in stats.items():
            self._sums[name] = self._sums.get(name, 0.0) + value
            self.iteration_metrics[name] = self._sums[name] / steps
        self.iteration_metrics[metrics.phase_seconds("update")] += time.perf_counter() - start

    def ppo_terms(self, batch_idx: int) -> dict[str, torch.Tensor]:
        """PPO's loss (``loss``) and its logged terms on step ``batch_idx``'s slice of the
        round's self-play rows: one shuffled pass over them in ``updates_per_round`` steps
        (more where there are fewer rows than steps)."""
        decisions, advantages, returns = self._ppo_rows
        if batch_idx == 0:
            self._order = torch.randperm(
                len(decisions), generator=self.batch_generator, device=self.device
            )
        # fewer rows than steps (tiny games): the slices go round again
        slices = self._order.tensor_split(min(self.hparams.updates_per_round, len(decisions)))
        index = slices[batch_idx % len(slices)]  # [n]
        features = decisions.features[index]  # [n, F]
        terms = ppo_loss(
            self.policy_net(features),
            self.value_net(features).squeeze(1),
            decisions.legal[index],
            decisions.actions[index],
            decisions.log_probs[index],
            advantages[index],
            returns[index],
            self.hparams.clip,
            self.hparams.value_coef,
            self.hparams.entropy_coef,
        )
        return {
            "loss": terms.loss,
            metrics.loss("policy"): terms.policy,
            metrics.loss("entropy"): terms.entropy,
            "ppo/approx_kl": terms.approx_kl,
            "ppo/clip_fraction": terms.clip_fraction,
        }

    def on_train_epoch_end(self) -> None:
        self._ppo_rows = None
        self.log(metrics.ITERATION, float(self.iteration))
        self.log_dict(self.iteration_metrics)

    # ---- checkpoints ---------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Plain data only, so that the file loads with torch.load(weights_only=True).
        checkpoint[MODEL_CLASS_KEY] = class_path(type(self))
        checkpoint["hyper_parameters"] = plain_data(dict(checkpoint.get("hyper_parameters", {})))
        if self.buffer is None or "optimizer_states" not in checkpoint:
            # No reservoir (an agent's model), or a weights-only file (final.ckpt), which
            # plays but does not resume.
            return
        checkpoint[self.training_state_key] = {
            "buffer": self.buffer.state_dict(),
            "rollout_generator": self.rollout_generator.get_state(),
            "batch_generator": self.batch_generator.get_state(),
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Applied in on_train_start, once setup has made the buffer and the generators.
        self._resume_state = checkpoint.get(self.training_state_key)
