import math
from types import SimpleNamespace

import pytest
from tiny_runs import DESIGN_METRICS, fit, read_csv_metrics

from lostcities_cfr.callbacks import PeriodicEvaluation, PhaseTimer
from lostcities_cfr.callbacks.phase_timer import peak_memory_bytes, resident_memory_bytes

DEEP_CFR_PHASES = (
    "traversal",
    "policy_network",
    "memory_add",
    "advantage_train",
    "strategy_train",
    "eval",
)


@pytest.fixture(scope="module")
def timed_run(tmp_path_factory):
    """Three iterations, evaluation at iteration 2 and the last, the timer listed first."""
    tmp_path = tmp_path_factory.mktemp("timed")
    timer = PhaseTimer()
    evaluation = PeriodicEvaluation(every_n_iterations=2, games=20, opponents=["random"])
    trainer, model = fit(tmp_path, [timer, evaluation], max_epochs=3)
    return trainer, model, read_csv_metrics(trainer)


def test_timer_moves_itself_behind_the_evaluation_it_times(timed_run):
    trainer, _, _ = timed_run
    kinds = [type(c) for c in trainer.callbacks]
    assert kinds.index(PhaseTimer) > kinds.index(PeriodicEvaluation)


def test_every_iteration_logs_one_row_with_the_design_page_timings(timed_run):
    _, _, rows = timed_run
    assert [row["iteration"] for row in rows] == [1.0, 2.0, 3.0]
    for row in rows:
        missing = [name for name in DESIGN_METRICS if name not in row]
        assert not missing, f"iteration {row['iteration']} lacks {missing}"


def test_iteration_time_includes_evaluation_and_phases(timed_run):
    _, _, rows = timed_run
    evaluated = [row["time/eval_s"] > 0 for row in rows]
    assert evaluated == [False, True, True]  # every 2nd iteration, and the last
    for row in rows:
        phases = row["time/traversal_s"] + row["time/advantage_train_s"]
        phases += row["time/strategy_train_s"] + row["time/eval_s"]
        assert phases <= row["time/iteration_s"]
        assert row["time/eval_s"] == pytest.approx(row.get("eval/seconds", 0.0), rel=1e-5)


def test_shares_are_seconds_over_the_iteration_and_add_up_to_one(timed_run):
    _, _, rows = timed_run
    for row in rows:
        assert "time/rollout_share" not in row  # a phase the model does not time: no share
        for phase in DEEP_CFR_PHASES:
            share = row[f"time/{phase}_share"]
            # a phase the run does not have (value training without a value network) is 0
            assert share == pytest.approx(
                row.get(f"time/{phase}_s", 0.0) / row["time/iteration_s"], rel=1e-4
            )
        disjoint = sum(
            row[f"time/{p}_share"]
            for p in ("traversal", "advantage_train", "strategy_train", "eval")
        )
        assert disjoint + row["time/other_share"] == pytest.approx(1.0, abs=1e-4)


def test_elapsed_time_is_the_runs_clock_at_each_iterations_end(timed_run):
    _, _, rows = timed_run
    elapsed = [row["time/elapsed_s"] for row in rows]
    so_far = 0.0
    for row, clock in zip(rows, elapsed, strict=True):
        so_far += row["time/iteration_s"]
        # iterations follow each other with little in between
        assert so_far <= clock < so_far + 1.0


def test_a_resumed_timer_continues_the_clock_of_its_checkpoint():
    class Module:  # what the timer reads of a model
        iteration = 3

        def __init__(self):
            self.iteration_metrics, self.logged = {}, {}

        def log(self, name, value, **kwargs):
            self.logged[name] = value

    trainer, module = SimpleNamespace(callbacks=[]), Module()
    timer = PhaseTimer(memory=False, buffers=False)
    timer.load_state_dict({"elapsed_s": 100.0})  # the checkpoint's clock
    timer.on_train_start(trainer, module)
    timer.on_train_epoch_start(trainer, module)
    timer.on_train_epoch_end(trainer, module)
    assert 100.0 <= module.logged["time/elapsed_s"] < 101.0
    assert timer.state_dict() == {"elapsed_s": module.logged["time/elapsed_s"]}


def test_buffer_fill_is_rows_over_capacity(timed_run):
    _, model, rows = timed_run
    last = rows[-1]
    capacity = model.hparams.advantage_buffer_size
    assert last["buffer/advantage_p0_fill"] == pytest.approx(
        last["buffer/advantage_p0"] / capacity, rel=1e-5
    )
    assert 0 < last["buffer/strategy_fill"] <= 1


def test_process_memory_is_logged_in_gigabytes(timed_run):
    _, _, rows = timed_run
    row = rows[-1]
    assert 0.01 < row["system/max_rss_gb"] < 64
    if resident_memory_bytes() is not None:
        assert 0.01 < row["system/rss_gb"] <= row["system/max_rss_gb"] + 1e-3


def test_memory_readings_are_plausible():
    peak = peak_memory_bytes()
    assert peak > 10 * 2**20
    rss = resident_memory_bytes()
    assert rss is None or 0 < rss <= peak * 1.01 + 2**20
    assert not math.isnan(peak)
