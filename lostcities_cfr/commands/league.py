"""``python -m lostcities_cfr league``: round-robin duplicate matches and ratings with intervals.

Every pair of agents plays ``--games`` duplicate games on the same deals; each pair's games
are kept in ``--out``/pairs, so a second league in the same folder plays only pairs it has
not seen (an added agent's) and an interrupted one loses only the pair that was playing.
Ratings: Bradley-Terry on the Elo scale with 95% intervals (:mod:`lostcities_cfr.evaluation.ratings`).
Writes ``pairs.csv``, ``ratings.csv``, ``league.json``, ``win_rates.png`` and
``ratings.png`` to ``--out``; prints the ratings and the pairs, or ``--json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import numpy as np

from lostcities_cfr.commands.options import (
    add_json,
    add_rules,
    add_threads,
    agent_command_parser,
    use_threads,
)
from lostcities_cfr.errors import LostCitiesError
from lostcities_cfr.evaluation.league import Entrant, League, PairResult, play_league
from lostcities_cfr.game.rules import Rules

PAIR_COLUMNS = [
    "a",
    "b",
    "games",
    "wins",
    "draws",
    "losses",
    "win_rate",
    "win_rate_ci_low",
    "win_rate_ci_high",
    "score_diff",
    "score_diff_ci_low",
    "score_diff_ci_high",
    "seconds",
]


def build_parser() -> argparse.ArgumentParser:
    parser = agent_command_parser(
        "league",
        "Play every pair of agents in duplicate games and rate them (Bradley-Terry, Elo "
        "scale, 95%% intervals). Agents: SPEC or LABEL=SPEC.",
    )
    parser.add_argument("agents", nargs="+", metavar="AGENT", help="SPEC or LABEL=SPEC")
    parser.add_argument("--games", type=int, default=1000, help="games per pair (1000)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the deals and agents (0)")
    add_rules(parser)
    parser.add_argument(
        "--out", default="runs/league", help="folder of the pairs' games and results (runs/league)"
    )
    add_threads(parser)
    add_json(parser)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.games < 1:
        parser.error(f"--games {args.games}: play at least 1 game a pair")
    use_threads(parser, args.threads)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        parser.exit(2, f"{parser.prog}: error: --out {out} is a file; name a folder\n")
    start = time.perf_counter()
    try:
        entrants = [Entrant.parse(text) for text in args.agents]
        league = play_league(
            entrants,
            out,
            games=args.games,
            seed=args.seed,
            rules=Rules.preset(args.rules),
            progress=_print_progress,
        )
    except (LostCitiesError, OSError) as error:  # a bad spec, other rules, an unwritable folder
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    except KeyboardInterrupt:
        parser.exit(
            130,
            f"\ninterrupted: finished pairs are kept in {out / 'pairs'}; the "
            "same command plays the rest\n",
        )
    summary = write_results(league, out)
    played = sum(not p.cached for p in league.pairs)
    print(
        f"{len(league.pairs)} pairs ({played} played now, {len(league.pairs) - played} from "
        f"{out / 'pairs'}) in {time.perf_counter() - start:.0f} s",
        file=sys.stderr,
    )
    if args.json:
        json.dump(summary, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(format_table(league, out))


def write_results(league: League, out: Path) -> dict:
    """``pairs.csv``, ``ratings.csv``, ``league.json`` and the two PNGs; the JSON object."""
    pairs = [_pair_row(p) for p in league.pairs]
    with open(out / "pairs.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, PAIR_COLUMNS)
        writer.writeheader()
        writer.writerows(pairs)
    ratings = league.ratings.to_rows()
    specs = {e.label: e.spec for e in league.entrants}
    for row in ratings:
        row["spec"] = specs[row["label"]]
    with open(out / "ratings.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, list(ratings[0]))
        writer.writeheader()
        writer.writerows(ratings)
    summary = {
        "games_per_pair": league.games,
        "seed": league.seed,
        "rules": league.rules.preset_name(),
        "prior_games": league.ratings.prior_games,
        "ratings": ratings,
        "pairs": pairs,
    }
    (out / "league.json").write_text(json.dumps(summary, indent=2) + "\n")
    _plot(league, out)
    return summary


def format_table(league: League, out: Path) -> str:
    """The ratings, strongest first, then every pair."""
    rows = league.ratings.to_rows()
    width = max(len(row["label"]) for row in rows)
    lines = [
        f"ratings (Bradley-Terry, Elo scale, mean 0, 95% intervals; {league.games} games a pair):",
    ]
    for row in rows:
        lines.append(
            f"  {row['rank']:2d}. {row['label']:<{width}}  {row['elo']:+7.0f}  "
            f"[{row['elo_ci_low']:+.0f}, {row['elo_ci_high']:+.0f}]"
        )
    lines.append("pairs (a's win rate [95%], points per game [95%]):")
    pair_width = max(len(f"{p.a} vs {p.b}") for p in league.pairs)
    for p in league.pairs:
        low, high = p.win_rate_ci
        d_low, d_high = p.score_diff_ci
        lines.append(
            f"  {p.a + ' vs ' + p.b:<{pair_width}}  {100 * p.win_rate:5.1f}% "
            f"[{100 * low:5.1f}, {100 * high:5.1f}]  {p.score_diff:+7.2f} "
            f"[{d_low:+.2f}, {d_high:+.2f}]"
        )
    lines.append(f"files: {out}/ratings.csv, pairs.csv, league.json, win_rates.png, ratings.png")
    return "\n".join(lines)


def _pair_row(p: PairResult) -> dict[str, object]:
    return {
        "a": p.a,
        "b": p.b,
        "games": p.games,
        "wins": p.wins,
        "draws": p.draws,
        "losses": p.losses,
        "win_rate": p.win_rate,
        "win_rate_ci_low": p.win_rate_ci[0],
        "win_rate_ci_high": p.win_rate_ci[1],
        "score_diff": p.score_diff,
        "score_diff_ci_low": p.score_diff_ci[0],
        "score_diff_ci_high": p.score_diff_ci[1],
        "seconds": p.seconds,
    }


def _plot(league: League, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    ratings = league.ratings
    order = list(np.argsort(-ratings.elo, kind="stable"))  # strongest first
    labels = [ratings.labels[i] for i in order]
    position = {label: k for k, label in enumerate(labels)}
    K = len(labels)
    share = np.full((K, K), np.nan)  # [row agent, column agent]: row's wins + draws / 2
    for p in league.pairs:
        i, j = position[p.a], position[p.b]
        share[i, j] = p.score / p.games
        share[j, i] = 1 - share[i, j]

    size = 1.0 + 0.7 * K
    fig, ax = plt.subplots(figsize=(size + 1.5, size))
    image = ax.imshow(share, cmap="RdBu", vmin=0, vmax=1)
    for i in range(K):
        for j in range(K):
            if i != j:
                ax.text(j, i, f"{100 * share[i, j]:.0f}", ha="center", va="center", fontsize=8)
    ax.set_xticks(range(K), labels, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(K), labels, fontsize=8)
    ax.set_title(
        f"row's win rate against column, %\n(draws count half; {league.games} games a pair)",
        fontsize=9,
    )
    fig.colorbar(image, ax=ax, fraction=0.046)
    fig.tight_layout()
    fig.savefig(out / "win_rates.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 1.0 + 0.4 * K))
    elo = ratings.elo[order]
    ax.errorbar(
        elo,
        range(K),
        xerr=[elo - ratings.ci_low[order], ratings.ci_high[order] - elo],
        fmt="o",
        capsize=3,
    )
    ax.set_yticks(range(K), labels, fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0, color="grey", lw=0.6)
    ax.set_xlabel("rating (Bradley-Terry, Elo scale, mean 0), 95% interval")
    fig.tight_layout()
    fig.savefig(out / "ratings.png", dpi=110)
    plt.close(fig)


def _print_progress(done: int, total: int, result: PairResult) -> None:
    low, high = result.win_rate_ci
    how = "kept" if result.cached else f"{result.seconds:.1f} s"
    print(
        f"[{done}/{total}] {result.a} vs {result.b}: {100 * result.win_rate:.1f}% "
        f"[{100 * low:.1f}, {100 * high:.1f}] of {result.games} games ({how})",
        file=sys.stderr,
        flush=True,
    )
