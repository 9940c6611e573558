"""The search agent: at each decision, value every candidate action over sampled worlds.

Perfect-information Monte Carlo over a base policy (Ginsberg's GIB; Long, Sturtevant, Buro
and Furtak, "Understanding the Success of Perfect Information Monte Carlo Sampling in Game
Tree Search", AAAI 2010), with the base policy's rollouts as the value of an action
(Tesauro and Galperin, NIPS 1996), searching only where it may beat the base (as SPARTA,
Lerer et al., AAAI 2020, deviates from its blueprint only when the search says it pays). At a
decision of game ``b`` with more than one legal action and at most ``max_deck`` cards left:

1. the *incumbent* is the base's own choice (its most probable action, or what it plays);
   the *challengers* are the other legal actions, or the other ``top`` most probable;
2. deal ``worlds`` worlds consistent with what the player to move has seen
   (:mod:`~lostcities_cfr.search.worlds`), step the incumbent and every challenger in each,
   and value the children by :class:`~lostcities_cfr.search.rollouts.Rollouts` (the base
   policy plays both players, cut by a value network where asked);
3. keep the better half of the challengers (successive halving: Karnin, Koren and Somekh,
   "Almost Optimal Exploration in Multi-Armed Bandits", ICML 2013) and repeat with new
   worlds until one is left, so that the budget goes to the actions that stay close;
4. play the last challenger if its mean beats the incumbent's over the same worlds by
   ``margin`` points and ``z`` standard errors of the paired differences; else the incumbent.

Every action of a round is valued in the same worlds (common random numbers: a difference
between two actions does not carry the luck of the deal). Every round handles every game of
the batch at once: its worlds are one ``GameBatch`` and its rollouts one lockstep batch (in
chunks), so no Python loop runs per game or per world.

Why the test against the incumbent and why ``max_deck`` (``docs/search.md``): a rollout's
value carries 15-30 points of noise per world, the base's best actions differ by a point or
two, so playing the best mean over a few dozen worlds plays the luckiest action; late in the
round rollouts are short, cheap and less noisy, and the search gains most there.
"""

from __future__ import annotations

import torch

from lostcities_cfr.agents.base import AgentRandomness
from lostcities_cfr.game.batched import GameBatch
from lostcities_cfr.search.belief import BeliefNet
from lostcities_cfr.search.rollouts import Rollouts
from lostcities_cfr.search.streams import child, uniforms
from lostcities_cfr.search.worlds import belief_keys, deal_worlds, world_keys

# The defaults: the budget measured strongest for search:best within the time the issue
# allows 1000 games (docs/search.md, "Choosing the budget").
DEFAULT_WORLDS = 64
DEFAULT_Z = 1.0
DEFAULT_MAX_DECK = 20


class SearchAgent:
    """Plays the action with the best mean value over sampled worlds (module docstring).

    Args:
        rollouts: how a child is valued (the base policy, its value network, the depth).
        worlds: worlds dealt per round of successive halving (the budget).
        top: candidates per decision, the base policy's most probable; None: every legal
            action.
        margin: points by which a challenger's mean must beat the base's own action (the
            incumbent) on the same worlds to be played instead.
        z: and by this many standard errors of the paired differences (0: mean only).
        max_deck: search only while the deck holds at most this many cards; None: always.
        seed: seeds the worlds (the base policy's rollouts draw from its own seed).
        name: label in results.
        belief: a :class:`~lostcities_cfr.search.belief.BeliefNet` that weighs the
            opponent's hidden hand in the worlds (:func:`~lostcities_cfr.search.worlds.
            belief_keys`); None deals uniform worlds.
    """

    def __init__(
        self,
        rollouts: Rollouts,
        worlds: int = DEFAULT_WORLDS,
        top: int | None = None,
        margin: float = 0.0,
        z: float = DEFAULT_Z,
        max_deck: int | None = DEFAULT_MAX_DECK,
        seed: int | None = None,
        name: str = "search",
        belief: BeliefNet | None = None,
    ) -> None:
        if worlds < 1:
            raise ValueError(f"worlds={worlds} must be >= 1")
        if top is not None and top < 2:
            raise ValueError(f"top={top} must be >= 2 (or None: every legal action)")
        if top is not None and not _ranks(rollouts.policy):
            raise ValueError(
                f"top={top} ranks actions by the base policy's probabilities, and "
                f"{type(rollouts.policy).__name__} offers none (policy(batch)); leave top out"
            )
        if margin < 0 or z < 0:
            raise ValueError(f"margin={margin} and z={z} must be >= 0")
        self.rollouts = rollouts
        self.worlds = worlds
        self.top = top
        self.margin = margin
        self.z = z
        self.max_deck = max_deck
        self.name = name
        self._rng = AgentRandomness(seed)
        self.belief = belief
        rules = getattr(rollouts.policy, "rules", None)
        if belief is not None:
            if rules is not None and rules != belief.rules:
                raise ValueError(
                    f"the belief network plays {belief.rules.preset_name()} rules and the base "
                    f"{rules.preset_name()} rules"
                )
            rules = belief.rules
        if rules is not None:  # a checkpoint's base or a belief: the arena checks the rules
            self.rules = rules

    def act(self, batch: GameBatch) -> torch.Tensor:
        return self.search(batch)[0]

    def explain(self, batch: GameBatch) -> dict[str, torch.Tensor]:
        """What the search saw at every game's decision, labelled [B, A] float tensors.

        ``probability``: 1 at the action it chose (the search is deterministic given its
        worlds); ``searched value``: the mean value in points of each action valued, NaN
        where it was not (not a candidate, or a decision with one legal action);
        ``worlds``: the worlds each action was valued in.
        """
        return self.act_and_explain(batch)[1]

    def act_and_explain(self, batch: GameBatch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The actions [B] and the reasons of one search (:meth:`explain`): two calls, to
        ``act`` and ``explain``, would deal other worlds and might choose another action."""
        actions, value, worlds = self.search(batch)
        probability = torch.zeros_like(value)
        probability[torch.arange(batch.batch_size), actions] = 1.0
        probability[batch.done] = 0.0
        return actions, {"probability": probability, "searched value": value, "worlds": worlds}

    @torch.inference_mode()
    def search(
        self, batch: GameBatch, streams: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The action of every game [B] int64, the mean value of each action searched [B, A]
        (NaN elsewhere) and the worlds it was valued in [B, A].

        ``streams`` ([B] int64, :mod:`~lostcities_cfr.search.streams`): every game deals its
        worlds and samples its rollouts from its own stream, so its result does not depend
        on the games searched beside it (expert iteration's labels); None: the agent's
        generators, as :meth:`act` plays. Uniform worlds only (no ``belief``).
        """
        if streams is not None and self.belief is not None:
            raise ValueError("search(streams=...) deals uniform worlds; this agent has a belief")
        legal = batch.legal_mask()  # [B, A]
        B, A = legal.shape
        base = self.rollouts.policy
        # the base's probabilities [B, A] where it offers them (0 at illegal actions)
        prior = base.policy(batch).masked_fill(~legal, -1.0) if _ranks(base) else None
        # the incumbent [B]: the base's most probable action, or what it plays
        incumbent = base.act(batch) if prior is None else prior.argmax(1)
        is_incumbent = torch.zeros_like(legal).scatter_(1, incumbent[:, None], True)
        # challengers still in the running (the incumbent is valued in every round)
        challengers = legal.clone()
        if self.top is not None:
            top = prior.topk(min(self.top, A), dim=1).indices
            challengers &= torch.zeros_like(legal).scatter_(1, top, True)
        challengers &= ~is_incumbent
        challengers &= (legal.sum(1) > 1)[:, None]
        if self.max_deck is not None:
            challengers &= (batch.deck_count <= self.max_deck)[:, None]
        totals = torch.zeros(B, A, device=batch.device)
        counts = torch.zeros(B, A, device=batch.device)
        # paired differences to the incumbent, world by world: their sum and sum of squares
        diff_sum = torch.zeros(B, A, device=batch.device)
        diff_squares = torch.zeros(B, A, device=batch.device)
        # a game searches in every round from the first until one challenger is left, so the
        # round's number is the same for it whatever other games share the call
        round_number = 0
        while True:
            left = challengers.sum(1)
            games = ((left > 1) | ((left == 1) & (counts.sum(1) == 0))).nonzero().squeeze(1)
            if not len(games):
                break
            alive = challengers[games] | is_incumbent[games]  # [G, A]
            round_streams = None if streams is None else child(streams[games], round_number)
            values = self._round(batch.select(games), alive, round_streams)  # [G, A, W]
            round_number += 1
            totals[games] += values.sum(2)
            counts[games] += alive * self.worlds
            diff = values - values.gather(1, incumbent[games, None, None].expand_as(values[:, :1]))
            diff = diff * challengers[games, :, None]
            diff_sum[games] += diff.sum(2)
            diff_squares[games] += diff.square().sum(2)
            challengers[games] &= _better_half(diff_sum[games], challengers[games])
        # the last challenger standing plays if it beats the incumbent by the margin
        n = counts.clamp(min=1)
        mean_diff = diff_sum / n
        variance = (diff_squares - n * mean_diff.square()).clamp(min=0) / (n - 1).clamp(min=1)
        beats = mean_diff > self.margin + self.z * (variance / n).sqrt()
        deviate = challengers & beats  # [B, A] at most one per game
        actions = torch.where(deviate.any(1), deviate.int().argmax(1), incumbent)
        mean = torch.where(counts > 0, totals / n, torch.nan)
        return actions, mean, counts

    def _round(
        self, games: GameBatch, alive: torch.Tensor, streams: torch.Tensor | None = None
    ) -> torch.Tensor:
        """[G, A, W]: each alive action's value in each of ``W`` new worlds, 0 for the other
        actions, for games ``games`` with their alive actions ``alive`` [G, A]; ``streams``
        [G] int64 draws each game's worlds and rollouts from its own stream."""
        W = self.worlds
        generator = self._rng.generator(games.device)
        if streams is not None:
            N = games.rules.deck_size
            keys = uniforms(streams, W * N).view(games.batch_size, W, N)  # as world_keys
        elif self.belief is None:
            keys = world_keys(games, W, generator)
        else:
            parameter = next(self.belief.parameters())
            features = games.encode().to(parameter.device, parameter.dtype)  # [G, F]
            log_weights = self.belief(features).to(games.device)  # [G, T]
            keys = belief_keys(games, log_weights, W, generator)
        worlds = deal_worlds(games, keys)
        game, action = alive.nonzero(as_tuple=True)  # [P] (game, action) pairs
        offsets = torch.arange(W, device=games.device)
        parent = (game[:, None] * W + offsets).flatten()  # [P * W] the world of each child
        children = worlds.select(parent)
        chooser = children.current_player
        children.step(action.repeat_interleave(W), check=False)
        child_streams = None  # [P * W] one per child, in the order of ``parent``
        if streams is not None:
            pair = child(streams[game], action)  # [P]
            child_streams = child(pair[:, None], offsets[None, :]).flatten()
        values = torch.zeros(*alive.shape, W, device=games.device)
        values[game, action] = self.rollouts.values(children, chooser, child_streams).view(-1, W)
        return values


def _better_half(score: torch.Tensor, alive: torch.Tensor) -> torch.Tensor:
    """[G, A] bool: the ``ceil(k / 2)`` alive actions of best ``score`` in each game of ``k``."""
    keep = (alive.sum(1, keepdim=True) + 1) // 2  # [G, 1]
    order = score.masked_fill(~alive, -torch.inf).argsort(dim=1, descending=True, stable=True)
    rank = order.argsort(dim=1)  # [G, A] each action's place, best first
    return alive & (rank < keep)


def _ranks(agent: object) -> bool:
    """Whether ``agent`` offers its probabilities (``policy(batch) -> [B, A]``)."""
    return callable(getattr(agent, "policy", None))
