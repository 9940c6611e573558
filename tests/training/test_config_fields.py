"""Every DeepCFR field that changes what a run does, shown to change it: each test runs the
module with the field at two values (or one telling value) and checks the effect.

Also here: ``strategy_every`` and ``advantage_warm_start`` in test_deep_cfr_module.py, the
DDP share of ``traversals_per_player`` in test_ddp.py, ``exploitability_every`` and the
final evaluation (``final_eval_games``, ``eval_opponent``) in test_deep_cfr_module.py.
"""

from __future__ import annotations

import math

import pytest
import pytorch_lightning as pl
import torch
from run_probes import NETWORKS, IterationProbe, RecordingExternalSampling, largest_change
from tiny_training import fit, tiny_model

from lostcities_cfr.cfr.external_sampling import ExternalSampling
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.training import DeepCFR
from lostcities_cfr.training.deep_cfr_arguments import check_update_graphs

SMALL = {
    "traversals_per_player": 8,
    "batch_size": 16,
    "advantage_updates": 3,
    "strategy_updates": 2,
    "final_eval_games": 0,
}


def probed_fit(max_epochs: int = 1, **fields: object) -> tuple[DeepCFR, IterationProbe]:
    torch.manual_seed(0)  # the networks' initialisation
    model = tiny_model(**(SMALL | fields))
    probe = IterationProbe()
    fit(model, max_epochs, callbacks=[probe])
    return model, probe


def test_walkers_split_each_players_traversals_into_batches_of_that_many_deals():
    sampler = RecordingExternalSampling(walkers=5)
    probed_fit(sampler=sampler, traversals_per_player=12)
    assert [(p, games.batch_size) for p, games in sampler.walked] == [
        (p, size) for p in (0, 1) for size in (5, 5, 2)
    ]


def test_utility_scale_divides_every_sampled_regret_and_nothing_else():
    plain, _ = probed_fit(sampler=ExternalSampling(walkers=8))
    scaled, _ = probed_fit(sampler=ExternalSampling(walkers=8, utility_scale=4.0))
    for a, b in zip(plain.advantage_buffers, scaled.advantage_buffers, strict=True):
        n = len(a)
        assert n > 0 and len(b) == n
        assert torch.equal(a.features[:n], b.features[:n])
        targets = a.targets[:n].float()
        assert targets.abs().max() > 0
        torch.testing.assert_close(b.targets[:n].float() * 4.0, targets, rtol=2e-3, atol=2e-3)
    # Regret matching does not see the scale: the strategies played are the same.
    n = len(plain.strategy_buffer)
    assert torch.equal(plain.strategy_buffer.targets[:n], scaled.strategy_buffer.targets[:n])


@pytest.mark.parametrize("field", ["advantage_buffer_size", "strategy_buffer_size"])
def test_buffer_sizes_cap_the_rows_each_reservoir_holds(field):
    _, probe = probed_fit(**{field: 40})
    held, seen = probe.iterations[0]["held"], probe.iterations[0]["seen"]
    capped = [0, 1] if field == "advantage_buffer_size" else [2]
    for i in range(3):
        assert seen[i] > 40
        assert held[i] == (40 if i in capped else seen[i])


def test_updates_and_batch_size_set_each_networks_training_steps():
    _, probe = probed_fit(batch_size=24, advantage_updates=5, strategy_updates=3)
    (iteration,) = probe.iterations
    assert iteration["rows"] == {
        "advantage_p0": [24] * 5,
        "advantage_p1": [24] * 5,
        "strategy": [24] * 3,
    }
    assert {name: len(norms) for name, norms in iteration["grad_norms"].items()} == {
        "advantage_p0": 5,
        "advantage_p1": 5,
        "strategy": 3,
    }


@pytest.mark.parametrize("learning_rate", [1e-3, 1e-2])
def test_learning_rate_is_the_size_of_adams_first_step(learning_rate):
    # Adam's first step moves every weight with a gradient by learning_rate * g / |g|.
    _, probe = probed_fit(learning_rate=learning_rate, advantage_updates=1, strategy_updates=1)
    (iteration,) = probe.iterations
    for i, name in enumerate(NETWORKS):
        change = largest_change(iteration["before"][i], iteration["after"][i])
        assert change == pytest.approx(learning_rate, rel=1e-3), name


def test_gradient_clip_bounds_every_updates_gradient_norm_and_zero_turns_it_off():
    _, clipped = probed_fit(gradient_clip=0.002)
    _, free = probed_fit(gradient_clip=0.0)
    clipped_norms = clipped.iterations[0]["grad_norms"]
    free_norms = free.iterations[0]["grad_norms"]
    for name in NETWORKS:
        assert max(clipped_norms[name]) <= 0.002 * (1 + 1e-4), name
        assert max(free_norms[name]) > 0.004, name


def test_weight_exponent_changes_training_once_rows_of_two_iterations_are_mixed():
    # Iteration 1's rows all weigh the same whatever the exponent; from iteration 2 the
    # exponent sets how much the older rows count.
    _, linear = probed_fit(max_epochs=2, weight_exponent=1.0)
    _, steep = probed_fit(max_epochs=2, weight_exponent=4.0)
    first = [linear.iterations[0]["after"], steep.iterations[0]["after"]]
    second = [linear.iterations[1]["after"], steep.iterations[1]["after"]]
    for i, name in enumerate(NETWORKS):
        assert largest_change(first[0][i], first[1][i]) == 0, name
        assert largest_change(second[0][i], second[1][i]) > 1e-4, name


def test_update_graphs_is_refused_off_cuda_before_anything_is_built():
    model = tiny_model(**SMALL, update_graphs=True)
    with pytest.raises(ConfigError, match=r"update_graphs=True .* CUDA device; .* on cpu"):
        fit(model, 1)
    assert model.strategy_buffer is None  # refused in setup, before the reservoirs


def test_update_graphs_is_refused_under_mixed_precision():
    with pytest.raises(ConfigError, match=r"precision='bf16-mixed'"):
        check_update_graphs(torch.device("cuda"), "bf16-mixed")
    check_update_graphs(torch.device("cuda"), "32-true")  # what it records under


def test_a_cosine_schedule_starts_each_iteration_at_the_learning_rate_and_ends_near_zero():
    seen = []

    class Rates(pl.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            seen.append([group["lr"] for o in pl_module.optimizers() for group in o.param_groups])

    model = tiny_model(**SMALL, learning_rate_schedule="cosine", learning_rate=0.01)
    fit(model, 2, callbacks=[Rates()])
    updates = SMALL["advantage_updates"]
    per_iteration = len(seen) // 2
    for start in (0, per_iteration):  # each iteration restarts the schedule
        rates = [step[0] for step in seen[start : start + updates]]  # player 0's network
        expected = [0.005 * (1 + math.cos(math.pi * k / updates)) for k in range(updates)]
        assert rates == pytest.approx(expected)
    constant = tiny_model(**SMALL, learning_rate=0.01)
    seen.clear()
    fit(constant, 1, callbacks=[Rates()])
    assert {rate for step in seen for rate in step} == {0.01}


def test_average_exponent_weighs_the_average_strategy_apart_from_the_regrets():
    # gamma = 2 for the average (DCFR's), linear rows for the regrets.
    model = tiny_model(**SMALL, snapshots=True, average_exponent=2.0)
    fit(model, 3)
    assert model.average_exponent == 2.0
    assert model._loss("strategy")[1] == 2.0 and model._loss("advantage_p0")[1] == 1.0
    agent = model.agent("sdcfr")
    torch.testing.assert_close(
        agent.bounds, torch.tensor([1 / 14, 5 / 14, 1.0], dtype=torch.float64)
    )
    assert tiny_model(**SMALL, weight_exponent=1.5).average_exponent == 1.5  # None: the same
