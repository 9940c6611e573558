"""Liar's Dice random-play walks: the batched engine against the OpenSpiel adapter, side by side.

Plays B freshly dealt games (each of ``--games``) of one Liar's Dice config to their ends, by
uniformly random legal actions, on the batched engine (``game/liars_dice.py``) and on
:class:`~lostcities_cfr.game.openspiel_adapter.OpenSpielGame` of the same config, through
the game protocol alone. A step of a walk asks ``legal_mask``, draws the actions
(``random_legal_actions``) and calls ``step(check=False)``; in the ``+encode`` mode it
also reads ``encode()`` of the player to move, as a traversal does at every node. Nodes
are the decisions of unfinished games. The batch steps in lockstep until its longest game
ends (random games of the default config last 3.4 decisions on average, the longest of
16,384 about 9), so the engine's figure grows with B while the adapter's, a Python loop
over the games, stays flat. The legal actions of Liar's Dice do not depend on the dice, so
one generator seed plays the same actions on both sides: the same games are stepped, and
the script checks that the node counts agree. Dealing (``new_batch``) is outside the
clock on both sides.

Each repeat times every (B, side, mode) once over ``--walks`` walks, back to back; a
figure is the median over ``--repeats``, a ratio the median of each repeat's ratio. The
issue's target is a ratio of at least 50. ``--json`` prints the same figures for machines.

    python scripts/bench/bench_liars_dice.py [--games 1024 16384] [--walks 4] [--numdice 1]
        [--dice-sides 6] [--bidding-rule reset-face] [--threads 1] [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time

import torch
from tables import render

from lostcities_cfr.agents import random_legal_actions
from lostcities_cfr.game.liars_dice import LiarsDice
from lostcities_cfr.game.openspiel_adapter import OpenSpielGame
from lostcities_cfr.game.protocol import Game

MODES = ("play", "play+encode")


def walk_seconds(game: Game, games: int, walks: int, encode: bool) -> tuple[float, int]:
    """Seconds and nodes of ``walks`` random-play walks of ``games`` games each."""
    seconds, nodes = 0.0, 0
    for walk in range(walks):
        batch = game.new_batch(games, seed=walk)  # dealt outside the clock
        generator = torch.Generator().manual_seed(walk)
        start = time.perf_counter()
        while True:
            live = ~batch.done  # [B] bool
            n = int(live.sum())
            if n == 0:
                break
            nodes += n
            if encode:
                batch.encode()
            batch.step(random_legal_actions(batch.legal_mask(), generator), check=False)
        seconds += time.perf_counter() - start
    return seconds, nodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, nargs="+", default=[1024, 16384], help="B each")
    parser.add_argument("--walks", type=int, default=4, help="walks per measurement")
    parser.add_argument("--numdice", type=int, default=1)
    parser.add_argument("--dice-sides", type=int, default=6)
    parser.add_argument("--bidding-rule", default="reset-face")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    engine = LiarsDice(args.numdice, args.dice_sides, args.bidding_rule)
    parameters = {
        "numdice": args.numdice,
        "dice_sides": args.dice_sides,
        "bidding_rule": args.bidding_rule,
    }
    sides = {"engine": engine, "adapter": OpenSpielGame("liars_dice", parameters)}

    for game in sides.values():  # warm-up
        for mode in MODES:
            walk_seconds(game, 64, 1, mode != "play")
    rates = {key: [] for key in itertools.product(args.games, sides, MODES)}
    nodes = {B: set() for B in args.games}
    for _ in range(args.repeats):
        for B, (side, game), mode in itertools.product(args.games, sides.items(), MODES):
            seconds, n = walk_seconds(game, B, args.walks, mode != "play")
            rates[B, side, mode].append(n / seconds)
            nodes[B].add(n)
    for B, counts in nodes.items():
        if len(counts) != 1:
            raise RuntimeError(f"B={B}: the two sides stepped different nodes {sorted(counts)}")
    rows = [
        {
            "games": B,
            "mode": mode,
            "nodes": min(nodes[B]),
            "engine_nodes_per_s": statistics.median(rates[B, "engine", mode]),
            "adapter_nodes_per_s": statistics.median(rates[B, "adapter", mode]),
            "ratio": statistics.median(
                e / a
                for e, a in zip(rates[B, "engine", mode], rates[B, "adapter", mode], strict=True)
            ),
        }
        for B, mode in itertools.product(args.games, MODES)
    ]
    result = {
        "game": {"name": "liars_dice", **parameters},
        "walks": args.walks,
        "threads": args.threads,
        "repeats": args.repeats,
        "target_ratio": 50,
        "rows": rows,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"liars_dice {parameters}: {args.walks} random-play walks of B games a measurement; "
        f"{args.threads} thread(s), median of {args.repeats}"
    )
    lines = [
        [
            f"B={r['games']} {r['mode']}",
            f"{r['nodes']:,}",
            f"{r['engine_nodes_per_s']:,.0f}",
            f"{r['adapter_nodes_per_s']:,.0f}",
            f"{r['ratio']:.1f}x",
        ]
        for r in rows
    ]
    headers = ["walks", "nodes", "engine nodes/s", "adapter nodes/s", "engine/adapter"]
    print(render(headers, lines))
    print("target: engine/adapter >= 50x")


if __name__ == "__main__":
    main()
