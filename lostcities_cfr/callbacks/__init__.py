"""Lightning callbacks that watch a Deep CFR run: evaluation, timing, compilation, progress,
profiling, checkpoints (the end of a run, the best deployed networks), and the W&B and CSV loggers
and config saving they report through.

None of them is needed for training. Stacks of them live in the top-level
``callbacks/`` folder as YAML that a run adds as a second ``--config``. A callback that
needs the traversal epoch subclasses :class:`TraversalCallback`, which also says what of the
model a callback may rely on.
"""

from lostcities_cfr.callbacks.base import TraversalCallback
from lostcities_cfr.callbacks.best_checkpoint import BestCheckpoint
from lostcities_cfr.callbacks.best_response import BestResponseProbe
from lostcities_cfr.callbacks.compile_toggle import CompileToggle
from lostcities_cfr.callbacks.csv_logger import IterationCSVLogger
from lostcities_cfr.callbacks.evaluation import PeriodicEvaluation
from lostcities_cfr.callbacks.interrupt_guard import InterruptGuard
from lostcities_cfr.callbacks.phase_profiler import PhaseProfiler
from lostcities_cfr.callbacks.phase_timer import PhaseTimer
from lostcities_cfr.callbacks.progress import IterationProgressBar
from lostcities_cfr.callbacks.run_checkpoint import RunCheckpoint
from lostcities_cfr.callbacks.save_config import SaveConfigToLoggers
from lostcities_cfr.callbacks.wandb_logger import IterationWandbLogger

__all__ = [
    "BestCheckpoint",
    "BestResponseProbe",
    "CompileToggle",
    "InterruptGuard",
    "IterationCSVLogger",
    "IterationProgressBar",
    "IterationWandbLogger",
    "PeriodicEvaluation",
    "PhaseProfiler",
    "PhaseTimer",
    "RunCheckpoint",
    "SaveConfigToLoggers",
    "TraversalCallback",
]
