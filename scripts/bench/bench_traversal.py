"""Traversal throughput: decision nodes per second with the batched inference queue,
with batch-1 local inference, and the network-only ceiling, in one run.

For each network preset the sampler (``BudgetedSampling`` by default, the classic
workhorse) traverses fresh classic deals three ways:

- **queue**: every step's rows go through one forward per network (unpadded:
  ``bucket_sizes=None``, as eager CPU inference wants), ``--walkers`` deals at a time;
- **local**: the same sampler with ``InferenceQueue(local=True)``, one forward per
  row, as a per-walker inference server would run it; fewer traversals (batch-1
  forwards are slow), still enough walkers that the network dominates (its share
  is printed);
- **network only**: the same networks and head on ``--batch`` encoded mid-game rows,
  nothing else: the most rows per second a traversal could reach at that batch size.

``node/row cost`` is (network-only rows/s) / (queue nodes/s): what one traversal
node costs relative to one network row at batch 1024 (1.0 would mean the engine
and the bookkeeping are free). Each repeat runs the three measurements back to
back; figures are medians over ``--repeats``, ratios are medians of each
repeat's ratio.

The head is uniform by default, as in Deep CFR's first iteration (the network
still runs in full): regret matching over untrained networks is nearly
deterministic and loops (``docs/algorithms.md``), which would make the rounds
unlike those of training. Traversals per run default to ``SIZES``, which keep the
whole run near twelve minutes on one busy CPU thread; ``--traversals`` and
``--local-traversals`` override them.

    python scripts/bench/bench_traversal.py [--threads 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from lostcities_cfr.agents import random_legal_actions
from lostcities_cfr.cfr import (
    BudgetedSampling,
    ExternalSampling,
    NetworkConfig,
    OutcomeSampling,
    ReservoirBuffer,
    regret_matching,
    uniform_strategy,
)
from lostcities_cfr.cfr.traversal import ADVANTAGE_NETWORKS, TraversalContext
from lostcities_cfr.game import GameBatch, Rules, feature_size
from lostcities_cfr.inference import InferenceQueue

SAMPLERS = {
    "budgeted": BudgetedSampling,
    "outcome": OutcomeSampling,
    "external": ExternalSampling,
}


# the uniform head still computes the network's outputs, unused
HEADS = {"uniform": uniform_strategy, "regret": regret_matching}
# Traversals per run (queue, local) for each preset: the 1024x6 forward costs ~4x more.
SIZES = {"512x3": (128, 8), "1024x6": (64, 2)}


def traversal_nodes_per_s(
    sampler, rules: Rules, nets, head, queue: InferenceQueue, n_traversals: int, seed: int
) -> dict[str, float]:
    """One ``traverse`` call of ``n_traversals`` (traverser: ``seed % 2``) and its figures."""
    for p, net in enumerate(nets):
        queue.register(ADVANTAGE_NETWORKS[p], net, head)
    F, A = feature_size(rules), rules.n_actions
    # Room for every row of a default run (a few thousand advantage, ~10^4 strategy rows).
    advantage, strategy = (ReservoirBuffer(100_000, F, A, seed=s) for s in range(2))
    queue.reset_stats()
    generator = torch.Generator().manual_seed(seed)
    context = TraversalContext(rules, seed % 2, 1, queue, advantage, strategy, generator)
    stats = sampler.traverse(context, n_traversals)
    network = queue.stats()
    return {
        "nodes_per_s": stats.nodes_per_s,
        "nodes": stats.nodes,
        "mean_batch": network.mean_batch,
        "network_share": network.policy_network_seconds / stats.seconds,
    }


def network_rows_per_s(nets, head, rules: Rules, batch: int, seconds: float) -> float:
    """Rows/s of the bare forward (plus head) on ``batch`` encoded mid-game rows."""
    games = GameBatch.new(rules, batch, seed=0)
    generator = torch.Generator().manual_seed(0)
    for _ in range(30):
        games.step(random_legal_actions(games.legal_mask(), generator), check=False)
    features, legal = games.encode().contiguous(), games.legal_mask().contiguous()
    queue = InferenceQueue(bucket_sizes=None)
    queue.register("net", nets[0], head)
    queue("net", features, legal)  # warm-up
    rates = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds or len(rates) < 5:
        queue.reset_stats()
        queue("net", features, legal)
        rates.append(batch / queue.stats().policy_network_seconds)
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["512x3", "1024x6"])
    parser.add_argument("--sampler", choices=sorted(SAMPLERS), default="budgeted")
    parser.add_argument("--head", choices=sorted(HEADS), default="uniform")
    parser.add_argument("--walkers", type=int, default=128, help="concurrent traversals")
    parser.add_argument("--traversals", type=int, help="per queue run (default: SIZES)")
    parser.add_argument("--local-traversals", type=int, help="per local run (default: SIZES)")
    parser.add_argument("--batch", type=int, default=1024, help="network-only batch size")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--max-turns", type=int, default=1000, help="Rules.max_turns (classic: 10000)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    rules = Rules(max_turns=args.max_turns)
    sampler = SAMPLERS[args.sampler](walkers=args.walkers)
    head = HEADS[args.head]
    results = []
    for preset in args.presets:
        torch.manual_seed(0)
        nets = [
            NetworkConfig.preset(preset).build(feature_size(rules), rules.n_actions).eval()
            for _ in range(2)
        ]
        sizes = SIZES.get(preset, SIZES["1024x6"])
        n_queue = args.traversals or sizes[0]
        n_local = args.local_traversals or sizes[1]
        # Each repeat measures all three back to back and the ratios are taken within a
        # repeat: on a shared machine the speed of the same forward drifts over minutes.
        runs = {"queue": [], "local": [], "network": [], "cost": [], "speedup": []}
        for repeat in range(args.repeats):
            for mode, n in (("queue", n_queue), ("local", n_local)):
                queue = InferenceQueue(bucket_sizes=None, local=mode == "local")
                runs[mode].append(
                    traversal_nodes_per_s(sampler, rules, nets, head, queue, n, seed=repeat)
                )
            runs["network"].append(network_rows_per_s(nets, head, rules, args.batch, 3.0))
            queue_rate = runs["queue"][-1]["nodes_per_s"]
            runs["cost"].append(runs["network"][-1] / queue_rate)
            runs["speedup"].append(queue_rate / runs["local"][-1]["nodes_per_s"])

        median = {
            mode: {key: statistics.median(r[key] for r in rs) for key in rs[0]}
            for mode, rs in runs.items()
            if mode in ("queue", "local")
        }
        results.append(
            {
                "net": preset,
                "traversals": n_queue,
                "local_traversals": n_local,
                "queue_nodes_per_s": median["queue"]["nodes_per_s"],
                "local_nodes_per_s": median["local"]["nodes_per_s"],
                "network_rows_per_s": statistics.median(runs["network"]),
                "queue_over_local": statistics.median(runs["speedup"]),
                "node_cost_over_row_cost": statistics.median(runs["cost"]),
                "queue_mean_batch": median["queue"]["mean_batch"],
                "queue_network_share": median["queue"]["network_share"],
                "local_network_share": median["local"]["network_share"],
                "queue_nodes_per_run": median["queue"]["nodes"],
            }
        )

    setup = {
        "sampler": args.sampler,
        "head": args.head,
        "walkers": args.walkers,
        "batch": args.batch,
        "threads": args.threads,
        "repeats": args.repeats,
        "max_turns": args.max_turns,
    }
    if args.json:
        print(json.dumps({**setup, "results": results}))
        return
    print(
        f"{args.sampler} sampling, classic rules (max_turns {args.max_turns}), {args.head} head, "
        f"up to {args.walkers} walkers, {args.threads} threads, medians of {args.repeats}"
    )
    print(
        f"{'net':<8} {'traversals':>10} {'queue nodes/s':>14} {'net share':>10} "
        f"{'local nodes/s':>14} {'net share':>10} {'x local':>8} "
        f"{'net rows/s @' + str(args.batch):>17} {'node/row cost':>14}"
    )
    for r in results:
        print(
            f"{r['net']:<8} {r['traversals']:>4} / {r['local_traversals']:<3} "
            f"{r['queue_nodes_per_s']:>14,.0f} {r['queue_network_share']:>10.0%} "
            f"{r['local_nodes_per_s']:>14,.0f} {r['local_network_share']:>10.0%} "
            f"{r['queue_over_local']:>8.1f} {r['network_rows_per_s']:>17,.0f} "
            f"{r['node_cost_over_row_cost']:>14.2f}"
        )


if __name__ == "__main__":
    main()
