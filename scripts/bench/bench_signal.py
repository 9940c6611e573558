"""Learning signal per CPU-second: what each sampler's advantage rows cost and how noisy they are.

For each sampler, on the same networks (advantage, strategy and, for the value-baseline
samplers, value networks of ``--network``; random weights, or a trained checkpoint's with
``--ckpt``) and the same time budget, on classic rules:

- **rows/s**: advantage rows written per second of traversal, each sampler traversing
  fresh deals for ``--seconds`` per round, the samplers taking turns round by round so that
  the machine's slow and fast spells hit them alike; the ratio to ``BudgetedSampling`` is
  the median of the rounds' ratios;
- **nodes/row**: decision nodes visited (network rows queried on the trajectories) per
  advantage row;
- **per-row signal-to-noise**: ``--states`` states taken from games of two
  ``heuristic:balanced`` players, at the traverser's card decisions; from each state the
  sampler's estimate of that one row is repeated ``--repeats`` times (the state's row in
  ``--repeats`` traversals started there). The *noise* is the mean over states and legal
  actions of the repeats' standard deviation; the *signal* is the standard deviation, over
  states and legal actions, of the repeats' means (the spread of the targets a network has
  to learn). A sampler whose row at a state is deterministic given its networks (ESCHER at a
  card decision, whose children hold no chance) has no noise: its ratio is infinite and its
  error is the value network's bias, which this measure does not see (``docs/algorithms.md``).

    python scripts/bench/bench_signal.py [--json] [--seconds 20] [--rounds 3] [--ckpt PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import torch
from tables import render

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.cfr import BudgetedSampling, NetworkConfig, ReservoirBuffer, regret_matching
from lostcities_cfr.cfr.baseline_outcome_sampling import BaselineOutcomeSampling
from lostcities_cfr.cfr.escher import ESCHERSampling
from lostcities_cfr.cfr.networks import masked_softmax
from lostcities_cfr.cfr.traversal import ADVANTAGE_NETWORKS, STRATEGY_NETWORK, TraversalContext
from lostcities_cfr.cfr.value_baseline import VALUE_NETWORK
from lostcities_cfr.game import GameBatch, Rules, feature_size
from lostcities_cfr.game.encoding import history_feature_size
from lostcities_cfr.inference import InferenceQueue

RULES = Rules(max_turns=1000)


def samplers(walkers: int) -> dict[str, object]:
    """The samplers compared, as the configs use them."""
    return {
        "budgeted": BudgetedSampling(walkers=walkers, utility_scale=100.0),
        "escher": ESCHERSampling(walkers=walkers),
        "baseline_outcome": BaselineOutcomeSampling(walkers=walkers),
    }


def build_queue(network: NetworkConfig, ckpt: str | None) -> InferenceQueue:
    """A queue with every network the samplers query (regret-matching heads)."""
    F, H, A = feature_size(RULES), history_feature_size(RULES), RULES.n_actions
    if ckpt is not None:
        from lostcities_cfr.training.checkpoint import load_model

        model = load_model(ckpt)
        nets = [*model.advantage_nets, model.strategy_net, model.value_net]
    else:
        torch.manual_seed(0)
        nets = [network.build(F, A, RULES) for _ in range(3)]
        nets.append(network.build(H, 1, RULES))
    queue = InferenceQueue(bucket_sizes=None)
    for name, net in zip(ADVANTAGE_NETWORKS, nets, strict=False):
        queue.register(name, net.eval(), regret_matching)
    queue.register(STRATEGY_NETWORK, nets[2].eval(), masked_softmax)
    queue.register(VALUE_NETWORK, nets[3].eval())
    return queue


def context(queue: InferenceQueue, traverser: int, seed: int) -> TraversalContext:
    F, H, A = feature_size(RULES), history_feature_size(RULES), RULES.n_actions
    return TraversalContext(
        game=RULES,
        traverser=traverser,
        iteration=2,
        queue=queue,
        advantage_buffer=ReservoirBuffer(400_000, F, A, target_dtype=torch.float32),
        strategy_buffer=ReservoirBuffer(400_000, F, A),
        generator=torch.Generator().manual_seed(seed),
        value_buffer=ReservoirBuffer(400_000, H, 1, target_dtype=torch.float32, fifo=True),
    )


def rows_per_second(sampler, queue: InferenceQueue, seconds: float, seed: int) -> dict:
    """Traverse fresh deals (both players in turn) for ``seconds``; the sampler's yield."""
    rows = nodes = 0
    spent = 0.0
    traverser = 0
    while spent < seconds:
        ctx = context(queue, traverser, seed + traverser)
        stats = sampler.traverse(ctx, sampler.walkers)
        rows, nodes, spent = rows + stats.advantage_rows, nodes + stats.nodes, spent + stats.seconds
        traverser = 1 - traverser
    return {"rows_per_s": rows / spent, "nodes_per_row": nodes / max(rows, 1), "rows": rows}


def heuristic_states(n: int, seed: int) -> list:
    """``n`` states of ``heuristic:balanced`` self-play at player 0's card decisions."""
    guide = agent_from_spec("heuristic:balanced")
    games = GameBatch.new(RULES, n, seed=seed)
    depth = torch.Generator().manual_seed(seed)
    stops = torch.randint(0, 20, (n,), generator=depth) * 4  # player 0's card decisions
    states = [None] * n
    turn = 0
    while any(s is None for s in states):
        for i in (games.turn == turn).nonzero().squeeze(1).tolist():
            if int(stops[i]) == turn and states[i] is None and not bool(games.done[i]):
                states[i] = games.select([i]).to_states()[0]
        if bool(games.done.all()):
            break
        games.step(guide.act(games))
        turn += 1
    return [s for s in states if s is not None]


def at_root(sampler):
    """The sampler, writing a row at the state a traversal starts from: budgeted sampling
    branches there (and nowhere else); the others always write one there."""
    if isinstance(sampler, BudgetedSampling):
        return BudgetedSampling(
            walkers=sampler.walkers,
            utility_scale=sampler.utility_scale,
            exploration=sampler.exploration,
            branch_prob=1.0,
            max_branches=1,
        )
    return sampler


def signal_to_noise(sampler, queue: InferenceQueue, states: list, repeats: int) -> dict:
    """Each state's row estimated ``repeats`` times (module docstring)."""
    means, noises = [], []
    for i, state in enumerate(states):
        ctx = context(queue, 0, 1000 + i)
        root = GameBatch.from_states([state])
        sampler.traverse_games(root.select([0] * repeats), ctx)
        key = root.encode().half().float()[0]
        held = len(ctx.advantage_buffer)
        features = ctx.advantage_buffer.features[:held].float()
        rows = ctx.advantage_buffer.targets[:held][(features == key).all(1)]  # [r, A]
        legal = root.legal_mask()[0]
        if len(rows) < 2:
            continue
        means.append(rows[:, legal].mean(0))
        noises.append(rows[:, legal].std(0).mean())
    signal = float(torch.cat(means).std())
    noise = float(torch.stack(noises).mean())
    return {
        "signal": signal,
        "noise": noise,
        "snr": signal / noise if noise > 0 else math.inf,
        "states": len(means),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--network", default="128x3:colors", help="WIDTHxDEPTH[:colors]")
    parser.add_argument("--ckpt", help="networks of a trained DeepCFR run with a value network")
    parser.add_argument("--walkers", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--states", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    shape, _, kind = args.network.partition(":")
    width, depth = (int(x) for x in shape.split("x"))
    network = NetworkConfig(width, depth, architecture=kind or "mlp")
    queue = build_queue(network, args.ckpt)
    compared = samplers(args.walkers)

    rounds: dict[str, list[dict]] = {name: [] for name in compared}
    for r in range(args.rounds):
        for name, sampler in compared.items():
            rounds[name].append(rows_per_second(sampler, queue, args.seconds, seed=r))
    states = heuristic_states(args.states, seed=7)
    report = {"network": args.network, "ckpt": args.ckpt, "samplers": {}}
    for name, sampler in compared.items():
        per_round = rounds[name]
        ratios = [
            a["rows_per_s"] / b["rows_per_s"]
            for a, b in zip(per_round, rounds["budgeted"], strict=True)
        ]
        started = time.perf_counter()
        snr = signal_to_noise(at_root(sampler), queue, states, args.repeats)
        report["samplers"][name] = {
            "rows_per_s": statistics.median(x["rows_per_s"] for x in per_round),
            "rows_per_s_vs_budgeted": statistics.median(ratios),
            "nodes_per_row": statistics.median(x["nodes_per_row"] for x in per_round),
            **snr,
            "snr_seconds": time.perf_counter() - started,
        }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"network {args.network}{' from ' + args.ckpt if args.ckpt else ' (random weights)'}")
    headers = ("sampler", "rows/s", "x budgeted", "nodes/row", "signal", "noise", "SNR")
    lines = [
        (
            name,
            f"{row['rows_per_s']:.1f}",
            f"{row['rows_per_s_vs_budgeted']:.1f}",
            f"{row['nodes_per_row']:.1f}",
            f"{row['signal']:.4f}",
            f"{row['noise']:.4f}",
            f"{row['snr']:.2f}",
        )
        for name, row in report["samplers"].items()
    ]
    print(render(headers, lines))


if __name__ == "__main__":
    main()
