"""The serve page's JSON API through the framework's test client: a match against the agent
with its reasoning, replays of recorded games, separate sessions, and clear refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient
from torch import nn

from lostcities_cfr.agents import HeuristicAgent, NetworkAgent, agent_from_spec
from lostcities_cfr.cfr import regret_matching
from lostcities_cfr.errors import RequestError
from lostcities_cfr.evaluation.recording import read_records, replay_states
from lostcities_cfr.game import GameBatch, GameState, Rules, feature_size
from lostcities_cfr.serve.app import COOKIE, create_app
from lostcities_cfr.serve.matches import Match, Sessions
from lostcities_cfr.serve.replays import ReplayLibrary

CLASSIC = Rules.classic()


def new_game(client: TestClient, **body) -> dict:
    response = client.post("/api/games", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def play_first_move(client: TestClient, game: dict) -> dict:
    move = {"action": game["moves"][0]["action"], "turn": game["board"]["turn"]}
    response = client.post(f"/api/games/{game['id']}/moves", json=move)
    assert response.status_code == 200, response.text
    return response.json()


def test_the_page_and_its_files_are_served_with_a_session_cookie(client):
    page = client.get("/")
    assert page.status_code == 200 and "<title>Lost Cities" in page.text
    cookie = page.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie and "SameSite=strict" in cookie
    for name, kind in (("serve.js", "javascript"), ("serve.css", "css")):
        response = client.get(f"/static/{name}")
        assert response.status_code == 200 and kind in response.headers["content-type"]
    # nothing is fetched from elsewhere: every script and style is the package's own
    assert "http" not in page.text
    info = client.get("/api/info").json()
    assert info == {"agent": "heuristic", "rules": "classic", "replay": "games.jsonl"}


def test_a_new_game_shows_what_the_person_may_know_and_the_legal_moves(client):
    game = new_game(client, seed=7)
    state = GameState.new(CLASSIC, 7)  # play --seed 7 deals the same round
    board = game["board"]
    assert [c["name"] for c in board["bottom"]["hand"]] == [
        CLASSIC.card_name(t) for t in state.hands[0]
    ]
    assert board["top"]["hand"] is None and board["top"]["hand_size"] == 8
    assert board["deck"] == 44 and board["turn"] == 0 and board["phase"] == "card"
    assert [m["action"] for m in game["moves"]] == state.legal_actions()
    first = state.legal_actions()[0]
    assert game["moves"][0] == {"group": "play", "label": CLASSIC.card_name(first), "action": first}
    assert (game["round"], game["rounds"], game["you"], game["your_turn"]) == (1, 3, 0, True)
    assert game["replies"] == [] and game["log"] == []
    assert game["seed"] is None  # it names the deck order: hidden while the round runs


def test_the_agent_seated_first_answers_at_once_with_its_reasoning(client):
    game = new_game(client, seed=7, seat=1, rounds=1)
    assert game["your_turn"] and game["board"]["turn"] == 2 and game["you"] == 1
    card, draw = game["replies"]
    assert card["player"] == 0 and draw["player"] == 0
    # the heuristic gives no probabilities: its choice, marked with probability 1
    assert not card["explained"] and card["labels"] == ["probability"]
    chosen = [row for row in card["top"] if row["chosen"]]
    assert len(chosen) == 1 and chosen[0]["probability"] == 1.0
    assert chosen[0]["text"] == card["text"] and card["legal"] == 16
    assert all(reply["ms"] >= 0 for reply in (card, draw))  # what each decision cost
    assert [entry["who"] for entry in game["log"]] == ["agent", "agent"]


def test_a_whole_match_is_played_through_the_api_and_scored(client):
    game = new_game(client, seed=3, rounds=3)
    rounds_seen = 0
    while True:
        while not game["round_over"]:
            assert game["your_turn"] and game["moves"]
            game = play_first_move(client, game)
        rounds_seen += 1
        summary = {player["seat"]: player["score"] for player in game["summary"]}
        you = game["you"]
        assert game["scores"]["rounds"][-1] == [summary[you], summary[1 - you]]
        assert game["board"]["top"]["hand"] is not None  # the round over, both hands show
        assert game["seed"] == 3
        if game["match_over"]:
            break
        game = client.post(f"/api/games/{game['id']}/next-round").json()
        assert game["you"] == rounds_seen % 2  # seats alternate
    assert rounds_seen == 3
    rounds = game["scores"]["rounds"]
    assert game["scores"]["match"] == [sum(r[0] for r in rounds), sum(r[1] for r in rounds)]
    refused = client.post(f"/api/games/{game['id']}/next-round")
    assert refused.status_code == 409 and "the match is over" in refused.json()["detail"]


def test_refused_moves_say_why_and_change_nothing(client):
    game = new_game(client, seed=7)
    url = f"/api/games/{game['id']}/moves"
    cases = [
        ({"action": 2 * CLASSIC.n_types, "turn": 0}, 400, "it is the card decision"),
        ({"action": 999, "turn": 0}, 400, "action ids run from 0 to 105"),
        ({"action": 7, "turn": 5}, 409, "made at turn 5, but the game is at turn 0"),
        ({"action": "7", "turn": 0}, 422, "body.action: Input should be a valid integer"),
        ({"action": 7}, 422, "body.turn: Field required"),
        ({"action": 7, "turn": 0, "x": 1}, 422, "body.x: Extra inputs are not permitted"),
    ]
    for body, status, message in cases:
        response = client.post(url, json=body)
        assert response.status_code == status, body
        assert message in response.json()["detail"]
    bad_json = client.post(url, content=b"{", headers={"content-type": "application/json"})
    assert bad_json.status_code == 422 and "JSON" in bad_json.json()["detail"]
    assert client.get(f"/api/games/{game['id']}").json() == game
    running = client.post(f"/api/games/{game['id']}/next-round")
    assert running.status_code == 409 and "still running" in running.json()["detail"]


def test_a_second_click_on_the_same_turn_is_refused_not_played_twice(client):
    game = new_game(client, seed=7)
    move = {"action": game["moves"][0]["action"], "turn": 0}
    first = client.post(f"/api/games/{game['id']}/moves", json=move)
    second = client.post(f"/api/games/{game['id']}/moves", json=move)
    assert first.status_code == 200 and second.status_code == 409
    assert client.get(f"/api/games/{game['id']}").json() == first.json()


def test_browser_sessions_see_only_their_own_games(app, client, connect):
    game = new_game(client, seed=1)
    other = connect(app)
    other.get("/")
    for response in (
        other.get(f"/api/games/{game['id']}"),
        other.post(f"/api/games/{game['id']}/moves", json={"action": 7, "turn": 0}),
    ):
        assert response.status_code == 404
        assert f"unknown game {game['id']!r}" in response.json()["detail"]
    assert client.get(f"/api/games/{game['id']}").json() == game
    unknown = client.get("/api/games/nope")
    assert unknown.status_code == 404 and "unknown game 'nope'" in unknown.json()["detail"]


def test_new_games_refuse_bad_seats_rounds_and_seeds_by_field(client):
    for body, message in (
        ({"seat": 2}, "body.seat: Input should be less than or equal to 1"),
        ({"seat": True}, "body.seat: Input should be a valid integer"),
        ({"rounds": 2}, "body.rounds: Value error, a game is 1 round or a match of 3"),
        ({"seed": -1}, "body.seed: Input should be greater than or equal to 0"),
        ({"seed": 2**64}, "body.seed: Input should be less than or equal to"),
    ):
        response = client.post("/api/games", json=body)
        assert response.status_code == 422 and message in response.json()["detail"], body


def test_other_hosts_are_not_answered(app):
    response = TestClient(app, base_url="http://evil.example").get("/api/info")
    assert response.status_code == 400


def test_sessions_and_their_matches_are_bounded(app):
    sessions = Sessions(max_sessions=2, max_matches=2)
    first = sessions.open(None)
    assert sessions.open(first) == first
    match = Match(HeuristicAgent(), CLASSIC, 1, 0, seed=0)
    ids = [sessions.add(first, match) for _ in range(3)]
    assert sessions.get(first, ids[2]) is match
    with pytest.raises(RequestError, match="unknown game"):
        sessions.get(first, ids[0])  # the oldest match was forgotten
    sessions.open(None)  # two more sessions: the first is forgotten
    sessions.open(None)
    assert sessions.open(first) != first


def advantage_agent() -> NetworkAgent:
    torch.manual_seed(0)
    network = nn.Sequential(nn.Linear(feature_size(CLASSIC), 16), nn.Linear(16, 106))
    return NetworkAgent(network, regret_matching, seed=0, outputs_label="advantage")


def test_a_cfr_agent_shows_its_probabilities_and_advantages(connect):
    agent = advantage_agent()
    client = connect(create_app(agent, CLASSIC))
    game = new_game(client, seed=5, seat=1, rounds=1)
    card = game["replies"][0]
    assert card["explained"] and card["labels"] == ["probability", "advantage"]
    reasons = agent.explain(GameBatch.from_states([GameState.new(CLASSIC, 5)]))
    for row in card["top"]:
        assert row["probability"] == pytest.approx(float(reasons["probability"][0, row["action"]]))
        assert row["advantage"] == pytest.approx(float(reasons["advantage"][0, row["action"]]))
    probabilities = [row["probability"] for row in card["top"]]
    assert probabilities == sorted(probabilities, reverse=True)  # most probable first


def test_a_search_agent_shows_the_values_it_searched(connect):
    # max_deck=all: the first decision is searched too; few worlds keep the test short
    agent = agent_from_spec("search:heuristic:balanced:worlds=4:max_deck=all", seed=0)
    client = connect(create_app(agent, CLASSIC))
    game = new_game(client, seed=5, seat=1, rounds=1)
    card = game["replies"][0]
    assert card["explained"] and card["labels"] == ["probability", "searched value", "worlds"]
    chosen = [row for row in card["top"] if row["chosen"]]
    assert len(chosen) == 1 and chosen[0]["probability"] == 1.0
    # every action shown was valued in worlds, with a finite mean in points
    assert all(row["worlds"] >= 4 and row["searched value"] is not None for row in card["top"])
    json.dumps(game, allow_nan=False)  # NaN (actions not searched) never reaches the page


def test_the_replay_list_names_every_game_with_its_score_difference(client, record_file):
    games = client.get("/api/replays").json()
    records = read_records(record_file)
    assert games["file"] == "games.jsonl" and len(games["games"]) == len(records) == 6
    for row, record in zip(games["games"], records, strict=True):
        assert row["diff"] == record.score_diff
        assert row["agent"] == "random" and row["opponent"] == "heuristic"
        assert row["decisions"] == len(record.actions)


def test_stepping_a_replay_shows_each_recorded_decision_with_the_agents_reasoning(
    client, record_file
):
    record = read_records(record_file)[1]  # random seated second
    states = replay_states(record)
    for step in (0, 1, 2, 3, len(record.actions) - 1):
        view = client.get(f"/api/replays/1?step={step}").json()
        decision, state = view["decision"], states[step]
        assert decision["action"] == record.actions[step]
        assert decision["agent"] == record.seats[state.current_player]
        assert view["board"]["turn"] == state.turn
        assert view["board"]["top"]["hand"] is not None  # a replay shows both hands
        chosen = [row for row in decision["top"] if row["chosen"]]
        assert [row["action"] for row in chosen] == [record.actions[step]]
        if decision["agent"] == "random":  # random explains: uniform over the legal moves
            assert decision["explained"]
            assert chosen[0]["probability"] == pytest.approx(1 / len(state.legal_actions()))
    end = client.get(f"/api/replays/1?step={len(record.actions)}").json()
    assert end["decision"] is None and end["summary"] is not None
    assert [player["score"] for player in end["summary"]] == list(record.scores)


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/api/replays/6", 404, "game 6: games.jsonl holds games 0..5"),
        ("/api/replays/-1", 404, "game -1"),
        ("/api/replays/0?step=100000", 404, "step 100000: game 0 has decisions 0.."),
        ("/api/replays/0?step=-1", 404, "step -1"),
        ("/api/replays/x", 422, "path.game: Input should be a valid integer"),
        ("/api/replays/0?step=1.5", 422, "query.step: Input should be a valid integer"),
    ],
)
def test_replay_requests_out_of_range_are_refused_by_name(client, path, status, message):
    response = client.get(path)
    assert response.status_code == status and message in response.json()["detail"]


def test_without_a_replay_file_the_replays_are_refused_with_the_way_to_get_one(connect):
    client = connect(create_app(HeuristicAgent(), CLASSIC))
    response = client.get("/api/replays")
    assert response.status_code == 404
    assert "serve --replay FILE" in response.json()["detail"]


def test_a_replay_shows_why_an_agent_is_not_rebuilt_and_refuses_a_game_that_does_not_replay(
    record_file, tmp_path, connect
):
    lines = [json.loads(line) for line in Path(record_file).read_text().splitlines()]
    lines[0]["seats"] = ["py:os:getcwd", "heuristic"]
    lines[1]["actions"][3] = 999
    path = tmp_path / "edited.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    client = connect(create_app(HeuristicAgent(), CLASSIC, ReplayLibrary(path)))
    decision = client.get("/api/replays/0?step=0").json()["decision"]
    assert decision["agent"] == "py:os:getcwd"
    assert "a py: agent is not rebuilt from a file" in decision["unavailable"]
    broken = client.get("/api/replays/1?step=0")
    assert broken.status_code == 422
    assert "edited.jsonl: game 1, decision 3: action 999" in broken.json()["detail"]
