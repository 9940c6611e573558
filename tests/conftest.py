"""Shared test setup: no test ever talks to W&B, and hypothesis never times a slow example out."""

import os

from hypothesis import settings

os.environ.setdefault("WANDB_MODE", "disabled")

# Examples play whole games; their time varies too much on a loaded CI machine for deadlines.
settings.register_profile("default", deadline=None)
settings.load_profile("default")
