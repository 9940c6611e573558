"""Ranks that pay: one config trained on 1 rank, 2 DDP ranks on one node and 2 local nodes
of one rank each, one after another in one run, with the iteration's figures side by side.

Each layout runs ``fit`` on the config for ``--iterations`` iterations (one torch thread a
rank, a CSV logger, no evaluation), and the table gives per iteration, as medians over the
iterations after the first (whose strategy is uniform and whose networks warm up):

- ``iteration_s``: the whole iteration (``time/iteration_s``, rank 0's clock);
- ``traversal_s`` and ``nodes_per_s``: the traversal epoch, its decision nodes per second
  summed over the ranks (each rank walks its own share of the games);
- ``train_s``: the updates of every network.

Layout ``2u`` is two ranks under ``rank_scaling: updates`` (each rank a whole batch, half
the updates); the others keep the config's scaling.

Ratios are against the one-rank layout measured in the same run. Two local nodes are two
``fit`` processes with ``--trainer.num_nodes 2 --trainer.devices 1`` and the environment a
cluster's hosts would set (``MASTER_ADDR``, ``MASTER_PORT``, ``NODE_RANK``), over gloo on
127.0.0.1.

    python scripts/bench/bench_ddp.py [--config configs/quickstart.yaml] [--iterations 4]
        [--layouts 1,2,2u,nodes] [--json]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tables import render

LAYOUTS = {
    "1": "1 rank",
    "2": "2 ranks, one node",
    "2u": "2 ranks, updates / 2",
    "nodes": "2 nodes of 1 rank",
}
FIGURES = {
    "iteration_s": "time/iteration_s",
    "traversal_s": "time/traversal_s",
    "nodes_per_s": "traversal/nodes_per_s",
    "train_s": ("time/advantage_train_s", "time/strategy_train_s", "time/value_train_s"),
}


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fit_arguments(config: str, folder: Path, iterations: int) -> list[str]:
    """``fit`` on ``config`` for ``iterations`` iterations into ``folder``: one thread, CSV
    metrics, no evaluation."""
    logger = f"[{{class_path: pytorch_lightning.loggers.CSVLogger, init_args: {{save_dir: {folder}, name: csv}}}}]"
    return [
        sys.executable,
        "-m",
        "lostcities_cfr",
        "fit",
        "--config",
        config,
        "--threads",
        "1",
        "--trainer.max_epochs",
        str(iterations),
        "--trainer.default_root_dir",
        str(folder),
        "--trainer.logger",
        logger,
        "--trainer.callbacks",
        "[{class_path: lostcities_cfr.callbacks.PhaseTimer}]",
        "--trainer.enable_progress_bar",
        "false",
        "--model.init_args.final_eval_games",
        "0",
    ]


def run_layout(layout: str, config: str, folder: Path, iterations: int) -> None:
    """Train ``config`` in ``layout`` into ``folder``; raise if a process fails."""
    args = fit_arguments(config, folder, iterations)
    if layout == "1":
        processes = [subprocess.Popen(args)]
    elif layout in ("2", "2u"):
        ranks = [*args, "--trainer.devices", "2", "--trainer.strategy", "ddp"]
        if layout == "2u":  # each rank a whole batch, half the updates
            ranks += ["--model.init_args.rank_scaling", "updates"]
        processes = [subprocess.Popen(ranks)]
    else:
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
        nodes = [*args, "--trainer.num_nodes", "2", "--trainer.devices", "1"]
        nodes += ["--trainer.strategy", "ddp"]
        processes = [
            subprocess.Popen(nodes, env={**env, "NODE_RANK": str(rank)}) for rank in (0, 1)
        ]
    codes = [p.wait(timeout=1800) for p in processes]
    if any(codes):
        raise SystemExit(f"bench_ddp: layout {layout!r} failed (exit codes {codes})")


def figures(folder: Path) -> dict[str, float]:
    """Medians of the iteration figures after the first iteration, from the run's CSV."""
    rows = []
    for path in folder.glob("csv/version_*/metrics.csv"):
        with path.open() as f:
            rows += [r for r in csv.DictReader(f) if r.get("time/iteration_s")]
    rows.sort(key=lambda r: float(r["iteration"]))
    later = rows[1:] or rows
    result = {}
    for name, columns in FIGURES.items():
        columns = (columns,) if isinstance(columns, str) else columns
        values = [sum(float(r[c]) for c in columns if r.get(c)) for r in later]
        result[name] = statistics.median(values)
    result["iterations"] = float(len(later))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/quickstart.yaml")
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--layouts", default="1,2,nodes", help="a subset of 1,2,2u,nodes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    layouts = args.layouts.split(",")
    unknown = [layout for layout in layouts if layout not in LAYOUTS]
    if unknown:
        parser.error(f"--layouts: unknown {unknown[0]!r}; choose from {', '.join(LAYOUTS)}")
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for layout in layouts:
            folder = Path(scratch) / f"layout_{layout}"
            run_layout(layout, args.config, folder, args.iterations)
            results[layout] = figures(folder)
    base = results.get("1")
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{args.config}, {args.iterations} iterations a layout; medians after the first")
    headers = (
        "layout",
        "iteration_s",
        "traversal_s",
        "nodes/s",
        "train_s",
        "speed-up",
        "nodes/s x",
    )
    lines = [
        (
            LAYOUTS[layout],
            f"{r['iteration_s']:.2f}",
            f"{r['traversal_s']:.2f}",
            f"{r['nodes_per_s']:.0f}",
            f"{r['train_s']:.2f}",
            f"{base['iteration_s'] / r['iteration_s']:.2f}x" if base else "-",
            f"{r['nodes_per_s'] / base['nodes_per_s']:.2f}x" if base else "-",
        )
        for layout, r in results.items()
    ]
    print(render(headers, lines))


if __name__ == "__main__":
    main()
