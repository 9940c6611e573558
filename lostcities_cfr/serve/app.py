"""The HTTP side of ``serve``: one page, its static files, and a small JSON API.

=======  ===================================  ==============================================
GET      ``/``                                the page (and a session cookie)
GET      ``/api/info``                        the agent, the rules, the replay file if any
POST     ``/api/games``                       a new match: ``{"seat", "rounds", "seed"}``
GET      ``/api/games/{id}``                  a match as the person sees it
POST     ``/api/games/{id}/moves``            the person's move ``{"action", "turn"}``
POST     ``/api/games/{id}/next-round``       deal the match's next round
GET      ``/api/replays``                     the replay file's games
GET      ``/api/replays/{game}?step=K``       a recorded game before its decision ``K``
=======  ===================================  ==============================================

Every refusal is a 4xx with ``{"detail": "<one line naming the field or value>"}`` and
changes nothing; requests name their games through the session cookie, so one browser
session cannot see another's games. Only hosts named in ``allowed_hosts`` are answered
(a web page elsewhere cannot reach the server through a rebound domain name).
"""

from __future__ import annotations

import secrets
from importlib import resources

from fastapi import Depends, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator
from starlette.middleware.trustedhost import TrustedHostMiddleware

from lostcities_cfr.agents import Agent, agent_name
from lostcities_cfr.errors import RequestError
from lostcities_cfr.game.rules import Rules
from lostcities_cfr.serve.matches import MAX_SEED, Match, Sessions
from lostcities_cfr.serve.replays import ReplayLibrary

COOKIE = "lostcities_session"
STATIC = resources.files("lostcities_cfr.serve") / "static"


class NewGame(BaseModel):
    """A new match: the person's seat in its first round, its rounds, the deals' seed."""

    model_config = ConfigDict(extra="forbid")
    # strict ints: a Literal[0, 1] would take true and 1.0 for 1
    seat: StrictInt = Field(default=0, ge=0, le=1)
    rounds: StrictInt = 3
    seed: StrictInt | None = Field(default=None, ge=0, le=MAX_SEED)

    @field_validator("rounds")
    @classmethod
    def _one_or_three(cls, rounds: int) -> int:
        if rounds not in (1, 3):
            raise ValueError("a game is 1 round or a match of 3")
        return rounds


class Move(BaseModel):
    """The person's decision: an action id, and the turn it was chosen at."""

    model_config = ConfigDict(extra="forbid")
    action: StrictInt
    turn: StrictInt


def create_app(
    agent: Agent,
    rules: Rules,
    replays: ReplayLibrary | None = None,
    allowed_hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
    sessions: Sessions | None = None,
) -> FastAPI:
    """The page's app, playing ``agent`` under ``rules``.

    Args:
        agent: the person's opponent (one agent serves every match, one request at a time).
        rules: the variant of new matches.
        replays: a record file's games to show, if any.
        allowed_hosts: ``Host`` headers answered (``"*"``: any).
        sessions: where matches live (default: a new :class:`Sessions`).
    """
    sessions = sessions or Sessions()
    app = FastAPI(title="lostcities_cfr", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")

    @app.exception_handler(RequestError)
    def refused(request: Request, error: RequestError) -> JSONResponse:
        return JSONResponse({"detail": str(error)}, status_code=error.status)

    @app.exception_handler(RequestValidationError)
    def malformed(request: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        message = f"{where}: {first['msg']}"
        if first["type"] == "model_attributes_type":  # not a JSON object at all
            message = f"{where}: expected a JSON object (Content-Type: application/json)"
        elif "input" in first and first["type"] != "missing":
            message += f" (got {first['input']!r:.60})"
        return JSONResponse({"detail": message}, status_code=422)

    def session(request: Request, response: Response) -> str:
        """The request's session, opened (and its cookie set) on first contact."""
        cookie = request.cookies.get(COOKIE)
        with sessions.lock:
            session_id = sessions.open(cookie)
        if session_id != cookie:
            response.set_cookie(COOKIE, session_id, httponly=True, samesite="strict")
        return session_id

    @app.get("/")
    def page(request: Request) -> FileResponse:
        page = FileResponse(str(STATIC / "index.html"))
        session(request, page)  # a response returned whole keeps only its own cookies
        return page

    @app.get("/api/info")
    def info() -> dict:
        return {
            "agent": agent_name(agent),
            "rules": rules.preset_name(),
            "replay": None if replays is None else replays.path.name,
        }

    @app.post("/api/games")
    def new_game(body: NewGame | None = None, session_id: str = Depends(session)) -> dict:
        body = body or NewGame()
        seed = body.seed if body.seed is not None else _fresh_seed()
        with sessions.lock:
            match = Match(agent, rules, body.rounds, body.seat, seed)
            return match.view(sessions.add(session_id, match))

    @app.get("/api/games/{game_id}")
    def game(game_id: str, session_id: str = Depends(session)) -> dict:
        with sessions.lock:
            return sessions.get(session_id, game_id).view(game_id)

    @app.post("/api/games/{game_id}/moves")
    def move(game_id: str, body: Move, session_id: str = Depends(session)) -> dict:
        with sessions.lock:
            match = sessions.get(session_id, game_id)
            match.move(body.action, body.turn)
            return match.view(game_id)

    @app.post("/api/games/{game_id}/next-round")
    def next_round(game_id: str, session_id: str = Depends(session)) -> dict:
        with sessions.lock:
            match = sessions.get(session_id, game_id)
            match.next_round()
            return match.view(game_id)

    def library() -> ReplayLibrary:
        if replays is None:
            raise RequestError("no replay file: start the server with serve --replay FILE", 404)
        return replays

    @app.get("/api/replays")
    def replay_list() -> dict:
        return {"file": library().path.name, "games": library().summaries()}

    @app.get("/api/replays/{game}")
    def replay_step(game: int, step: int = 0) -> dict:
        with sessions.lock:  # the replay's agents are shared too
            return library().step(game, step)

    return app


def _fresh_seed() -> int:
    return secrets.randbelow(2**31)
