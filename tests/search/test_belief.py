"""The learned belief over the opponent's hand: its keys deal legal worlds weighted as asked,
its loss is the uniform worlds' at zero, training beats uniform worlds, and a saved network
loads back (or is refused, named)."""

import random

import pytest
import torch
from hidden_cards import resample_hidden
from search_positions import CLASSIC, random_positions
from test_worlds import assert_legal_world

from lostcities_cfr.agents import RandomAgent, agent_from_spec
from lostcities_cfr.errors import AgentSpecError
from lostcities_cfr.game import GameBatch, Rules
from lostcities_cfr.game.encoding import feature_blocks
from lostcities_cfr.search import Rollouts, SearchAgent, belief_keys, deal_worlds, unseen_cards
from lostcities_cfr.search.belief import (
    BeliefNet,
    collect_positions,
    hand_share_loss,
    load_belief,
    save_belief,
    train_belief,
)

T = CLASSIC.n_types


def held_share(state, log_weights: torch.Tensor, n_worlds: int, seed: int) -> torch.Tensor:
    """[T]: how often the opponent holds each type (less its known copies) over the worlds."""
    batch = GameBatch.from_states([state])
    keys = belief_keys(batch, log_weights[None], n_worlds, torch.Generator().manual_seed(seed))
    worlds = deal_worlds(batch, keys)
    them = 1 - state.current_player
    return (worlds.hands[:, them].long() - torch.tensor(state.known[them])).sum(0) / n_worlds


def test_equal_weights_deal_each_unseen_card_to_the_opponent_equally_often():
    state = random_positions(1, seed=6)[0]
    n_worlds = 4000
    held = held_share(state, torch.full((T,), 0.7), n_worlds, seed=3)
    unseen = torch.tensor([unseen_cards(state).count(t) for t in range(T)])
    them = 1 - state.current_player
    hidden = len(state.hands[them]) - sum(state.known[them])
    expected = unseen * hidden / len(unseen_cards(state))
    spread = (expected * (1 - expected / unseen.clamp(min=1)) / n_worlds).sqrt()
    assert ((held - expected).abs() <= 5 * spread + 1e-6).all()


def test_a_heavy_card_is_always_dealt_to_the_opponent_and_a_light_one_never():
    state = random_positions(1, seed=11)[0]
    singles = [t for t in set(unseen_cards(state)) if unseen_cards(state).count(t) == 1]
    heavy, light = singles[0], singles[1]
    log_weights = torch.zeros(T)
    log_weights[heavy], log_weights[light] = 30.0, -30.0
    held = held_share(state, log_weights, 200, seed=4)
    assert held[heavy] == 1.0 and held[light] == 0.0


def test_belief_worlds_are_legal_and_ignore_the_hidden_cards():
    states = random_positions(20, seed=2)
    log_weights = torch.randn(len(states), T, generator=torch.Generator().manual_seed(0))
    batch = GameBatch.from_states(states)
    keys = belief_keys(batch, log_weights, 3, torch.Generator().manual_seed(1))
    for i, world in enumerate(deal_worlds(batch, keys).to_states()):
        assert_legal_world(states[i // 3], world)
    rng = random.Random(5)
    reshuffled = GameBatch.from_states([resample_hidden(s, s.current_player, rng) for s in states])
    again = belief_keys(reshuffled, log_weights, 3, torch.Generator().manual_seed(1))
    assert torch.equal(keys, again)


def test_zero_log_weights_cost_the_uniform_cross_entropy():
    rules = Rules.tiny()
    games = GameBatch.new(rules, 4, seed=0)
    features = games.encode().contiguous()
    hidden = (games.hands - games.known)[:, 1]  # player 0 to move: player 1's hand
    unseen = features[:, feature_blocks(rules)["unseen"]]
    q = unseen / unseen.sum(1, keepdim=True)
    p = hidden.float() / hidden.sum(1, keepdim=True)
    expected = -(p * q.clamp(min=1e-30).log()).sum(1).mean()
    loss = hand_share_loss(torch.zeros(4, rules.n_types), features, hidden, rules)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)


def test_a_trained_belief_predicts_hidden_hands_better_than_uniform_worlds(tmp_path):
    def positions(seed: int):
        pairings = [(agent_from_spec("heuristic:balanced"), agent_from_spec("heuristic:cautious"))]
        return collect_positions(CLASSIC, pairings, 200, seed)

    train, validation = positions(0), positions(1)
    torch.manual_seed(0)
    net = BeliefNet(CLASSIC, width=64, depth=1)
    torch.nn.init.zeros_(net.layers[-1].weight)  # start at the uniform worlds
    torch.nn.init.zeros_(net.layers[-1].bias)
    losses = train_belief(net, train, validation, epochs=1, batch_size=256, lr=3e-3)
    assert losses[1] < losses[0] - 0.03  # losses[0]: the uniform worlds' loss (about 3.2)
    save_belief(net, tmp_path / "belief.pt", note="test")
    loaded = load_belief(tmp_path / "belief.pt")
    features = validation.features[:16].float()
    assert loaded.rules == CLASSIC and torch.equal(loaded(features), net(features))


def test_unreadable_beliefs_are_refused_naming_the_file(tmp_path):
    with pytest.raises(AgentSpecError, match=r"belief=.*nowhere\.pt: no such file"):
        load_belief(tmp_path / "nowhere.pt")
    (tmp_path / "junk.pt").write_text("not a network")
    with pytest.raises(AgentSpecError, match=r"junk\.pt: not a belief network"):
        load_belief(tmp_path / "junk.pt")
    with pytest.raises(AgentSpecError, match="no such file"):
        agent_from_spec(f"search:random:belief={tmp_path / 'nowhere.pt'}")


def test_a_belief_for_other_rules_than_the_bases_is_refused():
    base = RandomAgent(seed=0)
    base.rules = Rules.tiny()  # as a checkpoint agent says which rules it plays
    with pytest.raises(ValueError, match="belief network plays classic rules and the base tiny"):
        SearchAgent(Rollouts(base), belief=BeliefNet(CLASSIC))
    assert SearchAgent(Rollouts(RandomAgent(seed=0)), belief=BeliefNet(CLASSIC)).rules == CLASSIC


def test_positions_without_hidden_cards_cost_nothing_and_a_worse_epoch_is_not_kept():
    features = GameBatch.new(CLASSIC, 3, seed=0).encode().contiguous()
    no_hidden = torch.zeros(3, T, dtype=torch.int8)
    assert hand_share_loss(torch.randn(3, T), features, no_hidden, CLASSIC).item() == 0.0
    positions = collect_positions(
        CLASSIC, [(agent_from_spec("heuristic:balanced"), agent_from_spec("random"))], 20, 0
    )
    torch.manual_seed(0)
    net = BeliefNet(CLASSIC, width=8, depth=1)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    losses = train_belief(net, positions, positions, epochs=1, lr=1e3)  # a step that ruins it
    assert losses[1] > losses[0]
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())


def test_extreme_weights_still_follow_the_race():
    # exp(200) overflows float32: the race runs in logs, so the heavy card is always dealt and
    # the rest of the hand stays uniform among the other cards (no ties broken by type order)
    state = random_positions(1, seed=6)[0]
    unseen = torch.tensor([unseen_cards(state).count(t) for t in range(T)])
    heavy = int((unseen == 1).nonzero()[0, 0])
    log_weights = torch.full((T,), -200.0)
    log_weights[heavy] = 200.0
    n_worlds = 4000
    held = held_share(state, log_weights, n_worlds, seed=5)
    them = 1 - state.current_player
    hidden = len(state.hands[them]) - sum(state.known[them])
    others = unseen.clone()
    others[heavy] = 0
    expected = others * (hidden - 1) / (len(unseen_cards(state)) - 1)
    spread = (expected * (1 - expected / others.clamp(min=1)) / n_worlds).sqrt()
    assert held[heavy] == 1.0
    assert ((held - expected).abs() <= 5 * spread + 1e-6)[others > 0].all()
