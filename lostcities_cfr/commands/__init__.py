"""The command line: ``python -m lostcities_cfr <command> ...``.

``fit`` and ``validate`` go to LightningCLI (configs, ``--print_config``, dotted
overrides); the other commands are small argparse programs. Each command is
imported only when it runs, so ``--help`` stays fast.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module

# command -> ("module", "function taking argv"), imported lazily.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "fit": (
        "lostcities_cfr.commands.fit",
        "fit",
        "train a Deep CFR agent: fit --config configs/quickstart.yaml",
    ),
    "validate": (
        "lostcities_cfr.commands.fit",
        "validate",
        "evaluate a checkpoint: validate --config CONFIG --ckpt_path PATH",
    ),
    "evaluate": (
        "lostcities_cfr.commands.evaluate",
        "main",
        "play an agent against an opponent in duplicate games; rates with 95% intervals",
    ),
    "play": ("lostcities_cfr.commands.play", "main", "play against an agent in the terminal"),
    "serve": (
        "lostcities_cfr.commands.serve",
        "main",
        "a local web page: play an agent and see its reasoning; replay evaluate --record files",
    ),
    "exploit": (
        "lostcities_cfr.commands.exploit",
        "main",
        "learn a best response to an agent: its winnings bound the agent's exploitability",
    ),
    "league": (
        "lostcities_cfr.commands.league",
        "main",
        "round-robin duplicate matches between agents; ratings with 95% intervals",
    ),
    "nashconv": (
        "lostcities_cfr.commands.nashconv",
        "main",
        "exact NashConv of an agent on a small game (kuhn_poker, leduc_poker, tiny, OpenSpiel)",
    ),
    "sweep": (
        "lostcities_cfr.commands.sweep",
        "main",
        "a config over seeds and settings as one Optuna study; resumable, shared by workers",
    ),
    "report": (
        "lostcities_cfr.commands.report",
        "main",
        "plots of a run's metrics.csv, or a sweep's figures over seeds with 95% intervals",
    ),
}


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"unknown command {command!r}; expected one of: {', '.join(COMMANDS)}\n")
        print(_usage())
        raise SystemExit(2)
    module, function, _ = COMMANDS[command]
    run: Callable[[list[str]], None] = getattr(import_module(module), function)
    run(rest)


def _usage() -> str:
    lines = ["usage: python -m lostcities_cfr <command> [options]", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    return "\n".join(lines)
