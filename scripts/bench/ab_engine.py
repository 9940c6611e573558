"""The batched engine of this checkout against the one of a git revision, side by side.

Loads ``lostcities_cfr/game/batched.py`` as it was at ``--base`` next to the current
one and times both in one process, alternating which goes first at every step, so
that the machine's drift (up to 2x between minutes here) hits both alike:

- random play at ``--batch`` (``legal_mask`` + ``random_legal_actions`` + ``step``),
  both engines with the sampler of ``lostcities_cfr.agents``, fresh games every 80 steps;
- ``encode()`` per row at B = 1024 in mid-game positions (the same games in both).

Prints medians over ``--rounds`` and the current/base ratios. The base module imports
the rest of the package from this checkout, so it works for revisions whose engine
shares the current rules, packing and encoding modules.

    python scripts/bench/ab_engine.py --base ffc0c72 [--batch 8192] [--rounds 8]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import torch

from lostcities_cfr.agents import random_legal_actions
from lostcities_cfr.game import Rules
from lostcities_cfr.game import batched as current

ENGINE = "lostcities_cfr/game/batched.py"
STEPS = 80  # every game of a fresh batch is still running after 80 random actions


def engine_at(revision: str) -> ModuleType:
    root = Path(__file__).resolve().parents[2]
    source = subprocess.run(
        ["git", "show", f"{revision}:{ENGINE}"], cwd=root, check=True, capture_output=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "base_batched.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location("base_batched", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["base_batched"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def random_play_round(engines: dict[str, ModuleType], rules: Rules, B: int, seed: int) -> dict:
    """Actions/s of each engine over STEPS interleaved random-play steps."""
    games = {name: m.GameBatch.new(rules, B, seed=seed) for name, m in engines.items()}
    generators = {name: torch.Generator().manual_seed(seed) for name in engines}
    seconds = dict.fromkeys(engines, 0.0)
    names = list(engines)
    for step in range(STEPS):
        for name in names if step % 2 else names[::-1]:
            batch = games[name]
            start = time.perf_counter()
            legal = batch.legal_mask()
            batch.step(random_legal_actions(legal, generators[name]), check=False)
            seconds[name] += time.perf_counter() - start
    return {name: B * STEPS / s for name, s in seconds.items()}


def encode_round(engines: dict[str, ModuleType], rules: Rules, seed: int) -> dict:
    """µs per row of ``encode()`` at B = 1024, the same mid-game positions in each engine."""
    B, reps = 1024, 60
    games = {name: m.GameBatch.new(rules, B, seed=seed) for name, m in engines.items()}
    generator = torch.Generator().manual_seed(seed)
    for _ in range(30):
        actions = random_legal_actions(next(iter(games.values())).legal_mask(), generator)
        for batch in games.values():
            batch.step(actions, check=False)
    seconds = dict.fromkeys(engines, 0.0)
    names = list(engines)
    for rep in range(reps):
        for name in names if rep % 2 else names[::-1]:
            start = time.perf_counter()
            games[name].encode()
            seconds[name] += time.perf_counter() - start
    return {name: s / reps / B * 1e6 for name, s in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="git revision of the engine to compare")
    parser.add_argument("--batch", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rules = Rules.classic()
    engines = {"base": engine_at(args.base), "current": current}
    plays = [random_play_round(engines, rules, args.batch, seed) for seed in range(args.rounds)]
    encodes = [encode_round(engines, rules, seed) for seed in range(args.rounds)]
    for label, rounds, unit, fmt in (
        (f"random play, B={args.batch}", plays, "actions/s", ",.0f"),
        ("encode, B=1024", encodes, "us/row", ".3f"),
    ):
        base = statistics.median(r["base"] for r in rounds)
        now = statistics.median(r["current"] for r in rounds)
        ratio = statistics.median(r["current"] / r["base"] for r in rounds)
        print(
            f"{label}: base {base:{fmt}} {unit}, current {now:{fmt}} {unit}, "
            f"current/base {ratio:.3f} (median of {args.rounds} rounds, 1 thread)"
        )


if __name__ == "__main__":
    main()
