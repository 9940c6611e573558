"""A callback written outside the package: the traversal hooks and what it may rely on."""

import csv

import pytest
import pytorch_lightning as pl
from my_extensions import NodeCounter, OnPolicySampling, TwoLayerNet
from tiny_training import fit, tiny_model

from lostcities_cfr.callbacks import TraversalCallback


class HookOrder(TraversalCallback):
    """The hooks DeepCFR and Lightning call, in order, with the iteration."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.calls.append(("epoch_start", pl_module.iteration))

    def on_traversal_start(self, trainer, pl_module) -> None:
        assert pl_module.queue.names  # the networks are registered before it
        self.calls.append(("traversal_start", pl_module.iteration))

    def on_traversal_end(self, trainer, pl_module) -> None:
        assert len(pl_module.advantage_buffers[0]) > 0  # the epoch's rows are in
        self.calls.append(("traversal_end", pl_module.iteration))

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.calls.append(("epoch_end", pl_module.iteration))


def fit_user_model(callbacks: list[pl.Callback], max_epochs: int = 2) -> None:
    model = tiny_model(network=TwoLayerNet, sampler=OnPolicySampling(walkers=16))
    fit(model, max_epochs, callbacks)


def test_traversal_hooks_come_inside_each_iteration_in_order():
    # Lightning calls the callbacks' on_train_epoch_start before the module's, which traverses.
    order = HookOrder()
    fit_user_model([order])
    expected = [
        (hook, iteration)
        for iteration in (1, 2)
        for hook in ("epoch_start", "traversal_start", "traversal_end", "epoch_end")
    ]
    assert order.calls == expected


def test_a_callback_that_overrides_one_hook_needs_no_other():
    counter = NodeCounter()
    fit_user_model([counter], max_epochs=3)
    assert len(counter.nodes) == 3 and all(nodes > 0 for nodes in counter.nodes)


def test_its_metric_is_logged_beside_the_models(user_run):
    _, run_dir, cli = user_run
    counter = next(c for c in cli.trainer.callbacks if isinstance(c, NodeCounter))
    with open(next(run_dir.rglob("metrics.csv"))) as file:
        rows = [row for row in csv.DictReader(file) if row.get("traversal/total_nodes")]
    logged = [float(row["traversal/total_nodes"]) for row in rows]
    assert logged == pytest.approx([counter.nodes[0], sum(counter.nodes)])
    assert [float(row["traversal/nodes"]) for row in rows] == pytest.approx(counter.nodes)
