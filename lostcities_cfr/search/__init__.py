"""Decision-time search over any base agent (``docs/search.md``).

Worlds consistent with what the player to move has seen (:mod:`.worlds`), optionally
weighed by a learned belief over the opponent's hand (:mod:`.belief`), children valued by
rollouts of the base policy cut by a value network (:mod:`.rollouts`), successive halving
over the actions (:mod:`.agent`), and the ``search:BASE`` agent kind (:mod:`.spec`, registered
on import; the package's front door imports it).

**Its layer**: above ``inference`` (its value network forwards go through the inference
queue) and below ``cfr`` and ``training``: search needs only the game, agents, the arena (the
belief's training games) and the queue, and the training layer imports :class:`StateValue`
to hand a checkpoint's value network to the search. A search over a ``ckpt:`` agent gets its model through the ``ckpt`` kind, which
the training layer registers, so this package never imports training.
"""

from lostcities_cfr.search.agent import SearchAgent
from lostcities_cfr.search.rollouts import Rollouts, StateValue
from lostcities_cfr.search.spec import SEARCH_OPTIONS, SEARCH_USAGE, search_agent
from lostcities_cfr.search.worlds import (
    belief_keys,
    deal_world,
    deal_worlds,
    sample_world,
    unseen_cards,
    unseen_counts,
    world_keys,
)

__all__ = [
    "SEARCH_OPTIONS",
    "SEARCH_USAGE",
    "Rollouts",
    "SearchAgent",
    "StateValue",
    "belief_keys",
    "deal_world",
    "deal_worlds",
    "sample_world",
    "search_agent",
    "unseen_cards",
    "unseen_counts",
    "world_keys",
]
