"""Decisions recorded as rows while :func:`~lostcities_cfr.arena.play_out` plays whole games.

Both baselines learn from rows of (features, legal mask, action) taken from games played
in lockstep on the batched engine: behaviour cloning from every decision of a teacher,
PPO from the learner's decisions against its opponents (:func:`learner_rollout`).
:class:`DecisionRecorder` collects them step by step, :meth:`DecisionRecorder.rows` joins
them once the games end, with each row's final return from the seat that took it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch

from lostcities_cfr.agents import Agent
from lostcities_cfr.arena import Finals, play_out
from lostcities_cfr.game import GameBatch, Rules
from lostcities_cfr.inference import InferenceQueue

LEARNER = "policy"  # the learner's name in the inference queue, and its policy's name


@dataclass(frozen=True)
class Decisions:
    """N recorded decisions, in the order they were taken (step by step)."""

    game: torch.Tensor  # [N] int64: the game's index in the rollout's batch
    step: torch.Tensor  # [N] int64: decisions played in the game before this one
    seat: torch.Tensor  # [N] int64: the player who decided
    features: torch.Tensor  # [N, F] float32: GameBatch.encode() of that player
    legal: torch.Tensor  # [N, A] bool
    actions: torch.Tensor  # [N] int64
    log_probs: torch.Tensor  # [N] float32: log-probability of the action when it was sampled
    returns: torch.Tensor  # [N] float32: the game's final score difference, the seat's view

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
        step: int,
        seat: int,
        features: torch.Tensor,
        legal: torch.Tensor,
        actions: torch.Tensor,
        log_probs: torch.Tensor | None = None,
    ) -> None:
        """Record n decisions of one step: games [n], features [n, F], legal [n, A], actions [n].

        All games of a lockstep step share the player to move, hence one ``seat``.
        ``log_probs`` [n] (``None``: 0, for a teacher that does not sample).
        """
        n = game.shape[0]
        if log_probs is None:
            log_probs = torch.zeros(n, device=game.device)
        step_seat = torch.tensor([step, seat], device=game.device).expand(n, 2)
        self._chunks.append((game, step_seat, features, legal, actions, log_probs))

    def rows(self, finals: Finals) -> Decisions:
        """Every recorded row, with the final score difference from its seat (``finals``)."""
        game, step_seat, features, legal, actions, log_probs = (
            torch.cat(parts) for parts in zip(*self._chunks, strict=True)
        )
        seat = step_seat[:, 1]
        scores = finals.scores.to(game.device)[game].float()  # [N, 2]
        own = scores.gather(1, seat[:, None]).squeeze(1)
        return Decisions(
            game=game,
            step=step_seat[:, 0],
            seat=seat,
            features=features,
            legal=legal,
            actions=actions,
            log_probs=log_probs,
            returns=2 * own - scores.sum(1),  # own - other
        )


def learner_rollout(
    rules: Rules,
    queue: InferenceQueue,
    opponents: Sequence[str | Agent],
    games: int,
    seed: int,
    generator: torch.Generator,
    device: str | torch.device = "cpu",
) -> tuple[Decisions, int]:
    """The learner's decisions in ``games`` rounds against ``opponents``; and all decisions.

    The learner is the queue's network ``"policy"``. An opponent is a queue name (the
    learner's own name makes it play itself; both sample their masked softmax with
    ``generator``) or an agent, which plays all of its games of a step in one ``act`` call
    (a fixed opponent: an approximate best response learns against it). Game g: the learner
    sits in seat ``g % 2`` and faces ``opponents[g // 2 % len(opponents)]``, so every
    opponent meets both seats. Deals come from ``seed``. Returns the learner's rows
    (log-probabilities and final returns filled in) and the number of decisions both sides
    took.
    """
    batch = GameBatch.new(rules, games, seed=seed, device=device)
    recorder = DecisionRecorder()
    decisions = 0

    def decide(batch: GameBatch, step: int, rows: torch.Tensor) -> torch.Tensor:
        nonlocal decisions
        mover = (step >> 1) & 1
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
        recorder.add(rows[i], step, mover, features[i], legal[i], actions[i], log_probs)
        decisions += int(live.sum())
        return actions

    finals = play_out(batch, decide, check=False)
    return recorder.rows(finals), decisions
