"""Checkpoints: a run killed with SIGKILL resumes from its last checkpoint as if never
stopped; seeded runs repeat exactly; agents load from checkpoint files and ``ckpt:`` specs
parse."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
import torch
from run_probes import BufferProbe
from tiny_training import cli_subprocess

from lostcities_cfr.agents import RandomAgent, agent_from_spec
from lostcities_cfr.arena import evaluate
from lostcities_cfr.errors import AgentSpecError
from lostcities_cfr.fit_cli import run
from lostcities_cfr.game import Rules
from lostcities_cfr.training import DeepCFR
from lostcities_cfr.training.checkpoint import load_agent


def assert_same_buffers(a: dict, b: dict) -> None:
    for key in ("n_seen", "features", "legal", "targets", "iteration", "generator"):
        for buffer_a, buffer_b in zip(
            [*a["advantage_buffers"], a["strategy_buffer"]],
            [*b["advantage_buffers"], b["strategy_buffer"]],
            strict=True,
        ):
            assert torch.equal(torch.as_tensor(buffer_a[key]), torch.as_tensor(buffer_b[key])), key


def training_state(model: DeepCFR) -> dict:
    return {
        "advantage_buffers": [b.state_dict() for b in model.advantage_buffers],
        "strategy_buffer": model.strategy_buffer.state_dict(),
        "weights": model.state_dict(),
    }


def assert_same_run(a: DeepCFR, b: DeepCFR) -> None:
    state_a, state_b = training_state(a), training_state(b)
    assert_same_buffers(state_a, state_b)
    for name, tensor in state_a["weights"].items():
        assert torch.equal(tensor, state_b["weights"][name]), name


def test_two_runs_with_the_same_seed_are_identical(write_config):
    first = run("fit", ["--config", str(write_config(name="first", max_epochs=2))]).model
    second = run("fit", ["--config", str(write_config(name="second", max_epochs=2))]).model
    assert_same_run(first, second)
    config = str(write_config(name="other", max_epochs=1))
    other = run("fit", ["--config", config, "--seed_everything", "8"]).model
    assert not torch.equal(other.strategy_buffer.features, first.strategy_buffer.features)


def test_a_run_killed_mid_iteration_resumes_from_its_last_checkpoint(write_config, tmp_path):
    reference = run(
        "fit", ["--config", str(write_config(name="reference", max_epochs=2, final_eval_games=0))]
    )
    config = write_config(name="killed", max_epochs=2, final_eval_games=0)
    marker = tmp_path / "iteration-2-started"
    stall = {
        "class_path": "run_probes.StallAtIteration",
        "init_args": {"iteration": 2, "marker": str(marker)},
    }
    process = subprocess.Popen(
        **cli_subprocess(config, callback=stall),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert process.poll() is None, process.stderr.read().decode()
        assert time.monotonic() < deadline, "the run never reached iteration 2"
        time.sleep(0.1)
    process.send_signal(signal.SIGKILL)
    process.wait()
    checkpoint = torch.load(tmp_path / "killed" / "checkpoints" / "last.ckpt", weights_only=False)
    assert checkpoint["deep_cfr"]["strategy_buffer"]["iteration"].max() == 1

    resumed = run(
        "fit",
        [
            "--config",
            str(config),
            "--ckpt_path",
            "last",
            "--trainer.callbacks+=run_probes.BufferProbe",
        ],
    )
    probe = next(c for c in resumed.trainer.callbacks if isinstance(c, BufferProbe))
    assert probe.iteration == 2
    assert_same_buffers(probe.states, checkpoint["deep_cfr"])
    # ... and from there on it runs as if it had never been stopped.
    assert_same_run(resumed.model, reference.model)


def test_agents_load_from_a_checkpoint_and_play(write_config, tmp_path):
    run("fit", ["--config", str(write_config(name="agent", max_epochs=1, final_eval_games=0))])
    path = tmp_path / "agent" / "checkpoints" / "last.ckpt"
    for spec in (f"ckpt:{path}", f"ckpt:{path}:current", f"ckpt:{path}:greedy"):
        agent = agent_from_spec(spec, seed=0)
        result = evaluate(agent, agent_from_spec("random", seed=1), 20, rules=Rules.tiny())
        assert result.games == 20
    direct = load_agent(path, policy="current", greedy=True)
    assert direct.name == "current"


@pytest.fixture
def checkpoint_file(tmp_path):
    path = tmp_path / "run:1" / "last.ckpt"  # a ':' inside the path must survive parsing
    path.parent.mkdir()
    path.write_bytes(b"")
    return path


@pytest.fixture
def fake_load_agent(monkeypatch):
    """Stands in for load_agent; records its arguments."""
    calls = []

    def load_agent(path, policy, greedy, seed):
        calls.append({"path": path, "policy": policy, "greedy": greedy, "seed": seed})
        return RandomAgent(seed)

    monkeypatch.setattr("lostcities_cfr.training.checkpoint.load_agent", load_agent)
    return calls


@pytest.mark.parametrize(
    ("suffix", "policy", "greedy"),
    [
        ("", "average", False),
        (":average", "average", False),
        (":current", "current", False),
        (":current:greedy", "current", True),
        (":greedy", "average", True),
    ],
)
def test_checkpoint_specs_parse_path_policy_and_greedy(
    checkpoint_file, fake_load_agent, suffix, policy, greedy
):
    agent = agent_from_spec(f"ckpt:{checkpoint_file}{suffix}", seed=4)
    assert fake_load_agent == [
        {"path": str(checkpoint_file), "policy": policy, "greedy": greedy, "seed": 4}
    ]
    assert agent.name == f"ckpt:{checkpoint_file}{suffix}"


def test_checkpoint_spec_rejects_two_policies(checkpoint_file, fake_load_agent):
    with pytest.raises(AgentSpecError, match="one of :average and :current"):
        agent_from_spec(f"ckpt:{checkpoint_file}:average:current")
