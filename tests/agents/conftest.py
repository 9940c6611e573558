"""Agent tests run many small tensor operations, which one torch thread runs fastest: two
threads competing with other processes on a small machine slow them down several times."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
