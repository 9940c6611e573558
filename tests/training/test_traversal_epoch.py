"""The traversal epoch of the DeepCFR module: each player's sampled regrets land in that
player's advantage reservoir and equal the exact regrets of the deals walked, the opponents'
strategies land in the strategy reservoir, and the queue plays the uniform strategy in
iteration 1 and regret matching on the advantage networks from iteration 2 on."""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch
from run_probes import RecordingExternalSampling
from tiny_training import answer_always, fit, one_thread, positions, preference, tiny_model
from traversal_reference import ExactTree, assert_same_rows

from lostcities_cfr.cfr import ReservoirBuffer, regret_matching
from lostcities_cfr.cfr.networks import PolicyMLP
from lostcities_cfr.cfr.traversal import ADVANTAGE_NETWORKS
from lostcities_cfr.game import GameBatch, Rules, feature_blocks, feature_size
from lostcities_cfr.inference import InferenceQueue

TINY = Rules.tiny()
TRAVERSALS = 8


# Player 0's network plays its lowest legal action id, player 1's its highest.
PREFERENCES = [preference(TINY.n_actions, lowest_first=p == 0) for p in (0, 1)]


def rows_of(buffer: ReservoirBuffer, iteration: int) -> tuple[torch.Tensor, ...]:
    """(features, legal, targets) of the rows ``buffer`` holds from ``iteration``."""
    n = len(buffer)
    mine = buffer.iteration[:n] == iteration
    return (
        buffer.features[:n][mine].float(),
        buffer.legal[:n][mine],
        buffer.targets[:n][mine].float(),
    )


class EpochProbe(pl.Callback):
    """Watches each traversal epoch of a run with a :class:`RecordingExternalSampling`.

    At its start: the queue's strategies at fixed positions and, computed directly, regret
    matching on each advantage network there; in iteration 2 it then gives both advantage
    networks the :data:`PREFERENCES`, so that every strategy is pure and
    external sampling exact. At its end: the rows it added and the deals it walked.
    """

    def __init__(self, at: GameBatch) -> None:
        self.features, self.legal = at.encode().contiguous(), at.legal_mask()
        self.queue_strategies: dict[int, list[torch.Tensor]] = {}
        self.regret_matching: dict[int, list[torch.Tensor]] = {}
        self.rows: dict[int, dict] = {}
        self.walked: dict[int, list[tuple[int, GameBatch]]] = {}

    def on_traversal_start(self, trainer, model) -> None:
        iteration = model.iteration
        model.sampler.walked.clear()
        self.queue_strategies[iteration] = [
            model.queue(name, self.features, self.legal) for name in ADVANTAGE_NETWORKS
        ]
        with torch.no_grad():
            self.regret_matching[iteration] = [
                regret_matching(net(self.features), self.legal) for net in model.advantage_nets
            ]
        if iteration == 2:
            for net, outputs in zip(model.advantage_nets, PREFERENCES, strict=True):
                answer_always(net, outputs)

    def on_traversal_end(self, trainer, model) -> None:
        iteration = model.iteration
        self.rows[iteration] = {
            "advantage": [rows_of(buffer, iteration) for buffer in model.advantage_buffers],
            "strategy": rows_of(model.strategy_buffer, iteration),
        }
        self.walked[iteration] = list(model.sampler.walked)


@pytest.fixture(scope="module")
def epoch_run() -> EpochProbe:
    probe = EpochProbe(positions(TINY))
    torch.manual_seed(0)  # the networks' initialisation, whatever ran before
    model = tiny_model(
        sampler=RecordingExternalSampling(walkers=TRAVERSALS),
        traversals_per_player=TRAVERSALS,
        advantage_buffer_size=100_000,  # keeps every row: none is replaced
        strategy_buffer_size=100_000,
        final_eval_games=0,
    )
    with one_thread():
        fit(model, max_epochs=2, callbacks=[probe])
    return probe


@pytest.mark.parametrize("iteration", [1, 2])
def test_each_players_regrets_land_in_its_own_reservoir(epoch_run, iteration):
    seat = feature_blocks(TINY)["seat"].start  # 1 when the row is player 0's
    rows = epoch_run.rows[iteration]
    for p in (0, 1):
        features = rows["advantage"][p][0]
        assert len(features) > 0
        assert bool((features[:, seat] == float(p == 0)).all()), f"player {p}'s reservoir"
    # Each traversal adds its opponent's strategies: both players' rows, in one reservoir.
    assert set(rows["strategy"][0][:, seat].tolist()) == {0.0, 1.0}


def test_rows_of_a_deterministic_iteration_are_the_exact_regrets_of_the_deals_walked(epoch_run):
    walked = epoch_run.walked[2]
    reference_queue = InferenceQueue(bucket_sizes=None)
    for name, outputs in zip(ADVANTAGE_NETWORKS, PREFERENCES, strict=True):
        net = PolicyMLP(feature_size(TINY), TINY.n_actions, width=4, depth=1)
        answer_always(net, outputs)
        reference_queue.register(name, net, regret_matching)
    opponent_rows = []
    for p in (0, 1):
        deals = [games for traverser, games in walked if traverser == p]
        assert sum(games.batch_size for games in deals) == TRAVERSALS
        tree = ExactTree(reference_queue, traverser=p)
        for state in GameBatch.cat(deals).to_states():
            tree.value(state)
        assert_same_rows(epoch_run.rows[2]["advantage"][p], tree.traverser_rows, atol=1e-3)
        opponent_rows += tree.opponent_rows
    assert_same_rows(epoch_run.rows[2]["strategy"], opponent_rows, atol=1e-3)


def test_the_queue_plays_uniformly_in_iteration_1_and_regret_matching_from_iteration_2(
    epoch_run,
):
    legal = epoch_run.legal
    uniform = legal / legal.sum(1, keepdim=True)
    for p in (0, 1):
        torch.testing.assert_close(epoch_run.queue_strategies[1][p], uniform)
        # After iteration 1 the queue plays regret matching on player p's trained network...
        expected = epoch_run.regret_matching[2][p]
        torch.testing.assert_close(epoch_run.queue_strategies[2][p], expected)
        assert not torch.allclose(expected, uniform, atol=0.05)
    # ... which is not the other player's.
    assert not torch.allclose(*epoch_run.regret_matching[2], atol=0.05)
