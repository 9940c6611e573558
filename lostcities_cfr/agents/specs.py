"""Agent spec strings: the one place that turns ``heuristic:cautious`` into an agent.

Grammar: ``KIND[:ARG]...[:KEY=VALUE]...``. Arguments are positional; options
(``KEY=VALUE`` with an identifier as key) may come in any order after the kind.
The option ``noisy=EPS`` works on every kind and wraps the agent in
:class:`~lostcities_cfr.agents.basic.NoisyAgent`. The kinds (``docs/agents.md``
lists them with examples):

=====================  ==========================================================
``random``             uniform over legal actions
``discard-only``       always discards, always draws from the deck
``heuristic[:PRESET]`` rule-based player; presets ``balanced`` (default),
                       ``cautious``, ``aggressive``; ``KEY=VALUE`` overrides any
                       :class:`~lostcities_cfr.agents.heuristic.HeuristicParams` field
``ckpt:PATH``          a checkpoint's average-strategy network; ``:current`` plays
                       the regret-matching policy of its advantage networks;
                       ``:greedy`` plays the most probable action instead of sampling
``py:MODULE:NAME``     ``NAME()`` from an importable module, for agents written
                       outside this package
=====================  ==========================================================

Other layers add kinds with :func:`register_agent_kind`. ``ckpt`` is one of them:
checkpoint loading belongs to the training layer, which sits above this one and
registers the kind when it is imported (``lostcities_cfr.training.checkpoint``).
This layer never imports training; the top-level package registers a stand-in
that imports it on the first ``ckpt:`` spec.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass

from lostcities_cfr.agents.base import Agent
from lostcities_cfr.agents.basic import DiscardOnlyAgent, NoisyAgent, RandomAgent
from lostcities_cfr.agents.heuristic import HEURISTIC_PRESETS, HeuristicAgent, HeuristicParams
from lostcities_cfr.errors import AgentSpecError

AgentFactory = Callable[[list[str], dict[str, str], int | None], Agent]
"""``factory(args, options, seed) -> Agent``; raises AgentSpecError on bad args or options."""

# The ``ckpt`` kind's words: the training layer registers it (agents never import training),
# and the top-level package registers a stand-in until then.
CKPT_USAGE = "ckpt:PATH[:average|:current|:sdcfr][:greedy]"
CKPT_HELP = (
    "a checkpoint's deployed policy (DeepCFR: its run's `deploy`, or the policy named; "
    "PPO: its policy network)"
)
BEST_USAGE = "best[:greedy]"
BEST_HELP = "the strongest agent shipped with the package (docs/agents.md)"

_OPTION = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


@dataclass(frozen=True)
class AgentKind:
    """A registered kind: how to build it and how to describe it in ``--help``."""

    factory: AgentFactory
    usage: str
    help: str


_KINDS: dict[str, AgentKind] = {}


def register_agent_kind(name: str, factory: AgentFactory, usage: str, help: str) -> None:
    """Make ``NAME[:...]`` specs build agents with ``factory`` (replaces an existing kind)."""
    if not re.fullmatch(r"[a-z][a-z0-9-]*", name):
        raise ValueError(f"agent kind {name!r} must be lowercase letters, digits and '-'")
    _KINDS[name] = AgentKind(factory, usage, help)


def agent_kinds() -> dict[str, AgentKind]:
    """The registered kinds by name."""
    return dict(_KINDS)


def describe_agent_specs() -> str:
    """The spec grammar and kinds, for command-line help."""
    lines = ["agent specs (KIND[:ARG]...[:KEY=VALUE]...; noisy=EPS works on every kind):"]
    width = max(len(kind.usage) for kind in _KINDS.values())
    lines += [f"  {kind.usage:<{width}}  {kind.help}" for kind in _KINDS.values()]
    return "\n".join(lines)


def agent_from_spec(spec: str, seed: int | None = None) -> Agent:
    """The agent a spec string names; its ``name`` is the spec.

    Args:
        spec: e.g. ``random``, ``heuristic:cautious``, ``heuristic:balanced:noisy=0.15``,
            ``ckpt:runs/x/last.ckpt:current``.
        seed: seeds the agent's randomness (``None``: fresh entropy).

    Raises:
        AgentSpecError: the spec names no known kind or its arguments do not fit.
    """
    spec = spec.strip()
    kind_name, *tokens = spec.split(":")
    if kind_name not in _KINDS:
        raise AgentSpecError(
            f"agent spec {spec!r}: unknown kind {kind_name!r}; expected one of: "
            f"{', '.join(_KINDS)} (e.g. 'heuristic:cautious')"
        )
    args: list[str] = []
    options: dict[str, str] = {}
    for token in tokens:
        match = _OPTION.match(token)
        if match:
            options[match[1]] = match[2]
        else:
            args.append(token)
    noisy = options.pop("noisy", None)
    try:
        agent = _KINDS[kind_name].factory(args, options, seed)
        if noisy is not None:
            epsilon = _number(noisy, "noisy", float)
            if not 0.0 <= epsilon <= 1.0:
                raise AgentSpecError(f"noisy={noisy} must lie in [0, 1]")
            # an offset keeps the coin independent of the wrapped agent's own draws
            agent = NoisyAgent(agent, epsilon, seed=None if seed is None else seed + 2**31)
    except AgentSpecError as error:
        raise AgentSpecError(f"agent spec {spec!r}: {error}") from None
    agent.name = spec
    return agent


def expect_arguments(args: list[str], options: dict[str, str], max_args: int, usage: str) -> None:
    """Refuse more than ``max_args`` arguments, or any option left over, quoting ``usage``.

    Raises:
        AgentSpecError: names the unexpected arguments or options.
    """
    if len(args) > max_args:
        raise AgentSpecError(
            f"unexpected argument(s) {':'.join(args[max_args:])!r}; usage: {usage}"
        )
    if options:
        raise AgentSpecError(f"unknown option(s) {', '.join(options)}; usage: {usage}")


def _number(text: str, key: str, kind: type) -> float | int:
    try:
        return kind(text)
    except ValueError:
        expected = "an int" if kind is int else "a number"
        raise AgentSpecError(f"{key}={text!r} is not {expected}") from None


# ---- built-in kinds ------------------------------------------------------------------------


def _random(args: list[str], options: dict[str, str], seed: int | None) -> Agent:
    expect_arguments(args, options, 0, "random")
    return RandomAgent(seed)


def _discard_only(args: list[str], options: dict[str, str], seed: int | None) -> Agent:
    expect_arguments(args, options, 0, "discard-only")
    return DiscardOnlyAgent(seed)


def _heuristic(args: list[str], options: dict[str, str], seed: int | None) -> Agent:
    expect_arguments(args, {}, 1, "heuristic[:PRESET][:FIELD=VALUE]...")
    preset = args[0] if args else "balanced"
    if preset not in HEURISTIC_PRESETS:
        raise AgentSpecError(
            f"unknown heuristic preset {preset!r}; expected one of: {', '.join(HEURISTIC_PRESETS)}"
        )
    if not options:
        return HeuristicAgent(preset)
    types = {f.name: f.type for f in dataclasses.fields(HeuristicParams)}
    overrides = {}
    for key, text in options.items():
        if key not in types:
            raise AgentSpecError(
                f"unknown heuristic parameter {key!r}; expected one of: {', '.join(types)}"
            )
        overrides[key] = _number(text, key, int if types[key] == "int" else float)
    try:
        return HeuristicAgent(dataclasses.replace(HEURISTIC_PRESETS[preset], **overrides))
    except ValueError as error:
        raise AgentSpecError(str(error)) from None


def _python(args: list[str], options: dict[str, str], seed: int | None) -> Agent:
    usage = "py:MODULE:NAME"
    expect_arguments(args, options, 2, usage)
    if len(args) != 2:
        raise AgentSpecError(f"a python agent needs a module and a name; usage: {usage}")
    module_name, attribute = args
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise AgentSpecError(f"cannot import {attribute} from {module_name}: {error}") from None
    if not callable(factory):
        raise AgentSpecError(f"{module_name}.{attribute} is not callable")
    agent = factory()
    if not callable(getattr(agent, "act", None)):
        raise AgentSpecError(f"{module_name}.{attribute}() returned {agent!r}, which has no act()")
    return agent


register_agent_kind("random", _random, "random", "uniform over the legal actions")
register_agent_kind(
    "discard-only", _discard_only, "discard-only", "always discards, draws from the deck"
)
register_agent_kind(
    "heuristic",
    _heuristic,
    "heuristic[:PRESET][:FIELD=VALUE]",
    f"rule-based player; presets {', '.join(HEURISTIC_PRESETS)} (default balanced)",
)
register_agent_kind("py", _python, "py:MODULE:NAME", "NAME() from an importable module")
