"""Scripts under ``scripts/`` are not a package: tests load them by path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPTS = Path(__file__).parents[2] / "scripts"


@pytest.fixture
def load_script(monkeypatch):
    """``load_script(name)``: ``scripts/<name>.py`` as a module."""

    # as `python scripts/<name>.py` has it: the scripts' folder first on sys.path
    monkeypatch.syspath_prepend(str(SCRIPTS))

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, module)  # dataclasses look it up there
        spec.loader.exec_module(module)
        return module

    return load
