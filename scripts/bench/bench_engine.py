"""Random-play throughput of the reference and batched engines, side by side.

Prints actions/s of the reference engine (one game, Python) and of the batched
engine at several batch sizes and torch thread counts, each the median of
``--repeats`` rounds in this one process (a round times every configuration once),
with the median of the per-round batched/reference ratios; the
split of one random-play step between ``legal_mask``, ``random_legal_actions``
and ``step`` at the largest batch on one thread; and the cost of ``encode()``
per row at each thread count. ``--json`` prints the same figures for machines.

    python scripts/bench/bench_engine.py [--repeats 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import torch

from lostcities_cfr.agents import random_legal_actions
from lostcities_cfr.game import GameBatch, GameState, Rules

# Random games last more than 2 * (N - 2H) = 88 decisions (every deck draw is one of
# two decisions), so the first 80 steps keep every game of the batch active.
STEPS = 80


def reference_actions_per_s(rules: Rules, seconds: float, seed: int) -> float:
    rng = random.Random(seed)
    actions, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        state = GameState.new(rules, seed=rng.randrange(2**31))
        while not state.is_terminal:
            state.apply(rng.choice(state.legal_actions()))
            actions += 1
    return actions / (time.perf_counter() - start)


def batched_actions_per_s(rules: Rules, batch_size: int, seed: int) -> float:
    games = GameBatch.new(rules, batch_size, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    for _ in range(STEPS):
        games.step(random_legal_actions(games.legal_mask(), generator), check=False)
    elapsed = time.perf_counter() - start
    assert not bool(games.done.any()), "a game ended inside the timed window"
    return batch_size * STEPS / elapsed


def part_ms(rules: Rules, batch_size: int, seed: int) -> dict[str, float]:
    """Milliseconds per call of each part of the random-play loop, timed inside the loop."""
    games = GameBatch.new(rules, batch_size, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    total = {"legal_mask": 0.0, "random_legal_actions": 0.0, "step": 0.0}
    for _ in range(STEPS):
        start = time.perf_counter()
        legal = games.legal_mask()
        masked = time.perf_counter()
        actions = random_legal_actions(legal, generator)
        drawn = time.perf_counter()
        games.step(actions, check=False)
        total["legal_mask"] += masked - start
        total["random_legal_actions"] += drawn - masked
        total["step"] += time.perf_counter() - drawn
    return {name: seconds / STEPS * 1e3 for name, seconds in total.items()}


def encode_us_per_row(rules: Rules, batch_size: int, seed: int) -> float:
    games = GameBatch.new(rules, batch_size, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(30):  # a mid-game position: piles and expeditions filled
        games.step(random_legal_actions(games.legal_mask(), generator), check=False)
    reps = 50
    start = time.perf_counter()
    for _ in range(reps):
        games.encode()
    return (time.perf_counter() - start) / reps / batch_size * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 1024, 8192])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rules = Rules.classic()

    # Each repeat times the reference engine and then every batched configuration, so
    # that the ratios pair figures from the same minute (this machine's speed drifts).
    configs = [(threads, size) for threads in args.threads for size in args.sizes]
    for threads, size in configs:  # warm-up
        torch.set_num_threads(threads)
        batched_actions_per_s(rules, size, seed=99)
    references, rates = [], {config: [] for config in configs}
    for seed in range(args.repeats):
        references.append(reference_actions_per_s(rules, 1.0, seed))
        for threads, size in configs:
            torch.set_num_threads(threads)
            rates[threads, size].append(batched_actions_per_s(rules, size, seed))
    reference = statistics.median(references)
    rows = [
        {
            "threads": threads,
            "batch": size,
            "actions_per_s": statistics.median(rates[threads, size]),
            "vs_reference": statistics.median(
                rate / ref for rate, ref in zip(rates[threads, size], references, strict=True)
            ),
        }
        for threads, size in configs
    ]
    torch.set_num_threads(1)
    largest = max(args.sizes)
    runs = [part_ms(rules, largest, seed) for seed in range(args.repeats)]
    parts = {name: statistics.median(run[name] for run in runs) for name in runs[0]}
    encode_by_threads = {}
    for threads in args.threads:
        torch.set_num_threads(threads)
        encode_by_threads[threads] = statistics.median(
            encode_us_per_row(rules, 1024, seed) for seed in range(args.repeats)
        )
    result = {
        "reference_actions_per_s": reference,
        "batched": rows,
        "encode_us_per_row_b1024": encode_by_threads[max(args.threads)],
        "encode_us_per_row_b1024_by_threads": encode_by_threads,
        "part_ms_1_thread": {"batch": largest, **parts},
        "repeats": args.repeats,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"reference engine: {reference:,.0f} actions/s (median of {args.repeats})")
    print(f"{'threads':>7} {'batch':>6} {'actions/s':>14} {'x reference':>12}")
    for row in rows:
        print(
            f"{row['threads']:>7} {row['batch']:>6} {row['actions_per_s']:>14,.0f} "
            f"{row['vs_reference']:>12.1f}"
        )
    print(
        f"one step at B={largest}, 1 thread: "
        + ", ".join(f"{name} {ms:.3f} ms" for name, ms in parts.items())
    )
    for threads, us in encode_by_threads.items():
        print(f"encode(): {us:.3f} us per row at B=1024, {threads} threads")


if __name__ == "__main__":
    main()
