"""``scripts/bench/bench_traversal.py``: the command docs/performance.md quotes runs and prints its
figures (on a few traversals: the figures are the benchmark's, not the test's)."""

from __future__ import annotations

import json
import sys


def test_prints_each_presets_figures_as_json(load_script, monkeypatch, capsys):
    bench = load_script("bench_traversal")
    argv = ["--presets", "512x3", "--traversals", "2", "--local-traversals", "1"]
    argv += ["--walkers", "2", "--repeats", "1", "--threads", "1", "--json"]
    monkeypatch.setattr(sys, "argv", ["bench_traversal.py", *argv])
    bench.main()
    (row,) = json.loads(capsys.readouterr().out)["results"]
    assert row["net"] == "512x3" and row["traversals"] == 2
    assert row["queue_nodes_per_s"] > 0 and row["queue_mean_batch"] > 0
    assert 0 < row["queue_network_share"] <= 1
