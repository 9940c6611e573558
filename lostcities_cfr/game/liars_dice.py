"""Liar's Dice as a batched tensor game, with OpenSpiel's rules, ids and features.

OpenSpiel's ``liars_dice`` (OpenSpiel 2.0.2) for two players, any ``numdice`` (dice per
player), ``dice_sides`` and ``bidding_rule``: the rules, the action ids, the chance
probabilities, the returns and the information-state tensors are those of
``pyspiel.load_game("liars_dice", {...})``, and ``tests/game/test_liars_dice.py`` holds
them equal over whole trees of small variants and in random play of larger ones. Its
parameters are OpenSpiel's: ``players`` (2 only: OpenSpiel's game and our protocol both
hold two), ``numdice``, ``dice_sides``, ``bidding_rule``. (OpenSpiel's C++ reads
per-player counts ``numdice0``, ``numdice1`` too, but its parameter list refuses them at
``load_game``, so they are not offered here.)

**Rules.** Each player rolls ``N`` dice of ``S`` sides (faces 1..S, seen only by their
owner); there are T = 2N dice in all. Player 0 bids first and the two alternate: a bid
claims that at least ``quantity`` of all T dice show ``face``, and must be higher than the
last bid; instead of bidding, a player may call "Liar" on the last bid. Then the dice are
counted: a die matches when it shows the bid face or the highest face S (which is wild),
and the bidder wins when at least ``quantity`` dice match, else the caller does. The
winner gets +1 and the loser -1. After the highest bid only "Liar" is left.

**Actions** are OpenSpiel's ids: the T * S bids in rising order, then "Liar" (id T * S),
A = T * S + 1; a bid is legal when its id is above the last bid's (so ids order bids by
strength), "Liar" once any bid has been made. Bid ``b`` means:

================  ====================================  ===============================
bidding_rule      quantity, face of bid ``b``           names (N = 1, S = 6)
================  ====================================  ===============================
reset-face        ``b // S + 1``, ``b % S + 1``         1-1, 1-2, ... 1-6, 2-1, ... 2-6
reset-quantity    ``b % T + 1``, ``b // T + 1``         1-1, 2-1, 1-2, 2-2, ... 2-6
================  ====================================  ===============================

**Chance** acts once, at the deal (``protocol.py``): OpenSpiel rolls the dice one chance
node at a time (player 0's N dice, then player 1's, each uniform over the S faces, outcome
``i`` meaning face ``i + 1``) and then sorts each player's dice; :meth:`LiarsDice.new_batch`
draws all T at once, alike, and sorts them. :meth:`LiarsDice.deals` gives every distinct
sorted deal with its probability (a hand's is its number of roll orders over S ** N):
the default game's 36 deals hold 147,456 decision nodes, which the exact walk
(``cfr/exploitability.py``) takes whole; two dice a player (441 deals of 2 ** 24 bid
sequences each) are past it.

**Features.** :meth:`DiceBatch.encode` is OpenSpiel's ``information_state_tensor``: the
observer one-hot [2], each of their N dice one-hot [N, S] (sorted, lowest first; the
other player's dice never show), and one bit per action made [A] (the bids, and "Liar" at
the end: bids only rise, so the set of bits is the sequence). F = 2 + N * S + A: 21 for
the default game (N = 1, S = 6), 39 for N = 2. :meth:`DiceBatch.encode_history` is the
player to move's features followed by both players' dice one-hot ([2, N, S], dealt at the
start): H = F + 2 * N * S.

State: a few tensors with the game first: ``dice`` [B, 2, N] int64 chance outcomes
(face - 1) of each player, sorted; ``bids`` [B, A] bool, the actions made (the features'
last block; its "Liar" column is ``ended``); ``last`` [B] int64, the last action (-1
before any: while a game runs, the bid to beat); ``turn``; ``done`` (ended, or cut short).
The legal actions depend on ``last`` (and ``done``) alone, so ``legal_mask`` is one
comparison of the action ids with it, batch-last ([A, B], as ``random_legal_actions``
reads masks), and a step is a handful of [B] operations and one scatter into ``bids``.
Updates are out of place: batches may share tensors (``to`` on the same device).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import torch

from lostcities_cfr.errors import ConfigError, IllegalActionError
from lostcities_cfr.game.openspiel_adapter import load_pyspiel
from lostcities_cfr.game.protocol import Game, action_ids
from lostcities_cfr.game.tensor_batch import TensorBatch, check_new_batch

BIDDING_RULES = ("reset-face", "reset-quantity")
"""OpenSpiel's two orders of the bids (module docstring)."""

MAX_DEALS = 1_000_000
"""The most distinct deals :meth:`LiarsDice.deals` builds; no tree past it is walkable."""


@cache
def deal_table(numdice: int, dice_sides: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every distinct deal ([D, 2N] int64: player 0's sorted dice, then player 1's, as
    chance outcomes 0..S-1; lexicographic) and its probability ([D] float64)."""
    hands = list(itertools.combinations_with_replacement(range(dice_sides), numdice))
    orders = [  # roll orders of a sorted hand: N! / prod(repeats!)
        math.factorial(numdice) // math.prod(math.factorial(hand.count(f)) for f in set(hand))
        for hand in hands
    ]
    hand_prob = torch.tensor(orders, dtype=torch.float64) / dice_sides**numdice  # [h]
    deals = torch.tensor([first + second for first, second in itertools.product(hands, hands)])
    return deals.reshape(-1, 2 * numdice), torch.outer(hand_prob, hand_prob).flatten()


@dataclass(frozen=True)
class LiarsDice(Game):
    """OpenSpiel's ``liars_dice`` as a :class:`~lostcities_cfr.game.protocol.Game`.

    Args:
        numdice: dice per player (N >= 1).
        dice_sides: faces of a die (S >= 1); the highest is wild.
        bidding_rule: ``"reset-face"`` or ``"reset-quantity"``, the order of the bid ids.
        players: 2 (any other count is refused, as OpenSpiel does).

    Raises:
        ConfigError: a parameter value the game does not have, naming it and the limit.
    """

    numdice: int = 1
    dice_sides: int = 6
    bidding_rule: str = "reset-face"
    players: int = 2

    def __post_init__(self) -> None:
        for field in ("numdice", "dice_sides"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"liars_dice {field} must be an integer >= 1, got {value!r}")
        if self.players != 2 or isinstance(self.players, bool):
            raise ConfigError(
                f"liars_dice players must be 2 (two-player games only, as in OpenSpiel), "
                f"got {self.players!r}"
            )
        if self.bidding_rule not in BIDDING_RULES:
            raise ConfigError(
                f"liars_dice bidding_rule must be one of {BIDDING_RULES}, got {self.bidding_rule!r}"
            )

    @property
    def name(self) -> str:
        return "liars_dice"

    @property
    def total_dice(self) -> int:
        """T: the dice of both players."""
        return 2 * self.numdice

    @property
    def liar(self) -> int:
        """The id of "Liar" (T * S, after every bid)."""
        return self.total_dice * self.dice_sides

    @property
    def n_actions(self) -> int:
        return self.liar + 1

    @property
    def feature_size(self) -> int:
        return 2 + self.numdice * self.dice_sides + self.n_actions

    @property
    def history_feature_size(self) -> int:
        return self.feature_size + self.total_dice * self.dice_sides

    @property
    def max_game_length(self) -> int:
        """The most decisions in a game: every bid, then "Liar" (OpenSpiel's
        ``max_game_length``)."""
        return self.n_actions

    def bid(self, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The quantity (1..T) and face (0..S-1, a chance outcome) of bids ``action``
        (int64, any shape) under this game's bidding rule."""
        if self.bidding_rule == "reset-face":
            return action // self.dice_sides + 1, action % self.dice_sides
        return action % self.total_dice + 1, action // self.total_dice

    def new_batch(
        self,
        batch_size: int,
        seed: int | None = None,
        device: str | torch.device = "cpu",
        kernels: str = "eager",
    ) -> DiceBatch:
        """``batch_size`` games, each die rolled uniformly from a CPU generator seeded
        with ``seed`` (torch's global RNG when None), so a seed deals alike on every
        device."""
        check_new_batch(self.name, batch_size, kernels)
        generator = None if seed is None else torch.Generator().manual_seed(seed)
        rolls = torch.randint(self.dice_sides, (batch_size, self.total_dice), generator=generator)
        return DiceBatch.from_deals(self, rolls, device)

    def action_name(self, action: int) -> str:
        """OpenSpiel's name: ``"<quantity>-<face>"`` for a bid, ``"Liar"``."""
        if not 0 <= action < self.n_actions:
            raise ValueError(f"{self.name} has actions 0..{self.n_actions - 1}, got {action}")
        if action == self.liar:
            return "Liar"
        quantity, face = self.bid(torch.tensor(action))
        return f"{int(quantity)}-{int(face) + 1}"

    def openspiel_game(self) -> Any:
        """OpenSpiel's ``liars_dice`` with these parameters."""
        parameters = {
            "players": self.players,
            "numdice": self.numdice,
            "dice_sides": self.dice_sides,
            "bidding_rule": self.bidding_rule,
        }
        return load_pyspiel().load_game(self.name, parameters)

    def deals(self, device: str | torch.device = "cpu") -> tuple[DiceBatch, torch.Tensor]:
        """Every distinct deal (both players' sorted dice) at its first decision, with its
        probability: a sorted hand of N dice stands for its roll orders (``deal_table``).

        Raises:
            ConfigError: more than ``MAX_DEALS`` deals (no such tree can be walked)."""
        hands = math.comb(self.dice_sides + self.numdice - 1, self.numdice)
        if hands**2 > MAX_DEALS:
            raise ConfigError(
                f"{self.name} with numdice={self.numdice}, dice_sides={self.dice_sides} has "
                f"{hands**2:,} deals, more than MAX_DEALS={MAX_DEALS:,}: too large to walk whole"
            )
        table, probability = deal_table(self.numdice, self.dice_sides)
        return DiceBatch.from_deals(self, table, device), probability.to(device)


@dataclass(frozen=True)
class _Tables:
    """A game's constant lookup tables on one device (``_tables``)."""

    ids: torch.Tensor  # [A, 1] int64: the action ids, as a column
    seats: torch.Tensor  # [2, 2] float32: a seat's one-hot
    faces: torch.Tensor  # [S, S] float32: a die's one-hot


@cache
def _tables(game: LiarsDice, device: torch.device) -> _Tables:
    """The action ids ``legal_mask`` compares, and the one-hot rows ``encode`` looks up."""
    ids, seats, faces = (
        torch.arange(game.n_actions)[:, None],
        torch.eye(2),
        torch.eye(game.dice_sides),
    )
    return _Tables(ids.to(device), seats.to(device), faces.to(device))


_FIELDS = ("dice", "bids", "last", "_turn", "_done")


class DiceBatch(TensorBatch):
    """B games of Liar's Dice in lockstep. Build with :meth:`from_deals` (or the game's
    ``new_batch`` / ``deals``); the constructor takes the state tensors."""

    FIELDS = _FIELDS

    @classmethod
    def from_deals(
        cls,
        game: LiarsDice,
        rolls: torch.Tensor | Sequence[Sequence[int]],
        device: str | torch.device = "cpu",
    ) -> DiceBatch:
        """Games at their first decision with the dice ``rolls`` ([B, 2N] chance outcomes
        0..S-1 in OpenSpiel's order: player 0's N dice, then player 1's); each player's
        dice are sorted, as OpenSpiel sorts them before the first bid."""
        N, S = game.numdice, game.dice_sides
        rolls = torch.as_tensor(rolls, dtype=torch.int64, device=device)
        if rolls.dim() != 2 or rolls.shape[1] != 2 * N or len(rolls) == 0:
            raise ValueError(f"{game.name} deals are [B, {2 * N}], got {list(rolls.shape)}")
        if ((rolls < 0) | (rolls >= S)).any():
            raise ValueError(f"{game.name} dice (chance outcomes) run over 0..{S - 1}")
        B = len(rolls)
        zeros = torch.zeros(B, dtype=torch.int64, device=rolls.device)
        return cls(
            game,
            dice=rolls.view(B, 2, N).sort(2).values,  # a new tensor: ours alone
            bids=torch.zeros(B, game.n_actions, dtype=torch.bool, device=rolls.device),
            last=zeros - 1,
            _turn=zeros,  # out-of-place updates: sharing is safe
            _done=zeros.bool(),
        )

    @property
    def ended(self) -> torch.Tensor:
        """[B] bool: over by the rules ("Liar" was called)."""
        return self.bids[:, self.game.liar]

    @property
    def turn(self) -> torch.Tensor:
        """[B] int64: decisions played."""
        return self._turn

    @property
    def current_player(self) -> torch.Tensor:
        """[B] int64: player 0 bids first and the two alternate."""
        return self._turn % 2

    # ---- rules -------------------------------------------------------------------------------
    def legal_mask(self) -> torch.Tensor:
        """[B, A] bool: the bids above the last one, and "Liar" once a bid stands; none in
        finished games. A transposed view of a contiguous [A, B] tensor (batch-last, as
        ``random_legal_actions`` reads it); never change it in place."""
        above = self.last.masked_fill(self._done, self.game.n_actions)  # [B]: A: none
        legal = _tables(self.game, self.device).ids > above  # [A, B]
        legal[self.game.liar] &= above >= 0  # "Liar" needs a bid to call (-1: none yet)
        return legal.t()

    def step(self, actions: torch.Tensor, check: bool = True) -> None:
        """Apply one action ([B] int64) in every unfinished game; finished games ignore
        theirs. With ``check`` an illegal action raises :class:`IllegalActionError` naming
        the game, and no game changes; without it, an illegal action's effect is undefined.
        """
        actions = action_ids(actions, self.batch_size, self.device)
        if check:
            self._check(actions)
        live = ~self._done  # [B]
        a = actions.long().clamp(0, self.game.liar)[:, None]  # [B, 1]; finished: anything
        made = self.bids.gather(1, a) | live[:, None]  # [B, 1]: unchanged where finished
        self.bids = self.bids.scatter(1, a, made)
        self.last = torch.where(live, a.squeeze(1), self.last)
        self._done = self._done | self.bids[:, self.game.liar]
        self._turn = self._turn + live

    def _check(self, actions: torch.Tensor) -> None:
        A, liar = self.game.n_actions, self.game.liar
        in_range = (actions >= 0) & (actions < A)
        legal = self.legal_mask().gather(1, actions.long().clamp(0, A - 1)[:, None]).squeeze(1)
        bad = ~self._done & ~(in_range & legal)
        if not bool(bad.any()):
            return
        b = int(bad.nonzero()[0, 0])
        action, last = int(actions[b]), int(self.last[b])
        name = self.game.action_name(action) if 0 <= action < A else "no action"
        if not 0 <= action < A:
            reason = f"{self.game.name} has action ids 0..{A - 1}"
        elif action == liar:
            reason = f"{self.game.name} calls Liar only on a bid, and none is made yet"
        else:
            last_name = self.game.action_name(last)
            reason = f"{self.game.name} bids must rise above the last, {last_name} (id {last})"
        raise IllegalActionError(
            f"game {b} of {self.batch_size}: {name} (action {action}) is illegal: {reason}"
        )

    # ---- outcomes and features ---------------------------------------------------------------
    def returns(self) -> torch.Tensor:
        """[B, 2] float32: +1 to the winner, -1 to the loser (OpenSpiel's ``returns``); 0
        until Liar is called. The bidder wins when at least ``quantity`` dice show the bid
        face or the wild highest face, else the caller (who moved last) wins."""
        ids = torch.arange(self.game.liar, device=self.device)
        last_bid = torch.where(self.bids[:, : self.game.liar], ids, 0).amax(1)  # [B]
        quantity, face = self.game.bid(last_bid)  # [B], [B]
        wild = self.game.dice_sides - 1
        dice = self.dice.flatten(1)  # [B, T]
        matches = ((dice == face[:, None]) | (dice == wild)).sum(1)  # [B]
        caller = (self._turn - 1) % 2  # [B]
        winner = torch.where(matches >= quantity, 1 - caller, caller)
        first = torch.where(self.ended, 1 - 2 * winner, 0).float()  # player 0's return
        return torch.stack([first, -first], 1)

    def encode(self, player: torch.Tensor | None = None) -> torch.Tensor:
        """[B, F] float32: OpenSpiel's ``information_state_tensor(player)`` (module
        docstring); ``player`` [B] (default: the player to move)."""
        B, N, S = self.batch_size, self.game.numdice, self.game.dice_sides
        if player is None:
            player = self.current_player
        player = torch.as_tensor(player, dtype=torch.int64, device=self.device).expand(B)
        tables = _tables(self.game, self.device)
        slots = player[:, None] * N + torch.arange(N, device=self.device)  # [B, N]
        own = self.dice.view(B, 2 * N).gather(1, slots)  # [B, N]
        blocks = [
            tables.seats.index_select(0, player),  # [B, 2]
            tables.faces.index_select(0, own.flatten()).view(B, N * S),
            self.bids.view(torch.uint8).float(),  # [B, A]; bool -> float is 8x slower
        ]
        return torch.cat(blocks, 1)

    def encode_history(self) -> torch.Tensor:
        """[B, H] float32: the player to move's features, then one-hot dice of player 0
        and player 1 (module docstring)."""
        faces = _tables(self.game, self.device).faces
        dice = faces.index_select(0, self.dice.flatten()).view(self.batch_size, -1)  # [B, 2NS]
        return torch.cat([self.encode(), dice], 1)
