"""The strength table: agents against named opponents, duplicate games, Wilson 95% intervals.

Each ``--agent NAME=SPEC`` (any agent spec: ``ckpt:runs/x/checkpoints/best.ckpt``,
``ckpt:PATH:average``, ``ckpt:PATH:sdcfr:greedy``, ``heuristic:balanced``...) plays
``--games`` duplicate games (each deal from both seats) against every ``--opponent``, all on
the same deals (``--seed``). Prints a markdown table (win rate [95% interval], score
difference per game) that ``docs/strength.md`` pastes, or ``--json``.

    python scripts/tools/strength_table.py --agent full=ckpt:runs/classic_strong/checkpoints/best.ckpt \\
        --opponent discard-only --opponent heuristic:cautious --opponent heuristic:balanced
"""

from __future__ import annotations

import argparse
import json

import torch

from lostcities_cfr import agent_from_spec, evaluate

DEFAULT_OPPONENTS = ("random", "discard-only", "heuristic:cautious", "heuristic:balanced")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", action="append", required=True, help="NAME=SPEC, repeatable")
    parser.add_argument("--opponent", action="append", help="agent spec, repeatable")
    parser.add_argument("--games", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    opponents = args.opponent or list(DEFAULT_OPPONENTS)
    table = {}
    for entry in args.agent:
        name, _, spec = entry.partition("=")
        table[name] = {"spec": spec}
        for opponent in opponents:
            result = evaluate(
                agent_from_spec(spec, seed=args.seed),
                agent_from_spec(opponent, seed=args.seed + 1),
                args.games,
                seed=args.seed,
            )
            rounds = result.rounds
            table[name][opponent] = {
                "win_rate": rounds.win_rate,
                "ci": list(rounds.win_rate_ci),
                "score_diff": rounds.score_diff,
                "games": result.games,
                "expeditions": result.agent_style.expeditions,
            }
    if args.json:
        print(json.dumps({"games": args.games, "seed": args.seed, "agents": table}, indent=2))
        return
    print("| agent | " + " | ".join(opponents) + " |")
    print("|---|" + "---:|" * len(opponents))
    for name, row in table.items():
        cells = [
            f"{100 * row[o]['win_rate']:.1f}% [{100 * row[o]['ci'][0]:.1f}, "
            f"{100 * row[o]['ci'][1]:.1f}] ({row[o]['score_diff']:+.1f})"
            for o in opponents
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
