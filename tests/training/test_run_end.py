"""The end of a run is saved, however it ends, and ``best.ckpt`` holds the best deployed
networks: ``callbacks.RunCheckpoint`` (which ``fit`` uses for its checkpoints) and
``callbacks.BestCheckpoint``."""

from __future__ import annotations

import csv
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from tiny_training import cli_subprocess

from lostcities_cfr.callbacks import BestCheckpoint
from lostcities_cfr.commands.fit import run
from lostcities_cfr.training import load_model
from lostcities_cfr.training.checkpoint import cut_iteration, read_checkpoint, trained_iterations
from lostcities_cfr.training.evaluation import evaluate_policy


def last_logged(run_dir: Path, column: str) -> tuple[float, float]:
    """``(iteration, value)`` of the last row of the run's metrics.csv that holds ``column``."""
    with open(next(run_dir.rglob("metrics.csv"))) as file:
        rows = [row for row in csv.DictReader(file) if row.get(column)]
    return float(rows[-1]["iteration"]), float(rows[-1][column])


def same_weights(a: Path, b: Path) -> bool:
    first, second = read_checkpoint(a)["state_dict"], read_checkpoint(b)["state_dict"]
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def test_a_run_ended_by_max_time_between_checkpoints_leaves_the_networks_it_measured(
    write_config, tmp_path
):
    config = str(write_config(max_epochs=10_000, name="timed"))
    cli = run(
        "fit",
        [
            "--config",
            config,
            "--trainer.max_time",
            "00:00:00:02",
            "--checkpoint.every_n_epochs",
            "1000",
        ],
    )
    checkpoints = tmp_path / "timed" / "checkpoints"
    iterations = cli.model.current_epoch
    assert 0 < iterations < 1000  # stopped by the clock, before any interval's checkpoint

    final = read_checkpoint(checkpoints / "final.ckpt")
    # The clock is read between iterations: the last one ran whole.
    assert trained_iterations(final) == iterations and not cut_iteration(final)
    assert "deep_cfr" not in final and "optimizer_states" not in final  # networks only
    # last.ckpt is the same iteration, resumable.
    last = read_checkpoint(checkpoints / "last.ckpt")
    assert trained_iterations(last) == iterations and "deep_cfr" in last
    assert same_weights(checkpoints / "final.ckpt", checkpoints / "last.ckpt")

    # The final evaluation's figure, reproduced from the file it names.
    logged_iteration, win_rate = last_logged(tmp_path / "timed", "eval/average/random/win_rate")
    assert logged_iteration == iterations
    replayed = load_model(checkpoints / "final.ckpt").evaluate_deployed(20)
    assert replayed.rounds.win_rate == pytest.approx(win_rate)

    # ... and the run continues from last.ckpt with the next iteration.
    resumed = run(
        "fit",
        ["--config", config, "--ckpt_path", "last", "--trainer.max_epochs", str(iterations + 1)],
    )
    assert resumed.model.current_epoch == iterations + 1


@pytest.mark.parametrize("during", ["traversal", "updates"])
def test_ctrl_c_leaves_the_networks_in_final_ckpt(write_config, tmp_path, during):
    config = write_config(max_epochs=3, final_eval_games=0, name="interrupted")
    marker = tmp_path / "iteration-3-started"
    stall = {
        "class_path": "run_probes.StallAtIteration",
        "init_args": {"iteration": 3, "marker": str(marker), "during": during},
    }
    args = cli_subprocess(config, "--checkpoint.every_n_epochs", "2", callback=stall)
    process = subprocess.Popen(**args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert process.poll() is None, process.stderr.read().decode()
        assert time.monotonic() < deadline, "the run never reached iteration 3"
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    stderr = process.communicate(timeout=120)[1].decode()
    checkpoints = tmp_path / "interrupted" / "checkpoints"
    assert f"the networks as they were are in {checkpoints / 'final.ckpt'}" in stderr
    final = read_checkpoint(checkpoints / "final.ckpt")
    assert trained_iterations(final) == 2
    if during == "traversal":  # before any of iteration 3's updates: iteration 2's networks
        assert not cut_iteration(final)
        assert same_weights(checkpoints / "final.ckpt", checkpoints / "last.ckpt")
    else:  # one update of iteration 3 had run: the file says so
        assert cut_iteration(final)
        assert not same_weights(checkpoints / "final.ckpt", checkpoints / "last.ckpt")


def test_a_swallowed_ctrl_c_still_stops_the_run_at_its_next_update(write_config, tmp_path):
    config = write_config(max_epochs=6, final_eval_games=0, name="swallowed")
    swallow = {"class_path": "run_probes.SwallowCtrlCAt", "init_args": {"iteration": 3}}
    args = cli_subprocess(config, callback=swallow)
    done = subprocess.run(**args, capture_output=True, timeout=300)
    checkpoints = tmp_path / "swallowed" / "checkpoints"
    assert done.returncode == 1, done.stderr.decode()
    assert "Detected KeyboardInterrupt" in done.stdout.decode() + done.stderr.decode()
    # stopped before iteration 3's first update: iteration 2's networks, whole
    final = read_checkpoint(checkpoints / "final.ckpt")
    assert trained_iterations(final) == 2
    assert not cut_iteration(final)


def test_best_ckpt_keeps_the_iteration_whose_deployed_policy_measured_best(write_config, tmp_path):
    best = {
        "class_path": "lostcities_cfr.callbacks.BestCheckpoint",
        "init_args": {"every_n_iterations": 2, "games": 40, "opponent": "random", "seed": 5},
    }
    config = str(write_config(max_epochs=5, name="best", deploy="current:greedy"))
    cli = run("fit", ["--config", config, f"--trainer.callbacks+={best}"])
    callback = next(c for c in cli.trainer.callbacks if isinstance(c, BestCheckpoint))
    checkpoints = tmp_path / "best" / "checkpoints"
    assert callback.path == checkpoints / "best.ckpt"

    # Measured at iterations 2 and 4, and at the run's end, 5 (not a multiple of 2).
    run_dir = tmp_path / "best"
    with open(next(run_dir.rglob("metrics.csv"))) as file:
        rows = list(csv.DictReader(file))
    column = "best/current:greedy/random/win_rate_ci_low"  # the deployed policy, named
    measured = {float(r["iteration"]): float(r[column]) for r in rows if r.get(column)}
    assert sorted(measured) == [2.0, 4.0, 5.0]
    # The highest (metrics logged in an epoch are float32), ties going to the later one.
    top = max(measured.values())
    kept = max(it for it, score in measured.items() if score > top - 1e-6)
    assert callback.best_iteration == kept
    assert last_logged(run_dir, "best/iteration") == (5.0, kept)

    saved = read_checkpoint(checkpoints / "best.ckpt")
    assert trained_iterations(saved) == kept and "deep_cfr" not in saved
    # The kept file's deployed policy, on the selection deals, scores what chose it.
    model = load_model(checkpoints / "best.ckpt")
    result = evaluate_policy(model, "current", "random", 40, seed=5, greedy=True)
    assert result.rounds.win_rate_ci[0] == pytest.approx(measured[kept])
    if kept == 5:
        assert same_weights(checkpoints / "best.ckpt", checkpoints / "final.ckpt")


def test_best_checkpoint_refuses_a_bad_opponent_spec():
    with pytest.raises(Exception, match="heuristic:reckless"):
        BestCheckpoint(opponent="heuristic:reckless")
