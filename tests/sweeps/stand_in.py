"""Stand-ins for ``fit`` and for a sweep worker, so that the sweep's own logic (claiming,
heartbeats, retries, failures) is tested in seconds rather than in training runs.

``python stand_in.py fit RUN_DIR SEED VALUE LEDGER ITERATIONS SLEEP``: logs ``ITERATIONS``
rows of ``score`` (``SEED * 10 + VALUE``, rising to it) to a CSVLogger-like
``RUN_DIR/csv/version_0/metrics.csv``, ``SLEEP`` seconds apart; writes ``start`` and ``end``
lines to ``LEDGER``; a ``VALUE`` of ``fail`` exits 1 with an error line.

``python stand_in.py worker URL OUT NAME CONFIG SEEDS JOBS LEDGER ITERATIONS SLEEP GRACE``:
one sweep worker over seeds ``0..SEEDS-1`` of the config, running stand-in fits.
"""

import csv
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
POLL_S = 0.2  # the workers look at their trials this often (a sweep's: 1 s)


def fit(run_dir: str, seed: str, value: str, ledger: str, iterations: str, sleep: str) -> None:
    point = f"seed={seed} x={value}"
    with open(ledger, "a") as file:
        file.write(f"start {point} {os.getpid()}\n")
    if value == "fail":
        print("python -m lostcities_cfr fit: error: model.x=fail: not a number", file=sys.stderr)
        raise SystemExit(1)
    path = Path(run_dir) / "csv" / "version_0" / "metrics.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    final = int(seed) * 10 + float(value)
    for i in range(1, int(iterations) + 1):
        with path.open("a", newline="") as file:
            writer = csv.writer(file)
            if i == 1:
                writer.writerow(["iteration", "score"])
            writer.writerow([i, final * i / int(iterations)])
        time.sleep(float(sleep))
    with open(ledger, "a") as file:
        file.write(f"end {point} {os.getpid()}\n")


def command(ledger: Path, iterations: int = 4, sleep: float = 0.05):
    """A :class:`SweepRunner` command running the stand-in fit."""

    def build(spec, params, run_dir, threads):
        value = str(params.get("model.x", 0))
        args = [run_dir, params["seed"], value, ledger, iterations, sleep]
        return [sys.executable, str(HERE), "fit", *map(str, args)]

    return build


def worker(url, out, name, config, seeds, jobs, ledger, iterations, sleep, grace) -> None:
    sys.path.insert(0, str(HERE.parents[2]))
    from lostcities_cfr.sweeps.runner import SweepRunner
    from lostcities_cfr.sweeps.spec import SweepSpec
    from lostcities_cfr.sweeps.study import open_study

    spec = SweepSpec(configs=[config], seeds=list(range(int(seeds))), metric="score")
    study = open_study(spec, name, url, grace_s=float(grace))
    runner = SweepRunner(
        study,
        spec,
        Path(out),
        jobs=int(jobs),
        command=command(Path(ledger), int(iterations), float(sleep)),
    )
    runner.run()


if __name__ == "__main__":
    {"fit": fit, "worker": worker}[sys.argv[1]](*sys.argv[2:])
