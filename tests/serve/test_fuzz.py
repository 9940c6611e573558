"""500 malformed or illegal requests: every one answered with a 4xx and a message, none with
a server error, and the games they aimed at unchanged."""

from __future__ import annotations

import json
import random

REQUESTS = 500


def junk(rng: random.Random) -> object:
    """A JSON value of a random kind (never a valid move body)."""
    return rng.choice(
        [
            None,
            True,
            rng.randint(-(2**70), 2**70),
            rng.uniform(-1e9, 1e9),
            "".join(rng.choice("az09{}[]\"'\\é☃\x00") for _ in range(rng.randint(0, 12))),
            [rng.randint(0, 200) for _ in range(rng.randint(0, 3))],
            {"action": rng.randint(0, 105)},
        ]
    )


def malformed(rng: random.Random, game: dict, replay_steps: int) -> tuple[str, str, dict]:
    """One bad request as (method, url, httpx keyword arguments)."""
    moves = f"/api/games/{game['id']}/moves"
    legal = {m["action"] for m in game["moves"]}
    turn = game["board"]["turn"]
    illegal = [a for a in range(106) if a not in legal]
    kind = rng.randrange(14)
    if kind == 0:  # bytes that are not JSON, or not whole JSON
        body = rng.choice([b"{", b"", b"\xff\xfe", b'{"action": 1, "turn": ', b"null", b"[]"])
        return "POST", moves, {"content": body, "headers": {"content-type": "application/json"}}
    if kind == 1:  # an action of the wrong type
        action = rng.choice(["7", 7.0, 7.5, None, [7], {"a": 7}, True])
        return "POST", moves, {"json": {"action": action, "turn": turn}}
    if kind == 2:  # an illegal or out-of-range action
        action = rng.choice([*illegal, -1, 106, 2**40, -(2**70)])
        return "POST", moves, {"json": {"action": action, "turn": turn}}
    if kind == 3:  # a legal action at another turn (a stale page)
        other = rng.choice([t for t in range(-3, 300) if t != turn])
        return "POST", moves, {"json": {"action": rng.choice(sorted(legal)), "turn": other}}
    if kind == 4:  # fields missing or extra
        body = rng.choice([{}, {"turn": turn}, {"action": 1}, {"action": 1, "turn": turn, "x": 0}])
        return "POST", moves, {"json": body}
    if kind == 5:  # any JSON value instead of a move
        return "POST", moves, {"json": junk(rng)}
    if kind == 6:  # a game that does not exist (or is not this session's)
        name = rng.choice(["x", "0", "%00", "..", "a" * 300, "é", game["id"][:-1] + "z"])
        path = rng.choice(["", "/moves", "/next-round"])
        method = "GET" if not path else "POST"
        return method, f"/api/games/{name}{path}", {"json": {"action": 1, "turn": turn}}
    if kind == 7:  # the next round while this one runs
        return "POST", f"/api/games/{game['id']}/next-round", {}
    if kind == 8:  # a new game with bad settings
        seats_and_rounds = [{"seat": 2}, {"seat": "0"}, {"rounds": 2}, {"rounds": 3.0}]
        seeds = [{"seed": -5}, {"seed": 2**64}, {"seed": "1"}]
        body = rng.choice([*seats_and_rounds, *seeds, {"colour": "red"}, [1], "x"])
        return "POST", "/api/games", {"json": body}
    if kind == 9:  # a replay game out of range or not a number
        game_index = rng.choice(["6", "-1", "99999999999999999999", "x", "1.5", "%20"])
        return "GET", f"/api/replays/{game_index}", {}
    if kind == 10:  # a replay step out of range or not a number
        step = rng.choice([replay_steps + 1, -1, 10**12, "x", "", "1e3"])
        return "GET", f"/api/replays/0?step={step}", {}
    if kind == 11:  # a method the path does not take
        method = rng.choice(["PUT", "DELETE", "PATCH"])
        return method, rng.choice([moves, "/api/games", "/api/replays/0", "/"]), {}
    if kind == 12:  # a path that does not exist
        return "GET", rng.choice(["/api", "/static/nope.js", "/api/game", "/../etc/passwd"]), {}
    return "POST", moves, {"json": {"action": 1, "turn": turn}, "headers": {"host": "evil.test"}}


def test_500_malformed_or_illegal_requests_get_4xx_answers_and_change_no_game(app, connect):
    rng = random.Random(2027)
    person = connect(app, raise_server_exceptions=False)
    stranger = connect(app, raise_server_exceptions=False)
    game = person.post("/api/games", json={"seed": 11}).json()
    game = person.post(
        f"/api/games/{game['id']}/moves",
        json={"action": game["moves"][0]["action"], "turn": 0},
    ).json()  # mid-round: the agent has answered
    replay = person.get("/api/replays/0?step=5").json()
    statuses: dict[int, int] = {}
    for _ in range(REQUESTS):
        method, url, kwargs = malformed(rng, game, replay["steps"])
        client = stranger if rng.random() < 0.1 else person
        response = client.request(method, url, **kwargs)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        assert 400 <= response.status_code < 500, (method, url, kwargs, response.text)
        detail = response.text if response.status_code == 400 else response.json()["detail"]
        assert isinstance(detail, str) and detail, (method, url, kwargs)
    assert person.get(f"/api/games/{game['id']}").json() == game
    assert person.get("/api/replays/0?step=5").json() == replay
    # every kind of refusal came up
    assert {400, 404, 405, 409, 422} <= set(statuses), statuses
    print(json.dumps(statuses, sort_keys=True))
