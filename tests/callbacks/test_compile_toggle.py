import pytest
import pytorch_lightning as pl
import torch
from tiny_runs import fit, read_csv_metrics, tiny_model

from lostcities_cfr.callbacks import CompileToggle
from lostcities_cfr.callbacks.compile_toggle import set_module_compiled, training_networks
from lostcities_cfr.cfr.networks import PolicyMLP
from lostcities_cfr.errors import ConfigError

# torch.compile's "eager" backend traces without generating code: quick, same semantics.
QUICK = {"backend": "eager"}


class RecordBackends(pl.Callback):
    """The queue's backend and the networks' compilation during each traversal."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bool]] = []

    def on_traversal_end(self, trainer, pl_module) -> None:
        compiled = [
            getattr(n, "_compiled_call_impl", None) is not None
            for n in training_networks(pl_module)
        ]
        assert len(set(compiled)) == 1
        self.seen.append((pl_module.queue.backend, compiled[0]))


def test_module_compiled_in_place_keeps_its_state_dict_keys_and_outputs():
    torch.manual_seed(0)
    net = PolicyMLP(12, 5, width=16, depth=2)
    keys = list(net.state_dict())
    x = torch.randn(4, 12)
    eager = net(x)
    set_module_compiled(net, True, **QUICK)
    assert list(net.state_dict()) == keys
    torch.testing.assert_close(net(x), eager)
    set_module_compiled(net, False)
    assert net._compiled_call_impl is None
    torch.testing.assert_close(net(x), eager)


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
    for net in training_networks(model):
        set_module_compiled(net, True, **QUICK)
    record = RecordBackends()
    fit(tmp_path, [CompileToggle(inference=False, training=False), record], 1, model=model)
    assert record.seen == [("eager", False)]


def test_toggling_nothing_or_before_iteration_one_is_refused():
    with pytest.raises(ConfigError):
        CompileToggle(inference=None, training=None)
    with pytest.raises(ConfigError):
        CompileToggle(from_iteration=0)
