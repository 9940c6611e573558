"""Arena throughput: games/s of duplicate evaluations for the issue's reference matchups.

Each row is one :func:`lostcities_cfr.evaluation.arena.evaluate` call of ``--games`` games
(wall time includes the agents' decisions) at each ``--threads`` count, with the
win rate so that a speed-up that changed play would show. The network agent is
a freshly initialised 512x3 ``PolicyMLP`` (its weights do not change its cost).
``--json`` prints the same figures for machines.

    python scripts/bench/bench_arena.py [--games 1000] [--threads 1 2] [--json]
"""

from __future__ import annotations

import argparse
import json

import torch

from lostcities_cfr.agents import Agent, NetworkAgent, agent_from_spec
from lostcities_cfr.cfr import PolicyMLP, masked_softmax
from lostcities_cfr.evaluation.arena import evaluate
from lostcities_cfr.game import Rules, feature_size

MATCHUPS = [
    ("heuristic:balanced", "random"),
    ("heuristic:balanced", "discard-only"),
    ("heuristic:balanced", "heuristic:cautious"),
    ("network-512x3", "heuristic:cautious"),
    ("random", "random"),
]


def make_agent(spec: str, rules: Rules, seed: int) -> Agent:
    if spec == "network-512x3":
        torch.manual_seed(seed)
        net = PolicyMLP(feature_size(rules), rules.n_actions, width=512, depth=3)
        return NetworkAgent(net, masked_softmax, seed=seed, name=spec)
    return agent_from_spec(spec, seed=seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=1000)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rules = Rules.classic()
    rows = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        for agent, opponent in MATCHUPS:
            result = evaluate(
                make_agent(agent, rules, 2 * args.seed + 1),
                make_agent(opponent, rules, 2 * args.seed + 2),
                args.games,
                rules=rules,
                seed=args.seed,
            )
            rows.append(
                {
                    "agent": agent,
                    "opponent": opponent,
                    "threads": threads,
                    "games": result.games,
                    "seconds": round(result.seconds, 2),
                    "games_per_s": round(result.games_per_s, 1),
                    "win_rate": result.rounds.win_rate,
                    "win_rate_ci": [round(x, 4) for x in result.rounds.win_rate_ci],
                    "game_length": round(result.game_length, 1),
                }
            )
    if args.json:
        print(json.dumps({"games": args.games, "rows": rows}, indent=2))
        return
    print(f"{'agent':22}{'opponent':22}{'threads':>8}{'s':>8}{'games/s':>9}  win rate [95% CI]")
    for row in rows:
        low, high = row["win_rate_ci"]
        print(
            f"{row['agent']:22}{row['opponent']:22}{row['threads']:>8}{row['seconds']:>8.1f}"
            f"{row['games_per_s']:>9.0f}  {100 * row['win_rate']:5.1f}% "
            f"[{100 * low:.1f}, {100 * high:.1f}]"
        )


if __name__ == "__main__":
    main()
