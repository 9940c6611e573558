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
from tiny_training import cli_subprocess, positions, tiny_model

from lostcities_cfr.agents import agent_from_spec
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
def test_checkpoint_agents_play_the_saved_networks(tiny_checkpoint, suffix, policy, greedy):
    path, saved = tiny_checkpoint
    batch = positions(Rules.tiny(), per_depth=64)
    expected = saved.agent(policy, greedy=greedy, seed=4).act(batch)
    # A model that never trained plays differently, so equal actions say the weights loaded.
    untrained = tiny_model().agent(policy, greedy=greedy, seed=4).act(batch)
    assert not torch.equal(untrained, expected)
    for agent in (
        agent_from_spec(f"ckpt:{path}{suffix}", seed=4),
        load_agent(path, policy=policy, greedy=greedy, seed=4),
    ):
        assert torch.equal(agent.act(batch), expected)
    if policy == "average":
        torch.testing.assert_close(
            load_agent(path).policy(batch), saved.agent("average").policy(batch)
        )


def test_checkpoint_spec_rejects_two_policies(tiny_checkpoint):
    path, _ = tiny_checkpoint
    with pytest.raises(AgentSpecError, match="one of :average and :current"):
        agent_from_spec(f"ckpt:{path}:average:current")
