"""Recorded games (``evaluate --record``) on the page: a list, and every decision of a game
with the reasoning of the agent that made it, recomputed.

The agents are rebuilt from the specs the file names (their ``seats``) and asked at every
decision what they would do there (:func:`~lostcities_cfr.agents.base.explain_actions`);
the recorded action is the one played. ``py:`` specs are not rebuilt from a file (they
import and call code the file names), and a spec that cannot be rebuilt (a checkpoint no
longer on disk) leaves its decisions without reasoning, with the reason shown.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from lostcities_cfr.agents import Agent, agent_from_spec, explain_actions
from lostcities_cfr.agents.base import Explainer
from lostcities_cfr.errors import LostCitiesError, ReplayError, RequestError
from lostcities_cfr.evaluation.arena import check_agent_rules
from lostcities_cfr.evaluation.recording import GameRecord, read_records, replay_states
from lostcities_cfr.game.batched import GameBatch
from lostcities_cfr.game.reference import GameState
from lostcities_cfr.serve import views

UNSAFE_KINDS = ("py",)  # spec kinds that run code named by the file


class ReplayLibrary:
    """The games of one record file and the agents that played them.

    Args:
        path: the file (``evaluate --record FILE``).
        build_agent: ``(spec) -> Agent``; ``agent_from_spec`` seeded with 0 by default.
    """

    def __init__(
        self,
        path: str | Path,
        build_agent: Callable[[str], Agent] = lambda spec: agent_from_spec(spec, seed=0),
    ) -> None:
        self.path = Path(path)
        self.records: list[GameRecord] = read_records(path)
        self._build_agent = build_agent
        self._agents: dict[str, Agent | str] = {}  # spec -> agent, or why there is none
        # the states of the games opened last: stepping through one replays it once
        self._states = functools.lru_cache(maxsize=8)(self._replay)

    def summaries(self) -> list[dict]:
        """One row per game for the page's list."""
        return [
            {
                "game": record.game,
                "deal": record.deal,
                "seats": list(record.seats),
                "agent": record.seats[record.agent_seat],
                "opponent": record.seats[1 - record.agent_seat],
                "agent_seat": record.agent_seat,
                "scores": list(record.scores),
                "diff": record.score_diff,
                "decisions": len(record.actions),
            }
            for record in self.records
        ]

    def load_agents(self) -> None:
        """Build every agent the file names now rather than at the first step."""
        for spec in {spec for record in self.records for spec in record.seats}:
            self.agent(spec, self.records[0])

    def agent(self, spec: str, record: GameRecord) -> Agent | str:
        """The agent named ``spec``, or a sentence saying why it cannot be rebuilt."""
        if spec not in self._agents:
            if spec.split(":")[0] in UNSAFE_KINDS:
                self._agents[spec] = f"{spec}: a py: agent is not rebuilt from a file"
            else:
                try:
                    agent = self._build_agent(spec)
                    check_agent_rules(agent, record.rules)
                    self._agents[spec] = agent
                except LostCitiesError as error:
                    self._agents[spec] = f"cannot rebuild {spec}: {error}"
        return self._agents[spec]

    def step(self, game: int, step: int) -> dict:
        """Game ``game`` before its decision ``step`` (after the last, at ``step = len``).

        Raises:
            RequestError: no such game or step (404), or the game does not replay (422).
        """
        if not 0 <= game < len(self.records):
            raise RequestError(
                f"game {game}: {self.path.name} holds games 0..{len(self.records) - 1}", 404
            )
        record = self.records[game]
        if not 0 <= step <= len(record.actions):
            raise RequestError(
                f"step {step}: game {game} has decisions 0..{len(record.actions) - 1} "
                f"and its end at step {len(record.actions)}",
                404,
            )
        states = self._states(game)
        state = states[step]
        view = {
            "game": game,
            "step": step,
            "steps": len(record.actions),
            "seats": list(record.seats),
            "agent_seat": record.agent_seat,
            "recorded_scores": list(record.scores),
            "board": views.board(state, bottom=record.agent_seat, show_both_hands=True),
            "decision": None,
            "summary": views.round_summary(state) if state.is_terminal else None,
        }
        if step < len(record.actions):
            view["decision"] = self._decision(record, state, record.actions[step])
        return view

    def _decision(self, record: GameRecord, state: GameState, action: int) -> dict:
        """The recorded action and the mover's reasoning recomputed (or why there is none)."""
        spec = record.seats[state.current_player]
        agent = self.agent(spec, record)
        if isinstance(agent, str):
            return {
                "player": state.current_player,
                "action": action,
                "text": views.move_text(state, action),
                "agent": spec,
                "unavailable": agent,
            }
        reasons = explain_actions(agent, GameBatch.from_states([state]))
        row = {label: values[0] for label, values in reasons.items()}
        decision = views.reasoning(state, row, action, isinstance(agent, Explainer))
        return {**decision, "agent": spec, "unavailable": None}

    def _replay(self, game: int) -> list[GameState]:
        try:
            return replay_states(self.records[game])
        except ReplayError as error:
            raise RequestError(f"{self.path.name}: {error}", 422) from None
