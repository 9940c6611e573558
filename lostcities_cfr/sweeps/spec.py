"""What a sweep runs: its configs, overrides, seeds, grid or search, and metric.

A :class:`SweepSpec` is stored in the study, so that a restarted sweep, or a worker joining
it from another machine, runs exactly the same trials, and a sweep folder is never reused
for another experiment (:meth:`SweepSpec.differences`). Each trial is a ``fit`` command
(:meth:`SweepSpec.fit_args`) of the spec's configs and overrides plus the trial's own
parameters: its seed and its grid values, or the values Optuna's sampler drew.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from lostcities_cfr.errors import ConfigError

SEED = "seed"  # the parameter every trial has: ``seed_everything``
Direction = Literal["maximize", "minimize"]
# Metrics that are better low; every other metric (win rates, scores) is better high.
LOWER_IS_BETTER = re.compile(r"(nash_conv|exploitability|loss)")
NAME = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")  # a dotted fit argument


@dataclass(frozen=True)
class SearchRange:
    """A range Optuna's sampler draws one parameter from: ``low:high`` or ``low:high:log``."""

    low: float
    high: float
    log: bool = False


@dataclass
class SweepSpec:
    """One sweep: every trial is ``fit --config C... OVERRIDES --seed_everything S
    --NAME VALUE...`` in a run folder of its own.

    Args:
        configs: the ``--config`` files, in order (a callback stack after the experiment).
        overrides: further ``fit`` arguments, the same for every trial.
        seeds: the seeds; in a grid sweep every grid point runs each of them.
        grid: ``--set NAME=V1,V2``: each name's values, as typed (``fit`` parses them).
        search: ``--search NAME=LOW:HIGH[:log]``: ranges Optuna's sampler draws from.
        trials: how many trials a search runs.
        metric: the logged metric a trial's result is (its last value); None: the run's
            exact ``nash_conv`` where it logs one, else its final evaluation's win rate.
        direction: whether a higher metric is better; None: by the metric's name.
        config_digests: each config file's SHA-256, so that a changed file is noticed.
    """

    configs: list[str]
    overrides: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=lambda: [0])
    grid: dict[str, list[str]] = field(default_factory=dict)
    search: dict[str, SearchRange] = field(default_factory=dict)
    trials: int | None = None
    metric: str | None = None
    direction: Direction | None = None
    config_digests: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.configs:
            raise ConfigError("--config: a sweep runs a config; name at least one")
        if not self.seeds:
            raise ConfigError("--seeds: give at least one seed")
        if len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"--seeds {self.seeds}: a seed is listed twice")
        if self.grid and self.search:
            raise ConfigError(
                "--set and --search: a sweep is a grid or a search; search first, then run "
                "the chosen setting over seeds with --set"
            )
        if self.search and len(self.seeds) > 1:
            raise ConfigError(
                f"--seeds {self.seeds} with --search: each search trial runs one seed; give "
                "one, then run the chosen setting over seeds with --set"
            )
        if self.search and not self.trials:
            raise ConfigError("--search needs --trials T: how many settings to try")
        if self.trials and not self.search:
            raise ConfigError(
                f"--trials {self.trials}: a grid runs every seed and grid point; --trials "
                "goes with --search"
            )
        if self.search and self.metric is None:
            raise ConfigError("--search needs --metric NAME: what the sampler optimizes")
        if not self.config_digests:
            self.config_digests = [_digest(path) for path in self.configs]

    @property
    def is_search(self) -> bool:
        return bool(self.search)

    def points(self) -> list[dict[str, Any]]:
        """A grid sweep's trials' parameters: every grid point with every seed, seeds
        innermost (a setting's seeds run together)."""
        names = list(self.grid)
        return [
            {**dict(zip(names, values, strict=True)), SEED: seed}
            for values in itertools.product(*(self.grid[name] for name in names))
            for seed in self.seeds
        ]

    def fit_args(self, params: dict[str, Any]) -> list[str]:
        """The ``fit`` arguments of the trial with ``params`` (its seed and settings), without
        its run folder and threads, which the runner adds."""
        args = [token for config in self.configs for token in ("--config", config)]
        args += self.overrides
        for name, value in params.items():
            flag = "--seed_everything" if name == SEED else f"--{name}"
            args += [flag, _text(value)]
        return args

    def better(self, metric: str) -> Direction:
        """Whether ``metric`` is better high or low: ``direction``, else by its name."""
        if self.direction is not None:
            return self.direction
        return "minimize" if LOWER_IS_BETTER.search(metric) else "maximize"

    def to_dict(self) -> dict[str, Any]:
        spec = asdict(self)
        spec["search"] = {name: asdict(r) for name, r in self.search.items()}
        return spec

    @classmethod
    def from_dict(cls, spec: dict[str, Any]) -> SweepSpec:
        spec = dict(spec)
        spec["search"] = {n: SearchRange(**r) for n, r in spec.get("search", {}).items()}
        return cls(**spec)

    def differences(self, other: SweepSpec) -> list[str]:
        """What differs between two specs, one phrase a field (empty: the same sweep)."""
        mine, theirs = self.to_dict(), other.to_dict()
        return [
            f"{name} {theirs[name]!r} (the sweep's: {mine[name]!r})"
            for name in mine
            if mine[name] != theirs[name]
        ]

    def grows_to(self, other: SweepSpec) -> bool:
        """Whether ``other`` is this grid with more seeds or more grid values, and nothing
        else changed: the same experiment, grown (its points are a superset of these)."""
        if self.is_search or other.is_search or self.grid.keys() != other.grid.keys():
            return False
        mine, theirs = self.to_dict(), other.to_dict()
        if any(mine[k] != theirs[k] for k in mine if k not in ("seeds", "grid")):
            return False
        return set(self.seeds) <= set(other.seeds) and all(
            set(values) <= set(other.grid[name]) for name, values in self.grid.items()
        )


def parse_grid(items: list[str]) -> dict[str, list[str]]:
    """``--set NAME=V1,V2`` items as ``{NAME: [V1, V2]}``; a name given twice is refused."""
    grid: dict[str, list[str]] = {}
    for item in items:
        name, values = _split(item, "--set", "NAME=V1,V2")
        if name in grid:
            raise ConfigError(f"--set {item}: {name} is set twice; list its values once")
        grid[name] = [v.strip() for v in values.split(",")]
        if not all(grid[name]):
            raise ConfigError(f"--set {item}: an empty value; expected NAME=V1,V2,...")
    return grid


def parse_search(items: list[str]) -> dict[str, SearchRange]:
    """``--search NAME=LOW:HIGH[:log]`` items as ranges."""
    search: dict[str, SearchRange] = {}
    for item in items:
        name, text = _split(item, "--search", "NAME=LOW:HIGH[:log]")
        parts = text.split(":")
        log = len(parts) == 3 and parts[2] == "log"
        try:
            if len(parts) not in (2, 3) or (len(parts) == 3 and not log):
                raise ValueError
            low, high = float(parts[0]), float(parts[1])
        except ValueError:
            raise ConfigError(
                f"--search {item}: expected NAME=LOW:HIGH or NAME=LOW:HIGH:log"
            ) from None
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ConfigError(f"--search {item}: LOW must be below HIGH, both finite")
        if log and low <= 0:
            raise ConfigError(f"--search {item}: a log range needs LOW above 0")
        search[name] = SearchRange(low, high, log)
    return search


def parse_seeds(text: str) -> list[int]:
    """``--seeds``: a count ``N`` (seeds 0 to N-1) or a list ``3,5,8`` (one seed: ``4,``)."""
    try:
        if "," in text:
            seeds = [int(seed) for seed in text.split(",") if seed.strip()]
            count = len(seeds)
        else:
            count = int(text)
            seeds = list(range(count))
    except ValueError:
        raise ConfigError(f"--seeds {text}: expected a count (5) or a list (0,1,2)") from None
    if count < 1:
        raise ConfigError(f"--seeds {text}: run at least one seed")
    return seeds


def setting_label(params: dict[str, Any]) -> str:
    """A trial's setting, its seed left out: ``model.learning_rate=0.001`` (``config`` for a
    sweep of seeds alone)."""
    shown = [f"{name}={_text(value)}" for name, value in params.items() if name != SEED]
    return " ".join(shown) or "config"


def _split(item: str, flag: str, form: str) -> tuple[str, str]:
    name, sep, rest = item.partition("=")
    name = name.strip().removeprefix("--")
    if not sep or not NAME.match(name):
        raise ConfigError(f"{flag} {item}: expected {form}, NAME a fit argument such as model.lr")
    if name in ("seed_everything", SEED):
        raise ConfigError(f"{flag} {item}: seeds are given with --seeds")
    return name, rest


def _text(value: Any) -> str:
    # repr keeps a float's every digit (str would too); integers drawn as floats stay floats
    return repr(value) if isinstance(value, float) else str(value)


def _digest(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as error:
        raise ConfigError(f"--config {path}: {error.strerror or error}") from None
