"""Peak memory of saving a Deep CFR checkpoint, as a multiple of the reservoirs it holds.

A classic-rules model gets full reservoirs of ``--rows`` rows each (two advantage buffers
and the strategy buffer, as in a run that has filled them), then saves one checkpoint
through ``Trainer.save_checkpoint``: once with Lightning's default ``TorchCheckpointIO``
and once with ``StreamingCheckpointIO``, which the ``fit`` command uses. Each save runs in a fresh process,
which resets the kernel's peak-RSS counter just before it (``/proc/self/clear_refs``), so the
figure is the save's own rise over the memory already resident. Linux only.

    python scripts/bench/checkpoint_memory.py --rows 200000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

VARIANTS = ("lightning", "streaming")
MIB = 2**20


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def measure(variant: str, rows: int) -> dict[str, float]:
    """In this process: fill the reservoirs, save once, return the figures in bytes."""
    import pytorch_lightning as pl
    import torch
    from lightning_fabric.plugins import TorchCheckpointIO

    from lostcities_cfr.training import DeepCFR

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = DeepCFR(
        rules="classic",
        network="512x3",
        advantage_buffer_size=rows,
        strategy_buffer_size=rows,
        final_eval_games=0,
    )
    if variant == "lightning":
        io = TorchCheckpointIO()
    else:  # imported here so that the lightning figure can be taken on older revisions
        from lostcities_cfr.training.checkpoint import StreamingCheckpointIO

        io = StreamingCheckpointIO()
    trainer = pl.Trainer(
        max_epochs=0,  # setup builds the reservoirs; no iteration runs
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        plugins=[io],
    )
    trainer.fit(model)
    buffers = [*model.advantage_buffers, model.strategy_buffer]
    for buffer in buffers:
        buffer.features.copy_(torch.rand(buffer.features.shape))
        buffer.legal.copy_(torch.rand(buffer.legal.shape) < 0.1)
        buffer.targets.copy_(torch.randn(buffer.targets.shape))
        buffer.iteration.fill_(1)
        buffer._seen.fill_(buffer.capacity)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.ckpt"
        before = _status_kib("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # peak RSS := current RSS
        trainer.save_checkpoint(path)
        peak = _status_kib("VmHWM")
        size = path.stat().st_size
    return {
        "reservoir_bytes": float(sum(b.memory_bytes for b in buffers)),
        "save_peak_bytes": 1024.0 * (peak - before),
        "file_bytes": float(size),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows per reservoir (200000)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # child process
    args = parser.parse_args()
    if args.variant:
        print(json.dumps(measure(args.variant, args.rows)))
        return
    results = {}
    for variant in VARIANTS:
        done = subprocess.run(
            [sys.executable, __file__, "--rows", str(args.rows), "--variant", variant],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        results[variant] = json.loads(done.stdout.strip().splitlines()[-1])
    if args.json:
        print(json.dumps({"rows": args.rows, **results}, indent=2))
        return
    print(f"rows per reservoir: {args.rows} (classic rules, 3 reservoirs)")
    print(f"{'checkpoint io':<14} {'reservoirs MiB':>15} {'save rise MiB':>14} {'rise/res':>9}")
    for variant, figures in results.items():
        reservoirs, peak = figures["reservoir_bytes"], figures["save_peak_bytes"]
        print(
            f"{variant:<14} {reservoirs / MIB:>15.0f} {peak / MIB:>14.0f} {peak / reservoirs:>9.2f}"
        )


if __name__ == "__main__":
    main()
