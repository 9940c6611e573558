"""The OpenSpiel adapter (``game/openspiel_adapter.py``): equal to the poker engine on the
same deals and actions, its refusals, its chance, and another OpenSpiel game."""

from __future__ import annotations

import sys

import pytest
import torch

from lostcities_cfr.errors import ConfigError, IllegalActionError
from lostcities_cfr.game.openspiel_adapter import OpenSpielGame
from lostcities_cfr.game.poker import KuhnPoker, LeducPoker, PokerBatch
from lostcities_cfr.game.protocol import BatchedGames, Game

pytest.importorskip("pyspiel")


def random_actions(mask: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """[B] a uniformly random legal action per row (0 in finished games)."""
    weights = mask.float()
    weights[~mask.any(1), 0] = 1
    return torch.multinomial(weights, 1, generator=generator).squeeze(1)


def play_out(batch, seed: int) -> list[dict[str, torch.Tensor]]:
    """Random legal play to the end; what the batch showed before each step, and at the end."""
    generator, record = torch.Generator().manual_seed(seed), []
    while True:
        shown = {
            "done": batch.done,
            "player": torch.where(batch.done, 0, batch.current_player),
            "mask": batch.legal_mask(),
            "features": [batch.encode(torch.full((batch.batch_size,), p)) for p in range(2)],
            "returns": batch.returns(),
            "turn": batch.turn,
        }
        if bool(batch.done.all()):
            return [*record, shown]
        shown["actions"] = random_actions(shown["mask"], generator)
        batch.step(shown["actions"])
        record.append(shown)


@pytest.mark.parametrize("engine", [KuhnPoker(), LeducPoker()], ids=lambda g: g.name)
def test_adapter_equals_the_poker_engine(engine):
    """A few hundred random games through the adapter, then the same deals (read from
    OpenSpiel's histories) and actions through the tensor engine: equal at every step."""
    adapter = OpenSpielGame(engine.name)
    batch = adapter.new_batch(300, seed=4)
    seen = play_out(batch, seed=5)
    deals = []
    for state in batch.states:
        chance = [h.action for h in state.full_history() if h.player < 0]
        unused = [c for c in range(engine.rules.n_cards) if c not in chance]
        deals.append((chance + unused)[: engine.rules.n_dealt])  # a fold hides the public card
    ours = PokerBatch.from_deals(engine, deals)
    for step, shown in enumerate(seen):
        assert torch.equal(ours.done, shown["done"]), step
        assert torch.equal(torch.where(ours.done, 0, ours.current_player), shown["player"])
        assert torch.equal(ours.legal_mask(), shown["mask"]), step
        for p in range(2):
            assert torch.equal(ours.encode(torch.full((300,), p)), shown["features"][p]), step
        assert torch.equal(ours.returns(), shown["returns"]) and torch.equal(
            ours.turn, shown["turn"]
        )
        if "actions" in shown:
            ours.step(shown["actions"])
    assert len(seen) > 2 and seen[-1]["returns"].abs().sum() > 0
    assert len({tuple(d[:2]) for d in deals}) == {"kuhn_poker": 6, "leduc_poker": 30}[engine.name]


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("cliff_walking", "1-player game"),
        ("first_sealed_auction", "general_sum, not zero-sum"),
        ("goofspiel", "simultaneous moves"),
        ("tic_tac_toe", "no information_state_tensor"),
    ],
)
def test_refuses_games_the_protocol_cannot_hold(name, reason):
    with pytest.raises(ConfigError, match=f"'{name}' .*{reason}"):
        OpenSpielGame(name)


def test_refuses_unknown_names_parameters_and_kernels():
    with pytest.raises(ConfigError, match="unknown OpenSpiel game 'xyz'"):
        OpenSpielGame("xyz")
    with pytest.raises(ConfigError, match=r"leduc_poker.*Unknown parameter 'bogus'"):
        OpenSpielGame("leduc_poker", {"bogus": 1})
    game = OpenSpielGame("kuhn_poker")
    with pytest.raises(ConfigError, match=r"kuhn_poker .*no compiled kernels"):
        game.new_batch(2, kernels="compiled")


def test_missing_open_spiel_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspiel", None)  # import pyspiel now fails
    with pytest.raises(ConfigError, match="pip install open_spiel"):
        OpenSpielGame("kuhn_poker")


def test_clone_and_select_replay_the_same_chance():
    game = OpenSpielGame("leduc_poker")
    batch = game.new_batch(40, seed=9)
    copies = batch.clone()
    forks = batch.select([3, 3])
    for actions in ([1] * 40, [1] * 40):  # check, check: the public card is dealt
        batch.step(torch.tensor(actions))
        copies.step(torch.tensor(actions))
    forks.step(torch.tensor([1, 1]))
    forks.step(torch.tensor([1, 1]))
    public = [s.history()[4] for s in batch.states]  # two cards, two checks, the public card
    assert public == [s.history()[4] for s in copies.states]
    assert [s.history() for s in forks.states] == [batch.states[3].history()] * 2
    assert len(set(public)) > 1  # games draw their own cards
    again = game.new_batch(40, seed=9)
    again.step(torch.ones(40, dtype=torch.int64))
    again.step(torch.ones(40, dtype=torch.int64))
    assert [s.history() for s in again.states] == [s.history() for s in batch.states]
    assert [s.history()[:2] for s in game.new_batch(40, seed=10).states] != [
        s.history()[:2] for s in batch.states
    ]


def test_illegal_actions_cut_games_and_finished_games():
    batch = OpenSpielGame("leduc_poker").new_batch(3, seed=1)
    with pytest.raises(IllegalActionError, match=r"game 2 of 3: Fold \(action 0\).*leduc_poker"):
        batch.step(torch.tensor([1, 2, 0]))
    assert batch.turn.tolist() == [0, 0, 0]  # no game changed
    with pytest.raises(TypeError, match="dtype"):
        batch.step(torch.tensor([1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="shape"):
        batch.step(torch.tensor([1, 1]))
    batch.done = torch.tensor([False, True, False])
    assert batch.legal_mask().sum(1).tolist() == [2, 0, 2]
    batch.step(torch.tensor([2, 9, 2]))  # the cut game ignores its action
    batch.step(torch.tensor([0, 9, 1]))  # game 0 folds: over; game 2 calls
    assert batch.turn.tolist() == [2, 0, 2] and batch.done.tolist() == [True, True, False]
    assert batch.returns()[0].tolist() == [1, -1] and batch.returns()[1].abs().sum() == 0


def test_another_game_plays_out():
    """Liar's dice (a chance deal of dice, bids, a call): random play to the end."""
    game = OpenSpielGame("liars_dice")
    assert isinstance(game, Game) and game.n_actions == 13
    batch = game.new_batch(64, seed=2)
    assert isinstance(batch, BatchedGames)
    seen = play_out(batch, seed=3)
    for shown in seen[:-1]:
        live = ~shown["done"]
        assert shown["mask"][live].any(1).all() and not shown["mask"][~live].any()
        assert shown["features"][0].shape == (64, game.feature_size)
    assert batch.done.all() and (batch.turn <= game.max_game_length).all()
    returns = batch.returns()
    assert (returns.sum(1) == 0).all() and (returns.abs() == 1).all()
    history = batch.encode_history()
    assert history.shape == (64, game.history_feature_size)
    assert torch.equal(history[:, game.feature_size :], batch.encode(torch.ones(64, dtype=int)))
    assert game.action_name(12) == "Liar" and batch.select([]).encode().shape == (0, 21)
