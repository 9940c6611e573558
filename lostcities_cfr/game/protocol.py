"""The game protocol: what every layer above ``game`` asks of a batch of games.

The samplers, the inference queue, ``DeepCFR``, PPO, the agents, the arena and the exact
exploitability walk see a game only through these two protocols, so any game that
implements them trains and is measured with the same code:

- :class:`Game` is a game's rules as an object a config names by ``class_path``: its sizes
  and a factory of freshly dealt batches (and, for a game small enough to walk whole, every
  deal with its probability: :meth:`Game.deals`).
- :class:`BatchedGames` is ``B`` games in lockstep as tensors: who moves, legal masks,
  information-state features, one step of every game at once, returns, and rows picked or
  copied into a new batch (forks of a traversal).

Chance acts once, at the deal: ``Game.new_batch`` draws every chance outcome of a game up
front (Lost Cities' shuffled deck, Leduc's public card), and a player's features reveal only
what the rules have shown them so far. A tree walk therefore branches on players' actions
only, and chance enters as the deals' probabilities (:meth:`Game.deals`).

Implementations: Lost Cities (:class:`lostcities_cfr.game.lost_cities.LostCities` over
:class:`lostcities_cfr.game.batched.GameBatch`), Kuhn and Leduc poker
(:mod:`lostcities_cfr.game.poker`) and any two-player zero-sum OpenSpiel game
(:mod:`lostcities_cfr.game.openspiel_adapter`). ``docs/games.md`` says how to add one.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Any, Protocol, Self, runtime_checkable

import torch

from lostcities_cfr.errors import ConfigError


@runtime_checkable
class BatchedGames(Protocol):
    """``B`` games of two players in lockstep; every tensor's first axis is the game.

    Action ids run over ``0..A-1`` for every game of the batch (``Game.n_actions``), and a
    finished game has no legal action and ignores the actions given to it.
    """

    @property
    def batch_size(self) -> int:
        """B, the number of games."""
        ...

    @property
    def device(self) -> torch.device:
        """Where the batch's tensors live."""
        ...

    @property
    def compiled(self) -> bool:
        """The rules run as ``torch.compile``d kernels (samplers pick matching helpers)."""
        ...

    @property
    def current_player(self) -> torch.Tensor:
        """[B] int64: the player to move (0 or 1; meaningless in a finished game)."""
        ...

    @property
    def turn(self) -> torch.Tensor:
        """[B] int64: decisions played so far."""
        ...

    @property
    def done(self) -> torch.Tensor:
        """[B] bool: the game is over. Settable: a sampler may cut games short."""
        ...

    @done.setter
    def done(self, done: torch.Tensor) -> None: ...

    def legal_mask(self) -> torch.Tensor:
        """[B, A] bool: the legal actions of the player to move (none where done)."""
        ...

    def encode(self, player: torch.Tensor | None = None) -> torch.Tensor:
        """[B, F] float32 information-state features of ``player`` ([B]; default: to move).

        Two histories with equal features of the player to move are one information set
        of that player: a policy sees nothing else. Never change the result in place."""
        ...

    def encode_history(self) -> torch.Tensor:
        """[B, H] float32 features of the whole state (hidden cards included), for a
        history value network (ESCHER)."""
        ...

    def step(self, actions: torch.Tensor, check: bool = True) -> None:
        """Apply ``actions`` ([B] int64) in every unfinished game, in place; with ``check``
        an illegal action raises ``IllegalActionError`` naming the game, and nothing
        changes."""
        ...

    def returns(self) -> torch.Tensor:
        """[B, 2] float32: zero-sum utilities of the two players (row sums are 0)."""
        ...

    def select(self, index: torch.Tensor | Sequence[int]) -> Self:
        """A new batch of the games at ``index`` ([n] int64; repeats make copies)."""
        ...

    def clone(self) -> Self:
        """A copy that ``step`` can change without touching this batch."""
        ...


class Game(abc.ABC):
    """A game's rules: sizes, a factory of dealt batches, and (when small) every deal.

    A base class rather than a protocol so that a config names a game by ``class_path``
    (``model.rules: {class_path: lostcities_cfr.game.poker.LeducPoker}``) and a checkpoint
    stores it the same way. ``name`` is what command lines and checkpoints call the game
    (OpenSpiel's name where it has one: ``kuhn_poker``, ``leduc_poker``).
    """

    @property
    @abc.abstractmethod
    def name(self) -> str: ...

    @property
    @abc.abstractmethod
    def n_actions(self) -> int:
        """A: the number of action ids."""

    @property
    @abc.abstractmethod
    def feature_size(self) -> int:
        """F: the width of ``BatchedGames.encode``."""

    @property
    @abc.abstractmethod
    def history_feature_size(self) -> int:
        """H: the width of ``BatchedGames.encode_history``."""

    @abc.abstractmethod
    def new_batch(
        self,
        batch_size: int,
        seed: int | None = None,
        device: str | torch.device = "cpu",
        kernels: str = "eager",
    ) -> BatchedGames:
        """``batch_size`` freshly dealt games; ``seed`` (None: torch's global RNG) fixes
        the deals on every device. ``kernels``: ``"eager"``, or ``"compiled"`` where the
        game has compiled kernels (others refuse it)."""

    @abc.abstractmethod
    def action_name(self, action: int) -> str:
        """A human name of an action id."""

    def deals(self, device: str | torch.device = "cpu") -> tuple[BatchedGames, torch.Tensor]:
        """Every distinct deal as a batch at its first decision, and each deal's
        probability ([D] float64, summing to 1): for the exact exploitability walk
        (``cfr/exploitability.py``), which also takes the player to move's features as
        its information set, so a game that offers this must encode with perfect recall
        (all the player has seen, in order). Games too large to walk whole refuse."""
        raise ConfigError(f"{self.name} is too large to walk whole (it offers no deals())")

    def openspiel_game(self) -> Any | None:
        """This game as OpenSpiel's ``pyspiel.Game``, where OpenSpiel has it with this game's
        action ids and ``information_state_tensor`` as its features (Kuhn, Leduc, the
        adapter's games); else None. OpenSpiel's NashConv and the policy export use it."""
        return None


Decide = Callable[[BatchedGames, int, torch.Tensor], torch.Tensor]
"""``decide(batch, step, rows) -> actions [B]``: the moves of one step of a batch of games
played out (the arena's ``play_out``, PPO's rollouts); ``rows`` are the games still running."""


def action_ids(actions: torch.Tensor, batch_size: int, device: torch.device) -> torch.Tensor:
    """``actions`` as a [B] tensor of integer ids on ``device``, for a batch's ``step``.

    Raises:
        ValueError: not of shape [B].
        TypeError: a float, complex or bool dtype (converting them to ids would truncate
            3.7 to 3: refused, not guessed).
    """
    actions = torch.as_tensor(actions, device=device)
    if actions.shape != (batch_size,):
        raise ValueError(f"actions must have shape [{batch_size}], got {list(actions.shape)}")
    if actions.dtype.is_floating_point or actions.dtype.is_complex or actions.dtype == torch.bool:
        raise TypeError(
            f"actions have dtype {actions.dtype}; expected an integer dtype (int64 ids)"
        )
    return actions
