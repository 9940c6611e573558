"""A run's logged metrics, read back: the ``metrics.csv`` files Lightning's ``CSVLogger``
writes (every shipped config keeps one beside W&B), merged over a resumed run's starts.

``report``, ``sweep`` and the scripts that draw curves read runs through these two functions.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

METRICS_FILE = "metrics.csv"
VERSION = re.compile(r"^version_(\d+)$")  # CSVLogger's folder of one start of a run


def find_metrics_files(run_dir: Path) -> list[Path]:
    """The metrics files of a run, oldest first: ``RUN_DIR/metrics.csv`` alone, or else the
    newest ``metrics.csv`` below ``run_dir`` with those of its sibling ``version_N`` folders
    (a resumed run logs each start to a version of its own).

    Raises:
        FileNotFoundError: there is none (names the directory and the fix).
    """
    if run_dir.is_file():
        return [run_dir]
    direct = run_dir / METRICS_FILE
    if direct.is_file():
        return [direct]
    found = sorted(run_dir.rglob(METRICS_FILE), key=lambda p: p.stat().st_mtime)
    if not found:
        raise FileNotFoundError(
            f"no {METRICS_FILE} in or below {run_dir}; report reads the CSVLogger's file, so "
            "run with a callback stack from callbacks/ (they keep a CSVLogger) or pass the "
            "folder that holds metrics.csv"
        )
    newest = found[-1]
    if not VERSION.match(newest.parent.name):
        return [newest]
    versions = [
        path
        for path in newest.parent.parent.glob(f"version_*/{METRICS_FILE}")
        if VERSION.match(path.parent.name)
    ]
    return sorted(versions, key=lambda p: int(VERSION.match(p.parent.name)[1]))


def read_metrics(paths: Path | Sequence[Path]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Per-iteration metrics from CSVLogger files, merged in the order given.

    Returns ``(iterations [I], {name: values [I]})``, sorted by iteration; a
    metric missing at an iteration is ``nan``. Rows are keyed by the logged
    ``iteration`` (or ``epoch + 1`` where it is missing); when one iteration
    has several rows, the last value logged wins, so a resumed run's later file
    replaces what an interrupted start logged for the same iteration.
    """
    rows = []
    for path in [paths] if isinstance(paths, Path) else paths:
        with path.open(newline="") as file:
            rows += list(csv.DictReader(file))
    by_iteration: dict[int, dict[str, float]] = {}
    for row in rows:
        values = {key: _number(text) for key, text in row.items() if key is not None}
        iteration = values.get("iteration", math.nan)
        if math.isnan(iteration):
            iteration = values.get("epoch", math.nan) + 1
        if math.isnan(iteration):
            continue
        merged = by_iteration.setdefault(int(iteration), {})
        merged.update({k: v for k, v in values.items() if not math.isnan(v)})
    iterations = np.array(sorted(by_iteration), dtype=np.int64)
    names = sorted({name for values in by_iteration.values() for name in values})
    columns = {
        name: np.array([by_iteration[i].get(name, math.nan) for i in iterations]) for name in names
    }
    return iterations, columns


def _number(text: str | None) -> float:
    try:
        return float(text) if text else math.nan
    except ValueError:
        return math.nan
