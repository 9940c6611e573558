"""A tiny run as a user would configure it: their network, sampler and callback named by
class path (``my_extensions.py``, importable as this folder is on ``sys.path``), on top of the
training tests' tiny run (``tests/training/tiny_training.py``)."""

from pathlib import Path

from tiny_training import tiny_config

USER_MODEL = {
    "network": {"class_path": "my_extensions.TwoLayerNet", "init_args": {"hidden": 8}},
    "sampler": {"class_path": "my_extensions.OnPolicySampling", "init_args": {"walkers": 16}},
    "final_eval_games": 0,
}


def user_config(run_dir: Path, max_epochs: int = 2) -> dict:
    """A fit config naming the user's classes; tiny rules, a few seconds on one thread."""
    config = tiny_config(run_dir, max_epochs, **USER_MODEL)
    config["trainer"]["callbacks"] = [{"class_path": "my_extensions.NodeCounter"}]
    return config
