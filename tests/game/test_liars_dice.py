"""Liar's Dice (``game/liars_dice.py``) against OpenSpiel: whole trees, units, play."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from openspiel_tree import walk_openspiel

from lostcities_cfr.cfr import masked_softmax
from lostcities_cfr.cfr.exploitability import nash_conv
from lostcities_cfr.cfr.openspiel_oracle import openspiel_nash_conv
from lostcities_cfr.errors import ConfigError, IllegalActionError
from lostcities_cfr.game.liars_dice import DiceBatch, LiarsDice
from lostcities_cfr.game.protocol import BatchedGames, Game

pyspiel = pytest.importorskip("pyspiel")

# Small enough to walk whole in OpenSpiel (8,176 histories each): one die of four sides,
# and two dice of two sides (sorting, wild dice, two dice a player) under the other rule.
WALKED = [LiarsDice(numdice=1, dice_sides=4), LiarsDice(2, 2, "reset-quantity")]
# Played at random against OpenSpiel: the default game and two-dice variants.
PLAYED = [LiarsDice(), LiarsDice(numdice=2), LiarsDice(2, 4, "reset-quantity")]
GAMES = WALKED + PLAYED


def label(game: LiarsDice) -> str:
    return f"{game.numdice}x{game.dice_sides}-{game.bidding_rule}"


def sorted_deal(game: LiarsDice, rolls: tuple[int, ...]) -> tuple[int, ...]:
    """Rolls in OpenSpiel's order as our deal: each player's dice sorted."""
    N = game.numdice
    return (*sorted(rolls[:N]), *sorted(rolls[N:]))


@pytest.mark.parametrize(
    "game", [*WALKED, pytest.param(LiarsDice(), marks=pytest.mark.slow)], ids=label
)  # the default game: 294,876 histories, about 14 s
def test_whole_tree_equals_openspiel(game):
    """Every history of OpenSpiel's tree holds equal on our deal of its rolls: the player
    to move, the legal actions, both players' features, the returns; each deal's
    probability is that of its roll orders; and one information set of ours is one of
    OpenSpiel's information-state strings."""
    nodes, paths = walk_openspiel(game.openspiel_game())
    # every rising sequence of the T * S bids, and each one's Liar but the empty one's
    assert len(nodes) == game.dice_sides**game.total_dice * (2**game.n_actions - 1)
    roots, probability = game.deals()
    deals = [tuple(d) for d in roots.dice.flatten(1).tolist()]
    hands = math.comb(game.dice_sides + game.numdice - 1, game.numdice)  # sorted dice
    assert len(set(deals)) == len(deals) == hands**2
    assert probability.dtype == torch.float64 and abs(float(probability.sum()) - 1) < 1e-12
    index = {deal: d for d, deal in enumerate(deals)}
    by_deal = Counter()
    for rolls, p in paths.items():
        by_deal[index[sorted_deal(game, rolls)]] += p
    assert sorted(by_deal) == list(range(len(deals)))
    for d, p in by_deal.items():
        assert p == pytest.approx(float(probability[d]), abs=1e-12)

    infosets: dict[object, set] = defaultdict(set)
    levels = defaultdict(list)
    for node in nodes:
        levels[len(node.actions)].append(node)
    assert max(levels) == game.max_game_length
    for depth, rows in levels.items():
        batch = roots.select([index[sorted_deal(game, n.chance)] for n in rows])
        for t in range(depth):
            batch.step(torch.tensor([n.actions[t] for n in rows]))
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
        for r in moving.nonzero().flatten().tolist():
            key = features[r].numpy().tobytes()
            infosets[("ours", key)].add(rows[r].info)
            infosets[("openspiel", rows[r].info)].add(key)
    assert all(len(partners) == 1 for partners in infosets.values())


def linear_policy(game: LiarsDice, seed: int):
    """A fixed random policy far from uniform: masked softmax of 3 * features @ W."""
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(game.feature_size, game.n_actions, generator=generator).double()
    return lambda features, legal: masked_softmax(3 * features.double() @ weight, legal)


@pytest.mark.parametrize("game", WALKED, ids=label)
def test_exact_nash_conv_from_deals_equals_openspiels(game):
    """Our exact walk over ``deals()`` (the deals' probabilities, the features as
    information sets) values a policy as OpenSpiel's walk over its own tree does."""
    policy = linear_policy(game, seed=0)
    ours = nash_conv(game, policy)
    assert ours > 0.1 and ours == pytest.approx(openspiel_nash_conv(game, policy), abs=1e-9)


def test_the_default_game_walks_whole():
    """The default game (1 die of 6 sides) is small enough for the exact walk."""
    roots, probability = LiarsDice().deals()
    assert roots.batch_size == 36 and torch.allclose(
        probability, torch.full((36,), 1 / 36, dtype=torch.float64)
    )
    with pytest.raises(ConfigError, match="too large to walk whole"):
        LiarsDice(numdice=2, dice_sides=45).deals()  # 1,035 hands: 1,071,225 deals


@pytest.mark.parametrize("game", GAMES, ids=label)
def test_sizes_names_and_protocol(game):
    spiel = game.openspiel_game()
    assert spiel.get_parameters()["bidding_rule"] == game.bidding_rule
    assert game.n_actions == spiel.num_distinct_actions()
    assert game.feature_size == spiel.information_state_tensor_size()
    assert game.max_game_length == spiel.max_game_length()
    state = spiel.new_initial_state()
    names = [state.action_to_string(0, a) for a in range(game.n_actions)]
    assert [game.action_name(a) for a in range(game.n_actions)] == names
    with pytest.raises(ValueError, match=game.name):
        game.action_name(game.n_actions)
    batch = game.new_batch(4, seed=0)
    assert isinstance(game, Game) and isinstance(batch, BatchedGames)
    twin = LiarsDice(game.numdice, game.dice_sides, game.bidding_rule)
    assert game == twin and hash(game) == hash(twin) and game.name == "liars_dice"
    assert batch.encode().shape == (4, game.feature_size) and batch.encode().dtype == torch.float32
    assert batch.encode_history().shape == (4, game.history_feature_size)
    assert not batch.compiled and batch.to("cpu").device == torch.device("cpu")


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"players": 3}, "players must be 2.*got 3"),
        ({"players": 1}, "players must be 2.*got 1"),
        ({"numdice": 0}, "numdice must be an integer >= 1, got 0"),
        ({"numdice": 1.5}, "numdice must be an integer >= 1, got 1.5"),
        ({"dice_sides": 0}, "dice_sides must be an integer >= 1, got 0"),
        ({"bidding_rule": "reset-both"}, "bidding_rule must be one of.*'reset-both'"),
    ],
)
def test_unsupported_parameters_are_refused_naming_them(parameters, message):
    with pytest.raises(ConfigError, match=message):
        LiarsDice(**parameters)


def test_encode_history_layout():
    game = LiarsDice(numdice=2, dice_sides=3)
    batch = DiceBatch.from_deals(game, [[2, 0, 1, 1]])
    batch.step(torch.tensor([4]))  # player 0 bids 2-2: player 1 to move
    history = batch.encode_history()[0]
    assert torch.equal(history[:21], batch.encode()[0]) and batch.encode()[0, 1] == 1
    dice = history[21:].view(2, 2, 3)  # player 0's sorted dice, then player 1's
    assert dice.argmax(2).tolist() == [[0, 2], [1, 1]] and dice.sum().item() == 4
    assert batch.encode()[0, 2:8].view(2, 3).argmax(1).tolist() == [1, 1]  # own dice only


@pytest.mark.parametrize("game", WALKED[:1], ids=label)
def test_kernels_refused(game):
    with pytest.raises(ConfigError, match=f"{game.name} has no compiled kernels"):
        game.new_batch(2, kernels="compiled")
    with pytest.raises(ConfigError, match="'eager' or 'compiled'"):
        game.new_batch(2, kernels="fused")
    with pytest.raises(ValueError, match="batch_size"):
        game.new_batch(0)


def test_illegal_actions_raise_naming_the_game_and_change_nothing():
    batch = DiceBatch.from_deals(LiarsDice(), [[0, 1], [2, 3]])
    with pytest.raises(IllegalActionError, match=r"game 1 of 2: Liar \(action 12\).*no"):
        batch.step(torch.tensor([3, 12]))  # no bid to call yet
    assert batch.turn.tolist() == [0, 0] and not batch.bids.any()
    assert batch.last.tolist() == [-1, -1]
    batch.step(torch.tensor([7, 2]))  # 2-2 and 1-3
    before = batch.clone()
    with pytest.raises(IllegalActionError, match=r"game 0 of 2: 2-2 \(action 7\).*above.*2-2"):
        batch.step(torch.tensor([7, 3]))  # a bid must rise: repeating one is illegal
    with pytest.raises(IllegalActionError, match=r"game 1 of 2: 1-2 \(action 1\).*1-3 \(id 2"):
        batch.step(torch.tensor([8, 1]))
    with pytest.raises(IllegalActionError, match=r"no action \(action 13\).*ids 0\.\.12"):
        batch.step(torch.tensor([13, 12]))
    with pytest.raises(IllegalActionError, match=r"game 0 of 2: no action \(action -1\)"):
        batch.step(torch.tensor([-1, 12]))
    with pytest.raises(TypeError, match="dtype"):
        batch.step(torch.tensor([8.0, 3.0]))
    with pytest.raises(ValueError, match="shape"):
        batch.step(torch.tensor([8]))
    for name in ("dice", "bids", "last", "turn", "done"):
        assert torch.equal(getattr(batch, name), getattr(before, name))
    batch.step(torch.tensor([11, 12]))  # 2-6, the highest bid; Liar
    assert batch.legal_mask().tolist() == [[False] * 12 + [True], [False] * 13]


def test_finished_and_cut_games_ignore_actions():
    # player 0 holds a 1, player 1 a 6 (wild): two dice count as 1s, one as a 3
    batch = DiceBatch.from_deals(LiarsDice(), [[0, 5], [0, 5]])
    batch.step(torch.tensor([6, 1]))  # game 0: 2-1; game 1: 1-2
    batch.step(torch.tensor([12, 2]))  # game 0: player 1 calls Liar, loses; game 1: 1-3
    batch.step(torch.tensor([0, 12]))  # game 0 is over; game 1: player 0 calls, loses
    assert batch.done.all() and batch.returns().tolist() == [[1, -1], [-1, 1]]
    state = batch.clone()
    batch.step(torch.tensor([7, -3]), check=False)  # finished games never read them
    batch.step(torch.tensor([7, -3]))  # nor check them
    for name in ("bids", "last", "turn"):
        assert torch.equal(getattr(batch, name), getattr(state, name))
    assert torch.equal(batch.returns(), state.returns())
    cut = LiarsDice().new_batch(3, seed=2)
    cut.done = torch.tensor([False, True, False])
    assert cut.legal_mask()[1].sum() == 0 and cut.legal_mask()[0].sum() == 12
    cut.step(torch.tensor([2, 0, 1]))
    assert cut.turn.tolist() == [1, 0, 1] and cut.returns().abs().sum() == 0
    assert cut.bids[1].sum() == 0 and cut.last.tolist() == [2, -1, 1]


def test_select_and_clone_are_independent():
    batch = LiarsDice(numdice=2).new_batch(4, seed=3)
    forks = batch.select([2, 2, 0])
    assert torch.equal(forks.dice, batch.dice[[2, 2, 0]])
    copy = batch.clone()
    forks.step(torch.tensor([5, 1, 5]))
    copy.step(torch.tensor([3, 3, 3, 3]))
    copy.step(torch.tensor([24, 24, 24, 24]))
    assert batch.turn.sum() == 0 and not batch.bids.any() and (batch.last == -1).all()
    assert forks.last.tolist() == [5, 1, 5] and forks.bids.sum(1).tolist() == [1, 1, 1]
    assert copy.done.all() and not forks.done.any() and not batch.done.any()


def test_from_deals_validates_and_sorts():
    with pytest.raises(ValueError, match=r"\[B, 4\]"):
        DiceBatch.from_deals(LiarsDice(numdice=2), [[0, 1]])
    with pytest.raises(ValueError, match=r"0\.\.5"):
        DiceBatch.from_deals(LiarsDice(), [[0, 6]])
    rolls = torch.tensor([[3, 1, 2, 0]])
    batch = DiceBatch.from_deals(LiarsDice(numdice=2), rolls)
    assert batch.dice.tolist() == [[[1, 3], [0, 2]]] and rolls.tolist() == [[3, 1, 2, 0]]


def test_new_batch_is_reproducible_and_draws_deals_with_their_probabilities():
    game = LiarsDice(numdice=2, dice_sides=3)
    assert torch.equal(game.new_batch(50, seed=7).dice, game.new_batch(50, seed=7).dice)
    assert not torch.equal(game.new_batch(50, seed=7).dice, game.new_batch(50, seed=8).dice)
    torch.manual_seed(11)
    first = game.new_batch(50).dice
    torch.manual_seed(11)
    assert torch.equal(first, game.new_batch(50).dice)
    roots, probability = game.deals()  # 36 deals; a pair is 1/81, a 0-2 hand 4/81
    index = {tuple(d): i for i, d in enumerate(roots.dice.flatten(1).tolist())}
    n = 40_000
    drawn = game.new_batch(n, seed=0).dice.flatten(1).tolist()
    counts = torch.bincount(torch.tensor([index[tuple(d)] for d in drawn]), minlength=36)
    expected = n * probability
    assert ((counts - expected).abs() < 5 * (expected * (1 - probability)).sqrt()).all()
    faces = torch.bincount(LiarsDice().new_batch(12000, seed=0).dice.flatten(), minlength=6)
    assert all(3600 < c < 4400 for c in faces.tolist())  # 4000 +- 5 sd of 24,000 dice


def replay_openspiel(game: LiarsDice, rolls: list[int]):
    state = game.openspiel_game().new_initial_state()
    for outcome in rolls:
        state.apply_action(outcome)
    return state


@settings(max_examples=150)
@given(game=st.sampled_from(PLAYED), data=st.data())
def test_random_play_matches_openspiel(game, data):
    """A random game, dice and bids drawn by hypothesis, equals OpenSpiel's at every step."""
    faces = st.integers(0, game.dice_sides - 1)
    rolls = data.draw(st.lists(faces, min_size=game.total_dice, max_size=game.total_dice))
    batch = DiceBatch.from_deals(game, [rolls])
    state = replay_openspiel(game, rolls)
    while not state.is_terminal():
        assert not batch.done[0] and int(batch.current_player[0]) == state.current_player()
        assert batch.legal_mask()[0].nonzero().flatten().tolist() == state.legal_actions()
        for p in range(2):
            assert batch.encode(torch.tensor([p]))[0].tolist() == state.information_state_tensor(p)
        action = data.draw(st.sampled_from(state.legal_actions()))
        batch.step(torch.tensor([action]))
        state.apply_action(action)
    assert batch.done[0] and batch.returns()[0].tolist() == state.returns()
    for p in range(2):
        assert batch.encode(torch.tensor([p]))[0].tolist() == state.information_state_tensor(p)
