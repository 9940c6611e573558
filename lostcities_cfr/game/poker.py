"""Kuhn and Leduc poker as batched tensor games, with OpenSpiel's rules, ids and features.

Two small poker games that exact exploitability (``cfr/exploitability.py``) can walk whole,
so that Deep CFR's results on them are comparable with the literature, which measures
them in OpenSpiel: the rules, the action ids, the chance probabilities, the returns and the
information-state tensors are those of ``pyspiel.load_game("kuhn_poker")`` and
``pyspiel.load_game("leduc_poker")`` (default parameters, OpenSpiel 2.0.2), and
``tests/game/test_poker.py`` holds them equal over both games' whole trees. A network
trained on this engine reads OpenSpiel's tensors, and the other way round.

**Actions** are OpenSpiel's ids (the mapping is the identity):

=============  ==============================  =========================================
game           ids                             legal
=============  ==============================  =========================================
kuhn_poker     0 Pass, 1 Bet                   both, at every decision
leduc_poker    0 Fold, 1 Call, 2 Raise         Fold only facing a bet; Raise while the
                                               round has fewer than 2 raises
=============  ==============================  =========================================

In Kuhn, Pass folds when facing a bet (else checks) and Bet calls when facing one (else
bets 1). Both games ante 1 each. Leduc bets 2 in the first round and 4 in the second,
player 0 starts both rounds, and a round ends when a call answers a raise or both check.

**Cards** are OpenSpiel's ids: Kuhn's 0, 1, 2 are J, Q, K; Leduc's card ``c`` has rank
``c // 2`` (0, 1 J; 2, 3 Q; 4, 5 K) and suit ``c % 2``. A Leduc showdown goes to the
player whose card pairs the public card, else to the higher rank; equal ranks split.

**Chance** acts once, at the deal (``protocol.py``): a game's cards are drawn together,
uniformly over ordered deals (player 0's card, player 1's, then Leduc's public card from
the four left), which is what OpenSpiel's chance nodes give; the public card is hidden from
:meth:`PokerBatch.encode` until the first round ends, when OpenSpiel would deal it.

**Features.** :meth:`PokerBatch.encode` is OpenSpiel's ``information_state_tensor``: the
observer one-hot [2], their card one-hot [N], Leduc's public card one-hot [N] (zero while
hidden), and the betting [rounds, max_raises + 2, 2], one row per action in order (Kuhn:
one-hot of the action id; Leduc: call ``10``, raise ``01``, fold nothing). Kuhn F = 11,
Leduc F = 30. :meth:`PokerBatch.encode_history` is the player to move's features followed
by one-hot cards of player 0, player 1 and (Leduc) the public card, shown from the deal on
(the deal is part of the history): Kuhn H = 17, Leduc H = 48.

State: a few int64 tensors with the game first (tiny games, so plain and readable):
``cards`` [B, K] (K = 2 or 3), ``bets`` [B, R, S] action ids of each round in order (-1:
none yet), ``round``, ``n_bets`` (actions this round), ``raises`` and ``calls`` (this
round; calls since the last raise), ``contrib`` [B, 2] chips in the pot, ``folded`` (the
player who folded, -1), ``ended`` (over by the rules) and ``done`` (over, or cut short).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from lostcities_cfr.errors import IllegalActionError
from lostcities_cfr.game.openspiel_adapter import load_pyspiel
from lostcities_cfr.game.protocol import Game, action_ids
from lostcities_cfr.game.tensor_batch import TensorBatch, check_new_batch

FOLD, CALL, RAISE = 0, 1, 2
"""What an action does: Leduc's ids; Kuhn's Pass and Bet map onto them by the state."""


@dataclass(frozen=True)
class PokerRules:
    """Fixed-limit heads-up poker, as the numbers that Kuhn and Leduc differ in."""

    n_ranks: int
    n_suits: int
    raise_sizes: tuple[int, ...]  # the bet size of each round (their number is the rounds)
    max_raises: int  # per round
    action_names: tuple[str, ...]  # Kuhn's two (Pass, Bet) or Leduc's three

    @property
    def n_cards(self) -> int:
        return self.n_ranks * self.n_suits

    @property
    def n_rounds(self) -> int:
        return len(self.raise_sizes)

    @property
    def n_dealt(self) -> int:
        """K: cards per deal, the public card of a second round included."""
        return 2 + (self.n_rounds > 1)

    @property
    def slots(self) -> int:
        """S: the most actions in a round: a check, every raise, the closing call."""
        return self.max_raises + 2

    @property
    def pass_bet(self) -> bool:
        """Two actions whose effect depends on the state (Kuhn), not three fixed ones."""
        return len(self.action_names) == 2


KUHN = PokerRules(3, 1, (1,), 1, ("Pass", "Bet"))
LEDUC = PokerRules(3, 2, (2, 4), 2, ("Fold", "Call", "Raise"))


@cache
def deal_table(rules: PokerRules) -> torch.Tensor:
    """[D, K] int64: every ordered deal, in OpenSpiel's chance order (lexicographic)."""
    return torch.tensor(list(itertools.permutations(range(rules.n_cards), rules.n_dealt)))


@cache
def _tables(rules: PokerRules, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The betting code of each action id ([A + 1, 2], row 0 for an empty slot: Kuhn
    one-hot of the id, Leduc's call 10 / raise 01 / fold nothing), and each round's bet."""
    codes = torch.zeros(len(rules.action_names) + 1, 2)
    codes[-2:] = torch.eye(2)  # the last two ids: Pass/Bet, or Call/Raise
    return codes.to(device), torch.tensor(rules.raise_sizes, device=device)


@dataclass(frozen=True)
class _Poker(Game):
    """A poker game's rules as a :class:`~lostcities_cfr.game.protocol.Game` that offers
    every deal (:meth:`deals`)."""

    name: ClassVar[str]
    rules: ClassVar[PokerRules]

    @property
    def n_actions(self) -> int:
        return len(self.rules.action_names)

    @property
    def feature_size(self) -> int:
        r = self.rules
        return 2 + r.n_cards * (r.n_dealt - 1) + r.n_rounds * r.slots * 2

    @property
    def history_feature_size(self) -> int:
        return self.feature_size + self.rules.n_dealt * self.rules.n_cards

    @property
    def max_game_length(self) -> int:
        """The most decisions in a game (OpenSpiel's ``max_game_length``)."""
        return self.rules.n_rounds * self.rules.slots

    def new_batch(
        self,
        batch_size: int,
        seed: int | None = None,
        device: str | torch.device = "cpu",
        kernels: str = "eager",
    ) -> PokerBatch:
        """``batch_size`` games, each dealt uniformly from a CPU generator seeded with
        ``seed`` (torch's global RNG when None), so a seed deals alike on every device."""
        check_new_batch(self.name, batch_size, kernels)
        table = deal_table(self.rules)
        generator = None if seed is None else torch.Generator().manual_seed(seed)
        index = torch.randint(len(table), (batch_size,), generator=generator)
        return PokerBatch.from_deals(self, table[index], device)

    def action_name(self, action: int) -> str:
        if not 0 <= action < self.n_actions:
            raise ValueError(f"{self.name} has actions 0..{self.n_actions - 1}, got {action}")
        return self.rules.action_names[action]

    def openspiel_game(self) -> Any:
        """OpenSpiel's game of this name (``load_game(name)``, default parameters)."""
        return load_pyspiel().load_game(self.name)

    def deals(self, device: str | torch.device = "cpu") -> tuple[PokerBatch, torch.Tensor]:
        """Every ordered deal at its first decision, each with probability 1 / D."""
        table = deal_table(self.rules)
        probability = torch.full((len(table),), 1 / len(table), dtype=torch.float64)
        return PokerBatch.from_deals(self, table, device), probability.to(device)


@dataclass(frozen=True)
class KuhnPoker(_Poker):
    """OpenSpiel's ``kuhn_poker``: J, Q, K; one card each; one round of at most one bet."""

    name: ClassVar[str] = "kuhn_poker"
    rules: ClassVar[PokerRules] = KUHN


@dataclass(frozen=True)
class LeducPoker(_Poker):
    """OpenSpiel's ``leduc_poker``: two suits of J, Q, K; two rounds; a public card."""

    name: ClassVar[str] = "leduc_poker"
    rules: ClassVar[PokerRules] = LEDUC


_FIELDS = ("cards", "bets", "round", "n_bets", "raises", "calls", "contrib", "_turn", "folded")
_FLAGS = ("ended", "_done")


class PokerBatch(TensorBatch):
    """B games of Kuhn or Leduc poker in lockstep. Build with :meth:`from_deals` (or the
    game's ``new_batch`` / ``deals``); the constructor takes the state tensors."""

    FIELDS = _FIELDS + _FLAGS

    def __init__(self, game: _Poker, **state: torch.Tensor) -> None:
        super().__init__(game, **state)
        self.rules = game.rules

    @classmethod
    def from_deals(
        cls,
        game: _Poker,
        cards: torch.Tensor | Sequence[Sequence[int]],
        device: str | torch.device = "cpu",
    ) -> PokerBatch:
        """Games at their first decision with ``cards`` ([B, K] card ids: player 0's,
        player 1's and, in Leduc, the public card)."""
        rules = game.rules
        cards = torch.as_tensor(cards, dtype=torch.int64, device=device).clone()  # ours alone
        if cards.dim() != 2 or cards.shape[1] != rules.n_dealt or len(cards) == 0:
            raise ValueError(f"{game.name} deals are [B, {rules.n_dealt}], got {list(cards.shape)}")
        if ((cards < 0) | (cards >= rules.n_cards)).any():
            raise ValueError(f"{game.name} card ids run over 0..{rules.n_cards - 1}")
        if (cards.sort(1).values.diff(dim=1) == 0).any():
            raise ValueError(f"{game.name} deals a card once: a deal repeats a card")
        B, zeros = len(cards), torch.zeros(len(cards), dtype=torch.int64, device=cards.device)
        state = {name: zeros for name in _FIELDS}  # out-of-place updates: sharing is safe
        state.update(
            cards=cards,
            bets=torch.full((B, rules.n_rounds, rules.slots), -1, device=cards.device),
            contrib=torch.ones(B, 2, dtype=torch.int64, device=cards.device),  # the antes
            folded=zeros - 1,
            ended=zeros.bool(),
            _done=zeros.bool(),
        )
        return cls(game, **state)

    @property
    def turn(self) -> torch.Tensor:
        """[B] int64: decisions played."""
        return self._turn

    @property
    def current_player(self) -> torch.Tensor:
        """[B] int64: player 0 opens every round and the two alternate (no one has folded
        in a game still going)."""
        return self.n_bets % 2

    # ---- rules -------------------------------------------------------------------------------
    def _facing(self) -> torch.Tensor:
        """[B] bool: the player to move has put less in than the other (a bet to call)."""
        mine = self.contrib.gather(1, self.current_player[:, None]).squeeze(1)
        return mine < self.contrib.sum(1) - mine

    def legal_mask(self) -> torch.Tensor:
        """[B, A] bool: the legal actions of the player to move; none in finished games."""
        live = ~self._done
        if self.rules.pass_bet:
            return live[:, None].expand(-1, 2).clone()
        can_raise = self.raises < self.rules.max_raises
        return torch.stack([self._facing(), torch.ones_like(live), can_raise], 1) & live[:, None]

    def step(self, actions: torch.Tensor, check: bool = True) -> None:
        """Apply one action ([B] int64) in every unfinished game; finished games ignore
        theirs. With ``check`` an illegal action raises :class:`IllegalActionError` naming
        the game, and no game changes; without it, an illegal action's effect is undefined.

        Kuhn's Pass folds facing a bet and checks otherwise; its Bet calls a bet and bets
        otherwise. Both become Leduc's fold / call / raise (``kind``), which the rest reads.
        """
        actions = action_ids(actions, self.batch_size, self.device)
        if check:
            self._check(actions)
        rules, live = self.rules, ~self._done
        sizes = _tables(rules, self.device)[1]
        a = actions.long().clamp(0, self.game.n_actions - 1)  # finished games' may be anything
        player, facing = self.current_player, self._facing()
        if rules.pass_bet:
            kind = torch.where(a == 0, torch.where(facing, FOLD, CALL), RAISE - facing.long())
        else:
            kind = a
        fold, call, raise_ = kind == FOLD, kind == CALL, kind == RAISE
        mine = self.contrib.gather(1, player[:, None]).squeeze(1)
        theirs = self.contrib.sum(1) - mine
        paid = torch.where(fold | ~live, mine, theirs + raise_ * sizes[self.round])
        self.contrib = self.contrib.scatter(1, player[:, None], paid[:, None])
        raises = self.raises + raise_
        calls = torch.where(raise_, 0, self.calls + call)
        round_over = call & (calls == torch.where(raises == 0, 2, 1))
        last = self.round == rules.n_rounds - 1
        new_round = live & round_over & ~last
        ended = live & (fold | (round_over & last))
        slot = (self.round * rules.slots + self.n_bets).clamp(max=rules.n_rounds * rules.slots - 1)
        flat = self.bets.flatten(1)
        written = torch.where(live, a, flat.gather(1, slot[:, None]).squeeze(1))
        self.bets = flat.scatter(1, slot[:, None], written[:, None]).view_as(self.bets)
        self.raises = torch.where(new_round, 0, torch.where(live, raises, self.raises))
        self.calls = torch.where(new_round, 0, torch.where(live, calls, self.calls))
        self.n_bets = torch.where(new_round, 0, self.n_bets + live)
        self.round = self.round + new_round
        self.folded = torch.where(ended & fold, player, self.folded)
        self.ended = self.ended | ended
        self._done = self._done | ended
        self._turn = self._turn + live

    def _check(self, actions: torch.Tensor) -> None:
        A = self.game.n_actions
        in_range = (actions >= 0) & (actions < A)
        legal = self.legal_mask().gather(1, actions.long().clamp(0, A - 1)[:, None]).squeeze(1)
        bad = ~self._done & ~(in_range & legal)
        if not bool(bad.any()):
            return
        b = int(bad.nonzero()[0, 0])
        action = int(actions[b])
        if not 0 <= action < A:
            name, reason = "no action", f"{self.game.name} has action ids 0..{A - 1}"
        elif action == FOLD:  # Leduc's only illegal actions are these two
            name, reason = "Fold", f"{self.game.name} folds only facing a bet (Call checks)"
        else:
            name = "Raise"
            reason = f"{self.game.name} allows {self.rules.max_raises} raises a round"
        raise IllegalActionError(
            f"game {b} of {self.batch_size}: {name} (action {action}) is illegal: {reason}"
        )

    # ---- outcomes and features ---------------------------------------------------------------
    def returns(self) -> torch.Tensor:
        """[B, 2] float32: chips won (OpenSpiel's ``returns``); 0 until the rules end a game.

        A fold loses the folder's chips in the pot; a showdown (equal chips) goes to the
        higher hand: a pair with the public card, else the higher rank; a tie splits."""
        rank = self.cards // self.rules.n_suits  # [B, K]
        strength = rank[:, :2]
        if self.rules.n_dealt == 3:
            strength = strength + self.rules.n_ranks * (rank[:, :2] == rank[:, 2:])
        showdown = (strength[:, 0] - strength[:, 1]).sign() * self.contrib[:, 0]
        first = torch.where(
            self.folded == 0,
            -self.contrib[:, 0],
            torch.where(self.folded == 1, self.contrib[:, 1], showdown),
        )
        first = torch.where(self.ended, first, 0).float()
        return torch.stack([first, -first], 1)

    def encode(self, player: torch.Tensor | None = None) -> torch.Tensor:
        """[B, F] float32: OpenSpiel's ``information_state_tensor(player)`` (module
        docstring); ``player`` [B] (default: the player to move)."""
        rules, B = self.rules, self.batch_size
        if player is None:
            player = self.current_player
        player = torch.as_tensor(player, dtype=torch.int64, device=self.device).expand(B)
        blocks = [
            F.one_hot(player, 2),
            F.one_hot(self.cards.gather(1, player[:, None]).squeeze(1), rules.n_cards),
        ]
        if rules.n_dealt == 3:  # dealt face up when the first round ends
            blocks.append(F.one_hot(self.cards[:, 2], rules.n_cards) * (self.round > 0)[:, None])
        codes = _tables(rules, self.device)[0]
        return torch.cat([b.float() for b in blocks] + [codes[self.bets + 1].flatten(1)], 1)

    def encode_history(self) -> torch.Tensor:
        """[B, H] float32: the player to move's features, then one-hot cards of player 0,
        player 1 and (Leduc) the public card, dealt at the start (module docstring)."""
        cards = F.one_hot(self.cards, self.rules.n_cards).flatten(1).float()
        return torch.cat([self.encode(), cards], 1)
