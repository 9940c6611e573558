"""Our policies in OpenSpiel's own terms: a ``TabularPolicy`` over every information state,
OpenSpiel's NashConv of it, and the JSON export that lets anyone check our figures.

A policy here is what the exact walk takes (``policy(features [n, F], legal [n, A]) ->
probabilities [n, A]``, or one per seat), and the features are OpenSpiel's
``information_state_tensor`` (Kuhn and Leduc poker's engines encode exactly that, and the
OpenSpiel adapter passes it through), so OpenSpiel's state of each information state is all
we need to ask the policy. Needs ``open_spiel`` (``pip install open_spiel``; a development
dependency of this project).

:func:`sdcfr_average` is SD-CFR's policy (the reach-weighted average of every stored
iteration's strategy) over OpenSpiel's information states, for games whose tree our own walk
cannot build (``GameTree.average_strategy`` computes the same on ours).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lostcities_cfr.cfr.game_tree import JointPolicy, Policy
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


# float64 entries SD-CFR's average holds at once: its iterations are taken in chunks of
# (information states x (actions + 1)) each, so that one chunk fits (256 MiB).
MAX_AVERAGE_ENTRIES = 1 << 25


def tabular_policy(game: Any, policy: JointPolicy) -> Any:
    """OpenSpiel's ``TabularPolicy`` of ``game`` (a pyspiel game) holding ``policy`` at
    every information state, asked once per seat in one batch."""
    openspiel_policy, _ = _openspiel()
    table = openspiel_policy.TabularPolicy(game)
    table.action_probability_array = _policy_array(table, policy)
    return table


def _seat_rows(table: Any) -> list[slice]:
    """Each player's rows of ``table`` (a ``TabularPolicy`` lists player 0's states first)."""
    ends = np.cumsum([0] + [len(keys) for keys in table.states_per_player])
    return [slice(int(a), int(b)) for a, b in itertools.pairwise(ends)]


def _policy_array(table: Any, policy: JointPolicy) -> np.ndarray:
    """``policy`` at every information state of ``table``: float64 [S, A], 0 on illegal
    actions and normalised over the legal ones (float32 outputs, summed in float64)."""
    if table.state_in is None:
        raise ConfigError("the game provides no information_state_tensor (a policy's features)")
    features = torch.as_tensor(table.state_in, dtype=torch.float32)  # [S, F]
    legal = table.legal_actions_mask.astype(bool)  # [S, A]
    probs = np.zeros(legal.shape)
    for player, rows in enumerate(_seat_rows(table)):
        if rows.start == rows.stop:
            continue
        seat_policy = policy if callable(policy) else policy[player]
        with torch.no_grad():
            out = seat_policy(features[rows], torch.from_numpy(legal[rows]))
        probs[rows] = out.detach().to("cpu", torch.float64).numpy()
    probs = np.where(legal, probs, 0.0)
    return probs / probs.sum(1, keepdims=True)


def _own_parents(game: Any, table: Any) -> tuple[np.ndarray, list[np.ndarray]]:
    """Every information state's previous decision of its own player, as the entry
    ``state * A + action`` of a flattened [S, A] table (-1 at the player's first decision),
    and the states grouped by how many own decisions precede them (1, 2, ...).

    One history of each state is replayed: perfect recall (which OpenSpiel's information
    states have) gives every history of the state the same own decisions."""
    n_actions = game.num_distinct_actions()
    parent_entry = np.full(len(table.states), -1, dtype=np.int64)
    depth = np.zeros(len(table.states), dtype=np.int64)
    for index, state in enumerate(table.states):
        player = state.current_player()
        own = [k for k, move in enumerate(state.full_history()) if move.player == player]
        if not own:
            continue
        history = state.history()
        before = game.new_initial_state()
        for action in history[: own[-1]]:
            before.apply_action(action)
        parent_entry[index] = table.state_index(before) * n_actions + history[own[-1]]
        depth[index] = len(own)
    levels = [np.flatnonzero(depth == d) for d in range(1, int(depth.max(initial=0)) + 1)]
    return parent_entry, levels


def sdcfr_average(
    game: Any,
    policies: Sequence[JointPolicy],
    weights: Sequence[float],
    *,
    max_entries: int = MAX_AVERAGE_ENTRIES,
) -> Any:
    """SD-CFR's policy on ``game`` (a pyspiel game) as OpenSpiel's ``TabularPolicy``: the
    average of the strategies ``policies`` (one per stored iteration ``t``, each as the walk
    asks it) with iteration weights ``weights`` (Steinberger, "Single Deep Counterfactual
    Regret Minimization", 2019)::

        average(I) = sum_t w_t pi_i^t(I) sigma^t(I) / sum_t w_t pi_i^t(I)

    where ``pi_i^t(I)`` is the product of ``sigma^t``'s probabilities of the actions that
    the player ``i`` to move at ``I`` took on the way to ``I`` (chance and the opponent count
    1). Drawing ``t`` with probability ``w_t`` at the start of a game and playing
    ``sigma^t`` throughout is distributed as this table plays. A state no strategy reaches
    plays the last one. ``GameTree.average_strategy`` computes the same over our walk.

    Each policy is asked once per seat, in one batch over every information state; the own
    reaches of a chunk of iterations are computed together, one step per own decision.

    Raises:
        ConfigError: one iteration's table and reaches (information states x (actions +
            1) float64 entries) exceed ``max_entries``.
    """
    if len(policies) != len(weights) or not policies:
        raise ValueError(
            f"need one weight per policy and at least one policy, got {len(policies)} "
            f"policies and {len(weights)} weights"
        )
    openspiel_policy, _ = _openspiel()
    table = openspiel_policy.TabularPolicy(game)
    n_states, n_actions = table.action_probability_array.shape
    per_iteration = n_states * (n_actions + 1)  # a table [S, A] and its own reaches [S]
    chunk = max_entries // per_iteration
    if chunk < 1:
        raise ConfigError(
            f"SD-CFR's average over {game}'s {n_states} information states x {n_actions} "
            f"actions needs {per_iteration} float64 entries per iteration, more than the "
            f"limit of max_entries={max_entries}: too large to average in memory"
        )
    parent_entry, levels = _own_parents(game, table)
    weight = np.asarray(weights, dtype=np.float64)
    total = np.zeros((n_states, n_actions))
    mass = np.zeros(n_states)
    for start in range(0, len(policies), chunk):
        batch = policies[start : start + chunk]
        probs = np.empty((len(batch), n_states, n_actions))  # [t, S, A]
        for k, policy in enumerate(batch):
            probs[k] = _policy_array(table, policy)
        flat = probs.reshape(len(batch), -1)  # [t, S * A]
        reach = np.ones((len(batch), n_states))  # [t, S]: pi_i^t of every state
        for rows in levels:  # parents lie one own decision up, already reached
            entry = parent_entry[rows]
            reach[:, rows] = reach[:, entry // n_actions] * flat[:, entry]
        reach *= weight[start : start + chunk, None]
        total += np.einsum("ts,tsa->sa", reach, probs)
        mass += reach.sum(0)
    unreached = mass <= 0
    total[unreached], mass[unreached] = probs[-1][unreached], 1.0
    table.action_probability_array = total / mass[:, None]
    return table


def lookup_policy(table: Any) -> list[Policy]:
    """``table`` (OpenSpiel's ``TabularPolicy``) as a pair of policies, one per seat, that
    look each feature row (``information_state_tensor``) up: float64 rows of the table.

    Raises:
        ConfigError: two of a player's information states share their tensor but not their
            probabilities (no policy of the features could play the table).
    """
    probs = torch.from_numpy(np.asarray(table.action_probability_array, dtype=np.float64))
    features = np.asarray(table.state_in, dtype=np.float32)
    seats = []
    for player, rows in enumerate(_seat_rows(table)):
        index: dict[bytes, int] = {}
        for row in range(rows.start, rows.stop):
            first = index.setdefault(features[row].tobytes(), row)
            if first != row and not torch.allclose(probs[first], probs[row], rtol=0, atol=1e-12):
                keys = table.states_per_player[player]
                raise ConfigError(
                    f"two information states of player {player} "
                    f"({keys[first - rows.start]!r} and {keys[row - rows.start]!r}) share "
                    "their information_state_tensor but not their probabilities: no policy "
                    "of the features plays this table"
                )
        seats.append(_lookup(index, probs))
    return seats


def _lookup(index: dict[bytes, int], probs: torch.Tensor) -> Policy:
    def policy(features: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        try:
            keys = features.detach().to("cpu", torch.float32).numpy()
            rows = [index[row.tobytes()] for row in keys]
        except KeyError:
            raise ValueError("a feature row that is no information state of the table") from None
        return probs[rows].to(features.device)

    return policy


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
