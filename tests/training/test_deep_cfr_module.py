"""The DeepCFR LightningModule: construction, one CFR iteration, metrics, hooks, agents."""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch
from tiny_training import TINY_MODEL

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.arena import evaluate
from lostcities_cfr.cfr.external_sampling import ExternalSampling
from lostcities_cfr.cfr.networks import NetworkConfig
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import Rules, feature_size
from lostcities_cfr.training import DeepCFR

DESIGN_METRICS = {
    "time/traversal_s",
    "time/policy_network_s",
    "time/advantage_train_s",
    "time/strategy_train_s",
    "time/memory_add_s",
    "traversal/nodes",
    "traversal/nodes_per_s",
    "inference/mean_batch",
    "buffer/advantage_p0",
    "buffer/advantage_p1",
    "buffer/strategy",
    "loss/advantage_p0",
    "loss/advantage_p1",
    "loss/strategy",
}


def tiny_model(**overrides: object) -> DeepCFR:
    arguments = {
        **TINY_MODEL,
        "network": NetworkConfig(**TINY_MODEL["network"]),
        "sampler": ExternalSampling(walkers=32),
        **overrides,
    }
    return DeepCFR(**arguments)


def fit(model: DeepCFR, max_epochs: int, callbacks: list[pl.Callback] = ()) -> pl.Trainer:
    trainer = pl.Trainer(
        max_epochs=max_epochs,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=list(callbacks),
    )
    trainer.fit(model)
    return trainer


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
    """Records the traversal hooks and the metrics of every iteration."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []
        self.metrics: list[dict[str, float]] = []

    def on_traversal_start(self, trainer, pl_module):
        self.events.append(("start", pl_module.iteration))

    def on_traversal_end(self, trainer, pl_module):
        self.events.append(("end", pl_module.iteration))

    def on_train_epoch_end(self, trainer, pl_module):
        self.metrics.append(dict(pl_module.iteration_metrics))


def test_each_iteration_traverses_trains_and_reports_the_design_metrics():
    model = tiny_model(exploitability_every=2, final_eval_games=0)
    recorder = Recorder()
    trainer = fit(model, max_epochs=2, callbacks=[recorder])

    assert recorder.events == [("start", 1), ("end", 1), ("start", 2), ("end", 2)]
    assert all(set(m) == DESIGN_METRICS for m in recorder.metrics)
    first, second = recorder.metrics
    assert first["buffer/advantage_p0"] > 0 and first["buffer/strategy"] > 0
    assert second["buffer/strategy"] >= first["buffer/strategy"]
    assert first["traversal/nodes"] > 0 and first["time/advantage_train_s"] > 0
    # Logged at the end of each iteration, with the iteration as the x-axis and the
    # exploitability every second iteration.
    logged = trainer.callback_metrics
    assert logged["iteration"] == 2
    assert set(DESIGN_METRICS) <= set(logged)
    assert 0 < logged["exploitability"] < 1e3
    # Rows carry the iteration that produced them.
    assert set(model.strategy_buffer.iteration[: len(model.strategy_buffer)].tolist()) == {1, 2}


def test_the_strategy_network_trains_every_k_iterations_and_at_the_last():
    model = tiny_model(strategy_every=2, final_eval_games=0)
    recorder = Recorder()
    fit(model, max_epochs=3, callbacks=[recorder])
    trained = [m["time/strategy_train_s"] > 0 for m in recorder.metrics]
    assert trained == [False, True, True]
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


def test_average_and_current_agents_play_legal_games():
    model = tiny_model(final_eval_games=0)
    fit(model, max_epochs=1)
    for policy in ("average", "current"):
        for greedy in (False, True):
            agent = model.agent(policy, greedy=greedy, seed=0)
            # evaluate raises IllegalActionError on an illegal move
            result = evaluate(agent, agent_from_spec("random", seed=1), 40, rules=model.rules)
            assert result.games == 40


def test_fit_ends_with_the_final_evaluation_against_random(capsys):
    model = tiny_model(final_eval_games=30)
    fit(model, max_epochs=1)
    out = capsys.readouterr().out
    assert "average vs random: 30 games" in out


def test_bf16_true_precision_trains_traverses_and_plays_in_bfloat16():
    """Lightning converts the weights to bfloat16 but never sees the rows the module samples
    itself, nor the features of the queue's and the agents' forwards."""
    model = tiny_model(final_eval_games=20)
    trainer = pl.Trainer(
        max_epochs=2,
        precision="bf16-true",
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert torch.isfinite(trainer.callback_metrics["loss/advantage_p0"])
    assert torch.isfinite(trainer.callback_metrics["loss/strategy"])
    rules = model.rules
    features = torch.zeros(3, feature_size(rules))
    legal = torch.ones(3, rules.n_actions, dtype=torch.bool)
    assert model.average_policy(features, legal).dtype == torch.float32
