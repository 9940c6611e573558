"""The checks and messages of a run over several processes or hosts (training/distributed.py)."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest
import torch
from lightning_fabric.plugins.environments import LightningEnvironment, SLURMEnvironment

from lostcities_cfr.errors import ConfigError
from lostcities_cfr.training.distributed import (
    check_cluster_environment,
    lost_peer,
    lost_peer_message,
)

GLOO = (
    "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
    "[127.0.0.1]:2756: Connection reset by peer. This is typically caused by a remote worker"
)


def _trainer(num_nodes: int = 2, world_size: int = 2, environment=None):
    strategy = SimpleNamespace(cluster_environment=environment or LightningEnvironment())
    return SimpleNamespace(num_nodes=num_nodes, world_size=world_size, strategy=strategy)


def test_a_peer_gone_is_told_apart_from_other_errors():
    assert lost_peer(RuntimeError(GLOO))
    assert lost_peer(torch.distributed.DistNetworkError("recvValue failed"))
    assert not lost_peer(RuntimeError("shape mismatch"))
    assert not lost_peer(ValueError("Connection reset by peer"))


def test_the_message_names_the_rank_that_stopped_and_the_way_back():
    message = lost_peer_message(RuntimeError(GLOO), rank=0, world_size=2)
    assert message.startswith("rank 0 of 2: rank 1 stopped, so the run stops (Read error ")
    assert "pair.cc" not in message and "GLHF" not in message
    assert "--ckpt_path last" in message and "\n" not in message
    assert "one of ranks [0, 2, 3]" in lost_peer_message(RuntimeError(GLOO), 1, 4)


@pytest.mark.parametrize("missing", ["MASTER_ADDR", "MASTER_PORT", "NODE_RANK"])
def test_several_plain_hosts_need_the_rendezvous_in_their_environment(monkeypatch, missing):
    for name, value in {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "1", "NODE_RANK": "1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(missing)
    with pytest.raises(ConfigError, match=f"trainer.num_nodes=2 needs {missing} in the"):
        check_cluster_environment(_trainer())
    monkeypatch.delenv("MASTER_PORT", raising=False)  # (a port is checked on its own below)
    check_cluster_environment(_trainer(num_nodes=1))  # one host: Lightning sets its own
    check_cluster_environment(_trainer(environment=SLURMEnvironment()))  # SLURM sets them


def test_a_master_port_taken_on_rank_zeros_host_is_refused(monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
        monkeypatch.setenv("MASTER_PORT", str(port))
        monkeypatch.delenv("NODE_RANK", raising=False)
        monkeypatch.delenv("LOCAL_RANK", raising=False)
        with pytest.raises(ConfigError, match=f"MASTER_PORT={port}: rank 0 cannot listen"):
            check_cluster_environment(_trainer(num_nodes=1))
        monkeypatch.setenv("LOCAL_RANK", "1")  # a rank that rank 0 launched: not its port to take
        check_cluster_environment(_trainer(num_nodes=1))
