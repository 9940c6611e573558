"""What the agent commands (``evaluate``, ``exploit``, ``league``, ``play``, ``serve``) share:
their parser's frame and the options each of them reads the same way, defined once so that
``--help`` and the errors read alike across commands."""

from __future__ import annotations

import argparse

import torch

from lostcities_cfr.agents import describe_agent_specs
from lostcities_cfr.game.rules import Rules


def agent_command_parser(command: str, description: str) -> argparse.ArgumentParser:
    """The parser of ``python -m lostcities_cfr COMMAND``, its help ending with the agent-spec
    grammar (every one of these commands takes agent specs)."""
    return argparse.ArgumentParser(
        prog=f"python -m lostcities_cfr {command}",
        description=description,
        epilog=describe_agent_specs(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_rules(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rules", choices=Rules.presets(), default="classic", help="variant")


def add_threads(parser: argparse.ArgumentParser, why: str = "") -> None:
    """``--threads`` (1), read by :func:`use_threads`."""
    parser.add_argument(
        "--threads", type=int, default=1, help=f"torch CPU threads (1{': ' + why if why else ''})"
    )


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")


def use_threads(parser: argparse.ArgumentParser, threads: int) -> None:
    """Refuse ``--threads`` below 1 (exit 2, naming it), else run torch on that many."""
    if threads < 1:
        parser.error(f"--threads {threads}: use at least 1 thread")
    torch.set_num_threads(threads)
