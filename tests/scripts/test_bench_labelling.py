"""``scripts/bench/bench_labelling.py``: the labelling rate batched and one game at a time, side
by side, on the same labels."""

from __future__ import annotations

import json
import sys

import torch

from lostcities_cfr.baselines import PPO
from lostcities_cfr.cfr import NetworkConfig
from lostcities_cfr.training.checkpoint import MODEL_CLASS_KEY, class_path, plain_data


def test_prints_both_rates_on_the_same_labels(load_script, monkeypatch, capsys, tmp_path):
    torch.manual_seed(0)
    model = PPO(rules="tiny", network=NetworkConfig(width=16, depth=1))
    base = tmp_path / "tiny.pt"
    torch.save(
        {
            MODEL_CLASS_KEY: class_path(PPO),
            "hyper_parameters": plain_data(dict(model.hparams)),
            "state_dict": model.state_dict(),
        },
        base,
    )
    script = load_script("bench_labelling")
    argv = ["--base", f"ckpt:{base}", "--games", "2", "6", "--worlds", "2"]
    monkeypatch.setattr(sys, "argv", ["bench_labelling.py", *argv, "--json"])
    script.main()
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [row["games"] for row in rows] == [2, 6]
    for row in rows:
        assert row["same"] and row["batched"]["labels"] == row["one_at_a_time"]["labels"] > 0
        assert row["batched"]["labels_per_s"] > 0 and row["speedup"] > 0
    monkeypatch.setattr(sys, "argv", ["bench_labelling.py", *argv])
    script.main()
    table = capsys.readouterr().out
    assert "batched labels/s" in table and "one-at-a-time labels/s" in table
