"""PPO rollout throughput: decisions per second of self-play on the batched engine.

Times :meth:`PPO.rollout` (all games of a rollout in lockstep, one forward per network per
step through the inference queue, sampling, then the value network and GAE over the
learner's rows) of a freshly initialised classic-rules model whose pool holds its own
snapshot, for each ``--games`` count; ``--ckpt`` times a trained PPO checkpoint instead
(trained policies play shorter rounds than near-uniform ones). Decisions count both
players' moves; the learner's are half of them. A figure is the median of ``--repeats``
rollouts after one warm-up.

    python scripts/bench/bench_rollout.py [--games 128 512 2048] [--network WIDTHxDEPTH]
        [--ckpt PATH] [--threads 1] [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from lostcities_cfr.baselines import PPO
from lostcities_cfr.cfr import NetworkConfig


def network(text: str) -> NetworkConfig:
    """``WIDTHxDEPTH`` as a :class:`NetworkConfig`."""
    width, depth = text.split("x")
    return NetworkConfig(int(width), int(depth))


def time_rollout(model: PPO, repeats: int) -> dict[str, float]:
    """Median seconds, decisions per second and network share of ``repeats`` rollouts."""
    model.rollout()  # warm-up
    runs = []
    for _ in range(repeats):
        model.queue.reset_stats()
        start = time.perf_counter()
        model.rollout()
        seconds = time.perf_counter() - start
        decisions = model.iteration_metrics["rollout/decisions"]
        runs.append(
            {
                "seconds": seconds,
                "decisions": decisions,
                "decisions_per_s": decisions / seconds,
                "learner_decisions_per_s": model.iteration_metrics["rollout/learner_decisions"]
                / seconds,
                "network_share": model.queue.stats().policy_network_seconds / seconds,
            }
        )
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, nargs="+", default=[128, 512, 2048])
    parser.add_argument(
        "--network", type=network, default=None, help="WIDTHxDEPTH (default: PPO's, 128x2)"
    )
    parser.add_argument("--ckpt", default=None, help="a PPO checkpoint to time instead")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    results = []
    for games in args.games:
        if args.ckpt is None:
            shape = {} if args.network is None else {"network": args.network}
            model = PPO(games_per_rollout=games, **shape)
        else:
            model = PPO.load_from_checkpoint(args.ckpt, games_per_rollout=games)
        with torch.no_grad():
            results.append({"games": games, **time_rollout(model, args.repeats)})
    if args.json:
        print(json.dumps({"threads": args.threads, "results": results}))
        return
    print(f"PPO rollout, classic rules, {args.threads} thread(s), median of {args.repeats}")
    print(
        f"{'games':>6} {'decisions':>10} {'seconds':>8} {'decisions/s':>12} "
        f"{'learner/s':>10} {'network':>8}"
    )
    for r in results:
        print(
            f"{r['games']:6d} {r['decisions']:10.0f} {r['seconds']:8.2f} "
            f"{r['decisions_per_s']:12,.0f} {r['learner_decisions_per_s']:10,.0f} "
            f"{100 * r['network_share']:7.0f}%"
        )


if __name__ == "__main__":
    main()
