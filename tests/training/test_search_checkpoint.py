"""A search over checkpoint agents (``search:ckpt:PATH``): an ESCHER run hands the search its
history value network V(h), in points; a run without one refuses ``depth``."""

from __future__ import annotations

import pytest
import torch
from tiny_training import fit, one_thread, tiny_model

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.cfr.escher import ESCHERSampling
from lostcities_cfr.errors import AgentSpecError
from lostcities_cfr.evaluation.arena import evaluate
from lostcities_cfr.game import GameBatch, Rules
from lostcities_cfr.search import SearchAgent


@pytest.fixture(scope="module")
def escher_checkpoint(tmp_path_factory):
    """A checkpoint of one tiny ESCHER iteration (utility scale 50)."""
    sampler = ESCHERSampling(walkers=32, utility_scale=50.0, guide="heuristic", switch_range=6)
    with one_thread():
        model = tiny_model(sampler=sampler, value_buffer_size=4000, value_updates=5)
        trainer = fit(model, max_epochs=1)
    path = tmp_path_factory.mktemp("escher") / "escher.ckpt"
    trainer.save_checkpoint(path)
    return path


def test_a_search_over_an_escher_checkpoint_cuts_rollouts_with_its_history_value(
    escher_checkpoint,
):
    spec = f"search:ckpt:{escher_checkpoint}:worlds=2:depth=1:z=0:max_deck=all"
    agent = agent_from_spec(spec, seed=0)
    assert isinstance(agent, SearchAgent) and agent.rules == Rules.preset("tiny")
    value = agent.rollouts.value
    assert value.history and value.scale == 50.0
    batch = GameBatch.new(agent.rules, 6, seed=1)
    seen = agent.explain(batch)
    searched = seen["worlds"] > 0
    assert searched.any() and torch.isfinite(seen["searched value"][searched]).all()
    result = evaluate(agent, agent_from_spec("random", seed=1), games=4, rules=agent.rules)
    assert result.games == 4


def test_a_checkpoint_without_a_value_network_refuses_depth(tiny_checkpoint):
    path, _ = tiny_checkpoint
    assert agent_from_spec(f"search:ckpt:{path}").rollouts.value is None
    with pytest.raises(AgentSpecError, match="depth=2 cuts rollouts"):
        agent_from_spec(f"search:ckpt:{path}:depth=2")
