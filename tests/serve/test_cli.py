"""``python -m lostcities_cfr serve``: listens on this machine only unless told, and refuses
a bad agent, record file or port with one line before it starts."""

from __future__ import annotations

import socket

import pytest

from lostcities_cfr.commands import main as cli_main
from lostcities_cfr.commands import serve as cli


@pytest.fixture
def served(monkeypatch):
    """What ``uvicorn.run`` was handed (the server is not started)."""
    calls: list[dict] = []
    monkeypatch.setattr(cli.uvicorn, "run", lambda app, **options: calls.append(options))
    return calls


def test_serve_listens_on_this_machine_only_by_default(served, capsys, record_file):
    cli_main(["serve", "--agent", "heuristic", "--port", "0", "--replay", record_file])
    (options,) = served
    assert options["host"] == "127.0.0.1" and options["port"] > 0
    out = capsys.readouterr().out
    assert f"Lost Cities against heuristic, 6 recorded games of {record_file}, on " in out
    assert f"http://127.0.0.1:{options['port']}/" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--agent", "nope"], "agent spec 'nope': unknown kind 'nope'"),
        (["--agent", "best", "--rules", "tiny"], "agent 'best' plays classic rules"),
        (["--replay", "/nonexistent.jsonl"], "cannot read the record file /nonexistent.jsonl"),
        (["--port", "70000"], "--port 70000: a port is 0..65535"),
        (["--threads", "0"], "--threads 0: use at least 1 thread"),
    ],
)
def test_bad_arguments_stop_serve_with_one_line(served, capsys, argv, message):
    argv = ["--agent", "heuristic", *argv] if argv[0] != "--agent" else argv
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert served == []


def test_a_port_in_use_is_refused_naming_it(served, capsys):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit) as exit_:
            cli.main(["--agent", "heuristic", "--port", str(port)])
    assert exit_.value.code == 2
    assert f"--host 127.0.0.1 --port {port}: [Errno 98] Address already in use" in (
        capsys.readouterr().err
    )
    assert served == []
