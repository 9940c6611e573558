"""Bradley-Terry ratings against values worked out by hand."""

import math

import numpy as np
import pytest

from lostcities_cfr.errors import ConfigError
from lostcities_cfr.evaluation.ratings import ELO_PER_LOGIT, PairScore, bradley_terry


def test_two_agents_rating_gap_is_the_log_odds_of_the_score_and_its_error_the_fisher_one():
    # A wins 75 of 100: the gap is logit(0.75) = ln 3; the Fisher information of the gap is
    # n p (1 - p) = 18.75, so its variance is 1 / 18.75 and each centred rating's a quarter.
    ratings = bradley_terry(["A", "B"], [PairScore(0, 1, 75, 100)], prior_games=0)
    half_gap = ELO_PER_LOGIT * math.log(3) / 2  # 95.42 Elo
    np.testing.assert_allclose(ratings.elo, [half_gap, -half_gap], rtol=1e-6)
    error = ELO_PER_LOGIT * math.sqrt(1 / 18.75) / 2  # 20.06 Elo
    np.testing.assert_allclose(ratings.standard_error, [error, error], rtol=1e-5)
    np.testing.assert_allclose(ratings.ci_high - ratings.elo, 1.959964 * error, rtol=1e-5)
    assert ratings.expected_score(0, 1) == pytest.approx(0.75)


def test_three_agents_that_fit_the_model_exactly_get_its_ratings_and_the_inverse_information():
    # A beats B and B beats C 3:1, A beats C 9:1 = 3 x 3: log-strengths ln 3, 0, -ln 3.
    pairs = [PairScore(0, 1, 75, 100), PairScore(1, 2, 75, 100), PairScore(0, 2, 90, 100)]
    ratings = bradley_terry(["A", "B", "C"], pairs, prior_games=0)
    third = ELO_PER_LOGIT * math.log(3)
    np.testing.assert_allclose(ratings.elo, [third, 0.0, -third], rtol=1e-6, atol=1e-6)
    # Centred ratings: covariance = pseudo-inverse of the information sum w (e_i - e_j)^2,
    # w = n p (1 - p): 18.75, 18.75 and 9.
    information = np.array([[27.75, -18.75, -9.0], [-18.75, 37.5, -18.75], [-9.0, -18.75, 27.75]])
    expected = ELO_PER_LOGIT * np.sqrt(np.diag(np.linalg.pinv(information)))
    np.testing.assert_allclose(ratings.standard_error, expected, rtol=1e-5)


def test_a_draw_is_half_a_win():
    drawn = bradley_terry(["A", "B"], [PairScore(0, 1, 50 + 10 / 2, 100)], prior_games=0)
    won = bradley_terry(["A", "B"], [PairScore(0, 1, 55, 100)], prior_games=0)
    np.testing.assert_allclose(drawn.elo, won.elo)


def test_one_drawn_prior_game_keeps_a_clean_sweep_finite():
    # 100 of 100 plus one drawn game: 100.5 of 101, odds 201.
    ratings = bradley_terry(["A", "B"], [PairScore(0, 1, 100, 100)])
    assert ratings.elo[0] - ratings.elo[1] == pytest.approx(400 * math.log10(201), rel=1e-6)
    assert np.isfinite(ratings.ci_low).all() and np.isfinite(ratings.ci_high).all()


def test_rows_come_strongest_first():
    ratings = bradley_terry(["weak", "strong"], [PairScore(0, 1, 20, 100)])
    rows = ratings.to_rows()
    assert [row["label"] for row in rows] == ["strong", "weak"]
    assert [row["rank"] for row in rows] == [1, 2]
    assert rows[0]["elo_ci_low"] < rows[0]["elo"] < rows[0]["elo_ci_high"]


@pytest.mark.parametrize(
    ("labels", "pairs", "message"),
    [
        (["A"], [], "at least two agents"),
        (["A", "B", "C", "D"], [PairScore(0, 1, 5, 10), PairScore(2, 3, 5, 10)], r"\['C', 'D'\]"),
        (["A", "B"], [PairScore(0, 0, 5, 10)], "two different agents"),
    ],
)
def test_refuses_what_cannot_be_rated(labels, pairs, message):
    with pytest.raises(ConfigError, match=message):
        bradley_terry(labels, pairs)
