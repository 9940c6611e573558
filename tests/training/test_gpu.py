"""The traversal and the updates on a CUDA device (``pytest -m gpu``; skipped without one)."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from tiny_training import fit

from lostcities_cfr.cfr.escher import ESCHERSampling
from lostcities_cfr.cfr.networks import NetworkConfig
from lostcities_cfr.game import GameBatch
from lostcities_cfr.inference import InferenceQueue
from lostcities_cfr.training import DeepCFR

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]
SMALL = NetworkConfig(width=32, depth=2, architecture="colors")


def classic_model(**overrides: object) -> DeepCFR:
    arguments = {
        "rules": "classic",
        "network": SMALL,
        "sampler": ESCHERSampling(walkers=256, max_decisions=120),
        "traversals_per_player": 256,
        "advantage_buffer_size": 100_000,
        "strategy_buffer_size": 100_000,
        "value_buffer_size": 100_000,
        "batch_size": 2048,
        "advantage_updates": 4,
        "strategy_updates": 4,
        "value_updates": 4,
        "inference_buckets": (1024, 4096, 16384),
        "final_eval_games": 0,
        **overrides,
    }
    return DeepCFR(**arguments)


def test_an_escher_walk_on_cuda_waits_for_the_device_only_at_its_reads():
    model = classic_model()
    fit(model, max_epochs=1, accelerator="gpu", devices=1)  # buffers and queue on the GPU
    context = model.traversal_context(0)
    games = GameBatch.new(model.rules, 256, seed=1, device="cuda")
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught, torch.no_grad():
            warnings.simplefilter("always")
            model.sampler.traverse_games(games, context)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in caught if "synchroniz" in str(w.message)]
    assert context.stats.steps > 50 and context.stats.advantage_rows > 0
    # One read per step, the read that finds every walk ended, and nothing else.
    assert len(syncs) == context.stats.host_reads == context.stats.steps + 1
    assert model.advantage_buffers[0].features.is_cuda and model.advantage_buffers[0].n_seen > 0


@pytest.mark.parametrize("kernel", ["fused", "foreach"])
def test_an_iteration_trains_every_network_on_cuda(kernel):
    model = classic_model(optimizer_kernel=kernel)
    trainer = fit(model, max_epochs=2, accelerator="gpu", devices=1)
    for name in ("advantage_p0", "advantage_p1", "strategy", "value"):
        loss = model.iteration_metrics[f"loss/{name}"]
        assert loss == loss and loss < float("inf"), name
        kind = "advantage" if name.startswith("advantage") else name
        assert model.iteration_metrics[f"time/{kind}_train_s"] > 0
    assert all(p.is_cuda for p in model.parameters())
    assert trainer.current_epoch == 2


def test_an_iteration_on_compiled_kernels_runs_on_cuda():
    model = classic_model(engine_kernels="compiled")
    fit(model, max_epochs=1, accelerator="gpu", devices=1)
    assert model.advantage_buffers[0].features.is_cuda and model.advantage_buffers[0].n_seen > 0


def test_the_queue_times_cuda_forwards_by_events_without_waiting_for_the_device(monkeypatch):
    queue = InferenceQueue(bucket_sizes=(64, 256))
    queue.register("net", torch.nn.Linear(8, 4).cuda())

    def refused(*args: object) -> None:
        raise AssertionError("a flush waited for the device")

    monkeypatch.setattr(torch.cuda, "synchronize", refused)
    features, legal = torch.rand(100, 8, device="cuda"), torch.ones(100, 4, dtype=torch.bool)
    for _ in range(3):
        queue("net", features, legal.cuda())
    with queue.uncounted():
        queue("net", features, legal.cuda())
    stats = queue.stats()
    assert (stats.calls, stats.rows, stats.padded_rows) == (3, 300, 3 * 156)
    assert stats.policy_network_seconds > 0


def test_graphed_updates_train_as_eager_ones_do_and_never_wait_for_the_device():
    model = classic_model()
    fit(model, max_epochs=1, accelerator="gpu", devices=1)  # reservoirs filled on the GPU
    net, optimizer = model.advantage_nets[0], model.optimizers()[0]
    start = (
        {k: v.clone() for k, v in net.state_dict().items()},
        copy.deepcopy(optimizer.optimizer.state_dict()),
        model.batch_generator.get_state(),
    )
    trained = {}
    for graphs in (False, True):
        net.load_state_dict(start[0])  # in place: the parameters keep their memory
        optimizer.optimizer.load_state_dict(start[1])
        model.batch_generator.set_state(start[2])
        model.hparams.update_graphs = graphs
        model.start_updates()
        model.update_networks(["advantage_p0"], [(0, 5)])  # records the graphs when on
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for _ in range(4):
                    model.update_networks(["advantage_p0"], [(0, 5)])
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert not [w for w in caught if "synchroniz" in str(w.message)], graphs
        trained[graphs] = {k: v.clone() for k, v in net.state_dict().items()}
    assert len(model.update_graphs) == 1
    # The same kernels on the same rows; cuBLAS may pick another algorithm under capture.
    torch.testing.assert_close(trained[True], trained[False], rtol=1e-4, atol=1e-5)
    assert any(not torch.equal(trained[True][k], v) for k, v in start[0].items())


def test_an_iteration_with_graphed_updates_trains_every_network_on_cuda():
    model = classic_model(update_graphs=True)
    fit(model, max_epochs=2, accelerator="gpu", devices=1)
    for name in ("advantage_p0", "advantage_p1", "strategy", "value"):
        loss = model.iteration_metrics[f"loss/{name}"]
        assert loss == loss and loss < float("inf"), name
    assert len(model.update_graphs) == 4  # one per network: the batch's shape never changed
