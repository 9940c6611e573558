"""Differential tests: the compiled kernels (``kernels="compiled"``) against the eager engine.

Two batches deal the same games and receive the same random actions; at every step their
legal masks, their features (of the player to move and of both seats) and their whole
state must be equal, bit for bit, and so must what is compiled over a whole batch beyond
the engine (``fused.compiled_on``: the history features, the heuristic agent's choices). Compiling takes a few seconds per rules variant.
"""

import pytest
import torch

from lostcities_cfr.agents import HeuristicAgent, random_legal_actions
from lostcities_cfr.game import GameBatch, Rules
from lostcities_cfr.game.batched import _FLAT, _STATE
from lostcities_cfr.game.encoding import encode_history


def assert_lockstep(rules: Rules, n_games: int, seed: int) -> None:
    eager = GameBatch.new(rules, n_games, seed=seed)
    fused = GameBatch.new(rules, n_games, seed=seed, kernels="compiled")
    generator = torch.Generator().manual_seed(seed)
    guide = HeuristicAgent("cautious")
    step = 0
    while not bool(eager.done.all()):
        mask = eager.legal_mask()
        assert torch.equal(fused.legal_mask(), mask), f"step {step}: masks differ"
        assert torch.equal(fused.encode(), eager.encode()), f"step {step}: features differ"
        seats = torch.arange(n_games) % 2
        assert torch.equal(fused.encode(seats), eager.encode(seats)), f"step {step}: by seat"
        assert torch.equal(encode_history(fused), encode_history(eager)), f"step {step}: history"
        assert torch.equal(guide.act(fused), guide.act(eager)), f"step {step}: heuristic"
        actions = random_legal_actions(mask, generator)
        eager.step(actions)
        fused.step(actions)
        for name in (*_STATE, *_FLAT):
            assert torch.equal(getattr(fused, name), getattr(eager, name)), f"step {step}: {name}"
        step += 1
        if step == 20:  # forked and compacted batches: another batch size, same graph
            rows = torch.arange(n_games).repeat_interleave(2)[: n_games + n_games // 3]
            eager, fused = eager.select(rows), fused.select(rows)
            n_games = len(rows)
    assert torch.equal(fused.returns(), eager.returns())


@pytest.mark.parametrize(
    "rules",
    [
        pytest.param(Rules.classic(), id="classic", marks=pytest.mark.slow),  # 40 s to compile
        pytest.param(Rules.six_colors(), id="six", marks=pytest.mark.slow),  # 30 s to compile
        pytest.param(Rules.tiny(), id="tiny"),
    ],
)
def test_compiled_kernels_play_as_the_eager_engine(rules):
    assert_lockstep(rules, n_games=64, seed=5)


def test_batches_keep_their_kernels_and_refuse_unknown_ones():
    batch = GameBatch.new(Rules.classic(), 4, seed=0, kernels="compiled")
    assert batch.select([0, 0]).kernels == "compiled"
    assert GameBatch.cat([batch, batch.clone()]).kernels == "compiled"
    with pytest.raises(ValueError, match="kernels='fast'"):
        GameBatch.new(Rules.classic(), 4, kernels="fast")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_compiled_kernels_on_cuda_play_as_the_eager_engine_on_the_cpu():
    # Triton kernels: masks and state exact; features within float32 rounding, since
    # Inductor may divide by a multiplication with the reciprocal (the eager CUDA encoder
    # divides by device tensors and is exact: tests/game/test_batched.py).
    cpu = GameBatch.new(Rules.classic(), 256, seed=8)
    gpu = GameBatch.new(Rules.classic(), 256, seed=8, device="cuda", kernels="compiled")
    generator = torch.Generator().manual_seed(8)
    while not bool(cpu.done.all()):
        actions = random_legal_actions(cpu.legal_mask(), generator)
        assert torch.equal(gpu.legal_mask().cpu(), cpu.legal_mask())
        torch.testing.assert_close(gpu.encode().cpu(), cpu.encode(), rtol=1e-6, atol=0)
        cpu.step(actions)
        gpu.step(actions.cuda())
        for name in (*_STATE, *_FLAT):
            assert torch.equal(getattr(gpu, name).cpu(), getattr(cpu, name)), name
