"""Fixed costs per step: torch operator calls and host synchronisations of a traversal step
and of a training update, against wall time, as the batch grows.

ESCHER on classic rules with ``configs/classic_strong.yaml``'s sampler and networks (128x3
colour networks, a value network of the same shape), untrained (seeded) weights, the second
iteration's heads (regret matching). For each number of walkers it walks one batch of deals
with the walk as it is and, with ``--reference``, with the walk of main at f980cdc
(``tests/cfr/escher_reference.py``: a host synchronisation wherever a count was needed),
the same trajectories, in one process, taking turns: first timed, then under
``torch.profiler``. Per step it reports

- ``ops``: every ``aten::`` call (nested calls included, as the profiler lists them);
  ``top``: the calls made from Python (a composite such as ``linear`` counted once);
  ``compute``: the innermost calls that compute something, which is what a GPU launches:
  calls with no ``aten::`` call inside them, less views, allocations and conversions to
  the dtype a tensor already has (``NO_LAUNCH``: they change metadata only);
- ``generated``: the calls of kernels that ``torch.compile`` generated (``--engine
  compiled``: the engine's legal mask, encoder and step, ``game/fused.py``), which make no
  ``aten::`` call; a GPU launches each, so ``ops + generated`` is the step's total;
- ``syncs``: host synchronisations: ``aten::nonzero`` (a data-dependent shape: boolean
  indexing, ``nonzero()``), ``aten::_local_scalar_dense`` (``.item()``, ``bool()``/``int()``
  of a tensor), the explicit reads of counts (``TraversalContext.read_counts``) and, on a
  GPU, every ``torch.cuda.synchronize()`` (no ``aten::`` call: counted by wrapping it).

Then one network's update (a batch from its reservoir, forward, loss, backward, clip,
Adam's step) at batch sizes 512 to 32,768 with each of Adam's kernels (``for-loop``,
``foreach``, ``fused``): milliseconds and operator calls; with ``--update-graphs`` (CUDA)
also with the forward, loss and backward replayed as CUDA graphs (``update_graphs``), whose
replays the profiler counts as the calls around them (a graph's kernels are no ``aten::``
call). On a CPU Adam's step reads each
parameter's step count (``_local_scalar_dense``), a read with nothing to wait for; fused
and capturable CUDA kernels keep it on the device.

    python scripts/bench/bench_overhead.py --reference                  # the table
    python scripts/bench/bench_overhead.py --engine eager compiled --networks eager compiled
    python scripts/bench/bench_overhead.py --device cuda --walkers 8 64 1024 8192 65536 --update-graphs
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytorch_lightning as pl
import torch
import torch._inductor.config
from tables import render
from torch.profiler import ProfilerActivity, profile

from lostcities_cfr.cfr.escher import ESCHERSampling
from lostcities_cfr.cfr.networks import NetworkConfig
from lostcities_cfr.cfr.traversal import TraversalStats
from lostcities_cfr.game import GameBatch
from lostcities_cfr.training import DeepCFR

SYNC_OPS = ("aten::nonzero", "aten::_local_scalar_dense")
# Calls that launch no kernel where they are innermost: views, allocations, ``to`` of a
# tensor already of that dtype and device (a conversion calls ``_to_copy`` then ``copy_``).
NO_LAUNCH = frozenset(
    "aten::" + name
    for name in [
        "alias",
        "as_strided",
        "as_strided_",
        "detach",
        "empty",
        "empty_like",
        "empty_strided",
        "expand",
        "lift_fresh",
        "narrow",
        "permute",
        "_reshape_alias",
        "reshape",
        "resolve_conj",
        "resolve_neg",
        "select",
        "slice",
        "squeeze",
        "t",
        "to",
        "transpose",
        "unfold",
        "unsqueeze",
        "_unsafe_view",
        "view",
        "view_as",
    ]
)
NETWORK = NetworkConfig(width=128, depth=3, architecture="colors")
# Reservoir capacity: the few rows one traversal writes are all that the updates sample, and
# a row costs the same to sample from any capacity, so the buffers stay small to build.
BUFFER_ROWS = 10_000
KERNELS = ("for-loop", "foreach", "fused")
KERNELS_ENGINE = ("eager", "compiled")


def classic_strong_model(device: str, kernel: str = "auto") -> DeepCFR:
    """A DeepCFR of classic_strong's sampler and networks, set up for fitting on ``device``
    (reservoirs built, optimizers attached) by one tiny iteration."""
    torch.manual_seed(0)
    model = DeepCFR(
        rules="classic",
        network=NETWORK,
        value_network=NETWORK,
        sampler=ESCHERSampling(walkers=1),
        traversals_per_player=1,
        advantage_buffer_size=BUFFER_ROWS,
        strategy_buffer_size=BUFFER_ROWS,
        value_buffer_size=BUFFER_ROWS,
        advantage_updates=1,
        strategy_updates=1,
        value_updates=1,
        inference_buckets=None,
        final_eval_games=0,
        optimizer_kernel=kernel,
    )
    trainer = pl.Trainer(
        max_epochs=1,
        accelerator=device.split(":")[0],
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model)
    return model


class Calls(NamedTuple):
    """The operator calls of one profiled run (module docstring)."""

    by_name: collections.Counter  # every aten:: call, nested ones included
    top: int  # the calls made from Python
    compute: int  # innermost calls that compute: what a GPU would launch
    device_syncs: int  # explicit torch.cuda.synchronize() calls
    generated: int  # calls of kernels generated by torch.compile (no aten:: call)


def operator_calls(run: Callable[[], object]) -> Calls:
    """The operator calls of ``run()``."""
    synchronize, device_syncs = torch.cuda.synchronize, 0

    def counted(*args: object, **kwargs: object) -> None:
        nonlocal device_syncs
        device_syncs += 1
        synchronize(*args, **kwargs)

    torch.cuda.synchronize = counted  # an explicit wait is no aten:: call
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            run()
    finally:
        torch.cuda.synchronize = synchronize
    generated = sum(1 for e in prof.events() if "cpp_fused" in e.name or "triton_" in e.name)
    events = [e for e in prof.events() if e.name.startswith("aten::")]
    top = sum(1 for e in events if e.cpu_parent is None or not e.cpu_parent.name.startswith("aten"))
    compute = sum(
        1
        for e in events
        if e.name not in NO_LAUNCH and not any(c.name.startswith("aten::") for c in e.cpu_children)
    )
    by_name = collections.Counter(e.name for e in events)
    return Calls(by_name, top, compute, device_syncs, generated)


def synchronise(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def walk_once(
    model: DeepCFR, sampler: ESCHERSampling, walkers: int, device: str, engine: str = "eager"
) -> TraversalStats:
    """One walk of ``walkers`` deals (the same deals and draws every call) on the ``engine``
    kernels (``GameBatch``'s ``kernels``)."""
    context = model.traversal_context(0)
    context.generator.manual_seed(1)
    games = GameBatch.new(model.rules, walkers, seed=2, device=device, kernels=engine)
    with torch.no_grad():
        sampler.traverse_games(games, context)
    return context.stats


def traversal_row(
    model: DeepCFR,
    sampler: ESCHERSampling,
    walkers: int,
    device: str,
    engine: str,
    networks: str = "eager",
) -> dict:
    """A walk timed (after a warm-up, which also compiles), then profiled, with the engine
    and the networks on eager calls or compiled kernels."""
    sampler.walkers = walkers
    model.queue.set_backend(networks)
    # Compiled kernels are tuned for the sizes first seen (Inductor's size hints): compile
    # afresh for each number of walkers, as a run of that many would.
    torch._dynamo.reset()

    def walk() -> TraversalStats:
        return walk_once(model, sampler, walkers, device, engine)

    walk()  # warm-up (allocator, first calls, compilation)
    synchronise(device)
    start = time.perf_counter()
    stats = walk()
    synchronise(device)
    seconds = time.perf_counter() - start
    calls = operator_calls(walk)
    steps = stats.steps
    return {
        "walk": type(sampler).__name__,
        "engine": engine,
        "networks": networks,
        "walkers": walkers,
        "steps": steps,
        "nodes": stats.nodes,
        "ms_per_step": 1000 * seconds / steps,
        "ops_per_step": sum(calls.by_name.values()) / steps,
        "top_ops_per_step": calls.top / steps,
        "compute_ops_per_step": calls.compute / steps,
        "generated_per_step": calls.generated / steps,
        "syncs_per_step": (
            sum(calls.by_name[n] for n in SYNC_OPS) + stats.host_reads + calls.device_syncs
        )
        / steps,
        "nodes_per_s": stats.nodes / seconds,
    }


# Where a step's calls go (--breakdown): these functions are labelled, and each call is
# counted under the innermost labelled function it runs in.
LABELLED = {
    "lostcities_cfr.game.batched.GameBatch": ("legal_mask", "encode", "step", "select"),
    "lostcities_cfr.game.encoding": ("encode_history",),
    "lostcities_cfr.inference.queue.InferenceQueue": ("flush",),
    "lostcities_cfr.agents.heuristic.HeuristicAgent": ("act",),
    "lostcities_cfr.cfr.reservoir.ReservoirBuffer": ("add",),
    "lostcities_cfr.cfr.escher._Step": ("of", "counts"),
    "lostcities_cfr.cfr.traversal": ("current_strategies", "sample_actions", "static_rows"),
    "lostcities_cfr.cfr.value_baseline.ValueBaselineSampler": (
        "submit_children_values",
        "playing_policy",
    ),
}


def breakdown(model: DeepCFR, walkers: int, device: str, engine: str) -> dict[str, float]:
    """Operator calls per step of the walk, by the labelled function they run in."""
    import functools
    import importlib

    from torch.profiler import record_function

    patched = []
    for path, names in LABELLED.items():
        module_name, _, owner = path.rpartition(".")
        try:
            target = getattr(importlib.import_module(module_name), owner)
        except (ImportError, AttributeError):
            target = importlib.import_module(path)
        for name in names:
            original = getattr(target, name)
            label = f"{owner}.{name}"

            def wrapped(*args, _original=original, _label=label, **kwargs):
                with record_function("label:" + _label):
                    return _original(*args, **kwargs)

            setattr(target, name, functools.wraps(original)(wrapped))
            patched.append((target, name, original))
    # Modules that imported these functions by name hold their own references.
    escher = importlib.import_module("lostcities_cfr.cfr.escher")
    for name in ("current_strategies", "sample_actions", "static_rows", "encode_history"):
        source = getattr(importlib.import_module("lostcities_cfr.cfr.traversal"), name, None)
        source = source or getattr(importlib.import_module("lostcities_cfr.game.encoding"), name)
        patched.append((escher, name, getattr(escher, name)))
        setattr(escher, name, source)
    sampler = ESCHERSampling(walkers=walkers)
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            stats = walk_once(model, sampler, walkers, device, engine)
    finally:
        for target, name, original in reversed(patched):
            setattr(target, name, original)
    calls: collections.Counter = collections.Counter()
    for event in prof.events():
        if not event.name.startswith("aten::"):
            continue
        parent, label = event.cpu_parent, "the walk itself"
        while parent is not None:
            if parent.name.startswith("label:"):
                label = parent.name.removeprefix("label:")
                break
            parent = parent.cpu_parent
        calls[label] += 1
    return {label: n / stats.steps for label, n in calls.most_common()}


def update_row(
    model: DeepCFR, batch_size: int, device: str, repeats: int, graphs: bool = False
) -> dict:
    """``repeats`` updates of ``advantage_p0`` at ``batch_size`` rows, timed, then one
    profiled; with ``graphs`` replayed as CUDA graphs (``training/graphs.py``: the warm-up
    update records them)."""
    model.hparams.batch_size = batch_size
    model.hparams.update_graphs = graphs
    model.start_updates()

    def update() -> None:
        model.update_networks(["advantage_p0"], [(0, repeats + 2)])

    update()  # warm-up
    synchronise(device)
    start = time.perf_counter()
    for _ in range(repeats):
        update()
    synchronise(device)
    seconds = (time.perf_counter() - start) / repeats
    calls = operator_calls(update)
    return {
        "kernel": model.hparams.optimizer_kernel,
        "graphs": graphs,
        "batch": batch_size,
        "ms_per_update": 1000 * seconds,
        "ops_per_update": sum(calls.by_name.values()),
        "top_ops_per_update": calls.top,
        "compute_ops_per_update": calls.compute,
        "syncs_per_update": sum(calls.by_name[n] for n in SYNC_OPS) + calls.device_syncs,
        "rows_per_s": batch_size / seconds,
    }


def fill(model: DeepCFR, device: str, rows: int = 100_000) -> None:
    """Random rows in player 0's advantage reservoir, for the updates to sample."""
    buffer = model.advantage_buffers[0]
    generator = torch.Generator(device).manual_seed(3)
    F, A = buffer.n_features, buffer.n_actions
    legal = torch.rand(rows, A, generator=generator, device=device) < 0.1
    targets = torch.randn(rows, A, generator=generator, device=device) * legal
    features = torch.rand(rows, F, generator=generator, device=device)
    buffer.add(features, legal, targets, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--walkers", type=int, nargs="+", default=[8, 64, 1024])
    parser.add_argument("--batches", type=int, nargs="+", default=[512, 2048, 8192, 32768])
    parser.add_argument("--kernels", nargs="+", choices=KERNELS, default=list(KERNELS))
    parser.add_argument("--repeats", type=int, default=10, help="timed updates per batch size")
    parser.add_argument("--reference", action="store_true", help="also main's walk, side by side")
    parser.add_argument(
        "--update-graphs",
        action="store_true",
        help="also each update replayed as CUDA graphs (DeepCFR update_graphs; CUDA only)",
    )
    for option, what in (
        (
            "--engine",
            "how the games run the rules: eager calls or compiled kernels (game/fused.py)",
        ),
        ("--networks", "the inference queue's backend: eager forwards or torch.compile'd ones"),
    ):
        parser.add_argument(option, nargs="+", choices=KERNELS_ENGINE, default=["eager"], help=what)
    parser.add_argument(
        "--breakdown", action="store_true", help="where the calls of a step go (smallest walkers)"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.update_graphs and not args.device.startswith("cuda"):
        parser.error(
            f"--update-graphs records CUDA graphs: it needs --device cuda, not {args.device}"
        )
    torch.set_num_threads(args.threads)
    torch._inductor.config.cpp.enable_kernel_profile = True  # generated CPU kernels, by name
    # the walk as it is on each engine; main's walk knows no compiled engine: eager only
    runs = [
        (ESCHERSampling(walkers=1), engine, networks)
        for engine in args.engine
        for networks in args.networks
    ]
    if args.reference:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "cfr"))
        from escher_reference import ReferenceESCHER

        runs.insert(0, (ReferenceESCHER(walkers=1), "eager", "eager"))
    model = classic_strong_model(args.device)
    traversal = [
        traversal_row(model, walk, w, args.device, engine, networks)
        for w in args.walkers
        for walk, engine, networks in runs
    ]
    updates = []
    for kernel in args.kernels:
        model = classic_strong_model(args.device, kernel)
        fill(model, args.device)
        for graphs in (False, True) if args.update_graphs else (False,):
            updates += [
                update_row(model, b, args.device, args.repeats, graphs) for b in args.batches
            ]
    result = {
        "device": args.device,
        "threads": args.threads,
        "traversal": traversal,
        "updates": updates,
    }
    if args.breakdown:
        model = classic_strong_model(args.device)
        model.queue.set_backend(args.networks[-1])
        result["breakdown"] = breakdown(model, min(args.walkers), args.device, args.engine[-1])
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"traversal steps, ESCHER on classic rules ({args.device}, {args.threads} thread(s))")
    headers = ("walk", "engine", "networks", "walkers", "steps", "ms/step", "ops/step")
    headers += ("top/step", "compute", "generated", "syncs/step", "nodes/s")
    lines = [
        (
            r["walk"],
            r["engine"],
            r["networks"],
            r["walkers"],
            r["steps"],
            f"{r['ms_per_step']:.2f}",
            f"{r['ops_per_step']:.0f}",
            f"{r['top_ops_per_step']:.0f}",
            f"{r['compute_ops_per_step']:.0f}",
            f"{r['generated_per_step']:.1f}",
            f"{r['syncs_per_step']:.2f}",
            f"{r['nodes_per_s']:,.0f}",
        )
        for r in traversal
    ]
    print(render(headers, lines))
    print("\nupdates of one advantage network")
    headers = ("kernel", "graphs", "batch", "ms", "ops", "top", "compute", "syncs", "rows/s")
    lines = [
        (
            r["kernel"],
            "yes" if r["graphs"] else "no",
            r["batch"],
            f"{r['ms_per_update']:.2f}",
            r["ops_per_update"],
            r["top_ops_per_update"],
            r["compute_ops_per_update"],
            r["syncs_per_update"],
            f"{r['rows_per_s']:,.0f}",
        )
        for r in updates
    ]
    print(render(headers, lines))
    if args.breakdown:
        print(
            f"\noperator calls per step by function ({min(args.walkers)} walkers, "
            f"{args.engine[-1]} engine, {args.networks[-1]} networks)"
        )
        for label, per_step in result["breakdown"].items():
            print(f"{label:<50} {per_step:>8.1f}")


if __name__ == "__main__":
    main()
