"""scripts/tools/tiny_best_response.py: the heuristic as a feature policy, and (slow) the learned
best response within 10% of the exact one for each fixed strategy on tiny rules."""

import pytest
import torch

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.game import GameBatch, Rules

TINY = Rules.tiny()


@pytest.mark.parametrize(
    "spec", ["heuristic:balanced", "heuristic:aggressive", "heuristic:balanced:open_margin=-0.5"]
)
def test_the_heuristic_on_feature_rows_chooses_as_on_the_engine(load_script, spec):
    script = load_script("tiny_best_response")
    heuristic = agent_from_spec(spec)
    policy = script.heuristic_policy(heuristic)
    batch = GameBatch.new(TINY, 500, seed=3)
    other = agent_from_spec("random", seed=4)
    compared = 0
    while not bool(batch.done.all()):
        live = ~batch.done
        chosen = heuristic.act(batch)
        probs = policy(batch.encode()[live], batch.legal_mask()[live])
        assert torch.equal(probs.argmax(1), chosen[live])
        compared += int(live.sum())
        # half the moves random, so that the games reach states the heuristic avoids
        coin = torch.rand(batch.batch_size, generator=torch.Generator().manual_seed(compared))
        batch.step(torch.where(coin < 0.5, chosen, other.act(batch)))
    assert compared > 2000


@pytest.mark.slow
def test_the_learned_best_response_reaches_90_percent_of_the_exact_one(load_script):
    # About 2.5 minutes of wall clock per strategy on one thread (2 of training).
    script = load_script("tiny_best_response")
    torch.set_num_threads(1)
    rows = {}
    for strategy in script.strategies(3, seed=0, only=["uniform", "cfr", "heuristic"]):
        rows[strategy.name] = script.compare(strategy, minutes=2.0, games=1000, seed=0)
    print(script.format_table(list(rows.values())))
    for row in rows.values():
        # points per game against the same strategy, the two seats averaged, both exact
        assert row["learned_value"] >= 0.9 * row["exploitability"] - 1e-9, row
        assert row["learned_value"] <= row["exploitability"] + 1e-9, row
    assert rows["`heuristic:balanced`"]["exploitability"] == 0.0  # it never opens on tiny rules
