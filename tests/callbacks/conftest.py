"""The callback tests run on one CPU thread (helpers for tiny runs: ``tiny_runs.py``)."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny networks gain nothing from threads, and on a busy machine threads cost a lot."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
