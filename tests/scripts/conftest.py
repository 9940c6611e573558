"""Scripts under ``scripts/bench`` and ``scripts/tools`` are not a package: tests load them by
path, as ``python scripts/<folder>/<name>.py`` runs them (their folder first on sys.path)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPTS = Path(__file__).parents[2] / "scripts"
FOLDERS = ("bench", "tools")


def script_path(name: str) -> Path:
    """``scripts/bench/<name>.py`` or ``scripts/tools/<name>.py``."""
    (path,) = [p for folder in FOLDERS if (p := SCRIPTS / folder / f"{name}.py").exists()]
    return path


@pytest.fixture
def load_script(monkeypatch):
    """``load_script(name)``: the script ``name`` (in either folder) as a module."""

    def load(name: str) -> ModuleType:
        path = script_path(name)
        monkeypatch.syspath_prepend(str(path.parent))
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, module)  # dataclasses look it up there
        spec.loader.exec_module(module)
        return module

    return load
