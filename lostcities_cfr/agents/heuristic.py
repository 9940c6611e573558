"""A rule-based Lost Cities player that plays like a careful human, over a whole batch.

It is the yardstick between the trivial baselines and a trained agent: it opens
an expedition only when its hand can pay the cost, wagers only early and with
strong follow-up, extends expeditions from the lowest card up, keeps cards that
help itself or would help the opponent, and takes a discard only when the card
is useful now or denies the opponent a good card.

What it reads: the information-state features of the player to move
(:meth:`GameBatch.encode`, ``docs/encoding.md``) and the public turn counter,
so by construction it sees its own hand and public information only.

How it decides: every legal action gets a score from the tensors ``[B, C, K]``
(colour x rank index, ``K = n_ranks + 1``, index 0 the wager) and the
highest-scoring legal action is played. Scores come in tiers so that the order
of a human's priorities holds whatever the point values:

card decision
  1. play a wager, if the colour has strong follow-up in hand and it is early;
  2. extend a started expedition with its lowest held card, if the card skips
     no cheaply reachable card (or time is too short to be choosy);
  3. open a colour whose projected value clears the cost;
  4. otherwise the cheapest loss: discard the card worth least to itself plus
     (weighted) to the opponent, or extend over a gap, whichever costs less.

draw decision
  take the pile top with the highest value to itself (playable soon) or to the
  opponent (denial), if that value is positive, else draw from the deck.

Termination: pile draws do not shrink the deck, so two pile-drawing players
could loop. The agent draws from a pile only while fewer than
``max_pile_draws`` pile draws have happened in the game (both players
together); after that it always draws from the deck, so a game between two
heuristic agents ends within ``2 * (max_pile_draws + deck size)`` decisions.

Every threshold is a documented field of :class:`HeuristicParams`; point
values are in units of the expedition cost so that they scale with rule
variants; deck thresholds are fractions of the deck after the deal.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from lostcities_cfr.game.batched import GameBatch
from lostcities_cfr.game.encoding import feature_blocks
from lostcities_cfr.game.fused import compiled_on
from lostcities_cfr.game.packed import lookup_tables

# Tiers of the card decision; far apart so that point values never reorder them.
_WAGER_TIER = 3000.0
_EXTEND_TIER = 2000.0
_OPEN_TIER = 1000.0
_NEVER = -1e9


@dataclass(frozen=True)
class HeuristicParams:
    """The knobs of :class:`HeuristicAgent` (docs/agents.md shows the presets side by side).

    Args:
        open_margin: open a colour when its projected value (cards held + expected
            draws - cost) is at least this, in units of the expedition cost.
        draw_optimism: weight of the cards it may still draw in a colour's
            projected value (0: count only cards in hand).
        gap_tolerance: extend an expedition without hesitation when the card skips
            reachable cards (still unseen or in a pile) worth at most this, in
            units of the expedition cost.
        gap_weight: share of the skipped reachable cards' value counted as the
            loss of a play over a larger gap (compared against the loss of a discard).
        wager_margin: play a wager only when the colour's projected value is at
            least this, in units of the expedition cost.
        wager_min_cards: ... and at least this many playable number cards of the
            colour are in hand.
        wager_min_deck: ... and at least this fraction of the deck is left.
        wager_value: worth of a wager in hand for a promising colour (to itself,
            and to an opponent who may still wager), in units of the expedition cost.
        opp_open_weight: share of its face value that a card of a colour the
            opponent has not started is worth to the opponent (scaled down as the
            deck runs out).
        deny_weight: weight of a card's value to the opponent, both when choosing
            what to discard and when taking a pile card to deny it.
        deny_min_value: take a pile card for denial only if it is worth at least
            this to the opponent, in units of the expedition cost.
        max_pile_draws: draw from a pile only while fewer pile draws than this
            have happened in the game; bounds the game's length.
    """

    open_margin: float = 0.3
    draw_optimism: float = 0.5
    gap_tolerance: float = 0.15
    gap_weight: float = 0.5
    wager_margin: float = 0.0
    wager_min_cards: int = 2
    wager_min_deck: float = 0.45
    wager_value: float = 0.25
    opp_open_weight: float = 0.5
    deny_weight: float = 0.5
    deny_min_value: float = 0.3
    max_pile_draws: int = 40

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name not in ("open_margin", "wager_margin") and value < 0:
                raise ValueError(f"HeuristicParams.{f.name}={value!r} must be >= 0")


HEURISTIC_PRESETS: dict[str, HeuristicParams] = {
    "balanced": HeuristicParams(),
    "cautious": HeuristicParams(
        open_margin=0.4,
        gap_tolerance=0.1,
        wager_margin=0.25,
        wager_min_deck=0.55,
        deny_weight=0.75,
        deny_min_value=0.25,
    ),
    "aggressive": HeuristicParams(
        open_margin=0.1,
        draw_optimism=0.7,
        gap_tolerance=0.25,
        wager_margin=-0.25,
        wager_min_cards=2,
        wager_min_deck=0.35,
        deny_weight=0.25,
        deny_min_value=0.4,
    ),
}


class HeuristicAgent:
    """A careful human's play as tensor rules over the batch (see the module docstring).

    Args:
        params: a preset name (``balanced``, ``cautious``, ``aggressive``) or
            :class:`HeuristicParams`.
    """

    def __init__(self, params: HeuristicParams | str = "balanced") -> None:
        if isinstance(params, str):
            if params not in HEURISTIC_PRESETS:
                raise ValueError(
                    f"unknown heuristic preset {params!r}; "
                    f"expected one of: {', '.join(HEURISTIC_PRESETS)}"
                )
            self.name = f"heuristic:{params}"
            params = HEURISTIC_PRESETS[params]
        else:
            self.name = "heuristic:custom"
        self.params = params

    def act(self, batch: GameBatch) -> torch.Tensor:
        if batch.compiled:
            return compiled_on(batch, _best_action, self)
        return _best_action(batch, self)

    def action_scores(self, batch: GameBatch) -> torch.Tensor:
        """[B, A] float32: the agent's score of every action (legal or not)."""
        v = _View.of(batch)
        p = self.params
        # What a colour is worth if pursued from here, before any further wager.
        projected = (
            v.exp_value + v.held_value + p.draw_optimism * v.future_value - v.expedition_cost
        )  # [B, C]
        plays, discards = self._card_scores(v, projected)  # [B, C, K] each
        piles = self._pile_scores(v, projected)  # [B, C]
        deck = torch.zeros_like(piles[:, :1])  # drawing from the deck is the baseline
        B = plays.shape[0]
        return torch.cat([plays.view(B, -1), discards.view(B, -1), deck, piles], dim=1)

    # ---- card decision ---------------------------------------------------------------------
    def _card_scores(self, v: _View, projected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        p, unit = self.params, v.unit
        face, is_num = v.face, v.is_number
        early = v.deck_share >= p.wager_min_deck  # [B]

        # Wagers: early, into a colour without numbers, with strong follow-up in hand.
        wager_ok = (
            (v.hand[..., 0] > 0)
            & (v.own_top == 0)
            & early[:, None]
            & (v.held_count >= p.wager_min_cards)
            & (projected >= p.wager_margin * unit)
        )  # [B, C]

        # Numbers: the lowest held card above the top is each colour's candidate...
        multiplier = 1 + v.own[..., 0]  # [B, C] wagers multiply gains and losses
        worth_now = v.held * (face * v.started[..., None] * multiplier[..., None])  # [B, C, K]
        # ...unless it holds more playable cards of started colours than it has turns left:
        # then only the `turns_left` most valuable ones will ever be played (any such set
        # can be, lowest first in each colour), and gaps no longer matter.
        pressed = (worth_now > 0).sum((1, 2)) >= v.turns_left  # [B]
        flat = worth_now.flatten(1)  # [B, C*K]
        kth = (v.turns_left.long().clamp(1, flat.shape[1]) - 1)[:, None]  # [B, 1]
        threshold = flat.sort(dim=1, descending=True).values.gather(1, kth)  # [B, 1]
        best = (worth_now >= threshold[..., None]) & (worth_now > 0)
        pool = torch.where(pressed[:, None, None], best, v.held > 0)  # [B, C, K]
        candidate_rank = torch.where(pool, v.rank, v.K).amin(dim=-1)  # [B, C], K: none
        has_candidate = candidate_rank < v.K
        between = (v.rank > v.own_top[..., None]) & (v.rank < candidate_rank[..., None])
        gap = (v.reachable & between).float().mul(face).sum(-1)  # [B, C] points skipped
        # A colour without numbers has no sequence to break.
        gap = torch.where(v.own_top > 0, gap, 0.0)
        cheap = (gap <= p.gap_tolerance * unit) | pressed[:, None]
        extend = v.started & has_candidate & ~wager_ok & cheap
        open_ = ~v.started & has_candidate & ~wager_ok & (projected >= p.open_margin * unit)
        number_score = torch.where(
            extend,
            _EXTEND_TIER - gap - 0.01 * face[candidate_rank.clamp(max=v.K - 1)],
            torch.where(
                open_,
                _OPEN_TIER + projected,
                torch.where(v.started & has_candidate, -p.gap_weight * gap * multiplier, _NEVER),
            ),
        )  # [B, C]
        is_candidate = v.rank == candidate_rank[..., None]  # [B, C, K]
        plays = torch.where(is_candidate & is_num, number_score[..., None], _NEVER)
        plays[..., 0] = torch.where(wager_ok, _WAGER_TIER + projected, _NEVER)

        # Discards: lose the least, counting the card's worth to self and to the opponent.
        promise = (projected / unit + 1).clamp(0.0, 1.0)  # [B, C] 1: worth opening
        own_number = torch.where(v.started, multiplier, promise)[..., None] * face
        own_wager = (p.wager_value * unit * promise)[..., None]
        own_worth = torch.where(is_num, own_number, own_wager)
        own_dead = torch.where(
            is_num,
            v.rank <= v.own_top[..., None],
            (v.own_top > 0)[..., None] | ~early[:, None, None],
        )
        own_worth = torch.where(own_dead, 0.0, own_worth)
        discards = -(own_worth + p.deny_weight * self._opponent_worth(v))
        return plays, discards

    def _opponent_worth(self, v: _View) -> torch.Tensor:
        """[B, C, K] what each card type would be worth to the opponent."""
        p = self.params
        opp_multiplier = (1 + v.opp[..., 0])[..., None]
        number = torch.where(
            v.opp_started[..., None],
            v.face * opp_multiplier,
            v.face * p.opp_open_weight * v.deck_share[:, None, None],
        )
        wager = (p.wager_value * v.unit * v.deck_share)[:, None, None].expand_as(number)
        dead = torch.where(v.is_number, v.rank <= v.opp_top[..., None], (v.opp_top > 0)[..., None])
        return torch.where(dead, 0.0, torch.where(v.is_number, number, wager))

    # ---- draw decision ---------------------------------------------------------------------
    def _pile_scores(self, v: _View, projected: torch.Tensor) -> torch.Tensor:
        p, unit = self.params, v.unit
        top = v.pile_top > 0  # [B, C, K] one-hot of each pile's top card (none if empty)
        top_rank = (top * v.rank).sum(-1)  # [B, C]
        top_face = (top * v.face).sum(-1)
        top_is_number = (top & v.is_number).any(-1)

        # Useful to itself: playable in a later turn, over a cheap gap, into a started
        # colour or one it would open with this card.
        between = (v.rank > v.own_top[..., None]) & (v.rank < top_rank[..., None])
        gap = torch.where(v.own_top > 0, (v.reachable & between).float().mul(v.face).sum(-1), 0.0)
        playable = top_is_number & (top_rank > v.own_top) & (v.turns_left >= 1)[:, None]
        extends = v.started & (gap <= p.gap_tolerance * unit)
        opens = ~v.started & (projected + top_face >= p.open_margin * unit)
        own_gain = torch.where(playable & (extends | opens), top_face * (1 + v.own[..., 0]), 0.0)

        # Denial: a card the opponent could play on a started expedition.
        opp_gain = (top * self._opponent_worth(v)).sum(-1) * v.opp_started
        denial = torch.where(opp_gain >= p.deny_min_value * unit, p.deny_weight * opp_gain, 0.0)

        value = torch.maximum(own_gain, denial)
        allowed = (value > 0) & (v.pile_draws < p.max_pile_draws)[:, None]
        return torch.where(allowed, value, _NEVER)


def _best_action(batch: GameBatch, agent: HeuristicAgent) -> torch.Tensor:
    """[B] the legal action of highest score."""
    scores = agent.action_scores(batch)  # [B, A]
    return torch.where(batch.legal_mask(), scores, -torch.inf).argmax(dim=1)


@dataclass
class _View:
    """What the player to move knows, decoded from the features into ``[B, C, K]`` tensors,
    plus the derived quantities every rule uses."""

    K: int
    expedition_cost: int
    unit: float  # points of the cost-relative parameters: the expedition cost (at least 1)
    rank: torch.Tensor  # [K] int64 rank index
    face: torch.Tensor  # [K] float32 face value (0 for the wager)
    is_number: torch.Tensor  # [K] bool
    hand: torch.Tensor  # [B, C, K] copies held
    own: torch.Tensor  # [B, C, K] copies in its expeditions
    opp: torch.Tensor  # [B, C, K] copies in the opponent's expeditions
    pile_top: torch.Tensor  # [B, C, K] one-hot top of each pile
    reachable: torch.Tensor  # [B, C, K] bool: unseen or in a pile, so it may still come
    own_top: torch.Tensor  # [B, C] highest number's rank index in its expedition, 0 none
    opp_top: torch.Tensor  # [B, C]
    started: torch.Tensor  # [B, C] bool: its expedition holds a card
    opp_started: torch.Tensor  # [B, C] bool
    held: torch.Tensor  # [B, C, K] held number cards it can still play
    held_count: torch.Tensor  # [B, C]
    exp_value: torch.Tensor  # [B, C] face values already in its expedition
    held_value: torch.Tensor  # [B, C] face values of held playable cards it has turns to play
    future_value: torch.Tensor  # [B, C] expected face values of playable cards still to draw
    turns_left: torch.Tensor  # [B] its card decisions left if every draw is from the deck
    deck_share: torch.Tensor  # [B] deck left / deck after the deal
    pile_draws: torch.Tensor  # [B] pile draws so far in the game (both players)

    @classmethod
    def of(cls, batch: GameBatch) -> _View:
        rules, B = batch.rules, batch.batch_size
        C, K, H = rules.n_colors, rules.n_ranks + 1, rules.hand_size
        dealt_deck = rules.deck_size - 2 * H
        features = batch.encode()  # [B, F] the player to move's information state
        blocks = feature_blocks(rules)

        def cards(name: str) -> torch.Tensor:
            return features[:, blocks[name]].reshape(B, C, K)

        rank = torch.arange(K, device=batch.device)
        face = lookup_tables(rules, batch.device).face.view(K).float()  # (no copy from the host)
        is_number = rank > 0
        hand, own, opp = cards("hand"), cards("own_expeditions"), cards("opp_expeditions")
        unseen, in_piles = cards("unseen"), cards("pile_counts")
        deck_left = (features[:, blocks["deck_fraction"]].squeeze(1) * dealt_deck).round()
        card_decision = features[:, blocks["phase"].start] > 0.5
        turns_left = torch.where(card_decision, (deck_left + 1) // 2, (deck_left - 1) // 2)
        opp_hidden = H - cards("opp_known").sum((1, 2))

        own_top = ((own > 0) * rank).amax(-1)
        held = hand * (is_number & (rank > own_top[..., None]))
        held_count = held.sum(-1)
        # Hold more cards than turns left and only the turns' worth will be played.
        playable_share = (turns_left[:, None] / held_count.clamp(min=1)).clamp(max=1.0)
        held_value = (held * face).sum(-1) * playable_share
        # A given unseen card reaches its hand in time to be played with this probability:
        # it must lie in the deck (not the opponent's hand) and be drawn before its last turn.
        reach = ((deck_left - 1) // 2).clamp(min=0) / (deck_left + opp_hidden).clamp(min=1)
        future = (unseen * (is_number & (rank > own_top[..., None])) * face).sum(-1)
        # pile draws = completed turns (one draw each) - deck draws so far
        pile_draws = batch.turn // 2 - (dealt_deck - deck_left.long())

        return cls(
            K=K,
            expedition_cost=rules.expedition_cost,
            unit=float(max(rules.expedition_cost, 1)),
            rank=rank,
            face=face,
            is_number=is_number,
            hand=hand,
            own=own,
            opp=opp,
            pile_top=cards("pile_tops"),
            reachable=((unseen + in_piles) > 0) & is_number,
            own_top=own_top,
            opp_top=((opp > 0) * rank).amax(-1),
            started=own.sum(-1) > 0,
            opp_started=opp.sum(-1) > 0,
            held=held,
            held_count=held_count,
            exp_value=(own * face).sum(-1),
            held_value=held_value,
            future_value=future * reach[:, None],
            turns_left=turns_left,
            deck_share=deck_left / dealt_deck,
            pile_draws=pile_draws,
        )
