"""Sweeps: one ``fit`` config run over seeds and settings, as one Optuna study.

A sweep is a study (:mod:`optuna`), stored in SQLite under the sweep's folder or in any
database Optuna accepts, so that workers on several machines share it; each seed and grid
point is a trial, run as a ``fit`` in a process and a run folder of its own
(:mod:`~lostcities_cfr.sweeps.runner`). Its figures over seeds, with intervals, are
:mod:`~lostcities_cfr.sweeps.statistics` and :mod:`~lostcities_cfr.sweeps.summary`.
``python -m lostcities_cfr sweep`` and ``report SWEEP_DIR`` are the commands; docs/sweeps.md
says how they are used.
"""

from lostcities_cfr.sweeps.spec import SearchRange, SweepSpec
from lostcities_cfr.sweeps.study import open_study

__all__ = ["SearchRange", "SweepSpec", "open_study"]
