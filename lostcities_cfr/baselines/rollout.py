"""Decisions recorded as rows while whole games play out, on any game of the protocol.

Both baselines learn from rows of (features, legal mask, action) taken from games played
in lockstep as one batch (``game/protocol.py``): behaviour cloning from every decision of a
teacher, PPO from the learner's decisions against its opponents (:func:`learner_rollout`).
:func:`play_games` plays a batch to the end, :class:`DecisionRecorder` collects the rows
step by step, and :meth:`DecisionRecorder.rows` joins them once the games end, with each
row's final return from the seat that took it.

Only the protocol is asked who moves (``current_player``, per game: in poker it changes
from game to game within a step), so the same code plays Lost Cities, Kuhn and Leduc.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch

from lostcities_cfr.agents import Agent
from lostcities_cfr.evaluation.arena import play_out
from lostcities_cfr.game import GameBatch, Rules
from lostcities_cfr.game.lost_cities import as_game
from lostcities_cfr.game.protocol import BatchedGames, Decide, Game
from lostcities_cfr.inference import InferenceQueue

LEARNER = "policy"  # the learner's name in the inference queue, and its policy's name


@dataclass(frozen=True)
class Decisions:
    """N recorded decisions, in the order they were taken (step by step)."""

    game: torch.Tensor  # [N] int64: the game's index in the rollout's batch
    step: torch.Tensor  # [N] int64: decisions played in the game before this one
    seat: torch.Tensor  # [N] int64: the player who decided
    features: torch.Tensor  # [N, F] float32: BatchedGames.encode() of that player
    legal: torch.Tensor  # [N, A] bool
    actions: torch.Tensor  # [N] int64
    log_probs: torch.Tensor  # [N] float32: log-probability of the action when it was sampled
    # [N] float32: the game's final return from the seat (Lost Cities: the score
    # difference, own minus other; poker: chips won)
    returns: torch.Tensor

    def __len__(self) -> int:
        return self.actions.shape[0]

    def select(self, index: torch.Tensor) -> Decisions:
        """The rows at ``index`` ([n] int64)."""
        return Decisions(**{f.name: getattr(self, f.name)[index] for f in fields(self)})


class DecisionRecorder:
    """Collects the rows of one lockstep game batch, one :meth:`add` per step."""

    def __init__(self) -> None:
        self._chunks: list[tuple[torch.Tensor, ...]] = []

    def add(
        self,
        game: torch.Tensor,
        step: int | torch.Tensor,
        seat: int | torch.Tensor,
        features: torch.Tensor,
        legal: torch.Tensor,
        actions: torch.Tensor,
        log_probs: torch.Tensor | None = None,
    ) -> None:
        """Record n decisions of one step: games [n], features [n, F], legal [n, A], actions [n].

        ``step`` and ``seat``: each row's decisions played before it and the player who
        took it, as [n] int64 or one number for all rows (Lost Cities' lockstep games
        share both). ``log_probs`` [n] (``None``: 0, for a teacher that does not sample).
        """
        n = game.shape[0]
        if log_probs is None:
            log_probs = torch.zeros(n, device=game.device)
        step_seat = torch.stack(
            [torch.as_tensor(v, device=game.device).expand(n) for v in (step, seat)], 1
        )  # [n, 2] int64
        self._chunks.append((game, step_seat, features, legal, actions, log_probs))

    def rows(self, returns: torch.Tensor) -> Decisions:
        """Every recorded row, with its game's final return from its seat (``returns``
        [D, 2], as :func:`play_games` gives them)."""
        game, step_seat, features, legal, actions, log_probs = (
            torch.cat(parts) for parts in zip(*self._chunks, strict=True)
        )
        seat = step_seat[:, 1]
        own = returns.to(game.device)[game].gather(1, seat[:, None]).squeeze(1)  # [N]
        return Decisions(
            game=game,
            step=step_seat[:, 0],
            seat=seat,
            features=features,
            legal=legal,
            actions=actions,
            log_probs=log_probs,
            returns=own,
        )


def play_games(batch: BatchedGames, decide: Decide, check: bool = True) -> torch.Tensor:
    """Play every game of ``batch`` to the end, in place, one ``decide`` call per step; the
    games' returns, [D, 2] float32 on the CPU in the batch's order.

    ``decide`` gets the batch, the step and ``rows`` ([B] int64: each row's index in the
    original batch); finished games may stay in the batch with no legal action, and their
    entries are ignored. Lost Cities plays through the arena's own loop
    (:func:`~lostcities_cfr.evaluation.arena.play_out`: its rounds and these drop finished games
    alike, so a seed gives the same games), whose final scores give the returns (own minus
    other); any other game through the protocol's ``step``, ``done``, ``select`` and
    ``returns``.
    """
    if isinstance(batch, GameBatch):
        scores = play_out(batch, decide, check=check).scores.float()  # [D, 2]
        return scores - scores.flip(1)
    returns = torch.zeros(batch.batch_size, 2)
    rows = torch.arange(batch.batch_size, device=batch.device)
    step = 0
    while batch.batch_size:
        batch.step(decide(batch, step, rows), check=check)
        step += 1
        done = batch.done
        if done.any():  # games of a few decisions: drop them at once
            returns[rows[done].cpu()] = batch.returns()[done].cpu()
            keep = (~done).nonzero().squeeze(1)
            rows = rows[keep]
            batch = batch.select(keep)
    return returns


def learner_rollout(
    game: Game | Rules | str,
    queue: InferenceQueue,
    opponents: Sequence[str | Agent],
    games: int,
    seed: int,
    generator: torch.Generator,
    device: str | torch.device = "cpu",
) -> tuple[Decisions, int]:
    """The learner's decisions in ``games`` games against ``opponents``; and all decisions.

    The learner is the queue's network ``"policy"``. An opponent is a queue name (the
    learner's own name makes it play itself; both sample their masked softmax with
    ``generator``) or an agent, which plays all of its games of a step in one ``act`` call
    (a fixed opponent: an approximate best response learns against it). Game g: the learner
    sits in seat ``g % 2`` and faces ``opponents[g // 2 % len(opponents)]``, so every
    opponent meets both seats. ``game``: any game of the protocol (Lost Cities rules or a
    preset name stand for theirs); deals come from ``seed``. Returns the learner's rows
    (log-probabilities and final returns filled in) and the number of decisions both sides
    took.
    """
    batch = as_game(game).new_batch(games, seed=seed, device=device)
    recorder = DecisionRecorder()
    decisions = 0

    def decide(batch: BatchedGames, step: int, rows: torch.Tensor) -> torch.Tensor:
        nonlocal decisions
        mover = batch.current_player  # [B]
        features, legal = batch.encode(), batch.legal_mask()  # [B, F], [B, A]
        live = ~batch.done
        learner = live & ((rows & 1) == mover)  # [B] bool
        group = (rows >> 1) % len(opponents)
        players: dict[str, torch.Tensor] = {LEARNER: learner}  # queue name -> [B] bool
        agents: list[tuple[Agent, torch.Tensor]] = []  # (agent, its games [n]) of this step
        for k, opponent in enumerate(opponents):
            mine = live & ~learner & (group == k)  # [B] bool
            if isinstance(opponent, str):
                players[opponent] = players.get(opponent, torch.zeros_like(live)) | mine
            elif mine.any():
                agents.append((opponent, mine.nonzero().squeeze(1)))
        index = {name: mask.nonzero().squeeze(1) for name, mask in players.items()}
        tickets = {name: queue.submit(name, features[i], legal[i]) for name, i in index.items()}
        probs = torch.zeros(legal.shape, device=legal.device)  # [B, A]
        for name, ticket in tickets.items():
            probs[index[name]] = ticket.result()
        # finished games and the agents' games: any action, ignored or replaced below
        sampled = torch.zeros_like(live).index_fill_(0, torch.cat([*index.values()]), True)
        probs[:, 0].masked_fill_(~sampled, 1.0)
        actions = torch.multinomial(probs, 1, generator=generator).squeeze(1)  # [B]
        for agent, games_of_agent in agents:
            actions[games_of_agent] = agent.act(batch.select(games_of_agent))
        i = learner.nonzero().squeeze(1)  # not index[LEARNER]: the learner may be an opponent
        log_probs = probs[i].gather(1, actions[i, None]).squeeze(1).log()
        turn = batch.turn[i]  # [n]
        recorder.add(rows[i], turn, mover[i], features[i], legal[i], actions[i], log_probs)
        decisions += int(live.sum())
        return actions

    returns = play_games(batch, decide, check=False)
    return recorder.rows(returns), decisions
