"""``python -m lostcities_cfr serve``: the page on a local server (``docs/serve.md``)."""

from __future__ import annotations

import argparse
import socket
import sys

import uvicorn

from lostcities_cfr.agents import agent_from_spec, agent_name
from lostcities_cfr.commands.options import (
    add_rules,
    add_threads,
    agent_command_parser,
    use_threads,
)
from lostcities_cfr.commands.play import default_opponent
from lostcities_cfr.errors import LostCitiesError
from lostcities_cfr.evaluation.arena import check_agent_rules
from lostcities_cfr.game.rules import Rules
from lostcities_cfr.serve.app import create_app
from lostcities_cfr.serve.replays import ReplayLibrary

LOCAL_HOSTS = ("127.0.0.1", "localhost")


def build_parser() -> argparse.ArgumentParser:
    parser = agent_command_parser(
        "serve",
        "A local web page: play an agent, with its reasoning at every decision, and replay "
        "recorded evaluation games (evaluate --record FILE).",
    )
    parser.add_argument(
        "--agent",
        default=None,
        help="the agent you play (default: best under the classic rules, heuristic:balanced "
        "under others)",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (127.0.0.1: this machine only; anything else lets the "
        "network in, and the server has no login)",
    )
    parser.add_argument("--port", type=int, default=8000, help="port (8000; 0 picks a free one)")
    parser.add_argument("--replay", metavar="FILE", help="games written by evaluate --record")
    add_rules(parser)
    parser.add_argument("--seed", type=int, default=None, help="seeds the agents' sampling")
    add_threads(parser)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port {args.port}: a port is 0..65535")
    use_threads(parser, args.threads)
    rules = Rules.preset(args.rules)
    try:
        agent = agent_from_spec(args.agent or default_opponent(args.rules), seed=args.seed)
        check_agent_rules(agent, rules)
        replays = None
        if args.replay is not None:
            replays = ReplayLibrary(args.replay)
            replays.load_agents()  # now, not at the first step
    except LostCitiesError as error:  # a bad spec, checkpoint or record file
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    port = _free_port(parser, args.host, args.port)
    local = args.host in LOCAL_HOSTS
    app = create_app(
        agent, rules, replays, allowed_hosts=(*LOCAL_HOSTS, args.host) if local else ("*",)
    )
    shown = f"{len(replays.records)} recorded games of {args.replay}, " if replays else ""
    print(f"Lost Cities against {agent_name(agent)}, {shown}on http://{args.host}:{port}/")
    if not local:
        print(f"listening on {args.host}: anyone who can reach it can play", file=sys.stderr)
    print("Ctrl-C stops the server.", flush=True)
    uvicorn.run(app, host=args.host, port=port, log_level="warning")


def _free_port(parser: argparse.ArgumentParser, host: str, port: int) -> int:
    """``port`` (a free one for 0) once a trial bind shows that it can be listened on; else a
    one-line error. Uvicorn binds it again itself: a socket handed to it would lose its TCP
    protocol number, and with it TCP_NODELAY, which costs every answer a 40 ms delayed ACK."""
    try:
        with socket.create_server((host, port)) as trial:
            return trial.getsockname()[1]
    except OSError as error:
        parser.exit(2, f"{parser.prog}: error: --host {host} --port {port}: {error}\n")
