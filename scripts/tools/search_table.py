"""Strength and cost of agents (searches above all): duplicate games and milliseconds per move.

Each ``--agent NAME=SPEC`` (any agent spec: ``search:best:worlds=32``, ``best``,
``search:ckpt:runs/x/checkpoints/last.ckpt``...) plays ``--games`` duplicate games against
every ``--opponent`` on the same deals (``--seed``), and is timed two ways on the threads given
(``--threads``, 1 by default):

- *play*: one move at a time, as ``play`` asks for it: ``act`` on a single game at each of
  ``--positions`` positions spread over a round (the decisions of heuristic:balanced against
  itself on fixed deals), mean and slowest milliseconds;
- *match*: milliseconds per decision inside the matches (the agent's ``act`` time over the
  decisions it made, every game of the batch at once), which sets how long 1000 games take.

Prints a markdown table (win rate [95% interval] (score difference per game) per opponent),
or ``--json``; ``--plot FILE`` draws strength against match milliseconds per decision, one
panel per opponent, a line through the agents whose names share the part before ``@``
(name them ``search:best@16``, ``search:best@32``... to draw a budget curve).
``--from-json FILE...`` prints and plots saved results without playing (merging files, so
long runs may go one agent or one opponent at a time).

    python scripts/tools/search_table.py --agent 'search:best@32=search:best:worlds=32' \\
        --opponent best --opponent heuristic:balanced --json > search_best.json
    python scripts/tools/search_table.py --from-json search_*.json --plot docs/figures/search.png
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from strength_curves import save_panels  # this folder: python scripts/tools/search_table.py

from lostcities_cfr import GameBatch, Rules, agent_from_spec, evaluate
from lostcities_cfr.agents import Agent
from lostcities_cfr.errors import AgentSpecError

PROGRESS_EVERY_S = 30.0


class TimedAgent:
    """Forwards ``act`` to an agent and counts its seconds and decisions (live games)."""

    def __init__(self, agent: Agent, label: str) -> None:
        self.agent = agent
        self.label = label
        self.seconds = 0.0
        self.decisions = 0
        self._shown = time.perf_counter()

    def __getattr__(self, name: str) -> Any:  # name, rules: the arena reads them
        return getattr(self.agent, name)

    def act(self, batch: GameBatch) -> torch.Tensor:
        start = time.perf_counter()
        actions = self.agent.act(batch)
        self.seconds += time.perf_counter() - start
        self.decisions += int((~batch.done).sum())
        if time.perf_counter() - self._shown > PROGRESS_EVERY_S:
            self._shown = time.perf_counter()
            print(
                f"  {self.label}: {self.decisions} decisions, {self.seconds:.0f} s", file=sys.stderr
            )
        return actions


def timing_positions(count: int, seed: int) -> list[GameBatch]:
    """``count`` single-game positions spread over rounds of heuristic:balanced self-play."""
    heuristic = agent_from_spec("heuristic:balanced")
    batch = GameBatch.new(Rules.classic(), 4, seed=seed)
    states = []
    while not bool(batch.done.all()):
        states += [batch.select([b]) for b in range(4) if not bool(batch.done[b])]
        batch.step(heuristic.act(batch))
    step = max(1, len(states) // count)
    return states[::step][:count]


def play_milliseconds(agent: Agent, positions: list[GameBatch]) -> list[float]:
    """Milliseconds of one ``act`` call on each single-game position."""
    times = []
    for position in positions:
        start = time.perf_counter()
        agent.act(position.clone())
        times.append(1000 * (time.perf_counter() - start))
    return times


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Play every agent against every opponent; the figures by agent name."""
    positions = timing_positions(args.positions, args.seed)
    agents = {}
    for entry in args.agent:
        name, _, spec = entry.partition("=")
        if not spec:
            raise SystemExit(f"--agent {entry!r}: expected NAME=SPEC")
        row: dict[str, Any] = {"spec": spec, "opponents": {}}
        times = play_milliseconds(agent_from_spec(spec, seed=args.seed), positions)
        row["play_ms_mean"] = sum(times) / len(times)
        row["play_ms_max"] = max(times)
        for opponent in args.opponent:
            timed = TimedAgent(agent_from_spec(spec, seed=args.seed), f"{name} vs {opponent}")
            result = evaluate(
                timed, agent_from_spec(opponent, seed=args.seed + 1), args.games, seed=args.seed
            )
            rounds = result.rounds
            row["opponents"][opponent] = {
                "win_rate": rounds.win_rate,
                "ci": list(rounds.win_rate_ci),
                "score_diff": rounds.score_diff,
                "games": result.games,
                "seconds": result.seconds,
                "match_ms_per_decision": 1000 * timed.seconds / max(timed.decisions, 1),
            }
            print(
                f"{name} vs {opponent}: {100 * rounds.win_rate:.1f}% in {result.seconds:.0f} s",
                file=sys.stderr,
            )
        agents[name] = row
    return {"games": args.games, "seed": args.seed, "threads": args.threads, "agents": agents}


def table(results: dict[str, Any]) -> str:
    """The results as a markdown table, one row per agent."""
    agents = results["agents"]
    opponents = list(dict.fromkeys(o for row in agents.values() for o in row["opponents"]))
    lines = [
        "| agent | play ms/move (mean, max) | match ms/decision | "
        + " | ".join(f"vs {o}" for o in opponents)
        + " |",
        "|---|---:|---:|" + "---:|" * len(opponents),
    ]
    for name, row in agents.items():
        matches = row["opponents"]
        match_ms = [m["match_ms_per_decision"] for m in matches.values()]
        cells = []
        for o in opponents:
            m = matches.get(o)
            cells.append(
                "unmeasured"
                if m is None
                else f"{100 * m['win_rate']:.1f}% [{100 * m['ci'][0]:.1f}, "
                f"{100 * m['ci'][1]:.1f}] ({m['score_diff']:+.1f}, {m['games']} games)"
            )
        match_cell = f"{sum(match_ms) / len(match_ms):.1f}" if match_ms else "unmeasured"
        lines.append(
            f"| {name} | {row['play_ms_mean']:.0f}, {row['play_ms_max']:.0f} | {match_cell} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines)


def plot(results: dict[str, Any], out: Path) -> None:
    """Win rate against match milliseconds per decision, a panel per opponent (docstring)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    agents = results["agents"]
    opponents = list(dict.fromkeys(o for row in agents.values() for o in row["opponents"]))
    families = list(dict.fromkeys(name.partition("@")[0] for name in agents))
    fig, axes = plt.subplots(
        1, len(opponents), figsize=(5 * len(opponents), 4), squeeze=False, sharey=True
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, opponent in zip(axes[0], opponents, strict=True):
        for n, family in enumerate(families):
            points = sorted(
                (row["opponents"][opponent]["match_ms_per_decision"], row["opponents"][opponent])
                for name, row in agents.items()
                if name.partition("@")[0] == family and opponent in row["opponents"]
            )
            if not points:
                continue
            x = [ms for ms, _ in points]
            y = [m["win_rate"] for _, m in points]
            error = [[m["win_rate"] - m["ci"][0] for _, m in points]]
            error.append([m["ci"][1] - m["win_rate"] for _, m in points])
            ax.errorbar(
                x, y, yerr=error, marker="o", capsize=3, color=colors[n % len(colors)], label=family
            )
        ax.axhline(0.5, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xscale("log")
        ax.set_title(f"vs {opponent}")
        ax.set_xlabel("match milliseconds per decision (one thread)")
    axes[0, 0].set_ylabel("rounds won (95% interval)")
    save_panels(fig, axes, out)


def merged(paths: list[Path]) -> dict[str, Any]:
    """Saved ``--json`` results in one: an agent met in several files keeps its first play
    timings and gathers its opponents (a later result against the same opponent wins)."""
    agents: dict[str, Any] = {}
    for path in paths:
        for name, row in json.loads(path.read_text())["agents"].items():
            mine = agents.setdefault(name, {**row, "opponents": {}})
            mine["opponents"].update(row["opponents"])
    return {"agents": agents}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", action="append", default=[], help="NAME=SPEC, repeatable")
    parser.add_argument("--opponent", action="append", default=[], help="agent spec, repeatable")
    parser.add_argument("--games", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--positions", type=int, default=20, help="single moves timed")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--plot", type=Path, default=None, help="write the PNG here")
    parser.add_argument("--from-json", type=Path, nargs="+", default=None, help="saved results")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.from_json:
        results = merged(args.from_json)
    elif args.agent:
        try:
            results = measure(args)
        except AgentSpecError as error:
            parser.exit(2, f"{parser.prog}: error: {error}\n")
    else:
        parser.error("give --agent NAME=SPEC (with --opponent SPEC) or --from-json FILE")
    if args.plot is not None:
        plot(results, args.plot)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(table(results))


if __name__ == "__main__":
    main()
