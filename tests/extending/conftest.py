"""A finished tiny run of the user's classes (``extending_config.py``), shared by the tests of a
module."""

import sys
from pathlib import Path

import pytest
import torch
import yaml

# The training tests' tiny runs (tiny_training.py), which these runs build on.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))

from extending_config import user_config

from lostcities_cfr.commands.fit import run


@pytest.fixture(scope="module")
def user_run(tmp_path_factory):
    """``(config path, run folder, cli)`` of a finished two-iteration run of the user's
    classes, made through the command line's entry point."""
    folder = tmp_path_factory.mktemp("user_run")
    config = folder / "config.yaml"
    config.write_text(yaml.safe_dump(user_config(folder / "run")))
    threads = torch.get_num_threads()
    try:
        cli = run("fit", ["--config", str(config)])
    finally:
        torch.set_num_threads(threads)
    return config, folder / "run", cli
