"""A checkpoint written before the package's layout changed still loads, plays, is measured
and resumes (issue 39: commands and evaluation moved into their own packages).

``tests/data/tiny_run_before_layout_move.ckpt`` is the second iteration's checkpoint of the
tiny run below, made at commit 7021330 (before the move) with ``fit --config`` of
:func:`old_run_config`; it holds its reservoirs and its callbacks' states, so a class that a
checkpoint pickles by its old module path would fail here.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from tiny_training import tiny_config

from lostcities_cfr.commands import main
from lostcities_cfr.commands.fit import run
from lostcities_cfr.training.checkpoint import read_checkpoint, trained_iterations

OLD = Path(__file__).resolve().parents[1] / "data" / "tiny_run_before_layout_move.ckpt"


def old_run_config(run_dir: Path) -> dict:
    """The config that made the old checkpoint (its run ran 2 iterations; a resume adds 1)."""
    config = tiny_config(run_dir, max_epochs=3)
    config["trainer"]["callbacks"] = [
        {"class_path": "lostcities_cfr.callbacks.PhaseTimer"},
        {
            "class_path": "lostcities_cfr.callbacks.PeriodicEvaluation",
            "init_args": {"every_n_iterations": 1, "games": 8, "opponents": ["random"]},
        },
    ]
    config["model"] |= {"advantage_buffer_size": 256, "strategy_buffer_size": 256}
    return config


def test_the_old_checkpoint_plays_as_an_agent_and_is_measured(capsys):
    assert trained_iterations(read_checkpoint(OLD)) == 2
    agent = ["--agent", f"ckpt:{OLD}", "--opponent", "random", "--rules", "tiny"]
    main(["evaluate", *agent, "--games", "20", "--json"])
    assert json.loads(capsys.readouterr().out)["games"] == 20
    main(["nashconv", "--agent", f"ckpt:{OLD}", "--game", "tiny", "--json"])
    assert json.loads(capsys.readouterr().out)["nash_conv"] > 0


def test_a_run_resumes_from_the_old_checkpoint(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(old_run_config(tmp_path / "run")))
    run("fit", ["--config", str(config), "--ckpt_path", str(OLD)])
    final = read_checkpoint(tmp_path / "run" / "checkpoints" / "final.ckpt")
    assert trained_iterations(final) == 3
