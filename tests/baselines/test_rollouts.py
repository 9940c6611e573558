"""Self-play rollouts and teacher games: legal moves only, returns as the reference engine
scores the same games."""

import pytest
import torch

import lostcities_cfr.baselines.rollout as rollout_module
from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.baselines.behaviour_cloning import teacher_games
from lostcities_cfr.baselines.rollout import LEARNER, learner_rollout
from lostcities_cfr.cfr.networks import NetworkConfig, masked_softmax
from lostcities_cfr.evaluation.arena import play_out
from lostcities_cfr.game import GameBatch, Rules, feature_size
from lostcities_cfr.inference import InferenceQueue

RULES = Rules.classic()
GAMES = 12


def replay(seed: int, moves: list[tuple[torch.Tensor, torch.Tensor]], before=None) -> list[int]:
    """Score difference (seat 0 minus seat 1) of each game, replayed on the reference engine.

    ``moves``: per step, the games that moved and their actions; an illegal one raises.
    ``before(game, state)`` is called before each move.
    """
    states = GameBatch.new(RULES, GAMES, seed=seed).to_states()
    for games, actions in moves:
        for game, action in zip(games.tolist(), actions.tolist(), strict=True):
            if before is not None:
                before(game, states[game])
            states[game].apply(action)
    assert all(state.is_terminal for state in states)
    return [state.scores()[0] - state.scores()[1] for state in states]


@pytest.fixture
def queue() -> InferenceQueue:
    torch.manual_seed(0)
    F, A = feature_size(RULES), RULES.n_actions
    queue = InferenceQueue(bucket_sizes=None)
    queue.register(LEARNER, NetworkConfig(32, 1).build(F, A), masked_softmax)
    queue.register("old", NetworkConfig(32, 1).build(F, A), masked_softmax)
    return queue


def record_moves(monkeypatch) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The rollouts' moves, step by step as ``(live games, their actions)``, checked legal by
    the engine as they are played."""
    moves = []

    def recording_play_out(batch, decide, check=True):
        def record(batch, step, rows):
            actions = decide(batch, step, rows)
            live = ~batch.done
            moves.append((rows[live].clone(), actions[live].clone()))
            return actions

        return play_out(batch, record, check=True)

    monkeypatch.setattr(rollout_module, "play_out", recording_play_out)
    return moves


def test_learner_rollout_plays_legal_moves_and_returns_the_reference_engines_score(
    queue, monkeypatch
):
    moves = record_moves(monkeypatch)
    seed = 7
    rows, decisions = learner_rollout(
        RULES, queue, [LEARNER, "old"], GAMES, seed, torch.Generator().manual_seed(0)
    )
    differences = torch.tensor(replay(seed, moves), dtype=torch.float32)
    seat = torch.arange(GAMES) % 2
    learner_view = torch.where(seat == 0, differences, -differences)
    torch.testing.assert_close(rows.returns, learner_view[rows.game])
    assert decisions == sum(len(games) for games, _ in moves)
    # every row is a decision of the learner's seat, with a legal action
    assert (rows.seat == seat[rows.game]).all()
    assert rows.legal.gather(1, rows.actions[:, None]).all()
    # ... and the learner took exactly its seat's decisions
    own_steps = [(g, s) for s, (games, _) in enumerate(moves) for g in games.tolist()]
    own_steps = sorted((g, s) for g, s in own_steps if (s >> 1) & 1 == g % 2)
    assert sorted(zip(rows.game.tolist(), rows.step.tolist(), strict=True)) == own_steps


def test_learner_rollout_log_probs_are_those_of_the_learners_policy(queue):
    rows, _ = learner_rollout(RULES, queue, ["old"], GAMES, 3, torch.Generator().manual_seed(1))
    probs = queue(LEARNER, rows.features, rows.legal)
    expected = probs.gather(1, rows.actions[:, None]).squeeze(1).log()
    torch.testing.assert_close(rows.log_probs, expected)


def test_teacher_games_record_every_decision_with_the_reference_engines_score():
    seed = 11
    teacher = agent_from_spec("heuristic:balanced")
    rows = teacher_games(RULES, teacher, GAMES, seed)
    order = torch.argsort(rows.step * GAMES + rows.game)  # step by step, games in order
    moves = [
        (rows.game[order][rows.step[order] == s], rows.actions[order][rows.step[order] == s])
        for s in range(int(rows.step.max()) + 1)
    ]
    features = iter(rows.features[order])

    def same_features(game, state):
        torch.testing.assert_close(next(features), GameBatch.from_states([state]).encode()[0])

    differences = torch.tensor(replay(seed, moves, same_features), dtype=torch.float32)
    own = torch.where(rows.seat == 0, differences[rows.game], -differences[rows.game])
    torch.testing.assert_close(rows.returns, own)
    assert rows.legal.gather(1, rows.actions[:, None]).all()


def test_a_fixed_agent_opponent_plays_its_own_moves_from_both_seats(queue, monkeypatch):
    moves = record_moves(monkeypatch)
    heuristic = agent_from_spec("heuristic:cautious")
    seed = 5
    rows, _ = learner_rollout(
        RULES, queue, [heuristic], GAMES, seed, torch.Generator().manual_seed(2)
    )
    agent_moves = [
        action
        for step, (games, actions) in enumerate(moves)
        for game, action in zip(games.tolist(), actions.tolist(), strict=True)
        if (step >> 1) & 1 != game % 2  # the learner sits in seat game % 2
    ]
    agent_states = []

    def agents_move(game, state):
        if state.current_player != game % 2:
            agent_states.append(state.clone())

    differences = torch.tensor(replay(seed, moves, agents_move), dtype=torch.float32)
    # the heuristic's own choice in every state where it moved, asked in one batch
    assert agent_moves == heuristic.act(GameBatch.from_states(agent_states)).tolist()
    seat = torch.arange(GAMES) % 2
    torch.testing.assert_close(
        rows.returns, torch.where(seat == 0, differences, -differences)[rows.game]
    )
    assert set(rows.seat.tolist()) == {0, 1}
