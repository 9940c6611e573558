"""Exact NashConv on the standard games held equal to OpenSpiel's, and the exact average of
strategies (SD-CFR's table) held equal to OpenSpiel's CFR average."""

import numpy as np
import pytest
import torch

from lostcities_cfr.cfr.exploitability import exact_nash_conv, game_tree, nash_conv
from lostcities_cfr.cfr.openspiel_oracle import openspiel_nash_conv
from lostcities_cfr.cfr.regret_matching import uniform_strategy
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game.lost_cities import LostCities
from lostcities_cfr.game.openspiel_adapter import OpenSpielGame
from lostcities_cfr.game.poker import KuhnPoker, LeducPoker

pyspiel = pytest.importorskip("pyspiel")
cfr = pytest.importorskip("open_spiel.python.algorithms.cfr")

GAMES = [KuhnPoker(), LeducPoker()]


def network_policy(game, seed: int):
    """A softmax of a random linear map of the features: a policy unlike uniform play."""
    weights = torch.randn(
        game.feature_size, game.n_actions, generator=torch.Generator().manual_seed(seed)
    )

    def policy(features, legal):
        return torch.softmax((3 * features @ weights).masked_fill(~legal, -1e9), dim=1)

    return policy


def table_policy(spiel_game, table):
    """OpenSpiel's ``TabularPolicy`` ``table`` as our policy: rows looked up by features."""
    lookup = {}
    for index, state in enumerate(table.states):
        features = np.asarray(state.information_state_tensor(state.current_player()), np.float32)
        lookup[features.tobytes()] = table.action_probability_array[index]

    def policy(features, legal):
        rows = [lookup[row.tobytes()] for row in features.numpy()]
        return torch.tensor(np.array(rows))

    return policy


@pytest.mark.parametrize("game", GAMES, ids=lambda g: g.name)
def test_uniform_and_a_network_policy_equal_openspiel(game):
    for policy in (uniform_strategy, network_policy(game, 0), network_policy(game, 1)):
        ours, theirs = nash_conv(game, policy), openspiel_nash_conv(game, policy)
        assert ours == pytest.approx(theirs, abs=1e-9)
    assert nash_conv(LeducPoker(), uniform_strategy) == pytest.approx(4.747222222, abs=1e-9)


@pytest.mark.parametrize("game", GAMES, ids=lambda g: g.name)
def test_a_tabular_cfr_plus_policy_equals_openspiel(game):
    spiel_game = game.openspiel_game()
    solver = cfr.CFRPlusSolver(spiel_game)
    for _ in range(30):
        solver.evaluate_and_update_policy()
    average = solver.average_policy()
    from open_spiel.python.algorithms import exploitability

    theirs = exploitability.nash_conv(spiel_game, average)
    ours = nash_conv(game, table_policy(spiel_game, average))
    assert ours == pytest.approx(theirs, abs=1e-9)
    assert ours < 0.1 * nash_conv(game, uniform_strategy)  # a real equilibrium approach


@pytest.mark.parametrize("game", GAMES, ids=lambda g: g.name)
def test_the_reach_weighted_average_equals_openspiels_cfr_average(game):
    """OpenSpiel's CFR averages its current policies weighted by each one's own reach: our
    ``average_strategy`` of the same tables must give its ``average_policy``."""
    spiel_game = game.openspiel_game()
    solver = cfr.CFRSolver(spiel_game)
    tree = game_tree(game)
    tables = []
    for _ in range(5):
        tables.append(tree.policy_probs(table_policy(spiel_game, solver.current_policy())))
        solver.evaluate_and_update_policy()
    ours = tree.average_strategy(tables, [1.0] * len(tables))
    expected = tree.policy_probs(table_policy(spiel_game, solver.average_policy()))
    np.testing.assert_allclose(ours, expected, atol=1e-12)
    # weights matter: the last table alone is the current policy
    last = tree.average_strategy(tables, [0.0] * (len(tables) - 1) + [1.0])
    np.testing.assert_allclose(last, tables[-1], atol=1e-12)
    assert not np.allclose(ours, tables[-1], atol=1e-3)


def test_the_tree_sizes_are_openspiels():
    kuhn, leduc = game_tree(KuhnPoker()), game_tree(LeducPoker())
    assert (kuhn.n_infosets, leduc.n_infosets) == (12, 936)
    assert (len(kuhn.root), len(leduc.root)) == (6, 120)
    assert kuhn.root_prob.sum() == pytest.approx(1) and leduc.root_prob.sum() == pytest.approx(1)


@pytest.mark.parametrize("game", GAMES, ids=lambda g: g.name)
def test_a_game_behind_the_adapter_is_walked_from_its_chance_sequences(game):
    adapter = OpenSpielGame(game.name)
    ours, theirs = game_tree(adapter), game_tree(game)
    assert (ours.n_nodes, ours.n_infosets, len(ours.root)) == (
        theirs.n_nodes,
        theirs.n_infosets,
        len(theirs.root),
    )
    np.testing.assert_allclose(ours.root_prob, theirs.root_prob, atol=1e-15)
    policy = network_policy(game, 2)  # the adapter's features are the same tensors
    assert nash_conv(adapter, policy) == pytest.approx(nash_conv(game, policy), abs=1e-12)


def test_a_game_too_large_for_our_walk_is_measured_by_openspiels(monkeypatch):
    import lostcities_cfr.game.openspiel_adapter as adapter_module

    monkeypatch.setattr(adapter_module, "MAX_WALKED_HISTORIES", 10)
    adapter = OpenSpielGame("kuhn_poker")
    with pytest.raises(ConfigError, match="more than 10 histories"):
        adapter.deals()
    policy = network_policy(KuhnPoker(), 2)
    assert exact_nash_conv(adapter, policy) == pytest.approx(
        openspiel_nash_conv(KuhnPoker(), policy), abs=1e-12
    )


def test_lost_cities_feature_sets_have_no_single_average_table():
    tree = game_tree(LostCities("tiny"))
    probs = tree.policy_probs(uniform_strategy)
    with pytest.raises(ConfigError, match="perfect recall"):
        tree.average_strategy([probs], [1.0])
