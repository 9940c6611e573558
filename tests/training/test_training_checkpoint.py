"""Checkpoints: a run killed with SIGKILL resumes from its last checkpoint as if never
stopped; seeded runs repeat exactly; agents load from checkpoint files and ``ckpt:`` specs
parse; loading is safe (plain data only, allow-listed model classes) and a bad file, or one
of other rules, gets one error naming it."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from run_probes import BufferProbe
from tiny_training import CKPT_SUFFIXES, TINY_MODEL, cli_subprocess, fit, positions, tiny_model

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.arguments import ClosedUnitInterval, PositiveInt
from lostcities_cfr.cfr.external_sampling import ExternalSampling
from lostcities_cfr.cfr.networks import NetworkConfig
from lostcities_cfr.commands import evaluate as evaluate_cli
from lostcities_cfr.commands import play
from lostcities_cfr.commands.fit import run
from lostcities_cfr.errors import LostCitiesError
from lostcities_cfr.evaluation.arena import evaluate
from lostcities_cfr.game import Rules
from lostcities_cfr.training import DeepCFR
from lostcities_cfr.training import checkpoint as checkpoint_module
from lostcities_cfr.training.checkpoint import (
    class_path,
    load_agent,
    load_model,
    plain_data,
    register_model_class,
)


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
    checkpoint = torch.load(tmp_path / "killed" / "checkpoints" / "last.ckpt", weights_only=True)
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


@pytest.mark.parametrize(("suffix", "policy", "greedy"), CKPT_SUFFIXES)
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


class OpenOnLoad:
    """Pickles as ``open(marker, "w")``: unpickling it unsafely creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


class TaggedDeepCFR(DeepCFR):
    """A model class of its own, as another module adds one."""


@pytest.fixture
def fitted(write_config, tmp_path) -> Path:
    """last.ckpt of a one-iteration tiny run."""
    run("fit", ["--config", str(write_config(name="fitted", max_epochs=1, final_eval_games=0))])
    return tmp_path / "fitted" / "checkpoints" / "last.ckpt"


def test_a_pickle_bomb_checkpoint_is_refused_without_running_its_code(tmp_path, capsys):
    marker = tmp_path / "code-ran"
    bomb = tmp_path / "bomb.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {}, "payload": OpenOnLoad(marker)}, bomb)
    with pytest.raises(LostCitiesError, match=rf"{bomb}: refused.*GLOBAL io\.open"):
        agent_from_spec(f"ckpt:{bomb}")
    with pytest.raises(SystemExit) as exit_info:
        evaluate_cli.main(["--agent", f"ckpt:{bomb}"])
    assert exit_info.value.code == 2
    assert f"error: checkpoint {bomb}: refused" in capsys.readouterr().err
    assert not marker.exists()


def test_checkpoints_hold_plain_data_and_name_their_model_class(fitted, tmp_path):
    checkpoint = torch.load(fitted, weights_only=True)
    assert checkpoint["model_class"] == "lostcities_cfr.training.module.DeepCFR"
    # A model built in Python holds objects (a sampler) that the checkpoint keeps as data.
    model = DeepCFR(
        **TINY_MODEL
        | {
            "network": NetworkConfig(width=32, depth=2),
            "sampler": ExternalSampling(walkers=16, max_frontier=4096),
        }
    )
    trainer = fit(model, 1)
    trainer.save_checkpoint(tmp_path / "python.ckpt")
    saved = torch.load(tmp_path / "python.ckpt", weights_only=True)
    assert saved["hyper_parameters"]["sampler"] == {
        "class_path": "lostcities_cfr.cfr.external_sampling.ExternalSampling",
        "init_args": {
            "walkers": 16,
            "utility_scale": 1.0,
            "max_frontier": 4096,
            "expand_opponent": False,
            "aggregate": False,
        },
    }
    loaded = load_model(tmp_path / "python.ckpt")
    assert isinstance(loaded.sampler, ExternalSampling) and loaded.sampler.walkers == 16
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, loaded.state_dict()[name]), name


def test_a_checkpoint_of_other_rules_is_refused_naming_both_rules(fitted, tmp_path, capsys):
    tiny = r"tiny rules \(feature size 58, 15 actions\)"
    classic = r"classic rules \(feature size 423, 106 actions\)"
    agent = agent_from_spec(f"ckpt:{fitted}")
    with pytest.raises(LostCitiesError, match=rf"plays {tiny}; this game is {classic}"):
        evaluate(agent, agent_from_spec("random"), 2)  # classic rules by default
    with pytest.raises(LostCitiesError, match=rf"plays {tiny}; expected {classic}"):
        load_model(fitted, rules=Rules.classic())

    def no_move(prompt: str) -> str:
        raise AssertionError("play asked for a move before refusing the opponent")

    with pytest.raises(SystemExit):
        play.main(["--opponent", f"ckpt:{fitted}"], read=no_move, write=print)
    assert "plays tiny rules (feature size 58" in capsys.readouterr().err
    # Weights that do not fit the rules their own checkpoint names.
    checkpoint = torch.load(fitted, weights_only=True)
    checkpoint["hyper_parameters"]["rules"] = "six-colors"
    torch.save(checkpoint, tmp_path / "mislabelled.ckpt")
    with pytest.raises(LostCitiesError, match=r"do not fit the DeepCFR of six-colors rules"):
        load_model(tmp_path / "mislabelled.ckpt")


def test_a_checkpoint_plays_rules_that_differ_only_in_scoring_or_turn_cap(tmp_path):
    # The quickstart trains with max_turns 400 and is evaluated on the classic game.
    model = DeepCFR(
        rules=Rules(max_turns=400),
        network=NetworkConfig(width=16, depth=1),
        advantage_buffer_size=16,
        strategy_buffer_size=16,
        final_eval_games=0,
    )
    trainer = pl.Trainer(max_epochs=0, accelerator="cpu", logger=False, enable_checkpointing=False)
    trainer.fit(model)
    trainer.save_checkpoint(tmp_path / "quick.ckpt")
    agent = agent_from_spec(f"ckpt:{tmp_path / 'quick.ckpt'}", seed=0)
    assert evaluate(agent, agent_from_spec("random", seed=1), 2).games == 2


def test_a_truncated_or_corrupted_checkpoint_gives_one_error_naming_the_file(fitted, tmp_path):
    truncated, garbage, poisoned = (tmp_path / f"{n}.ckpt" for n in ("cut", "text", "nan"))
    data = fitted.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    garbage.write_text("not a checkpoint")
    checkpoint = torch.load(fitted, weights_only=True)
    checkpoint["state_dict"]["strategy_net.head.bias"][0] = float("nan")
    torch.save(checkpoint, poisoned)
    for path, reason in [
        (truncated, "not a readable checkpoint, truncated or corrupted"),
        (garbage, "not a readable checkpoint, truncated or corrupted"),
        (poisoned, "weight strategy_net.head.bias holds NaN or infinite values"),
    ]:
        with pytest.raises(LostCitiesError) as error:
            load_agent(path)
        assert str(error.value).startswith(f"checkpoint {path}: {reason}")
        assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("change", "cause"),
    [
        ({"network": {"width": "wide", "depth": 1}}, r'Parser key "module\.network".*Subtypes'),
        ({"bogus": 3}, r"does not accept option 'bogus'"),
        ({"advantage_buffer_size": 0}, r"advantage_buffer_size"),
    ],
    ids=["bad type", "unknown field", "bad value"],
)
def test_hyperparameters_that_build_no_model_give_one_error_naming_file_class_and_cause(
    fitted, tmp_path, change, cause
):
    checkpoint = torch.load(fitted, weights_only=True)
    checkpoint["hyper_parameters"].update(change)
    path = tmp_path / "edited.ckpt"
    torch.save(checkpoint, path)
    with pytest.raises(LostCitiesError) as error:
        load_agent(path)
    message = str(error.value)
    assert message.startswith(f"checkpoint {path}: its hyperparameters do not build a DeepCFR (")
    assert re.search(cause, message) and "\n" not in message


def test_only_registered_model_classes_load(fitted, tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint_module, "_LOADABLE", dict(checkpoint_module._LOADABLE))
    checkpoint = torch.load(fitted, weights_only=True)
    tagged = tmp_path / "tagged.ckpt"
    torch.save({**checkpoint, "model_class": class_path(TaggedDeepCFR)}, tagged)
    with pytest.raises(LostCitiesError, match="TaggedDeepCFR' is not a loadable model class"):
        load_model(tagged)
    register_model_class(TaggedDeepCFR)
    assert type(load_model(tagged)) is TaggedDeepCFR
    # Checkpoints older than the key are DeepCFR's.
    del checkpoint["model_class"]
    torch.save(checkpoint, tmp_path / "old.ckpt")
    assert type(load_model(tmp_path / "old.ckpt")) is DeepCFR
    # A class path in the hyperparameters may only name this package or torch.
    checkpoint["hyper_parameters"]["sampler"]["class_path"] = "antigravity.Sampler"
    torch.save(checkpoint, tmp_path / "elsewhere.ckpt")
    with pytest.raises(LostCitiesError, match=r"class_path='antigravity\.Sampler'.*refused"):
        load_model(tmp_path / "elsewhere.ckpt")


def test_plain_data_turns_parsed_numbers_into_plain_ones():
    # jsonargparse hands a constructor PositiveInt and the like, which the safe loader refuses.
    saved = plain_data({"batch": PositiveInt(3), "shares": [ClosedUnitInterval(0.5)], "on": True})
    assert saved == {"batch": 3, "shares": [0.5], "on": True}
    assert [type(saved["batch"]), type(saved["shares"][0]), type(saved["on"])] == [int, float, bool]
