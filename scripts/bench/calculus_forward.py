"""The optimization calculus's forward micro-benchmark: the bare networks eager and
``torch.compile``-d at batch 1 to 4096, and where the per-row time stops falling."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import torch
from calculus_rows import PAYS, PRESETS, Work, make_rules, reason, spread

from lostcities_cfr.agents import random_legal_actions
from lostcities_cfr.cfr import NetworkConfig
from lostcities_cfr.game import GameBatch, Rules, feature_size


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
