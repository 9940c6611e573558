"""Large batches and the learning rate: what a network learns from the same reservoir with
fewer, larger updates, and how the learning rate should grow with the batch.

A GPU runs an update of 8,192 rows in about the time of one of 512 (fixed costs per update
dominate small batches there: docs/performance.md), so a GPU recipe trains on larger
batches. This script measures what that does to learning, here on the CPU: it loads a run's
reservoirs (a resumable checkpoint of ``configs/classic_strong.yaml``, held-out rows
included), and trains fresh copies of one network (player 0's advantage network, the same
initial weights each time) on its reservoir with each (batch, learning rate, updates)
setting, then reports the loss on the held-out rows (``loss/val``, weighted as in training;
``zero`` is the loss of predicting zeros) and the seconds it took.

The settings (``--settings batch:lr:updates ...``) default to the CPU recipe (512 rows,
1e-3, 400 updates), the same rows seen in 16x larger batches at the same learning rate,
scaled by the square root of 16 (x4) and linearly (x16), and the GPU recipe's updates
(8,192 rows, 4e-3, 100: four times the rows).

    python scripts/bench/bench_batch.py runs/classic_strong/checkpoints/last.ckpt
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from tables import render

from lostcities_cfr.cfr.reservoir import ReservoirBuffer
from lostcities_cfr.training.checkpoint import load_model, read_checkpoint
from lostcities_cfr.training.losses import advantage_loss

DEFAULT_SETTINGS = [
    "512:0.001:400",
    "8192:0.001:25",
    "8192:0.004:25",
    "8192:0.016:25",
    "8192:0.004:100",
]


def reservoir(checkpoint: dict, capacity: int, holdout: float) -> ReservoirBuffer:
    """Player 0's advantage reservoir of a resumable checkpoint, held-out rows included."""
    state = checkpoint["deep_cfr"]["advantage_buffers"][0]
    F, A = state["features"].shape[1], state["targets"].shape[1]
    buffer = ReservoirBuffer(capacity, F, A, holdout=holdout)
    buffer.load_state_dict(state)
    return buffer


def train(net, buffer, batch, lr, updates, exponent, seed) -> tuple[float, float]:
    """``updates`` Adam steps of ``net`` on batches of ``batch`` rows; the seconds."""
    optimizer = torch.optim.Adam(net.parameters(), lr=lr, foreach=True)
    generator = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    for _ in range(updates):
        rows = buffer.sample(batch, generator=generator)
        loss = advantage_loss(
            net(rows.features), rows.legal, rows.targets, rows.iteration, exponent
        )
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()
    return time.perf_counter() - start


def held_out_loss(net, buffer, exponent, zero=False) -> float:
    held = buffer.held_out
    with torch.no_grad():
        features = held.features.float()
        outputs = net(features)
        if zero:
            outputs = torch.zeros_like(outputs)
        return float(
            advantage_loss(outputs, held.legal, held.targets.float(), held.iteration, exponent)
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a resumable DeepCFR checkpoint (with reservoirs)")
    parser.add_argument("--settings", nargs="+", default=DEFAULT_SETTINGS)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    checkpoint = read_checkpoint(args.checkpoint)
    hparams = checkpoint["hyper_parameters"]
    buffer = reservoir(checkpoint, hparams["advantage_buffer_size"], hparams["holdout"])
    if buffer.held_out is None or len(buffer.held_out) == 0:
        parser.error(
            f"{args.checkpoint}: its reservoirs hold no held-out rows to score on (a run with "
            "model.holdout above 0 keeps them; configs/classic_strong.yaml does)"
        )
    exponent = hparams["weight_exponent"]
    model = load_model(args.checkpoint)
    rows = []
    for setting in args.settings:
        batch, lr, updates = setting.split(":")
        net = model.advantage_nets[0]
        torch.manual_seed(args.seed)
        net.reset_parameters()  # the same fresh weights for every setting
        net.train()
        seconds = train(net, buffer, int(batch), float(lr), int(updates), exponent, args.seed)
        rows.append(
            {
                "batch": int(batch),
                "lr": float(lr),
                "updates": int(updates),
                "rows_seen": int(batch) * int(updates),
                "val_loss": held_out_loss(net, buffer, exponent),
                "seconds": seconds,
            }
        )
    zero = held_out_loss(model.advantage_nets[0], buffer, exponent, zero=True)
    result = {
        "checkpoint": args.checkpoint,
        "held_out_rows": len(buffer.held_out),
        "zero_loss": zero,
        "rows": rows,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"{args.checkpoint}: {len(buffer)} rows, {len(buffer.held_out)} held out; "
        f"the zero predictor's loss {zero:.4f}"
    )
    headers = ("batch", "lr", "updates", "rows seen", "loss/val", "s")
    lines = [
        (
            r["batch"],
            f"{r['lr']:.4f}",
            r["updates"],
            f"{r['rows_seen']:,}",
            f"{r['val_loss']:.4f}",
            f"{r['seconds']:.1f}",
        )
        for r in rows
    ]
    print(render(headers, lines))


if __name__ == "__main__":
    main()
