"""Each callback stack of ``callbacks/`` runs a tiny experiment through the real CLI."""

import csv
from pathlib import Path

import pytest
import yaml
from tiny_runs import DESIGN_METRICS, EVAL_SUFFIXES, tiny_cli_model

from lostcities_cfr.commands.fit import run

STACKS = Path(__file__).parents[2] / "callbacks"
TINY = {
    "trainer": {"max_epochs": 2, "enable_model_summary": False},
    "model": tiny_cli_model(),
}


def fit_with_stack(tmp_path: Path, stack: Path) -> Path:
    """Fit TINY with ``stack`` as the second config; the folder holding metrics.csv."""
    experiment = dict(TINY, trainer=dict(TINY["trainer"], default_root_dir=str(tmp_path)))
    # CSV only: a W&B run per stack would cost seconds each (test_wandb_logging covers it).
    experiment["trainer"]["logger"] = [
        {
            "class_path": "pytorch_lightning.loggers.CSVLogger",
            "init_args": {"save_dir": str(tmp_path)},
        }
    ]
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(experiment))
    run("fit", ["--config", str(tmp_path / "tiny.yaml"), "--config", str(stack)])
    (metrics,) = tmp_path.glob("**/metrics.csv")
    return metrics.parent


def logged_names(log_dir: Path) -> list[dict[str, str]]:
    with open(log_dir / "metrics.csv", newline="") as file:
        return [{k: v for k, v in row.items() if v} for row in csv.DictReader(file)]


@pytest.mark.parametrize("name", ["default", "dense_eval", "profile"])
def test_a_tiny_run_with_the_stack_logs_the_design_page_metrics(tmp_path, name):
    log_dir = fit_with_stack(tmp_path, STACKS / f"{name}.yaml")
    rows = logged_names(log_dir)
    assert [row["iteration"] for row in rows] == ["1.0", "2.0"]
    for row in rows:
        assert not [m for m in DESIGN_METRICS if m not in row]
    last = rows[-1]  # every stack evaluates at the last iteration
    for policy in ("average", "current"):
        for opponent in ("random", "heuristic"):
            for suffix in EVAL_SUFFIXES:
                assert f"eval/{policy}/{opponent}/{suffix}" in last
    if name == "profile":
        assert (log_dir / "profile" / "iteration_2.txt").exists()
        assert (log_dir / "fit-phases.txt").exists()


def test_the_compile_stack_compiles_from_iteration_two(tmp_path):
    stack = yaml.safe_load((STACKS / "compile.yaml").read_text())
    (toggle,) = [c for c in stack["trainer"]["callbacks"] if c["class_path"].endswith("Toggle")]
    toggle["init_args"]["backend"] = "eager"  # traces only: the stack's shape, in seconds
    (tmp_path / "compile.yaml").write_text(yaml.safe_dump(stack))
    rows = logged_names(fit_with_stack(tmp_path, tmp_path / "compile.yaml"))
    assert [row["compile/inference"] for row in rows] == ["0.0", "1.0"]
    assert [row["compile/training"] for row in rows] == ["0.0", "1.0"]
    assert "compile/seconds" in rows[1]
    assert not [m for m in DESIGN_METRICS if m not in rows[1]]
