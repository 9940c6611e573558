"""Shared test setup: no test ever talks to W&B, and hypothesis never times a slow example out."""

import os

import pytest
import torch
from hypothesis import settings

os.environ.setdefault("WANDB_MODE", "disabled")

# Examples play whole games; their time varies too much on a loaded CI machine for deadlines.
settings.register_profile("default", deadline=None)
settings.load_profile("default")


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tests run many small tensor operations, which one torch thread runs fastest: two
    threads competing with pytest and other processes on a 2-core machine are several
    times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
