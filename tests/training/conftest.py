"""Tiny Deep CFR runs for the training tests: tiny rules, 32x2 networks, a few updates.

A run takes a couple of seconds on a CPU, on one thread (small networks train fastest on
one, the more so on a busy machine). Runs log to CSV in ``tmp_path`` (never W&B) and show no
progress bar.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import yaml

# The exact-regret reference of the sampler tests (tests/cfr/traversal_reference.py) checks
# the rows of a whole traversal epoch here too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cfr"))

from tiny_training import fit, one_thread, tiny_config, tiny_model


@pytest.fixture
def write_config(tmp_path: Path):
    """``write_config(**model) -> path`` of a tiny run's YAML config in ``tmp_path``."""

    def write(max_epochs: int = 3, name: str = "run", **model: object) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(tiny_config(tmp_path / name, max_epochs, **model)))
        return path

    return write


@pytest.fixture(autouse=True)
def _restore_threads():
    """Runs set torch's thread count (``threads: 1``); other tests get theirs back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> tuple[Path, object]:
    """``(path, model)``: a checkpoint written after a tiny iteration, and the model that
    wrote it.

    A few updates leave the networks near their initialisation, whose policies are all
    near uniform; random output layers make every network's policy far from uniform and
    from the others', so that an agent playing other weights shows.
    """
    with one_thread():
        model = tiny_model(final_eval_games=0)
        trainer = fit(model, max_epochs=1)
    torch.manual_seed(0)
    with torch.no_grad():
        for net in (*model.advantage_nets, model.strategy_net):
            net.head.weight.normal_()
    path = tmp_path_factory.mktemp("checkpoint") / "run:1" / "tiny.ckpt"  # ':' in a spec's path
    path.parent.mkdir()
    trainer.save_checkpoint(path)
    return path, model.eval()
