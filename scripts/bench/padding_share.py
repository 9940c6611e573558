"""How many padding rows the inference queue's buckets would add to a classic traversal epoch.

Runs the first iteration's traversals of ``configs/classic_512x3.yaml`` (``BudgetedSampling``
with 280 walkers, 280 traversals per player, ``max_turns`` 1000, uniform head) through a
queue that pads every forward (``pad="always"``) and prints the padding rows over the real
ones. Under the uniform head the batch sizes do not depend on the network, so a tiny one
stands in for 3 x 512 and the script takes about a minute.

    python scripts/bench/padding_share.py [--buckets 64 256 1024 4096]
"""

from __future__ import annotations

import argparse

import torch

from lostcities_cfr.cfr import BudgetedSampling, NetworkConfig, ReservoirBuffer, uniform_strategy
from lostcities_cfr.cfr.traversal import ADVANTAGE_NETWORKS, TraversalContext
from lostcities_cfr.game import Rules, feature_size
from lostcities_cfr.inference import InferenceQueue


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buckets", type=int, nargs="+", default=[64, 256, 1024, 4096])
    parser.add_argument("--traversals", type=int, default=280, help="per player")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rules = Rules(max_turns=1000)
    F, A = feature_size(rules), rules.n_actions
    queue = InferenceQueue(bucket_sizes=args.buckets, pad="always")
    for p in range(2):
        queue.register(
            ADVANTAGE_NETWORKS[p], NetworkConfig(width=8, depth=1).build(F, A), uniform_strategy
        )
    sampler = BudgetedSampling(walkers=args.traversals)
    generator = torch.Generator().manual_seed(0)
    for traverser in range(2):
        advantage, strategy = (ReservoirBuffer(100_000, F, A, seed=s) for s in range(2))
        context = TraversalContext(rules, traverser, 1, queue, advantage, strategy, generator)
        sampler.traverse(context, args.traversals)
    stats = queue.stats()
    print(
        f"buckets {args.buckets}: {stats.calls} forwards, {stats.rows:,} rows, "
        f"{stats.padded_rows:,} padding rows (+{stats.padded_rows / stats.rows:.0%})"
    )


if __name__ == "__main__":
    main()
