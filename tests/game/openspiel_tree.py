"""OpenSpiel's whole tree of a small game, as OpenSpiel sees it: the oracle the batched
engines' whole-tree tests (test_poker.py, test_liars_dice.py) hold equal at every history."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Node:
    """One decision or terminal history of OpenSpiel's tree, as OpenSpiel sees it."""

    chance: tuple[int, ...]  # the chance outcomes so far, in OpenSpiel's order
    actions: tuple[int, ...]
    terminal: bool
    player: int
    legal: list[int]
    tensors: list[list[float]]  # information_state_tensor of player 0 and player 1
    info: str | None  # information_state_string of the player to move
    returns: list[float]


def walk_openspiel(game: Any) -> tuple[list[Node], dict[tuple[int, ...], float]]:
    """Every decision and terminal node of the pyspiel ``game``'s tree, and the probability
    of the chance outcomes leading to each (the product of ``chance_outcomes``')."""
    nodes: list[Node] = []
    paths: dict[tuple[int, ...], float] = {}

    def visit(state, chance: tuple[int, ...], prob: float, actions: tuple[int, ...]) -> None:
        if state.is_chance_node():
            for outcome, p in state.chance_outcomes():
                visit(state.child(outcome), (*chance, outcome), prob * p, actions)
            return
        paths[chance] = prob
        terminal = state.is_terminal()
        player = state.current_player()
        nodes.append(
            Node(
                chance,
                actions,
                terminal,
                player,
                [] if terminal else state.legal_actions(),
                [state.information_state_tensor(p) for p in range(2)],
                None if terminal else state.information_state_string(player),
                state.returns(),
            )
        )
        for action in nodes[-1].legal:
            visit(state.child(action), chance, prob, (*actions, action))

    visit(game.new_initial_state(), (), 1.0, ())
    return nodes, paths
