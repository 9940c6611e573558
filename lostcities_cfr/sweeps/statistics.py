"""Figures over seeds with honest intervals (Agarwal et al., "Deep Reinforcement Learning at
the Edge of the Statistical Precipice", NeurIPS 2021).

- The **interquartile mean** (IQM): the mean of the middle half of the seeds' results
  (:func:`scipy.stats.trim_mean` cutting a quarter each side); less swayed by one odd seed
  than the mean, less wasteful of seeds than the median.
- A 95% **stratified bootstrap** interval of it: the seeds resampled with replacement, the
  statistic recomputed, its percentiles read off (:func:`scipy.stats.bootstrap`). Stratified
  means resampled within each task; a setting's figure here is one metric of one game, one
  task, so the strata are the seeds themselves.
- The **probability of improvement** ``P(X > Y)``: how often a run of setting X ends better
  than a run of setting Y, ties counting half (the Mann-Whitney statistic over the pairs of
  seeds), with a bootstrap interval that resamples each setting's seeds apart.

Each takes ``[N]`` arrays of one value per seed; with one seed the interval is (nan, nan):
one seed says nothing of the spread.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
RESAMPLES = 2000


def iqm(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """The interquartile mean of ``values`` along ``axis``."""
    return stats.trim_mean(values, 0.25, axis=axis)


def iqm_interval(values: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """A 95% stratified-bootstrap interval of the IQM over seeds ``values [N]``."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return math.nan, math.nan
    if np.ptp(values) == 0:  # every seed alike: no spread to resample
        return float(values[0]), float(values[0])
    result = stats.bootstrap(
        (values,),
        iqm,
        confidence_level=CONFIDENCE,
        n_resamples=RESAMPLES,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def probability_of_improvement(
    x: np.ndarray, y: np.ndarray, higher_is_better: bool = True
) -> float:
    """``P(X > Y)`` over every pair of a seed of X and a seed of Y, ties counting half
    (``P(X < Y)`` where lower is better)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    difference = x[..., :, None] - y[..., None, :]  # [..., Nx, Ny]
    if not higher_is_better:
        difference = -difference
    better = (difference > 0) + 0.5 * (difference == 0)
    return better.mean(axis=(-2, -1))


def improvement_interval(
    x: np.ndarray, y: np.ndarray, higher_is_better: bool = True, seed: int = 0
) -> tuple[float, float]:
    """A 95% bootstrap interval of :func:`probability_of_improvement`, each setting's seeds
    resampled on their own (its strata)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 2 or len(y) < 2:
        return math.nan, math.nan

    def statistic(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        a, b = np.moveaxis(a, axis, -1), np.moveaxis(b, axis, -1)
        return probability_of_improvement(a, b, higher_is_better)

    result = stats.bootstrap(
        (x, y),
        statistic,
        paired=False,
        confidence_level=CONFIDENCE,
        n_resamples=RESAMPLES,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    low, high = result.confidence_interval.low, result.confidence_interval.high
    return float(low), float(high)
