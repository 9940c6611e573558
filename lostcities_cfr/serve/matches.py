"""A person's games against the agent, kept per browser session.

A :class:`Match` is one or three rounds on the reference engine with the seats
alternating, as ``play`` plays them: the person moves by action id, and the agent answers
at once, each of its decisions kept with its reasoning
(:func:`~lostcities_cfr.agents.base.act_and_explain`) and its milliseconds for the page to
show. A move is
checked before anything changes, so a refused one leaves the match as it was.

:class:`Sessions` holds the matches of every browser session (a random cookie) and
forgets the oldest beyond its bounds, so a page left open for days cannot fill the memory.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict

from lostcities_cfr.agents import Agent, act_and_explain, agent_name
from lostcities_cfr.agents.base import Explainer
from lostcities_cfr.errors import IllegalActionError, RequestError
from lostcities_cfr.game.batched import GameBatch
from lostcities_cfr.game.reference import GameState
from lostcities_cfr.game.rules import Rules
from lostcities_cfr.serve import views

MAX_SEED = 2**63 - 1


class Match:
    """One person against ``agent``: ``rounds`` rounds, the person seated ``seat`` in the
    first (seats alternate), round ``k`` dealt from ``seed + k``.

    Args:
        agent: the opponent; answers every decision of its seat at once.
        rules: the variant.
        rounds: 1, or 3 for a match with scores summed.
        seat: the person's seat in the first round (0 moves first).
        seed: seeds the deals (``play --seed`` deals the same rounds).
    """

    def __init__(self, agent: Agent, rules: Rules, rounds: int, seat: int, seed: int) -> None:
        self.agent = agent
        self.rules = rules
        self.rounds = rounds
        self.seat = seat
        self.seed = seed
        self.round_index = 0
        self.round_scores: list[tuple[int, int]] = []  # (person, agent) of finished rounds
        self._start_round()

    @property
    def you(self) -> int:
        """The person's seat in this round."""
        return (self.seat + self.round_index) % 2

    @property
    def match_over(self) -> bool:
        return self.state.is_terminal and self.round_index == self.rounds - 1

    def move(self, action: int, turn: int) -> None:
        """The person's decision ``action``, made at ``turn``; then the agent's answer.

        Raises:
            RequestError: the round is over (409), ``turn`` is not the game's (409: a second
                click or a stale page), or the action is illegal (400); nothing changes.
        """
        if self.state.is_terminal:
            raise RequestError("the round is over: start the next round or a new game", 409)
        if turn != self.state.turn:
            raise RequestError(
                f"this move was made at turn {turn}, but the game is at turn {self.state.turn}: "
                "reload the game",
                409,
            )
        after = self.state.clone()
        try:
            after.apply(action)
        except IllegalActionError as error:  # names the action and why
            raise RequestError(str(error)) from None
        text = views.move_text(self.state, action)
        if action == self.rules.draw_deck_action:
            text += f" ({self.rules.card_name(self.state.deck[0])})"
        self.state = after
        self.log.append({"who": "you", "text": text})
        self._agent_turns()

    def next_round(self) -> None:
        """Deal the next round of the match.

        Raises:
            RequestError: the round is not over, or the match is (409).
        """
        if not self.state.is_terminal:
            raise RequestError("the round is still running: finish it first", 409)
        if self.match_over:
            raise RequestError("the match is over: start a new game", 409)
        self.round_index += 1
        self._start_round()

    def view(self, game_id: str) -> dict:
        """Everything the page shows of this match, from the person's side."""
        state, you = self.state, self.you
        finished = [*self.round_scores]
        running = state.scores()
        return {
            "id": game_id,
            "agent": agent_name(self.agent),
            "rules": self.rules.preset_name(),
            # the seed names the deck order: shown once the round can no longer gain from it
            "seed": self.seed if state.is_terminal else None,
            "round": self.round_index + 1,
            "rounds": self.rounds,
            "you": you,
            "board": views.board(state, bottom=you, show_both_hands=state.is_terminal),
            "your_turn": not state.is_terminal and state.current_player == you,
            "moves": views.moves(state) if not state.is_terminal else [],
            "replies": self.replies,
            "log": self.log,
            "round_over": state.is_terminal,
            "match_over": self.match_over,
            "scores": {
                "round": [running[you], running[1 - you]],
                "rounds": [list(scores) for scores in finished],
                "match": [sum(s[0] for s in finished), sum(s[1] for s in finished)],
            },
            "summary": views.round_summary(state) if state.is_terminal else None,
        }

    def _start_round(self) -> None:
        self.state = GameState.new(self.rules, self.seed + self.round_index)
        self.log: list[dict] = []
        self.replies: list[dict] = []  # the agent's last turn: its decisions with reasoning
        self._agent_turns()

    def _agent_turns(self) -> None:
        """The agent decides until it is the person's turn or the round ends."""
        explains = isinstance(self.agent, Explainer)
        if not self.state.is_terminal and self.state.current_player != self.you:
            self.replies = []
        while not self.state.is_terminal and self.state.current_player != self.you:
            start = time.perf_counter()
            actions, reasons = act_and_explain(self.agent, GameBatch.from_states([self.state]))
            ms = 1000 * (time.perf_counter() - start)
            action = int(actions[0])
            reply = views.reasoning(
                self.state, {k: v[0] for k, v in reasons.items()}, action, explains
            )
            reply["ms"] = round(ms, 1)  # what the decision cost: a search thinks, a network not
            self.replies.append(reply)
            self.log.append({"who": "agent", "text": reply["text"]})
            self.state.apply(action)
        if self.state.is_terminal:
            you, scores = self.you, self.state.scores()
            self.round_scores.append((scores[you], scores[1 - you]))


class Sessions:
    """The matches of every browser session, behind one lock.

    Args:
        max_sessions: sessions kept; the least recently used is forgotten beyond it.
        max_matches: matches kept per session; its oldest is forgotten beyond it.
    """

    def __init__(self, max_sessions: int = 256, max_matches: int = 8) -> None:
        self.max_sessions = max_sessions
        self.max_matches = max_matches
        # Requests run in a thread pool; the agent and the matches are not thread-safe.
        self.lock = threading.Lock()
        self._sessions: OrderedDict[str, OrderedDict[str, Match]] = OrderedDict()

    def open(self, session: str | None) -> str:
        """``session`` if it is known (now the most recently used), else a new one."""
        if session in self._sessions:
            self._sessions.move_to_end(session)
            return session
        session = secrets.token_urlsafe(16)
        self._sessions[session] = OrderedDict()
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return session

    def add(self, session: str, match: Match) -> str:
        """Keep ``match`` in ``session``; its new id."""
        matches = self._sessions[session]
        game_id = secrets.token_hex(6)
        matches[game_id] = match
        while len(matches) > self.max_matches:
            matches.popitem(last=False)
        return game_id

    def get(self, session: str, game_id: str) -> Match:
        """The session's match ``game_id``.

        Raises:
            RequestError: no such game in this session (404; another session's games are
                not visible).
        """
        match = self._sessions.get(session, {}).get(game_id)
        if match is None:
            raise RequestError(f"unknown game {game_id!r:.40}: start a new game", 404)
        return match
