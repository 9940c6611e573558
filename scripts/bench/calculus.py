"""The optimization calculus: how a Deep CFR iteration's time moves as one change follows another.

The design this project grew from predicted, without measuring, the iteration time of a
chain of changes (a 512x3 model on a GPU box). Each row here adds one change to the row
before it, and is measured as a real run: a ``pl.Trainer`` fits a fresh ``DeepCFR`` module
for one iteration with the callbacks a user adds for that row (``PeriodicEvaluation`` with
the row's density and games, ``CompileToggle`` for compile rows, ``PhaseTimer``). Iteration
1 plays the uniform strategy (the networks still run in full), so every row walks the very
same games and nodes; a compile row fits twice and the second fit, on dynamo's warm caches,
is the measured one. Every row does the same fixed work (the traversals per player, the
updates per network, the evaluation games), a fraction of the classic configs' (280
traversals per player, 512 updates of batch 1024, 100 games per match; see ``--traversals``
and friends), so the absolute seconds are not a full-size iteration's: the ratios between
rows are the result.

Per row, from ``PhaseTimer`` and the module's own timers: traversal, advantage training
(both players), strategy training, evaluation amortized (the seconds of the evaluation the
measured iteration ran, over the row's evaluation interval), other (what no phase accounts
for: Lightning's loop, re-initialising the networks) and the iteration, their sum. The
compile fit's wall-clock is shown beside it; ``CompileToggle``'s warm-up forwards are left
out of the iteration (a few forwards per iteration at full size). The rows run in rounds, each round every row
once in a rotated order, so that a machine's drift spreads over all rows; a cell is the
median over the rounds with the range beside it, and the ratio to the first row is taken
within each round.

Rows past the predicted chain: TensorRT inference (CUDA with ``torch_tensorrt`` only), the
inference or the training compiled alone, compile at 512x3, bf16 through Lightning's
``precision`` (``bf16-mixed`` trains under autocast, ``bf16-true`` converts the networks,
so the inference queue runs them in bfloat16 too), fp16 on CUDA, and a sweep of the
sampler's concurrent traversals (walkers), which set the inference batch: the largest
that still pays is where another doubling gains less than 10% nodes per second.

The forward micro-benchmark times the bare networks (``NetworkConfig.preset``) eager and
``torch.compile``-d at batch 1 to 4096: microseconds per call and per row, and where the
per-row time stops falling (the crossover from dispatch-bound to kernel-bound).

A row that cannot run says why instead of showing a figure: "not measured (no CUDA
device)", "not available (torch_tensorrt is not installed)", or "failed: <reason>" when
a run raised (an inductor build that fails, for example).

    python scripts/bench/calculus.py                 # the full run (about an hour on 2 CPU cores)
    python scripts/bench/calculus.py --quick         # smaller work, two rounds (under 15 minutes)
    python scripts/bench/calculus.py --markdown      # the tables for docs/performance.md
    python scripts/bench/calculus.py --json          # the same figures for machines
    python scripts/bench/calculus.py --from-json run.json --markdown   # a saved run's tables
    python scripts/bench/calculus.py --device cuda   # the CUDA rows only (default: both devices)
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import logging
import sys
import time
import warnings
from collections.abc import Callable, Sequence

import pytorch_lightning as pl
import torch
from calculus_forward import forward_benchmark
from calculus_report import cpu_name, git_commit, load_average, report
from calculus_rows import (
    BUFFER_ROWS,
    CHAIN,
    DENSE_GAMES_FACTOR,
    EXTRAS,
    PAYS,
    PREDICTED_S,
    WORK,
    Row,
    Work,
    default_sampler,
    make_rules,
    reason,
    samplers,
    spread,
    sweep_rows,
    unavailable,
)
from torch._dynamo.utils import counters

from lostcities_cfr.callbacks import CompileToggle, PeriodicEvaluation, PhaseTimer
from lostcities_cfr.inference import InferenceQueue
from lostcities_cfr.training import DeepCFR
from lostcities_cfr.training.metrics import phase_seconds


# ---- one row: a real fit ---------------------------------------------------------------------
class DynamoWatch(logging.Handler):
    """Counts the functions for which dynamo gave up compiling new shapes (its recompile
    limit): their later calls run eagerly, which would make a compile row measure eager
    code without saying so."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.limit_hits: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "recompile_limit" in message:
            function = next((line for line in message.splitlines() if "function:" in line), "")
            self.limit_hits.append(function.split("function:")[-1].strip())


def graphs_compiled() -> int:
    return counters["stats"]["unique_graphs"]


def compile_toggles(row: Row, backend: str) -> list[CompileToggle]:
    """The ``CompileToggle`` a user adds for ``row`` (two where TensorRT compiles the
    inference and inductor the training)."""
    if row.tensorrt:  # unavailable() has imported torch_tensorrt
        return [
            CompileToggle(inference=None, training=True, backend=backend),
            CompileToggle(inference=True, training=None, backend="tensorrt"),
        ]
    if not (row.compile_training or row.compile_inference):
        return []
    inference, training = row.compile_inference or None, row.compile_training or None
    return [CompileToggle(inference=inference, training=training, backend=backend)]


def fit(
    row: Row, work: Work, device: str, sampler: str, seed: int
) -> tuple[dict[str, float], float]:
    """One fresh ``DeepCFR`` fitted for one iteration with ``row``'s callbacks: what it
    logged, and the compile toggles' switch and warm-up seconds."""
    torch.manual_seed(seed)
    traversals = work.sweep_traversals if row.group == "sweep" else work.traversals
    model = DeepCFR(
        rules=make_rules(work.rules),
        network=row.preset,
        sampler=None if sampler == "default" else samplers()[sampler](),
        traversals_per_player=traversals,
        advantage_buffer_size=BUFFER_ROWS,
        strategy_buffer_size=BUFFER_ROWS,
        batch_size=work.batch_size,
        advantage_updates=work.updates,
        strategy_updates=work.updates,
        inference_buckets=work.inference_buckets,
        final_eval_games=0,
        seed=seed,
    )
    model.sampler.walkers = row.walkers or traversals
    if row.local:
        model.queue = InferenceQueue(bucket_sizes=None, local=True)
    games = work.games * (DENSE_GAMES_FACTOR if row.dense else 1)
    toggles = compile_toggles(row, work.compile_backend)
    trainer = pl.Trainer(
        max_epochs=1,
        accelerator="gpu" if device == "cuda" else "cpu",
        devices=1,
        precision=row.precision,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[
            PeriodicEvaluation(every_n_iterations=row.every, games=games, seed=seed),
            *toggles,
            PhaseTimer(memory=False, buffers=False),
        ],
    )
    trainer.fit(model)
    logged = {name: float(value) for name, value in trainer.callback_metrics.items()}
    return logged, sum(t.seconds or 0.0 for t in toggles)


def run_row(
    row: Row, work: Work, device: str, sampler: str, seed: int
) -> tuple[dict[str, float], list[str]]:
    """The figures of one measured iteration of ``row``, and the functions for which dynamo
    hit its recompile limit.

    A compile row fits twice: the first fit compiles every shape (the same traversals and
    evaluation, so the same batch sizes, but one update per network: an update's shape is
    fixed) and its wall-clock is the row's compile cost; the second, on dynamo's warm
    caches, is measured, as a long run's iterations after its first would be.
    """
    torch._dynamo.reset()  # no row inherits another's compiled code or recompile counts
    watch = DynamoWatch()
    dynamo_log = logging.getLogger("torch._dynamo.convert_frame")
    dynamo_log.addHandler(watch)
    try:
        compile_fit_s = 0.0
        if row.compile_training or row.compile_inference:
            start = time.perf_counter()
            shapes_only = dataclasses.replace(work, updates=1)
            fit(row, shapes_only, device, sampler, seed)
            compile_fit_s = time.perf_counter() - start
        graphs = graphs_compiled()
        logged, warm_up_s = fit(row, work, device, sampler, seed)
        graphs = graphs_compiled() - graphs
    finally:
        dynamo_log.removeHandler(watch)

    def seconds(phase: str) -> float:
        return logged.get(phase_seconds(phase), 0.0)

    phases = seconds("traversal") + seconds("advantage_train") + seconds("strategy_train")
    other = seconds("iteration") - phases - seconds("eval") - warm_up_s
    eval_amortized = seconds("eval") / row.every
    return {
        "traversal_s": seconds("traversal"),
        "advantage_train_s": seconds("advantage_train"),
        "strategy_train_s": seconds("strategy_train"),
        "eval_amortized_s": eval_amortized,
        "other_s": other,
        "iteration_s": phases + eval_amortized + other,
        "eval_s": seconds("eval"),
        "wall_s": seconds("iteration"),
        "compile_warm_up_s": warm_up_s,
        "compile_fit_s": compile_fit_s,
        "policy_network_s": seconds("policy_network"),
        "nodes": logged["traversal/nodes"],
        "nodes_per_s": logged["traversal/nodes_per_s"],
        "mean_batch": logged["inference/mean_batch"],
        "graphs_compiled_measured_fit": float(graphs),
    }, watch.limit_hits


def measure_rows(
    rows: Sequence[Row], work: Work, device: str, sampler: str, seed: int, log: Callable
) -> list[dict]:
    """Every row ``work.rounds`` times, rounds in rotated order; per row its status, the
    figures of each round, and what dynamo gave up on."""
    results = [
        {"key": r.key, "status": unavailable(r, device), "rounds": [], "limit_hits": []}
        for r in rows
    ]
    runnable = [i for i, result in enumerate(results) if result["status"] is None]
    for round_ in range(work.rounds):
        shift = round_ % max(len(runnable), 1)
        for i in runnable[shift:] + runnable[:shift]:
            result = results[i]
            if result["status"] is not None:  # failed in an earlier round
                continue
            start = time.perf_counter()
            try:
                figures, hits = run_row(rows[i], work, device, sampler, seed + round_)
            except Exception as error:  # one row failing must not end the run
                result["status"] = f"failed: {reason(error)}"
                log(f"{device} round {round_ + 1} {rows[i].key}: {result['status']}")
                continue
            figures["round"] = round_
            result["rounds"].append(figures)
            result["limit_hits"] = sorted(set(result["limit_hits"]) | set(hits))
            log(
                f"{device} round {round_ + 1}/{work.rounds} {rows[i].key}: iteration "
                f"{figures['iteration_s']:.2f} s (fit {time.perf_counter() - start:.0f} s)"
            )
    for result in results:
        if result["status"] is None:
            result["status"] = "measured"
    return results


# ---- summaries ---------------------------------------------------------------------------------


def summarize(rows: Sequence[Row], results: list[dict]) -> None:
    """Adds to each measured result its spreads and its per-round ratio to the first row of
    its group (chain: row 1; sweep: the fewest walkers), and the predictions."""
    first_of_group: dict[str, dict] = {}
    for row, result in zip(rows, results, strict=True):
        first_of_group.setdefault(row.group, result)
        result["label"] = row.label
        result["group"] = row.group
        result["predicted_s"] = PREDICTED_S.get(row.key)
        result["predicted_ratio"] = (
            PREDICTED_S[row.key] / PREDICTED_S["today"] if row.key in PREDICTED_S else None
        )
        result["work"] = {
            "preset": row.preset,
            "precision": row.precision,
            "evaluate_every": row.every,
            "walkers": row.walkers,
        }
        if not result["rounds"]:
            result["ratio"] = None
            continue
        keys = [k for k in result["rounds"][0] if k != "round"]
        result["spread"] = {k: spread([r[k] for r in result["rounds"]]) for k in keys}
        base = {r["round"]: r["iteration_s"] for r in first_of_group[row.group]["rounds"]}
        ratios = [
            r["iteration_s"] / base[r["round"]] for r in result["rounds"] if r["round"] in base
        ]
        result["ratio"] = spread(ratios)
    sweep = [
        (row, result) for row, result in zip(rows, results, strict=True) if row.group == "sweep"
    ]
    for (_, previous), (_, result) in itertools.pairwise(sweep):
        gains = paired(previous, result, "nodes_per_s")
        result["gain_over_previous"] = spread(gains)


def paired(a: dict, b: dict, key: str) -> list[float]:
    """b's ``key`` over a's, round by round where both were measured."""
    mine = {r["round"]: r[key] for r in a["rounds"]}
    return [r[key] / mine[r["round"]] for r in b["rounds"] if mine.get(r["round"])]


def largest_paying(rows: Sequence[Row], results: list[dict]) -> dict | None:
    """The most walkers reached by doublings that each gained at least ``PAYS`` nodes/s."""
    sweep = [(row, r) for row, r in zip(rows, results, strict=True) if row.group == "sweep"]
    if not sweep or not sweep[0][1]["rounds"]:
        return None
    best = sweep[0]
    for row, result in sweep[1:]:
        gain = result.get("gain_over_previous")
        if gain is None or gain["median"] < PAYS:
            break
        best = (row, result)
    row, result = best
    return {
        "walkers": row.walkers,
        "mean_batch": result["spread"]["mean_batch"]["median"],
        "nodes_per_s": result["spread"]["nodes_per_s"]["median"],
    }


def quiet_lightning() -> None:
    """Keep the output to the tables: no per-fit banners from Lightning."""
    for name in ("pytorch_lightning", "lightning_fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="smaller work, two rounds")
    size.add_argument("--smoke", action="store_true", help="seconds of work (the test's)")
    parser.add_argument(
        "--device",
        nargs="+",
        choices=("cpu", "cuda"),
        default=["cpu", "cuda"],
        help="devices to measure; CUDA rows say why where there is none",
    )
    parser.add_argument(
        "--sampler",
        choices=["default", *sorted(samplers())],
        default="default",
        help="traversal sampler (default: DeepCFR's default)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--rows", nargs="+", help="measure only these row keys")
    parser.add_argument("--rounds", type=int, help="override the rounds of the work preset")
    parser.add_argument("--traversals", type=int, help="per player (override)")
    parser.add_argument("--updates", type=int, help="per network (override)")
    parser.add_argument("--games", type=int, help="per evaluation match (override)")
    parser.add_argument("--no-forward", action="store_true", help="skip the micro-benchmark")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--from-json", type=argparse.FileType(), help="print the tables of a saved --json run"
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the figures as JSON")
    output.add_argument("--markdown", action="store_true", help="print markdown tables")
    args = parser.parse_args()

    if args.from_json:
        print(report(json.load(args.from_json), args.markdown))
        return
    work = WORK["smoke" if args.smoke else "quick" if args.quick else "full"]
    overrides = {
        "rounds": args.rounds,
        "traversals": args.traversals,
        "updates": args.updates,
        "games": args.games,
    }
    for name, value in overrides.items():
        if value is not None and value < 1:
            parser.error(f"--{name} {value}: expected at least 1")
    work = dataclasses.replace(work, **{k: v for k, v in overrides.items() if v is not None})
    rows = (*CHAIN, *EXTRAS, *sweep_rows(work))
    keys = [row.key for row in rows]
    unknown = sorted(set(args.rows or ()) - set(keys))
    if unknown:
        parser.error(f"--rows {' '.join(unknown)}: unknown; expected some of {' '.join(keys)}")
    torch.set_num_threads(args.threads)
    quiet_lightning()

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    start = time.perf_counter()
    setup = {
        "work": dataclasses.asdict(work),
        "sampler": args.sampler if args.sampler != "default" else f"{default_sampler()} (default)",
        "threads": args.threads,
        "cpu": cpu_name(),
        "torch": torch.__version__,
        "commit": git_commit(),
        "load_before": load_average(),
    }
    devices = {}
    for device in args.device:
        selected = [r for r in rows if args.rows is None or r.key in args.rows]
        results = measure_rows(selected, work, device, args.sampler, args.seed, log)
        # Rows left out by --rows keep their place in the table, with a status.
        by_key = {r["key"]: r for r in results}
        left_out = {"status": "not measured (not selected)", "rounds": [], "limit_hits": []}
        results = [by_key.get(r.key) or {"key": r.key, **left_out} for r in rows]
        summarize(rows, results)
        forward = (
            {"status": "not measured (--no-forward)"}
            if args.no_forward
            else forward_benchmark(work, device, log)
        )
        devices[device] = {
            "rows": results,
            "largest_paying": largest_paying(rows, results),
            "forward": forward,
        }
    setup["load_after"] = load_average()
    setup["run_minutes"] = (time.perf_counter() - start) / 60
    figures = {"setup": setup, "predicted_s": PREDICTED_S, "devices": devices}
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        print(report(figures, args.markdown))


if __name__ == "__main__":
    main()
