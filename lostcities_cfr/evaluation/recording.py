"""The arena's games as JSON lines: record them, read them back, replay them exactly.

``evaluate(..., recorder=GameRecorder())`` keeps every game's actions (only when asked: an
unrecorded evaluation runs as before), and ``evaluate --record FILE`` writes them, one game
per line, the two seatings of a deal side by side::

    {"game": 0, "deal": 0, "seed": 0, "deals": 500, "rules": {"n_colors": 5, ...},
     "seats": ["best", "random"], "agent_seat": 0, "actions": [12, 106, ...],
     "scores": [57, -12]}

``seats`` are the agents' names (their spec strings on the command line) by seat, seat 0
moving first; ``agent_seat`` is the seat of the agent being measured (``--agent``);
``scores`` are by seat. The deal is the arena's: deal ``deal`` of
``GameBatch.new(rules, deals, seed)`` (the arena draws all of its deals from one seed, so
the seed alone does not name one). Replaying ``actions`` from it through the reference
engine gives ``scores`` exactly (:func:`replay_states` checks it).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from lostcities_cfr.errors import LostCitiesError, ReplayError
from lostcities_cfr.game.batched import GameBatch
from lostcities_cfr.game.protocol import Decide
from lostcities_cfr.game.reference import GameState
from lostcities_cfr.game.rules import Rules


@dataclass(frozen=True)
class GameRecord:
    """One recorded game (the module docstring's fields)."""

    game: int
    deal: int
    seed: int
    deals: int
    rules: Rules
    seats: tuple[str, str]
    agent_seat: int
    actions: tuple[int, ...]
    scores: tuple[int, int]

    @property
    def score_diff(self) -> int:
        """The measured agent's score minus its opponent's."""
        return self.scores[self.agent_seat] - self.scores[1 - self.agent_seat]

    def to_json(self) -> str:
        """One line of a record file."""
        fields = asdict(self)
        fields.update(seats=list(self.seats), actions=list(self.actions), scores=list(self.scores))
        return json.dumps(fields, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str, where: str) -> GameRecord:
        """Parse one line; ``where`` (``FILE line N``) starts every error message.

        Raises:
            ReplayError: not JSON, a field missing or of the wrong type or range.
        """
        try:
            data = json.loads(line)
        except json.JSONDecodeError as error:
            raise ReplayError(f"{where}: not a JSON object ({error})") from None
        if not isinstance(data, dict):
            raise ReplayError(f"{where}: not a JSON object")
        missing = [name for name in cls.__dataclass_fields__ if name not in data]
        if missing:
            raise ReplayError(f"{where}: field(s) {', '.join(missing)} missing")

        def integers(name: str, length: int | None = None) -> list[int]:
            value = data[name]
            if not isinstance(value, list) or not all(_is_int(v) for v in value):
                raise ReplayError(f"{where}: {name} must be a list of ints, got {value!r:.60}")
            if length is not None and len(value) != length:
                raise ReplayError(f"{where}: {name} must hold {length} ints, got {len(value)}")
            return value

        for name in ("game", "deal", "seed", "deals", "agent_seat"):
            if not _is_int(data[name]):
                raise ReplayError(f"{where}: {name} must be an int, got {data[name]!r:.60}")
        if not 0 <= data["deal"] < data["deals"]:
            raise ReplayError(f"{where}: deal {data['deal']} must lie in 0..deals-1")
        if data["agent_seat"] not in (0, 1):
            raise ReplayError(f"{where}: agent_seat {data['agent_seat']} must be 0 or 1")
        seats = data["seats"]
        if not (
            isinstance(seats, list) and len(seats) == 2 and all(isinstance(s, str) for s in seats)
        ):
            raise ReplayError(f"{where}: seats must be two agent names, got {seats!r:.60}")
        try:
            rules = Rules(**data["rules"])
        except (TypeError, LostCitiesError) as error:
            raise ReplayError(f"{where}: rules {data['rules']!r:.80}: {error}") from None
        return cls(
            game=data["game"],
            deal=data["deal"],
            seed=data["seed"],
            deals=data["deals"],
            rules=rules,
            seats=(seats[0], seats[1]),
            agent_seat=data["agent_seat"],
            actions=tuple(integers("actions")),
            scores=tuple(integers("scores", 2)),
        )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def write_records(path: str | Path, records: Sequence[GameRecord]) -> None:
    """Write ``records`` as JSON lines."""
    with open(path, "w", encoding="utf-8") as file:
        file.writelines(record.to_json() + "\n" for record in records)


def read_records(path: str | Path) -> list[GameRecord]:
    """The games of a record file, in its order.

    Raises:
        ReplayError: the file is missing, empty, or a line does not parse (names the line).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ReplayError(f"cannot read the record file {path}: {error}") from None
    records = [
        GameRecord.from_json(line, f"{path} line {number}")
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip()
    ]
    if not records:
        raise ReplayError(f"{path} holds no games: write one with evaluate --record {path}")
    return records


def deal_state(record: GameRecord) -> GameState:
    """The game's deal as a reference-engine state before the first decision."""
    deck = _arena_decks(record.rules, record.seed, record.deals)[record.deal]
    H = record.rules.hand_size
    return GameState.from_deal(record.rules, [deck[:H], deck[H : 2 * H]], deck[2 * H :])


@functools.lru_cache(maxsize=8)
def _arena_decks(rules: Rules, seed: int, deals: int) -> list[list[int]]:
    """Every shuffle the arena deals from ``seed`` (``deals`` of them), as type ids."""
    return GameBatch.new(rules, deals, seed=seed).deck.tolist()


def replay_states(record: GameRecord) -> list[GameState]:
    """The state before every recorded decision, then the final one (``len(actions) + 1``).

    Raises:
        ReplayError: an action is illegal where it was recorded, the game does not end
            with the last action, or its final scores differ from the recorded ones.
    """
    state = deal_state(record)
    states = [state.clone()]
    for number, action in enumerate(record.actions):
        if state.is_terminal:
            raise ReplayError(
                f"game {record.game}: the round ends after decision {number}, but "
                f"{len(record.actions)} are recorded"
            )
        try:
            state.apply(action)
        except LostCitiesError as error:
            raise ReplayError(f"game {record.game}, decision {number}: {error}") from None
        states.append(state.clone())
    if not state.is_terminal:
        raise ReplayError(f"game {record.game}: the round has not ended after its last action")
    if state.scores() != record.scores:
        raise ReplayError(
            f"game {record.game}: replaying gives scores {list(state.scores())}, the file "
            f"says {list(record.scores)} (a file from another version of the engine?)"
        )
    return states


class GameRecorder:
    """Keeps the actions of every game that the arena plays while it watches.

    :meth:`watch` wraps one seating's ``decide``; :meth:`finish` turns what it saw into
    :class:`GameRecord` s (``records``), two per deal, the agent seated first then second.
    """

    def __init__(self) -> None:
        self.records: list[GameRecord] = []
        self._steps: list[list[tuple[torch.Tensor, torch.Tensor]]] = []  # per seating

    def watch(self, decide: Decide) -> Decide:
        """``decide``, also keeping the actions of the games still running at each step."""
        steps: list[tuple[torch.Tensor, torch.Tensor]] = []  # (rows [L], actions [L]) per step
        self._steps.append(steps)

        def recording(batch: GameBatch, step: int, rows: torch.Tensor) -> torch.Tensor:
            actions = decide(batch, step, rows)  # [B]
            live = ~batch.done  # finished games not yet dropped: their entries mean nothing
            steps.append((rows[live].cpu(), actions[live].cpu()))
            return actions

        return recording

    def finish(
        self,
        rules: Rules,
        seed: int,
        names: tuple[str, str],
        scores: Sequence[torch.Tensor],
    ) -> None:
        """Build the records once both seatings are played.

        Args:
            rules, seed: what the arena dealt from.
            names: the measured agent's and the opponent's names.
            scores: per seating, the final scores by seat ([D, 2]).
        """
        deals = scores[0].shape[0]
        actions = [_actions_per_game(steps, deals) for steps in self._steps]  # [seating][deal]
        for deal in range(deals):
            for seating in (0, 1):
                seats = names if seating == 0 else names[::-1]
                self.records.append(
                    GameRecord(
                        game=len(self.records),
                        deal=deal,
                        seed=seed,
                        deals=deals,
                        rules=rules,
                        seats=(seats[0], seats[1]),
                        agent_seat=seating,
                        actions=tuple(actions[seating][deal]),
                        scores=tuple(scores[seating][deal].tolist()),
                    )
                )


def _actions_per_game(
    steps: list[tuple[torch.Tensor, torch.Tensor]], games: int
) -> list[list[int]]:
    """Per game, its actions in order, from the (rows, actions) of every step."""
    table = torch.full((games, len(steps)), -1, dtype=torch.int64)  # [D, S]; -1: game over
    for step, (rows, actions) in enumerate(steps):
        table[rows, step] = actions
    lengths = (table >= 0).sum(1).tolist()  # a game plays from step 0 until it ends
    return [row[:length] for row, length in zip(table.tolist(), lengths, strict=True)]
