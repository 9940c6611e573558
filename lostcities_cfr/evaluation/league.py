"""A league: round-robin duplicate matches between agents, each pair's games kept on disk.

Every pair of entrants plays ``games`` duplicate games (:func:`~lostcities_cfr.evaluation.arena.evaluate`)
on the same deals (``seed``), so that pairs are compared on equal cards. A finished pair is
written at once to ``<folder>/pairs/<key>.json`` (through a temporary file and a rename, so
an interruption never leaves half a file), and a later league in the same folder reuses it:
adding an agent plays only its new pairs, and an interrupted league loses only the pair that
was playing.

A pair's key is a hash of what decides its games: both specs, the files they name (by
content, so a checkpoint rewritten at the same path plays again), the number of games, the
seed and the rules. Labels are not part of it: renaming an agent reuses its games. A pair is
stored from the side of the spec that sorts first, which plays as the arena's first agent
(seed ``2 * seed + 1``; the other ``2 * seed + 2``, as ``evaluate`` seeds them), so a pair's
games do not depend on the order agents are listed in.

:func:`~lostcities_cfr.evaluation.ratings.bradley_terry` turns the pairs into ratings.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from lostcities_cfr.agents import Agent, agent_from_spec
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.evaluation.arena import check_agent_rules, evaluate, wilson_interval
from lostcities_cfr.evaluation.ratings import PairScore, Ratings, bradley_terry
from lostcities_cfr.game import Rules

PAIRS_FOLDER = "pairs"
_FORMAT = 1  # the pair file's layout; a file of another layout is played again


@dataclass(frozen=True)
class Entrant:
    """An agent of the league: its label in results and its spec."""

    label: str
    spec: str

    @classmethod
    def parse(cls, text: str) -> Entrant:
        """``LABEL=SPEC`` or a bare ``SPEC`` (its own label)."""
        label, sep, spec = text.partition("=")
        # ``heuristic:balanced:noisy=0.1`` has '=' inside an option: a label has no ':'
        if not sep or ":" in label:
            label, spec = text, text
        if not label or not spec:
            raise ConfigError(f"league entrant {text!r}; expected LABEL=SPEC or SPEC")
        return cls(label.strip(), spec.strip())


@dataclass(frozen=True)
class PairResult:
    """Agent ``a`` against agent ``b`` (labels), from ``a``'s side.

    ``score_diff`` is a's mean score minus b's per game, ``score_diff_ci`` its 95% interval
    (over deals); ``cached``: read from the folder rather than played now.
    """

    a: str
    b: str
    games: int
    wins: int
    draws: int
    losses: int
    score_diff: float
    score_diff_ci: tuple[float, float]
    seconds: float
    cached: bool

    @property
    def score(self) -> float:
        """a's wins plus half its draws."""
        return self.wins + self.draws / 2

    @property
    def win_rate(self) -> float:
        return self.wins / self.games

    @property
    def win_rate_ci(self) -> tuple[float, float]:
        return wilson_interval(self.wins, self.games)

    def flipped(self) -> PairResult:
        """The same games from b's side."""
        low, high = self.score_diff_ci
        return dataclasses.replace(
            self,
            a=self.b,
            b=self.a,
            wins=self.losses,
            losses=self.wins,
            score_diff=-self.score_diff,
            score_diff_ci=(-high, -low),
        )


@dataclass(frozen=True)
class League:
    """The entrants, every pair's result (a before b in the entrants' order) and the ratings."""

    entrants: tuple[Entrant, ...]
    pairs: tuple[PairResult, ...]
    ratings: Ratings
    games: int
    seed: int
    rules: Rules


def check_entrants(entrants: Sequence[Entrant]) -> None:
    """Refuse a league of fewer than two agents or with a label twice, naming them."""
    if len(entrants) < 2:
        raise ConfigError(
            f"a league needs at least two agents; got {len(entrants)}: {[e.spec for e in entrants]}"
        )
    labels = [e.label for e in entrants]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise ConfigError(f"league labels must differ; given more than once: {twice}")


def build_agents(entrants: Sequence[Entrant], rules: Rules, seed: int) -> list[Agent]:
    """Every entrant's agent, checked against ``rules``, before any game is played.

    Raises:
        AgentSpecError: a spec that names no agent (names it).
        ConfigError: an agent of other rules (names it and both rules).
    """
    agents = [agent_from_spec(e.spec, seed=seed) for e in entrants]
    for agent in agents:
        check_agent_rules(agent, rules)
    return agents


def spec_identity(spec: str) -> str:
    """The spec, with the content hash of every file a ':'-separated part of it names."""
    hashes = []
    for part in spec.split(":"):
        path = Path(part)
        if part and path.is_file():
            hashes.append(hashlib.sha256(path.read_bytes()).hexdigest()[:16])
    return spec if not hashes else f"{spec}#{'#'.join(hashes)}"


def pair_key(identity_a: str, identity_b: str, games: int, seed: int, rules: Rules) -> str:
    """The file name (without ``.json``) of a pair's games, from both agents'
    :func:`spec_identity`; the same for (b, a)."""
    identity = {
        "format": _FORMAT,
        "specs": sorted([identity_a, identity_b]),
        "games": games,
        "seed": seed,
        "rules": dataclasses.asdict(rules),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]


def play_league(
    entrants: Sequence[Entrant],
    folder: Path,
    games: int = 1000,
    seed: int = 0,
    rules: Rules | None = None,
    device: str = "cpu",
    progress: Callable[[int, int, PairResult], None] | None = None,
    prior_games: float = 1.0,
) -> League:
    """Play every pair not yet in ``folder``, then fit the ratings.

    Args:
        entrants: at least two, labels distinct.
        folder: where the pairs' games are kept (made if missing).
        games: duplicate games per pair (odd counts round up).
        seed: seeds every pair's deals (the same for all) and the agents.
        rules: the variant (classic by default).
        device: where the games run.
        progress: called after every pair with (pairs done, pairs in all, its result).
        prior_games: see :func:`~lostcities_cfr.evaluation.ratings.bradley_terry`.

    Raises:
        ConfigError, AgentSpecError: bad entrants, before any game (nothing is lost).
    """
    rules = Rules.classic() if rules is None else rules
    games += games % 2
    check_entrants(entrants)
    build_agents(entrants, rules, seed)
    pairs_folder = folder / PAIRS_FOLDER
    pairs_folder.mkdir(parents=True, exist_ok=True)
    identities = {e.spec: spec_identity(e.spec) for e in entrants}
    results = []
    schedule = list(combinations(range(len(entrants)), 2))
    for done, (i, j) in enumerate(schedule, start=1):
        a, b = entrants[i], entrants[j]
        if identities[b.spec] < identities[a.spec]:
            a, b = b, a
        key = pair_key(identities[a.spec], identities[b.spec], games, seed, rules)
        result = _play_or_load(a, b, pairs_folder / f"{key}.json", games, seed, rules, device)
        if a is not entrants[i]:
            result = result.flipped()
        results.append(result)
        if progress is not None:
            progress(done, len(schedule), result)
    index = {e.label: k for k, e in enumerate(entrants)}
    scores = [PairScore(index[r.a], index[r.b], r.score, r.games) for r in results]
    ratings = bradley_terry([e.label for e in entrants], scores, prior_games)
    return League(tuple(entrants), tuple(results), ratings, games, seed, rules)


def _play_or_load(
    a: Entrant, b: Entrant, path: Path, games: int, seed: int, rules: Rules, device: str
) -> PairResult:
    """a against b, from the file at ``path`` or played now and written there."""
    stored = _read_pair(path)
    if stored is None:
        result = evaluate(
            agent_from_spec(a.spec, seed=2 * seed + 1),
            agent_from_spec(b.spec, seed=2 * seed + 2),
            games,
            rules=rules,
            seed=seed,
            device=device,
        )
        stored = {
            "format": _FORMAT,
            "agent": a.spec,
            "opponent": b.spec,
            "evaluation": result.to_dict(),
        }
        _write_atomically(path, stored)
        cached = False
    else:
        cached = True
    rounds = stored["evaluation"]["rounds"]
    return PairResult(
        a=a.label,
        b=b.label,
        games=rounds["n"],
        wins=rounds["wins"],
        draws=rounds["draws"],
        losses=rounds["losses"],
        score_diff=rounds["score_diff"],
        score_diff_ci=tuple(rounds["score_diff_ci"]),
        seconds=stored["evaluation"]["seconds"],
        cached=cached,
    )


def _read_pair(path: Path) -> dict | None:
    """A stored pair, or None when missing or unreadable (then it is played again)."""
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return stored if isinstance(stored, dict) and stored.get("format") == _FORMAT else None


def _write_atomically(path: Path, data: dict) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(temporary, path)
