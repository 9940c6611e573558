"""Tiny Deep CFR runs for the training tests: tiny rules, 32x2 networks, a few updates.

A run takes a couple of seconds on a CPU, on one thread (small networks train fastest on
one, the more so on a busy machine). Runs log to CSV in ``tmp_path`` (never W&B) and show no
progress bar.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from tiny_training import tiny_config


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
