"""The graphed update's bookkeeping on the CPU, with a stand-in for CUDA's recording.

``torch.cuda.make_graphed_callables`` needs CUDA; here it is replaced by a stand-in that
records what it was given and returns the module itself, so that what is ours (one
recording per network and batch shape, clones for sample inputs, the training step's route
through the graphs) is checked on every machine. ``tests/training/test_gpu.py`` holds the
real graphs to the eager updates on a GPU.
"""

from __future__ import annotations

import pytest
import torch
from tiny_training import fit, tiny_model
from torch import nn

from lostcities_cfr.training import module as training_module
from lostcities_cfr.training.graphs import NetworkLoss, UpdateGraphs
from lostcities_cfr.training.losses import advantage_loss, strategy_loss


@pytest.fixture
def recorded(monkeypatch) -> list[tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    """What each 'recording' was given; the stand-in returns the module unrecorded."""
    calls = []

    def stand_in(module, sample_args):
        calls.append((module, sample_args))
        return module

    monkeypatch.setattr(torch.cuda, "make_graphed_callables", stand_in)
    return calls


def rows(n: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    legal = torch.rand(n, 3, generator=generator) < 0.7
    targets = torch.rand(n, 3, generator=generator) * legal
    iteration = torch.randint(1, 5, (n,), generator=generator, dtype=torch.int32)
    return torch.rand(n, 4, generator=generator), legal, targets, iteration


def test_a_network_is_recorded_once_per_batch_shape_on_clones_of_its_first_rows(recorded):
    graphs, net = UpdateGraphs(), nn.Linear(4, 3)
    first = rows(8)
    loss = graphs.loss("a", net, advantage_loss, 1.5, first)
    torch.testing.assert_close(loss, advantage_loss(net(first[0]), *first[1:], 1.5))
    graphs.loss("a", net, advantage_loss, 1.5, rows(8, seed=1))  # replayed: same shape
    graphs.loss("a", net, advantage_loss, 1.5, rows(16))  # a new shape
    graphs.loss("b", net, strategy_loss, 1.0, rows(8))  # another network
    assert len(graphs) == len(recorded) == 3
    module, sample = recorded[0]
    assert isinstance(module, NetworkLoss) and module.net is net and module.exponent == 1.5
    assert all(s is not f and torch.equal(s, f) for s, f in zip(sample, first, strict=True))
    assert recorded[2][0].loss_fn is strategy_loss


def test_training_steps_go_through_the_graphs_and_train_as_eager_steps_do(recorded, monkeypatch):
    # The device check is CUDA's; here the route is what is tested.
    monkeypatch.setattr(training_module, "check_update_graphs", lambda *args: None)
    trained = {}
    for graphs in (False, True):
        torch.manual_seed(0)
        model = tiny_model(update_graphs=graphs, final_eval_games=0)
        fit(model, 2)
        trained[graphs] = model.state_dict()
        assert len(model.update_graphs) == (3 if graphs else 0)  # one per network
    assert len(recorded) == 3
    for name, tensor in trained[False].items():
        assert torch.equal(trained[True][name], tensor), name
