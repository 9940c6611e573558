"""Every agent picks legal actions in any reachable position; the baselines, the noisy
wrapper and the network agent each do what their docstrings promise."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from lostcities_cfr.agents import (
    DiscardOnlyAgent,
    HeuristicAgent,
    NetworkAgent,
    NoisyAgent,
    RandomAgent,
    act_single,
    random_legal_actions,
)
from lostcities_cfr.cfr import masked_softmax, regret_matching
from lostcities_cfr.game import GameBatch, GameState, Rules, feature_size

RULES = {"classic": Rules.classic(), "six_colors": Rules.six_colors(), "tiny": Rules.tiny()}


def network_agent(rules: Rules, greedy: bool, head=masked_softmax, seed: int = 0) -> NetworkAgent:
    torch.manual_seed(seed)
    net = nn.Sequential(
        nn.Linear(feature_size(rules), 32), nn.ReLU(), nn.Linear(32, rules.n_actions)
    )
    return NetworkAgent(net, head, greedy=greedy, seed=seed)


AGENTS = {
    "random": lambda rules: RandomAgent(seed=1),
    "discard-only": lambda rules: DiscardOnlyAgent(seed=1),
    "heuristic:balanced": lambda rules: HeuristicAgent("balanced"),
    "heuristic:cautious": lambda rules: HeuristicAgent("cautious"),
    "heuristic:aggressive": lambda rules: HeuristicAgent("aggressive"),
    "noisy": lambda rules: NoisyAgent(HeuristicAgent(), 0.3, seed=1),
    "network-greedy": lambda rules: network_agent(rules, greedy=True),
    "network-sampled": lambda rules: network_agent(rules, greedy=False),
    "network-regret-matching": lambda rules: network_agent(rules, False, regret_matching),
}


@settings(max_examples=12)
@given(
    agent_name=st.sampled_from(sorted(AGENTS)),
    rules_name=st.sampled_from(sorted(RULES)),
    seed=st.integers(0, 2**31 - 1),
)
def test_agents_choose_only_legal_actions(agent_name, rules_name, seed):
    """The agent answers in every position of games in which a quarter of the moves are
    random (so that it meets positions its own play would avoid)."""
    rules = RULES[rules_name]
    agent = AGENTS[agent_name](rules)
    batch = GameBatch.new(rules, 16, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    while not bool(batch.done.all()):
        legal = batch.legal_mask()  # [B, A]
        actions = agent.act(batch)
        assert actions.shape == (batch.batch_size,) and actions.dtype == torch.int64
        chosen_legal = legal.gather(1, actions[:, None]).squeeze(1)
        assert bool((chosen_legal | batch.done).all()), f"{agent_name} chose an illegal action"
        wander = torch.rand(batch.batch_size, generator=generator) < 0.25
        batch.step(torch.where(wander, random_legal_actions(legal, generator), actions))


def test_act_single_answers_for_one_reference_state():
    state = GameState.new(Rules.classic(), seed=3)
    action = act_single(HeuristicAgent(), state)
    assert action in state.legal_actions()
    with pytest.raises(ValueError, match=r"^act_single needs a state with a player to move;"):
        state.deck.clear()
        act_single(HeuristicAgent(), state)


def test_random_agent_is_uniform_over_legal_actions():
    state = GameState.new(Rules.classic(), seed=0)
    batch = GameBatch.from_states([state]).select(torch.zeros(16_000, dtype=torch.int64))
    counts = torch.bincount(RandomAgent(seed=0).act(batch), minlength=Rules.classic().n_actions)
    legal = state.legal_actions()
    assert set(counts.nonzero().squeeze(1).tolist()) == set(legal)
    expected = 16_000 / len(legal)  # 1000 per action; the sd of a count is about 30
    assert (counts[legal].float() - expected).abs().max() < 150


def test_seeded_agents_repeat_themselves_and_draw_fresh_numbers_at_every_call():
    batch = GameBatch.new(Rules.classic(), 64, seed=0)
    for make in (RandomAgent, DiscardOnlyAgent):
        agent = make(seed=5)
        first, second = agent.act(batch), agent.act(batch)
        assert torch.equal(first, make(seed=5).act(batch))
        assert not torch.equal(first, second)
        assert not torch.equal(first, make(seed=6).act(batch))
    assert (RandomAgent().name, DiscardOnlyAgent().name) == ("random", "discard-only")


def test_discard_only_agent_always_discards_draws_from_the_deck_and_scores_zero():
    rules = Rules.classic()
    T = rules.n_types
    batch = GameBatch.new(rules, 32, seed=0)
    agent = DiscardOnlyAgent(seed=0)
    while not bool(batch.done.all()):
        actions = agent.act(batch)
        live = ~batch.done
        card = live & (batch.phase == 0)
        assert bool(((actions[card] >= T) & (actions[card] < 2 * T)).all())
        assert bool((actions[live & (batch.phase == 1)] == rules.draw_deck_action).all())
        batch.step(actions)
    assert bool((batch.scores() == 0).all())


def test_noisy_agent_follows_its_agent_at_epsilon_zero_and_not_at_one():
    batch = GameBatch.new(Rules.classic(), 256, seed=0)
    base = HeuristicAgent()
    assert NoisyAgent(base, 0.25).name == "heuristic:balanced:noisy=0.25"
    assert torch.equal(NoisyAgent(base, 0.0, seed=0).act(batch), base.act(batch))
    differ = NoisyAgent(base, 1.0, seed=0).act(batch) != base.act(batch)
    assert differ.float().mean() > 0.5
    with pytest.raises(ValueError, match=r"epsilon=1.5 must lie in \[0, 1\]"):
        NoisyAgent(base, 1.5)


def test_greedy_network_agent_plays_the_legal_action_with_the_highest_output():
    rules = Rules.classic()
    agent = network_agent(rules, greedy=True)
    batch = GameBatch.new(rules, 64, seed=0)
    outputs = agent.network(batch.encode())
    expected = outputs.masked_fill(~batch.legal_mask(), -torch.inf).argmax(dim=1)
    assert torch.equal(agent.act(batch), expected)


def test_sampled_network_agent_follows_the_head_policy():
    """A head that puts all mass on the highest legal action id makes sampling deterministic."""

    def last_legal(outputs: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        index = legal.long().cumsum(1).argmax(1, keepdim=True)
        return torch.zeros_like(outputs).scatter_(1, index, 1.0) * legal

    rules = Rules.classic()
    agent = network_agent(rules, greedy=False, head=last_legal)
    batch = GameBatch.new(rules, 32, seed=0)
    expected = batch.legal_mask().long().cumsum(1).argmax(1)
    assert torch.equal(agent.act(batch), expected)


def test_network_agent_runs_one_forward_per_act_over_the_whole_batch():
    rules = Rules.classic()
    agent = network_agent(rules, greedy=False)
    sizes = []
    agent.network.register_forward_hook(lambda module, args, out: sizes.append(len(args[0])))
    agent.act(GameBatch.new(rules, 48, seed=0))
    assert sizes == [48]


def test_a_network_agent_samples_unless_told_to_be_greedy():
    rules = Rules.classic()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(feature_size(rules), rules.n_actions))
    uniform = NetworkAgent(net, lambda outputs, legal: legal / legal.sum(1, keepdim=True), seed=0)
    one_position = GameBatch.new(rules, 1, seed=0).select(torch.zeros(200, dtype=torch.int64))
    assert len(set(uniform.act(one_position).tolist())) > 1
    assert uniform.name == "network"
