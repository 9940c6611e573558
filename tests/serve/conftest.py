"""The serve page's tests: an app playing the heuristic, with a small record file to replay."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.evaluation.arena import evaluate
from lostcities_cfr.evaluation.recording import GameRecorder, write_records
from lostcities_cfr.game import Rules
from lostcities_cfr.serve.app import create_app
from lostcities_cfr.serve.replays import ReplayLibrary

BASE_URL = "http://127.0.0.1"  # the hosts the app answers by default


@pytest.fixture(scope="session")
def record_file(tmp_path_factory) -> str:
    """Six games of ``random`` against ``heuristic`` (classic rules, seed 0)."""
    recorder = GameRecorder()
    evaluate(
        agent_from_spec("random", seed=1),
        agent_from_spec("heuristic"),
        games=6,
        seed=0,
        recorder=recorder,
    )
    path = tmp_path_factory.mktemp("records") / "games.jsonl"
    write_records(path, recorder.records)
    return str(path)


@pytest.fixture
def app(record_file):
    return create_app(agent_from_spec("heuristic"), Rules.classic(), ReplayLibrary(record_file))


@pytest.fixture
def connect():
    """``connect(app, **options)``: a new browser session on ``app`` (a test client, which
    keeps its cookie), as a local host the app answers."""

    def connect(app, **options) -> TestClient:
        return TestClient(app, base_url=BASE_URL, **options)

    return connect


@pytest.fixture
def client(app, connect) -> TestClient:
    """One browser session."""
    return connect(app)
