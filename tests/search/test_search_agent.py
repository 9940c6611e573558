"""The search agent: it reads nothing hidden, rescues a base agent's plain blunder, explains
what it searched, and its spec kind builds what it names."""

import random
from pathlib import Path

import pytest
import torch
from hidden_cards import resample_hidden
from search_positions import CLASSIC, random_positions
from torch import nn

from lostcities_cfr.agents import DiscardOnlyAgent, HeuristicAgent, RandomAgent, agent_from_spec
from lostcities_cfr.commands.play import main as play_main
from lostcities_cfr.errors import AgentSpecError
from lostcities_cfr.game import GameBatch, GameState
from lostcities_cfr.search import Rollouts, SearchAgent, StateValue
from lostcities_cfr.search.agent import _better_half
from lostcities_cfr.search.belief import BeliefNet, save_belief

SPECS = (
    "search:heuristic:balanced:worlds=2:z=0:max_deck=all",
    "search:best:worlds=2:depth=4:top=3:max_deck=all",
    "search:best:worlds=2:depth=4:top=3:max_deck=all:belief={belief}",
)


@pytest.fixture(scope="module")
def belief_file(tmp_path_factory) -> Path:
    """An untrained belief network (the property holds for any weights), saved."""
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("belief") / "belief.pt"
    save_belief(BeliefNet(CLASSIC, width=16, depth=1), path)
    return path


@pytest.mark.parametrize("spec", SPECS)
def test_decisions_ignore_the_opponents_hidden_hand_and_the_deck_order(spec, belief_file):
    spec = spec.format(belief=belief_file)
    rng = random.Random(0)
    states = random_positions(6, seed=10)
    reshuffled = [resample_hidden(s, s.current_player, rng) for s in states]
    assert any(a.deck != b.deck for a, b in zip(states, reshuffled, strict=True))
    seen = [
        agent_from_spec(spec, seed=3).explain(GameBatch.from_states(p))
        for p in (states, reshuffled)
    ]
    for label in seen[0]:
        assert torch.equal(seen[0][label].nan_to_num(-1e9), seen[1][label].nan_to_num(-1e9)), label
    assert (seen[0]["worlds"] > 0).any()  # it did search


def red_ten_position() -> GameState:
    """Player 0 to play, its red expedition 2..9, red 10 in hand: playing it is worth 10
    points more than anything else whatever the hidden cards, while discard-only discards."""
    rules = CLASSIC
    red = [rules.type_id(0, r) for r in range(1, 9)]  # 2..9
    red_ten = rules.type_id(0, 9)
    rest = rules.full_deck()
    for t in [*red, red_ten]:
        rest.remove(t)
    state = GameState.from_deal(rules, [[red_ten, *rest[:7]], rest[7:15]], rest[15:] + red)
    state.deck = rest[15:]  # the red cards left the deck for player 0's expedition
    state.expeditions[0][0] = list(range(1, 9))
    return state


def test_search_plays_the_move_its_base_never_would():
    state = red_ten_position()
    batch = GameBatch.from_states([state])
    play_red_ten = CLASSIC.play_action(CLASSIC.type_id(0, 9))
    assert DiscardOnlyAgent(seed=0).act(batch)[0] != play_red_ten
    agent = SearchAgent(Rollouts(DiscardOnlyAgent(seed=0)), worlds=2, max_deck=None, seed=0)
    assert int(agent.act(batch)[0]) == play_red_ten
    value = agent.explain(batch)["searched value"][0]
    assert value[play_red_ten] == pytest.approx(
        float(value.nan_to_num(-1e9).topk(2).values[1]) + 10
    )


def test_explain_labels_the_searched_actions():
    batch = GameBatch.from_states(random_positions(5, seed=11))
    spec = "search:heuristic:balanced:worlds=2:max_deck=all"
    agent = agent_from_spec(spec, seed=0)
    actions = agent_from_spec(spec, seed=0).act(batch)
    seen = agent.explain(batch)
    assert set(seen) == {"probability", "searched value", "worlds"}
    legal = batch.legal_mask()
    for tensor in seen.values():
        assert tensor.shape == legal.shape and tensor.dtype == torch.float32
    assert torch.equal(seen["probability"].argmax(1), actions)
    assert (seen["probability"].sum(1) == 1).all()
    searched = seen["worlds"] > 0
    assert not (searched & ~legal).any()
    assert torch.equal(searched, ~seen["searched value"].isnan())
    many = legal.sum(1) > 1
    assert (searched.sum(1)[many] >= 2).all() and not searched[~many].any()


def test_better_half_keeps_the_best_ceiling_half():
    score = torch.tensor([[3.0, 1.0, 2.0, 0.0, 9.0], [5.0, 4.0, 0.0, 0.0, 0.0]])
    alive = torch.tensor([[True, True, True, True, False], [True, True, False, False, False]])
    kept = _better_half(score, alive)
    assert kept.tolist() == [[True, False, True, False, False], [True, False, False, False, False]]


class Constant(nn.Module):
    """A value network that always answers 1."""

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return torch.ones(features.shape[0], 1)


def test_a_cut_rollout_is_worth_the_value_network_for_the_chooser():
    batch = GameBatch.from_states(random_positions(4, seed=12))
    rollouts = Rollouts(RandomAgent(seed=0), StateValue(Constant(), history=False, scale=50.0), 0)
    chooser = batch.current_player
    children = batch.clone()
    children.step(RandomAgent(seed=1).act(children))
    expected = torch.where(children.current_player == chooser, 50.0, -50.0)
    expected = torch.where(
        children.done, children.returns().gather(1, chooser[:, None])[:, 0], expected
    )
    assert torch.equal(rollouts.values(children.clone(), chooser), expected)


def test_full_rollouts_are_the_base_policys_final_score_in_any_chunks():
    batch = GameBatch.from_states(random_positions(9, seed=13))
    chooser = batch.current_player
    played = batch.clone()
    while not bool(played.done.all()):
        played.step(HeuristicAgent("balanced").act(played))
    final = played.returns().gather(1, chooser[:, None])[:, 0]
    for chunk in (2, 1024):
        rollouts = Rollouts(HeuristicAgent("balanced"), chunk=chunk)
        assert torch.equal(rollouts.values(batch.clone(), chooser), final)


def test_spec_gives_the_base_its_own_arguments_and_options():
    spec = "search:heuristic:cautious:deny_weight=0.2:worlds=3:margin=1:max_deck=all"
    agent = agent_from_spec(spec, seed=0)
    assert isinstance(agent, SearchAgent) and agent.name == spec
    assert agent.worlds == 3 and agent.margin == 1.0 and agent.max_deck is None
    assert agent.top is None and agent.rollouts.depth is None  # no probabilities to rank
    assert agent.rollouts.policy.params.deny_weight == 0.2
    best = agent_from_spec("search:best:greedy:depth=2:top=all:z=0.5:max_deck=9", seed=0)
    assert best.rollouts.policy.greedy and best.rollouts.depth == 2 and best.top is None
    assert best.z == 0.5 and best.max_deck == 9
    assert best.rollouts.value.scale == 100.0 and not best.rollouts.value.history
    assert best.rules == CLASSIC  # the arena checks the checkpoint's rules


def test_search_best_defaults_to_the_measured_budget():
    agent = agent_from_spec("search:best", seed=0)
    assert (agent.worlds, agent.top, agent.z, agent.max_deck) == (64, 4, 1.0, 20)
    assert agent.rollouts.depth is None and not agent.rollouts.wins


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("search", "needs a base agent spec"),
        ("search:worlds=4", "needs a base agent spec"),
        ("search:search:random", "search over a search"),
        ("search:random:depth=3", "has none"),
        ("search:random:worlds=0", "worlds=0 must be an int >= 1"),
        ("search:random:worlds=many", "is not an int"),
        ("search:random:top=3", "offers none"),
        ("search:best:top=1", "top=1 must be >= 2"),
        ("search:random:margin=-1", "must be >= 0"),
        ("search:random:utility=money", "expected points or wins"),
        ("search:best:depth=3:utility=wins", "needs full rollouts"),
        ("search:nonsense", "unknown kind 'nonsense'"),
    ],
)
def test_bad_search_specs_say_what_is_wrong(spec, message):
    with pytest.raises(AgentSpecError, match=message):
        agent_from_spec(spec)


def test_a_round_of_play_against_a_search_runs_to_its_end():
    lines: list[str] = []
    answers = iter(["1"] * 400)
    spec = "search:heuristic:balanced:worlds=2:max_deck=6"
    play_main(
        ["--opponent", spec, "--seed", "1"], read=lambda prompt: next(answers), write=lines.append
    )
    out = "\n".join(lines)
    assert f"Lost Cities against {spec}" in out and "Round over after" in out
