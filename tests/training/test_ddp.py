"""Data-parallel training (DDP, two CPU processes over gloo) through the CLI."""

from __future__ import annotations

import subprocess

import torch
from tiny_training import cli_subprocess


def test_two_ddp_ranks_traverse_their_own_games_and_keep_equal_networks(write_config, tmp_path):
    recording = {"class_path": "run_probes.RecordingExternalSampling", "init_args": {"walkers": 8}}
    config = write_config(
        name="ddp", max_epochs=2, final_eval_games=0, traversals_per_player=33, sampler=recording
    )
    probe = {"class_path": "run_probes.RankStateProbe", "init_args": {"folder": str(tmp_path)}}
    done = subprocess.run(
        **cli_subprocess(
            config, "--trainer.devices", "2", "--trainer.strategy", "ddp", callback=probe
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1)]
    # Each rank walks its share of every player's traversals, rounded up: 17 of 33 per
    # iteration ...
    assert [rank["dealt"] for rank in ranks] == [[34, 34], [34, 34]]
    # ... from its own deals, so the reservoirs differ ...
    assert not torch.equal(ranks[0]["strategy_features"], ranks[1]["strategy_features"])
    # ... while averaged gradients and rank 0's re-initialisations keep the networks equal.
    assert ranks[0]["weights"].keys() == ranks[1]["weights"].keys()
    for name, tensor in ranks[0]["weights"].items():
        torch.testing.assert_close(tensor, ranks[1]["weights"][name], msg=name)
