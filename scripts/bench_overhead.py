"""Fixed costs per step: torch operator calls and host synchronisations of a traversal step
and of a training update, against wall time, as the batch grows.

ESCHER on classic rules with ``configs/classic_strong.yaml``'s sampler and networks (128x3
colour networks, a value network of the same shape), untrained (seeded) weights, the second
iteration's heads (regret matching). For each number of walkers it walks one batch of deals
twice, the same trajectories both times: once timed, once under ``torch.profiler``, which
counts every ``aten::`` call the step makes (nested calls included) and the host
synchronisations among them: ``aten::nonzero`` (a data-dependent shape: boolean indexing,
``nonzero()``) and ``aten::_local_scalar_dense`` (``.item()``, ``bool()``/``int()`` of a
tensor), plus the explicit reads the traversal makes through ``cfr.traversal.host_ints``
where it has them. On a GPU each synchronisation stalls the device and each call is a launch.

Then the update of one network (sample a batch from its reservoir, forward, loss, backward,
clip, optimizer step) at batch sizes 512 to 32,768: operator calls and milliseconds each.

    python scripts/bench_overhead.py                      # the table
    python scripts/bench_overhead.py --device cuda --walkers 8 64 1024 8192 65536 --json
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from collections.abc import Callable

import pytorch_lightning as pl
import torch
from torch.profiler import ProfilerActivity, profile

from lostcities_cfr.cfr.escher import ESCHERSampling
from lostcities_cfr.cfr.networks import NetworkConfig
from lostcities_cfr.cfr.traversal import TraversalStats
from lostcities_cfr.game import GameBatch
from lostcities_cfr.training import DeepCFR

SYNC_OPS = ("aten::nonzero", "aten::_local_scalar_dense")
NETWORK = NetworkConfig(width=128, depth=3, architecture="colors")


def classic_strong_model(walkers: int, device: str, batch_size: int = 512) -> DeepCFR:
    """A DeepCFR of classic_strong's sampler and networks, set up for fitting on ``device``
    (reservoirs built, optimizers attached) by one tiny iteration."""
    torch.manual_seed(0)
    model = DeepCFR(
        rules="classic",
        network=NETWORK,
        value_network=NETWORK,
        sampler=ESCHERSampling(walkers=walkers),
        traversals_per_player=1,
        advantage_buffer_size=1_000_000,
        strategy_buffer_size=1_000_000,
        value_buffer_size=300_000,
        batch_size=batch_size,
        advantage_updates=1,
        strategy_updates=1,
        value_updates=1,
        inference_buckets=None,
        final_eval_games=0,
        seed=0,
    )
    trainer = pl.Trainer(
        max_epochs=1,
        accelerator=device,
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model)
    return model


def profiled(run: Callable[[], object]) -> collections.Counter:
    """Every ``aten::`` call ``run()`` makes, by name (nested calls included)."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    return collections.Counter(e.name for e in prof.events() if e.name.startswith("aten::"))


def synchronise(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def traversal_row(model: DeepCFR, walkers: int, device: str) -> dict:
    """One walk of ``walkers`` deals, timed, then profiled (the same trajectories)."""
    model.sampler.walkers = walkers
    steps = collections.Counter()

    def walk() -> TraversalStats:
        context = model.traversal_context(0)
        context.generator.manual_seed(1)  # the same trajectories in both walks
        games = GameBatch.new(model.rules, walkers, seed=2, device=device)
        with torch.no_grad():
            model.sampler.traverse_games(games, context)
        steps["walks"] += 1
        return context.stats

    model.queue.reset_stats()
    walk()  # warm-up (allocator, first calls)
    synchronise(device)
    start = time.perf_counter()
    stats = walk()
    synchronise(device)
    seconds = time.perf_counter() - start
    counts = profiled(walk)
    n_steps = stats.steps
    ops = sum(counts.values())
    syncs = sum(counts[name] for name in SYNC_OPS) + stats.host_reads
    return {
        "walkers": walkers,
        "steps": n_steps,
        "nodes": stats.nodes,
        "ms_per_step": 1000 * seconds / n_steps,
        "ops_per_step": ops / n_steps,
        "syncs_per_step": syncs / n_steps,
        "nodes_per_s": stats.nodes / seconds,
        "sync_ops": {name: counts[name] / n_steps for name in SYNC_OPS},
    }


def update_row(model: DeepCFR, batch_size: int, device: str, repeats: int) -> dict:
    """``repeats`` updates of ``advantage_p0`` at ``batch_size`` rows, timed, then one
    profiled."""
    model.hparams.batch_size = batch_size
    buffer = model.advantage_buffers[0]
    generator = torch.Generator(device).manual_seed(3)
    n, F, A = 100_000, buffer.n_features, buffer.n_actions
    features = torch.rand(n, F, generator=generator, device=device)
    legal = torch.rand(n, A, generator=generator, device=device) < 0.1
    targets = torch.randn(n, A, generator=generator, device=device) * legal
    buffer.add(features, legal, targets, 1)
    optimizer = model.optimizers()[0]

    def update() -> None:
        model.update_network("advantage_p0", optimizer)

    update()  # warm-up
    synchronise(device)
    start = time.perf_counter()
    for _ in range(repeats):
        update()
    synchronise(device)
    seconds = (time.perf_counter() - start) / repeats
    counts = profiled(update)
    return {
        "batch": batch_size,
        "ms_per_update": 1000 * seconds,
        "ops_per_update": sum(counts.values()),
        "syncs_per_update": sum(counts[name] for name in SYNC_OPS),
        "rows_per_s": batch_size / seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--walkers", type=int, nargs="+", default=[8, 64, 1024, 8192])
    parser.add_argument("--batches", type=int, nargs="+", default=[512, 2048, 8192, 32768])
    parser.add_argument("--repeats", type=int, default=20, help="timed updates per batch size")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = classic_strong_model(1024, args.device)
    traversal = [traversal_row(model, w, args.device) for w in args.walkers]
    updates = [update_row(model, b, args.device, args.repeats) for b in args.batches]
    result = {
        "device": args.device,
        "threads": args.threads,
        "traversal": traversal,
        "updates": updates,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"traversal steps, ESCHER on classic rules ({args.device}, {args.threads} thread(s))")
    print(
        f"{'walkers':>8} {'steps':>6} {'ms/step':>9} {'ops/step':>9} {'syncs/step':>11} "
        f"{'nodes/s':>10}"
    )
    for r in traversal:
        print(
            f"{r['walkers']:>8} {r['steps']:>6} {r['ms_per_step']:>9.2f} "
            f"{r['ops_per_step']:>9.0f} {r['syncs_per_step']:>11.2f} {r['nodes_per_s']:>10,.0f}"
        )
    print("\nupdates of one advantage network")
    print(f"{'batch':>8} {'ms':>9} {'ops':>6} {'syncs':>6} {'rows/s':>12}")
    for r in updates:
        print(
            f"{r['batch']:>8} {r['ms_per_update']:>9.2f} {r['ops_per_update']:>6} "
            f"{r['syncs_per_update']:>6} {r['rows_per_s']:>12,.0f}"
        )


if __name__ == "__main__":
    main()
