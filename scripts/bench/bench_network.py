"""Forward throughput of the Deep CFR networks through the inference queue.

For each network preset, dtype and backend, times one traversal step's query
(a batch of encoded states, regret matching as the head) through
:class:`~lostcities_cfr.inference.InferenceQueue`, and, for comparison, the same
rows run one per forward (``local=True``, as a per-walker server would).

    python scripts/bench/bench_network.py --threads 2 --batch 1024
    python scripts/bench/bench_network.py --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from lostcities_cfr.cfr import NetworkConfig, regret_matching
from lostcities_cfr.game import Rules, feature_size
from lostcities_cfr.inference import InferenceQueue


def rows_per_second(
    queue: InferenceQueue, features: torch.Tensor, legal: torch.Tensor, seconds: float
) -> tuple[float, float]:
    """Best and median rows per second over repeated queries, after two warm-up
    queries (compilation). The best resists other processes on a shared machine."""
    for _ in range(2):
        queue("net", features, legal)
    rates = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds or len(rates) < 3:
        queue.reset_stats()
        queue("net", features, legal)
        rates.append(queue.stats().rows / queue.stats().policy_network_seconds)
    return max(rates), statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["512x3", "1024x6"])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--backends", nargs="+", default=["eager", "compiled"])
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--local-rows", type=int, default=256, help="rows timed one at a time")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    rules = Rules.classic()
    g = torch.Generator().manual_seed(0)
    n_features = feature_size(rules)
    features = torch.randint(0, 4, (args.batch, n_features), generator=g).float()
    features *= torch.rand(args.batch, n_features, generator=g) < 0.3
    legal = torch.rand(args.batch, rules.n_actions, generator=g) < 0.2
    features, legal = features.to(args.device), legal.to(args.device)

    results = []
    for preset in args.presets:
        for dtype in args.dtypes:
            net = NetworkConfig.preset(preset).build(n_features, rules.n_actions)
            net = net.to(args.device, getattr(torch, dtype)).eval()
            queues = {b: InferenceQueue((args.batch,), backend=b) for b in args.backends}
            queues["local (eager)"] = InferenceQueue(local=True)
            for mode, queue in queues.items():
                queue.register("net", net, regret_matching)
                n = args.local_rows if queue.local else args.batch
                best, median = rows_per_second(queue, features[:n], legal[:n], args.seconds)
                results.append(
                    {"net": preset, "dtype": dtype, "mode": mode, "best": best, "median": median}
                )

    if args.json:
        print(json.dumps({"batch": args.batch, "threads": args.threads, "results": results}))
        return
    print(f"rows/s, batch {args.batch}, {args.threads} threads, device {args.device}")
    print(f"{'net':<8} {'dtype':<9} {'mode':<14} {'best':>10} {'median':>10}")
    for r in results:
        print(
            f"{r['net']:<8} {r['dtype']:<9} {r['mode']:<14} {r['best']:>10,.0f} {r['median']:>10,.0f}"
        )


if __name__ == "__main__":
    main()
