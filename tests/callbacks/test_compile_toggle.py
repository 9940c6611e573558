import pytest
import pytorch_lightning as pl
import torch
from tiny_runs import fit, read_csv_metrics, tiny_model

from lostcities_cfr.callbacks import CompileToggle
from lostcities_cfr.errors import ConfigError

# torch.compile's "eager" backend traces without generating code: quick, same semantics.
QUICK = {"backend": "eager"}


class RecordBackends(pl.Callback):
    """The queue's backend and the networks' compilation during each traversal."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bool]] = []

    def on_traversal_end(self, trainer, pl_module) -> None:
        compiled = [name in pl_module.compiled_networks for name in pl_module.networks()]
        assert len(set(compiled)) == 1
        self.seen.append((pl_module.queue.backend, compiled[0]))


def test_compiled_handles_share_the_networks_parameters_and_outputs(tmp_path):
    toggle = CompileToggle(inference=None, training=True, **QUICK)
    _, model = fit(tmp_path, [toggle], max_epochs=1)
    x = torch.rand(4, model.networks()["strategy"].n_features)
    for name, net in model.networks().items():
        compiled = model.compiled_networks[name]
        assert compiled is not net
        assert {id(p) for p in compiled.parameters()} == {id(p) for p in net.parameters()}
        torch.testing.assert_close(compiled(x), net(x))


def test_training_steps_call_a_networks_compiled_handle_in_its_place(tmp_path):
    model = tiny_model()
    calls = dict.fromkeys(model.networks(), 0)

    def handle(name, net):
        def forward(features):
            calls[name] += 1
            return net(features)

        return forward

    for name, net in model.networks().items():
        model.compiled_networks[name] = handle(name, net)
    fit(tmp_path, [], max_epochs=1, model=model)
    updates = model.hparams.advantage_updates, model.hparams.strategy_updates
    assert calls == {"advantage_p0": updates[0], "advantage_p1": updates[0], "strategy": updates[1]}


def test_switches_from_the_chosen_iteration_and_logs_its_seconds_from_there(tmp_path):
    record = RecordBackends()
    toggle = CompileToggle(inference=True, training=True, from_iteration=2, **QUICK)
    trainer, _ = fit(tmp_path, [toggle, record], max_epochs=2)
    assert record.seen == [("eager", False), ("compiled", True)]
    rows = read_csv_metrics(trainer)
    assert ["compile/seconds" in row for row in rows] == [False, True]
    assert [row["compile/inference"] for row in rows] == [0.0, 1.0]
    assert [row["compile/training"] for row in rows] == [0.0, 1.0]


def test_checkpoint_keys_are_the_same_with_compilation_on_or_off(tmp_path):
    eager = tiny_model()
    keys = set(eager.state_dict())
    toggle = CompileToggle(inference=True, training=True, **QUICK)
    trainer, model = fit(tmp_path, [toggle], max_epochs=1)
    assert set(model.state_dict()) == keys
    path = tmp_path / "compiled.ckpt"
    trainer.save_checkpoint(path)
    eager.load_state_dict(torch.load(path, weights_only=False)["state_dict"])


def test_turning_off_returns_to_eager(tmp_path):
    model = tiny_model()
    model.queue.set_backend("compiled")
    for name, net in model.networks().items():
        model.compiled_networks[name] = torch.compile(net, **QUICK)
    record = RecordBackends()
    fit(tmp_path, [CompileToggle(inference=False, training=False), record], 1, model=model)
    assert record.seen == [("eager", False)]


def test_toggling_nothing_or_before_iteration_one_is_refused():
    with pytest.raises(ConfigError):
        CompileToggle(inference=None, training=None)
    with pytest.raises(ConfigError, match="from_iteration=0"):
        CompileToggle(from_iteration=0)


def test_compiling_the_training_forward_is_refused_beside_update_graphs(tmp_path):
    # Both replace the training forward; checked at setup, before any iteration runs.
    model = tiny_model(update_graphs=True)
    toggle = CompileToggle(inference=None, training=True, **QUICK)
    with pytest.raises(ConfigError, match="training=True and DeepCFR update_graphs=True"):
        fit(tmp_path, [toggle], max_epochs=1, model=model)
    assert model.strategy_buffer is None
