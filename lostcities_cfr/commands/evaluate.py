"""``python -m lostcities_cfr evaluate``: one agent against one opponent in the arena.

Prints the table of :meth:`EvaluationResult.format_table` (or, with ``--json``,
the same figures as one JSON object). Agents are spec strings
(``docs/agents.md``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.commands.options import (
    add_json,
    add_rules,
    add_threads,
    agent_command_parser,
    use_threads,
)
from lostcities_cfr.errors import LostCitiesError
from lostcities_cfr.evaluation.arena import evaluate
from lostcities_cfr.evaluation.recording import GameRecorder, write_records
from lostcities_cfr.game.rules import Rules


def build_parser() -> argparse.ArgumentParser:
    parser = agent_command_parser(
        "evaluate",
        "Play an agent against an opponent in duplicate format (every deal twice, seats "
        "swapped) and report rates with 95% intervals.",
    )
    parser.add_argument("--agent", required=True, help="spec of the agent being measured")
    parser.add_argument("--opponent", default="random", help="spec of the opponent (random)")
    parser.add_argument(
        "--games", type=int, default=1000, help="games in all; odd counts round up (1000)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seeds the deals and agents (0)")
    add_rules(parser)
    parser.add_argument("--device", default="cpu", help="where the games run (cpu)")
    add_threads(parser, "the arena is many small tensor ops, which one thread runs fastest")
    add_json(parser)
    parser.add_argument(
        "--record",
        metavar="FILE",
        help="also write every game (deal seed, seats, actions, scores) to FILE as JSON lines, "
        "for `serve --replay FILE` (docs/serve.md)",
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.games < 1:
        parser.error(f"--games {args.games}: play at least 1 game")
    if args.games % 2:
        print(
            f"--games {args.games} rounded up to {args.games + 1}: "
            "every deal is played from both seats",
            file=sys.stderr,
        )
    use_threads(parser, args.threads)
    device = _device(parser, args.device)
    recorder = None
    if args.record is not None:
        _check_writable(parser, Path(args.record))  # before the games, not after them
        recorder = GameRecorder()
    try:
        # distinct seeds so that two copies of one random agent do not mirror each other
        agent = agent_from_spec(args.agent, seed=2 * args.seed + 1)
        opponent = agent_from_spec(args.opponent, seed=2 * args.seed + 2)
        result = evaluate(
            agent,
            opponent,
            args.games,
            rules=Rules.preset(args.rules),
            seed=args.seed,
            device=device,
            recorder=recorder,
        )
    except LostCitiesError as error:  # a bad spec or checkpoint, an agent of other rules
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    if recorder is not None:
        write_records(args.record, recorder.records)
    if args.json:
        json.dump(result.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(result.format_table())


def _check_writable(parser: argparse.ArgumentParser, path: Path) -> None:
    """A parser error unless ``path`` can be written (it is created with its folders, or
    emptied, now)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    except OSError as error:
        parser.error(f"--record {path}: cannot write it ({error.strerror})")


def _device(parser: argparse.ArgumentParser, name: str) -> torch.device:
    """``--device`` as a torch device that exists on this machine (else a parser error)."""
    try:
        device = torch.device(name)
    except RuntimeError:
        parser.error(f"--device {name!r} is not a device; expected cpu, cuda or cuda:N")
    if device.type == "cuda" and (
        not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count()
    ):
        parser.error(
            f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s); "
            "use --device cpu"
        )
    if device.type not in ("cpu", "cuda"):
        parser.error(f"--device {name}: the arena runs on cpu or cuda")
    return device
