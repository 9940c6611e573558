"""The ``search`` agent kind: ``search:BASE[:KEY=VALUE]...`` searches over any base agent.

The base is any agent spec, written with its own colons (``search:best``,
``search:ckpt:runs/x/last.ckpt:greedy``, ``search:heuristic:cautious:deny_weight=0.2``). The
spec parser hands a kind its positional arguments and its ``KEY=VALUE`` options; this kind
takes the options it knows (:data:`SEARCH_OPTIONS`) and gives every other argument and option
back to the base, in order, so a base's own options keep working (option order never
matters to a kind). ``noisy=EPS``, which the parser handles for every kind, makes the
*search* noisy.

The base is built by :func:`~lostcities_cfr.agents.agent_from_spec` like any other agent, so
``search:ckpt:...`` loads its checkpoint through the training layer's ``ckpt`` kind; a
checkpoint agent carries the value network its run trained (``state_value``: PPO's value
network, an ESCHER run's history value network), which ``depth`` uses.
"""

from __future__ import annotations

from lostcities_cfr.agents.base import Agent
from lostcities_cfr.agents.specs import _number, agent_from_spec, register_agent_kind
from lostcities_cfr.errors import AgentSpecError
from lostcities_cfr.search.agent import DEFAULT_MAX_DECK, DEFAULT_WORLDS, DEFAULT_Z, SearchAgent
from lostcities_cfr.search.belief import load_belief
from lostcities_cfr.search.rollouts import Rollouts

SEARCH_USAGE = (
    "search:BASE[:worlds=N][:top=K|all][:z=X][:max_deck=N|all][:depth=N|full][:belief=PATH]..."
)
SEARCH_HELP = (
    "BASE (any spec) with a search: rollouts of BASE over sampled worlds value its move and "
    "the alternatives; plays an alternative where it beats BASE's move (docs/search.md)"
)
SEARCH_OPTIONS = {
    "worlds": "worlds dealt per round of successive halving (default 64)",
    "depth": "decisions a rollout plays before the base's value network values it; "
    "full plays the round out (default: full)",
    "top": "candidate actions, the base policy's most probable (default 4 where the base "
    "offers its probabilities, every legal action otherwise)",
    "margin": "points a challenger must gain over the base's own action (default 0)",
    "z": "and standard errors of the paired differences (default 1)",
    "max_deck": "search only while the deck holds at most this many cards (default 20; "
    "all: always)",
    "utility": "points (score difference, default) or wins (+1, 0, -1; full rollouts only)",
    "chunk": "rollouts played in one lockstep batch (default 1024)",
    "belief": "PATH of a learned belief over the opponent's hand that weighs the worlds "
    "(scripts/tools/train_belief.py makes one; default: uniform worlds)",
}
# candidates where the base offers its probabilities (SearchAgent's own default is every
# legal action, which any base allows)
DEFAULT_TOP = 4
# the rollout policy's seed, apart from the worlds' (the search's own seed)
_BASE_SEED_OFFSET = 7919


def search_agent(args: list[str], options: dict[str, str], seed: int | None) -> Agent:
    """The ``search`` kind's factory (module docstring).

    Raises:
        AgentSpecError: no base, a nested search, a bad budget, or ``depth`` over a base
            without a value network.
    """
    own = {key: options.pop(key) for key in list(options) if key in SEARCH_OPTIONS}
    base_spec = ":".join([*args, *(f"{key}={value}" for key, value in options.items())])
    if not args:
        raise AgentSpecError(f"a search needs a base agent spec; usage: {SEARCH_USAGE}")
    if args[0] == "search":
        raise AgentSpecError("a search over a search is refused: its cost would multiply")
    base = agent_from_spec(base_spec, seed=None if seed is None else seed + _BASE_SEED_OFFSET)
    worlds = _positive(own.get("worlds", str(DEFAULT_WORLDS)), "worlds")
    chunk = _positive(own.get("chunk", "1024"), "chunk")
    offers_policy = callable(getattr(base, "policy", None))
    top = DEFAULT_TOP if offers_policy else None
    if "top" in own:
        top = None if own["top"] == "all" else _positive(own["top"], "top")
    depth_text = own.get("depth", "full")
    depth = None if depth_text == "full" else _positive(depth_text, "depth", minimum=0)
    value = getattr(base, "state_value", None)
    if depth is not None and value is None:
        raise AgentSpecError(
            f"depth={depth} cuts rollouts with the base's value network, and {base_spec!r} has "
            "none (a PPO or ESCHER checkpoint has one); use depth=full"
        )
    margin = _number(own.get("margin", "0"), "margin", float)
    z = _number(own.get("z", str(DEFAULT_Z)), "z", float)
    utility = own.get("utility", "points")
    if utility not in ("points", "wins"):
        raise AgentSpecError(f"utility={utility!r}; expected points or wins")
    max_deck_text = own.get("max_deck", str(DEFAULT_MAX_DECK))
    max_deck = None if max_deck_text == "all" else _positive(max_deck_text, "max_deck", 0)
    belief = load_belief(own["belief"]) if "belief" in own else None
    try:
        rollout_seed = None if seed is None else seed + 2 * _BASE_SEED_OFFSET
        rollouts = Rollouts(base, value, depth, chunk, utility == "wins", rollout_seed)
        return SearchAgent(rollouts, worlds, top, margin, z, max_deck, seed, belief=belief)
    except ValueError as error:
        raise AgentSpecError(str(error)) from None


def _positive(text: str, key: str, minimum: int = 1) -> int:
    value = _number(text, key, int)
    if value < minimum:
        raise AgentSpecError(f"{key}={text} must be an int >= {minimum}")
    return value


register_agent_kind("search", search_agent, SEARCH_USAGE, SEARCH_HELP)
