"""PPO through ``python -m lostcities_cfr fit``: a tiny run, its logs, its checkpoint as an
agent, a resume, the behaviour-cloning warm start, refused settings and the networks-only
export that ships an agent."""

from __future__ import annotations

import re
from pathlib import Path

import baseline_runs
import pytest
import torch
from baseline_runs import write_run_config

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.baselines import PPO
from lostcities_cfr.commands import main
from lostcities_cfr.commands.fit import run
from lostcities_cfr.evaluation.arena import evaluate
from lostcities_cfr.game import GameBatch, Rules
from lostcities_cfr.training import metrics
from lostcities_cfr.training.checkpoint import (
    load_agent,
    load_model,
    networks_only,
    read_checkpoint,
)

TINY_PPO = {
    "rules": "tiny",
    "network": {"width": 16, "depth": 1},
    "games_per_rollout": 16,
    "update_epochs": 2,
    "minibatches": 2,
    "snapshot_every": 1,
    "pool_size": 2,
}


def write_config(run_dir: Path, max_epochs: int = 3, **model: object) -> Path:
    evaluation = {
        "class_path": "lostcities_cfr.callbacks.PeriodicEvaluation",
        "init_args": {"every_n_iterations": 1, "games": 4, "opponents": ["random"]},
    }
    model_class = "lostcities_cfr.baselines.PPO"
    return write_run_config(run_dir, model_class, {**TINY_PPO, **model}, max_epochs, (evaluation,))


def logged_rows(run_dir: Path) -> list[dict[str, str]]:
    return baseline_runs.logged_rows(run_dir, "loss/value")


def test_fit_trains_ppo_logs_documented_metrics_and_its_checkpoint_plays(tmp_path, capsys):
    run_dir = tmp_path / "ppo"
    main(["fit", "--config", str(write_config(run_dir))])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("iter")]
    assert len(lines) == 3
    for i, line in enumerate(lines, start=1):
        assert re.match(
            rf"iteration {i}/3: [\d.]+ s \| rollout [\d.]+ s, [\d.]+k? decisions/s", line
        )
        assert "| update 4 steps" in line and "policy" in line
    rows = logged_rows(run_dir)
    assert [float(row["iteration"]) for row in rows] == [1.0, 2.0, 3.0]
    columns = {name for row in rows for name, value in row.items() if value}
    assert {
        "loss/policy",
        "ppo/approx_kl",
        "rollout/decisions_per_s",
        "time/rollout_share",
        "time/update_share",
        "time/elapsed_s",
        "eval/policy/random/win_rate",
    } <= columns
    assert sorted(name for name in columns if not metrics.documented(name)) == []
    clocks = [float(row["time/elapsed_s"]) for row in rows]
    assert clocks == sorted(clocks) and clocks[0] > 0

    checkpoint_path = run_dir / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(checkpoint_path, weights_only=True)  # plain data only
    assert checkpoint["model_class"] == "lostcities_cfr.baselines.ppo.PPO"
    assert len(checkpoint[PPO.training_state_key]["pool"]) == 2  # the latest two snapshots
    model = load_model(checkpoint_path)
    assert isinstance(model, PPO) and model.rules == Rules.tiny()
    assert model._resume_state is None  # the pool stays in the file: an agent plays
    agent = agent_from_spec(f"ckpt:{checkpoint_path}:greedy", seed=0)
    result = evaluate(agent, agent_from_spec("random", seed=1), 8, rules=Rules.tiny())
    assert result.games == 8


def test_a_resumed_ppo_run_continues_with_its_pool_and_clock(tmp_path):
    run_dir = tmp_path / "resumed"
    config = str(write_config(run_dir, max_epochs=2))
    main(["fit", "--config", config])
    cli = run("fit", ["--config", config, "--trainer.max_epochs", "3", "--ckpt_path", "last"])
    assert cli.model.current_epoch == 3
    assert len(cli.model.pool) == 2  # restored (one snapshot), then one more at iteration 3
    rows = logged_rows(run_dir)
    assert [float(row["iteration"]) for row in rows] == [1.0, 2.0, 3.0]
    assert float(rows[2]["time/elapsed_s"]) > float(rows[1]["time/elapsed_s"])


def test_a_fixed_opponent_run_clones_it_then_learns_against_it_alone(tmp_path):
    run_dir = tmp_path / "fixed"
    config = write_config(run_dir, max_epochs=3, opponent="discard-only", bc_iterations=1)
    cli = run("fit", ["--config", str(config)])
    assert cli.model.pool == []  # no snapshots: the pool is unused
    rows = logged_rows(run_dir)
    assert [bool(row["loss/bc"]) for row in rows] == [True, False, False]
    assert [float(row["ppo/pool_size"]) for row in rows[1:]] == [0.0, 0.0]
    checkpoint = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert checkpoint["hyper_parameters"]["opponent"] == "discard-only"
    assert load_model(run_dir / "checkpoints" / "last.ckpt").opponent.name == "discard-only"


def test_behaviour_cloning_iterations_come_first_then_ppo(tmp_path):
    run_dir = tmp_path / "bc"
    config = write_config(run_dir, max_epochs=3, bc_teacher="heuristic:balanced", bc_iterations=2)
    main(["fit", "--config", str(config)])
    rows = logged_rows(run_dir)
    assert [bool(row["loss/bc"]) for row in rows] == [True, True, False]
    assert [bool(row["loss/policy"]) for row in rows] == [False, False, True]
    assert all(0 <= float(row["bc/accuracy"]) <= 1 for row in rows[:2])
    assert all(float(row["rollout/decisions_per_s"]) > 0 for row in rows)  # the teacher's too


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("clip", 0, "model.clip=0: Not of type PositiveFloat"),
        ("gae_lambda", 1.5, "model.gae_lambda=1.5: Not of type ClosedUnitInterval"),
        ("games_per_rollout", 1, "PPO games_per_rollout=1"),
        ("bc_teacher", "heuristic:nonsense", "PPO bc_teacher"),
        ("bc_iterations", 3, "needs a bc_teacher"),
    ],
)
def test_a_bad_ppo_setting_fails_before_any_game_naming_the_field(
    tmp_path, capsys, field, value, message
):
    config = write_config(tmp_path / "bad", **{field: value})
    with pytest.raises(SystemExit):
        main(["fit", "--config", str(config)])
    assert message in capsys.readouterr().err
    assert not (tmp_path / "bad" / "checkpoints").exists()


def test_a_networks_only_export_is_smaller_loads_safely_and_plays_the_same_moves(tmp_path):
    run_dir = tmp_path / "export"
    main(["fit", "--config", str(write_config(run_dir, max_epochs=2))])
    full = run_dir / "checkpoints" / "last.ckpt"
    slim = tmp_path / "agent.pt"
    torch.save(networks_only(read_checkpoint(full)), slim)
    saved = torch.load(slim, weights_only=True)
    assert saved["iteration"] == 2 and "ppo" not in saved and "optimizer_states" not in saved
    assert slim.stat().st_size < full.stat().st_size / 2
    batch = GameBatch.new(Rules.tiny(), 32, seed=5)
    moves = [load_agent(path, greedy=True).act(batch) for path in (full, slim)]
    assert torch.equal(*moves)
