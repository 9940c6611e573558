"""Any two-player zero-sum sequential OpenSpiel game through the game protocol.

:class:`OpenSpielGame` loads a game by OpenSpiel's name (``liars_dice``, ``leduc_poker``...)
and :class:`OpenSpielBatch` holds B of its ``pyspiel.State`` objects behind
:class:`~lostcities_cfr.game.protocol.BatchedGames`, so that every trainer and measure of
this package runs on OpenSpiel's games as they are. It loops over the games in Python:
slow, but exact by construction, and the reference that tests hold the tensor engines
(``poker.py``) equal to. Action ids and features are OpenSpiel's own:
``encode`` is ``information_state_tensor``, ``legal_mask`` comes from ``legal_actions()``
and ``returns`` from ``returns()``.

**Chance** is dealt as the tensor engines deal it, once: every game of a batch owns a
numpy ``Generator`` (spawned from the batch's seed) that resolves each chance node as soon
as it is reached (at the start, and after each step, until a decision or the end) by
sampling ``chance_outcomes()``. The generator is part of the game's state: ``select`` and
``clone`` copy it with the ``pyspiel.State``, so a copy plays out the same future chance
outcomes as its original, as a forked tensor game (whose deal is drawn up front) does.

``encode_history`` is the information-state tensors of player 0 and player 1 side by side
([B, 2F]): together they hold all that either player knows, the state's hidden
information included, in OpenSpiel's own layout.

``open_spiel`` is optional: ``pyspiel`` is imported when a game is made, and a missing
install is a :class:`~lostcities_cfr.errors.ConfigError` that says how to get it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np
import torch

from lostcities_cfr.errors import ConfigError, IllegalActionError
from lostcities_cfr.game.protocol import Game, action_ids


def load_pyspiel() -> ModuleType:
    """The ``pyspiel`` module, or a ConfigError that says how to install it."""
    try:
        import pyspiel
    except ImportError as error:
        raise ConfigError(
            f"OpenSpiel games need the open_spiel package ({error}): pip install open_spiel"
        ) from None
    return pyspiel


# Our exact walk steps a Python list of pyspiel states: fine for Kuhn and Leduc (9,300
# histories), slow past this; OpenSpiel's own walk measures larger games.
MAX_WALKED_HISTORIES = 50_000


class OpenSpielGame(Game):
    """An OpenSpiel game as a :class:`~lostcities_cfr.game.protocol.Game`.

    ``name`` and ``parameters`` go to ``pyspiel.load_game``; games that the protocol cannot
    hold are refused at once: more or fewer than two players, not zero-sum, simultaneous
    moves, or no ``information_state_tensor``.
    """

    def __init__(self, name: str, parameters: dict[str, Any] | None = None) -> None:
        pyspiel = load_pyspiel()
        if name not in pyspiel.registered_names():  # load_game would print all of them
            raise ConfigError(
                f"unknown OpenSpiel game {name!r} (pyspiel.registered_names() lists them)"
            )
        try:
            game = pyspiel.load_game(name, dict(parameters or {}))
        except pyspiel.SpielError as error:
            first_line = str(error).splitlines()[0]
            raise ConfigError(f"OpenSpiel game {name!r}: {first_line}") from None
        kind, Type = game.get_type(), pyspiel.GameType
        if game.num_players() != 2:
            problem = f"is a {game.num_players()}-player game (only two-player games fit)"
        elif kind.utility != Type.Utility.ZERO_SUM:
            problem = f"is {kind.utility.name.lower()}, not zero-sum"
        elif kind.dynamics != Type.Dynamics.SEQUENTIAL:
            problem = f"has {kind.dynamics.name.lower()} moves, not sequential ones"
        elif not kind.provides_information_state_tensor:
            problem = "provides no information_state_tensor (the features a network reads)"
        else:
            problem = None
        if problem:
            raise ConfigError(f"OpenSpiel game {name!r} {problem}: it cannot be trained here")
        self._name = name
        self.parameters = dict(parameters or {})
        self.game = game  # the pyspiel.Game

    def __repr__(self) -> str:
        return f"OpenSpielGame({self.name!r}, {self.parameters})"

    def openspiel_game(self) -> Any:
        """The ``pyspiel.Game`` behind this adapter."""
        return self.game

    @property
    def name(self) -> str:
        return self._name

    @property
    def n_actions(self) -> int:
        return self.game.num_distinct_actions()

    @property
    def feature_size(self) -> int:
        return self.game.information_state_tensor_size()

    @property
    def history_feature_size(self) -> int:
        return 2 * self.feature_size

    @property
    def max_game_length(self) -> int:
        """The most decisions in a game (OpenSpiel's ``max_game_length``)."""
        return self.game.max_game_length()

    def new_batch(
        self,
        batch_size: int,
        seed: int | None = None,
        device: str | torch.device = "cpu",
        kernels: str = "eager",
    ) -> OpenSpielBatch:
        """``batch_size`` games at their first decision; ``seed`` (None: drawn from torch's
        global RNG, so ``torch.manual_seed`` fixes it too) seeds every game's chance."""
        if kernels == "compiled":
            raise ConfigError(f"{self.name} (OpenSpiel) has no compiled kernels; use 'eager'")
        if kernels != "eager":
            raise ConfigError(f"kernels must be 'eager' or 'compiled', got {kernels!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if seed is None:
            seed = int(torch.randint(2**62, ()))
        sequences = np.random.SeedSequence(seed).spawn(batch_size)
        states = [self.game.new_initial_state() for _ in range(batch_size)]
        return OpenSpielBatch(self, states, [np.random.default_rng(s) for s in sequences], device)

    def deals(self, device: str | torch.device = "cpu") -> tuple[OpenSpielBatch, torch.Tensor]:
        """Every distinct sequence of chance outcomes of a whole game (the longest ones: a
        game that ends early replays a prefix), each as a game whose chance nodes replay it,
        with its probability. Walks OpenSpiel's tree, so only games of at most
        ``MAX_WALKED_HISTORIES`` histories; larger ones (and games whose chance depends on
        the play) are refused, and OpenSpiel's own walk measures them instead."""
        found: dict[tuple[int, ...], float] = {}
        stack = [(self.game.new_initial_state(), (), 1.0)]
        walked = 0
        while stack:
            state, outcomes, probability = stack.pop()
            walked += 1
            if walked > MAX_WALKED_HISTORIES:
                raise ConfigError(
                    f"{self.name} has more than {MAX_WALKED_HISTORIES} histories: too large "
                    "to walk whole through the adapter"
                )
            if state.is_terminal():
                if found.setdefault(outcomes, probability) != probability:
                    raise ConfigError(f"{self.name}: its chance depends on the play")
            elif state.is_chance_node():
                for action, p in state.chance_outcomes():
                    stack.append((state.child(action), (*outcomes, action), probability * p))
            else:
                stack.extend((state.child(a), outcomes, probability) for a in state.legal_actions())
        longest = sorted(
            o for o in found if not any(len(f) > len(o) and f[: len(o)] == o for f in found)
        )
        probability = torch.tensor([found[o] for o in longest], dtype=torch.float64)
        if abs(float(probability.sum()) - 1) > 1e-9:
            raise ConfigError(f"{self.name}: its chance depends on the play (no fixed deals)")
        states = [self.game.new_initial_state() for _ in longest]
        batch = OpenSpielBatch(self, states, [ScriptedChance(o) for o in longest], device)
        return batch, probability.to(device)

    def action_name(self, action: int) -> str:
        """OpenSpiel's name of ``action`` at the first decision of a game (names may depend
        on the state; a batch's errors use the state's own)."""
        if not 0 <= action < self.n_actions:
            raise ValueError(f"{self.name} has actions 0..{self.n_actions - 1}, got {action}")
        state = self.game.new_initial_state()
        while state.is_chance_node():
            state.apply_action(state.chance_outcomes()[0][0])
        return _action_string(state, action)


def _action_string(state: Any, action: int) -> str:
    try:
        return state.action_to_string(max(state.current_player(), 0), action)
    except RuntimeError:  # pyspiel.SpielError: some games name legal actions only
        return f"action {action}"


class ScriptedChance:
    """A game's chance outcomes fixed in advance and replayed in order (a deal of
    :meth:`OpenSpielGame.deals`); copied with its game, it replays the rest alike."""

    def __init__(self, outcomes: Sequence[int]) -> None:
        self.outcomes = tuple(outcomes)
        self.position = 0

    def next(self) -> int:
        self.position += 1
        return self.outcomes[self.position - 1]


def _resolve_chance(state: Any, rng: np.random.Generator | ScriptedChance) -> None:
    """Sample chance nodes until a decision or the end: the deal, as the engines see it."""
    while state.is_chance_node():
        if isinstance(rng, ScriptedChance):
            state.apply_action(rng.next())
            continue
        actions, probs = zip(*state.chance_outcomes(), strict=True)
        p = np.asarray(probs, dtype=np.float64)
        state.apply_action(actions[rng.choice(len(actions), p=p / p.sum())])


class OpenSpielBatch:
    """B OpenSpiel games behind :class:`~lostcities_cfr.game.protocol.BatchedGames`:
    a list of ``pyspiel.State`` and of their chance generators, looped over in Python."""

    def __init__(
        self,
        game: OpenSpielGame,
        states: Sequence[Any],
        generators: Sequence[np.random.Generator | ScriptedChance],
        device: str | torch.device = "cpu",
        turns: Sequence[int] | None = None,
        cut: torch.Tensor | None = None,
    ) -> None:
        """The games in ``states`` (resolving any chance node they stand at with their
        generator); ``turns`` decisions played (default 0) and ``cut`` ([B] bool, games a
        sampler stopped) carry over from a batch that this one copies."""
        if len(states) != len(generators):
            raise ValueError(f"{len(states)} states and {len(generators)} generators")
        self.game = game
        self.states = list(states)
        self.generators = list(generators)
        self._device = torch.device(device)
        self._turns = list(turns) if turns is not None else [0] * len(self.states)
        self._cut = torch.zeros(len(states), dtype=torch.bool) if cut is None else cut.cpu()
        for state, rng in zip(self.states, self.generators, strict=True):
            _resolve_chance(state, rng)

    def _tensor(self, values: Any, dtype: torch.dtype) -> torch.Tensor:
        return torch.as_tensor(np.asarray(values), dtype=dtype).to(self._device)

    # ---- selection ---------------------------------------------------------------------------
    def select(self, index: torch.Tensor | Sequence[int]) -> OpenSpielBatch:
        """A new batch of copies of the games at ``index`` (repeats make independent copies
        that replay the same chance outcomes)."""
        rows = torch.as_tensor(index, dtype=torch.int64).cpu().tolist()
        return OpenSpielBatch(
            self.game,
            [self.states[i].clone() for i in rows],
            [copy.deepcopy(self.generators[i]) for i in rows],
            self._device,
            [self._turns[i] for i in rows],
            self._cut[rows],
        )

    def clone(self) -> OpenSpielBatch:
        return self.select(range(self.batch_size))

    def to(self, device: str | torch.device) -> OpenSpielBatch:
        moved = self.clone()
        moved._device = torch.device(device)
        return moved

    @property
    def batch_size(self) -> int:
        return len(self.states)

    def __len__(self) -> int:
        return self.batch_size

    def __repr__(self) -> str:
        return f"OpenSpielBatch({self.game.name}, batch_size={self.batch_size})"

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def compiled(self) -> bool:
        return False

    @property
    def done(self) -> torch.Tensor:
        """[B] bool: terminal, or cut short by a sampler."""
        terminal = torch.tensor([s.is_terminal() for s in self.states], dtype=torch.bool)
        return (terminal | self._cut).to(self._device)

    @done.setter
    def done(self, done: torch.Tensor) -> None:
        self._cut = torch.as_tensor(done, dtype=torch.bool).cpu().clone()

    @property
    def turn(self) -> torch.Tensor:
        """[B] int64: decisions played (chance outcomes not counted)."""
        return self._tensor(self._turns, torch.int64)

    @property
    def current_player(self) -> torch.Tensor:
        """[B] int64: OpenSpiel's player to move; 0 in finished games."""
        return self._tensor([max(s.current_player(), 0) for s in self.states], torch.int64)

    # ---- rules -------------------------------------------------------------------------------
    def legal_mask(self) -> torch.Tensor:
        mask = np.zeros((self.batch_size, self.game.n_actions), dtype=bool)
        for b, (state, cut) in enumerate(zip(self.states, self._cut.tolist(), strict=True)):
            if not cut and not state.is_terminal():
                mask[b, state.legal_actions()] = True
        return self._tensor(mask, torch.bool)

    def step(self, actions: torch.Tensor, check: bool = True) -> None:
        """Apply ``actions`` ([B] OpenSpiel ids) in every unfinished game, then resolve
        the chance nodes they lead to; finished games ignore theirs. Without ``check``,
        pyspiel applies some illegal actions (Leduc's fold with nothing to call) silently."""
        actions = action_ids(actions, self.batch_size, torch.device("cpu"))
        ids = actions.cpu().tolist()
        live = (~self.done).cpu().tolist()
        if check:  # every game first, so that an illegal action changes none
            for b, (state, action) in enumerate(zip(self.states, ids, strict=True)):
                if live[b] and action not in state.legal_actions():
                    self._refuse(b, action)
        for b, (state, action) in enumerate(zip(self.states, ids, strict=True)):
            if live[b]:
                state.apply_action(action)
                self._turns[b] += 1
                _resolve_chance(state, self.generators[b])

    def _refuse(self, b: int, action: int) -> None:
        state = self.states[b]
        in_range = 0 <= action < self.game.n_actions
        name = _action_string(state, action) if in_range else "no action"
        raise IllegalActionError(
            f"game {b} of {self.batch_size}: {name} (action {action}) is illegal: "
            f"{self.game.name} allows {state.legal_actions()} here"
        )

    # ---- outcomes and features ---------------------------------------------------------------
    def returns(self) -> torch.Tensor:
        """[B, 2] float32: OpenSpiel's ``returns()`` (0 before the end in its poker games)."""
        returns = np.zeros((self.batch_size, 2), dtype=np.float32)
        for b, state in enumerate(self.states):
            returns[b] = state.returns()
        return self._tensor(returns, torch.float32)

    def encode(self, player: torch.Tensor | None = None) -> torch.Tensor:
        """[B, F] float32: ``information_state_tensor(player)`` ([B]; default: to move)."""
        if player is None:
            player = self.current_player
        players = torch.as_tensor(player).expand(self.batch_size).tolist()
        features = np.zeros((self.batch_size, self.game.feature_size), dtype=np.float32)
        for b, (state, p) in enumerate(zip(self.states, players, strict=True)):
            features[b] = state.information_state_tensor(p)
        return self._tensor(features, torch.float32)

    def encode_history(self) -> torch.Tensor:
        """[B, 2F] float32: player 0's then player 1's information-state tensor."""
        zeros = torch.zeros(self.batch_size, dtype=torch.int64)
        return torch.cat([self.encode(zeros), self.encode(zeros + 1)], 1)
