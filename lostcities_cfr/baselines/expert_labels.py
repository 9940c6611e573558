"""Expert iteration's labels: self-play games whose decisions a search values, batched.

The *expert* is a :class:`~lostcities_cfr.search.SearchAgent` over the network being trained
(the *apprentice*); a label is the search's mean value of each candidate action at one
decision, which :func:`soft_targets` turns into a target distribution (Anthony, Tian and
Barber, "Thinking Fast and Slow with Deep Learning and Tree Search", NIPS 2017, train on the
expert's choices; AlphaZero on its visit counts; here the rollout values through a
temperature, since the search's means are in points).

:func:`label_games` plays a batch of games in lockstep (the arena's
:func:`~lostcities_cfr.evaluation.arena.play_out`). At every step the decisions the search
takes (more than one legal action, at most ``max_deck`` cards in the deck) go to it in *one*
call, all games at once: their worlds are one batch and their rollouts one lockstep batch.
The search plays its action there; elsewhere the network's sample is played. Every game
draws from its own random stream (:mod:`~lostcities_cfr.search.streams`), keyed by its id and
step, so a game's labels are the same whether it is labelled with others or alone
(:func:`label_one_at_a_time`, which the differential test and the labelling benchmark
compare with).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from lostcities_cfr.baselines.rollout import play_games
from lostcities_cfr.cfr.networks import masked_log_softmax
from lostcities_cfr.game import GameBatch
from lostcities_cfr.search import SearchAgent
from lostcities_cfr.search.streams import child, streams_of, unit

# Draws of one decision's stream: the network's sample, and the search's own stream.
_SAMPLE, _SEARCH = 0, 1


@dataclass(frozen=True)
class Labels:
    """N decisions of a batch of games, in the order they were taken: those the search took
    and, with ``anchor``, the others with a choice (``searched`` False)."""

    game: torch.Tensor  # [N] int64: the game's id
    step: torch.Tensor  # [N] int64: decisions played in the game before this one
    seat: torch.Tensor  # [N] int64: the player who decided
    features: torch.Tensor  # [N, F] float32: that player's information state
    legal: torch.Tensor  # [N, A] bool
    values: torch.Tensor  # [N, A] float32: the search's mean in points; NaN: not valued
    played: torch.Tensor  # [N] int64: the search's action, which the game played
    deviated: torch.Tensor  # [N] bool: it is not the network's most probable action
    returns: torch.Tensor  # [N] float32: the game's final score difference for the seat
    prior: torch.Tensor  # [N, A] float32: the network's probabilities there (0: illegal)
    # [N] bool: the search took the decision; False: an anchor row (``anchor``), whose
    # values are NaN and whose ``played`` is the network's sample
    searched: torch.Tensor

    def __len__(self) -> int:
        return self.game.shape[0]

    @staticmethod
    def cat(parts: list[Labels]) -> Labels:
        """The rows of ``parts``, one after another."""
        return Labels(
            **{f.name: torch.cat([getattr(p, f.name) for p in parts]) for f in fields(Labels)}
        )


def soft_targets(values: torch.Tensor, temperature: float) -> torch.Tensor:
    """[n, A]: ``softmax(values / temperature)`` over each row's valued actions, 0 elsewhere.

    ``values`` [n, A] float: the search's mean value in points of each action it valued,
    NaN at the others (not candidates, or illegal); every row values at least one action.
    ``temperature`` in points: at 0+ the target is the best mean's action, at a few points
    actions whose means differ by less than the noise share the mass.
    """
    valued = ~values.isnan()
    logits = (values / temperature).masked_fill(~valued, -torch.inf)
    return torch.softmax(logits, dim=1)


def mixed_targets(
    values: torch.Tensor, played: torch.Tensor, temperature: float, played_weight: float
) -> torch.Tensor:
    """[n, A]: ``played_weight`` on the action the search played (``played`` [n] int64), the
    rest on :func:`soft_targets` of ``values`` [n, A].

    The search's means carry the noise of its rollouts (several points at 16 worlds, more
    than what separates a good network's best actions, ``docs/search.md``); the action it
    played passed its test against the network's own choice, so weight on it keeps a target
    from following that noise alone.
    """
    soft = soft_targets(values, temperature)
    if played_weight == 0:
        return soft
    return _toward_played(soft, played, played_weight)


def deviation_targets(
    prior: torch.Tensor, played: torch.Tensor, deviated: torch.Tensor, played_weight: float
) -> torch.Tensor:
    """[n, A]: the network's own probabilities ``prior`` [n, A], except where the search
    ``deviated`` ([n] bool), where ``played_weight`` of them moves to the action it played
    (``played`` [n] int64).

    The search plays the network's most probable action unless a challenger beats it by
    ``z`` standard errors of their paired difference: a deviation is the search's only
    evidence against the network, and everywhere else the target is the network as it was
    labelled, so the cross-entropy there is a KL term to it (its gradient is 0 until the
    network drifts). The search's means alone (:func:`soft_targets`) are rollout noise of
    several points, larger than what separates the network's best actions.
    """
    moved = _toward_played(prior, played, played_weight)
    return torch.where(deviated[:, None], moved, prior)


def _toward_played(
    target: torch.Tensor, played: torch.Tensor, played_weight: float
) -> torch.Tensor:
    """[n, A]: ``played_weight`` of each row's mass on its ``played`` action ([n] int64), the
    rest spread as ``target`` [n, A] spreads it."""
    hard = torch.zeros_like(target).scatter_(1, played[:, None], 1.0)
    return played_weight * hard + (1 - played_weight) * target


def soft_cross_entropy(
    logits: torch.Tensor, legal: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    """Mean over rows of ``-sum_a target[a] log pi(a)``, ``pi = masked_softmax(logits)``.

    ``logits`` [n, A], ``legal`` [n, A] bool, ``targets`` [n, A] (0 at illegal actions).
    Its minimum over ``logits`` is the targets' entropy, reached at ``pi = targets``.
    """
    return -(targets * masked_log_softmax(logits, legal)).sum(1).mean()


def label_games(
    search: SearchAgent,
    batch: GameBatch,
    seed: int,
    game_ids: torch.Tensor | None = None,
    anchor: bool = False,
) -> tuple[Labels, int]:
    """Play ``batch`` to the end, in place, with ``search`` labelling (module docstring).

    Args:
        search: the expert; its base (``search.rollouts.policy``) is a network agent that
            offers its probabilities, and plays the decisions the search does not take.
        batch: the games, at their start.
        seed: keys every game's random stream, with its id and step.
        game_ids: [B] int64, each game's id (its stream); default ``0..B-1``.
        anchor: also return the decisions with a choice that the search does not take
            (``searched`` False), for targets that keep the network where it was there.

    Returns:
        The labelled decisions, and the number of decisions both players took.
    """
    policy = search.rollouts.policy
    ids = torch.arange(batch.batch_size, device=batch.device) if game_ids is None else game_ids
    parts: list[tuple[torch.Tensor, ...]] = []
    decisions = 0

    def decide(batch: GameBatch, step: int, rows: torch.Tensor) -> torch.Tensor:
        nonlocal decisions
        live = ~batch.done  # [B]
        legal = batch.legal_mask()  # [B, A]
        probs = policy.policy(batch)  # [B, A], 0 at illegal actions and in finished games
        keys = child(streams_of(seed, ids[rows]), step)  # [B] this decision's stream
        actions = _inverse_transform(probs, unit(child(keys, _SAMPLE)))
        searched = live & (legal.sum(1) > 1)
        if search.max_deck is not None:
            searched &= batch.deck_count <= search.max_deck
        index = searched.nonzero().squeeze(1)  # [n]
        A = legal.shape[1]
        values = torch.full((len(actions), A), torch.nan, device=actions.device)  # [B, A]
        if len(index):
            chosen, values[index], _ = search.search(
                batch.select(index), child(keys[index], _SEARCH)
            )
            actions[index] = chosen
        kept = live & (legal.sum(1) > 1) if anchor else searched
        index = kept.nonzero().squeeze(1)  # [m]
        if len(index):
            parts.append(
                (
                    ids[rows[index]],
                    torch.full_like(index, step),
                    batch.current_player[index],
                    batch.select(index).encode(),
                    legal[index],
                    values[index],
                    actions[index],
                    actions[index] != probs[index].argmax(1),
                    probs[index],
                    searched[index],
                )
            )
        decisions += int(live.sum())
        return actions

    returns = play_games(batch, decide, check=False)  # [B, 2] by row of the batch
    if not parts:
        return _empty(batch), decisions
    game, step, seat, features, legal, values, played, deviated, prior, searched = (
        torch.cat(p) for p in zip(*parts, strict=True)
    )
    # ``game`` holds ids; ``returns`` is indexed by row of this batch
    row_of = torch.empty(int(ids.max()) + 1, dtype=torch.int64, device=ids.device)
    row_of[ids] = torch.arange(len(ids), device=ids.device)
    own = returns.to(game.device)[row_of[game]].gather(1, seat[:, None]).squeeze(1)
    deviated &= searched  # the network's own sample is no deviation
    labels = Labels(
        game, step, seat, features, legal, values, played, deviated, own, prior, searched
    )
    return labels, decisions


def label_one_at_a_time(
    search: SearchAgent, batch: GameBatch, seed: int, anchor: bool = False
) -> tuple[Labels, int]:
    """:func:`label_games` called once per game of ``batch``, each game under its own id:
    the same labels, in game order, at the cost of one search call per game and decision."""
    parts, decisions = [], 0
    for g in range(batch.batch_size):
        one = torch.tensor([g], device=batch.device)
        labels, n = label_games(search, batch.select(one), seed, game_ids=one, anchor=anchor)
        parts.append(labels)
        decisions += n
    return Labels.cat(parts), decisions


def _inverse_transform(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """[B] the action each row's uniform ``u`` ([B]) draws from ``probs`` ([B, A]): the
    first whose cumulative probability exceeds ``u`` times the row's total (rows of zeros,
    finished games, draw an action the engine ignores)."""
    cumulative = probs.cumsum(1)  # [B, A]
    drawn = (cumulative <= u[:, None] * cumulative[:, -1:]).sum(1)
    # u rounded up to the total would pass every action: take the last possible one
    last = probs.shape[1] - 1 - (probs.flip(1) > 0).int().argmax(1)
    return torch.minimum(drawn, last)


def _empty(batch: GameBatch) -> Labels:
    """No labelled decision (every one had a single legal action, or a deck too full)."""
    A, F = batch.legal_mask().shape[1], batch.encode().shape[1]
    device = batch.device
    long = torch.zeros(0, dtype=torch.int64, device=device)
    return Labels(
        game=long,
        step=long,
        seat=long,
        features=torch.zeros(0, F, device=device),
        legal=torch.zeros(0, A, dtype=torch.bool, device=device),
        values=torch.zeros(0, A, device=device),
        played=long,
        deviated=torch.zeros(0, dtype=torch.bool, device=device),
        returns=torch.zeros(0, device=device),
        prior=torch.zeros(0, A, device=device),
        searched=torch.zeros(0, dtype=torch.bool, device=device),
    )
