"""Bradley-Terry ratings with 95% intervals, fitted to pairwise game outcomes by statsmodels.

The Bradley-Terry model (Bradley & Terry, "Rank Analysis of Incomplete Block Designs", 1952;
the logistic form of Elo's ratings) gives each agent a strength ``r`` and says agent i
beats agent j with probability ``1 / (1 + exp(r_j - r_i))``. Fitting it is a logistic
regression without intercept: one row per pair, the column of i at +1 and of j at -1, the
share of games i won as the response, weighted by the games played (Agresti, "Categorical
Data Analysis", 3rd ed., section 11.6). statsmodels' binomial GLM fits it by iteratively
reweighted least squares and gives the covariance of the estimates (the inverse Fisher
information), so the intervals are the model's Wald intervals, not a bootstrap or a guess.

Conventions:

- A draw counts as half a win for each side.
- Ratings are on the Elo scale (``400 / ln 10`` points per unit of log-odds: 200 points
  between two agents means the stronger wins about 76% of games) and centred on the agents'
  mean, so each interval says how far an agent lies from the field's average.
- Every pair gets ``prior_games`` extra games, split evenly (one by default): without it an
  agent that wins every game (the best agent against ``random``) has no finite maximum
  likelihood rating. One game in a thousand moves a rating by a few points at most, except
  where all games went one way.
- The games of a pair are treated as independent. The arena's duplicate pairs are not (a
  deal's two games share its cards), but seat and deal luck cancel within a pair, so the
  intervals err on the wide side, as the arena's rate intervals do (``arena.py``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lostcities_cfr.errors import ConfigError
from lostcities_cfr.evaluation.arena import Z_95

ELO_PER_LOGIT = 400 / math.log(10)


@dataclass(frozen=True)
class PairScore:
    """What agent ``a`` scored against agent ``b`` (indexes into the labels)."""

    a: int
    b: int
    score: float  # a's wins plus half its draws
    games: int


@dataclass(frozen=True)
class Ratings:
    """Elo-scale Bradley-Terry ratings, centred on their mean, with 95% intervals.

    Attributes:
        labels: the agents, in the order of every array.
        elo: [K] ratings.
        standard_error: [K] their standard errors.
        ci_low, ci_high: [K] the 95% Wald intervals.
        prior_games: the games added to every pair (module docstring).
    """

    labels: tuple[str, ...]
    elo: np.ndarray
    standard_error: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    prior_games: float

    def expected_score(self, i: int, j: int) -> float:
        """The model's share of games agent i wins against agent j (draws half)."""
        return 1.0 / (1.0 + 10.0 ** ((self.elo[j] - self.elo[i]) / 400.0))

    def to_rows(self) -> list[dict[str, object]]:
        """One dict per agent, strongest first (for CSV and JSON)."""
        order = np.argsort(-self.elo, kind="stable")
        return [
            {
                "rank": rank + 1,
                "label": self.labels[i],
                "elo": float(self.elo[i]),
                "elo_ci_low": float(self.ci_low[i]),
                "elo_ci_high": float(self.ci_high[i]),
                "standard_error": float(self.standard_error[i]),
            }
            for rank, i in enumerate(order)
        ]


def bradley_terry(
    labels: Sequence[str], pairs: Sequence[PairScore], prior_games: float = 1.0
) -> Ratings:
    """Fit Bradley-Terry ratings of ``labels`` to ``pairs`` (module docstring).

    Raises:
        ConfigError: fewer than two agents, a pair naming an unknown or the same agent, or
            agents that no chain of pairs connects (their ratings would be unrelated).
    """
    import statsmodels.api as sm  # heavy (scipy, pandas): only when ratings are fitted
    from statsmodels.tools.sm_exceptions import PerfectSeparationWarning

    K = len(labels)
    if K < 2:
        raise ConfigError(f"ratings need at least two agents; got {K}: {list(labels)}")
    for pair in pairs:
        if not (0 <= pair.a < K and 0 <= pair.b < K) or pair.a == pair.b:
            raise ConfigError(f"pair {pair} must name two different agents of 0..{K - 1}")
    _check_connected(labels, pairs)
    design = np.zeros((len(pairs), K))  # [P, K]: +1 for a, -1 for b
    rows = np.arange(len(pairs))
    design[rows, [p.a for p in pairs]] = 1.0
    design[rows, [p.b for p in pairs]] = -1.0
    games = np.array([p.games + prior_games for p in pairs], dtype=float)  # [P]
    share = np.array([p.score + prior_games / 2 for p in pairs]) / games  # [P]
    # Agent 0's rating is fixed at 0 (its column dropped), which identifies the rest.
    model = sm.GLM(share, design[:, 1:], family=sm.families.Binomial(), var_weights=games)
    with warnings.catch_warnings():
        # A model with as many ratings as pairs (two agents) fits every share exactly, which
        # statsmodels reports as "perfect prediction" and as a 0/0 residual scale; neither
        # touches a binomial fit (its scale is 1, the prior keeps every rating finite).
        warnings.simplefilter("ignore", PerfectSeparationWarning)
        warnings.filterwarnings("ignore", ".* encountered in scalar divide", RuntimeWarning)
        fit = model.fit()
    ratings = np.r_[0.0, fit.params]  # [K] log-odds
    covariance = np.zeros((K, K))
    covariance[1:, 1:] = fit.cov_params()
    centre = np.eye(K) - 1.0 / K  # r - mean(r), a linear map: its covariance follows
    ratings, covariance = centre @ ratings, centre @ covariance @ centre.T
    elo = ELO_PER_LOGIT * ratings
    error = ELO_PER_LOGIT * np.sqrt(np.clip(np.diag(covariance), 0.0, None))
    return Ratings(
        labels=tuple(labels),
        elo=elo,
        standard_error=error,
        ci_low=elo - Z_95 * error,
        ci_high=elo + Z_95 * error,
        prior_games=prior_games,
    )


def _check_connected(labels: Sequence[str], pairs: Sequence[PairScore]) -> None:
    reached, frontier = {0}, [0]
    while frontier:
        i = frontier.pop()
        for pair in pairs:
            for x, y in ((pair.a, pair.b), (pair.b, pair.a)):
                if x == i and y not in reached:
                    reached.add(y)
                    frontier.append(y)
    missing = [labels[i] for i in range(len(labels)) if i not in reached]
    if missing:
        raise ConfigError(
            f"no games connect {missing} to {labels[0]!r}: their ratings would be unrelated"
        )
