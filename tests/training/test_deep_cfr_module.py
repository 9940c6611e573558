"""The DeepCFR LightningModule: construction, one CFR iteration, metrics, hooks, agents."""

from __future__ import annotations

import dataclasses

import pytest
import pytorch_lightning as pl
import torch
from run_probes import NETWORKS, IterationProbe, largest_change
from tiny_training import fit, positions, tiny_model

from lostcities_cfr.cfr import uniform_strategy
from lostcities_cfr.cfr.exploitability import exploitability
from lostcities_cfr.cfr.networks import NetworkConfig
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import Rules, feature_size
from lostcities_cfr.training.evaluation import evaluate_policy
from lostcities_cfr.training.metrics import eval_metrics

DESIGN_METRICS = {
    "time/traversal_s",
    "time/policy_network_s",
    "time/advantage_train_s",
    "time/strategy_train_s",
    "time/memory_add_s",
    "traversal/nodes",
    "traversal/nodes_per_s",
    "traversal/advantage_rows",
    "traversal/advantage_rows_per_s",
    "traversal/truncated_share",
    "inference/mean_batch",
    "buffer/advantage_p0",
    "buffer/advantage_p1",
    "buffer/strategy",
    "loss/advantage_p0",
    "loss/advantage_p1",
    "loss/strategy",
}


def test_module_builds_the_networks_of_the_tiny_rules():
    model = tiny_model()
    rules = Rules.tiny()
    assert model.rules == rules
    features = torch.zeros(5, feature_size(rules))
    for net in (*model.advantage_nets, model.strategy_net):
        assert net(features).shape == (5, rules.n_actions)
        assert net.config == NetworkConfig(width=32, depth=2)
    assert model.advantage_buffers == [] and model.strategy_buffer is None  # built by fit


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("batch_size", 0),
        ("traversals_per_player", -5),
        ("advantage_buffer_size", 0),
        ("strategy_every", 0),
        ("learning_rate", 0.0),
        ("weight_exponent", -1.0),
        ("final_eval_games", -1),
        ("rules", "classic-ish"),
        ("network", "512x4"),
        ("eval_opponent", "heuristic:nonsense"),
        ("sampler", "external"),
    ],
)
def test_bad_arguments_raise_a_config_error_naming_the_field(field, value):
    with pytest.raises(ConfigError, match=field):
        tiny_model(**{field: value})


def test_exploitability_is_refused_on_rules_too_big_to_walk():
    with pytest.raises(ConfigError, match="exploitability_every"):
        tiny_model(rules="classic", exploitability_every=1)


class Recorder(pl.Callback):
    """Records the traversal hooks, the metrics of every iteration as callbacks see them (at
    the end of its training) and as the module logged them (after its own epoch-end hook)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []
        self.metrics: list[dict[str, float]] = []
        self.logged: list[dict[str, float]] = []

    def on_traversal_start(self, trainer, pl_module):
        self.events.append(("start", pl_module.iteration))

    def on_traversal_end(self, trainer, pl_module):
        self.events.append(("end", pl_module.iteration))

    def on_train_epoch_start(self, trainer, pl_module):
        if self.metrics:  # the previous iteration's, complete
            self.logged.append(dict(pl_module.iteration_metrics))

    def on_train_epoch_end(self, trainer, pl_module):
        self.metrics.append(dict(pl_module.iteration_metrics))

    def on_train_end(self, trainer, pl_module):
        self.logged.append(dict(pl_module.iteration_metrics))


def test_each_iteration_traverses_trains_and_reports_the_design_metrics():
    model = tiny_model(exploitability_every=2, final_eval_games=0)
    recorder, probe = Recorder(), IterationProbe()
    trainer = fit(model, max_epochs=3, callbacks=[recorder, probe])

    assert recorder.events == [(kind, i) for i in (1, 2, 3) for kind in ("start", "end")]
    assert all(set(m) == DESIGN_METRICS for m in recorder.metrics)
    seen_before = [0, 0, 0]
    for iteration in probe.iterations:
        metrics = iteration["metrics"]
        buffers = ("buffer/advantage_p0", "buffer/advantage_p1", "buffer/strategy")
        assert [metrics[name] for name in buffers] == iteration["held"]
        # External sampling writes one row per node it visits: the traverser's regrets or
        # the opponent's strategy.
        added = [now - before for now, before in zip(iteration["seen"], seen_before, strict=True)]
        assert metrics["traversal/nodes"] == sum(added) > 0
        seen_before = iteration["seen"]
        assert metrics["time/advantage_train_s"] > 0 and metrics["time/strategy_train_s"] > 0
    # The exact exploitability of the average strategy, every second iteration only.
    assert ["exploitability" in m for m in recorder.logged] == [False, True, False]
    uniform = exploitability(model.rules, uniform_strategy)
    value = recorder.logged[1]["exploitability"]
    assert recorder.logged[1]["exploitability/vs_uniform"] == pytest.approx(value / uniform)
    logged = trainer.callback_metrics  # the x-axis is the iteration
    assert logged["iteration"] == 3
    assert set(DESIGN_METRICS) <= set(logged)
    # Rows carry the iteration that produced them.
    held = model.strategy_buffer.iteration[: len(model.strategy_buffer)]
    assert set(held.tolist()) == {1, 2, 3}


def test_the_logged_exploitability_is_the_average_strategys():
    model = tiny_model(exploitability_every=1, final_eval_games=0)
    trainer = fit(model, max_epochs=1)
    expected = exploitability(model.rules, model.average_policy)
    assert float(trainer.callback_metrics["exploitability"]) == pytest.approx(expected, rel=1e-5)


def test_the_strategy_network_trains_every_k_iterations_and_at_the_last():
    model = tiny_model(strategy_every=2, final_eval_games=0)
    recorder, probe = Recorder(), IterationProbe()
    fit(model, max_epochs=3, callbacks=[recorder, probe])
    strategy = NETWORKS.index("strategy")
    changed = [
        largest_change(i["before"][strategy], i["after"][strategy]) > 0 for i in probe.iterations
    ]
    assert changed == [False, True, True]
    assert [len(i["grad_norms"]["strategy"]) for i in probe.iterations] == [0, 4, 4]
    assert [m["time/strategy_train_s"] > 0 for m in recorder.metrics] == [False, True, True]
    assert "loss/strategy" not in recorder.metrics[0]


class WeightWatcher(pl.Callback):
    """Advantage weights at the end of iteration 1 and before the first update of iteration 2."""

    def on_train_epoch_end(self, trainer, pl_module):
        if pl_module.iteration == 1:
            self.trained = [p.detach().clone() for p in pl_module.advantage_nets.parameters()]

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if pl_module.iteration == 2 and batch_idx == 0:
            self.before = [p.detach().clone() for p in pl_module.advantage_nets.parameters()]
            self.adam_state = len(trainer.optimizers[0].state)


@pytest.mark.parametrize("warm_start", [False, True])
def test_advantage_networks_restart_from_scratch_unless_warm_started(warm_start):
    model = tiny_model(advantage_warm_start=warm_start, final_eval_games=0)
    watcher = WeightWatcher()
    fit(model, max_epochs=2, callbacks=[watcher])
    same = all(torch.equal(a, b) for a, b in zip(watcher.trained, watcher.before, strict=True))
    assert same == warm_start
    assert (watcher.adam_state > 0) == warm_start  # Adam restarts with the network


def test_fit_ends_with_the_final_evaluation_against_the_eval_opponent(capsys):
    model = tiny_model(final_eval_games=30, eval_opponent="discard-only")
    fit(model, max_epochs=1)
    printed = capsys.readouterr().out
    result = model.evaluate_deployed(30)
    assert (result.agent, result.opponent, result.games) == ("average", "discard-only", 30)
    assert result.rules == dataclasses.asdict(model.rules)
    table = result.format_table().splitlines()
    del table[1]  # the seconds and games per second
    for line in table:
        assert line in printed


def test_bf16_true_precision_trains_traverses_and_plays_in_bfloat16():
    """Lightning converts the weights to bfloat16 but never sees the rows the module samples
    itself, nor the features of the queue's and the agents' forwards."""
    model = tiny_model(final_eval_games=20)
    trainer = fit(model, 2, precision="bf16-true")
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert torch.isfinite(trainer.callback_metrics["loss/advantage_p0"])
    assert torch.isfinite(trainer.callback_metrics["loss/strategy"])
    rules = model.rules
    features = torch.zeros(3, feature_size(rules))
    legal = torch.ones(3, rules.n_actions, dtype=torch.bool)
    assert model.average_policy(features, legal).dtype == torch.float32


@pytest.mark.parametrize(
    ("deploy", "policy", "greedy"),
    [
        ("average", "average", False),
        ("average:greedy", "average", True),
        ("current", "current", False),
        ("current:greedy", "current", True),
    ],
)
def test_the_deployed_policy_is_what_agent_and_the_final_evaluation_play(deploy, policy, greedy):
    torch.manual_seed(0)
    model = tiny_model(deploy=deploy, eval_opponent="random", seed=9)
    batch = positions(model.rules, per_depth=32)
    for extra in (False, True):  # greedy=True asks for greedy play of any deployed policy
        played = model.agent(greedy=extra, seed=2).act(batch)
        expected = model.agent(policy, greedy=greedy or extra, seed=2).act(batch)
        assert torch.equal(played, expected)
    result = model.evaluate_deployed(24)
    direct = evaluate_policy(model, policy, "random", 24, seed=9, greedy=greedy)
    assert result.agent == direct.agent == (f"{policy}:greedy" if greedy else policy)
    assert (result.rounds.score_diff, result.game_length) == (
        direct.rounds.score_diff,
        direct.game_length,
    )
    assert model._final_metrics(result) == eval_metrics(deploy, "random", result)


def test_validate_evaluates_the_deployed_policy_in_final_eval_games_or_1000(capsys):
    for games, played in ((40, 40), (0, 1000)):
        model = tiny_model(final_eval_games=games, eval_opponent="discard-only")
        trainer = pl.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False)
        (logged,) = trainer.validate(model, verbose=False)
        expected = model.evaluate_deployed(played)
        prefix = "eval/average/discard-only/"
        assert logged[prefix + "win_rate"] == pytest.approx(expected.rounds.win_rate)
        assert logged[prefix + "score_diff"] == pytest.approx(expected.rounds.score_diff)
        assert f"{played} games" in capsys.readouterr().out


def test_sdcfr_rebuilds_every_stored_iteration_with_its_weights_and_weight():
    model = tiny_model(final_eval_games=0, snapshots=True, weight_exponent=1.5)
    assert model.policies == ("average", "current", "sdcfr")
    assert tiny_model().policies == ("average", "current")
    fit(model, max_epochs=2)
    agent = model.agent("sdcfr")
    assert len(agent.agents) == 2
    weights = torch.tensor([1.0, 2.0**1.5], dtype=torch.float64)
    torch.testing.assert_close(agent.bounds, weights.cumsum(0) / weights.sum())
    for (_, states), stored in zip(model._snapshots, model._snapshot_networks(), strict=True):
        for state, net in zip(states, stored, strict=True):
            assert not net.training
            for name, tensor in net.state_dict().items():
                assert torch.equal(tensor, state[name]), name
    first, second = model._snapshot_networks()
    assert not torch.equal(first[0].head.weight, second[0].head.weight)
    assert not torch.equal(first[0].head.weight, first[1].head.weight)  # one net per seat


def test_sdcfr_rebuilds_stored_iterations_with_the_runs_hidden_features():
    network = NetworkConfig(width=32, depth=2, hidden_features=("turn",))
    model = tiny_model(final_eval_games=0, snapshots=True, network=network)
    fit(model, max_epochs=1)
    (stored,) = model._snapshot_networks()
    for net, live in zip(stored, model.advantage_nets, strict=True):
        assert type(net) is type(live)
        assert torch.equal(net.hidden, live.hidden) and len(net.hidden) > 0
