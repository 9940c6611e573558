"""Kuhn and Leduc poker (``game/poker.py``) against OpenSpiel: the whole tree, units, play."""

from __future__ import annotations

from collections import Counter, defaultdict
from functools import cache

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from openspiel_tree import walk_openspiel

from lostcities_cfr.errors import ConfigError, IllegalActionError
from lostcities_cfr.game.poker import KuhnPoker, LeducPoker, PokerBatch, deal_table
from lostcities_cfr.game.protocol import BatchedGames, Game

pyspiel = pytest.importorskip("pyspiel")

GAMES = [KuhnPoker(), LeducPoker()]
IDS = [g.name for g in GAMES]


@cache
def openspiel(name: str):
    return pyspiel.load_game(name)


@pytest.mark.parametrize("game", GAMES, ids=IDS)
def test_whole_tree_equals_openspiel(game):
    """Every history of OpenSpiel's tree, on every deal of ours that it can be (a Leduc
    first-round history on each of the 4 public cards still to come), holds equal: the
    player to move, the legal actions, both players' features, the returns; the chance
    outcomes with their probabilities; and which histories share an information set."""
    nodes, paths = walk_openspiel(openspiel(game.name))
    assert len(nodes) == {"kuhn_poker": 54, "leduc_poker": 9300}[game.name]  # whole tree
    roots, probability = game.deals()
    deals = [tuple(d) for d in roots.cards.tolist()]
    assert len(set(deals)) == len(deals) == {"kuhn_poker": 6, "leduc_poker": 120}[game.name]
    assert probability.dtype == torch.float64 and abs(float(probability.sum()) - 1) < 1e-12
    complete = {path: p for path, p in paths.items() if len(path) == game.rules.n_dealt}
    assert set(complete) == set(deals)
    by_prefix = defaultdict(list)  # chance prefix -> our deals that begin with it
    for d, deal in enumerate(deals):
        assert complete[deal] == pytest.approx(float(probability[d]), abs=1e-12)
        for k in range(len(deal) + 1):
            by_prefix[deal[:k]].append(d)
    for path, p in paths.items():  # a fold before the public card: a prefix of deals
        assert p == pytest.approx(float(probability[by_prefix[path]].sum()), abs=1e-12)

    infosets: dict[object, set] = defaultdict(set)
    levels = defaultdict(list)
    for node in nodes:
        levels[len(node.actions)].append(node)
    assert max(levels) == game.max_game_length
    for depth, group in levels.items():
        owner = [i for i, node in enumerate(group) for _ in by_prefix[node.chance]]
        batch = roots.select([d for node in group for d in by_prefix[node.chance]])
        for t in range(depth):
            batch.step(torch.tensor([group[i].actions[t] for i in owner]))
        rows = [group[i] for i in owner]
        terminal = torch.tensor([n.terminal for n in rows])
        assert torch.equal(batch.done, terminal)
        assert torch.equal(batch.turn, torch.full((len(rows),), depth))
        assert torch.equal(batch.returns(), torch.tensor([n.returns for n in rows]))
        mask = torch.zeros(len(rows), game.n_actions, dtype=torch.bool)
        for r, node in enumerate(rows):
            mask[r, node.legal] = True
        assert torch.equal(batch.legal_mask(), mask)
        for p in range(2):
            expected = torch.tensor([n.tensors[p] for n in rows])
            assert torch.equal(batch.encode(torch.full((len(rows),), p)), expected)
        moving = ~terminal
        players = torch.tensor([n.player for n in rows])
        assert torch.equal(batch.current_player[moving], players[moving])
        features = batch.encode()
        expected = torch.tensor([n.tensors[max(n.player, 0)] for n in rows])
        assert torch.equal(features[moving], expected[moving])
        for r in moving.nonzero().flatten().tolist():
            key = features[r].numpy().tobytes()
            infosets[("ours", key)].add(rows[r].info)
            infosets[("openspiel", rows[r].info)].add(key)
    # one information set is one information-state string is one feature vector
    assert all(len(partners) == 1 for partners in infosets.values())
    n_sets = sum(kind == "openspiel" for kind, _ in infosets)
    assert n_sets == {"kuhn_poker": 12, "leduc_poker": 936}[game.name]


@pytest.mark.parametrize("game", GAMES, ids=IDS)
def test_sizes_names_and_protocol(game):
    spiel = openspiel(game.name)
    assert game.n_actions == spiel.num_distinct_actions()
    assert game.feature_size == spiel.information_state_tensor_size()
    assert game.max_game_length == spiel.max_game_length()
    state = replay_openspiel(game.name, [0, 1, 2], [])
    names = [state.action_to_string(0, a) for a in range(game.n_actions)]
    assert [game.action_name(a) for a in range(game.n_actions)] == names
    with pytest.raises(ValueError, match=game.name):
        game.action_name(game.n_actions)
    batch = game.new_batch(4, seed=0)
    assert isinstance(game, Game) and isinstance(batch, BatchedGames)
    assert game == type(game)() and hash(game) == hash(type(game)())
    assert batch.encode().shape == (4, game.feature_size) and batch.encode().dtype == torch.float32
    assert batch.encode_history().shape == (4, game.history_feature_size)
    assert not batch.compiled and batch.to("cpu").device == torch.device("cpu")


def test_encode_history_layout():
    batch = PokerBatch.from_deals(LeducPoker(), [[5, 0, 3]])
    batch.step(torch.tensor([2]))  # player 0 raises: player 1 to move
    history = batch.encode_history()[0]
    assert torch.equal(history[:30], batch.encode()[0]) and batch.encode()[0, 1] == 1
    cards = history[30:].view(3, 6)  # player 0, player 1, public (shown before round 2)
    assert cards.argmax(1).tolist() == [5, 0, 3] and cards.sum().item() == 3
    assert batch.encode()[0, 8:14].sum() == 0  # the public card is hidden from the player


@pytest.mark.parametrize("game", GAMES, ids=IDS)
def test_kernels_refused(game):
    with pytest.raises(ConfigError, match=f"{game.name} has no compiled kernels"):
        game.new_batch(2, kernels="compiled")
    with pytest.raises(ConfigError, match="'eager' or 'compiled'"):
        game.new_batch(2, kernels="fused")
    with pytest.raises(ValueError, match="batch_size"):
        game.new_batch(0)


def test_illegal_actions_raise_naming_the_game_and_change_nothing():
    batch = PokerBatch.from_deals(LeducPoker(), [[0, 1, 2], [3, 4, 5]])
    before = batch.clone()
    with pytest.raises(IllegalActionError, match=r"game 1 of 2: Fold \(action 0\).*leduc_poker"):
        batch.step(torch.tensor([1, 0]))  # nothing to call: fold is not offered
    assert torch.equal(batch.bets, before.bets) and torch.equal(batch.turn, before.turn)
    batch.step(torch.tensor([2, 2]))
    batch.step(torch.tensor([2, 2]))  # two raises: the cap
    with pytest.raises(IllegalActionError, match=r"game 0 of 2: Raise \(action 2\).*2 raises"):
        batch.step(torch.tensor([2, 1]))
    with pytest.raises(IllegalActionError, match=r"no action \(action 3\).*leduc_poker"):
        batch.step(torch.tensor([1, 3]))
    with pytest.raises(IllegalActionError, match=r"kuhn_poker has action ids 0\.\.1"):
        KuhnPoker().new_batch(3, seed=1).step(torch.tensor([0, -1, 1]))
    with pytest.raises(TypeError, match="dtype"):
        batch.step(torch.tensor([1.0, 1.0]))
    with pytest.raises(TypeError, match="dtype"):
        batch.step(torch.tensor([True, True]))
    with pytest.raises(ValueError, match="shape"):
        batch.step(torch.tensor([1]))
    assert torch.equal(batch.contrib, torch.tensor([[3, 5], [3, 5]]))  # 1 + 2; 1 + 2 + 2


def test_finished_and_cut_games_ignore_actions():
    batch = PokerBatch.from_deals(KuhnPoker(), [[2, 0], [2, 0]])
    batch.step(torch.tensor([1, 0]))  # game 0 bets, game 1 checks
    batch.step(torch.tensor([0, 0]))  # game 0: player 1 folds; game 1: both checked
    assert batch.done.all() and batch.returns().tolist() == [[1, -1], [1, -1]]
    state = batch.clone()
    batch.step(torch.tensor([7, -3]))  # unchecked: finished games never read them
    for name in ("bets", "contrib", "turn"):
        assert torch.equal(getattr(batch, name), getattr(state, name))
    assert torch.equal(batch.returns(), state.returns())
    cut = LeducPoker().new_batch(3, seed=2)
    cut.done = torch.tensor([False, True, False])
    assert cut.legal_mask()[1].sum() == 0 and cut.legal_mask()[0].sum() == 2
    cut.step(torch.tensor([2, 0, 1]))
    assert cut.turn.tolist() == [1, 0, 1] and cut.returns().abs().sum() == 0


def test_select_and_clone_are_independent():
    batch = LeducPoker().new_batch(4, seed=3)
    forks = batch.select([2, 2, 0])
    assert torch.equal(forks.cards, batch.cards[[2, 2, 0]])
    copy = batch.clone()
    forks.step(torch.tensor([2, 1, 2]))
    copy.step(torch.tensor([1, 1, 1, 1]))
    assert batch.turn.sum() == 0 and (batch.bets == -1).all() and (batch.contrib == 1).all()
    assert forks.bets[:, 0, 0].tolist() == [2, 1, 2] and copy.turn.tolist() == [1] * 4


def test_from_deals_validates():
    with pytest.raises(ValueError, match=r"\[B, 3\]"):
        PokerBatch.from_deals(LeducPoker(), [[0, 1]])
    with pytest.raises(ValueError, match=r"0\.\.2"):
        PokerBatch.from_deals(KuhnPoker(), [[0, 3]])
    with pytest.raises(ValueError, match="repeats"):
        PokerBatch.from_deals(LeducPoker(), [[1, 2, 1]])


def test_new_batch_is_reproducible_and_uniform():
    kuhn = KuhnPoker()
    assert torch.equal(kuhn.new_batch(50, seed=7).cards, kuhn.new_batch(50, seed=7).cards)
    assert not torch.equal(kuhn.new_batch(50, seed=7).cards, kuhn.new_batch(50, seed=8).cards)
    torch.manual_seed(11)
    first = kuhn.new_batch(50).cards
    torch.manual_seed(11)
    assert torch.equal(first, kuhn.new_batch(50).cards)
    counts = Counter(map(tuple, kuhn.new_batch(6000, seed=0).cards.tolist()))
    assert len(counts) == 6 and all(850 < n < 1150 for n in counts.values())  # 1000 +- 5 sd
    cards = LeducPoker().new_batch(12000, seed=0).cards
    assert len(set(map(tuple, cards.tolist()))) == 120
    for k in range(3):  # every seat's card, the public card's too, uniform over 6
        assert all(1800 < n < 2200 for n in torch.bincount(cards[:, k], minlength=6).tolist())


def replay_openspiel(name: str, deal: list[int], actions: list[int]):
    state = openspiel(name).new_initial_state()
    state.apply_action(deal[0])
    state.apply_action(deal[1])
    for action in actions:
        assert action in state.legal_actions()
        state.apply_action(action)
        if state.is_chance_node():
            assert deal[2] in [o for o, _ in state.chance_outcomes()]
            state.apply_action(deal[2])
    return state


@settings(max_examples=150)
@given(game=st.sampled_from(GAMES), data=st.data())
def test_random_play_matches_openspiel(game, data):
    deal = data.draw(st.sampled_from(deal_table(game.rules).tolist()), label="deal")
    batch = PokerBatch.from_deals(game, [deal])
    actions = []
    while not batch.done[0]:
        legal = batch.legal_mask()[0].nonzero().flatten().tolist()
        actions.append(data.draw(st.sampled_from(legal)))
        batch.step(torch.tensor(actions[-1:]))
        assert len(actions) <= game.max_game_length
    returns = batch.returns()[0]
    assert returns.sum() == 0
    state = replay_openspiel(game.name, deal, actions)
    assert state.is_terminal() and returns.tolist() == state.returns()
