"""The one evaluation path (``training/evaluation.py``) and the metrics it logs: a policy of a
model against an opponent spec plays the games a direct ``evaluate`` plays with the same
seeds, greedy play is the model's greedy agent, and every figure logged is the result's own."""

from __future__ import annotations

import math

import pytest
import torch
from tiny_training import tiny_model

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.evaluation.arena import evaluate
from lostcities_cfr.training.evaluation import (
    PolicyModel,
    check_policies,
    evaluate_policy,
    policy_label,
)
from lostcities_cfr.training.metrics import eval_metrics, eval_prefix


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return tiny_model()


def same_games(a, b) -> bool:
    """Equal results but for the clock."""
    clock = ("seconds", "games_per_s")
    strip = lambda result: {k: v for k, v in result.to_dict().items() if k not in clock}  # noqa: E731
    return strip(a) == strip(b)


@pytest.mark.parametrize("greedy", [False, True])
def test_a_policy_plays_the_games_of_a_direct_evaluation_with_the_same_seeds(model, greedy):
    result = evaluate_policy(model, "current", "random", games=24, seed=11, greedy=greedy)
    agent = model.agent("current", greedy=greedy, seed=11)
    agent.name = policy_label("current", greedy)
    direct = evaluate(agent, agent_from_spec("random", seed=12), 24, rules=model.rules, seed=11)
    assert same_games(result, direct)
    assert result.agent == ("current:greedy" if greedy else "current")
    assert result.opponent == "random" and result.seed == 11 and result.games == 24


def test_the_opponent_draws_from_its_own_seed_and_the_deals_from_the_seed(model):
    result = evaluate_policy(model, "average", "random", games=40, seed=3, greedy=True)
    agent = model.agent("average", greedy=True, seed=3)
    agent.name = "average:greedy"
    # the opponent seeded with the policy's own seed plays other moves
    shared = evaluate(agent, agent_from_spec("random", seed=3), 40, rules=model.rules, seed=3)
    assert result.rounds.score_diff != shared.rounds.score_diff
    # other deals, other games
    assert not same_games(result, evaluate_policy(model, "average", "random", 40, seed=4))


def test_the_default_seed_is_zero(model):
    result = evaluate_policy(model, "average", "random", games=24)
    assert result.seed == 0
    assert same_games(result, evaluate_policy(model, "average", "random", games=24, seed=0))


def test_greedy_and_sampled_play_are_different_games(model):
    # the untrained strategy network is near uniform: its arg-max plays other moves
    greedy = evaluate_policy(model, "average", "heuristic", games=40, seed=0, greedy=True)
    sampled = evaluate_policy(model, "average", "heuristic", games=40, seed=0)
    assert greedy.rounds.score_diff != sampled.rounds.score_diff


def test_policy_labels_name_greedy_play():
    assert policy_label("sdcfr", True) == "sdcfr:greedy"
    assert policy_label("sdcfr", False) == "sdcfr"


def test_check_policies_names_the_field_the_model_and_what_it_plays(model):
    check_policies(model, ["current", "average"], "PeriodicEvaluation")
    message = r"PeriodicEvaluation policies=\['best'\]; DeepCFR plays \['average', 'current'"
    with pytest.raises(ConfigError, match=message):
        check_policies(model, ["best"], "PeriodicEvaluation")
    with pytest.raises(ConfigError, match=r"deploy policies=\[\]; .*name a non-empty subset"):
        check_policies(model, [], "deploy")
    with pytest.raises(ConfigError, match=r"\['current', 'nope'\]"):
        check_policies(model, ["current", "nope"], "x")


def test_models_offer_the_policy_model_protocol(model):
    assert isinstance(model, PolicyModel)
    assert not isinstance(object(), PolicyModel)


def test_eval_metrics_are_the_results_own_figures_under_one_prefix(model):
    result = evaluate_policy(model, "current", "random", games=30, seed=1)
    rounds = result.rounds
    metrics = eval_metrics("current", "ckpt:runs/x.ckpt", result)
    prefix = "eval/current/ckpt:runs_x.ckpt/"
    assert prefix == eval_prefix("current", "ckpt:runs/x.ckpt")
    assert metrics == {
        prefix + "win_rate": rounds.win_rate,
        prefix + "win_rate_ci_low": rounds.win_rate_ci[0],
        prefix + "win_rate_ci_high": rounds.win_rate_ci[1],
        prefix + "score_diff": rounds.score_diff,
        prefix + "score_diff_ci_low": rounds.score_diff_ci[0],
        prefix + "score_diff_ci_high": rounds.score_diff_ci[1],
    }
    # six distinct numbers: no figure logged under another's name
    assert len(set(metrics.values())) == 6 and not any(map(math.isnan, metrics.values()))
