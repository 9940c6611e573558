import torch

from lostcities_cfr.cfr import regret_matching

T, F_ = True, False


def rm(advantages: list[list[float]], legal: list[list[bool]]) -> torch.Tensor:
    return regret_matching(torch.tensor(advantages), torch.tensor(legal))


def reference_regret_matching(advantages: list[float], legal: list[bool]) -> list[float]:
    """One row, written out as in OpenSpiel's deep_cfr."""
    legal_ids = [a for a, ok in enumerate(legal) if ok]
    strategy = [0.0] * len(advantages)
    total = sum(max(advantages[a], 0.0) for a in legal_ids)
    if total > 0:
        for a in legal_ids:
            strategy[a] = max(advantages[a], 0.0) / total
    elif legal_ids:
        strategy[max(legal_ids, key=lambda a: advantages[a])] = 1.0
    return strategy


def test_strategy_is_the_normalised_positive_part_of_the_advantages():
    strategy = rm([[1.0, 3.0, -2.0, 0.0]], [[T, T, T, T]])
    torch.testing.assert_close(strategy, torch.tensor([[0.25, 0.75, 0.0, 0.0]]))


def test_positive_advantages_of_illegal_actions_are_ignored():
    strategy = rm([[5.0, 1.0, 1.0]], [[F_, T, T]])
    torch.testing.assert_close(strategy, torch.tensor([[0.0, 0.5, 0.5]]))


def test_without_positive_legal_advantage_the_best_legal_action_gets_everything():
    # Action 3 has the highest advantage but is illegal.
    strategy = rm([[-3.0, -1.0, -2.0, 10.0]], [[T, T, T, F_]])
    assert torch.equal(strategy, torch.tensor([[0.0, 1.0, 0.0, 0.0]]))


def test_fallback_ties_go_to_the_lowest_legal_action():
    strategy = rm([[-1.0, -1.0, -1.0, -1.0]], [[F_, F_, T, T]])
    assert torch.equal(strategy, torch.tensor([[0.0, 0.0, 1.0, 0.0]]))


def test_all_zero_advantages_use_the_fallback():
    strategy = rm([[0.0, 0.0, 0.0]], [[F_, T, T]])
    assert torch.equal(strategy, torch.tensor([[0.0, 1.0, 0.0]]))


def test_rows_without_legal_actions_are_all_zero():
    strategy = rm([[1.0, 2.0], [-1.0, -2.0]], [[F_, F_], [F_, F_]])
    assert torch.equal(strategy, torch.zeros(2, 2))


def test_batch_matches_the_row_by_row_reference():
    g = torch.Generator().manual_seed(0)
    # Small integers make ties and all-negative rows common.
    advantages = torch.randint(-4, 3, (500, 9), generator=g).float()
    legal = torch.rand(500, 9, generator=g) < 0.5
    expected = torch.tensor(
        [
            reference_regret_matching(a, m)
            for a, m in zip(advantages.tolist(), legal.tolist(), strict=True)
        ]
    )
    strategy = regret_matching(advantages, legal)
    torch.testing.assert_close(strategy, expected)
    assert (strategy[~legal] == 0).all()
    has_legal = legal.any(-1)
    torch.testing.assert_close(strategy.sum(-1), has_legal.float())
