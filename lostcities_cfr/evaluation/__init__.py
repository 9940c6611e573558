"""Evaluation: agents against agents, and what is kept of their games.

``arena.py`` plays two agents in duplicate games on the batched engine and rates the result
with 95% intervals; ``recording.py`` keeps every decision of those games for replays
(``evaluate --record``, the ``serve`` page); ``league.py`` plays every pair of many agents,
and ``ratings.py`` fits their Bradley-Terry ratings. Everything here sits on the agents and
the game, below training and the commands, so both can use it.
"""

from lostcities_cfr.evaluation.arena import EvaluationResult, evaluate
from lostcities_cfr.evaluation.recording import GameRecorder

__all__ = ["EvaluationResult", "GameRecorder", "evaluate"]
