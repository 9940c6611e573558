"""The optimization calculus's rows: each configuration it measures, the fixed work every
row does, and what a row needs to run (``calculus.py`` measures them)."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from lostcities_cfr import cfr
from lostcities_cfr.cfr import NetworkConfig, Sampler
from lostcities_cfr.game import Rules
from lostcities_cfr.training import DeepCFR

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


def reason(error: BaseException) -> str:
    """The error's type and the first line of its message."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:300]


def spread(values: Sequence[float]) -> dict[str, float] | None:
    """Median, min and max; None for no values."""
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


# The table's marks on a compile row: dynamo fell back to eager somewhere (its recompile
# limit), or still compiled graphs inside the measured fit.
FELL_BACK, COMPILED_INSIDE = "†", "*"
