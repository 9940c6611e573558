"""Expert iteration's labelling rate: decisions labelled per second, batched against one game
at a time.

Plays ``--games`` self-play games of ``--base`` (an agent spec of a network policy, ``best``
by default) with the search of :class:`~lostcities_cfr.baselines.ExpertIteration` labelling
their decisions, twice on the same deals and seeds: *batched*, every game's decisions of a
step in one search call (:func:`~lostcities_cfr.baselines.expert_labels.label_games`, what
training runs), and *one game at a time*, one search call per game and decision
(:func:`~lostcities_cfr.baselines.expert_labels.label_one_at_a_time`). Both give the same
labels (the *same* column checks it); the rate is labels over wall-clock seconds of the
whole games, the network's own moves included. One warm-up game first.

    python scripts/bench/bench_labelling.py [--base best] [--games 16 64] [--worlds 16]
        [--top 4] [--label late|all] [--max-deck 20] [--threads 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from tables import render

from lostcities_cfr.baselines import ExpertIteration
from lostcities_cfr.baselines.expert_labels import Labels, label_games, label_one_at_a_time
from lostcities_cfr.game import GameBatch

SEED = 2026


def same_labels(a: Labels, b: Labels) -> bool:
    """Whether two labellings hold the same rows, compared in (game, step) order."""
    if len(a) != len(b):
        return False
    order_a = (a.game * 10_000 + a.step).argsort()
    order_b = (b.game * 10_000 + b.step).argsort()
    return torch.equal(a.played[order_a], b.played[order_b]) and torch.equal(
        a.values[order_a].nan_to_num(-1e9), b.values[order_b].nan_to_num(-1e9)
    )


def measure(model: ExpertIteration, games: int) -> dict[str, object]:
    """Both labellings of ``games`` games: their labels, seconds and labels per second."""
    batch = GameBatch.new(model.rules, games, seed=SEED)
    row: dict[str, object] = {"games": games}
    labelled = {}
    with torch.no_grad():
        label_games(model.search, GameBatch.new(model.rules, 1, seed=SEED + 1), SEED)  # warm-up
        for mode, label in (("batched", label_games), ("one_at_a_time", label_one_at_a_time)):
            start = time.perf_counter()
            labels, decisions = label(model.search, batch.clone(), SEED)
            seconds = time.perf_counter() - start
            labelled[mode] = labels
            row[mode] = {
                "labels": len(labels),
                "decisions": decisions,
                "seconds": seconds,
                "labels_per_s": len(labels) / seconds,
            }
    row["speedup"] = row["batched"]["labels_per_s"] / row["one_at_a_time"]["labels_per_s"]
    row["same"] = same_labels(labelled["batched"], labelled["one_at_a_time"])
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="best", help="agent spec of a network policy")
    parser.add_argument("--games", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--worlds", type=int, default=16)
    parser.add_argument("--top", type=int, default=4)
    parser.add_argument("--label", choices=["late", "all"], default="late")
    parser.add_argument("--max-deck", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = ExpertIteration(
        base=args.base,
        worlds=args.worlds,
        top=args.top,
        label=args.label,
        max_deck=args.max_deck,
    )
    rows = [measure(model, games) for games in args.games]
    settings = {
        "base": args.base,
        "worlds": args.worlds,
        "top": args.top,
        "label": args.label,
        "max_deck": args.max_deck,
        "threads": args.threads,
    }
    if args.json:
        print(json.dumps({"settings": settings, "rows": rows}))
        return
    print(
        f"labelling {args.base}'s self-play: {args.worlds} worlds, top {args.top}, "
        f"label {args.label} (max_deck {args.max_deck}), {args.threads} thread(s)"
    )
    lines = [
        [
            r["games"],
            r["batched"]["labels"],
            f"{r['batched']['seconds']:.1f}",
            f"{r['batched']['labels_per_s']:.1f}",
            f"{r['one_at_a_time']['seconds']:.1f}",
            f"{r['one_at_a_time']['labels_per_s']:.1f}",
            f"{r['speedup']:.1f}x",
            "yes" if r["same"] else "NO",
        ]
        for r in rows
    ]
    headers = [
        "games",
        "labels",
        "batched s",
        "batched labels/s",
        "one-at-a-time s",
        "one-at-a-time labels/s",
        "speedup",
        "same",
    ]
    print(render(headers, lines))


if __name__ == "__main__":
    main()
