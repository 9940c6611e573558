"""Figures over seeds: the interquartile mean, its bootstrap interval, and the probability
of improvement, held to values worked out by hand."""

import math

import numpy as np
import pytest

from lostcities_cfr.sweeps.statistics import (
    improvement_interval,
    iqm,
    iqm_interval,
    probability_of_improvement,
)


def test_the_iqm_is_the_mean_of_the_middle_half():
    # 8 seeds: a quarter (two) cut from each end, the mean of the middle four
    values = np.array([100.0, 1, 2, 3, 4, 5, 6, -100])
    assert iqm(values) == pytest.approx((2 + 3 + 4 + 5) / 4)
    # 5 seeds: one cut from each end
    assert iqm(np.array([0.92, 0.85, 0.365, 0.663, 0.393])) == pytest.approx(
        (0.85 + 0.663 + 0.393) / 3
    )


def test_the_iqm_interval_holds_the_iqm_and_lies_within_the_seeds():
    values = np.array([0.36, 0.66, 0.39, 0.92, 0.85])
    low, high = iqm_interval(values)
    assert values.min() <= low <= iqm(values) <= high <= values.max()
    assert low < high
    assert iqm_interval(values) == (low, high)  # seeded: the same interval twice


def test_one_seed_has_no_interval_and_equal_seeds_a_point():
    assert all(math.isnan(v) for v in iqm_interval(np.array([0.5])))
    assert iqm_interval(np.array([0.5, 0.5, 0.5])) == (0.5, 0.5)


def test_the_probability_of_improvement_counts_pairs_and_half_ties():
    x, y = np.array([3.0, 1.0]), np.array([2.0, 1.0])
    # pairs (3,2) (3,1) better, (1,2) worse, (1,1) a tie: (2 + 0.5) / 4
    assert probability_of_improvement(x, y) == pytest.approx(0.625)
    assert probability_of_improvement(x, y, higher_is_better=False) == pytest.approx(0.375)
    assert probability_of_improvement(np.array([5.0, 6]), np.array([1.0, 2])) == 1.0


def test_the_improvement_interval_brackets_the_estimate():
    x, y = np.array([0.8, 0.82, 0.85, 0.9, 0.7]), np.array([0.6, 0.75, 0.8, 0.65, 0.9])
    low, high = improvement_interval(x, y)
    assert 0.0 <= low <= probability_of_improvement(x, y) <= high <= 1.0
    assert all(math.isnan(v) for v in improvement_interval(x[:1], y))
