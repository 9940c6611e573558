"""Agents from Deep CFR checkpoints (the ``ckpt:PATH[:current][:greedy]`` agent spec).

A checkpoint written by ``fit`` holds the model's hyperparameters and all three networks;
:func:`load_agent` rebuilds the model from them (never its reservoirs, which only training
needs) and returns the agent of :meth:`DeepCFR.agent`. Importing this module registers
the ``ckpt`` agent kind, so the agent layer below never imports training.
"""

from __future__ import annotations

from pathlib import Path

from lostcities_cfr.agents import Agent, expect_arguments, register_agent_kind
from lostcities_cfr.errors import AgentSpecError
from lostcities_cfr.training.module import DeepCFR

CKPT_USAGE = "ckpt:PATH[:current][:greedy]"
CKPT_HELP = "a checkpoint's average strategy (:current = regret matching on its advantage nets)"


def load_model(path: str | Path) -> DeepCFR:
    """The :class:`DeepCFR` saved at ``path``, on the CPU, in eval mode.

    The file is unpickled in full (hyperparameters may hold objects such as a sampler), so
    load only checkpoints you trust.
    """
    model = DeepCFR.load_from_checkpoint(path, map_location="cpu", weights_only=False)
    return model.eval()


def load_agent(
    path: str | Path, policy: str = "average", greedy: bool = False, seed: int | None = None
) -> Agent:
    """The agent playing a checkpoint's ``"average"`` or ``"current"`` strategy.

    Args:
        path: a checkpoint written by ``fit`` (e.g. ``runs/quickstart/checkpoints/last.ckpt``).
        policy: ``"average"`` (the strategy network, Deep CFR's output) or ``"current"``
            (regret matching on the advantage networks).
        greedy: play the most probable action instead of sampling.
        seed: seeds sampling.
    """
    return load_model(path).agent(policy, greedy=greedy, seed=seed)


def checkpoint_agent(args: list[str], options: dict[str, str], seed: int | None) -> Agent:
    """The ``ckpt`` agent kind's factory: ``PATH[:average|:current][:greedy]`` split at ':'.

    Raises:
        AgentSpecError: no path, both policies, an option, or no file at the path.
    """
    usage = "ckpt:PATH[:average|:current][:greedy]"
    flags = {"average", "current", "greedy"}
    # PATH may itself hold ':' (a Windows drive): peel the flags off the end only.
    end = len(args)
    while end > 1 and args[end - 1] in flags:
        end -= 1
    path, chosen = ":".join(args[:end]), set(args[end:])
    expect_arguments([], options, 0, usage)
    if not path:
        raise AgentSpecError(f"a checkpoint spec needs a path; usage: {usage}")
    if {"average", "current"} <= chosen:
        raise AgentSpecError("choose one of :average and :current, not both")
    if not Path(path).is_file():
        raise AgentSpecError(f"no checkpoint file at {path!r}")
    return load_agent(
        path,
        policy="current" if "current" in chosen else "average",
        greedy="greedy" in chosen,
        seed=seed,
    )


register_agent_kind("ckpt", checkpoint_agent, CKPT_USAGE, CKPT_HELP)
