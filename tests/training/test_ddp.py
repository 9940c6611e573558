"""Data-parallel training (DDP, two CPU processes over gloo) through the CLI."""

from __future__ import annotations

import socket
import subprocess

import torch
from tiny_training import cli_subprocess


def test_two_ddp_ranks_traverse_their_own_games_and_keep_equal_networks(write_config, tmp_path):
    recording = {"class_path": "run_probes.RecordingExternalSampling", "init_args": {"walkers": 8}}
    config = write_config(
        name="ddp",
        max_epochs=2,
        final_eval_games=0,
        traversals_per_player=33,
        sampler=recording,
        rank_scaling="updates",  # the default, "batch", runs in the resume tests below
    )
    probe = {"class_path": "run_probes.RankStateProbe", "init_args": {"folder": str(tmp_path)}}
    done = subprocess.run(
        **cli_subprocess(
            config, "--trainer.devices", "2", "--trainer.strategy", "ddp", callback=probe
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1)]
    # Each rank walks its share of every player's traversals, rounded up: 17 of 33 per
    # iteration ...
    assert [rank["dealt"] for rank in ranks] == [[34, 34], [34, 34]]
    # ... from its own deals, so the reservoirs differ ...
    assert not torch.equal(ranks[0]["strategy_features"], ranks[1]["strategy_features"])
    # ... while averaged gradients and rank 0's re-initialisations keep the networks equal.
    assert ranks[0]["weights"].keys() == ranks[1]["weights"].keys()
    for name, tensor in ranks[0]["weights"].items():
        torch.testing.assert_close(tensor, ranks[1]["weights"][name], msg=name)


def _probe(name: str, **init_args: object) -> dict:
    return {"class_path": f"run_probes.{name}", "init_args": init_args}


def _fit(config, *overrides: str, callbacks: list[dict], timeout: float = 300):
    return subprocess.run(
        **cli_subprocess(config, *overrides, callback=callbacks),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


DDP = ("--trainer.devices", "2", "--trainer.strategy", "ddp")


def _buffer_rows(state: dict) -> dict[str, dict[str, torch.Tensor]]:
    """Each buffer's held rows and offered count, by name, from a rank's training state."""
    buffers = {f"advantage_p{p}": b for p, b in enumerate(state["advantage_buffers"])}
    buffers["strategy"] = state["strategy_buffer"]
    return {
        name: {
            "n_seen": torch.tensor(b["n_seen"]),
            **{k: b[k][: min(b["n_seen"], b["capacity"])] for k in ("features", "targets")},
            "iteration": b["iteration"][: min(b["n_seen"], b["capacity"])],
        }
        for name, b in buffers.items()
    }


def test_a_ddp_run_killed_mid_iteration_resumes_every_ranks_rows_and_trains_on_unchanged(
    write_config, tmp_path
):
    model = {"final_eval_games": 0, "traversals_per_player": 33}
    whole = write_config(name="whole", max_epochs=3, **model)
    killed = write_config(name="killed", max_epochs=3, **model)
    for folder in ("whole_probe", "resumed_probe"):
        (tmp_path / folder).mkdir()

    done = _fit(
        whole, *DDP, callbacks=[_probe("RankStateProbe", folder=str(tmp_path / "whole_probe"))]
    )
    assert done.returncode == 0, done.stderr[-3000:]

    # Rank 1 dies at the start of iteration 3, after iteration 2's checkpoint: the whole run
    # stops (Lightning's launcher ends every rank once one has died) ...
    done = _fit(killed, *DDP, callbacks=[_probe("KillRankAt", rank=1, iteration=3)], timeout=120)
    assert done.returncode != 0
    # One line naming the rank that stopped (ours from rank 0; or, should Lightning's
    # launcher see its child die first, its own line naming rank 1).
    assert "rank 0 of 2: rank 1 stopped" in done.stderr or "[rank: 1] Child process" in done.stderr
    checkpoints = tmp_path / "killed" / "checkpoints"
    # One shard a rank: each save removed the rank's shards of the checkpoint it replaced.
    assert len(list(checkpoints.glob("*.pt"))) == 2
    saved = {r: torch.load(next(checkpoints.glob(f"*.ckpt.rank{r}of2.*.pt"))) for r in (0, 1)}
    assert all(shard["global_step"] == saved[0]["global_step"] for shard in saved.values())

    # ... and resumes with each rank's own rows back, row for row ...
    probes = [
        _probe("BufferProbe", folder=str(tmp_path / "resumed_probe")),
        _probe("RankStateProbe", folder=str(tmp_path / "resumed_probe")),
    ]
    done = _fit(killed, *DDP, "--ckpt_path", "last", callbacks=probes)
    assert done.returncode == 0, done.stderr[-3000:]
    for r in (0, 1):
        resumed = torch.load(tmp_path / "resumed_probe" / f"buffers_rank{r}.pt")
        expected, got = _buffer_rows(saved[r]["state"]), _buffer_rows(resumed)
        for name in expected:
            for field in expected[name]:
                assert torch.equal(expected[name][field], got[name][field]), (r, name, field)
    assert not torch.equal(
        _buffer_rows(saved[0]["state"])["strategy"]["features"],
        _buffer_rows(saved[1]["state"])["strategy"]["features"],
    )

    # ... and trains exactly as the run that was never interrupted.
    for r in (0, 1):
        whole_weights = torch.load(tmp_path / "whole_probe" / f"rank{r}.pt", weights_only=False)
        resumed_weights = torch.load(tmp_path / "resumed_probe" / f"rank{r}.pt", weights_only=False)
        for name, tensor in whole_weights["weights"].items():
            torch.testing.assert_close(resumed_weights["weights"][name], tensor, rtol=0, atol=0)


def _files(folder) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_resume_on_fewer_ranks_than_full_reservoirs_need_is_refused_untouched(
    write_config, tmp_path
):
    # Reservoirs of 64 rows fill in the first iteration: their rows stand for several.
    config = write_config(name="full", max_epochs=1, final_eval_games=0, advantage_buffer_size=64)
    done = _fit(config, *DDP, callbacks=[])
    assert done.returncode == 0, done.stderr[-3000:]
    before = _files(tmp_path / "full")
    done = _fit(config, "--ckpt_path", "last", "--trainer.max_epochs", "2", callbacks=[])
    assert done.returncode == 2
    # Lightning's notes on the trainer, then one line of ours.
    message = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert len(message) == 1 and message[0].startswith("python -m lostcities_cfr fit: error: ")
    assert "saved by 2 rank(s), resumed on 1" in message[0]
    assert "resume it on 2 ranks" in message[0]
    assert _files(tmp_path / "full") == before


def test_two_local_nodes_train_checkpoint_and_resume_through_the_cli(write_config, tmp_path):
    """Two hosts of one rank each, as plain hosts would run them (docs/architecture.md):
    each process told the rendezvous address, port and its node's rank."""
    config = write_config(name="nodes", max_epochs=2, final_eval_games=0)
    nodes = ("--trainer.num_nodes", "2", "--trainer.devices", "1", "--trainer.strategy", "ddp")

    def both_nodes(*overrides: str) -> list[subprocess.CompletedProcess]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        launched = []
        for node in (0, 1):
            command = cli_subprocess(config, *nodes, *overrides)
            env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "NODE_RANK": str(node)}
            command["env"] = {**command["env"], **env}
            launched.append(
                subprocess.Popen(
                    **command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                )
            )
        outputs = [p.communicate(timeout=120) for p in launched]
        return [
            subprocess.CompletedProcess(p.args, p.returncode, *output)
            for p, output in zip(launched, outputs, strict=True)
        ]

    for done in both_nodes():
        assert done.returncode == 0, done.stderr[-3000:]
    checkpoints = tmp_path / "nodes" / "checkpoints"
    assert sorted(p.name.split(".")[-3] for p in checkpoints.glob("*.pt")) == [
        "rank0of2",
        "rank1of2",
    ]
    for done in both_nodes("--ckpt_path", "last", "--trainer.max_epochs", "3"):
        assert done.returncode == 0, done.stderr[-3000:]
    last = torch.load(checkpoints / "last.ckpt", weights_only=True)
    assert last["epoch"] == 2 and last["deep_cfr"]["world_size"] == 2
