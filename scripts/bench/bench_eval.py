"""Evaluation cost: the seconds of one PeriodicEvaluation and what they add to training.

Times exactly what :class:`~lostcities_cfr.callbacks.PeriodicEvaluation` does at an
evaluated iteration (both policies of a Deep CFR model against each opponent, duplicate
games, batched) for each ``--games`` count, then amortizes it over evaluation intervals:
evaluation seconds per iteration (``seconds / every``) and, given an iteration's training
wall-clock, the share it adds. The iteration's seconds come from ``--iteration-seconds``
or from a run's ``metrics.csv`` (``--run RUN_DIR``: mean ``time/iteration_s`` minus
``time/eval_s``). The model is a fresh classic-rules 512x3 one unless ``--ckpt`` names a
checkpoint: the cost follows the length of the games, which the policies set (drawing from
the discard piles prolongs a round), so time the model you train. ``--json`` prints the
same figures for machines.

    python scripts/bench/bench_eval.py [--games 100 1000] [--every 25 10 5]
        [--opponents random heuristic] [--iteration-seconds S | --run RUN_DIR]
        [--ckpt PATH] [--threads 1] [--json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from lostcities_cfr.callbacks import PeriodicEvaluation
from lostcities_cfr.sweeps.run_metrics import find_metrics_files, read_metrics
from lostcities_cfr.training import DeepCFR, load_model


def training_iteration_seconds(run_dir: Path) -> float:
    """Mean wall-clock of a run's iterations without their evaluation."""
    _, metrics = read_metrics(find_metrics_files(run_dir))
    seconds = metrics["time/iteration_s"] - np.nan_to_num(
        metrics.get("time/eval_s", np.zeros_like(metrics["time/iteration_s"])), nan=0.0
    )
    return float(np.nanmean(seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--every", type=int, nargs="+", default=[25, 10, 5])
    parser.add_argument("--opponents", nargs="+", default=["random", "heuristic"])
    parser.add_argument("--policies", nargs="+", default=["average", "current"])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--iteration-seconds", type=float, default=None)
    source.add_argument("--run", type=Path, default=None, help="a run folder with metrics.csv")
    parser.add_argument("--ckpt", type=Path, default=None, help="a trained DeepCFR checkpoint")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.ckpt is None:
        torch.manual_seed(args.seed)
        model = DeepCFR(rules="classic", network="512x3")
    else:
        model = load_model(args.ckpt)
    iteration_s = args.iteration_seconds
    if args.run is not None:
        iteration_s = training_iteration_seconds(args.run)

    evaluations = []
    for games in args.games:
        callback = PeriodicEvaluation(
            games=games, opponents=args.opponents, policies=args.policies, seed=args.seed
        )
        callback.evaluate_policies(model, iteration=1)
        per_pair = {f"{row[1]}/{row[2]}": row[-1] for row in callback.rows}
        evaluations.append(
            {"games": games, "seconds": callback.last_seconds, "per_pair_seconds": per_pair}
        )
    amortized = [
        {
            "every": every,
            "games": e["games"],
            "eval_s_per_iteration": e["seconds"] / every,
            "overhead": None if iteration_s is None else e["seconds"] / every / iteration_s,
        }
        for every in args.every
        for e in evaluations
    ]
    figures = {
        "policies": args.policies,
        "opponents": args.opponents,
        "threads": args.threads,
        "model": str(args.ckpt) if args.ckpt else "classic 512x3, untrained",
        "training_iteration_s": iteration_s,
        "evaluations": evaluations,
        "amortized": amortized,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    pairs = len(args.policies) * len(args.opponents)
    print(
        f"one evaluation: {len(args.policies)} policies x {len(args.opponents)} opponents "
        f"({', '.join(args.opponents)}), {figures['model']}, {args.threads} thread(s)"
    )
    for e in evaluations:
        print(f"  {e['games']:>5} games per pair: {e['seconds']:7.1f} s ({pairs} pairs)")
    if iteration_s is not None:
        print(f"training iteration (evaluation excluded): {iteration_s:.1f} s")
    print()
    print(f"{'every':>6} {'games':>6} {'eval s / iteration':>19} {'adds to iteration':>18}")
    for row in amortized:
        share = "n/a" if row["overhead"] is None else f"{100 * row['overhead']:.1f}%"
        print(
            f"{row['every']:>6} {row['games']:>6} {row['eval_s_per_iteration']:>19.2f} {share:>18}"
        )


if __name__ == "__main__":
    main()
