"""The approximate best response on tiny rules: it learns, it is measured on held-out deals,
and PPO's fixed opponent refuses what it cannot play."""

import pytest
import torch

import lostcities_cfr.baselines.best_response as best_response_module
import lostcities_cfr.baselines.ppo_rollout as ppo_rollout_module
from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.baselines import PPO
from lostcities_cfr.baselines.best_response import (
    exact_value,
    held_out_seed,
    measure,
    train_best_response,
)
from lostcities_cfr.baselines.ppo_rollout import TRAINING_DEAL_SEEDS
from lostcities_cfr.cfr import uniform_strategy
from lostcities_cfr.cfr.exploitability import exploitability
from lostcities_cfr.cfr.networks import NetworkConfig
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import Rules, feature_size

TINY = Rules.tiny()
SMALL = {"games_per_rollout": 256, "network": NetworkConfig(32, 2), "learning_rate": 3e-3}


def test_the_learner_nearly_reaches_the_exact_best_response_to_uniform_play():
    exact = exploitability(TINY, uniform_strategy)  # 2.4162: both seats' best responses, halved
    learned = train_best_response(
        agent_from_spec("random", seed=1), TINY, iterations=20, check_every=0, **SMALL
    )
    first, second = exact_value(learned, uniform_strategy)
    # the same quantity: points per game against the same strategy, the two seats averaged
    assert (first + second) / 2 >= 0.85 * exact  # 99% measured; the slow test holds 90%
    assert (first + second) / 2 <= exact + 1e-9  # nothing beats the best response


def test_the_measurement_estimates_the_exact_value_on_held_out_deals(monkeypatch):
    seeds = {"training": [], "measured": []}
    rollout = ppo_rollout_module.learner_rollout
    evaluate = best_response_module.evaluate

    def recording_rollout(rules, queue, opponents, games, seed, *args):
        seeds["training"].append(seed)
        return rollout(rules, queue, opponents, games, seed, *args)

    def recording_evaluate(*args, seed, **kwargs):
        seeds["measured"].append(seed)
        return evaluate(*args, seed=seed, **kwargs)

    monkeypatch.setattr(ppo_rollout_module, "learner_rollout", recording_rollout)
    monkeypatch.setattr(best_response_module, "evaluate", recording_evaluate)
    agent = agent_from_spec("random", seed=1)
    learned = train_best_response(
        agent, TINY, iterations=6, check_every=3, check_games=20, seed=4, **SMALL
    )
    result = measure(learned, agent, games=2000)
    assert len(seeds["training"]) == 6
    assert max(seeds["training"]) < TRAINING_DEAL_SEEDS
    # the curve's checks and the measurement: two other seeds, both never dealt in training
    assert seeds["measured"] == [held_out_seed(4, curve=True)] * 2 + [held_out_seed(4)]
    assert min(seeds["measured"]) >= TRAINING_DEAL_SEEDS
    assert held_out_seed(4) != held_out_seed(4, curve=True)
    # duplicate games estimate the exact mean of the two seats' values
    low, high = result.rounds.score_diff_ci
    assert low <= sum(exact_value(learned, uniform_strategy)) / 2 <= high
    assert result.games == 2000


def test_the_curve_has_a_point_per_iteration_and_checks_where_asked():
    learned = train_best_response(
        agent_from_spec("random", seed=1),
        TINY,
        iterations=5,
        check_every=2,
        check_games=10,
        clone_iterations=2,
        **SMALL,
    )
    assert [p.iteration for p in learned.curve] == [1, 2, 3, 4, 5]
    assert [p.check is not None for p in learned.curve] == [False, True, False, True, True]
    assert [p.games for p in learned.curve] == [256 * k for k in range(1, 6)]
    seconds = [p.seconds for p in learned.curve]
    assert seconds == sorted(seconds)
    # cloning iterations have no rollout against the agent
    assert [p.rollout_score_diff == p.rollout_score_diff for p in learned.curve] == [
        False,
        False,
        True,
        True,
        True,
    ]


def test_cloning_first_copies_the_agent_it_answers():
    model = PPO(rules="tiny", opponent="heuristic:cautious", bc_iterations=3)
    assert model.teacher is model.opponent
    assert model.hparams.bc_iterations == 3
    # a teacher of its own stays the teacher
    model = PPO(rules="tiny", opponent="random", bc_teacher="heuristic", bc_iterations=3)
    assert model.teacher is not model.opponent


def test_a_teacher_of_its_own_is_cloned_instead_of_the_agent():
    """``teacher``: the learner copies another agent's moves first (here a heuristic that
    opens no expedition on tiny rules, against uniform play), then answers the agent."""
    agent, teacher = agent_from_spec("random", seed=1), agent_from_spec("heuristic", seed=2)
    learned = train_best_response(
        agent, TINY, iterations=2, clone_iterations=2, teacher=teacher, check_every=0, **SMALL
    )
    assert learned.model.teacher is teacher and learned.model.opponent is agent
    assert (
        train_best_response(agent, TINY, iterations=1, clone_iterations=1, **SMALL).model.teacher
        is agent
    )
    with pytest.raises(ConfigError, match="teacher: agent 'best' plays classic rules"):
        train_best_response(
            agent, TINY, iterations=1, clone_iterations=1, teacher=agent_from_spec("best")
        )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"opponent": "nonsense"}, "PPO opponent: agent spec 'nonsense': unknown kind"),
        ({"opponent": "best", "rules": "tiny"}, "PPO opponent: .*'best' plays classic rules"),
        ({"bc_teacher": "best", "rules": "tiny"}, "PPO bc_teacher: .*'best' plays classic rules"),
    ],
)
def test_an_opponent_or_teacher_it_cannot_play_is_refused_naming_it(arguments, message):
    with pytest.raises(ConfigError, match=message):
        PPO(**arguments)


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ({}, "needs a budget"),
        ({"minutes": 0}, "minutes=0"),
        ({"iterations": 0}, "iterations=0"),
        ({"iterations": 1, "seed": -1}, "seed=-1"),
    ],
)
def test_a_best_response_needs_a_positive_budget_and_seed(budget, message):
    with pytest.raises(ConfigError, match=message):
        train_best_response(agent_from_spec("random"), TINY, **budget)


def test_a_seeded_best_response_repeats_itself_and_leaves_the_global_generator_alone():
    def run() -> list[float]:
        learned = train_best_response(
            agent_from_spec("random", seed=1), TINY, iterations=2, check_every=0, **SMALL
        )
        features = torch.ones(1, feature_size(TINY))
        return [p.rollout_score_diff for p in learned.curve] + [
            float(learned.model.policy_net(features).sum())
        ]

    torch.manual_seed(11)
    first = run()
    after = torch.rand(1)
    torch.manual_seed(12)
    assert run() == first  # the global seed does not matter
    torch.manual_seed(11)
    run()
    assert torch.equal(torch.rand(1), after)
