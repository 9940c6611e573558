"""The one way a trained model is evaluated: a policy of the model against an opponent spec.

Every evaluation during and after training (``PeriodicEvaluation``, ``DeepCFR``'s final
evaluation and ``validate``) calls :func:`evaluate_policy`, so that the same model, policy,
opponent, game count and seed always give the same games and the same metrics
(:func:`~lostcities_cfr.training.metrics.eval_metrics` names them).

A model can be evaluated when it offers the :class:`PolicyModel` protocol: its ``rules``,
the names of the policies it can play, and an ``agent(policy, greedy, seed)`` for each.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from lostcities_cfr.agents import Agent, agent_from_spec
from lostcities_cfr.arena import EvaluationResult, evaluate
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import Rules


@runtime_checkable
class PolicyModel(Protocol):
    """What evaluation needs of a model (``DeepCFR`` and the baselines offer it)."""

    rules: Rules
    policies: tuple[str, ...]  # the names ``agent`` accepts, e.g. ("average", "current")
    device: torch.device

    def agent(self, policy: str, greedy: bool = False, seed: int | None = None) -> Agent:
        """A batched agent playing the model's ``policy``."""
        ...


def check_policies(model: PolicyModel, policies: list[str], owner: str) -> None:
    """Refuse policy names ``model`` cannot play, naming ``owner`` (the field that asked)."""
    unknown = [p for p in policies if p not in model.policies]
    if unknown or not policies:
        raise ConfigError(
            f"{owner} policies={list(policies)}; {type(model).__name__} plays "
            f"{list(model.policies)}: name a non-empty subset"
        )


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
    """
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
