"""The one way a trained model is evaluated: a policy of the model against an opponent spec.

Every evaluation during and after training (``PeriodicEvaluation``, ``DeepCFR``'s final
evaluation and ``validate``) calls :func:`evaluate_policy`, so that the same model, policy,
opponent, game count and seed always give the same games and the same metrics
(:func:`~lostcities_cfr.training.metrics.eval_metrics` names them).

A model can be evaluated when it offers the :class:`PolicyModel` protocol: its ``rules``,
the names of the policies it can play, and an ``agent(policy, greedy, seed)`` for each.
Duplicate games are Lost Cities': a model of another game (``rules`` None) is refused.

On a game small enough to walk whole, a policy's exact exploitability is the measure
instead (:func:`exploitability_metrics`, what ``exploitability_every`` logs).
"""

from __future__ import annotations

import functools
from typing import Protocol, runtime_checkable

import torch

from lostcities_cfr.agents import Agent, agent_from_spec
from lostcities_cfr.cfr.exploitability import check_exact, exact_nash_conv
from lostcities_cfr.cfr.game_tree import JointPolicy
from lostcities_cfr.cfr.regret_matching import uniform_strategy
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.evaluation.arena import EvaluationResult, evaluate
from lostcities_cfr.game import Rules
from lostcities_cfr.game.protocol import Game


@runtime_checkable
class PolicyModel(Protocol):
    """What evaluation needs of a model (``DeepCFR`` and the baselines offer it)."""

    rules: Rules | None  # None: a game other than Lost Cities (``game`` names it)
    policies: tuple[str, ...]  # the names ``agent`` accepts, e.g. ("average", "current")
    device: torch.device

    def agent(self, policy: str, greedy: bool = False, seed: int | None = None) -> Agent:
        """A batched agent playing the model's ``policy``."""
        ...


def check_policies(model: PolicyModel, policies: list[str], owner: str) -> None:
    """Refuse policy names ``model`` cannot play, naming ``owner`` (the field that asked),
    and a model of another game than Lost Cities (:func:`check_duplicate_games`)."""
    check_duplicate_games(model, owner)
    unknown = [p for p in policies if p not in model.policies]
    if unknown or not policies:
        raise ConfigError(
            f"{owner} policies={list(policies)}; {type(model).__name__} plays "
            f"{list(model.policies)}: name a non-empty subset"
        )


def check_duplicate_games(model: PolicyModel, owner: str) -> None:
    """Refuse, in one line naming ``owner`` and the game, duplicate games of a model of
    another game than Lost Cities (their agents, arena and opponents are Lost Cities')."""
    if model.rules is None:
        game = getattr(getattr(model, "game", None), "name", "not Lost Cities")
        raise ConfigError(
            f"{owner} plays duplicate games of Lost Cities against agents; the game here is "
            f"{game} (measure it with the model's exploitability_every)"
        )


def check_exploitability_every(owner: str, every: int, game: Rules | Game) -> None:
    """Refuse ``exploitability_every`` (``owner``'s, when nonzero) on a game whose exact
    exploitability cannot be had, with the reason; the walk's tree is built now, cached."""
    if not every:
        return
    try:
        check_exact(game)
    except ConfigError as error:
        raise ConfigError(f"{owner} exploitability_every={every}: {error}") from None


def exploitability_metrics(game: Rules | Game, policy: JointPolicy) -> dict[str, float]:
    """What ``exploitability_every`` logs of ``policy`` (the model's deployed policy):
    ``exploitability`` (NashConv / 2, OpenSpiel's), also as a share of the uniform policy's,
    and ``nash_conv``, by an exact walk of the whole game."""
    value = exact_nash_conv(game, policy) / 2
    return {
        "exploitability": value,
        "exploitability/vs_uniform": value / _uniform_exploitability(game),
        "nash_conv": 2 * value,
    }


@functools.cache
def _uniform_exploitability(game: Rules | Game) -> float:
    # The same at every iteration of every run of the game: walked once.
    return exact_nash_conv(game, uniform_strategy) / 2


def policy_label(policy: str, greedy: bool) -> str:
    """How results and metrics name a policy: ``current``, or ``current:greedy``."""
    return f"{policy}:greedy" if greedy else policy


def deployed_policy(model: PolicyModel) -> tuple[str, bool]:
    """``(policy, greedy)``: what an agent of ``model`` plays unless told otherwise (what
    ``ckpt:PATH`` plays). ``DeepCFR`` names it in its ``deploy`` argument
    (``"average:greedy"``); a model without one deploys its first policy, sampled."""
    deploy = getattr(model, "hparams", {}).get("deploy")
    if deploy is None:
        return model.policies[0], False
    policy, _, how = deploy.partition(":")
    return policy, how == "greedy"


def evaluate_policy(
    model: PolicyModel,
    policy: str,
    opponent: str,
    games: int,
    seed: int = 0,
    greedy: bool = False,
) -> EvaluationResult:
    """``model``'s ``policy`` against the ``opponent`` agent spec in ``games`` duplicate games.

    ``seed`` seeds the deals, the policy's sampling (``seed``) and the opponent's own
    randomness (``seed + 1``), so a curve over iterations compares them on equal cards.
    A model of another game is refused (:func:`check_duplicate_games`).
    """
    check_duplicate_games(model, f"{type(model).__name__} evaluation against {opponent}")
    agent = model.agent(policy, greedy=greedy, seed=seed)
    agent.name = policy_label(policy, greedy)
    return evaluate(
        agent,
        agent_from_spec(opponent, seed=seed + 1),
        games,
        rules=model.rules,
        seed=seed,
        device=model.device,
    )
