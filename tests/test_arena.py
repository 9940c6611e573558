"""The arena: interval math against published values, the duplicate pairing, the
bookkeeping of rounds and matches, and (slow) the issue's strength and speed targets."""

import json
import math
import time

import pytest
import torch
from torch import nn

from lostcities_cfr.agents import DiscardOnlyAgent, HeuristicAgent, NetworkAgent, RandomAgent
from lostcities_cfr.arena import (
    Outcome,
    PlayStyle,
    evaluate,
    mean_interval,
    t_quantile_975,
    wilson_interval,
)
from lostcities_cfr.cfr import PolicyMLP, masked_softmax
from lostcities_cfr.errors import IllegalActionError
from lostcities_cfr.game import GameBatch, Rules, feature_size


# ---- statistics ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [
        # Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
        # symmetric and boundary cases
        (50, 100, 0.4038, 0.5962),
        (10, 10, 0.7225, 1.0),
    ],
)
def test_wilson_interval_matches_published_values(successes, n, low, high):
    assert wilson_interval(successes, n) == pytest.approx((low, high), abs=1e-4)


def test_wilson_interval_of_no_games_is_uninformative_and_bad_counts_are_refused():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match=r"successes=5 must lie in 0\.\.n=4"):
        wilson_interval(5, 4)


@pytest.mark.parametrize(
    ("df", "quantile"), [(1, 12.7062), (2, 4.3027), (3, 3.1824), (10, 2.2281), (30, 2.0423)]
)
def test_t_quantile_matches_tables(df, quantile):
    assert t_quantile_975(df) == pytest.approx(quantile, rel=2e-3)


def test_mean_interval_is_the_student_t_interval():
    mean, (low, high) = mean_interval(torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]))
    # sd = sqrt(2.5), t(0.975, 4) = 2.7764
    half = 2.7764 * math.sqrt(2.5) / math.sqrt(5)
    assert mean == 3.0
    assert (low, high) == pytest.approx((3 - half, 3 + half), abs=5e-3)
    assert math.isnan(mean_interval(torch.tensor([7.0]))[1][0])


def test_outcome_counts_from_the_agents_side_and_pairs_mirrored_games():
    agent = torch.tensor([[10, 0, 5], [3, 3, 1]])  # [2 seatings, 3 deals]
    opponent = torch.tensor([[0, 0, 9], [3, 4, 0]])
    outcome = Outcome.of(agent, opponent)
    assert (outcome.n, outcome.wins, outcome.draws, outcome.losses) == (6, 2, 2, 2)
    # per-deal mean differences: (10 + 0) / 2, (0 - 1) / 2, (-4 + 1) / 2
    expected_mean, expected_ci = mean_interval(torch.tensor([5.0, -0.5, -1.5]))
    assert outcome.score_diff == pytest.approx(expected_mean)
    assert outcome.score_diff_ci == pytest.approx(expected_ci)
    assert outcome.win_rate_ci == wilson_interval(2, 6)
    assert outcome.agent_score == pytest.approx(22 / 6)


def test_play_style_counts_started_negative_and_wagered_expeditions():
    rules = Rules.classic()
    expeditions = torch.zeros(2, rules.n_types, dtype=torch.int8)
    expeditions[0, rules.type_id(0, 0)] = 1  # R*: (0 - 20) * 2 < 0
    for r in range(5, 10):  # G6..G10 = 40: positive
        expeditions[0, rules.type_id(1, r)] = 1
    expeditions[1, rules.type_id(2, 9)] = 1  # B10 alone: negative
    style = PlayStyle.of(rules, expeditions)
    assert style.expeditions == pytest.approx(3 / 2)
    assert style.negative_share == pytest.approx(2 / 3)
    assert style.wagers == pytest.approx(1 / 2)


# ---- the duplicate format -------------------------------------------------------------------
class FirstDealRecorder:
    """A random agent that remembers the deal it saw at the first decision of a round."""

    def __init__(self, name: str, seed: int) -> None:
        self.name = name
        self.inner = RandomAgent(seed)
        self.deals: list[tuple[torch.Tensor, torch.Tensor]] = []

    def act(self, batch: GameBatch) -> torch.Tensor:
        if int(batch.turn.max()) == 0:
            self.deals.append((batch.hands.clone(), batch.deck.clone()))
        return self.inner.act(batch)


def test_each_deal_is_played_twice_with_the_seats_swapped():
    a, b = FirstDealRecorder("a", 1), FirstDealRecorder("b", 2)
    evaluate(a, b, games=20, seed=3)
    # Each agent made the first decision (seat 0) of a round in exactly one seating...
    assert len(a.deals) == len(b.deals) == 1
    (hands_a, deck_a), (hands_b, deck_b) = a.deals[0], b.deals[0]
    # ...and met the very same ten deals there, so every deal was played from both seats.
    assert hands_a.shape[0] == 10
    assert torch.equal(hands_a, hands_b) and torch.equal(deck_a, deck_b)
    assert not torch.equal(hands_a[0], hands_a[1])


def test_identical_deterministic_agents_tie_every_mirrored_pair():
    result = evaluate(HeuristicAgent(), HeuristicAgent(), games=40, seed=0)
    assert result.rounds.score_diff == 0.0
    assert result.rounds.wins == result.rounds.losses
    assert result.rounds.agent_score == result.rounds.opponent_score


def test_scores_are_credited_to_the_right_agent_in_both_seatings():
    result = evaluate(DiscardOnlyAgent(seed=0), HeuristicAgent(), games=40, seed=0)
    assert result.rounds.agent_score == 0.0
    assert result.agent_style.expeditions == 0.0
    assert result.rounds.opponent_score > 0
    assert result.rounds.losses > result.rounds.wins


def test_games_round_up_to_whole_deals_and_matches_use_full_triples():
    result = evaluate(RandomAgent(seed=0), RandomAgent(seed=1), games=15, rules=Rules.tiny())
    assert (result.games, result.deals, result.matches) == (16, 8, 4)
    assert result.rounds.n == 16
    assert result.matches_outcome.n == 4


def test_too_few_deals_for_a_match_give_no_match_outcome_and_clean_json():
    result = evaluate(RandomAgent(seed=0), DiscardOnlyAgent(seed=1), games=2, rules=Rules.tiny())
    assert result.matches == 0 and result.matches_outcome is None
    data = result.to_dict()
    json.dumps(data, allow_nan=False)  # no NaN: undefined values are null
    assert data["rounds"]["score_diff_ci"] == [None, None]
    assert "n/a" in result.format_table()


def test_the_same_seed_repeats_the_same_evaluation():
    def run():
        return evaluate(RandomAgent(seed=4), HeuristicAgent(), games=30, seed=9).to_dict()

    first, second = run(), run()
    for timing in ("seconds", "games_per_s"):
        first.pop(timing), second.pop(timing)
    assert first == second


def test_result_table_and_dict_carry_the_same_figures():
    result = evaluate(HeuristicAgent("cautious"), RandomAgent(seed=0), games=24, seed=1)
    table, data = result.format_table(), result.to_dict()
    assert "classic rules" in table and "games/s" in table
    assert f"{100 * data['rounds']['win_rate']:5.1f}%" in table
    assert data["agent"] == "heuristic:cautious" and data["opponent"] == "random"
    assert data["rules"]["n_colors"] == 5 and Rules(**data["rules"]).preset_name() == "classic"
    assert data["game_length"] > 20


def test_agents_written_outside_the_package_need_only_an_act_method():
    class FirstLegal:  # no name; answers with a plain list
        def act(self, batch: GameBatch) -> list[int]:
            return batch.legal_mask().float().argmax(dim=1).tolist()

    result = evaluate(FirstLegal(), HeuristicAgent(), games=10, seed=0)
    assert result.agent == "FirstLegal" and result.rounds.n == 10


def test_an_illegal_action_stops_the_evaluation_naming_the_game():
    class PlaysFirstCard:
        name = "broken"

        def act(self, batch: GameBatch) -> torch.Tensor:
            return torch.zeros(batch.batch_size, dtype=torch.int64)  # play R*, rarely legal

    with pytest.raises(IllegalActionError, match="game"):
        evaluate(PlaysFirstCard(), RandomAgent(seed=0), games=20)


def test_a_network_agent_gets_one_forward_per_step_for_all_its_games():
    rules = Rules.classic()
    net = nn.Sequential(nn.Linear(feature_size(rules), 16), nn.ReLU(), nn.Linear(16, 106))
    batch_sizes = []
    net.register_forward_hook(lambda module, args, out: batch_sizes.append(len(args[0])))
    agent = NetworkAgent(net, masked_softmax, seed=0)
    act_calls = []
    counted_act = agent.act
    agent.act = lambda batch: act_calls.append(batch.batch_size) or counted_act(batch)
    evaluate(agent, HeuristicAgent(), games=64, seed=0)
    assert batch_sizes == act_calls  # one forward per act, over every game it moves in
    assert batch_sizes[:2] == [32, 32]  # the first turn of the first seating: all 32 games


# ---- the targets (pytest -m slow) ----------------------------------------------------
@pytest.mark.slow
def test_balanced_heuristic_meets_its_win_rate_targets():
    vs_random = evaluate(HeuristicAgent(), RandomAgent(seed=1), games=1000, seed=0)
    vs_discard = evaluate(HeuristicAgent(), DiscardOnlyAgent(seed=1), games=1000, seed=0)
    assert vs_random.rounds.win_rate >= 0.95
    assert vs_discard.rounds.win_rate >= 0.75
    assert vs_random.seconds <= 20


@pytest.mark.slow
def test_a_512x3_network_agent_plays_1000_games_in_30_seconds():
    rules = Rules.classic()
    agent = NetworkAgent(PolicyMLP(feature_size(rules), rules.n_actions, 512, 3), masked_softmax)
    start = time.perf_counter()
    evaluate(agent, HeuristicAgent("cautious"), games=1000, seed=0)
    assert time.perf_counter() - start <= 30


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_evaluation_runs_on_the_gpu_with_every_kind_of_agent():
    rules = Rules.classic()
    net = PolicyMLP(feature_size(rules), rules.n_actions, 64, 2).cuda()
    agents = [HeuristicAgent(), RandomAgent(seed=0), NetworkAgent(net, masked_softmax, seed=0)]
    for agent in agents:
        result = evaluate(agent, DiscardOnlyAgent(seed=1), games=40, device="cuda")
        assert result.games == 40 and result.rounds.opponent_score == 0.0
