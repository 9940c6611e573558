"""``evaluate --record``: every game of the arena as a JSON line that replays exactly, and
recording changes nothing of the evaluation."""

import dataclasses
import functools
import json

import pytest
import torch

from lostcities_cfr.agents import NoisyAgent, RandomAgent
from lostcities_cfr.commands.evaluate import main
from lostcities_cfr.errors import ReplayError
from lostcities_cfr.evaluation.arena import evaluate
from lostcities_cfr.evaluation.recording import (
    GameRecord,
    GameRecorder,
    deal_state,
    read_records,
    replay_states,
    write_records,
)
from lostcities_cfr.game import GameBatch, Rules


@pytest.fixture(autouse=True)
def restore_torch_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def agents():
    return NoisyAgent(RandomAgent(seed=1), 0.2, seed=1), RandomAgent(seed=2)


@functools.cache
def recorded(games: int = 8, seed: int = 3, rules: Rules | None = None):
    """An evaluation and its records (shared by the tests: records are frozen)."""
    recorder = GameRecorder()
    result = evaluate(*agents(), games, rules=rules, seed=seed, recorder=recorder)
    return result, tuple(recorder.records)


@pytest.mark.parametrize("rules", [Rules.classic(), Rules.six_colors(), Rules.tiny()])
def test_replaying_each_recorded_game_from_its_deal_gives_its_recorded_scores(rules):
    result, records = recorded(rules=rules)
    assert len(records) == result.games == 8
    for record in records:
        states = replay_states(record)  # raises unless every action is legal and scores agree
        assert len(states) == len(record.actions) + 1
        assert states[-1].is_terminal and states[-1].scores() == record.scores


def test_records_pair_each_deal_with_its_mirror_and_credit_the_agent_both_times():
    result, records = recorded()
    assert [(r.game, r.deal, r.agent_seat) for r in records[:4]] == [
        (0, 0, 0),
        (1, 0, 1),
        (2, 1, 0),
        (3, 1, 1),
    ]
    names = (result.agent, result.opponent)
    assert all(r.seats == (names if r.agent_seat == 0 else names[::-1]) for r in records)
    # the records' scores are the ones the evaluation counted
    diffs = torch.tensor([r.score_diff for r in records], dtype=torch.float64)
    assert diffs.mean().item() == pytest.approx(result.rounds.score_diff)
    assert sum(r.score_diff > 0 for r in records) == result.rounds.wins
    turns = sum(len(r.actions) for r in records) / 2 / len(records)
    assert turns == pytest.approx(result.game_length)


def test_a_records_deal_is_the_arenas_deal():
    _, records = recorded(games=8, seed=11)
    decks = GameBatch.new(Rules.classic(), 4, seed=11).deck.tolist()  # the arena's 4 deals
    for record in records:
        state = deal_state(record)
        H = record.rules.hand_size
        deck = decks[record.deal]
        assert state.hands == [sorted(deck[:H]), sorted(deck[H : 2 * H])]
        assert state.deck == deck[2 * H :]


def test_recording_changes_no_figure_of_the_evaluation():
    def figures(result):
        data = result.to_dict()
        del data["seconds"], data["games_per_s"]
        return data

    plain = evaluate(*agents(), 8, seed=3)
    assert figures(recorded()[0]) == figures(plain)


def test_records_survive_a_round_trip_through_the_file(tmp_path):
    _, records = recorded()
    write_records(tmp_path / "games.jsonl", records)
    assert tuple(read_records(tmp_path / "games.jsonl")) == records
    line = (tmp_path / "games.jsonl").read_text().splitlines()[0]
    assert set(json.loads(line)) == {f.name for f in dataclasses.fields(GameRecord)}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: "not json", "line 2: not a JSON object"),
        (lambda d: json.dumps([1, 2]), "line 2: not a JSON object"),
        (lambda d: json.dumps({k: v for k, v in d.items() if k != "actions"}), "actions missing"),
        (lambda d: json.dumps({**d, "actions": [1, "x"]}), "actions must be a list of ints"),
        (lambda d: json.dumps({**d, "scores": [1]}), "scores must hold 2 ints, got 1"),
        (lambda d: json.dumps({**d, "deal": 99}), "deal 99 must lie in 0..deals-1"),
        (lambda d: json.dumps({**d, "agent_seat": 2}), "agent_seat 2 must be 0 or 1"),
        (lambda d: json.dumps({**d, "seed": True}), "seed must be an int, got True"),
        (lambda d: json.dumps({**d, "seats": ["a"]}), "seats must be two agent names"),
        (lambda d: json.dumps({**d, "rules": {"n_colors": 0}}), "Rules.n_colors=0"),
    ],
)
def test_a_bad_line_is_refused_naming_the_file_the_line_and_the_field(tmp_path, change, message):
    _, records = recorded(games=4)
    lines = [r.to_json() for r in records]
    lines[1] = change(json.loads(lines[1]))
    path = tmp_path / "games.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ReplayError, match=r"games\.jsonl line 2: ") as error:
        read_records(path)
    assert message in str(error.value)


def test_an_empty_or_missing_file_is_refused_by_name(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ReplayError, match=r"empty\.jsonl holds no games"):
        read_records(tmp_path / "empty.jsonl")
    with pytest.raises(ReplayError, match=r"cannot read the record file .*missing\.jsonl"):
        read_records(tmp_path / "missing.jsonl")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: {"actions": (*r.actions[:5], 10_000)}, "decision 5: action 10000"),
        (lambda r: {"actions": r.actions[:-1]}, "has not ended after its last action"),
        (lambda r: {"actions": (*r.actions, 0)}, "ends after decision"),
        (lambda r: {"scores": (r.scores[0] + 1, r.scores[1])}, "replaying gives scores"),
        (lambda r: {"deal": (r.deal + 1) % r.deals}, "game 0"),
    ],
)
def test_a_game_that_does_not_replay_is_refused_saying_where(change, message):
    _, records = recorded(games=4)
    record = dataclasses.replace(records[0], **change(records[0]))
    with pytest.raises(ReplayError, match="game 0") as error:
        replay_states(record)
    assert message in str(error.value)


def test_evaluate_record_writes_every_game_and_prints_the_same_figures(tmp_path, capsys):
    argv = ["--agent", "random", "--opponent", "discard-only", "--games", "10", "--json"]
    main(argv)
    plain = json.loads(capsys.readouterr().out)
    main([*argv, "--record", str(tmp_path / "games.jsonl")])
    data = json.loads(capsys.readouterr().out)
    for result in (plain, data):
        del result["seconds"], result["games_per_s"]
    assert data == plain
    records = read_records(tmp_path / "games.jsonl")
    assert len(records) == 10
    assert {r.seats[r.agent_seat] for r in records} == {"random"}
    for record in records:
        replay_states(record)


def test_evaluate_refuses_an_unwritable_record_file_before_playing(tmp_path, capsys):
    (tmp_path / "a_file").write_text("")
    with pytest.raises(SystemExit) as exit_:
        main(["--agent", "random", "--games", "2", "--record", str(tmp_path / "a_file" / "x")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"--record {tmp_path / 'a_file' / 'x'}: cannot write it" in err


def test_evaluate_record_creates_the_files_folders(tmp_path, capsys):
    main(["--agent", "random", "--games", "2", "--record", str(tmp_path / "runs" / "x.jsonl")])
    assert len(read_records(tmp_path / "runs" / "x.jsonl")) == 2
