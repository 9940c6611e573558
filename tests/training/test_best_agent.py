"""The agent shipped in the package (``best``): a networks-only checkpoint that loads safely,
plays the classic game well, was trained by configs/bc_ppo.yaml, and is what ``play`` offers."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch
import yaml
from tiny_training import seeded_play_under_two_global_seeds

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.baselines import PPO
from lostcities_cfr.cfr import NetworkConfig
from lostcities_cfr.commands import play
from lostcities_cfr.errors import AgentSpecError
from lostcities_cfr.evaluation.arena import evaluate
from lostcities_cfr.game import GameBatch, Rules
from lostcities_cfr.training.checkpoint import BEST_AGENT

CONFIG = Path(__file__).parents[2] / "configs" / "bc_ppo.yaml"


def test_the_shipped_agent_is_a_small_networks_only_file_that_loads_with_weights_only():
    checkpoint = torch.load(BEST_AGENT, weights_only=True)
    assert set(checkpoint) == {"model_class", "hyper_parameters", "state_dict", "iteration"}
    assert checkpoint["model_class"] == "lostcities_cfr.baselines.ppo.PPO"
    assert {name.split(".")[0] for name in checkpoint["state_dict"]} == {"policy_net", "value_net"}
    assert BEST_AGENT.stat().st_size < 1024**2


def test_the_shipped_agent_was_trained_by_the_bc_ppo_config():
    config = yaml.safe_load(CONFIG.read_text())
    saved = torch.load(BEST_AGENT, weights_only=True)["hyper_parameters"]
    hparams = {key: value for key, value in saved.items() if not key.startswith("_")}
    expected = {**config["model"]["init_args"], "seed": config["seed_everything"]}
    # The config names the network's fields it sets; the checkpoint holds them all.
    assert NetworkConfig(**hparams.pop("network")) == NetworkConfig(**expected.pop("network"))
    assert {key: hparams.pop(key) for key in expected} == expected
    # Fields the config leaves out (options added after bc_ppo.yaml was written) hold PPO's
    # defaults: the file is bc_ppo's, not some variant's.
    defaults = inspect.signature(PPO.__init__).parameters
    assert hparams == {key: defaults[key].default for key in hparams}


def test_the_best_spec_beats_random_and_discard_only():
    agent = agent_from_spec("best", seed=0)
    assert agent.rules == Rules.classic()
    for i, opponent in enumerate(["random", "discard-only"]):
        result = evaluate(agent, agent_from_spec(opponent, seed=1 + i), 50, seed=0)
        # an untrained network wins about half of these; the shipped one nearly all
        assert result.rounds.win_rate >= 0.9, opponent


def test_the_best_spec_plays_greedy_on_request_and_refuses_anything_else():
    assert agent_from_spec("best:greedy").greedy
    with pytest.raises(AgentSpecError, match="best:oops"):
        agent_from_spec("best:oops")
    with pytest.raises(AgentSpecError, match=r"unknown option\(s\) temperature; usage: best"):
        agent_from_spec("best:temperature=0.5")


def test_a_seeded_best_agent_replays_its_sampling_whatever_the_global_generator_holds():
    batch = GameBatch.new(Rules.classic(), 256, seed=3)
    seeded_play_under_two_global_seeds(lambda: agent_from_spec("best", seed=5), batch)


def test_play_offers_the_best_agent_under_classic_rules_and_the_heuristic_otherwise():
    lines: list[str] = []
    play.main(["--seed", "0"], read=lambda prompt: "q", write=lines.append)
    assert lines[0].startswith("Lost Cities against best.")
    lines.clear()
    play.main(["--rules", "tiny", "--seed", "0"], read=lambda prompt: "q", write=lines.append)
    assert lines[0].startswith("Lost Cities against heuristic:balanced.")
