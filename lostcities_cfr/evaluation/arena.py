"""The evaluation arena: two agents, many games, duplicate format, honest intervals.

:func:`evaluate` deals ``games // 2`` rounds (``games`` rounded up to an even
number) and plays every deal twice with the seats swapped, so that neither
the luck of the cards nor the advantage of moving first favours one side
(the duplicate format of bridge and poker evaluations). All games run in
lockstep on the batched engine: both copies of a deal start together and every
step advances every unfinished game by one decision, so within each copy the
same seat is to move in every game and each agent answers all of its games in
one ``act`` call (one forward per network per step). Finished games are
dropped from the batch as they accumulate, so long games do not keep short
ones' rows busy.

A three-round match (the rules page, ``docs/rules.md``) sums the scores of three consecutive
deals played with the same seating; with ``D`` deals there are ``D // 3``
matches per seating, mirrored like the rounds (deals beyond the last full
triple count for rounds only).

Intervals are 95%: Wilson score intervals for the win, draw and loss rates
(Wilson 1927, "Probable inference, the law of succession, and statistical
inference"), and Student-t intervals for mean score differences. The
difference's unit is the deal (the mean of its two mirrored games), because the
two games of a deal are not independent; rate intervals treat games as
independent, which the mirrored pairing only makes conservative when seat and
deal luck cancel (the usual case).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import torch

from lostcities_cfr.agents.base import Agent, agent_name
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.evaluation.recording import GameRecorder
from lostcities_cfr.game.batched import GameBatch, expedition_scores
from lostcities_cfr.game.encoding import feature_size
from lostcities_cfr.game.protocol import Decide
from lostcities_cfr.game.rules import Rules

Z_95 = 1.959963984540054  # the standard normal's 97.5% quantile
MATCH_ROUNDS = 3
# Drop finished games from the lockstep batch once this share of its rows is done.
_COMPACT_SHARE = 0.25


def describe_rules(rules: Rules) -> str:
    """A variant with the sizes its networks see: ``tiny rules (feature size 40, 15 actions)``."""
    return f"{rules.preset_name()} rules (feature size {feature_size(rules)}, {rules.n_actions} actions)"


def plays_rules(own: Rules, rules: Rules) -> bool:
    """Whether a network made for ``own`` rules can play ``rules``: the same features and
    actions. Scoring constants and ``max_turns`` may differ (the quickstart trains with
    ``max_turns: 400`` and plays the classic game)."""
    return (feature_size(own), own.n_actions) == (feature_size(rules), rules.n_actions)


def check_agent_rules(agent: Agent, rules: Rules) -> None:
    """Refuse an agent made for other rules before any game starts.

    An agent tied to one variant (a checkpoint's network) says so in a ``rules``
    attribute; agents without one play any rules.
    """
    own = getattr(agent, "rules", None)
    if own is not None and not plays_rules(own, rules):
        raise ConfigError(
            f"agent {agent_name(agent)!r} plays {describe_rules(own)}; this game is "
            f"{describe_rules(rules)}: play it with {own.preset_name()} rules"
        )


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion ``successes / n``.

    Unlike the normal approximation it stays inside [0, 1] and keeps its coverage
    near 0 and 1 (a 100% win rate still gets a lower bound below 1).
    ``n = 0`` gives the uninformative (0, 1).
    """
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} must lie in 0..n={n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, center - half), min(1.0, center + half)


def t_quantile_975(df: int) -> float:
    """Student's t 97.5% quantile with ``df`` degrees of freedom.

    Exact for 1 and 2, the Cornish-Fisher expansion (Abramowitz & Stegun 26.7.5)
    otherwise: within 0.13% at df = 3 and within 0.001% from df = 10.
    """
    if df < 1:
        raise ValueError(f"df={df} must be >= 1")
    if df == 1:
        return math.tan(math.pi * 0.475)
    if df == 2:
        return 0.95 * math.sqrt(2 / (4 * 0.975 * 0.025))
    z = Z_95
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def mean_interval(values: torch.Tensor) -> tuple[float, tuple[float, float]]:
    """The mean of ``values`` ([n]) and its 95% Student-t interval.

    With fewer than two values the interval is undefined: ``(nan, nan)``.
    """
    values = values.double().flatten()
    n = values.numel()
    if n == 0:
        return math.nan, (math.nan, math.nan)
    mean = float(values.mean())
    if n < 2:
        return mean, (math.nan, math.nan)
    half = t_quantile_975(n - 1) * float(values.std()) / math.sqrt(n)
    return mean, (mean - half, mean + half)


@dataclass(frozen=True)
class Outcome:
    """Win/draw/loss of the agent against the opponent over ``n`` rounds or matches.

    Attributes:
        n: games (or matches) played.
        wins, draws, losses: counts from the agent's side.
        win_rate, draw_rate, loss_rate: the counts over ``n``.
        win_rate_ci, draw_rate_ci, loss_rate_ci: Wilson 95% intervals.
        score_diff: mean of the agent's score minus the opponent's.
        score_diff_ci: its 95% interval (unit: the mirrored pair).
        agent_score, opponent_score: mean scores.
    """

    n: int
    wins: int
    draws: int
    losses: int
    win_rate: float
    draw_rate: float
    loss_rate: float
    win_rate_ci: tuple[float, float]
    draw_rate_ci: tuple[float, float]
    loss_rate_ci: tuple[float, float]
    score_diff: float
    score_diff_ci: tuple[float, float]
    agent_score: float
    opponent_score: float

    @classmethod
    def of(cls, agent: torch.Tensor, opponent: torch.Tensor) -> Outcome:
        """From scores ``[2, P]``: row 0 the agent seated first, row 1 the mirror, P pairs."""
        n = agent.numel()
        wins = int((agent > opponent).sum())
        draws = int((agent == opponent).sum())
        losses = n - wins - draws
        diff, diff_ci = mean_interval((agent - opponent).double().mean(0))
        return cls(
            n=n,
            wins=wins,
            draws=draws,
            losses=losses,
            win_rate=wins / n,
            draw_rate=draws / n,
            loss_rate=losses / n,
            win_rate_ci=wilson_interval(wins, n),
            draw_rate_ci=wilson_interval(draws, n),
            loss_rate_ci=wilson_interval(losses, n),
            score_diff=diff,
            score_diff_ci=diff_ci,
            agent_score=float(agent.double().mean()),
            opponent_score=float(opponent.double().mean()),
        )


@dataclass(frozen=True)
class PlayStyle:
    """How one side played, per game (round).

    Attributes:
        expeditions: expeditions started per game.
        negative_share: share of started expeditions that ended below zero
            (``nan`` if none was started).
        wagers: wagers played per game.
    """

    expeditions: float
    negative_share: float
    wagers: float

    @classmethod
    def of(cls, rules: Rules, expeditions: torch.Tensor) -> PlayStyle:
        """From one side's final expeditions: int8 ``[G, T]`` copies per type."""
        G = expeditions.shape[0]
        counts = expeditions.view(G, rules.n_colors, rules.n_ranks + 1).long()
        score = expedition_scores(rules, expeditions)  # [G, C]
        started = counts.sum(-1) > 0
        n_started = int(started.sum())
        negative = int((started & (score < 0)).sum())
        return cls(
            expeditions=n_started / G,
            negative_share=negative / n_started if n_started else math.nan,
            wagers=float(counts[..., 0].sum()) / G,
        )


@dataclass(frozen=True)
class EvaluationResult:
    """Everything :func:`evaluate` measured; ``to_dict`` gives the ``--json`` fields.

    Attributes:
        agent, opponent: the two agents' names.
        rules: the rules played, field by field.
        seed: seed of the deals.
        games: games played (2 per deal), deals: distinct deals, matches:
            three-round matches played (2 per triple of deals).
        rounds: the agent's outcome per game; matches_outcome: per three-round
            match (``None`` with fewer than three deals).
        agent_style, opponent_style: expeditions, negative share, wagers per game.
        game_length: mean turns per game (a turn is one player's card and draw decision).
        capped_games: games ended by ``rules.max_turns`` rather than the deck.
        seconds, games_per_s: wall time of the games (agents' decisions included).
    """

    agent: str
    opponent: str
    rules: dict[str, int]
    seed: int
    games: int
    deals: int
    matches: int
    rounds: Outcome
    matches_outcome: Outcome | None
    agent_style: PlayStyle
    opponent_style: PlayStyle
    game_length: float
    capped_games: int
    seconds: float
    games_per_s: float

    def to_dict(self) -> dict:
        """JSON-ready: tuples become lists, undefined values (``nan``) become ``None``."""
        return _json_ready(asdict(self))

    def format_table(self) -> str:
        """A table a person can read, with the same figures as :meth:`to_dict`."""

        def pct(x: float, ci: tuple[float, float]) -> str:
            return f"{100 * x:5.1f}%  [{100 * ci[0]:5.1f}, {100 * ci[1]:5.1f}]"

        def num(x: float, ci: tuple[float, float] | None = None) -> str:
            text = "n/a" if math.isnan(x) else f"{x:+.2f}"
            if ci is not None and not math.isnan(ci[0]):
                text += f"  [{ci[0]:+.2f}, {ci[1]:+.2f}]"
            return text

        w = max(34, len(self.agent) + 9)  # the first figures' column fits the agent's name
        lines = [
            f"{self.agent} vs {self.opponent}: {self.games} games ({self.deals} deals, "
            f"each played from both seats), {Rules(**self.rules).preset_name()} rules, "
            f"seed {self.seed}",
            f"{self.seconds:.1f} s, {self.games_per_s:.0f} games/s",
            "",
            f"{'':24}{'rounds':{w}}three-round matches",
        ]
        outcomes = [self.rounds, self.matches_outcome]
        rows = [
            ("games", lambda o: f"{o.n}"),
            ("win rate [95% CI]", lambda o: pct(o.win_rate, o.win_rate_ci)),
            ("draw rate", lambda o: pct(o.draw_rate, o.draw_rate_ci)),
            ("loss rate", lambda o: pct(o.loss_rate, o.loss_rate_ci)),
            ("score diff [95% CI]", lambda o: num(o.score_diff, o.score_diff_ci)),
            ("agent score", lambda o: num(o.agent_score)),
            ("opponent score", lambda o: num(o.opponent_score)),
        ]
        for label, cell in rows:
            cells = [cell(o) if o is not None else "n/a (fewer than 3 deals)" for o in outcomes]
            lines.append(f"{label:24}{cells[0]:{w}}{cells[1]}")
        lines += ["", f"{'per game':24}{'agent: ' + self.agent:{w}}opponent: {self.opponent}"]
        styles = [self.agent_style, self.opponent_style]
        for label, value in (
            ("expeditions started", lambda s: f"{s.expeditions:.2f}"),
            (
                "... ending negative",
                lambda s: (
                    "n/a" if math.isnan(s.negative_share) else f"{100 * s.negative_share:.1f}%"
                ),
            ),
            ("wagers played", lambda s: f"{s.wagers:.2f}"),
        ):
            lines.append(f"{label:24}{value(styles[0]):{w}}{value(styles[1])}")
        lines.append(f"{'game length (turns)':24}{self.game_length:.1f}")
        if self.capped_games:
            lines.append(f"{'ended by max_turns':24}{self.capped_games}")
        return "\n".join(lines)


def evaluate(
    agent_a: Agent,
    agent_b: Agent,
    games: int = 1000,
    rules: Rules | None = None,
    seed: int = 0,
    device: str | torch.device = "cpu",
    recorder: GameRecorder | None = None,
) -> EvaluationResult:
    """Play ``agent_a`` against ``agent_b`` in duplicate format (module docstring).

    Args:
        agent_a: the agent whose results are reported ("agent").
        agent_b: the opponent.
        games: games to play; an odd number is rounded up (each deal is played twice).
        rules: the variant (classic by default).
        seed: seeds the deals; the agents' own randomness is theirs to seed.
        device: where the games (and so the agents' inputs) live.
        recorder: keeps every game's actions in ``recorder.records``
            (:mod:`lostcities_cfr.evaluation.recording`).

    Raises:
        IllegalActionError: an agent chose an illegal action (names the game).
        ConfigError: an agent was made for other rules (:func:`check_agent_rules`).
    """
    if games < 1:
        raise ValueError(f"games={games} must be >= 1")
    rules = Rules.classic() if rules is None else rules
    check_agent_rules(agent_a, rules)
    check_agent_rules(agent_b, rules)
    deals = (games + 1) // 2
    start = time.perf_counter()
    first_seating = GameBatch.new(rules, deals, seed=seed, device=device)
    mirrored = first_seating.clone()  # the same deals, to be played with the seats swapped
    decides = [_seats(agent_a, agent_b), _seats(agent_b, agent_a)]
    if recorder is not None:
        decides = [recorder.watch(decide) for decide in decides]
    finals = [play_out(first_seating, decides[0]), play_out(mirrored, decides[1])]
    seconds = time.perf_counter() - start
    if recorder is not None:
        names = (agent_name(agent_a), agent_name(agent_b))
        recorder.finish(rules, seed, names, [final.scores for final in finals])

    # scores and expeditions as [2 seatings, D, ...], from agent_a's side
    scores = torch.stack([finals[0].scores, finals[1].scores.flip(-1)])  # [2, D, 2]
    expeditions = torch.stack([finals[0].expeditions, finals[1].expeditions.flip(1)])
    turns = torch.stack([finals[0].turn, finals[1].turn])  # [2, D]
    a, b = scores[..., 0], scores[..., 1]
    n_matches = deals // MATCH_ROUNDS
    match_outcome = None
    if n_matches:

        def per_match(s: torch.Tensor) -> torch.Tensor:  # [2, D] -> [2, M]
            return s[:, : n_matches * MATCH_ROUNDS].reshape(2, n_matches, MATCH_ROUNDS).sum(-1)

        match_outcome = Outcome.of(per_match(a), per_match(b))
    return EvaluationResult(
        agent=agent_name(agent_a),
        opponent=agent_name(agent_b),
        rules=asdict(rules),
        seed=seed,
        games=2 * deals,
        deals=deals,
        matches=2 * n_matches,
        rounds=Outcome.of(a, b),
        matches_outcome=match_outcome,
        agent_style=PlayStyle.of(rules, expeditions[:, :, 0].flatten(0, 1)),
        opponent_style=PlayStyle.of(rules, expeditions[:, :, 1].flatten(0, 1)),
        game_length=float(turns.double().mean()) / 2,
        capped_games=int((turns >= rules.max_turns).sum()),
        seconds=seconds,
        games_per_s=2 * deals / seconds,
    )


@dataclass(frozen=True)
class Finals:
    """The final state of every game :func:`play_out` played, on CPU, in the batch's order."""

    scores: torch.Tensor  # [D, 2] int64, by seat
    expeditions: torch.Tensor  # [D, 2, T] int8, by seat
    turn: torch.Tensor  # [D] int64


def play_out(batch: GameBatch, decide: Decide, check: bool = True) -> Finals:
    """Play every game of ``batch`` to the end, in place, one ``decide`` call per step.

    Every game starts at turn 0 and each step advances all unfinished ones, so
    all of them share the player to move, ``(step >> 1) & 1``. ``decide`` gets the
    batch, the step and ``rows`` ([B] int64: each row's index in the original
    batch); finished games stay in it until a quarter of its rows are done, with
    no legal action (the engine ignores their entries). ``check``: the engine
    refuses illegal actions (``GameBatch.step``).
    """
    D = batch.batch_size
    scores = torch.zeros(D, 2, dtype=torch.int64)
    expeditions = torch.zeros(D, 2, batch.rules.n_types, dtype=torch.int8)
    turn = torch.zeros(D, dtype=torch.int64)
    rows = torch.arange(D, device=batch.device)  # original index of each live row
    step = 0
    while batch.batch_size:
        batch.step(decide(batch, step, rows), check=check)
        step += 1
        done = batch.done
        n_done = int(done.sum())
        if n_done == batch.batch_size or n_done >= _COMPACT_SHARE * batch.batch_size:
            finished = rows[done].cpu()
            scores[finished] = batch.scores()[done].cpu()
            expeditions[finished] = batch.expeditions[done].cpu()
            turn[finished] = batch.turn[done].cpu()
            keep = (~done).nonzero().squeeze(1)
            rows = rows[keep]
            batch = batch.select(keep)
    return Finals(scores=scores, expeditions=expeditions, turn=turn)


def _seats(seat0: Agent, seat1: Agent) -> Decide:
    """Two agents taking turns: ``seat0`` moves at steps 0, 1, 4, 5..., ``seat1`` between."""
    return lambda batch, step, rows: (seat1 if step & 2 else seat0).act(batch)


def _json_ready(value: object) -> object:
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
