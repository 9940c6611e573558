"""Our policies in OpenSpiel's own terms: a ``TabularPolicy`` over every information state,
OpenSpiel's NashConv of it, and the JSON export that lets anyone check our figures.

A policy here is what the exact walk takes (``policy(features [n, F], legal [n, A]) ->
probabilities [n, A]``, or one per seat), and the features are OpenSpiel's
``information_state_tensor`` (Kuhn and Leduc poker's engines encode exactly that, and the
OpenSpiel adapter passes it through), so OpenSpiel's state of each information state is all
we need to ask the policy. Needs ``open_spiel`` (``pip install open_spiel``; a development
dependency of this project).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lostcities_cfr.cfr.game_tree import JointPolicy
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game.protocol import Game


def _openspiel() -> tuple[Any, Any]:
    try:
        from open_spiel.python import policy as openspiel_policy
        from open_spiel.python.algorithms import exploitability as openspiel_exploitability
    except ImportError:
        raise ConfigError(
            "this needs OpenSpiel: pip install open_spiel (and dm-tree for its PyTorch code)"
        ) from None
    return openspiel_policy, openspiel_exploitability


def _pyspiel_game(game: Game) -> Any:
    """``game`` as OpenSpiel's game, or a ``ConfigError`` naming it."""
    found = game.openspiel_game()
    if found is None:
        raise ConfigError(f"{game.name} is not an OpenSpiel game (OpenSpiel cannot check it)")
    return found


def tabular_policy(game: Any, policy: JointPolicy) -> Any:
    """OpenSpiel's ``TabularPolicy`` of ``game`` (a pyspiel game) holding ``policy`` at
    every information state, asked once per seat in one batch."""
    openspiel_policy, _ = _openspiel()
    table = openspiel_policy.TabularPolicy(game)
    n_actions = game.num_distinct_actions()
    for player in range(game.num_players()):
        rows = [
            (index, state)
            for index, state in enumerate(table.states)
            if state.current_player() == player
        ]
        if not rows:
            continue
        features = torch.tensor(
            np.array([state.information_state_tensor(player) for _, state in rows]),
            dtype=torch.float32,
        )  # [n, F]
        legal = torch.zeros(len(rows), n_actions, dtype=torch.bool)  # [n, A]
        for row, (_, state) in enumerate(rows):
            legal[row, state.legal_actions()] = True
        seat_policy = policy if callable(policy) else policy[player]
        with torch.no_grad():
            probs = seat_policy(features, legal).detach().to("cpu", torch.float64)
        probs = torch.where(legal, probs, 0.0)
        probs = probs / probs.sum(1, keepdim=True)  # float32 outputs, summed in float64
        table.action_probability_array[[index for index, _ in rows]] = probs.numpy()
    return table


def openspiel_nash_conv(game: Game, policy: JointPolicy) -> float:
    """OpenSpiel's ``exploitability.nash_conv`` of ``policy`` on ``game``."""
    spiel_game = _pyspiel_game(game)
    _, openspiel_exploitability = _openspiel()
    return float(openspiel_exploitability.nash_conv(spiel_game, tabular_policy(spiel_game, policy)))


def export_policy(game: Game, policy: JointPolicy, path: str | Path) -> int:
    """Write ``policy`` as JSON, ``{information_state_string: [p(a) for every action id]}``
    over every information state of ``game``; the number of states written.

    OpenSpiel checks it with ``policy.TabularPolicy`` filled from the file and
    ``exploitability.nash_conv`` (``docs/games.md`` shows the five lines).
    """
    table = tabular_policy(_pyspiel_game(game), policy)
    exported = {
        key: table.action_probability_array[index].tolist()
        for key, index in table.state_lookup.items()
    }
    Path(path).write_text(json.dumps(exported, indent=1, sort_keys=True) + "\n")
    return len(exported)
