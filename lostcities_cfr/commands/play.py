"""``python -m lostcities_cfr play``: a person plays Lost Cities against any agent.

The game runs on the reference engine; the agent decides through
:func:`~lostcities_cfr.agents.base.act_single`, so it sees exactly what it
would see in the arena. The board shows what the person may know (own hand,
both expeditions, the full discard piles, the deck count, the opponent's cards
known from pile draws), legal moves are numbered, bad input asks again, and the
end of each round explains every expedition's score and what the agent's decisions cost
(milliseconds a decision: ``search:best`` thinks, a network answers at once).

Input and output go through ``read`` and ``write`` callables so that tests can
script a whole game.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from lostcities_cfr.agents import (
    Agent,
    act_single,
    agent_from_spec,
    agent_name,
)
from lostcities_cfr.commands.options import add_rules, agent_command_parser
from lostcities_cfr.errors import LostCitiesError
from lostcities_cfr.evaluation.arena import check_agent_rules
from lostcities_cfr.game.reference import GameState
from lostcities_cfr.game.rules import COLOR_NAMES, Rules
from lostcities_cfr.game.text import (
    describe_agent_move,
    describe_moves,
    explain_expedition,
    render_board,
)

Read = Callable[[str], str]
Write = Callable[[str], None]

HELP = """\
Each turn: first play a card onto your expedition of its colour or discard it
onto that colour's pile, then draw from the deck or take the top of a pile (not
the one you just discarded to). An expedition's cards must rise; wagers (*) go
before any number and multiply the result. Expedition score:
(sum of cards - {cost}) x (1 + wagers), plus {bonus} with {threshold}+ cards.
The round ends when the deck runs out. Enter a move's number; 'b' shows the
board again, 'q' quits."""


class QuitGame(Exception):
    """The person asked to stop (``q`` or end of input)."""


def ask_move(state: GameState, read: Read, write: Write, board: str) -> int:
    """The person's choice among the legal actions; asks again until the input is valid."""
    legal = state.legal_actions()
    write(describe_moves(state))
    while True:
        try:
            answer = read(f"Your move (1-{len(legal)}, b board, h help, q quit): ").strip()
        except EOFError:
            raise QuitGame from None
        if answer.lower() in ("q", "quit", "exit"):
            raise QuitGame
        if answer.lower() in ("b", "board"):
            write(board)
            write(describe_moves(state))
            continue
        if answer.lower() in ("h", "help", "?"):
            rules = state.rules
            write(
                HELP.format(
                    cost=rules.expedition_cost,
                    bonus=rules.bonus,
                    threshold=rules.bonus_threshold,
                )
            )
            continue
        # isdecimal, not isdigit: int() refuses digits such as '²' that isdigit accepts.
        if answer.isdecimal() and 1 <= int(answer) <= len(legal):
            return legal[int(answer) - 1]
        write(f"{answer!r} is not a move: enter a number from 1 to {len(legal)}.")


def play_round(
    state: GameState, agent: Agent, you: int, read: Read, write: Write, round_label: str
) -> tuple[int, int]:
    """Play one round to its end; (your score, the agent's score)."""
    thinking: list[float] = []  # seconds of each of the agent's decisions
    while not state.is_terminal:
        if state.current_player == you:
            board = render_board(state, you, round_label)
            if state.phase == 0:
                write("")
                write(board)
            legal = state.legal_actions()
            # With nothing to choose (the deck is the only draw), do not ask.
            action = legal[0] if len(legal) == 1 else ask_move(state, read, write, board)
            if action == state.rules.draw_deck_action:
                write(f"You drew {state.rules.card_name(state.deck[0])}.")
        else:
            start = time.perf_counter()
            action = act_single(agent, state)
            thinking.append(time.perf_counter() - start)
            write(describe_agent_move(state, action))
        state.apply(action)
    scores = explain_scores(state, you, write)
    if thinking:
        write(
            f"The opponent took {1000 * sum(thinking) / len(thinking):.1f} ms a decision "
            f"(slowest {1000 * max(thinking):.1f} ms, {len(thinking)} decisions)."
        )
    return scores


def explain_scores(state: GameState, you: int, write: Write) -> tuple[int, int]:
    """Write every expedition's score for both players; return (yours, theirs)."""
    rules = state.rules
    scores = state.scores()
    write("")
    why = "the deck is empty" if not state.deck else f"the limit of {rules.max_turns} decisions"
    write(f"Round over after {state.turn // 2} turns: {why}.")
    for who, player in (("You", you), ("Opponent", 1 - you)):
        write(f"{who}: {scores[player]}")
        for color in range(rules.n_colors):
            ranks = state.expeditions[player][color]
            write(f"  {COLOR_NAMES[color]:7}{explain_expedition(rules, color, ranks)}")
    return scores[you], scores[1 - you]


def _verdict(yours: int, theirs: int) -> str:
    if yours > theirs:
        return f"You win, {yours} to {theirs}."
    if yours < theirs:
        return f"The opponent wins, {theirs} to {yours}."
    return f"A draw, {yours} each."


def default_opponent(rules: str) -> str:
    """The agent a person plays unless told: ``best``, which plays the classic rules only;
    ``heuristic:balanced`` under other rules."""
    return "best" if rules == "classic" else "heuristic:balanced"


def build_parser() -> argparse.ArgumentParser:
    parser = agent_command_parser("play", "Play Lost Cities against an agent in the terminal.")
    parser.add_argument(
        "--opponent",
        default=None,
        help="agent spec (default: best, the strongest agent shipped with the package, which "
        "plays the classic rules; heuristic:balanced under other rules)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        choices=(1, 3),
        default=1,
        help="one round, or a match of three with scores summed (1)",
    )
    parser.add_argument(
        "--seat",
        type=int,
        choices=(0, 1),
        default=0,
        help="0: you move first in the first round; seats alternate in a match (0)",
    )
    parser.add_argument("--seed", type=int, default=None, help="seeds the deals and the agent")
    add_rules(parser)
    return parser


def main(argv: list[str] | None = None, read: Read = input, write: Write = print) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    rules = Rules.preset(args.rules)
    if args.opponent is None:
        args.opponent = default_opponent(args.rules)
    try:
        agent = agent_from_spec(args.opponent, seed=args.seed)
        check_agent_rules(agent, rules)  # before the first move, not at the agent's first
    except LostCitiesError as error:  # a bad spec or checkpoint, an agent of other rules
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    write(f"Lost Cities against {agent_name(agent)}. Enter 'h' at a prompt for the rules.")
    totals = [0, 0]
    try:
        for round_index in range(args.rounds):
            you = (args.seat + round_index) % 2
            seed = None if args.seed is None else args.seed + round_index
            label = f"Round {round_index + 1} of {args.rounds}"
            write(f"\n{label}: {'you move' if you == 0 else 'the opponent moves'} first.")
            yours, theirs = play_round(GameState.new(rules, seed), agent, you, read, write, label)
            write(_verdict(yours, theirs))
            totals[0] += yours
            totals[1] += theirs
    except QuitGame:
        write("\nGame abandoned.")
        return
    if args.rounds > 1:
        write(f"\nMatch over. {_verdict(*totals)}")
