"""``python -m lostcities_cfr sweep``: a config over seeds and settings, as one Optuna study.

Every trial is a ``fit`` of the config with its seed and settings, in a process and a run
folder of its own (``OUT/trials/N``, loggers included), ``--jobs`` at a time on one thread
each. The study is stored in ``OUT/study.db`` (SQLite), or in any database Optuna accepts
(``--storage``), so that sweep processes on several machines share its trials. Rerunning
the same command resumes a killed sweep: the trials that were running are run again, the
finished ones never. ``report OUT`` gives the figures over seeds (docs/sweeps.md).

    python -m lostcities_cfr sweep --config configs/quickstart.yaml --seeds 5 --jobs 2
    python -m lostcities_cfr sweep --config configs/kuhn_sdcfr.yaml --seeds 5 \\
        --set model.predictive=true,false
    python -m lostcities_cfr sweep --config configs/leduc_sdcfr.yaml --trials 20 \\
        --search model.learning_rate=0.0003:0.01:log --metric nash_conv

Arguments the sweep does not know are passed to every trial's ``fit``
(``--trainer.max_epochs 50``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from lostcities_cfr.errors import ConfigError
from lostcities_cfr.sweeps import study as studies
from lostcities_cfr.sweeps.runner import SweepRunner, check_fit_args
from lostcities_cfr.sweeps.spec import SweepSpec, parse_grid, parse_search, parse_seeds

SWEEP_FILE = "sweep.json"  # in the sweep's folder: where its study lives, for report


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lostcities_cfr sweep",
        description="Run a fit config over seeds and settings as one Optuna study; any "
        "argument not listed here goes to every trial's fit.",
    )
    parser.add_argument(
        "--config", action="append", required=True, help="a fit config (repeatable, in order)"
    )
    parser.add_argument(
        "--seeds", default=None, help="a count N (seeds 0..N-1) or a list 0,3,7 (the config's)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="a grid over a fit argument (repeatable: every combination runs every seed)",
    )
    parser.add_argument(
        "--search",
        action="append",
        default=[],
        metavar="NAME=LOW:HIGH[:log]",
        help="a range for Optuna's sampler (repeatable; with --trials and --metric)",
    )
    parser.add_argument("--trials", type=int, default=None, help="settings a search tries")
    parser.add_argument(
        "--metric",
        default=None,
        help="the logged metric a trial's result is, its last value (nash_conv where the "
        "run logs it, else its final evaluation's win rate)",
    )
    parser.add_argument(
        "--direction",
        choices=("maximize", "minimize"),
        default=None,
        help="whether the metric is better high (by its name: nash_conv, exploitability and "
        "losses low, the rest high)",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="the sweep's folder (runs/sweeps/CONFIG)"
    )
    parser.add_argument(
        "--storage",
        default=None,
        help="a database URL Optuna accepts, shared by workers on several machines "
        "(sqlite:///OUT/study.db)",
    )
    parser.add_argument("--name", default=None, help="the study's name (the folder's name)")
    parser.add_argument("--jobs", type=int, default=1, help="trials at once on this machine (1)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads a trial (1)")
    parser.add_argument(
        "--prune-after",
        type=int,
        default=3,
        help="iterations a search trial runs before the median pruner may stop it (3)",
    )
    parser.add_argument(
        "--status-every", type=float, default=60.0, help="seconds between status lines (60)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args, overrides = parser().parse_known_args(argv)
    try:
        spec, out, name, url = _prepare(args, overrides)
        held = studies.held_spec(name, url)  # an unreachable database is named here
        if held is None or held.grows_to(spec):  # the same sweep again was checked already
            check_fit_args(spec)
        study = studies.open_study(spec, name, url)
    except ConfigError as error:
        print(f"python -m lostcities_cfr sweep: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    out.mkdir(parents=True, exist_ok=True)
    # null: study.db beside this file, so that the folder can be moved or copied whole
    storage = None if url == studies.storage_url(str(out)) else url
    (out / SWEEP_FILE).write_text(json.dumps({"study": name, "storage": storage}, indent=2) + "\n")
    runner = SweepRunner(
        study, spec, out, args.jobs, args.threads, args.prune_after, status_every=args.status_every
    )
    print(f"sweep {name!r} in {url}: {runner.status()}")
    try:
        runner.run()
    except KeyboardInterrupt:
        print("sweep interrupted: rerun the same command to go on", file=sys.stderr)
        raise SystemExit(130) from None
    print(runner.status())
    if runner.stop_reason:
        print(f"python -m lostcities_cfr sweep: error: {runner.stop_reason}", file=sys.stderr)
        raise SystemExit(2)
    print(f"figures over seeds: python -m lostcities_cfr report {out}")


def _prepare(args: argparse.Namespace, overrides: list[str]) -> tuple[SweepSpec, Path, str, str]:
    for flag, value in (("--jobs", args.jobs), ("--threads", args.threads)):
        if value < 1:
            raise ConfigError(f"{flag} {value}: at least 1")
    unknown = [token for token in overrides if token.startswith("--") and "." not in token]
    if unknown:
        raise ConfigError(
            f"{unknown[0]}: not an argument of sweep (see --help), nor a dotted fit argument"
        )
    spec = SweepSpec(
        configs=args.config,
        overrides=overrides,
        seeds=parse_seeds(args.seeds) if args.seeds else [_config_seed(args.config)],
        grid=parse_grid(args.set),
        search=parse_search(args.search),
        trials=args.trials,
        metric=args.metric,
        direction=args.direction,
    )
    out = args.out or Path("runs/sweeps") / Path(args.config[0]).stem
    name = args.name or out.resolve().name
    url = args.storage or studies.storage_url(str(out))
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    return spec, out, name, url


def _config_seed(configs: list[str]) -> int:
    """The seed the configs give (the last that names ``seed_everything``), else 0."""
    import yaml

    seed = 0
    for config in configs:
        try:
            loaded = yaml.safe_load(Path(config).read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue  # fit's own check names the file and its fault
        if isinstance(loaded, dict) and isinstance(loaded.get("seed_everything"), int):
            seed = loaded["seed_everything"]
    return seed
