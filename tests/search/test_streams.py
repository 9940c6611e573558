"""Counter-based streams: uniform, repeatable, and what makes a game's search independent of
the games searched beside it; ``act`` keeps drawing from the agent's generators."""

import torch
from search_positions import random_positions

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.game import GameBatch
from lostcities_cfr.search.streams import child, streams_of, uniforms, unit


def test_uniforms_lie_in_the_unit_interval_and_look_uniform():
    u = uniforms(torch.arange(64), 256)  # [64, 256]
    assert u.dtype == torch.float32 and u.min() >= 0 and u.max() < 1
    assert abs(float(u.mean()) - 0.5) < 0.01
    histogram = torch.histc(u, bins=10, min=0, max=1) / u.numel()
    assert (histogram - 0.1).abs().max() < 0.01


def test_a_stream_repeats_itself_and_neighbouring_streams_differ():
    keys = streams_of(7, torch.arange(1000))
    assert torch.equal(keys, streams_of(7, torch.arange(1000)))
    assert len(keys.unique()) == 1000
    assert not torch.equal(streams_of(8, torch.arange(1000)), keys)
    first, second = unit(child(keys, 0)), unit(child(keys, 1))
    correlation = torch.corrcoef(torch.stack([first, second]))[0, 1]
    assert abs(float(correlation)) < 0.1


def test_a_games_search_with_streams_is_the_same_alone_or_in_a_batch():
    batch = GameBatch.from_states(random_positions(4, seed=21))
    streams = streams_of(3, torch.arange(4))
    agent = agent_from_spec("search:best:worlds=2:max_deck=all", seed=0)
    actions, values, worlds = agent.search(batch, streams)
    for g in range(4):
        one = torch.tensor([g])
        alone = agent.search(batch.select(one), streams[one])
        assert int(alone[0][0]) == int(actions[g])
        assert torch.equal(alone[1][0].nan_to_num(-1e9), values[g].nan_to_num(-1e9))
        assert torch.equal(alone[2][0], worlds[g])


def test_act_plays_what_search_without_streams_chooses_from_the_same_seed():
    batch = GameBatch.from_states(random_positions(4, seed=22))
    spec = "search:best:worlds=2:max_deck=all"
    searched = agent_from_spec(spec, seed=5).search(batch)[0]
    assert torch.equal(agent_from_spec(spec, seed=5).act(batch), searched)
