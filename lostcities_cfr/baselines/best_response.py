"""Approximate exploitability: a best response learned by PPO against a frozen agent.

ABR (Timbers, Bard, Lockhart, Lanctot, Schmid, Burch, Schrittwieser, Hubert & Bowling,
"Approximate Exploitability: Learning a Best Response", IJCAI 2022): train a reinforcement
learner against the frozen agent alone, then play the two; whatever the learner wins on
average is a lower bound on the agent's exploitability. Here the learner is this project's
:class:`~lostcities_cfr.baselines.ppo.PPO` with a fixed ``opponent`` (every rollout game
against the agent, half from each seat, the agent's moves one batched ``act`` per step), and
the measure is the learner's mean score difference against the agent in duplicate games
(:func:`~lostcities_cfr.evaluation.arena.evaluate`), in the game's own points: the same quantity, seats
averaged, as :func:`~lostcities_cfr.cfr.exploitability.exploitability` computes exactly on
tiny rules.

Deals: training rollouts deal from seeds below
:data:`~lostcities_cfr.baselines.ppo_rollout.TRAINING_DEAL_SEEDS`; the learning curve's
checks and the final measurement deal from seeds at or above it (two distinct seeds), so the
learner is measured on deals it never trained on. (On tiny rules every deal recurs; there the
exact values of ``docs/exploitability.md`` are the measure.)

:func:`train_best_response` trains and records the learning curve; :func:`measure` plays the
final games. ``python -m lostcities_cfr exploit`` runs both, and
:class:`~lostcities_cfr.callbacks.BestResponseProbe` runs them on a small budget during
training.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import pytorch_lightning as pl
import torch

from lostcities_cfr.agents import Agent, agent_name
from lostcities_cfr.baselines.ppo import PPO
from lostcities_cfr.baselines.ppo_rollout import TRAINING_DEAL_SEEDS
from lostcities_cfr.cfr.exploitability import Policy, game_tree
from lostcities_cfr.cfr.networks import NetworkConfig, masked_softmax
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.evaluation.arena import EvaluationResult, check_agent_rules, evaluate
from lostcities_cfr.game import Rules

# The learner's network: the colour-equivariant encoder of configs/ppo.yaml and bc_ppo.yaml,
# which beat MLPs at equal time there (docs/baselines.md).
DEFAULT_NETWORK = NetworkConfig(architecture="colors", width=64, depth=2)
# Training rounds are capped (a capped round scores as it stands): a learner and a network
# agent that both take discard piles back could otherwise play thousands of turns a round.
TRAINING_MAX_TURNS = 300


@dataclass(frozen=True)
class CurvePoint:
    """The learner after one training iteration.

    Attributes:
        iteration: PPO iterations so far.
        seconds: wall-clock since training started (checks included).
        games: training rounds played so far.
        rollout_score_diff: mean score difference of this iteration's rollout, the
            learner's side (training deals, sampled play; ``nan`` while cloning).
        check: the learner against the agent on held-out deals, at check iterations
            (``None`` elsewhere).
    """

    iteration: int
    seconds: float
    games: int
    rollout_score_diff: float
    check: EvaluationResult | None = None


@dataclass
class BestResponse:
    """A trained learner and how it got there.

    Attributes:
        model: the PPO module; :meth:`agent` plays its policy.
        agent_name: the frozen agent it learnt against.
        rules: the rules of its measurement (training capped ``max_turns``).
        seed: its seed.
        greedy: whether it plays its most probable action (the measurement's setting).
        curve: one point per iteration.
    """

    model: PPO
    agent_name: str
    rules: Rules
    seed: int
    greedy: bool
    curve: list[CurvePoint]

    @property
    def iterations(self) -> int:
        return self.curve[-1].iteration if self.curve else 0

    @property
    def seconds(self) -> float:
        return self.curve[-1].seconds if self.curve else 0.0

    @property
    def games(self) -> int:
        return self.curve[-1].games if self.curve else 0

    def agent(self) -> Agent:
        """The learner as an agent (seeded from the run's seed)."""
        agent = self.model.agent(greedy=self.greedy, seed=self.seed + 3)
        agent.name = f"best-response({self.agent_name})"
        return agent

    @torch.no_grad()
    def policy(self, features: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        """The learner's strategy on feature rows [n, F] with legal [n, A] bool, as it
        plays: all on its most probable action when greedy, else its masked softmax."""
        net = self.model.policy_net
        probs = masked_softmax(net(features.to(self.model.device)), legal.to(self.model.device))
        if not self.greedy:
            return probs
        best = torch.where(legal.to(probs.device), probs, -1.0).argmax(1)  # [n]
        return torch.nn.functional.one_hot(best, legal.shape[1]).to(probs.dtype)


def held_out_seed(seed: int, curve: bool = False) -> int:
    """Deals of the final measurement (``curve``: of the learning curve's checks), never of
    training: seeds from :data:`TRAINING_DEAL_SEEDS` up."""
    return TRAINING_DEAL_SEEDS + 2 * seed + int(curve)


def train_best_response(
    agent: Agent,
    rules: Rules,
    *,
    minutes: float | None = None,
    iterations: int | None = None,
    seed: int = 0,
    network: NetworkConfig = DEFAULT_NETWORK,
    games_per_rollout: int = 512,
    learning_rate: float = 1e-3,
    entropy_coef: float = 0.01,
    clone_iterations: int = 0,
    teacher: Agent | None = None,
    greedy: bool = True,
    check_every: int = 10,
    check_games: int = 200,
    accelerator: str = "cpu",
    progress: Callable[[CurvePoint], None] | None = None,
) -> BestResponse:
    """Train PPO against ``agent`` alone, on ``rules``, for ``minutes`` or ``iterations``.

    Args:
        agent: the frozen agent (its own sampling is its own; nothing of it trains).
        rules: the game; training caps ``max_turns`` at :data:`TRAINING_MAX_TURNS`.
        minutes: wall-clock budget of the training, checks included.
        iterations: PPO iterations (the whole budget when ``minutes`` is None; with both,
            whichever ends first).
        seed: seeds the learner's networks, deals and sampling (0 <= seed < 2**61).
        network: the learner's policy and value networks.
        games_per_rollout, learning_rate, entropy_coef: the PPO settings of that name.
        clone_iterations: the first this many iterations clone the agent's moves in its
            games against itself (:meth:`PPO.play_against`): the learner starts as a copy
            of the agent, at about 0 points, and PPO then looks for its weaknesses.
        teacher: clone this agent's moves instead (in its games against itself); a strong
            agent starts the learner at what that agent wins against ``agent``, where PPO
            from a copy of ``agent`` may find nothing (``docs/exploitability.md``).
        greedy: the learner plays its most probable action in checks and measurement (a
            best response is deterministic; sampling only costs it).
        check_every: play ``check_games`` held-out games every this many iterations (and
            after the last), for the learning curve; 0: never.
        check_games: games per check.
        accelerator: Lightning's accelerator for the learner (the agent's networks must
            live where the games do).
        progress: called with every curve point.

    Raises:
        ConfigError: no budget, a seed out of range, or the agent or the teacher plays other
            rules (names both).
    """
    if minutes is None and iterations is None:
        raise ConfigError("a best response needs a budget: minutes or iterations")
    if minutes is not None and not minutes > 0:
        raise ConfigError(f"minutes={minutes}; expected a positive number")
    if iterations is not None and iterations < 1:
        raise ConfigError(f"iterations={iterations}; expected at least 1")
    if not 0 <= seed < 2**61:  # held-out seeds stay above the training ones
        raise ConfigError(f"seed={seed}; expected 0 <= seed < 2**61")
    check_agent_rules(agent, rules)
    with torch.random.fork_rng():  # seeded initial networks, the caller's generator untouched
        torch.manual_seed(seed)
        model = PPO(
            rules=dataclasses.replace(rules, max_turns=min(rules.max_turns, TRAINING_MAX_TURNS)),
            network=network,
            games_per_rollout=games_per_rollout,
            learning_rate=learning_rate,
            entropy_coef=entropy_coef,
            seed=seed,
        )
    model.play_against(agent, clone_iterations, teacher)
    result = BestResponse(model, agent_name(agent), rules, seed, greedy, [])
    recorder = _CurveRecorder(result, agent, check_every, check_games, progress)
    trainer = pl.Trainer(
        accelerator=accelerator,
        devices=1,
        max_epochs=-1 if iterations is None else iterations,
        max_time=None if minutes is None else timedelta(minutes=minutes),
        logger=False,
        callbacks=[recorder],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(model)
    recorder.finish()
    return result


def measure(
    best_response: BestResponse, agent: Agent, games: int = 1000, device: str = "cpu"
) -> EvaluationResult:
    """The learner against ``agent`` in ``games`` duplicate games on held-out deals.

    ``rounds.score_diff`` with its interval is the exploitability lower bound, in points per
    game, the two seats averaged.
    """
    return evaluate(
        best_response.agent(),
        agent,
        games,
        rules=best_response.rules,
        seed=held_out_seed(best_response.seed),
        device=device,
    )


def exact_value(best_response: BestResponse, policy: Policy) -> tuple[float, float]:
    """The learner's exact expected points per game against ``policy`` (features to
    probabilities, both seats), as the first and as the second player: the whole game tree,
    so tiny rules only (:mod:`~lostcities_cfr.cfr.exploitability`). Their mean is the
    quantity :func:`measure` estimates, and at most the policy's exploitability.

    Raises:
        ConfigError: the rules' tree is too big to walk.
    """
    tree = game_tree(best_response.rules)
    learner = best_response.policy
    first = tree.expected_return(tree.policy_probs((learner, policy)))
    second = -tree.expected_return(tree.policy_probs((policy, learner)))
    return first, second


class _CurveRecorder(pl.Callback):
    """Appends a :class:`CurvePoint` after every iteration; checks on held-out deals."""

    def __init__(
        self,
        result: BestResponse,
        agent: Agent,
        check_every: int,
        check_games: int,
        progress: Callable[[CurvePoint], None] | None,
    ) -> None:
        self.result = result
        self.agent = agent
        self.check_every = check_every
        self.check_games = check_games
        self.progress = progress
        self.start = time.perf_counter()

    def on_train_start(self, trainer: pl.Trainer, pl_module: PPO) -> None:
        self.start = time.perf_counter()

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: PPO) -> None:
        iteration = pl_module.iteration
        check = None
        if self.check_every and iteration % self.check_every == 0:
            check = self._check()
        self._add(iteration, pl_module, check)

    def finish(self) -> None:
        """Check the last iteration too, unless it was just checked."""
        curve = self.result.curve
        if self.check_every and curve and curve[-1].check is None:
            curve[-1] = dataclasses.replace(curve[-1], check=self._check())
            if self.progress is not None:
                self.progress(curve[-1])

    def _add(self, iteration: int, pl_module: PPO, check: EvaluationResult | None) -> None:
        games = pl_module.hparams.games_per_rollout * iteration
        score = pl_module.iteration_metrics.get("rollout/score_diff", math.nan)
        point = CurvePoint(iteration, time.perf_counter() - self.start, games, score, check)
        self.result.curve.append(point)
        if self.progress is not None:
            self.progress(point)

    def _check(self) -> EvaluationResult:
        return evaluate(
            self.result.agent(),
            self.agent,
            self.check_games,
            rules=self.result.rules,
            seed=held_out_seed(self.result.seed, curve=True),
            device=self.result.model.device,
        )
