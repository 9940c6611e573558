"""DeepCFR with a value-baseline sampler, and the training options of the strength recipe:
the value network, held-out losses, colour augmentation, alternating updates, SD-CFR
snapshots and the deployed policy."""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch
from tiny_training import fit, tiny_model

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.cfr.baseline_outcome_sampling import BaselineOutcomeSampling
from lostcities_cfr.cfr.escher import ESCHERSampling
from lostcities_cfr.cfr.networks import NetworkConfig
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.evaluation.arena import evaluate
from lostcities_cfr.game import GameBatch
from lostcities_cfr.game.encoding import history_feature_size
from lostcities_cfr.training.agents import SnapshotAgent
from lostcities_cfr.training.checkpoint import load_agent, load_model


def escher_model(**overrides: object):
    sampler = ESCHERSampling(walkers=32, utility_scale=1.0, guide="heuristic", switch_range=6)
    return tiny_model(sampler=sampler, value_buffer_size=4000, value_updates=5, **overrides)


class Metrics(pl.Callback):
    """The module's metrics as callbacks see them at each iteration's end."""

    def __init__(self) -> None:
        self.seen: list[dict[str, float]] = []

    def on_train_epoch_end(self, trainer, pl_module):
        self.seen.append(dict(pl_module.iteration_metrics))


def test_a_value_baseline_sampler_gets_a_trained_value_network_and_its_buffer():
    model = escher_model(final_eval_games=0)
    assert model.value_net(torch.zeros(3, history_feature_size(model.rules))).shape == (3, 1)
    before = [p.detach().clone() for p in model.value_net.parameters()]
    probe = Metrics()
    fit(model, max_epochs=2, callbacks=[probe])
    assert len(model.value_buffer) > 0 and model.value_buffer.fifo
    assert any(
        not torch.equal(a, b) for a, b in zip(before, model.value_net.parameters(), strict=True)
    )
    for metrics in probe.seen:
        assert metrics["loss/value"] > 0 and metrics["time/value_train_s"] > 0
        assert metrics["traversal/advantage_rows"] > 0
    assert probe.seen[-1]["buffer/value"] == len(model.value_buffer)


def test_without_a_value_baseline_sampler_there_is_no_value_network():
    model = tiny_model(final_eval_games=0)
    assert model.value_net is None and "value" not in model.networks()


def test_held_out_rows_are_never_trained_on_and_give_the_validation_losses():
    model = escher_model(final_eval_games=0, holdout=0.2)
    probe = Metrics()
    fit(model, max_epochs=2, callbacks=[probe])
    last = probe.seen[-1]
    for name in ("advantage_p0", "advantage_p1", "strategy", "value"):
        buffer = model.row_buffers()[name]
        assert len(buffer.held_out) > 0
        assert last[f"loss/val_zero_{name}"] > 0
        assert f"loss/val_{name}" in last
    # The held-out share of the offered rows is the holdout, within sampling noise.
    buffer = model.advantage_buffers[0]
    share = len(buffer.held_out) / (len(buffer.held_out) + len(buffer))
    assert 0.1 < share < 0.3


def test_colour_augmentation_changes_the_rows_the_networks_train_on():
    seen = {}
    for augment in (False, True):
        torch.manual_seed(0)
        model = escher_model(final_eval_games=0, color_augmentation=augment)
        rows: list[torch.Tensor] = []

        def record(module, args, out, rows=rows):
            if torch.is_grad_enabled():
                rows.append(args[0].clone())

        model.advantage_nets[0].register_forward_hook(record)
        fit(model, max_epochs=1)
        seen[augment] = rows[0]  # the first update's batch: the same buffer rows both times
    assert not torch.equal(seen[False], seen[True])
    # Each row relabelled: its colours moved, its values kept.
    torch.testing.assert_close(seen[False].sort(1).values, seen[True].sort(1).values)


def test_alternating_updates_traverse_player_1_after_player_0_trained():
    events = []

    class Order(pl.Callback):
        def on_traversal_start(self, trainer, pl_module):
            events.append(("traverse", pl_module.advantage_buffers[1].n_seen > 0))

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            events.append(("train", batch_idx))

    model = tiny_model(final_eval_games=0, alternate_updates=True, advantage_warm_start=True)
    fit(model, max_epochs=1, callbacks=[Order()])
    traversals = [i for i, event in enumerate(events) if event[0] == "traverse"]
    assert len(traversals) == 2
    # The second traversal (player 1's) comes after half of the steps, which trained p0.
    half = model.hparams.advantage_updates
    between = [e[1] for e in events[traversals[0] : traversals[1]] if e[0] == "train"]
    assert between[:half] == list(range(half))  # player 0's half, then player 1 traverses
    assert len(model.advantage_buffers[0]) > 0 and len(model.advantage_buffers[1]) > 0


@pytest.mark.parametrize("alternate", [False, True])
def test_each_player_traverses_with_the_network_it_trained_last_iteration(alternate):
    # Retrained from scratch, a network is reset only after its player's traversal: the
    # traverser weighs its own actions by its current strategy, last iteration's network.
    trained, traversed_with = {}, []

    class Watch(pl.Callback):
        def on_traversal_start(self, trainer, pl_module):
            traversed_with.append(
                [p.detach().clone() for p in pl_module.advantage_nets[1].parameters()]
            )

        def on_train_epoch_end(self, trainer, pl_module):
            trained[pl_module.iteration] = [
                p.detach().clone() for p in pl_module.advantage_nets[1].parameters()
            ]

    model = tiny_model(final_eval_games=0, alternate_updates=alternate)
    fit(model, max_epochs=2, callbacks=[Watch()])
    # Iteration 2's traversals (one per player when alternating, one for both otherwise).
    second = traversed_with[2 if alternate else 1 :]
    assert second
    for params in second:
        assert all(torch.equal(a, b) for a, b in zip(params, trained[1], strict=True))


def test_snapshots_store_every_iteration_and_sdcfr_plays_them():
    model = tiny_model(final_eval_games=0, snapshots=True)
    fit(model, max_epochs=3)
    assert [t for t, _ in model._snapshots] == [1, 2, 3]
    agent = model.agent("sdcfr", greedy=True)
    assert isinstance(agent, SnapshotAgent)
    # Linear weights: iteration t is drawn with probability t / 6.
    torch.testing.assert_close(agent.bounds, torch.tensor([1 / 6, 3 / 6, 1.0], dtype=torch.float64))
    # The last snapshot's networks are the model's current ones: a deal that draws it is
    # played like the current strategy.
    last = agent.agents[-1]
    for stored, net in zip(last.agents, model.advantage_nets, strict=True):
        for a, b in zip(stored.network.parameters(), net.parameters(), strict=True):
            assert torch.equal(a, b)
    result = evaluate(agent, agent_from_spec("random", seed=1), 40, rules=model.rules)
    assert result.games == 40


def test_a_checkpoint_keeps_the_stored_iterations_and_plays_sdcfr(tmp_path):
    model = tiny_model(final_eval_games=0, snapshots=True)
    trainer = fit(model, max_epochs=2)
    path = tmp_path / "run.ckpt"
    trainer.save_checkpoint(path)
    loaded = load_agent(path, policy="sdcfr", greedy=True)
    games = GameBatch.new(model.rules, 64, seed=0)
    assert torch.equal(loaded.act(games), model.agent("sdcfr", greedy=True).act(games))
    assert load_model(path)._resume_state is None  # the reservoirs stay in the file


def test_the_deployed_policy_is_what_agent_plays_by_default():
    model = tiny_model(final_eval_games=0, deploy="current:greedy")
    fit(model, max_epochs=1)
    from lostcities_cfr.game import GameBatch

    batch = GameBatch.new(model.rules, 64, seed=2)
    assert torch.equal(model.agent().act(batch), model.agent("current", greedy=True).act(batch))


@pytest.mark.parametrize(
    "overrides",
    [
        {"deploy": "best"},
        {"deploy": "current:hot"},
        {"deploy": "sdcfr"},  # without snapshots
        {"holdout": 1.0},
        {"weight_decay": -0.1},
    ],
)
def test_unworkable_recipe_settings_are_refused(overrides):
    with pytest.raises(ConfigError):
        tiny_model(**overrides)


def test_baseline_outcome_sampling_trains_through_the_module():
    sampler = BaselineOutcomeSampling(walkers=32, utility_scale=1.0)
    model = tiny_model(
        sampler=sampler,
        network=NetworkConfig(width=16, depth=2, architecture="colors"),
        value_buffer_size=4000,
        value_updates=5,
        final_eval_games=0,
    )
    fit(model, max_epochs=2)
    assert len(model.value_buffer) > 0 and len(model.advantage_buffers[0]) > 0
