"""SD-CFR's average over OpenSpiel's information states (``openspiel_oracle.sdcfr_average``):
equal to our tree's ``GameTree.average_strategy`` and to OpenSpiel's own CFR average, and a
DeepCFR checkpoint scored by it end to end where our walk cannot be built."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from lostcities_cfr.cfr.exploitability import game_tree
from lostcities_cfr.cfr.openspiel_oracle import (
    lookup_policy,
    openspiel_nash_conv,
    sdcfr_average,
    tabular_policy,
)
from lostcities_cfr.commands import main
from lostcities_cfr.commands.fit import run
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game.poker import KuhnPoker, LeducPoker

pyspiel = pytest.importorskip("pyspiel")
cfr = pytest.importorskip("open_spiel.python.algorithms.cfr")
from open_spiel.python import policy as openspiel_policy  # noqa: E402
from open_spiel.python.algorithms import exploitability  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def random_policy(game, seed: int):
    """A softmax of a random linear map of the features: differs from one information state
    to the next, so a wrong reach shows."""
    weights = torch.randn(
        game.feature_size, game.n_actions, generator=torch.Generator().manual_seed(seed)
    )

    def policy(features, legal):
        return torch.softmax((3 * features @ weights).masked_fill(~legal, -1e9), dim=1)

    return policy


def iterations(game, count: int) -> list:
    """``count`` strategies as a DeepCFR run stores them: one policy per seat, all distinct."""
    return [(random_policy(game, 2 * t), random_policy(game, 2 * t + 1)) for t in range(count)]


WEIGHTS = [1.0, 2.5, 0.5, 4.0]


def test_the_average_equals_our_trees_on_leduc():
    game = LeducPoker()
    tree = game_tree(game)
    policies = iterations(game, len(WEIGHTS))
    ours = tree.average_strategy([tree.policy_probs(p) for p in policies], WEIGHTS)  # [I, A]
    table = sdcfr_average(game.openspiel_game(), policies, WEIGHTS)
    assert table.action_probability_array.shape == (936, 3)
    # the same probabilities at every information state ...
    theirs = tree.policy_probs(lookup_policy(table))
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=1e-9)
    # ... and the same NashConv, ours on our tree and OpenSpiel's on its table
    assert openspiel_nash_conv(game, lookup_policy(table)) == pytest.approx(
        tree.nash_conv(ours), abs=1e-9
    )
    # The case discriminates: reaches and weights both move the average.
    plain = sum(w * tree.policy_probs(p) for w, p in zip(WEIGHTS, policies, strict=True))
    assert np.abs(theirs - plain / sum(WEIGHTS)).max() > 1e-2
    equal = tree.average_strategy([tree.policy_probs(p) for p in policies], [1.0] * 4)
    assert np.abs(theirs - equal).max() > 1e-2


@pytest.mark.parametrize("game", [KuhnPoker(), LeducPoker()], ids=lambda g: g.name)
def test_the_average_of_cfrs_current_policies_is_openspiels_cfr_average(game):
    """OpenSpiel's CFR averages its current policies by each one's own reach: the same
    average with weights 1, computed without our tree."""
    spiel_game = game.openspiel_game()
    solver = cfr.CFRSolver(spiel_game)
    policies = []
    for _ in range(4):
        current = openspiel_policy.TabularPolicy(spiel_game)
        current.action_probability_array = solver.current_policy().action_probability_array.copy()
        policies.append(lookup_policy(current))
        solver.evaluate_and_update_policy()
    table = sdcfr_average(spiel_game, policies, [1.0] * len(policies))
    expected = tabular_policy(spiel_game, lookup_policy(solver.average_policy()))
    np.testing.assert_allclose(
        table.action_probability_array, expected.action_probability_array, rtol=0, atol=1e-12
    )
    last = tabular_policy(spiel_game, policies[-1]).action_probability_array
    assert np.abs(table.action_probability_array - last).max() > 1e-2


def test_iterations_in_chunks_give_the_same_average_and_a_table_too_large_is_refused():
    game = LeducPoker()
    spiel_game = game.openspiel_game()
    policies = iterations(game, 3)
    whole = sdcfr_average(spiel_game, policies, WEIGHTS[:3]).action_probability_array
    per_iteration = 936 * (3 + 1)  # a table and its reaches, each iteration
    one_by_one = sdcfr_average(spiel_game, policies, WEIGHTS[:3], max_entries=per_iteration)
    np.testing.assert_allclose(one_by_one.action_probability_array, whole, rtol=0, atol=1e-15)
    with pytest.raises(
        ConfigError, match=f"more than the limit of max_entries={per_iteration - 1}"
    ):
        sdcfr_average(spiel_game, policies, WEIGHTS[:3], max_entries=per_iteration - 1)
    with pytest.raises(ValueError, match="one weight per policy"):
        sdcfr_average(spiel_game, policies, WEIGHTS)


# ---- a DeepCFR checkpoint where our walk cannot be built --------------------------------------
ADAPTED_LEDUC = '{"class_path": "lostcities_cfr.game.openspiel_adapter.OpenSpielGame", "init_args": {"name": "leduc_poker"}}'  # fmt: skip


@pytest.fixture
def walk_refused(monkeypatch):
    """Leduc behind the adapter (9,300 histories) made too large for our walk."""
    import lostcities_cfr.game.openspiel_adapter as adapter_module

    monkeypatch.setattr(adapter_module, "MAX_WALKED_HISTORIES", 1000)


@pytest.fixture(scope="module")
def adapted_leduc_run(tmp_path_factory) -> Path:
    """A tiny SD-CFR run of ``configs/leduc_sdcfr.yaml`` on Leduc behind the OpenSpiel
    adapter: 3 iterations, every one stored, ``deploy: sdcfr``."""
    folder = tmp_path_factory.mktemp("adapted_leduc")
    run(
        "fit",
        [
            *("--config", str(CONFIGS / "leduc_sdcfr.yaml"), "--trainer.max_epochs", "3"),
            *("--trainer.default_root_dir", str(folder), "--trainer.logger", "false"),
            *("--model.rules", ADAPTED_LEDUC, "--model.sampler.walkers", "16"),
            *("--model.traversals_per_player", "32", "--model.advantage_updates", "8"),
            *("--model.batch_size", "64", "--model.exploitability_every", "0"),
        ],
    )
    return folder / "checkpoints" / "final.ckpt"


def nashconv(capsys, *args: str) -> dict:
    main(["nashconv", *args, "--json"])
    return json.loads(capsys.readouterr().out)


def test_a_checkpoint_beyond_our_walk_is_scored_and_exported_by_openspiels(
    capsys, adapted_leduc_run, tmp_path, monkeypatch, walk_refused
):
    exported = tmp_path / "policy.json"
    spec = f"ckpt:{adapted_leduc_run}"
    result = nashconv(capsys, "--agent", spec, "--export-policy", str(exported))
    assert result["information_sets"] is None  # our walk refused: OpenSpiel's measured
    assert result["exported_states"] == 936
    spiel_game = pyspiel.load_game("leduc_poker")
    table = openspiel_policy.TabularPolicy(spiel_game)
    for key, probs in json.loads(exported.read_text()).items():
        table.action_probability_array[table.state_lookup[key]] = probs
    assert exploitability.nash_conv(spiel_game, table) == pytest.approx(
        result["nash_conv"], abs=1e-9
    )
    assert 0 < result["nash_conv"] < result["uniform_nash_conv"]
    greedy = nashconv(capsys, "--agent", spec + ":greedy")["nash_conv"]

    # Our walk scores the same checkpoint alike (its table policy answers in float32).
    monkeypatch.undo()
    ours = nashconv(capsys, "--agent", spec)
    assert ours["information_sets"] == 936
    assert ours["nash_conv"] == pytest.approx(result["nash_conv"], abs=1e-6)
    assert nashconv(capsys, "--agent", spec + ":greedy")["nash_conv"] == pytest.approx(
        greedy, abs=1e-9
    )
    assert abs(greedy - result["nash_conv"]) > 1e-3


def test_lost_cities_keeps_refusing_an_average_it_cannot_walk():
    from lostcities_cfr.training import DeepCFR

    model = DeepCFR(rules="classic", snapshots=True, deploy="sdcfr")
    model._snapshots = [(1, [net.state_dict() for net in model.advantage_nets])]
    with pytest.raises(ConfigError, match="more than max_nodes"):
        model.exact_policy()
