"""``python -m lostcities_cfr nashconv``: an agent's exact NashConv on a small game.

NashConv is ``BR_0(sigma_1) + BR_1(sigma_0)``, the two best responses' gains together,
computed by walking the whole tree (``cfr/exploitability.py``); OpenSpiel reports the same
number (``exploitability.nash_conv``) and the tests hold the two equal. Games: OpenSpiel's
names (``kuhn_poker``, ``leduc_poker`` on our batched engines; any other two-player zero-sum
OpenSpiel game through the adapter, measured by OpenSpiel's own walk) and ``tiny`` for tiny
Lost Cities. ``--export-policy FILE`` writes the policy keyed by OpenSpiel's
``information_state_string`` so that OpenSpiel's code can check the figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from lostcities_cfr.cfr.exploitability import exact_nash_conv, game_tree
from lostcities_cfr.cfr.game_tree import JointPolicy
from lostcities_cfr.cfr.openspiel_oracle import export_policy
from lostcities_cfr.cfr.regret_matching import uniform_strategy
from lostcities_cfr.commands.options import add_json, add_threads, use_threads
from lostcities_cfr.errors import ConfigError, LostCitiesError
from lostcities_cfr.game.names import game_from_name
from lostcities_cfr.game.protocol import Game
from lostcities_cfr.training.checkpoint import load_model, peel_flags

USAGE = "uniform | ckpt:PATH[:average|:current|:sdcfr|:policy][:greedy]"
POLICY_FLAGS = ("average", "current", "sdcfr", "policy")  # DeepCFR's; PPO's one


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lostcities_cfr nashconv",
        description="Exact NashConv of an agent on a small game, by a full tree walk.",
        epilog=f"agent specs: {USAGE} (uniform: every legal action alike; ckpt: a DeepCFR "
        "checkpoint's deployed policy, or the one named, sampled or greedy)",
    )
    parser.add_argument("--agent", required=True, help=f"the agent: {USAGE}")
    parser.add_argument(
        "--game",
        help="kuhn_poker, leduc_poker, any OpenSpiel game, or tiny (Lost Cities); "
        "default: the checkpoint's game",
    )
    add_json(parser)
    parser.add_argument(
        "--export-policy",
        metavar="FILE",
        help="also write the policy as JSON: OpenSpiel's information_state_string of every "
        "information state -> its action probabilities by OpenSpiel action id",
    )
    add_threads(parser, "the walk's policy calls are small batches")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    use_threads(parser, args.threads)
    start = time.perf_counter()
    try:
        game, policy = _agent_policy(parser, args.agent, args.game)
        if args.export_policy and game.openspiel_game() is None:
            parser.error(
                f"--export-policy keys the policy by OpenSpiel's information states; "
                f"{game.name} is not an OpenSpiel game"
            )
        value = exact_nash_conv(game, policy)
        uniform = exact_nash_conv(game, uniform_strategy)
        sets = _information_sets(game)
        exported = export_policy(game, policy, args.export_policy) if args.export_policy else None
    except LostCitiesError as error:  # a bad spec, checkpoint or game; a game too large
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    result = {
        "game": game.name,
        "agent": args.agent,
        "nash_conv": value,
        "exploitability": value / 2,
        "uniform_nash_conv": uniform,
        "information_sets": sets,
        "exported_states": exported,
        "seconds": round(time.perf_counter() - start, 3),
    }
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    print(
        f"{args.agent} on {game.name}: NashConv {value:.6g} (exploitability {value / 2:.6g}; "
        f"uniform play {uniform:.6g})"
    )
    if exported is not None:
        print(f"policy of {exported} information states written to {args.export_policy}")


def _agent_policy(
    parser: argparse.ArgumentParser, spec: str, game_name: str | None
) -> tuple[Game, JointPolicy]:
    """The game measured and the agent's policy on it; a checkpoint of another game than
    ``--game`` names is refused."""
    if spec in ("uniform", "random"):
        if game_name is None:
            parser.error(f"--agent {spec} needs --game (a checkpoint knows its game)")
        return game_from_name(game_name), uniform_strategy
    kind, _, rest = spec.partition(":")
    if kind != "ckpt" or not rest:
        parser.error(f"--agent {spec!r}: expected {USAGE}")
    path, chosen = peel_flags(rest.split(":"), {*POLICY_FLAGS, "greedy"})
    if not Path(path).is_file():
        parser.error(f"--agent {spec!r}: no checkpoint file at {path!r}")
    model = load_model(path)
    own = getattr(model, "game", None)
    if own is None:
        parser.error(f"--agent {spec!r}: {type(model).__name__} checkpoints have no exact policy")
    game = own if game_name is None else game_from_name(game_name)
    if game.name != own.name:
        parser.exit(
            2, f"{parser.prog}: error: checkpoint {path} plays {own.name}, not {game.name}\n"
        )
    policy = next((p for p in POLICY_FLAGS if p in chosen), None)
    return game, model.exact_policy(policy, greedy="greedy" in chosen)


def _information_sets(game: Game) -> int | None:
    """How many information sets our walk found; None where OpenSpiel's walk measured."""
    try:
        return game_tree(game).n_recall_infosets
    except ConfigError:
        return None
