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

    python scripts/calculus.py                 # the full run (about an hour on 2 CPU cores)
    python scripts/calculus.py --quick         # smaller work, two rounds (under 15 minutes)
    python scripts/calculus.py --markdown      # the tables for docs/performance.md
    python scripts/calculus.py --json          # the same figures for machines
    python scripts/calculus.py --from-json run.json --markdown   # a saved run's tables
    python scripts/calculus.py --device cuda   # the CUDA rows only (default: both devices)
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytorch_lightning as pl
import torch
from torch._dynamo.utils import counters

from lostcities_cfr import cfr
from lostcities_cfr.agents import random_legal_actions
from lostcities_cfr.callbacks import CompileToggle, PeriodicEvaluation, PhaseTimer
from lostcities_cfr.cfr import NetworkConfig, Sampler
from lostcities_cfr.game import GameBatch, Rules, feature_size
from lostcities_cfr.inference import InferenceQueue
from lostcities_cfr.training import DeepCFR
from lostcities_cfr.training.metrics import phase_seconds

# The design's predicted iteration seconds on a GPU box, 512x3 at the start (issue 14).
PREDICTED_S = {
    "today": 17.85,
    "batched": 14.0,
    "1024x6": 50.0,
    "dense_eval": 70.0,
    "compile": 45.0,
}
# Evaluation of the callback stacks: every 25 iterations today, every 5 (with ten times
# the games: 1000 against 100) in callbacks/dense_eval.yaml.
EVERY, DENSE_EVERY, DENSE_GAMES_FACTOR = 25, 5, 10
BUFFER_ROWS = 100_000  # reservoir capacity: far more than a scaled-down run writes
PAYS = 1.10  # a doubling of the inference batch pays if it gains at least 10% per second
FORWARD_BATCHES = (1, 64, 256, 1024, 4096)
PRESETS = ("512x3", "1024x6")


@dataclass(frozen=True)
class Row:
    """One configuration: the changes it makes to a fresh classic ``DeepCFR`` run."""

    key: str
    label: str
    preset: str = "1024x6"
    local: bool = False  # batch-1 inference (InferenceQueue(local=True))
    dense: bool = False  # evaluate every 5 iterations, ten times the games
    compile_training: bool = False
    compile_inference: bool = False
    tensorrt: bool = False  # the inference compiles with torch_tensorrt's backend
    precision: str = "32-true"
    walkers: int | None = None  # concurrent traversals; None: all of them at once
    group: str = "chain"  # chain: ratios to row 1; sweep: ratios to the sweep's first row

    @property
    def every(self) -> int:
        return DENSE_EVERY if self.dense else EVERY


CHAIN = (
    Row("today", "today: 512x3, batch-1 inference, eval every 25", "512x3", local=True),
    Row("batched", "+ batched traversal inference", "512x3"),
    Row("1024x6", "+ larger model (1024x6), no compile"),
    Row("dense_eval", "+ dense evaluation (every 5, 10x games)", dense=True),
    Row(
        "compile",
        "+ compile (training) + compiled inference (inductor)",
        dense=True,
        compile_training=True,
        compile_inference=True,
    ),
)
EXTRAS = (
    Row(
        "tensorrt",
        "dense 1024x6 + compile (training) + TensorRT (inference)",
        dense=True,
        compile_training=True,
        compile_inference=True,
        tensorrt=True,
    ),
    Row(
        "compile_inference",
        "dense 1024x6 + compiled inference only",
        dense=True,
        compile_inference=True,
    ),
    Row(
        "compile_training",
        "dense 1024x6 + compiled training only",
        dense=True,
        compile_training=True,
    ),
    Row(
        "compile_512x3",
        "batched 512x3 + compile (training and inference)",
        "512x3",
        compile_training=True,
        compile_inference=True,
    ),
    Row(
        "bf16_mixed",
        "dense 1024x6, precision bf16-mixed (fp32 inference)",
        dense=True,
        precision="bf16-mixed",
    ),
    Row(
        "bf16_true",
        "dense 1024x6, precision bf16-true (bf16 inference)",
        dense=True,
        precision="bf16-true",
    ),
    Row(
        "bf16_mixed_512x3",
        "batched 512x3, precision bf16-mixed (fp32 inference)",
        "512x3",
        precision="bf16-mixed",
    ),
    Row(
        "fp16_mixed",
        "dense 1024x6, precision 16-mixed (fp32 inference)",
        dense=True,
        precision="16-mixed",
    ),
)


@dataclass(frozen=True)
class Work:
    """The fixed work of every row, and how many times each runs."""

    traversals: int  # per player and iteration (and the walkers of the chain's rows)
    updates: int  # per network and iteration
    games: int  # per evaluation match (dense rows: ten times as many)
    rounds: int
    sweep_traversals: int
    sweep_walkers: tuple[int, ...]
    batch_size: int = 1024
    inference_buckets: tuple[int, ...] = (64, 256, 1024, 4096)  # the classic configs'
    rules: str = "classic"  # classic: max_turns 1000, as in configs/classic_*.yaml
    forward_batches: tuple[int, ...] = FORWARD_BATCHES
    forward_seconds: float = 0.5  # per timed block of calls
    forward_repeats: int = 3
    compile_backend: str = "inductor"


WORK = {
    # The classic configs' work over 35 (280 traversals, 512 updates, 100 games; games come
    # in pairs of seats, so 4 and 40 keep the dense stack's factor of ten).
    "full": Work(
        traversals=8,
        updates=15,
        games=4,
        rounds=3,
        sweep_traversals=16,
        sweep_walkers=(2, 4, 8, 16),
    ),
    # Over about 140, two rounds.
    "quick": Work(
        traversals=2,
        updates=4,
        games=2,
        rounds=2,
        sweep_traversals=8,
        sweep_walkers=(2, 8),
        forward_seconds=0.1,
        forward_repeats=2,
    ),
    # Seconds of work, for the test: tiny rules and dynamo without code generation.
    "smoke": Work(
        traversals=2,
        updates=1,
        games=2,
        rounds=1,
        sweep_traversals=2,
        sweep_walkers=(1, 2),
        batch_size=32,
        inference_buckets=(64,),
        rules="tiny",
        forward_batches=(1, 64),
        forward_seconds=0.005,
        forward_repeats=1,
        compile_backend="eager",
    ),
}


def sweep_rows(work: Work) -> tuple[Row, ...]:
    return tuple(
        Row(f"walkers_{w}", f"batched 512x3, {w} walkers", "512x3", walkers=w, group="sweep")
        for w in work.sweep_walkers
    )


def make_rules(name: str) -> Rules:
    return Rules.tiny() if name == "tiny" else dataclasses.replace(Rules.classic(), max_turns=1000)


def samplers() -> dict[str, type[Sampler]]:
    """Every sampler ``lostcities_cfr.cfr`` exports, by class name."""
    classes = (getattr(cfr, name) for name in cfr.__all__)
    return {
        c.__name__: c
        for c in classes
        if isinstance(c, type) and issubclass(c, Sampler) and c is not Sampler
    }


def default_sampler() -> str:
    """The class name of ``DeepCFR``'s default sampler."""
    return type(DeepCFR(network=NetworkConfig(width=1, depth=1)).sampler).__name__


def unavailable(row: Row, device: str) -> str | None:
    """Why ``row`` cannot run on ``device``; None when it can."""
    if device == "cuda" and not torch.cuda.is_available():
        return "not measured (no CUDA device)"
    if row.tensorrt and device != "cuda":
        return "not available (TensorRT runs on CUDA devices only)"
    if row.tensorrt:
        try:
            import torch_tensorrt  # noqa: F401  (registers torch.compile's "tensorrt" backend)
        except Exception as error:  # not installed, or built for another torch or CUDA
            return f"not available (torch_tensorrt does not import: {reason(error)})"
    if row.precision.startswith("16") and device != "cuda":
        return "not measured (fp16 mixed precision is for CUDA; bf16 is the CPU's)"
    return None


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


def reason(error: BaseException) -> str:
    """The error's type and the first line of its message."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:300]


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
def spread(values: Sequence[float]) -> dict[str, float] | None:
    """Median, min and max; None for no values."""
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


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


# ---- forward micro-benchmark -------------------------------------------------------------------
def encoded_rows(rules: Rules, batch: int, device: str) -> torch.Tensor:
    """``batch`` encoded mid-game rows [batch, F] (30 random moves into fresh deals)."""
    games = GameBatch.new(rules, batch, seed=0)
    generator = torch.Generator().manual_seed(0)
    for _ in range(30):
        games.step(random_legal_actions(games.legal_mask(), generator), check=False)
    return games.encode().contiguous().to(device)


def seconds_per_call(forward: Callable, x: torch.Tensor, seconds: float, device: str) -> float:
    """Mean seconds of one call over a block of calls lasting at least ``seconds``."""
    calls, start = 0, time.perf_counter()
    while True:
        forward(x)
        calls += 1
        if device == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / calls


def forward_benchmark(work: Work, device: str, log: Callable) -> dict:
    """Eager and compiled forwards of both presets at every batch size, interleaved."""
    if device == "cuda" and not torch.cuda.is_available():
        return {"status": "not measured (no CUDA device)"}
    rules = make_rules(work.rules)
    features = encoded_rows(rules, max(work.forward_batches), device)
    entries = []
    for preset in PRESETS:
        torch.manual_seed(0)
        net = NetworkConfig.preset(preset).build(feature_size(rules), rules.n_actions)
        net = net.to(device).eval()
        for batch in work.forward_batches:
            x = features[:batch]
            entry = {"preset": preset, "batch": batch, "eager_us": [], "compiled_us": []}
            torch._dynamo.reset()
            compiled = torch.compile(net, dynamic=False, backend=work.compile_backend)
            with torch.inference_mode():
                start = time.perf_counter()
                try:
                    compiled(x)
                    entry["compile_s"] = time.perf_counter() - start
                except Exception as error:  # the entry says why instead
                    entry["compiled_status"] = f"failed: {reason(error)}"
                    compiled = None
                net(x)  # warm-up
                for _ in range(work.forward_repeats):
                    call = seconds_per_call(net, x, work.forward_seconds, device)
                    entry["eager_us"].append(call * 1e6)
                    if compiled is not None:
                        call = seconds_per_call(compiled, x, work.forward_seconds, device)
                        entry["compiled_us"].append(call * 1e6)
            for mode in ("eager", "compiled"):
                calls = entry.pop(f"{mode}_us")
                entry[mode] = {
                    "us_per_call": spread(calls),
                    "us_per_row": spread([c / batch for c in calls]),
                }
            entry.setdefault("compiled_status", "measured")
            entries.append(entry)
            log(f"{device} forward {preset} batch {batch}: {forward_cell(entry)}")
    return {"status": "measured", "entries": entries, "crossover": crossovers(entries)}


def forward_cell(entry: dict) -> str:
    eager, compiled = entry["eager"]["us_per_call"], entry["compiled"]["us_per_call"]
    text = f"eager {eager['median']:.0f} us"
    return text + (f", compiled {compiled['median']:.0f} us" if compiled else "")


def crossovers(entries: list[dict]) -> list[dict]:
    """Per preset and mode, the batch after which the per-row time falls by less than 10%
    at the next batch size: where the forward turns from dispatch-bound to kernel-bound."""
    found = []
    for preset in PRESETS:
        for mode in ("eager", "compiled"):
            points = [
                (e["batch"], e[mode]["us_per_row"]["median"])
                for e in entries
                if e["preset"] == preset and e[mode]["us_per_row"]
            ]
            batch = next(
                (b for (b, t), (_, t_next) in itertools.pairwise(points) if t_next > t / PAYS),
                None,
            )
            if points:
                found.append({"preset": preset, "mode": mode, "batch": batch})
    return found


# ---- output ----------------------------------------------------------------------------------
def cell(s: dict | None, digits: int = 2, scale: float = 1.0) -> str:
    if s is None:
        return "-"
    median = f"{s['median'] * scale:.{digits}f}"
    if s["min"] == s["max"]:
        return median
    return f"{median} ({s['min'] * scale:.{digits}f}-{s['max'] * scale:.{digits}f})"


def render(headers: Sequence[str], lines: Sequence[Sequence[str]], markdown: bool) -> str:
    if markdown:
        rule = ["---"] + ["---:"] * (len(headers) - 1)
        return "\n".join("| " + " | ".join(cells) + " |" for cells in [headers, rule, *lines])
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *lines, strict=True)]
    return "\n".join(
        "  ".join(
            str(c).ljust(w) if i == 0 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )
        for cells in [headers, *lines]
    )


ROW_HEADERS = (
    "row",
    "traversal s",
    "advantage s",
    "strategy s",
    "eval s / every",
    "other s",
    "iteration s",
    "x row 1",
    "predicted s (GPU box)",
    "predicted x row 1",
    "compile fit s",
)
PHASE_KEYS = (
    "traversal_s",
    "advantage_train_s",
    "strategy_train_s",
    "eval_amortized_s",
    "other_s",
    "iteration_s",
)
FELL_BACK, COMPILED_INSIDE = "†", "*"


def row_lines(results: list[dict], group: str) -> list[list[str]]:
    lines = []
    for n, r in enumerate((r for r in results if r["group"] == group), start=1):
        label = f"{n}. {r['label']}" if group == "chain" else r["label"]
        predicted = [
            "-" if r["predicted_s"] is None else f"{r['predicted_s']:g}",
            "-" if r["predicted_ratio"] is None else f"{r['predicted_ratio']:.2f}",
        ]
        if r["status"] != "measured":
            lines.append([label, r["status"], *[""] * 6, *predicted, ""])
            continue
        s = r["spread"]
        if r["limit_hits"]:
            label += f" {FELL_BACK}"
        if s["graphs_compiled_measured_fit"]["max"]:
            label += f" {COMPILED_INSIDE}"
        figures = [cell(s[k]) for k in PHASE_KEYS]
        compile_fit = cell(s["compile_fit_s"], 1) if s["compile_fit_s"]["max"] else "-"
        lines.append([label, *figures, cell(r["ratio"]), *predicted, compile_fit])
    return lines


def footnotes(results: list[dict]) -> list[str]:
    notes = []
    fell_back = sorted({hit for r in results for hit in r["limit_hits"]})
    if fell_back:
        notes.append(
            f"{FELL_BACK} dynamo hit its recompile limit in {', '.join(fell_back)}: the "
            "shapes it had not compiled by then ran eagerly."
        )
    inside = [
        f"{r['key']} {r['spread']['graphs_compiled_measured_fit']['median']:.0f}"
        for r in results
        if r["status"] == "measured" and r["spread"]["graphs_compiled_measured_fit"]["max"]
    ]
    if inside:
        notes.append(
            f"{COMPILED_INSIDE} graphs dynamo still compiled in the measured fit (median; their "
            f"compile time is in the phases): {', '.join(inside)}."
        )
    return notes


def sweep_lines(results: list[dict]) -> list[list[str]]:
    lines = []
    for r in (r for r in results if r["group"] == "sweep"):
        if r["status"] != "measured":
            lines.append([r["label"], r["status"], "", "", ""])
            continue
        s = r["spread"]
        lines.append(
            [
                r["label"],
                cell(s["mean_batch"], 0),
                cell(s["traversal_s"]),
                cell(s["nodes_per_s"], 0),
                cell(r.get("gain_over_previous")),
            ]
        )
    return lines


def forward_lines(forward: dict) -> list[list[str]]:
    lines = []
    for e in forward["entries"]:
        eager, compiled = e["eager"], e["compiled"]
        compiled_cells = (
            [cell(compiled["us_per_call"], 0), cell(compiled["us_per_row"], 2)]
            if compiled["us_per_call"]
            else [e["compiled_status"], ""]
        )
        speedup = (
            f"{eager['us_per_call']['median'] / compiled['us_per_call']['median']:.2f}"
            if compiled["us_per_call"]
            else "-"
        )
        lines.append(
            [
                e["preset"],
                str(e["batch"]),
                cell(eager["us_per_call"], 0),
                cell(eager["us_per_row"], 2),
                *compiled_cells,
                speedup,
            ]
        )
    return lines


def report(figures: dict, markdown: bool) -> str:
    setup = figures["setup"]
    work = setup["work"]
    parts = [
        f"Fixed work per row: {work['traversals']} traversals per player, {work['updates']} "
        f"updates of batch {work['batch_size']} per network, evaluation of both policies "
        f"against random and heuristic with {work['games']} games per match (dense rows: "
        f"{work['games'] * DENSE_GAMES_FACTOR}); {work['rules']} rules, sampler "
        f"{setup['sampler']}, {setup['threads']} torch thread(s). Each row: one-iteration "
        "fits (compile rows: a compile fit, then the measured fit; the toggle's warm-up "
        "forwards are left out of the iteration), "
        f"{work['rounds']} round(s), median (min-max). The run took "
        f"{setup['run_minutes']:.0f} min; load average {setup['load_before']} before, "
        f"{setup['load_after']} after; {setup['cpu']}; torch {setup['torch']}, "
        f"commit {setup['commit']}.",
    ]
    for device, block in figures["devices"].items():
        results = block["rows"]
        parts.append(f"{device.upper()}: the chain and the rows past it")
        parts.append(render(ROW_HEADERS, row_lines(results, "chain"), markdown))
        parts.extend(footnotes(results))
        parts.append(
            f"{device.upper()}: walkers (concurrent traversals, "
            f"{work['sweep_traversals']} per player) against the inference batch"
        )
        parts.append(
            render(
                ("row", "mean batch", "traversal s", "nodes/s", "x previous"),
                sweep_lines(results),
                markdown,
            )
        )
        paying = block["largest_paying"]
        if paying:
            parts.append(
                f"Largest walkers whose doubling still paid ({PAYS:.2f}x nodes/s or more): "
                f"{paying['walkers']} (mean inference batch {paying['mean_batch']:.0f})"
            )
        forward = block["forward"]
        parts.append(f"{device.upper()}: forward micro-benchmark ({setup['threads']} thread(s))")
        if forward["status"] != "measured":
            parts.append(forward["status"])
            continue
        parts.append(
            render(
                (
                    "net",
                    "batch",
                    "eager us/call",
                    "eager us/row",
                    "compiled us/call",
                    "compiled us/row",
                    "eager / compiled",
                ),
                forward_lines(forward),
                markdown,
            )
        )
        parts.append(
            "Per-row time stops falling (next batch size gains < 10%) at: "
            + "; ".join(
                f"{c['preset']} {c['mode']} batch {c['batch'] or 'beyond the largest'}"
                for c in forward["crossover"]
            )
        )
    return "\n\n".join(parts)


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=os.path.dirname(__file__),
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


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
